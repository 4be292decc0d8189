"""Whole logs on small fixtures (fast): cause over consequence, suspect rank, stage, baseline, --logs, kb eval --logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.evaluation.logs import LogEvalError, evaluate_logs, load_set
from kb.logs.logsearch import LogInputError, analyse_files, analyse_text, file_rank
from kb.logs.stage import Stage, contradicts

ROOT = Path(__file__).resolve().parents[1]

# The shape torchrun 2.x prints when rank 1 raises in the job's own code at step 6 (from a real run, shortened).
CRASH = """[init] rank 0/2 connecting to 127.0.0.1:29500
[init] rank 1/2 connecting to 127.0.0.1:29500
step 4/10 loss=1.0689 lr=0.01
step 5/10 loss=2.3056 lr=0.01
[rank1]: Traceback (most recent call last):
[rank1]:   File "/job/train.py", line 89, in main
[rank1]:     loss = trainer.step(step, args)
[rank1]:   File "/job/train.py", line 37, in step
[rank1]:     self.scheduler.step()
[rank1]: AttributeError: 'Trainer' object has no attribute 'scheduler'
[rank0]: Traceback (most recent call last):
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank0]:     work.wait()
[rank0]: RuntimeError: [third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:48859. This is typically caused by a remote worker crashing.
W1202 11:27:34.188000 12025 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 12959 closing signal SIGTERM
E1202 11:27:34.302000 12025 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 12960) of binary: /venv/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 12960)
"""

ABORT = """step 2/10 loss=1.6901 lr=0.01
terminate called after throwing an instance of 'gloo::EnforceNotMet'
  what():  [enforce fail at gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 12 vs 8. Received data size doesn't match expected size.
[rank1]: Traceback (most recent call last):
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank1]:     work.wait()
[rank1]: RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:21189: Connection reset by peer.
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 22225)  (SIGABRT)
"""

HANG = """[default0]:step 3/10 loss=0.8481 lr=0.01
[default2]:[init] rank 2 process group ready, world size 3
[default2]:about to reduce gradients
[default0]:[rank0]: RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 6000ms for recv operation to complete
[default1]:[rank1]: RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 6000ms for send operation to complete
[default1]:[rank1]: Traceback (most recent call last):
W1202 11:31:02.424000 1 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 23215 closing signal SIGTERM
"""

FRAMES_ONLY = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 794, in main
    run(args)
  File "/job/train.py", line 12, in main
    build()
"""


def test_the_failing_ranks_error_is_kept_and_peers_are_consequences() -> None:
    a = analyse_text(CRASH)
    assert a.reduction.kept_text == ["AttributeError: 'Trainer' object has no attribute 'scheduler'"]
    why = {l.text.strip()[:40]: l.why for l in a.reduction.consequences}
    closed = next(l for l in a.reduction.consequences if "Connection closed by peer" in l.text)
    assert closed.rank == 0 and "peer" in closed.why
    assert any("SIGTERM" in l.text for l in a.reduction.consequences), why
    assert any("ChildFailedError" in l.text for l in a.reduction.consequences)
    assert a.verdict.suspect == 1 and "rank 1 failed first" in a.verdict.why and "rank(s) 0 only show consequences" in a.verdict.why
    assert (a.stage.name, a.stage.step) == ("step", 6)
    j = a.to_json()
    assert j["ranks"]["suspect"] == 1
    assert any(c["why"].startswith("a peer lost its connection") for c in j["consequences"])


def test_library_frames_are_dropped_and_cpp_abort_lines_kept() -> None:
    a = analyse_text(ABORT)
    assert a.reduction.kept_text[0] == "terminate called after throwing an instance of 'gloo::EnforceNotMet'"
    assert "Received data size doesn't match expected size" in a.reduction.kept_text[1]
    assert not any("File " in t or "work.wait()" in t for t in a.reduction.kept_text)
    assert any("Connection reset by peer" in l.text for l in a.reduction.consequences)
    # the abort line has no rank prefix: the launcher's root cause names the rank
    assert a.verdict.suspect == 0 and "first observed failure" in a.verdict.why


def test_a_hang_names_the_rank_that_did_not_time_out_and_its_last_line() -> None:
    a = analyse_text(HANG)
    assert a.reduction.hang
    assert a.verdict.suspect == 2
    assert "rank(s) 0, 1 timed out" in a.verdict.why and "about to reduce gradients" in a.verdict.why
    assert a.verdict.last_line == "about to reduce gradients"
    assert all("Timed out waiting" in t for t in a.reduction.kept_text)


def test_frames_are_kept_when_they_are_all_there_is() -> None:
    a = analyse_text(FRAMES_ONLY)
    kept = a.reduction.kept_text
    # the frames, then the innermost frame's source line: where the paste stopped
    assert kept[-1] == "build()" and kept[:-1] and all(t.startswith("File ") for t in kept[:-1])


