"""`kb doctor --ray ADDRESS`: run the doctor on every node of an existing Ray cluster.

The driver (this module, on the user's machine) decides trust and plans every
check exactly as `kb doctor` does, then sends the final code as data to one
Ray task per alive node (hard node affinity, zero CPUs and GPUs, so it runs
beside a busy job). On the node, kb.cluster.node gathers the facts and runs
that code with kb's runner. Case files are never read on a node.

kb itself must be importable on a node for the task to run there. A small
probe asks each node first; where kb is missing, or its node-side code is not
the same as this copy's, this copy of kb is shipped for that task with Ray's
`runtime_env={"py_modules": [...]}` and the report says so.

Ray is optional (`pip install 'kb-verl[cluster]'`) and imported only here,
only when `--ray` is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.cases.casefile import Case
from kb.checks.doctor import doctor_checks, split_by_trust
from kb.checks.runner import plan_check
from kb.cluster.node import ShippedCheck
from kb.cluster.report import build_report

INSTALL_HINT = "kb doctor --ray needs Ray, which is not installed: pip install 'kb-verl[cluster]'"
NODE_TIMEOUT = 120.0
# The modules a node imports to answer (paths under kb/, without .py); their text must be this copy's, or kb is shipped.
NODE_MODULES = ("__init__", "cluster/node", "checks/runner", "checks/envreport", "checks/envpins", "checks/needs", "cases/casefile", "cases/params", "cases/blocks", "cases/check_code", "core/safe_text", "cases/frontmatter", "hangs/find", "hangs/dump", "hangs/analyse")


class ClusterError(Exception):
    """Cannot reach the cluster, or a bad --ray value: one line for the user."""


def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


def resolve_address(value: str, environ: dict[str, str] | None = None) -> str:
    """`auto` means the RAY_ADDRESS variable; anything else is passed to ray.init as is."""
    environ = dict(os.environ) if environ is None else environ
    if value.strip().lower() == "auto":
        address = environ.get("RAY_ADDRESS", "").strip()
        if not address:
            raise ClusterError("--ray auto: RAY_ADDRESS is not set; give the address, e.g. --ray 10.0.0.1:6379 or --ray ray://head:10001")
        return address
    if not value.strip():
        raise ClusterError("--ray: empty address")
    return value.strip()


CONNECT_TIMEOUT = 5.0
PROBE_SHARE = 0.4  # of --node-timeout, for the probe that finds kb on each node
MARGIN_SHARE = 0.15  # of --node-timeout: a node stops its checks this early, to answer in time


def host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of `host:port`, `[v6]:port` or `ray://host:port`; None when there is no port to try."""
    rest = address.split("://", 1)[1] if "://" in address else address
    rest = rest.split("/", 1)[0]
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
    else:
        host, _, port = rest.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A TCP connect first: ray.init retries an address where nothing listens for minutes."""
    target = host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {why} (is the head node up, and is that its GCS address?)") from exc


def kb_dir() -> Path:
    return Path(__file__).resolve().parents[1]  # the kb package, not kb/cluster


def node_code_hash(root: Path | None = None) -> str:
    """SHA-256 of the node-side modules of the kb at `root` (this copy by default)."""
    root = kb_dir() if root is None else root
    h = hashlib.sha256()
    for name in NODE_MODULES:
        try:
            h.update(name.encode() + b"\0" + (root / f"{name}.py").read_bytes() + b"\0")
        except OSError:
            h.update(name.encode() + b"\0<missing>\0")
    return h.hexdigest()


def ship_checks(cases: list[Case], python: str | None) -> tuple[list[ShippedCheck], list[dict[str, Any]]]:
    """(the trusted doctor checks, planned here with their final code; the doctor checks not run, as `kb doctor` lists them)."""
    todo, not_trusted = split_by_trust(doctor_checks(cases))
    shipped = []
    for case, check in todo:
        plan = plan_check(case, check, None, python)
        if not plan.ready:  # a default that does not fit its type: left out, as run_doctor would raise
            continue
        shipped.append(ShippedCheck(case.id, check.name, check.lang, plan.code, check.timeout, tuple(check.needs), dict(plan.values)))
    return shipped, [n.to_dict() for n in not_trusted]


def _probe_fn():  # type: ignore[no-untyped-def]
    # Defined inside a function so that Ray pickles it by value: it must run on
    # a node where kb may not be importable. Only the standard library here.
    def probe(names: tuple[str, ...]) -> dict[str, Any]:
        import hashlib as _h
        import importlib.util as _u
        import socket as _s
        from pathlib import Path as _P

        out: dict[str, Any] = {"host": _s.gethostname(), "kb": None, "hash": None}
        try:
            spec = _u.find_spec("kb")
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
            return out
        if spec is None or not spec.submodule_search_locations:
            return out
        root = _P(list(spec.submodule_search_locations)[0])
        out["kb"] = str(root)
        h = _h.sha256()
        for name in names:
            try:
                h.update(name.encode() + b"\0" + (root / f"{name}.py").read_bytes() + b"\0")
            except OSError:
                h.update(name.encode() + b"\0<missing>\0")
        out["hash"] = h.hexdigest()
        return out

    return probe


def _node_fn():  # type: ignore[no-untyped-def]
    def answer(payload: dict[str, Any]) -> dict[str, Any]:
        from kb.cluster.node import node_report

        return node_report(payload)

    return answer


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Ray's driver prints cluster events (a raylet that died) on stdout; keep stdout for the report."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def _gather(ray: Any, refs: dict[Any, str], deadline: float,
            silent: str = "no answer within the node timeout") -> tuple[dict[str, Any], dict[str, str]]:
    """(node id -> answer, node id -> why no answer) by `deadline`; what is left is cancelled."""
    answers: dict[str, Any] = {}
    failed: dict[str, str] = {}
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        done, pending = ray.wait(pending, num_returns=1, timeout=left)
        for ref in done:
            node = refs[ref]
            try:
                answers[node] = ray.get(ref, timeout=10)
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                failed[node] = f"{type(exc).__name__}: {first}"[:300]
    for ref in pending:
        failed[refs[ref]] = silent
        try:
            ray.cancel(ref, force=True)
        except Exception:
            pass
    return answers, failed


def _on_node(stacks: Any, host: str, node_id: str) -> Any:
    """A node's stacks answer with each process's node named as the report names nodes (host and node id:
    several Ray nodes may share a host)."""
    if not isinstance(stacks, dict):
        return stacks
    for item in stacks.get("odd", []) + stacks.get("processes", []):
        if isinstance(item, dict):
            item["node"] = host
            item["node_id"] = node_id
    return stacks


def run_cluster_doctor(address: str, cases: list[Case], python: str | None = None,
                       node_timeout: float = NODE_TIMEOUT, stacks: bool = False) -> dict[str, Any]:
    """Connect to the cluster at `address`, ask every alive node, return the report object (`--json`)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    shipped, not_run = ship_checks(cases, python)
    check_reachable(address)
    with _stdout_to_stderr():
        return _run(ray, NodeAffinitySchedulingStrategy, address, shipped, not_run, python, node_timeout, stacks)


