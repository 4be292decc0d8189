"""`kb stacks`: find the training processes, dump their stacks with py-spy, name the odd one out.

The unit tests read py-spy dumps captured from the real jobs in tests/stacks_jobs/ (tests/stacks_dumps/);
the slow tests start those jobs (a 4-rank torchrun/gloo job on CPU, a DataLoader, a local Ray job)
and run the real py-spy on them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb.hangs.analyse import ENTRIES, FAMILY, analyse, classify, format_analysis, stacks_report
from kb.hangs.dump import Dump, Frame, Thread, dump_one, parse_json, parse_text, py_spy_path
from kb.hangs.find import TrainingProcess, descendants, find_training_processes
from kb.hangs.find import classify as classify_process

HERE = Path(__file__).parent
DUMPS = HERE / "stacks_dumps"
JOBS = HERE / "stacks_jobs"
PY = sys.executable


def _dump(name: str, pid: int) -> Dump:
    d = parse_json(pid, (DUMPS / name).read_text())
    for t in d.threads:
        t.os_id = pid if t.name == "MainThread" else pid + 100000  # the captured main thread, as this pid's
    return d


def _rank(pid: int, rank: int) -> TrainingProcess:
    return TrainingProcess(pid, 1, "rank", "python train.py", rank, rank, 4, node="node-a")


def _same(d: Dump, n: int = 3) -> list[Dump]:
    return [d] * n


# ---------------------------------------------------------------- analysis of captured dumps


def test_a_rank_in_a_different_collective_is_the_odd_one_and_points_at_the_watchdog_entry() -> None:
    procs = [_rank(100 + r, r) for r in range(4)]
    dumps = {100 + r: _same(_dump("mismatch_rank0.json", 100 + r)) for r in range(3)}
    dumps[103] = _same(_dump("mismatch_rank3.json", 103))
    a = analyse(procs, dumps)
    assert [g.to_dict()["ranks"] for g in a.groups] == [[0, 1, 2], [3]]
    assert a.groups[0].to_dict()["frames"][0] == "all_reduce (distributed_c10d.py)"
    out = a.to_dict()
    assert [(o["rank"], o["pid"], o["node"]) for o in out["odd"]] == [(3, 103, "node-a")]
    assert out["odd"][0]["frame"].startswith("barrier (torch/distributed/distributed_c10d.py:")
    assert "rank 3 waits in barrier while ranks 0, 1, 2 wait in all_reduce" in out["verdict"]
    assert out["entry"] == "nccl-watchdog-timeout"


def test_the_text_dump_reads_as_the_json_dump() -> None:
    text = parse_text(8677, (DUMPS / "mismatch_rank3.txt").read_text())
    js = parse_json(8677, (DUMPS / "mismatch_rank3.json").read_text())
    assert [f.key() for f in text.threads[0].frames] == [f.key() for f in js.threads[0].frames]
    assert text.threads[0].idle and text.threads[0].name == "MainThread"


def test_the_actor_stuck_in_user_code_is_named_while_the_driver_waits_in_ray_get() -> None:
    driver = TrainingProcess(10, 1, "ray-driver", "python ray_job.py", node="head")
    stuck = TrainingProcess(20, 5, "ray-actor", "ray::Rollout.work", actor="Rollout", method="work", node="worker-1")
    idle = TrainingProcess(21, 5, "ray-actor", "ray::Rollout", actor="Rollout", node="worker-1")
    dumps = {10: _same(_dump("ray_driver.json", 10)), 20: _same(_dump("ray_actor_stuck.json", 20)),
             21: _same(_dump("ray_actor_idle.json", 21))}
    a = analyse([driver, stuck, idle], dumps)
    out = a.to_dict()
    assert [(o["pid"], o["name"], o["node"], o["rank"]) for o in out["odd"]] == [(20, "Rollout pid=20", "worker-1", None)]
    assert out["odd"][0]["frame"].startswith("Rollout.score_forever (ray_job.py:")
    assert "driver pid=10 waits in ray.get" in out["verdict"]
    where = {s.proc.pid: s.where.kind for s in a.stacks}
    assert where == {10: "ray-wait", 20: "user", 21: "idle"}


def test_processes_whose_stacks_move_are_never_odd_and_the_verdict_says_they_progress() -> None:
    procs = [_rank(100 + r, r) for r in range(4)]
    a0, a3 = _dump("mismatch_rank0.json", 1), _dump("mismatch_rank3.json", 1)
    dumps = {100 + r: [a0, a3, a0] for r in range(4)}
    for r in range(4):
        dumps[100 + r] = [_dump("mismatch_rank0.json", 100 + r), _dump("mismatch_rank3.json", 100 + r)]
    a = analyse(procs, dumps)
    assert a.odd == [] and "making progress" in a.verdict


def test_every_rank_in_the_same_collective_says_the_missing_one_is_elsewhere() -> None:
    procs = [_rank(100 + r, r) for r in range(4)]
    a = analyse(procs, {100 + r: _same(_dump("mismatch_rank0.json", 100 + r)) for r in range(4)})
    assert a.odd == [] and len(a.groups) == 1
    assert "all wait in all_reduce" in a.verdict and "not here" in a.verdict
    assert a.entry == "nccl-watchdog-timeout"


def _f(function: str, file: str, line: int = 1, path: str = "") -> Frame:
    return Frame(function, file, line, path or f"/venv/lib/python3.11/site-packages/{file}")


def test_where_a_stack_is_named_in_words() -> None:
    user = Frame("compute_score", "my_reward.py", 12, "/home/u/my_reward.py")
    io = classify([_f("recv_into", "ssl.py", 1, "/usr/lib/python3.11/ssl.py"), _f("_make_request", "urllib3/connectionpool.py"),
                   _f("post", "requests/api.py"), user])
    assert (io.kind, io.io) == ("reward", True)
    analysis_entry = ENTRIES["reward-io"]
    assert analysis_entry == "reward-server-unreachable-from-workers"
    eng = classify([_f("step", "vllm/v1/engine/core.py"), _f("run_busy_loop", "vllm/v1/engine/core.py")])
    assert eng.kind == "engine"
    lock = classify([_f("wait", "threading.py", 1, "/usr/lib/python3.11/threading.py"),
                     Frame("save", "ckpt.py", 3, "/home/u/ckpt.py")])
    assert lock.kind == "lock" and lock.frame is not None and lock.frame.function == "save"
    init = classify([_f("_store_based_barrier", "torch/distributed/distributed_c10d.py"),
                     _f("init_process_group", "torch/distributed/distributed_c10d.py")])
    assert init.kind == "init"
    coll = classify([_f("ProcessGroup.allreduce", "torch/distributed/distributed_c10d.py"),
                     _f("reduce_scatter_tensor", "torch/distributed/distributed_c10d.py"),
                     _f("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py"),
                     Frame("step", "train.py", 9, "/home/u/train.py")])
    assert (coll.kind, coll.op) == ("collective", "reduce_scatter_tensor")
    assert coll.caller is not None and coll.caller.show() == "step (train.py:9)"


def test_a_healthy_looking_node_with_nothing_to_read_says_so() -> None:
    p = _rank(5, 0)
    a = analyse([p], {5: [Dump(5, error="the process ended before its stack was read")]})
    assert a.stacks == [] and "No stack could be read" in a.verdict
    assert "not read: rank 0 (pid 5): the process ended" in format_analysis(a)


# ---------------------------------------------------------------- discovery


def test_markers_name_ranks_actors_engines_and_leave_out_ray_daemons() -> None:
    env = {"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4"}
    rank = classify_process(1, ["/v/bin/python", "train.py"], env)
    assert rank is not None and (rank.role, rank.rank, rank.name) == ("rank", 2, "rank 2")
    actor = classify_process(1, ["ray::WorkerDict.actor_rollout_generate_sequences"], env)
    assert actor is not None and (actor.actor, actor.method, actor.rank) == ("WorkerDict", "actor_rollout_generate_sequences", 2)
    assert actor.name == "WorkerDict pid=1 (rank 2)"
    assert classify_process(1, ["ray::TaskRunner.run"], {}) is not None
    for title in (["ray::IDLE"], ["ray::DashboardAgent"], ["/v/bin/python", "/v/ray/dashboard/dashboard.py"], ["/bin/bash"]):
        assert classify_process(1, title, {}) is None, title
    assert classify_process(1, ["VLLM::EngineCore"], {}).role == "engine"  # type: ignore[union-attr]
    assert classify_process(1, ["/v/bin/python", "-m", "sglang.launch_server", "--model", "m"], {}).role == "engine"  # type: ignore[union-attr]


def _fake_proc(root: Path, pid: int, ppid: int, argv: list[str], env: dict[str, str]) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    (d / "stat").write_text(f"{pid} (py thon) S {ppid} 0 0")
    (d / "maps").write_text("")


def test_a_dataloader_worker_inherits_rank_but_is_found_as_that_rank_s_child(tmp_path: Path) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    _fake_proc(tmp_path, 10, 1, ["/v/bin/python", "-m", "torch.distributed.run", "train.py"], {})
    _fake_proc(tmp_path, 11, 10, ["/v/bin/python", "train.py"], env)
    _fake_proc(tmp_path, 12, 10, ["/v/bin/python", "train.py"], {**env, "RANK": "1", "LOCAL_RANK": "1"})
    _fake_proc(tmp_path, 13, 11, ["/v/bin/python", "train.py"], env)  # forked DataLoader worker of rank 0
    _fake_proc(tmp_path, 14, 11, ["/bin/sh", "-c", "nvidia-smi"], env)  # not Python
    found = find_training_processes(proc=tmp_path, uid=os.getuid())
    assert [(p.pid, p.role, p.rank) for p in found] == [(11, "rank", 0), (13, "worker", 0), (12, "rank", 1)]
    assert found[1].name == "rank 0 child pid=13"
    assert sorted(descendants(11, tmp_path)) == [11, 13, 14]


# ---------------------------------------------------------------- py-spy: missing, not permitted, too slow


def test_without_py_spy_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kb.cli import main
    from kb.hangs import dump as hangs_dump

    monkeypatch.setattr(hangs_dump, "py_spy_path", lambda: None)
    assert main(["stacks", "--pid", str(os.getpid())]) == 2
    err = capsys.readouterr().err
    assert "py-spy" in err and "pip install 'kb-verl[stacks]'" in err


def _fake_spy(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "py-spy"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return str(exe)


def test_a_refused_ptrace_is_explained_with_what_to_ask_for(tmp_path: Path) -> None:
    exe = _fake_spy(tmp_path, 'echo "Error: Failed to suspend process: Operation not permitted (os error 1)" >&2; exit 1')
    d = dump_one(exe, os.getpid(), use_json=True)
    assert d.error.startswith("not permitted: Error: Failed to suspend process")
    assert "ptrace" in d.error and "SYS_PTRACE" in d.error


def test_a_dump_past_its_deadline_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    exe = _fake_spy(tmp_path, f"sleep 60 & echo $! > {marker}; wait")
    start = time.monotonic()
    d = dump_one(exe, os.getpid(), deadline_s=1.0, use_json=True)
    assert time.monotonic() - start < 5
    assert "did not answer within 1 s (killed)" in d.error
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


# ---------------------------------------------------------------- real jobs (slow)

needs_spy = pytest.mark.skipif(py_spy_path() is None, reason="py-spy is not installed (pip install 'kb-verl[stacks]')")


@pytest.fixture
def job(tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], ready: list[str], env: dict[str, str] | None = None, timeout: float = 180) -> tuple[int, dict[str, int]]:
        rd = tmp_path / "ready"
        rd.mkdir(exist_ok=True)
        full = {**os.environ, "STACKS_READY": str(rd), "OMP_NUM_THREADS": "1", **(env or {})}
        proc = subprocess.Popen(argv, cwd=tmp_path, env=full, stdout=open(tmp_path / "out.log", "wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        started.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            have = {p.name: int(p.read_text() or 0) for p in rd.iterdir() if p.read_text().strip()}
            # a prefix named twice ("actor-", "actor-") needs two markers: one idle actor's marker is not the stuck one's
            if all(sum(k.startswith(r) for k in have) >= ready.count(r) for r in ready):
                time.sleep(1.0)  # let every process reach the line after its marker
                return proc.pid, have
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"job not ready: {(tmp_path / 'out.log').read_text()[-2000:]}")

    yield start
    for proc in started:
        # torchrun's ranks and Ray's daemons start sessions of their own: every descendant, by pid
        tree = descendants(proc.pid)
        try:
            os.kill(proc.pid, signal.SIGTERM)  # a Ray driver shuts its cluster down on SIGTERM
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        for pid in set(tree + descendants(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(scenario: str) -> tuple[list[str], dict[str, str]]:
    return ([PY, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr", "127.0.0.1",
             "--master-port", str(_free_port()), str(JOBS / "ddp_job.py")],
            {"STACKS_SCENARIO": scenario})


def _kb_stacks(root: int) -> dict:
    out = subprocess.run([PY, "-m", "kb", "stacks", "--json", "--under", str(root)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_spy
@pytest.mark.slow
def test_torchrun_rank_2_asleep_before_the_all_reduce_is_the_odd_one(job) -> None:
    argv, env = _torchrun("odd-sleep")
    root, ready = job(argv, ["0", "1", "2", "3"], env)
    out = _kb_stacks(root)
    assert [(o["rank"], o["pid"]) for o in out["odd"]] == [(2, ready["2"])]
    assert out["odd"][0]["frame"].startswith("slow_step (") and "ddp_job.py:" in out["odd"][0]["frame"]
    assert "not in the collective the others wait in (ranks 0, 1, 3 wait in all_reduce)" in out["verdict"]
    assert out["groups"][0]["ranks"] == [0, 1, 3] and out["groups"][0]["frames"][0] == "all_reduce (distributed_c10d.py)"
    assert out["entry"] == FAMILY and "nccl-watchdog-timeout" in out["entries"]


@needs_spy
@pytest.mark.slow
def test_torchrun_ranks_in_different_collectives(job) -> None:
    argv, env = _torchrun("mismatch")
    root, ready = job(argv, ["0", "1", "2", "3"], env)
    out = _kb_stacks(root)
    assert [(o["rank"], o["pid"]) for o in out["odd"]] == [(3, ready["3"])]
    assert out["odd"][0]["frame"].startswith("barrier (torch/distributed/distributed_c10d.py:")
    assert "the ranks called different collectives" in out["verdict"]
    assert out["entry"] == "nccl-watchdog-timeout"


@needs_spy
@pytest.mark.slow
def test_a_healthy_torchrun_job_has_no_odd_one_and_says_so(job) -> None:
    argv, env = _torchrun("healthy")
    root, _ = job(argv, ["0", "1", "2", "3"], env)
    out = _kb_stacks(root)
    assert out["odd"] == []
    assert out["verdict"].startswith("No odd one out")
    assert out["entry"] == ""


@needs_spy
@pytest.mark.slow
def test_a_stuck_dataloader_worker_is_named_with_its_dataset_frame(job) -> None:
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    root, ready = job([PY, str(JOBS / "dataloader_job.py")], ["main"], env)
    a = stacks_report(within=set(descendants(root)), samples=3, interval_s=0.3)
    assert [o.proc.role for o, _ in a.odd] == ["dataloader-worker"]
    odd = a.odd[0][0]
    assert odd.proc.ppid == ready["main"] and odd.proc.rank == 0
    assert odd.where.frame is not None and odd.where.frame.show().startswith("Prompts.__getitem__ (")
    assert a.entry == "dataloader-worker-hang"
    main = next(s for s in a.stacks if s.proc.pid == ready["main"])
    assert main.where.kind == "data-wait"


@needs_spy
@pytest.mark.slow
def test_ray_driver_in_ray_get_and_the_actor_stuck_in_user_code(job) -> None:
    root, ready = job([PY, str(JOBS / "ray_job.py")], ["driver", "actor-", "actor-"], timeout=240)
    out = _kb_stacks(root)
    stuck = [o for o in out["odd"]]
    assert len(stuck) == 1 and stuck[0]["name"].startswith("Rollout pid=") and stuck[0]["rank"] is None
    assert stuck[0]["frame"].startswith("Rollout.score_forever (")
    assert f"driver pid={ready['driver']} waits in ray.get" in out["verdict"]


def test_threads_other_than_main_do_not_decide_the_group() -> None:
    main = Thread("MainThread", 7, True, [Frame("step", "train.py", 3, "/home/u/train.py")])
    other = Thread("pin_memory", 8, True, [Frame("wait", "threading.py", 1, "/usr/lib/python3.11/threading.py")])
    assert Dump(7, [other, main]).main_thread() is main


@needs_spy
@pytest.mark.slow
def test_cluster_doctor_names_the_stuck_actor_on_its_node(job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    root = Path(__file__).resolve().parent.parent
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(root))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        env = {"STACKS_RAY_ADDRESS": cluster.address, "STACKS_NODE": worker.node_id}
        _, ready = job([PY, str(JOBS / "ray_job.py")], ["driver", "actor-", "actor-"], env, timeout=240)
        empty = tmp_path / "no-cases"
        empty.mkdir()
        out = subprocess.run([PY, "-m", "kb", "doctor", "--ray", cluster.address, "--stacks", "--json", "--only", "--cases", str(empty)],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
        text = subprocess.run([PY, "-m", "kb", "doctor", "--ray", cluster.address, "--stacks", "--only", "--cases", str(empty)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
    finally:
        cluster.shutdown()
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    actors = {v for k, v in ready.items() if k.startswith("actor-")}
    # the machine is shared: other Ray drivers may show up; this job's processes are the driver and its actors
    ours = actors | {ready["driver"]}
    odd = [o for o in report["stacks_odd"] if o["pid"] in ours]
    assert len(odd) == 1, report["stacks_odd"]
    assert odd[0]["node_id"] == worker.node_id and odd[0]["name"].startswith("Rollout pid=")
    assert odd[0]["pid"] in actors  # both actors wrote a marker; the odd one is the one in score_forever
    assert odd[0]["frame"].startswith("Rollout.score_forever (")
    assert "The odd one(s) out across the cluster (1):" in text.stdout
    assert f"on node {worker.node_id[:8]}" in text.stdout and "Rollout.score_forever" in text.stdout


RANK_CODE = """
import os, threading, time
def all_reduce_stand_in():
    threading.Event().wait()