BARE_ASSERT = """Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/vllm/model_executor/layers/linear.py", line 1087, in weight_loader
    assert param_data.shape == loaded_weight.shape
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError
"""

PYDANTIC = """Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 1200, in create_engine_config
    scheduler_config = SchedulerConfig(
pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (131072). [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]
    For further information visit https://errors.pydantic.dev/2.11/v/value_error
INFO 12-02 10:00:00 [launcher.py:80] Shutting down
"""


def test_a_bare_assertion_error_keeps_the_assert_it_failed() -> None:
    kept = analyse_text(BARE_ASSERT).reduction.kept_text
    assert kept == ["assert param_data.shape == loaded_weight.shape", "AssertionError"]


def test_an_exception_keeps_the_indented_message_under_it_but_not_its_fields() -> None:
    kept = analyse_text(PYDANTIC).reduction.kept_text
    assert kept[0] == "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig"
    assert any(t.startswith("Value error, max_num_batched_tokens (8192) is smaller") for t in kept)
    assert not any("Shutting down" in t for t in kept)
    fields = analyse_text("ray.exceptions.ActorDiedError: The actor died unexpectedly.\n\tclass_name: Worker\n\tpid: 42\nx\ny\n")
    assert fields.reduction.kept_text == ["ray.exceptions.ActorDiedError: The actor died unexpectedly."]


def test_a_timeout_is_a_consequence_when_a_cause_exists_elsewhere() -> None:
    log = "[rank0]: RuntimeError: Timed out waiting 6000ms for recv operation to complete\n[rank1]: ValueError: bad batch shape\n"
    a = analyse_text(log)
    assert a.reduction.kept_text == ["ValueError: bad batch shape"]
    assert a.verdict.suspect == 1
    assert any("timed out waiting for a rank" in l.why for l in a.reduction.consequences)


# torch's DistBackendError ends with NCCL's own detail (c10d NCCLUtils getNcclErrorDetailStr: "\nLast error:\n" + ncclGetLastError).
NCCL_LAST_ERROR = """Traceback (most recent call last):
  File "/usr/lib/python3.10/site-packages/torch/distributed/utils.py", line 305, in _sync_params_and_buffers
    dist._broadcast_coalesced(
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
socketStartConnect: Connect to 10.0.0.13<35761> failed : Software caused connection abort
"""


def test_the_nccl_last_error_detail_is_kept_with_the_error() -> None:
    kept = analyse_text(NCCL_LAST_ERROR).reduction.kept_text
    assert kept[0].startswith("torch.distributed.DistBackendError: NCCL error in:")
    assert "socketStartConnect: Connect to 10.0.0.13<35761> failed : Software caused connection abort" in kept
    assert not any(t.startswith("File ") for t in kept)
    one_line = "ncclSystemError: System call failed.\nLast error: socketStartConnect: Connect to 10.0.0.13<35761> failed"
    assert analyse_text(one_line).reduction.kept_text[-1].startswith("Last error: socketStartConnect")
    # torch's placeholder when NCCL has no detail is not a cause
    assert analyse_text("ncclSystemError: System call failed.\nLast error: Unknown NCCL Error\n").reduction.kept_text == [
        "ncclSystemError: System call failed."
    ]


def test_warnings_are_not_causes() -> None:
    log = "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.\nKeyError: 'warmup_steps'\n"
    assert analyse_text(log).reduction.kept_text == ["KeyError: 'warmup_steps'"]


def test_stage_reads_checkpoint_from_the_failing_frames() -> None:
    log = """step 6/10 loss=1.2
[rank0]: Traceback (most recent call last):
[rank0]:   File "/job/train.py", line 96, in main
[rank0]:     torch.save(state, path)
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 651, in save
[rank0]: RuntimeError: Parent directory /ckpt does not exist.
"""
    a = analyse_text(log)
    assert a.stage.name == "checkpoint" and a.stage.steps_ran


def test_a_startup_case_contradicts_a_crash_after_steps() -> None:
    after_steps = Stage("step", 6, "step 5/10", True)
    rendezvous = {"id": "distributed-init-rendezvous-hang", "title": "init hangs at rendezvous", "category": "distributed-comm", "tags": []}
    oom = {"id": "cuda-oom-training", "title": "CUDA out of memory in training", "category": "memory", "tags": ["oom"]}
    assert contradicts(after_steps, rendezvous)
    assert not contradicts(after_steps, oom)
    assert not contradicts(Stage("init"), rendezvous)


