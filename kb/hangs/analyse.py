"""From stack dumps to an answer: groups of identical stacks, the odd one out, where it is, the entry to open.

What an engineer does with `py-spy dump` of every rank, done for them:
- frames normalised (function and file basename; line numbers out) and identical main-thread
  stacks grouped, largest group first, each with its innermost meaningful frame (thread, queue,
  selector and decorator wrappers skipped);
- where a stack is, in words: a collective (which one), `ray.get`/`ray.wait`, the rollout engine,
  reward code, data loading, network I/O, a lock, an idle worker, user code;
- the odd one out: among peers of one role (ranks, actors of one class, DataLoader workers), the
  processes outside the largest group; across roles, the busy process others wait for (the
  actor running user code while the driver waits in `ray.get`, the DataLoader worker stuck in
  `__getitem__` while its rank waits for a batch);
- a process whose stack changes between samples is making progress and is never the odd one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kb.hangs.dump import Dump, Frame
from kb.hangs.find import ROLE_ACTOR, ROLE_CHILD, TrainingProcess

COLLECTIVES = {
    "all_reduce", "all_reduce_coalesced", "broadcast", "barrier", "monitored_barrier", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_gather_coalesced", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
    "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "broadcast_object_list", "send", "recv", "isend",
    "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list",
}
INIT_FUNCS = {"init_process_group", "rendezvous", "_store_based_barrier", "_create_c10d_store", "_env_rendezvous_handler",
              "_tcp_rendezvous_handler", "new_group"}
# Frames that only wrap a wait: skipped when naming the innermost meaningful frame.
WRAPPER_FILES = {"threading.py", "selectors.py", "queue.py", "queues.py", "connection.py", "synchronize.py", "functools.py",
                 "contextlib.py", "c10d_logger.py", "client_mode_hook.py", "auto_init_hook.py", "_contextlib.py",
                 "tracing_helper.py", "events.py", "base_events.py", "popen_fork.py", "socket.py", "ssl.py"}
LOCK_FUNCS = {"acquire", "wait", "_wait_for_tstate_lock", "join", "__enter__"}
IO_FILE = re.compile(r"(?:^|/)(?:requests|urllib3|httpx|httpcore|aiohttp|grpc)/|(?:^|/)http/client\.py$|(?:^|/)(?:socket|ssl)\.py$")
LIBRARY_PATH = re.compile(r"/(?:site|dist)-packages/|/lib/python\d\.\d+/|^<frozen")
KNOWN_PACKAGES = re.compile(r"^(?:torch|ray|vllm|sglang|verl|transformers|numpy|tqdm|hydra|omegaconf|concurrent|asyncio|"
                            r"multiprocessing|threading|queue|selectors|http|urllib3|requests|importlib|runpy|ssl|socket|"
                            r"json|logging|subprocess|contextlib|functools)(?:/|\.py$)")

# kinds a process waits in (another process's work ends it) vs. works in
WAITING_KINDS = {"collective", "ray-wait", "data-wait", "idle", "init"}

FAMILY = "training-hang-no-progress"
ENTRIES = {
    "collective": "nccl-watchdog-timeout",
    "collective-mismatch": "nccl-watchdog-timeout",
    "init": "distributed-init-rendezvous-hang",
    "engine": "rollout-stuck-dataflow-register",
    "reward": "rollout-stuck-dataflow-register",
    "reward-io": "reward-server-unreachable-from-workers",
    "data": "dataloader-worker-hang",
    "data-wait": "dataloader-worker-hang",
}


@dataclass
class Where:
    kind: str  # collective, init, ray-wait, engine, reward, data, data-wait, io, lock, idle, user, unknown
    words: str  # "in the collective all_reduce"
    frame: Frame | None = None  # the innermost meaningful frame
    caller: Frame | None = None  # the innermost frame of the user's own code, when another frame is named
    op: str = ""  # the collective, or get/wait
    io: bool = False  # network I/O inside (reward code calling a server)

    @property
    def waiting(self) -> bool:
        return self.kind in WAITING_KINDS

    def describe(self) -> str:
        out = self.words
        if self.frame is not None:
            out += f": {self.frame.show()}"
        if self.caller is not None and self.caller != self.frame:
            out += f", called from {self.caller.show()}"
        return out


def _bare(f: Frame) -> str:
    """The function without the class py-spy puts before it (`_MultiProcessingDataLoaderIter._next_data`)."""
    return f.function.rsplit(".", 1)[-1]


def _is_library(f: Frame) -> bool:
    return bool(LIBRARY_PATH.search(f.path)) or bool(KNOWN_PACKAGES.match(f.file))


def _meaningful(frames: list[Frame]) -> Frame | None:
    for f in frames:
        if f.basename not in WRAPPER_FILES and not f.function.startswith("<"):
            return f
    return frames[0] if frames else None


def _first_user(frames: list[Frame]) -> Frame | None:
    return next((f for f in frames if not _is_library(f) and not f.function.startswith("<module")), None)


def _is_reward(f: Frame) -> bool:
    return bool(re.search(r"reward|compute_score|reward_score", f"{f.function} {f.file}", re.I))


def classify(frames: list[Frame], idle: bool = False) -> Where:
    """Where a stack (innermost frame first) is, in words; `idle`: py-spy saw the thread off the CPU."""
    if not frames:
        return Where("unknown", "no Python frames (native code, or the interpreter is starting or ending)")
    user = _first_user(frames)
    for f in frames:
        if f.basename == "distributed_c10d.py" and _bare(f) in COLLECTIVES:
            return Where("collective", f"in the collective {_bare(f)}", f, user, _bare(f))
        if _bare(f) in INIT_FUNCS and ("distributed" in f.file or "rendezvous" in f.file):
            return Where("init", "in distributed initialisation (rendezvous)", f, user, f.function)
        if f.file.endswith("ray/_private/worker.py") and _bare(f) in ("get", "get_objects", "wait"):
            op = "wait" if _bare(f) == "wait" else "get"
            return Where("ray-wait", f"in ray.{op}, waiting for Ray tasks or actors", f, user, op)
    # contexts that name the work whatever its innermost frame is
    engine = next((f for f in frames if re.search(r"(?:^|/)(?:vllm|sglang)/", f.path or f.file)), None)
    reward = next((f for f in frames if _is_reward(f)), None)
    io = next((f for f in frames if IO_FILE.search(f.file) or IO_FILE.search(f.path)), None)
    in_worker = any(_bare(f) == "_worker_loop" and "torch/utils/data" in f.file for f in frames)
    inner = _meaningful(frames)
    if reward is not None:
        if io is not None:
            return Where("reward", "in reward code, waiting on the network", reward, user, io=True)
        return Where("reward", "in reward code", _first_user(frames) or reward, reward)
    if engine is not None:
        return Where("engine", "in the rollout engine (vLLM/SGLang)", inner, user)
    if in_worker:
        if inner is not None and _bare(inner) == "_worker_loop":
            return Where("idle", "an idle DataLoader worker, waiting for work", inner)
        return Where("data", "in a DataLoader worker, loading a sample", user or inner, user)
    data_wait = next((f for f in frames if "torch/utils/data" in f.file and _bare(f) in ("_try_get_data", "_get_data", "_next_data")), None)
    if data_wait is not None:
        return Where("data-wait", "waiting for a batch from the DataLoader workers", data_wait, user)
    if frames[0].file.endswith("ray/_private/worker.py") and _bare(frames[0]) == "main_loop" or (
            inner is not None and _bare(inner) == "main_loop" and "ray" in inner.file):
        return Where("idle", "an idle Ray worker, waiting for a task", inner)
    if io is not None:
        return Where("io", "in network I/O", io, user, io=True)
    if frames[0].basename in ("threading.py", "synchronize.py") and _bare(frames[0]) in LOCK_FUNCS or "filelock" in frames[0].file:
        return Where("lock", "waiting on a lock or event", inner, user)
    if any(f.file.startswith("<frozen importlib") for f in frames):
        return Where("import", "starting up (importing modules)", user or inner)
    if user is not None:
        return Where("user", "in user code" + (" (off the CPU: sleeping or blocked in native code)" if idle else ""), user)
    return Where("unknown", "in library code", inner)


def stack_key(frames: list[Frame]) -> tuple[str, ...]:
    return tuple(f.key() for f in frames)


@dataclass
class ProcessStack:
    proc: TrainingProcess
    frames: list[Frame]  # the main thread, innermost first (the last sample)
    where: Where
    moving: bool = False  # its stack changed between samples
    error: str = ""

    @property
    def peers_key(self) -> str:
        if self.proc.role == ROLE_ACTOR:
            return f"actor:{self.proc.actor}"
        return self.proc.role

    def to_odd(self, why: str) -> dict[str, Any]:
        return {"rank": self.proc.rank, "pid": self.proc.pid, "node": self.proc.node, "name": self.proc.name,
                "role": self.proc.role, "where": self.where.describe(), "kind": self.where.kind,
                "frame": self.where.frame.show() if self.where.frame else None,
                "caller": self.where.caller.show() if self.where.caller else None, "why": why}


@dataclass
class Group:
    members: list[ProcessStack]

    @property
    def frames(self) -> list[Frame]:
        return self.members[0].frames

    def to_dict(self) -> dict[str, Any]:
        w = self.members[0].where
        return {"ranks": [m.proc.rank for m in self.members], "pids": [m.proc.pid for m in self.members],
                "names": [m.proc.name for m in self.members], "nodes": sorted({m.proc.node for m in self.members}),
                "frames": [f.key() for f in self.frames], "where": w.describe(), "kind": w.kind,
                "frame": w.frame.show() if w.frame else None, "moving": [m.proc.pid for m in self.members if m.moving]}


@dataclass
class Analysis:
    stacks: list[ProcessStack]
    groups: list[Group]
    odd: list[tuple[ProcessStack, str]]
    verdict: str
    entry: str
    unread: list[ProcessStack] = field(default_factory=list)  # no stack: why in .error

    def entries(self) -> list[str]:
        """The entry to open first, then the one a collective wait leads to, then the family entry."""
        out = [self.entry] if self.entry else []
        if any(s.where.kind == "collective" for s in self.stacks):
            out.append(ENTRIES["collective"])
        out.append(FAMILY)
        return list(dict.fromkeys(out))

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [g.to_dict() for g in self.groups], "odd": [p.to_odd(why) for p, why in self.odd],
                "verdict": self.verdict, "entry": self.entry,
                "entries": self.entries(),
                "processes": [{**s.proc.to_dict(), "where": s.where.describe() if not s.error else None,
                               "kind": s.where.kind if not s.error else None,
                               "frame": s.where.frame.show() if s.where.frame and not s.error else None,
                               "moving": s.moving, "error": s.error} for s in self.stacks + self.unread]}


def _names(stacks: Iterable[ProcessStack]) -> str:
    items = list(stacks)
    ranks = [s.proc.rank for s in items]
    if items and all(s.proc.role not in (ROLE_ACTOR, ROLE_CHILD, "dataloader-worker") for s in items) and all(r is not None for r in ranks):
        return ("rank " if len(items) == 1 else "ranks ") + ", ".join(str(r) for r in sorted(r for r in ranks if r is not None))
    return ", ".join(s.proc.name for s in items)


def _main_frames(d: Dump) -> list[Frame]:
    t = d.main_thread()
    return list(t.frames) if t is not None else []


def build(procs: list[TrainingProcess], dumps: dict[int, list[Dump]]) -> list[ProcessStack]:
    """One ProcessStack per process from its samples (the last one read is the one shown)."""
    out = []
    for p in procs:
        samples = [d for d in dumps.get(p.pid, []) if not d.error and d.threads]
        if not samples:
            errs = [d.error for d in dumps.get(p.pid, []) if d.error]
            out.append(ProcessStack(p, [], Where("unknown", "no stack"), error=errs[-1] if errs else "no stack read"))
            continue
        main = samples[-1].main_thread()
        frames = list(main.frames) if main is not None else []
        exact = {tuple((f.function, f.file, f.line) for f in _main_frames(d)) for d in samples}
        if any(_bare(f) == "_worker_loop" and "torch/utils/data" in f.file for f in frames) and p.role in (ROLE_CHILD, "process"):
            p.role = "dataloader-worker"
        out.append(ProcessStack(p, frames, classify(frames, idle=main is not None and main.idle), moving=len(exact) > 1))
    return out


def _group(stacks: list[ProcessStack]) -> list[Group]:
    by: dict[tuple[str, ...], list[ProcessStack]] = {}
    for s in stacks:
        by.setdefault(stack_key(s.frames), []).append(s)
    groups = [Group(m) for m in by.values()]
    groups.sort(key=lambda g: (-len(g.members), min(m.proc.rank if m.proc.rank is not None else 1 << 30 for m in g.members),
                               min(m.proc.pid for m in g.members)))
    return groups


def _odd_among_peers(peers: list[ProcessStack]) -> list[tuple[ProcessStack, str]]:
    groups = _group(peers)
    if len(groups) < 2:
        return []
    top = groups[0]
    unique_top = len(top.members) > len(groups[1].members)
    rest = [m for g in groups[1:] for m in g.members]
    if not unique_top:
        busy = [m for m in peers if not m.where.waiting]
        if busy and len(busy) < len(peers):
            rest = busy
            top = Group([m for m in peers if m.where.waiting])
        elif all(m.where.kind == "collective" for m in peers):
            rest = [m for g in groups[1:] for m in g.members]
        else:
            return []
    tw = top.members[0].where
    out = []
    for m in rest:
        if tw.waiting and not m.where.waiting:
            verb = "waits" if len(top.members) == 1 else "wait"
            why = (f"{m.proc.name} is not in the collective the others wait in ({_names(top.members)} wait in {tw.op})"
                   if tw.kind == "collective" else f"{m.proc.name} is busy {m.where.words} while {_names(top.members)} {verb} ({tw.words})")
        elif tw.kind == "collective" and m.where.kind == "collective" and m.where.op != tw.op:
            why = (f"{m.proc.name} waits in {m.where.op} while {_names(top.members)} wait in {tw.op}: "
                   "the ranks called different collectives")
        elif tw.kind == "collective" and m.where.kind != "collective":
            why = f"{m.proc.name} is not in the collective the others wait in ({_names(top.members)} wait in {tw.op})"
        else:
            why = f"{m.proc.name} is not where its peers are ({_names(top.members)}: {tw.words})"
        out.append((m, why))
    return out


def analyse(procs: list[TrainingProcess], dumps: dict[int, list[Dump]]) -> Analysis:
    stacks_all = build(procs, dumps)
    stacks = [s for s in stacks_all if not s.error]
    unread = [s for s in stacks_all if s.error]
    groups = _group(stacks)
    stable = [s for s in stacks if not s.moving]
    odd: list[tuple[ProcessStack, str]] = []
    peers: dict[str, list[ProcessStack]] = {}
    for s in stable:
        peers.setdefault(s.peers_key, []).append(s)
    for key in sorted(peers, key=lambda k: (k != "rank", k)):
        if len(peers[key]) >= 2:
            odd.extend(_odd_among_peers(peers[key]))
    if not odd:
        waiting = [s for s in stable if s.where.waiting and s.where.kind != "idle"]
        busy = [s for s in stable if not s.where.waiting and s.where.kind != "unknown"]
        if waiting and busy:
            w = waiting[0]
            odd = [(b, f"{b.proc.name} is busy {b.where.words} while {_names(waiting)} "
                       f"{'waits' if len(waiting) == 1 else 'wait'} ({w.where.words})") for b in busy]
    verdict, entry = _verdict(stacks, stable, odd, groups, unread)
    return Analysis(stacks, groups, odd, verdict, entry, unread)


def _verdict(stacks: list[ProcessStack], stable: list[ProcessStack], odd: list[tuple[ProcessStack, str]],
             groups: list[Group], unread: list[ProcessStack]) -> tuple[str, str]:
    if not stacks:
        why = f" ({unread[0].error})" if unread else ""
        return f"No stack could be read{why}.", ""
    if odd:
        first, why = odd[0]
        w = first.where
        if w.kind == "collective":
            kind = "collective-mismatch"
        elif w.kind == "reward" and w.io:
            kind = "reward-io"
        else:
            kind = w.kind
        more = f" Also odd: {', '.join(p.proc.name for p, _ in odd[1:4])}." if len(odd) > 1 else ""
        frame = f" Its frame: {w.frame.show()}" + (f", called from {w.caller.show()}" if w.caller and w.caller != w.frame else "") + "." if w.frame else ""
        # the processes that wait for it elsewhere (the driver in ray.get while its actor is stuck)
        others = [s for s in stable if s.where.kind in ("ray-wait", "data-wait") and all(s is not o for o, _ in odd)
                  and s.peers_key != first.peers_key]
        waits = "".join(f" {s.proc.name} waits {s.where.words.removeprefix('waiting ')} ({s.where.caller.show() if s.where.caller else s.where.frame.show() if s.where.frame else '?'})."
                        for s in others[:2])
        return f"The odd one out is {first.proc.name} on {first.proc.node}: {why}.{frame}{waits}{more}", ENTRIES.get(kind, FAMILY)
    moving = [s for s in stacks if s.moving]
    if len(stable) < 2 and moving:
        return (f"No odd one out: the stacks of {len(moving)} of the {len(stacks)} processes changed between samples, "
                "so they are making progress (if the job still looks stuck, it is slow, not hung)."), ""
    if len(groups) == 1 or len({stack_key(s.frames) for s in stable}) == 1:
        w = stable[0].where if stable else stacks[0].where
        if w.kind == "collective":
            return (f"No odd one out on this node: {_names(stable)} all wait in {w.op}. The process they wait for is "
                    "not here: a rank on another node, or one that has died (its log says which)."), ENTRIES["collective"]
        if w.kind == "ray-wait":
            return ("No odd one out on this node: every process waits in ray.get/ray.wait; the task they wait "
                    "for runs on another node (run kb doctor --ray ADDRESS --stacks)."), FAMILY
        return f"No odd one out: all {len(stable)} processes are in the same place ({w.describe()}).", ""
    return (f"No odd one out: the {len(groups)} groups are not peers of each other (different roles), and none "
            "is waiting on a busy one."), ""


def format_analysis(a: Analysis, max_frames: int = 8) -> str:
    out: list[str] = []
    out.append(f"{len(a.stacks)} process(es), {len(a.groups)} group(s) of identical stacks:")
    for i, g in enumerate(a.groups, 1):
        moving = [m for m in g.members if m.moving]
        out.append(f"  [{i}] {len(g.members)} x {_names(g.members)} (pids {', '.join(str(m.proc.pid) for m in g.members)})"
                   + (f"  [{len(moving)} moving]" if moving else ""))
        out.append(f"      {g.members[0].where.describe()}")
        for f in g.frames[:max_frames]:
            out.append(f"        {f.key()}")
        if len(g.frames) > max_frames:
            out.append(f"        ... {len(g.frames) - max_frames} outer frames")
    for s in a.unread:
        out.append(f"  not read: {s.proc.name} (pid {s.proc.pid}): {s.error}")
    if a.odd:
        out.append("Odd one out:")
        for s, why in a.odd:
            out.append(f"  {s.proc.name} (pid {s.proc.pid}, {s.proc.node}): {why}")
            out.append(f"    {s.where.describe()}")
    else:
        out.append("Odd one out: none.")
    out.append(f"Verdict: {a.verdict}")
    if a.entry:
        rest = [e for e in a.entries() if e != a.entry]
        out.append(f"Open: kb show {a.entry}" + (f"  (then: {', '.join('kb show ' + e for e in rest)})" if rest else ""))
    else:
        out.append(f"If the job still hangs: kb show {FAMILY}")
    return "\n".join(out)


class StacksUnavailable(Exception):
    """py-spy is missing: one line for the user, with the install line."""


def stacks_report(pids: list[int] | None = None, within: set[int] | None = None, samples: int = 3, interval_s: float = 0.5,
                  deadline_s: float = 5.0, procs: list[TrainingProcess] | None = None) -> Analysis:
    """Find (or take) the training processes, dump each `samples` times, analyse. Raises StacksUnavailable."""
    from kb.hangs.dump import INSTALL_HINT, ptrace_refused, py_spy_path, sample
    from kb.hangs.find import find_training_processes

    exe = py_spy_path()
    if exe is None:
        raise StacksUnavailable(INSTALL_HINT)
    refused = ptrace_refused()
    if refused:
        raise StacksUnavailable(refused)
    if procs is None:
        procs = find_training_processes(pids, within=within)
    dumps = sample([p.pid for p in procs], exe, samples=samples, interval_s=interval_s, deadline_s=deadline_s)
    return analyse(procs, dumps)


def doctor_step(samples: int = 2, interval_s: float = 0.3, deadline_s: float = 3.0,
                within: set[int] | None = None) -> dict[str, Any] | None:
    """`kb doctor`'s stacks step: None when no training process runs here; never raises.

    The analysis as `kb stacks --json` writes it, or {"error": why} (py-spy missing, not permitted).
    """
    try:
        from kb.hangs.find import find_training_processes

        procs = find_training_processes(within=within)
        if not procs:
            return None
        analysis = stacks_report(procs=procs, samples=samples, interval_s=interval_s, deadline_s=deadline_s)
        if not analysis.stacks and analysis.unread:
            return {"error": analysis.unread[0].error, "processes": len(procs)}
        return analysis.to_dict()
    except StacksUnavailable as exc:
        return {"error": str(exc)}
    except Exception as exc:  # the doctor's other findings matter more than this step
        return {"error": f"kb stacks failed: {type(exc).__name__}: {exc}"}


def format_step(result: dict[str, Any], where: str = "this node") -> list[str]:
    """The doctor's lines for the stacks step."""
    if result.get("error"):
        return [f"Stacks of the training processes on {where}: not read ({result['error']})."]
    out = [f"Stacks of {len(result.get('processes', []))} training process(es) on {where}: {result.get('verdict', '')}"]
    for o in result.get("odd", []):
        out.append(f"  [odd] {o.get('name')} (pid {o.get('pid')}, {o.get('node')}): {o.get('where')}")
    if result.get("entry"):
        out.append(f"      see: kb show {result['entry']}")
    out.append("      groups and frames: kb stacks")
    return out


def cluster_odd(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Across the nodes of `kb doctor --ray --stacks`: each node's odd ones; where no node has one, the
    busy processes of one node while processes of another wait in ray.get (the driver on the head node,
    the stuck actor on a worker node)."""
    answers = [n["stacks"] for n in nodes if isinstance(n.get("stacks"), dict)]
    odd = [dict(o) for a in answers for o in a.get("odd", []) if isinstance(o, dict)]
    if odd:
        return odd
    procs = [p for a in answers for p in a.get("processes", []) if isinstance(p, dict) and not p.get("moving") and p.get("kind")]
    waiting = [p for p in procs if p["kind"] == "ray-wait"]
    busy = [p for p in procs if p["kind"] not in WAITING_KINDS and p["kind"] != "unknown"]
    if not waiting:
        return []
    w = waiting[0]
    return [{**{k: b.get(k) for k in ("rank", "pid", "node", "node_id", "name", "role", "where", "kind", "frame")},
             "why": f"{b.get('name')} is busy {b.get('where')} while {w.get('name')} on {w.get('node')} waits in ray.get"}
            for b in busy]
