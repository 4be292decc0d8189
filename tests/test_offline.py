"""Nothing kb does needs the network: build (fresh, with the ONNX export), search,
check, doctor and the app's start all succeed with every connection failing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh index build with the ONNX export, offline


ROOT = Path(__file__).resolve().parent.parent

SITECUSTOMIZE = '''
import os, socket

_LOG = os.environ["KB_NET_LOG"]


def _record(what, target):
    with open(_LOG, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {what} {target!r}\\n")


def _refuse(what):
    def blocked(*args, **kwargs):
        _record(what, args[1:] if what.startswith("socket.") else args)
        raise OSError(101, f"network is unreachable (blocked by the kb offline test: {what})")
    return blocked


socket.socket.connect = _refuse("socket.connect")
socket.socket.connect_ex = _refuse("socket.connect_ex")
socket.socket.sendto = _refuse("socket.sendto")
socket.create_connection = _refuse("create_connection")
socket.getaddrinfo = _refuse("getaddrinfo")
'''

CASE = """---
id: offline-widget-crash
title: The frobnicator overheats
category: config
signatures: ["WidgetError: the frobnicator overheated"]
symptoms: [training stops when the widget gets hot]
sources: [tests]
---

# The frobnicator overheats

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```bash {name=probe timeout=5 doctor=yes}
echo "frobnicator cool"
exit 1
```
"""

APP = """
import asyncio, sys, time
from pathlib import Path
from tui.app import KbApp

async def main():
    app = KbApp([Path(sys.argv[2])], index_dir=Path(sys.argv[1]))
    async with app.run_test(headless=True, size=(120, 40)) as pilot:
        end = time.monotonic() + 240
        while time.monotonic() < end:
            await pilot.pause(0.2)
            if app.engine_error:
                raise SystemExit("engine failed: " + app.engine_error)
            if app.engine is not None and app.engine.dense_ready:
                break
        assert app.engine is not None and app.engine.dense_ready, "the app did not become ready"
        hits = app.engine.search("WidgetError: the frobnicator overheated").results
        assert hits and hits[0].id == "offline-widget-crash", hits
    print("app ok")

asyncio.run(main())
"""


@pytest.fixture
def offline(tmp_path: Path):
    blockdir = tmp_path / "netblock"
    blockdir.mkdir()
    (blockdir / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log = tmp_path / "net.log"
    log.write_text("")
    env = dict(os.environ)
    env.update(PYTHONPATH=os.pathsep.join([str(blockdir), str(ROOT)]), KB_NET_LOG=str(log))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(var, None)  # kb must switch these on itself

    def run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp_path)

    return run, log


def test_the_block_works(offline) -> None:
    run, log = offline
    proc = run([sys.executable, "-c", "import socket\ntry:\n socket.create_connection(('pypi.org', 443), 1)\nexcept OSError as e:\n print('blocked', e)"])
    assert "blocked" in proc.stdout and "create_connection" in log.read_text()


def test_everything_works_with_the_network_down(offline, tmp_path: Path) -> None:
    run, log = offline
    team = tmp_path / "team"
    team.mkdir()
    (team / "offline-widget-crash.md").write_text(CASE, encoding="utf-8")
    index = tmp_path / "fresh-index"  # empty: the build exports the model to ONNX (torch, sentence-transformers)
    kb = [sys.executable, "-m", "kb.cli"]

    built = run(kb + ["index", "--json", "--cases", str(team), "--index-dir", str(index)])
    assert built.returncode == 0, built.stderr[-3000:]
    info = json.loads(built.stdout)
    assert info["dense"] is True, info["dense_reason"]
    assert list((index / "models").glob("*.onnx"))

    found = run(kb + ["search", "--json", "--cases", str(team), "--index-dir", str(index), "WidgetError: the frobnicator overheated at step 9"])
    assert found.returncode == 0, found.stderr[-3000:]
    answer = json.loads(found.stdout)
    assert answer["dense"] is True and answer["results"][0]["id"] == "offline-widget-crash"

    checked = run(kb + ["check", "--only", "--cases", str(team)])
    assert checked.returncode == 0, checked.stdout + checked.stderr

    doctor = run(kb + ["doctor", "--json", "--only", "--cases", str(team)])
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert "offline-widget-crash" in doctor.stdout

    app = run([sys.executable, "-c", APP, str(index), str(team)])
    assert app.returncode == 0 and "app ok" in app.stdout, app.stdout[-2000:] + app.stderr[-3000:]

    attempts = log.read_text()
    assert attempts == "", f"network use attempted:\n{attempts}"