def test_baseline_sets_aside_lines_the_good_run_printed() -> None:
    good = "\n".join(["[init] rank 0/2 connecting to 127.0.0.1:40000", "step 1/10 loss=0.5 lr=0.01",
                      "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior."])
    bad = "\n".join(["[init] rank 0/2 connecting to 127.0.0.1:29500", "step 1/10 loss=0.9 lr=0.01",
                     "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.",
                     "[rank1]: KeyError: 'warmup_steps'"])
    a = analyse_text(bad, good, "good.log")
    assert a.baseline_removed == 3
    assert a.reduction.kept_text == ["KeyError: 'warmup_steps'"]
    assert a.to_json()["baseline"] == {"path": "good.log", "lines_set_aside": 3}
    assert any("3 line(s) also in the good run" in s for s in a.summary_lines())
    assert a.stage.name == "step"  # the progress lines still count for the stage


def test_logs_dir_names_the_rank_and_file(tmp_path: Path) -> None:
    for rank, body in [(0, "step 3/10\nRuntimeError: Connection closed by peer [10.0.0.2]:1234\n"),
                       (1, "step 3/10\nValueError: reward is None for sample 7\n"),
                       (2, "step 3/10\nRuntimeError: Connection closed by peer [10.0.0.2]:1234\n")]:
        d = tmp_path / "run" / "attempt_0" / str(rank)
        d.mkdir(parents=True)
        (d / "stderr.log").write_text(body)
    a = analyse_files(tmp_path / "run")
    assert a.verdict.suspect == 1 and a.verdict.file == "attempt_0/1/stderr.log"
    assert a.reduction.kept_text == ["ValueError: reward is None for sample 7"]
    assert a.files[0] == "attempt_0/0/stderr.log"
    assert file_rank("node-3.log") == 3 and file_rank("worker_12/out.txt") == 12


def test_logs_dir_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(LogInputError, match="not a directory"):
        analyse_files(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogInputError, match="no log files"):
        analyse_files(tmp_path / "empty")


def test_hostile_logs_do_not_crash() -> None:
    for text in ["", "\x00\x1b[31m" * 1000, "File \"x\", line 1, in y\n" * 5000, "[rank99999999999999999]: Error: x",
                 "Root Cause (first observed failure):\n  rank      : 3 (local_rank: 3)\n" * 3]:
        a = analyse_text(text)
        a.to_json()
        a.summary_lines()


def _write_set(root: Path, labels: dict) -> None:
    root.mkdir(exist_ok=True)
    (root / "one.log").write_text(CRASH)
    (root / "one.labels.json").write_text(json.dumps(labels))


