"""Issue 26's log reader: process deaths, a skipped collective, the first failure over a consequence, stage per stream, NaN runs.

Fixtures are lines from real runs (eval/logs/made-*.log) and texts traced to their sources
(kb/logs/death.py names them); fast except the two that load the real engine.
"""

from __future__ import annotations

from pathlib import Path

from kb.logs.death import Death, death_of, memory_pressure
from kb.logs.logsearch import analyse_files, analyse_text

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "eval" / "logs"

# torchrun 2.13's verdict on a rank killed by SIGKILL (made-kill-rank1.log, shortened)
KILLED = """[init] rank 0/2 connecting to 127.0.0.1:29500
[init] rank 1/2 connecting to 127.0.0.1:29500
step 3/10 loss=1.2064 lr=0.01
step 4/10 loss=1.0008 lr=0.01
[rank0]: Traceback (most recent call last):
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank0]:     work.wait()
[rank0]: RuntimeError: [third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:48859. This is typically caused by a remote worker crashing.
W1203 13:17:09.234000 17809 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 18086 closing signal SIGTERM
E1203 13:17:09.405000 17809 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 18087) of binary: /venv/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2026-12-03_13:17:09
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 18087)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 18087
"""
# the kernel's lines (mm/oom_kill.c), as quoted in the reports host-oom-killed-colocation cites
KERNEL = """[Thu Dec  3 13:17:08 2026] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[Thu Dec  3 13:17:08 2026] Out of memory: Killed process 18087 (python3) total-vm:81234567kB, anon-rss:60123456kB, file-rss:0kB
"""


def test_the_death_classifier_reads_each_source() -> None:
    def d(text: str) -> Death:
        found = death_of(text)
        assert found is not None, text
        return found

    assert d("failed (exitcode: -9) local_rank: 1 (pid: 3) of binary: x").local_rank == 1
    assert d("  traceback : Signal 11 (SIGSEGV) received by PID 12").name == "SIGSEGV"
    assert d("Fatal Python error: Segmentation fault").how == "faulthandler"
    assert d("RuntimeError: DataLoader worker (pid 13049) is killed by signal: Killed. ").signal == 9
    assert d("OOM kill reason: Memory usage 9181691904B exceeded threshold of 9175214080B (36.3% of 25276071936B limit)").how \
        == "ray-memory-monitor"
    assert d("ERROR: Unexpected segmentation fault encountered in worker.").name == "SIGSEGV"
    assert d("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).").name == "SIGBUS"
    assert d("run.sh: line 3:  1234 Killed                  python train.py").signal == 9
    # SIGTERM is the launcher stopping the others, SIGABRT follows a printed C++ abort, exit 1 follows a traceback
    for line in ("  exitcode  : -15 (pid: 1)  (SIGTERM)", "Signal 6 (SIGABRT) received by PID 3", "  exitcode  : 1 (pid: 1)",
                 "Killed process 12 (python3)", "step 4/10 loss=1.0 lr=0.01"):
        assert death_of(line) is None, line
    assert memory_pressure(KERNEL.splitlines()[1]) and not memory_pressure("step 4/10 loss=1.0")


def test_a_rank_killed_by_sigkill_is_the_cause_not_the_peers_lost_connection() -> None:
    a = analyse_text(KILLED)
    kept = a.reduction.kept_text
    assert any("Signal 9 (SIGKILL) received by PID" in t for t in kept) and any("exitcode  : -9" in t for t in kept)
    assert not any("Connection closed by peer" in t for t in kept)
    assert a.verdict.suspect == 1 and a.stage.label() == "training step 5"
    assert a.death is not None and a.death.death.name == "SIGKILL" and not a.death.pressure


def test_the_kernels_oom_lines_are_kept_and_count_as_memory_pressure() -> None:
    a = analyse_text(KILLED + KERNEL)
    assert any("Out of memory: Killed process 18087" in t for t in a.reduction.kept_text)
    assert a.death is not None and a.death.pressure and "ran short of memory" in a.death.sentence()
    assert a.to_json()["death"]["signal"] == "SIGKILL"