def slow_reward():
    time.sleep(600)
open(os.environ["READY"], "a").write(os.environ["RANK"] + "\\n")
(slow_reward if os.environ["RANK"] == "2" else all_reduce_stand_in)()
"""


@needs_spy
def test_the_doctor_step_names_the_odd_rank_and_is_silent_without_training_processes(tmp_path: Path) -> None:
    from kb.checks.doctor import DoctorReport, format_report
    from kb.hangs.analyse import doctor_step

    assert doctor_step(within=set()) is None
    ready = tmp_path / "ready"
    procs = [subprocess.Popen([PY, "-c", RANK_CODE], env={**os.environ, "RANK": str(r), "WORLD_SIZE": "4", "READY": str(ready)})
             for r in range(4)]
    try:
        deadline = time.monotonic() + 60
        while (not ready.exists() or len(ready.read_text().split()) < 4) and time.monotonic() < deadline:
            time.sleep(0.1)
        start = time.monotonic()
        step = doctor_step(within={p.pid for p in procs})
        assert time.monotonic() - start < 10
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert step is not None
    assert [(o["rank"], o["pid"]) for o in step["odd"]] == [(2, procs[2].pid)]
    assert step["odd"][0]["frame"].startswith("slow_reward (<string>:")
    text = format_report(DoctorReport(stacks=step))
    assert "Stacks of 4 training process(es) on this node: The odd one out is rank 2" in text
    assert f"[odd] rank 2 (pid {procs[2].pid}" in text


def test_a_yama_scope_that_forbids_ptrace_is_said_before_any_dump() -> None:
    from kb.hangs.dump import ptrace_refused

    assert ptrace_refused(scope=0, euid=1000) == "" and ptrace_refused(scope=1, euid=1000) == ""
    assert ptrace_refused(scope=2, euid=0) == ""
    msg = ptrace_refused(scope=2, euid=1000)
    assert "kernel.yama.ptrace_scope is 2" in msg and "sysctl kernel.yama.ptrace_scope=0" in msg and "SYS_PTRACE" in msg
    assert "ptrace_scope is 3" in ptrace_refused(scope=3, euid=0)


def test_a_fork_of_a_ray_actor_is_its_child_not_a_second_actor(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 20, 5, ["ray::TaskRunner.run"], {})
    _fake_proc(tmp_path, 21, 20, ["ray::TaskRunner.run"], {})  # a forked DataLoader worker keeps the title
    found = find_training_processes(proc=tmp_path, uid=os.getuid())
    assert [(p.pid, p.role, p.name) for p in found] == [(20, "ray-actor", "TaskRunner pid=20"), (21, "worker", "TaskRunner pid=20 child pid=21")]


@needs_spy
def test_the_command_says_when_there_is_nothing_to_dump(capsys: pytest.CaptureFixture[str]) -> None:
    from kb.cli import main

    idle = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])  # no RANK, no Ray: not a training process
    try:
        assert main(["stacks", "--under", str(idle.pid)]) == 1
        assert "No training process of this user found on this node" in capsys.readouterr().out
    finally:
        idle.kill()
        idle.wait()
    assert main(["stacks", "--pid", str(idle.pid)]) == 2
    assert f"no process {idle.pid} on this node" in capsys.readouterr().err
    assert main(["stacks", "--samples", "0"]) == 2
    assert "--samples must be between 1 and 10" in capsys.readouterr().err
