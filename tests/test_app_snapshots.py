"""Snapshot tests of the app's main screens (pytest-textual-snapshot).

Frozen on purpose: a fixed case folder written here (not the growing
built-in set), no dense model (its scores vary by machine), no cursor blink,
and a fixed interpreter description in the run dialog. Regenerate with
`pytest tests/test_app_snapshots.py --snapshot-update` and review the SVGs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kb.cases.caseset import CaseSet, load_cases
from kb.search.engine import Engine
from tui.app import KbApp
from tui.widgets.prompt import PromptArea

SIZE = (110, 36)

CASE = """---
id: snap-nccl-system-error
title: "NCCL error: unhandled system error at the first collective"
category: distributed-comm
tags: [nccl, multi-node]
signatures:
  - "unhandled system error (run with NCCL_DEBUG=INFO for details)"
symptoms:
  - multi-node training fails at the first all-reduce
params:
  nic:
    description: network interface NCCL should use
    default: eth0
sources: [tests]
---

# NCCL error: unhandled system error at the first collective

## Symptoms
Workers die at the first collective with `DistBackendError ... unhandled system error`.

## Causes
1. **NCCL picked the wrong network interface.**
2. InfiniBand misconfigured.

## Fix
```bash
export NCCL_SOCKET_IFNAME=eth0
```

## Verify
Is the interface there?

```bash {name=nic-exists timeout=10 description="the NIC named by nic exists"}
nic="$KB_PARAM_NIC"
ip link show "$nic" >/dev/null 2>&1 || { echo "no interface $nic"; exit 1; }
echo "$nic exists"
```
"""

OTHER = """---
id: snap-cuda-oom
title: "CUDA out of memory during the actor update"
category: memory
signatures:
  - "torch.OutOfMemoryError: CUDA out of memory"
symptoms:
  - the actor update runs out of GPU memory
sources: [tests]
---

# CUDA out of memory during the actor update

## Symptoms
`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`

## Causes
1. Micro batch too large.

## Fix
Lower `ppo_micro_batch_size_per_gpu`.

## Verify
```bash {name=free-mem timeout=10}
echo ok
```
"""

PASTE = (
    "Traceback (most recent call last):\n"
    '  File "verl/workers/fsdp_workers.py", line 412, in init_model\n'
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5"
)


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, CaseSet]:
    folder = tmp_path_factory.mktemp("snapcases")
    (folder / "snap-nccl-system-error.md").write_text(CASE, encoding="utf-8")
    (folder / "snap-cuda-oom.md").write_text(OTHER, encoding="utf-8")
    engine = Engine.open([folder], index_dir=tmp_path_factory.mktemp("snapindex"), include_builtin=False, dense=False)
    return engine, load_cases([folder], include_builtin=False)


@pytest.fixture
def app(frozen: tuple[Engine, CaseSet], monkeypatch: pytest.MonkeyPatch) -> KbApp:
    import kb.checks.runner

    # The interpreter path differs between machines.
    monkeypatch.setattr(kb.checks.runner, "interpreter_for", lambda check, python=None: (["bash"], "bash (bash, with your shell's environment)"))
    # The case folder is a fresh temporary path on each run.
    monkeypatch.setattr("tui.widgets.card.short_path", lambda path: f"<cases>/{Path(str(path)).name}")
    monkeypatch.setattr("kb.cases.trust.trust_command", lambda folder: "kb trust <cases>")
    engine, caseset = frozen
    return KbApp(engine=engine, caseset=caseset, dense=False, cursor_blink=False)


async def settle(pilot) -> None:
    app = pilot.app
    end = time.monotonic() + 15
    while app.caseset is None or app.engine is None or any(t.pending for t in app.chat.conv.turns):
        assert time.monotonic() < end, "the app did not settle"
        await pilot.pause(0.02)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def ask(pilot) -> None:
    await settle(pilot)
    prompt = pilot.app.chat.query_one(PromptArea)
    prompt.load_text(PASTE)
    await pilot.press("enter")
    await settle(pilot)


def test_empty_chat(snap_compare, app: KbApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_answer(snap_compare, app: KbApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, run_before=ask)


def test_case_view(snap_compare, app: KbApp) -> None:
    async def run_before(pilot) -> None:
        await ask(pilot)
        await pilot.press("ctrl+o")
        # the header paints first, the Markdown body right after (tui/screens/case.py)
        end = time.monotonic() + 15
        while not getattr(pilot.app.screen, "body_shown", False):
            assert time.monotonic() < end, "the case body did not render"
            await pilot.pause(0.02)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_confirm_modal(snap_compare, app: KbApp) -> None:
    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.open_case("snap-nccl-system-error")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare, app: KbApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, press=["f1"], run_before=settle)