def _run(ray: Any, affinity: Any, address: str, shipped: list[ShippedCheck], not_run: list[dict[str, Any]],
         python: str | None, node_timeout: float, stacks: bool = False) -> dict[str, Any]:
    start = time.monotonic()
    deadline = start + node_timeout
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except Exception as exc:
        raise ClusterError(f"could not connect to the Ray cluster at {address}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    try:
        nodes = _alive_nodes(ray)
        hosts = {n["NodeID"]: n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?") for n in nodes}

        def on(node_id: str) -> Any:
            return affinity(node_id=node_id, soft=False)

        probe = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(_probe_fn())
        probes = {probe.options(scheduling_strategy=on(nid)).remote(NODE_MODULES): nid for nid in hosts}
        # The probe only starts a worker: a node silent for this long is not waited for,
        # so one stuck node cannot eat the time of the others' checks.
        probe_s = max(10.0, PROBE_SHARE * node_timeout)
        probed, unreachable = _gather(ray, probes, min(deadline, start + probe_s),
                                      f"no answer to the probe within {probe_s:.0f} s")
        sources: dict[str, str] = {}

        mine = node_code_hash()
        ship_to = {nid for nid, info in probed.items() if info.get("hash") != mine}
        if ship_to:
            # Ray uploads a local folder only for a whole job (ray.init), not for one task,
            # so reconnect with this copy of kb as the job's py_modules. The nodes whose kb
            # has the same node-side code then run this copy too, which is the same code.
            # (A task-level `py_modules: []` to keep theirs fails in Ray 2.x's runtime env agent.)
            ray.shutdown()
            ray.init(address=address, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"py_modules": [str(kb_dir())]})
        answer = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(_node_fn())
        tasks: dict[Any, str] = {}
        for nid, info in probed.items():
            options: dict[str, Any] = {"scheduling_strategy": on(nid)}
            if nid in ship_to:
                why = "kb not importable on the node" if not info.get("kb") else f"the node's kb at {info['kb']} differs from this copy"
                sources[nid] = f"{why}: this copy shipped with runtime_env py_modules"
            elif ship_to:
                sources[nid] = "kb on the node has the same code; this copy shipped to the job ran"
            else:
                sources[nid] = "kb on the node, same code as this copy"
            payload = {"python": python, "checks": [c.to_dict() for c in shipped], "stacks": stacks,
                       "budget_s": max(1.0, deadline - time.monotonic()), "margin_s": MARGIN_SHARE * node_timeout,
                       "deadline_epoch": time.time() + (deadline - time.monotonic())}
            tasks[answer.options(**options).remote(payload)] = nid
        answers, failed = _gather(ray, tasks, deadline)
        unreachable.update(failed)
    finally:
        ray.shutdown()  # only this driver's connection; the cluster keeps running

    report_nodes = []
    for nid in hosts:
        if nid not in answers:
            continue
        a = answers[nid]
        report_nodes.append({"node_id": nid, "host": a.get("host") or hosts[nid], "address": next(
            (n.get("NodeManagerAddress") for n in nodes if n["NodeID"] == nid), None), "kb_source": f"{sources.get(nid, '')}; ran from {a.get('kb', '?')}",
            "duration_s": a.get("duration_s"), "facts": a.get("facts", {}), "checks": a.get("checks", []),
            **({"stacks": _on_node(a.get("stacks"), a.get("host") or hosts[nid], nid)} if stacks else {})})
    unreachable_list = [{"node_id": nid, "host": hosts.get(nid, "?"), "reason": why} for nid, why in unreachable.items()]
    report = build_report(address, report_nodes, unreachable_list, not_run, node_timeout)
    if stacks:
        from kb.hangs.analyse import cluster_odd

        report["stacks_odd"] = cluster_odd(report_nodes)
    return report
