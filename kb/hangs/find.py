"""Which processes on this node belong to a training job: read from /proc, the current user's only.

A process is taken when it carries a marker of the stack: torchrun/DDP ranks (RANK and
WORLD_SIZE or LOCAL_RANK in its environment), Ray workers (the process title `ray::Class.method`,
idle ones left out) and the Ray driver (a Python process that loaded Ray's `_raylet` library, runs
Ray's core worker thread `worker.io`, and is not one of Ray's own daemons), vLLM/SGLang engine processes (their titles `VLLM::EngineCore`,
`sglang::scheduler`, or a `vllm serve` / `sglang.launch_server` command line), and the Python
children of any of these (DataLoader workers and the like; the stack dump says which).

Ranks are named as the log reader names them: RANK from the process environment (`rank 2`), a
Ray actor by its log prefix (`WorkerDict pid=2101`). Nothing here writes anything or signals anyone.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
MAX_ENVIRON = 1 << 20  # an environment larger than this is not read past it
RAY_DAEMONS = re.compile(r"ray/(?:dashboard|_private/|autoscaler|util/client)|raylet|gcs_server")
ENGINE_TITLE = re.compile(r"^(?:VLLM::|sglang::)", re.I)
ENGINE_CMD = re.compile(r"\bvllm\b.*\bserve\b|\bvllm\.entrypoints\b|\bsglang\.launch_server\b")
RAY_SYSTEM_TITLES = {"IDLE", "raylet", "gcs_server", "DashboardAgent", "RuntimeEnvAgent", "JobSupervisor", "core_worker"}
RAY_TITLE = re.compile(r"^ray::([A-Za-z_][\w]*)(?:\.([\w.]+))?")

ROLE_RANK = "rank"
ROLE_ACTOR = "ray-actor"
ROLE_DRIVER = "ray-driver"
ROLE_ENGINE = "engine"
ROLE_CHILD = "worker"  # a Python child of a training process; the stack may say "dataloader-worker"


@dataclass
class TrainingProcess:
    pid: int
    ppid: int
    role: str
    title: str  # the command line, shortened
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    actor: str | None = None  # Ray actor class (WorkerDict, TaskRunner)
    method: str | None = None  # the Ray task it runs (actor_rollout_generate_sequences)
    parent_name: str | None = None  # for a child: the name of the training process it belongs to
    node: str = field(default_factory=socket.gethostname)

    @property
    def name(self) -> str:
        """How the log reader (and the user) names it: `rank 2`, `WorkerDict pid=2101`, `driver pid=7`."""
        if self.role == ROLE_ACTOR and self.actor:
            base = f"{self.actor} pid={self.pid}"
            return f"{base} (rank {self.rank})" if self.rank is not None else base
        if self.role in (ROLE_CHILD, "dataloader-worker") and self.parent_name:
            return f"{self.parent_name} {'DataLoader worker' if self.role == 'dataloader-worker' else 'child'} pid={self.pid}"
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.role == ROLE_DRIVER:
            return f"driver pid={self.pid}"
        return f"{self.role} pid={self.pid}"

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "ppid": self.ppid, "role": self.role, "name": self.name, "rank": self.rank,
                "local_rank": self.local_rank, "world_size": self.world_size, "actor": self.actor,
                "method": self.method, "node": self.node, "title": self.title}


def _read(path: Path, limit: int = 65536) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def read_environ(pid: int, proc: Path = PROC) -> dict[str, str]:
    """The distributed variables of a process's environment (empty when it cannot be read)."""
    raw = _read(proc / str(pid) / "environ", MAX_ENVIRON)
    out: dict[str, str] = {}
    for item in (raw or b"").split(b"\0"):
        key, sep, value = item.partition(b"=")
        k = key.decode("utf-8", "replace")
        if sep and k in ENV_KEYS:
            out[k] = value.decode("utf-8", "replace")[:200]
    return out


def _ppid(pid: int, proc: Path) -> int:
    raw = _read(proc / str(pid) / "stat", 4096) or b""
    # the name in parentheses may hold spaces and parentheses: read after the last ')'
    rest = raw.rsplit(b")", 1)[-1].split()
    return int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else 0


def _is_ray_driver(pid: int, proc: Path) -> bool:
    """Connected to Ray as a driver: Ray's library loaded and its core worker's I/O thread running (a
    process that merely imported ray, or started a cluster without ray.init, has no `worker.io` thread)."""
    raw = _read(proc / str(pid) / "maps", 8 << 20) or b""
    if b"_raylet.so" not in raw:
        return False
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return False
    return any((_read(t / "comm", 64) or b"").strip() == b"worker.io" for t in tasks)


def _is_python(argv: list[str]) -> bool:
    return bool(argv) and ("python" in os.path.basename(argv[0]) or argv[0].startswith("ray::"))