def test_eval_logs_measures_kept_lines_and_suspect(tmp_path: Path) -> None:
    _write_set(tmp_path / "set", {"source": "made here: test", "failure_lines": [10], "suspect_rank": 1, "expected": [],
                                  "stage": "step", "multi_rank": True})
    rep = evaluate_logs(tmp_path / "set")
    assert rep["kept_lines"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert rep["suspect"] == {"right": 1, "of": 1, "accuracy": 1.0}
    # labelling a consequence line as well: recall drops, the figures follow the labels
    _write_set(tmp_path / "set", {"failure_lines": [10, 14], "suspect_rank": 0, "multi_rank": True})
    rep = evaluate_logs(tmp_path / "set")
    assert rep["kept_lines"]["recall"] == 0.5 and rep["suspect"]["right"] == 0


def test_eval_logs_bad_sidecars_name_the_file(tmp_path: Path) -> None:
    _write_set(tmp_path / "a", {"failure_lines": "10"})
    with pytest.raises(LogEvalError, match=r"one\.labels\.json.*failure_lines"):
        load_set(tmp_path / "a")
    _write_set(tmp_path / "b", {"failure_lines": [999]})
    with pytest.raises(LogEvalError, match=r"one\.log: labelled line\(s\) \[999\] beyond the end"):
        evaluate_logs(tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.log").write_text("x")
    with pytest.raises(LogEvalError, match="no sidecar x.labels.json"):
        load_set(tmp_path / "c")


CLAIM_MARGIN = 0.03  # measured figures may sit this far under eval/logs/README.md's; a drop of 0.05 fails


def _claimed() -> dict[str, tuple[float, float, float]]:
    """eval/logs/README.md's figures table: split -> (precision, recall, F1)."""
    out = {}
    for line in (ROOT / "eval" / "logs" / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in ("dev", "held-out", "all"):
            out[cells[0]] = (float(cells[2]), float(cells[3]), float(cells[4]))
    return out


def _check_claims(rep: dict) -> None:
    claimed = _claimed()
    assert set(claimed) == {"dev", "held-out", "all"}
    for split, got in (("dev", rep["by_split"]["dev"]), ("held-out", rep["by_split"]["heldout"]), ("all", rep["kept_lines"])):
        p, r, f1 = claimed[split]
        assert got["precision"] >= p - CLAIM_MARGIN and got["recall"] >= r - CLAIM_MARGIN and got["f1"] >= f1 - CLAIM_MARGIN, (split, got)
    # issue 26's floors
    assert rep["kept_lines"]["precision"] >= 0.95 and rep["kept_lines"]["recall"] >= 0.95
    assert rep["stage"]["accuracy"] >= 0.90 and rep["suspect"]["accuracy"] >= 0.90
    folder = rep["folder"]
    assert folder["logs"] >= 20 and folder["per_rank_files"]["f1"] >= folder["one_file"]["f1"] - 0.02
    assert rep["baseline"]["never_lower"]


def test_the_labelled_set_meets_the_targets_and_the_readmes_claims() -> None:
    """eval/logs as committed: the figures README claims (less CLAIM_MARGIN) and issue 26's floors:
    per-failure-line recall and precision >= 0.95, stage and suspect >= 0.90, --logs DIR within 0.02 of one file."""
    logs = load_set(ROOT / "eval" / "logs")
    assert len(logs) >= 50
    assert sum(1 for l in logs if l.source.startswith("https://")) >= 20
    assert sum(1 for l in logs if l.source.startswith("made here:")) >= 25
    _check_claims(evaluate_logs(ROOT / "eval" / "logs"))


@pytest.mark.parametrize("split", ["all", "dev", "heldout"])
def test_a_drop_of_log_f1_by_005_fails_the_claim_check(split: str) -> None:
    rep = evaluate_logs(ROOT / "eval" / "logs")
    got = rep["kept_lines"] if split == "all" else rep["by_split"][split]
    got["f1"] = _claimed()["held-out" if split == "heldout" else split][2] - 0.05
    with pytest.raises(AssertionError):
        _check_claims(rep)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_cli_bad_log_inputs_are_usage_errors(tmp_path: Path) -> None:
    r = _cli("search", "--logs", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope: not a directory" in r.stderr
    r = _cli("search", "--logs", str(tmp_path), "some text")
    assert r.returncode == 2 and "not both" in r.stderr
    r = _cli("search", "x", "--baseline", str(tmp_path / "good.log"))
    assert r.returncode == 2 and "good.log" in r.stderr
    r = _cli("eval", "--logs", str(tmp_path / "nope"))
    assert r.returncode == 2 and "not a directory of labelled logs" in r.stderr


def test_logs_dir_hang_names_the_file_that_simply_stops(tmp_path: Path) -> None:
    for rank in (0, 1, 2):
        body = "step 3/10 loss=0.5\n"
        body += ("RuntimeError: Timed out waiting 6000ms for recv operation to complete\n" if rank != 1
                 else "entering all_reduce for bucket 7\n")
        (tmp_path / f"rank{rank}.log").write_text(body)
    a = analyse_files(tmp_path)
    assert a.reduction.hang and a.verdict.suspect == 1
    assert a.verdict.file == "rank1.log" and a.verdict.last_line == "entering all_reduce for bucket 7"
    assert "rank 1 did not report the timeout" in a.verdict.why


def test_logs_dir_first_failure_by_time_not_by_file_order(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_text("2026-12-02 11:30:05,100 ERROR ValueError: loss is nan after all-reduce\n")
    (tmp_path / "rank1.log").write_text("2026-12-02 11:30:01,900 ERROR ValueError: grad norm is inf in layer 3\n")
    a = analyse_files(tmp_path)
    assert a.verdict.suspect == 1 and a.verdict.file == "rank1.log"


RAY_REMOTE = '''Traceback (most recent call last):
  File "/root/verl/verl/trainer/main_ppo.py", line 46, in run_ppo
    ray.get(runner.run.remote(config))
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 919, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=63403, ip=192.168.111.15)
  File "/root/verl/verl/trainer/main_ppo.py", line 179, in run
    trainer.fit()
  File "/root/verl/verl/trainer/ppo/ray_trainer.py", line 947, in fit
    timing_raw.update(gen_batch_output.meta_info["timing"])
KeyError: 'timing'
'''


def test_a_ray_remote_traceback_gives_the_workers_frames_as_context_not_the_drivers() -> None:
    """Ray prints the driver's frames (`ray.get`), then RayTaskError, then the worker's frames: the frame that
    failed (`ray_trainer.py ... in fit` and its source line) is the search context, not `run_ppo`."""
    context = [l.text.strip() for l in analyse_text(RAY_REMOTE).reduction.context]
    assert 'timing_raw.update(gen_batch_output.meta_info["timing"])' in context
    assert any("ray_trainer.py" in c and "in fit" in c for c in context)
    assert not any("in run_ppo" in c for c in context)
