"""What `kb doctor --ray` does on each node: gather the facts and run the shipped checks.

This module runs inside a Ray task on every node, so it imports nothing of
Ray and never reads a case file: the driver decided trust and validated the
parameters (kb.cluster.driver), and sends each check as plain data (`ShippedCheck`);
the values reach the check as KB_PARAM_* environment variables, as on one node.
Here the exact code it received runs with kb's runner (own process group,
the check's timeout, capped output), and the facts come from the same
gathering functions as `kb env` (kb.checks.envreport).
"""

from __future__ import annotations

import os
import platform
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kb.cases.casefile import Case, Check
from kb.checks.envpins import check_pins, conflict_summary
from kb.checks.envreport import PACKAGES, cuda_version, gpu_info, looks_secret, nvcc_version, relevant_env, target_versions
from kb.checks.needs import target_python
from kb.checks.runner import INCONCLUSIVE, Plan, interpreter_for, run_plan

# The node's variables that matter for a distributed run: NCCL, CUDA and torch
# as in `kb env`, plus the HF_* cache and hub settings (a stale HF_HOME on one node).
HF_PREFIX = "HF_"
# Short fact names for the packages whose versions must agree across nodes.
PACKAGE_FACTS = {"nvidia-nccl-cu12": "nccl"}
NODE_WORKERS = 4  # as kb doctor on one node
DEADLINE_MARGIN_S = 5.0  # the least time the node answers before the driver gives up on it


@dataclass(frozen=True)
class ShippedCheck:
    """One check as the driver planned it: its code as parsed, and the validated parameter values."""

    case: str
    name: str
    lang: str
    code: str
    timeout: float
    needs: tuple[str, ...]
    values: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShippedCheck:
        return cls(str(data["case"]), str(data["name"]), str(data["lang"]), str(data["code"]), float(data["timeout"]),
                   tuple(str(n) for n in data.get("needs", ())), {str(k): str(v) for k, v in dict(data.get("values", {})).items()})


def interface_names() -> list[str]:
    """Network interface names of this node (what NCCL_SOCKET_IFNAME must match)."""
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        net = Path("/sys/class/net")
        return sorted(p.name for p in net.iterdir()) if net.is_dir() else []


def node_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """NCCL_/CUDA_/TORCH_/PYTORCH_ (as `kb env`) and HF_* variables; names that look secret left out."""
    environ = dict(os.environ) if environ is None else environ
    out = relevant_env(environ)
    out.update({k: environ[k] for k in environ if k.startswith(HF_PREFIX) and not looks_secret(k)})
    return dict(sorted(out.items()))


def node_facts(python: str | None = None) -> dict[str, Any]:
    """One flat dict of comparable facts: `key -> value` (None: not installed / not set)."""
    tp = target_python(python)
    versions = target_versions(tp.path)
    facts: dict[str, Any] = {"os": platform.platform(), "python": versions.get("python"),
                             "python_executable": versions.get("executable")}
    packages = versions.get("packages")
    for name in PACKAGES:
        facts[PACKAGE_FACTS.get(name, name)] = packages.get(name) if isinstance(packages, dict) else packages
    gpus = gpu_info()
    facts["driver"] = gpus["driver"]
    facts["cuda"] = cuda_version()
    facts["nvcc"] = nvcc_version()
    if isinstance(gpus["gpus"], list):
        facts["gpu_count"] = len(gpus["gpus"])
        facts["gpu_names"] = ", ".join(sorted({g["name"] for g in gpus["gpus"]})) or None
    else:
        facts["gpu_count"] = facts["gpu_names"] = gpus["gpus"]
    # the installed verl's declared pins against this node's versions (kb/checks/envpins.py): one line, so a node
    # whose packages broke verl's ranges stands out among the differences
    facts["verl_pins"] = conflict_summary(check_pins(tp.path))
    facts["interfaces"] = ", ".join(interface_names())
    for key, value in node_env().items():
        facts[f"env.{key}"] = value
    return facts


def _plan(shipped: ShippedCheck, python: str | None) -> Plan:
    # No case file here: a stand-in Case that carries the id, and the code as received.
    case = Case(id=shipped.case, title="", category="", signatures=[], symptoms=[], sources=[], path=Path(shipped.case))
    check = Check(shipped.name, shipped.lang, shipped.code, shipped.timeout, shipped.needs, True, "", 0)
    argv, desc = interpreter_for(check, python)
    return Plan(case, check, dict(shipped.values), [], argv, desc, shipped.code)


def run_checks(checks: list[ShippedCheck], python: str | None, budget_s: float, workers: int = NODE_WORKERS) -> list[dict[str, Any]]:
    """Run the checks a few at a time; whatever is still running when `budget_s` is spent is cancelled."""
    cancel = threading.Event()
    timer = threading.Timer(max(0.0, budget_s), cancel.set)
    timer.daemon = True
    timer.start()
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kb-node") as pool:
            futures = [pool.submit(run_plan, _plan(c, python), python, None, cancel, record=False) for c in checks]
            results = [f.result() for f in futures]
    finally:
        timer.cancel()
    out = []
    for r in results:
        reason = r.reason
        if r.verdict == INCONCLUSIVE and reason == "cancelled" and cancel.is_set():
            reason = f"not finished within the node's time ({budget_s:.0f} s); cancelled"
        out.append({"name": r.name, "case": r.case, "verdict": r.verdict, "exit_code": r.exit_code,
                    "duration_s": r.duration_s, "reason": reason, "output": r.output})
    return out


def node_stacks() -> dict[str, Any] | None:
    """`--stacks`: the stacks step on this node. Processes under another raylet of this host are left
    out: where several Ray nodes share a machine (a test cluster), each answers for its own."""
    from kb.hangs.analyse import doctor_step
    from kb.hangs.find import descendants

    mine = os.getppid()  # the raylet that started this task
    others: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != mine:
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            except OSError:
                continue
            if argv0.endswith(b"/raylet"):
                others.update(descendants(int(entry.name)))
    within = None
    if others:
        within = {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()} - others
    return doctor_step(within=within)


def node_report(payload: dict[str, Any]) -> dict[str, Any]:
    """The whole answer of one node, as plain data (what the Ray task returns)."""
    start = time.monotonic()
    python = payload.get("python")
    facts = node_facts(python)
    # The driver sends the margin (a share of the node timeout): killing cut checks and carrying
    # the answer back takes longer on a loaded node than a fixed few seconds.
    margin = payload.get("margin_s")
    margin = max(DEADLINE_MARGIN_S, float(margin)) if isinstance(margin, (int, float)) else DEADLINE_MARGIN_S
    budget = float(payload.get("budget_s", 60.0)) - margin - (time.monotonic() - start)
    # The task may start late (a worker to start, kb to unpack); the driver's wall-clock
    # deadline is what counts, as long as the clocks roughly agree.
    if isinstance(payload.get("deadline_epoch"), (int, float)):
        by_clock = float(payload["deadline_epoch"]) - margin - time.time()
        if 0 < by_clock < budget:
            budget = by_clock
    checks = [ShippedCheck.from_dict(c) for c in payload.get("checks", [])]
    before = time.monotonic()
    stacks = node_stacks() if payload.get("stacks") else None  # before the checks: a few seconds, the checks' budget is the rest
    return {
        "stacks": stacks,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "kb": str(Path(__file__).resolve().parents[1]),
        "facts": facts,
        "checks": run_checks(checks, python, budget - (time.monotonic() - before)),
        "duration_s": round(time.monotonic() - start, 3),
    }