def test_logs_dir_keeps_the_sigkill_lines_when_another_file_has_an_error(tmp_path: Path) -> None:
    """With --logs the SIGKILL lines were kept only while no file had any error line; now they are causes."""
    (tmp_path / "rank0.log").write_text("step 4/10 loss=1.0 lr=0.01\nRuntimeError: Connection closed by peer [127.0.0.1]:1\n")
    (tmp_path / "launcher.log").write_text(KILLED.split("[rank0]")[0] + "\n".join(KILLED.splitlines()[8:]) + "\n")
    (tmp_path / "ray.log").write_text("ERROR: could not load the dashboard module\n")
    a = analyse_files(tmp_path)
    assert any("Signal 9 (SIGKILL) received by PID" in t for t in a.reduction.kept_text)
    assert a.death is not None and a.verdict.suspect == 1


def test_a_segfault_is_kept_with_the_launchers_verdict() -> None:
    a = analyse_text((LOGS / "made-segv-rank1.log").read_text())
    kept = a.reduction.kept_text
    assert kept[0] == "Fatal Python error: Segmentation fault"
    assert any("Signal 11 (SIGSEGV)" in t for t in kept) and a.verdict.suspect == 1
    assert a.stage.label() == "training step 4"


def test_ray_memory_monitor_and_ddp_unused_parameters_are_kept() -> None:
    ray = analyse_text((LOGS / "made-ray-memory-monitor.log").read_text()).reduction.kept_text
    assert any(t.startswith("OOM kill reason: Memory usage") and "exceeded threshold" in t for t in ray)
    ddp = analyse_text((LOGS / "made-ddp-unused-param.log").read_text())
    assert "Parameter indices which did not receive grad for rank 1: 2 3" in ddp.reduction.kept_text
    assert ddp.verdict.suspect == 1


def test_a_rank_that_skipped_a_collective_is_named_with_its_warning() -> None:
    a = analyse_text((LOGS / "made-skip-collective-hang.log").read_text())
    assert a.reduction.hang and a.verdict.suspect == 1
    assert "batch at step 4 is empty after filtering" in a.reduction.kept_text[0]
    assert "batch at step 4 is empty" in a.verdict.last_line and a.stage.label() == "training step 4"


def test_a_warning_every_rank_printed_does_not_explain_a_hang() -> None:
    a = analyse_text((LOGS / "made-hang-3ranks-tee.log").read_text())
    assert a.verdict.suspect == 2 and not any("UserWarning" in t for t in a.reduction.kept_text)


# A Ray/NCCL paste: rank 0 (first node) prints NCCL's remote error first, rank 2 (second node) failed first.
# NCCL texts: nccl src/init.cc ncclGetErrorString, torch c10d NCCLUtils getNcclErrorDetailStr (and a real report's lines).
RAY_NCCL = """(WorkerDict pid=2101, ip=10.0.0.1) step:4 - actor/loss:0.41
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]: Traceback (most recent call last):
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]:   File "/venv/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2501, in all_reduce
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]:     work = group.allreduce([tensor], opts)
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.21.5
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]: Last error:
(WorkerDict pid=2101, ip=10.0.0.1) [rank0]: socketProgress: Connection closed by remote peer 10.0.0.2<45678>
(WorkerDict pid=3301, ip=10.0.0.2) [rank2]: Traceback (most recent call last):
(WorkerDict pid=3301, ip=10.0.0.2) [rank2]:   File "/job/verl/workers/actor/dp_actor.py", line 290, in update_policy
(WorkerDict pid=3301, ip=10.0.0.2) [rank2]:     entropy = entropy_from_logits(logits)
(WorkerDict pid=3301, ip=10.0.0.2) [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity of 79.14 GiB of which 3.05 GiB is free.
"""


