"""Shared test fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _kb_private_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes history, crash logs or caches into the real home directory."""
    base = tmp_path_factory.mktemp("kbhome")
    monkeypatch.setenv("KB_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("KB_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("KB_CONFIG_DIR", str(base / "config"))


@pytest.fixture(autouse=True)
def _kb_clean_target_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks and needs are judged afresh in each test: no inherited KB_PYTHON/KB_CASES, no cached needs."""
    from kb.checks import needs

    monkeypatch.delenv("KB_PYTHON", raising=False)
    monkeypatch.delenv("KB_CASES", raising=False)
    needs.clear_cache()


CASE_TEMPLATE = """---
id: {id}
title: {title}
category: config
signatures: []
symptoms: [a test case]
sources: [tests]
{params}---

# {title}

## Symptoms
Test.

## Causes
Test.

## Fix
Test.

## Verify
{checks}
"""


@pytest.fixture
def write_case(tmp_path):
    """write_case(id, [(info, code), ...], params={name: default-or-None}) -> the case folder.

    `info` is the fence info string, e.g. "bash {name=x timeout=5}"; the file is
    a valid case per docs/case-format.md, loaded with
    load_cases([folder], include_builtin=False).
    """
    import yaml

    folder = tmp_path / "cases"

    def write(case_id: str, checks: list[tuple[str, str]], params: dict | None = None, title: str | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        params_yaml = ""
        if params:
            spec = {k: ({"description": f"the {k}"} | ({} if v is None else {"default": v})) for k, v in params.items()}
            params_yaml = yaml.safe_dump({"params": spec}, sort_keys=False)
        blocks = "\n".join(f"```{info}\n{code.rstrip()}\n```\n" for info, code in checks)
        text = CASE_TEMPLATE.format(id=case_id, title=title or f"Test case {case_id}", params=params_yaml, checks=blocks)
        (folder / f"{case_id}.md").write_text(text, encoding="utf-8")
        return folder

    return write


def _shared_index_path(config: pytest.Config) -> Path:
    """The session's index folder. xdist workers' base temps sit inside the controller's,
    so every process of one run names the same folder."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if hasattr(config, "workerinput") else base) / "shared-index"


def _start_shared_index_build(config: pytest.Config) -> None:
    """Build the session's index in a background process while the tests that need no
    index run (the build, with the model export, takes about 35 s of one core)."""
    folder = _shared_index_path(config)
    folder.mkdir(parents=True, exist_ok=True)
    home = folder.parent / "shared-index-home"
    env = dict(os.environ, PYTHONPATH=str(ROOT), KB_DATA_DIR=str(home / "data"), KB_CACHE_DIR=str(home / "cache"),
               KB_CONFIG_DIR=str(home / "config"))
    env.pop("KB_CASES", None)
    log = open(folder.parent / "shared-index-build.log", "w", encoding="utf-8")  # the child writes it; closed at exit
    config._kb_index_build = subprocess.Popen(  # type: ignore[attr-defined]
        [sys.executable, "-m", "kb.cli", "index", "--index-dir", str(folder)], env=env, stdout=log, stderr=log, cwd=folder.parent)


def _wants_shared_index(config: pytest.Config) -> bool:
    return "not slow" not in (config.getoption("markexpr", "") or "")


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has set up the base temp
def pytest_configure(config: pytest.Config) -> None:
    # Under xdist the controller collects nothing: it starts the build for its workers.
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None) and _wants_shared_index(config):
        _start_shared_index_build(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    serial = not hasattr(config, "workerinput") and not config.getoption("numprocesses", None)
    if serial and any(SLOW_FIXTURES.intersection(getattr(i, "fixturenames", ())) for i in session.items):
        _start_shared_index_build(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    build = getattr(config, "_kb_index_build", None)
    if build is not None and build.poll() is None:
        build.kill()
        build.wait()


@pytest.fixture(scope="session")
def shared_index_dir(pytestconfig: pytest.Config) -> Path:
    """One index of the built-in cases for the whole session (the first build exports the model).

    Returned once the index is current: opening it waits on kb's build lock while the
    background build (or another xdist worker) holds it, and builds it if nobody started.
    """
    from kb.index.opener import open_index
    from kb.index.store import IndexBusy

    folder = _shared_index_path(pytestconfig)
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 900
    while True:
        try:
            open_index(index_dir=folder, progress=False)
            return folder
        except IndexBusy:
            if time.monotonic() > deadline:
                raise


@pytest.fixture(scope="session")
def engine(shared_index_dir):
    """The real engine over the real built-in cases and the real model, dense loaded."""
    from kb.search.engine import Engine

    eng = Engine.open(index_dir=shared_index_dir, progress=False)
    assert eng.load_dense(), eng.dense_error
    return eng


# Tests that need the real model or a real index of the built-in cases are the
# slow lane; everything else runs in `-m "not slow"` (about a minute).
SLOW_FIXTURES = {"engine", "shared_index_dir"}


# Tests that mostly wait (a local Ray cluster's node timeout, an offline build of their
# own) start first, so the waiting overlaps the rest; the tests that need the session's
# index come last, when its background build has finished.
WAIT_FIRST = {"test_cluster.py", "test_offline.py"}


def _order(item: pytest.Item) -> int:
    if item.path.name in WAIT_FIRST:
        return 0
    return 2 if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())) else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_order)  # stable: files keep their order within each group