def classify(pid: int, argv: list[str], env: dict[str, str], proc: Path = PROC) -> TrainingProcess | None:
    """The training process `pid` is, or None (not ours to dump)."""
    cmd = " ".join(argv)
    title = cmd if len(cmd) <= 160 else cmd[:159] + "…"
    rank, local, world = _int(env.get("RANK")), _int(env.get("LOCAL_RANK")), _int(env.get("WORLD_SIZE"))
    ppid = _ppid(pid, proc)
    m = RAY_TITLE.match(argv[0]) if argv else None
    if m:
        if m.group(1) in RAY_SYSTEM_TITLES:
            return None  # a pooled Ray worker with no task: nothing to wait for
        return TrainingProcess(pid, ppid, ROLE_ACTOR, title, rank, local, world, m.group(1), m.group(2))
    if argv and ENGINE_TITLE.match(argv[0]) or ENGINE_CMD.search(cmd):
        return TrainingProcess(pid, ppid, ROLE_ENGINE, title, rank, local, world)
    if not _is_python(argv) or RAY_DAEMONS.search(cmd):
        return None
    if rank is not None and (world is not None or local is not None):
        return TrainingProcess(pid, ppid, ROLE_RANK, title, rank, local, world)
    if _is_ray_driver(pid, proc):
        return TrainingProcess(pid, ppid, ROLE_DRIVER, title, rank, local, world)
    return None


def _own_pids(proc: Path, uid: int) -> list[int]:
    pids = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return sorted(pids)


def _argv(pid: int, proc: Path) -> list[str]:
    raw = _read(proc / str(pid) / "cmdline") or b""
    parts = [p.decode("utf-8", "replace") for p in raw.split(b"\0")]
    while parts and not parts[-1]:
        parts.pop()
    if len(parts) == 1 and " " in parts[0]:
        parts = parts[0].split()  # a process title set over argv (Ray, setproctitle) is one string with spaces
    return parts


def find_training_processes(pids: list[int] | None = None, proc: Path = PROC, uid: int | None = None,
                            within: set[int] | None = None) -> list[TrainingProcess]:
    """The training processes of the current user (or exactly `pids`, whatever their markers), by pid.

    Python children of a training process are added as its workers, whatever their markers: a
    DataLoader worker inherits RANK from its rank and would otherwise look like a second rank.
    """
    # `within`: only these pids are looked at (the tree under --under PID)
    uid = os.getuid() if uid is None else uid
    me = os.getpid()
    candidates = pids if pids is not None else [p for p in _own_pids(proc, uid) if p != me and (within is None or p in within)]
    found: dict[int, TrainingProcess] = {}
    argvs: dict[int, list[str]] = {}
    for pid in candidates:
        argv = _argv(pid, proc)
        if not argv:
            continue
        argvs[pid] = argv
        env = read_environ(pid, proc)
        tp = classify(pid, argv, env, proc)
        if tp is None and pids is not None:
            tp = TrainingProcess(pid, _ppid(pid, proc), "process", " ".join(argv)[:160], _int(env.get("RANK")),
                                 _int(env.get("LOCAL_RANK")), _int(env.get("WORLD_SIZE")))
        if tp is not None:
            found[pid] = tp
    if pids is None:
        # Python children of a training process that carry no marker of their own (spawned workers)
        for pid in candidates:
            argv = argvs.get(pid, [])
            if pid not in found and _is_python(argv) and not RAY_DAEMONS.search(" ".join(argv)):
                ppid = _ppid(pid, proc)
                if ppid in found:
                    found[pid] = TrainingProcess(pid, ppid, "process", " ".join(argv)[:160])
    # a found process whose parent is also found (not a Ray worker of the raylet, not an engine) is a child
    for tp in sorted(found.values(), key=lambda t: t.pid):
        parent = found.get(tp.ppid)
        # (a Ray worker's parent is the raylet, never a training process: one under another is a fork of it,
        # e.g. a DataLoader worker of the TaskRunner, which inherits its `ray::` title)
        if parent is not None and tp.role in (ROLE_RANK, ROLE_DRIVER, ROLE_ACTOR, "process") and _is_python(argvs.get(tp.pid, [])):
            tp.role = ROLE_CHILD
            tp.actor = tp.method = None
            tp.rank = parent.rank
            tp.parent_name = parent.name
    return sorted(found.values(), key=lambda t: (t.role != ROLE_DRIVER, t.rank if t.rank is not None else 1 << 30, t.pid))


def descendants(root: int, proc: Path = PROC) -> list[int]:
    """`root` and every process below it (for `kb stacks --under PID`: one job among several)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            children.setdefault(_ppid(int(entry.name), proc), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)