def test_the_first_failure_is_named_not_the_remote_process_exited_consequence() -> None:
    a = analyse_text(RAY_NCCL)
    assert a.verdict.suspect == 2, a.verdict.why
    assert a.reduction.kept_text[0].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert not any("remote process" in t or "Connection closed" in t for t in a.reduction.kept_text)
    assert any("remote process exited" in c.text for c in a.reduction.consequences)


def test_a_remote_error_alone_is_still_the_cause() -> None:
    only = "\n".join(RAY_NCCL.splitlines()[:8])
    assert any("remote process exited" in t for t in analyse_text(only).reduction.kept_text)


def _stage(text: str) -> str:
    return analyse_text(text).stage.label()


def test_stage_is_the_step_that_failed_not_the_next_one() -> None:
    err = "[rank1]: RuntimeError: boom\n"
    pre = "[init] rank 0 process group ready\n"
    assert _stage(pre + "step 5/10 loss=1.0 lr=0.01\n" + err) == "training step 6"  # step 5 reported done
    assert _stage(pre + "step 5/10 loss=1.0 lr=0.01\nstep 6: generating sequences\n" + err) == "rollout"
    assert analyse_text(pre + "step 5/10 loss=1.0\nstep 6: generating sequences\n" + err).stage.step == 6
    assert _stage(pre + "step 3/10 loss=1.0\n[checkpoint] rank 1 waiting at the checkpoint barrier at step 4\n" + err) == "checkpoint"
    assert analyse_text(pre + "step 3/10 loss=1.0\ncheckpoint barrier at step 4\n" + err).stage.step == 4
    assert _stage(pre + "step 10/10 loss=1.0\ntraining finished\n[shutdown] rank 1 writing final metrics\n" + err) == "shutdown"


def test_stage_reads_the_step_from_the_traceback_when_no_progress_line_does() -> None:
    log = "[init] rank 0 process group ready\nsaving nothing\n  File \"/job/train.py\", line 3, in training_step\n" \
          "RuntimeError: loss exploded at global_step=17\n" + "info\n" * 4
    a = analyse_text(log)
    assert a.stage.name == "step" and a.stage.step == 17


def test_a_hydra_override_typo_with_val_keys_is_launch_not_validation() -> None:
    log = "\n".join([
        "data:", "  val_files: /data/val.parquet", "  val_batch_size: 8", "trainer:", "  val_before_train: true",
        "Could not override 'trainer.n_gpus'.", "To append to your config use +trainer.n_gpus=2",
        "Key 'n_gpus' is not in struct", "    full_key: trainer.n_gpus", "    object_type=dict",
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."])
    assert analyse_text(log).stage.name == "launch"


def test_a_nan_run_keeps_where_it_started_and_the_error() -> None:
    a = analyse_text((LOGS / "made-nan-loss-clip.log").read_text())
    kept = a.reduction.kept_text
    assert len(kept) == 2, kept
    assert kept[0] == "[rank0] WARNING: step 4: loss is inf, grad_norm is not finite"
    assert kept[1].startswith("RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite")
    assert a.verdict.suspect == 0 and a.stage.label() == "training step 4"


def test_sigkill_puts_the_host_oom_entry_first(engine) -> None:
    from kb.logs.logsearch import search_text

    for name in ("made-kill-rank1.log", "made-dataloader-killed.log"):
        answer = search_text(engine, (LOGS / name).read_text(), typed=False)
        assert answer.results and answer.results[0].id == "host-oom-killed-colocation", (name, [r.id for r in answer.results])
        assert answer.results[0].evidence[0].kind.value == "death"
    with_kernel = search_text(engine, KILLED + KERNEL, typed=False)
    assert with_kernel.results[0].id == "host-oom-killed-colocation"
    assert "ran short of memory" in with_kernel.results[0].evidence[0].text


def test_rays_memory_monitor_keeps_its_own_entry(engine) -> None:
    from kb.logs.logsearch import search_text

    answer = search_text(engine, (LOGS / "made-ray-memory-monitor.log").read_text(), typed=False)
    assert answer.results and answer.results[0].id == "ray-oom-killer-memory-monitor"
