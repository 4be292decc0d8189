"""Real multi-process runs (torchrun, gloo, CPU) with one injected fault: kb names the rank, keeps the line, marks the consequences.

The job is eval/logs/make/train.py (a tiny data-parallel loop); each run takes
a few seconds. Marked slow: they start real processes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kb.logs.logsearch import analyse_files, analyse_text

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "eval" / "logs" / "make" / "train.py"
TORCHRUN = Path(sys.executable).with_name("torchrun")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun not installed"),
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc: int, *job: str, extra: tuple[str, ...] = ()) -> str:
    cmd = [str(TORCHRUN), "--nproc-per-node", str(nproc), *extra, "--master-port", str(_port()), str(TRAIN), "--steps", "8", *job]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60, env=env, cwd="/tmp")
    assert proc.returncode != 0, proc.stdout[-2000:]
    return proc.stdout


def test_attribute_error_on_one_rank_at_step_4() -> None:
    log = torchrun(2, "--fault", "attr", "--fault-rank", "1", "--fault-step", "4")
    a = analyse_text(log)
    assert a.verdict.suspect == 1, a.verdict.why
    assert a.reduction.kept_text == ["AttributeError: 'Trainer' object has no attribute 'scheduler'"]
    cons = " | ".join(f"{l.text} <{l.why}>" for l in a.reduction.consequences)
    # rank 0 reports the lost connection only when it reaches the collective before the launcher's
    # SIGTERM lands (a race a loaded machine loses); when it does, that line is a consequence
    if "Connection closed by peer" in log:
        assert "Connection closed by peer" in cons and "a peer lost its connection" in cons
    assert "closing signal SIGTERM" in cons and "ChildFailedError" in cons
    # the stage is the last step the log shows: step 4's own line may not be flushed
    # before rank 1 dies (a race between the ranks' stdout), then the log shows step 3
    assert a.stage.name == "step" and a.stage.step in (3, 4)


def test_mismatched_sizes_keep_the_cpp_abort_lines() -> None:
    log = torchrun(2, "--fault", "size", "--fault-rank", "1", "--fault-step", "2")
    a = analyse_text(log)
    kept = "\n".join(a.reduction.kept_text)
    assert "terminate called after throwing an instance of 'gloo::EnforceNotMet'" in kept
    assert "Received data size doesn't match expected size" in kept
    assert not any("Connection reset by peer" in t or "Connection closed by peer" in t for t in a.reduction.kept_text)
    assert a.verdict.suspect is not None  # the aborting rank, as the launcher's root cause names it


def test_a_hang_names_the_rank_that_never_entered_all_reduce() -> None:
    log = torchrun(3, "--fault", "hang", "--fault-rank", "2", "--fault-step", "3", "--timeout", "4", extra=("--tee", "3"))
    a = analyse_text(log)
    assert a.reduction.hang
    assert a.verdict.suspect == 2, a.verdict.why
    assert "did not report the timeout" in a.verdict.why
    assert all("Timed out waiting" in t for t in a.reduction.kept_text)
    assert any("SIGTERM" in l.text for l in a.reduction.consequences)


def test_logs_dir_from_torchrun_log_dir_names_the_file(tmp_path: Path) -> None:
    torchrun(2, "--fault", "keyerror", "--fault-rank", "1", "--fault-step", "3",
             extra=("--log-dir", str(tmp_path), "--redirects", "3"))
    a = analyse_files(tmp_path)
    assert a.verdict.suspect == 1, a.verdict.why
    assert a.verdict.file.endswith("/1/stderr.log"), a.verdict.file
    assert a.reduction.kept_text == ["KeyError: 'warmup_steps'"]
    assert a.to_json()["ranks"]["file"] == a.verdict.file


def test_baseline_of_the_good_run_never_lowers_precision() -> None:
    good = (ROOT / "eval" / "logs" / "good" / "train-2.log").read_text()  # the same job's good run (make_all.py --good)
    bad = torchrun(2, "--fault", "alloc", "--fault-rank", "1", "--fault-step", "3")
    plain, based = analyse_text(bad), analyse_text(bad, good, "good.log")
    assert based.baseline_removed > 0
    assert based.reduction.kept_text == plain.reduction.kept_text
    assert any("DefaultCPUAllocator: can't allocate memory" in t for t in based.reduction.kept_text)


def test_a_crash_after_steps_is_not_answered_with_a_startup_case(engine) -> None:
    """The issue's example: a job's own AttributeError at step 6 was answered with a rendezvous (start-up) case."""
    from kb.logs.logsearch import search_text

    log = (ROOT / "eval" / "logs" / "made-attr-step6.log").read_text()
    answer = search_text(engine, log)
    assert answer.to_json()["ranks"]["suspect"] == 1
    assert answer.to_json()["stage"]["label"] == "training step 6"
    assert answer.searched_for == ["AttributeError: 'Trainer' object has no attribute 'scheduler'"]
    startup = {"distributed-init-rendezvous-hang", "address-already-in-use"}
    assert not startup & {r.id for r in answer.results if r.confidence != "low"}
    assert not answer.results or answer.results[0].id not in startup


def test_the_busy_port_log_still_finds_its_startup_case(engine) -> None:
    from kb.logs.logsearch import search_text

    answer = search_text(engine, (ROOT / "eval" / "logs" / "made-busy-port.log").read_text())
    assert answer.results and answer.results[0].id == "address-already-in-use"
    assert answer.to_json()["stage"]["name"] in ("launch", "init")
