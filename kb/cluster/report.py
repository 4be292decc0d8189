"""The cluster doctor's report: per-node tables, what differs between nodes, and the cases it points to.

Plain data in, text or JSON out; no Ray here, so the app can show a report
saved with `kb doctor --ray ADDRESS --json > report.json` on a machine
without Ray.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from kb.checks.runner import CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED
from kb.core.safe_text import visible

UNSET = None  # a variable not set, or a package not installed, on that node

# Which cases a difference between nodes points to. Exact keys first, then the
# longest matching prefix (keys ending in "_" or "."). Every id here is a
# built-in case (a test checks it).
EXACT_POINTERS: dict[str, tuple[str, ...]] = {
    "env.NCCL_SOCKET_IFNAME": ("nccl-unhandled-system-error", "distributed-init-rendezvous-hang"),
    "interfaces": ("nccl-unhandled-system-error",),
    "env.NCCL_CUMEM_ENABLE": ("nccl-cumem-enable-mismatch",),
    "torch": ("nccl-unhandled-system-error", "nccl-watchdog-timeout"),
    "nccl": ("nccl-unhandled-system-error", "nccl-watchdog-timeout"),
    "driver": ("cuda-driver-too-old",),
    "cuda": ("cuda-driver-too-old",),
    "gpu_count": ("world-size-device-count-mismatch", "ray-task-no-gpu-visible"),
    "gpu_names": ("bf16-unsupported-gpu", "flash-attn-ampere-required"),
    "env.CUDA_VISIBLE_DEVICES": ("ray-task-no-gpu-visible", "world-size-device-count-mismatch"),
    "vllm": ("vllm-verl-version-mismatch",),
    "verl": ("vllm-verl-version-mismatch", "verl-version-attribute-missing"),
    "sglang": ("sglang-version-mismatch",),
    "transformers": ("transformers-version-mismatch",),
    "tensordict": ("tensordict-version-mismatch",),
    "flash-attn": ("flash-attn-undefined-symbol",),
    "numpy": ("numpy2-abi-incompat",),
    # each conflict in the value names its own entry; this is the general one
    "verl_pins": ("verl-declared-requirement-conflict",),
    "ray": ("ray-cannot-connect-cluster",),
    "python": ("ray-cannot-connect-cluster",),
}
PREFIX_POINTERS: dict[str, tuple[str, ...]] = {
    "env.NCCL_IB_": ("nccl-ib-completion-error",),
    "env.HF_": ("hf-hub-offline-airgapped", "hf-cant-load-config"),
    "env.": ("ray-env-var-not-propagated",),
}
# Facts that differ from node to node by nature; listing them as differences would bury the real ones.
NOT_COMPARED = frozenset({"os"})


def pointed_cases(key: str) -> list[str]:
    """The case ids a difference in `key` points to (may be empty)."""
    if key in EXACT_POINTERS:
        return list(EXACT_POINTERS[key])
    for prefix in sorted(PREFIX_POINTERS, key=len, reverse=True):
        if key.startswith(prefix):
            return list(PREFIX_POINTERS[prefix])
    return []


def differences(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every fact whose value is not the same on all answering nodes; a key missing on a node counts as unset."""
    if len(nodes) < 2:
        return []
    keys: list[str] = []
    for node in nodes:
        keys.extend(k for k in node["facts"] if k not in keys)
    out: list[dict[str, Any]] = []
    for key in keys:
        if key in NOT_COMPARED:
            continue
        values = {node["node_id"]: node["facts"].get(key, UNSET) for node in nodes}
        sides = _sides(values)
        if len(sides) < 2:
            continue
        out.append({"key": key, "values": values, "sides": sides, "cases": pointed_cases(key)})
    return out


def check_differences(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Checks whose verdict is not the same on all answering nodes."""
    if len(nodes) < 2:
        return []
    verdicts: dict[tuple[str, str], dict[str, str]] = {}
    for node in nodes:
        for c in node["checks"]:
            verdicts.setdefault((c["case"], c["name"]), {})[node["node_id"]] = c["verdict"]
    out = []
    for (case, name), per_node in verdicts.items():
        values = {n["node_id"]: per_node.get(n["node_id"]) for n in nodes}
        if len(set(values.values())) > 1:
            out.append({"case": case, "check": name, "verdicts": values})
    return out


def build_report(address: str, nodes: list[dict[str, Any]], unreachable: list[dict[str, Any]],
                 not_run: list[dict[str, Any]], node_timeout: float) -> dict[str, Any]:
    """The `--json` object."""
    return {
        "address": address,
        "node_timeout_s": node_timeout,
        "nodes": nodes,
        "differences": differences(nodes),
        "check_differences": check_differences(nodes),
        "unreachable": unreachable,
        "not_run": not_run,
    }


def _sides(values: dict[str, Any]) -> list[dict[str, Any]]:
    distinct: list[Any] = []
    for v in values.values():
        if v not in distinct:
            distinct.append(v)
    return [{"value": v, "nodes": [n for n, nv in values.items() if nv == v]} for v in distinct]


def _seconds(value: Any) -> str:
    return f"{value:g} s" if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def short(node_id: str) -> str:
    return node_id[:8]


def _value(v: Any, key: str = "") -> str:
    if v is UNSET:
        return "(not set)" if key.startswith("env.") else "(not installed)"
    return visible(str(v))


_MARK = {CONFIRMED: "[!]", INCONCLUSIVE: "[?]", SKIPPED: "[-]", RULED_OUT: "[ ]"}


def format_cluster_report(report: dict[str, Any], lines_per_check: int = 3) -> str:
    """Per node: host, id, facts, verdicts; then the differences and the unreachable nodes."""
    nodes, unreachable = report.get("nodes", []), report.get("unreachable", [])
    labels = {n["node_id"]: f"{short(n['node_id'])} ({visible(str(n.get('host', '?')))})" for n in nodes}
    out = [f"Ray cluster {visible(str(report.get('address', '?')))}: {len(nodes)} node(s) answered, "
           f"{len(unreachable)} unreachable (node timeout {_seconds(report.get('node_timeout_s'))})."]
    for node in nodes:
        out.append("")
        out.append(visible(f"== node {node['node_id']}  host {node.get('host', '?')}  ({node.get('kb_source', '')})"))
        facts = node.get("facts", {})
        width = max((len(k) for k in facts), default=0)
        out.extend(f"  {visible(k.ljust(width))}  {_value(v, k)}" for k, v in facts.items())
        checks = node.get("checks", [])
        counts = {v: sum(1 for c in checks if c["verdict"] == v) for v in (CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED)}
        out.append(f"  checks: {counts[CONFIRMED]} confirmed, {counts[INCONCLUSIVE]} inconclusive, "
                   f"{counts[RULED_OUT]} ruled out, {counts[SKIPPED]} skipped")
        for verdict in (CONFIRMED, INCONCLUSIVE, SKIPPED):
            for c in (c for c in checks if c["verdict"] == verdict):
                # load_cluster_report checked case, name and verdict
                out.append(visible(f"    {_MARK[verdict]} {verdict:<12} {c['case']} / {c['name']}: {c.get('reason', '')}"))
                if verdict == CONFIRMED:
                    tail = [ln for ln in str(c.get("output", "")).splitlines() if ln.strip()][-lines_per_check:]
                    out.extend(visible(f"          {ln}") for ln in tail)
        ruled_out = [f"{c['case']}/{c['name']}" for c in checks if c["verdict"] == RULED_OUT]
        if ruled_out:
            # One wrapped paragraph: on a 16-node cluster a line per passing check would bury the rest.
            out.extend(visible(ln) for ln in textwrap.wrap("ruled out: " + ", ".join(ruled_out), width=110,
                                                           initial_indent="    ", subsequent_indent="      ",
                                                           break_on_hyphens=False))
        if isinstance(node.get("stacks"), dict):
            from kb.hangs.analyse import format_step  # only reports made with --stacks carry them

            out.extend(visible("  " + ln) for ln in format_step(node["stacks"], "this node"))
        elif "stacks" in node:
            out.append("  stacks: no training process on this node")
    stuck = [o for o in report.get("stacks_odd", []) if isinstance(o, dict)]
    if stuck:
        out.append("")
        out.append(f"The odd one(s) out across the cluster ({len(stuck)}):")
        for o in stuck:
            node = labels.get(str(o.get("node_id")), visible(str(o.get("node", "?"))))
            out.append(visible(f"  {o.get('name')} (pid {o.get('pid')}) on node {node}: {o.get('why')}"))
            out.append(visible(f"    {o.get('where')}"))
    out.append("")
    diffs = report.get("differences", [])
    if diffs:
        out.append(f"Differences between nodes ({len(diffs)}):")
        for d in diffs:
            out.append(f"  {visible(d['key'])}:")
            for side in d.get("sides") or _sides(d.get("values", {})):
                out.append(f"    {_value(side.get('value'), d['key'])}  on  "
                           + visible(", ".join(labels.get(str(n), short(str(n))) for n in side["nodes"])))
            if d.get("cases"):
                out.append("    points to: " + ", ".join(f"kb show {c}" for c in d["cases"]))
    elif len(nodes) > 1:
        out.append("No differences: every fact and variable has the same value on all answering nodes.")
    cdiffs = report.get("check_differences", [])
    if cdiffs:
        out.append(f"Checks with different verdicts on different nodes ({len(cdiffs)}):")
        for d in cdiffs:
            verdicts = d.get("verdicts") if isinstance(d.get("verdicts"), dict) else {}
            per = ", ".join(f"{labels.get(str(n), short(str(n)))}: {v or 'not run'}" for n, v in verdicts.items())
            out.append(visible(f"  {d.get('case', '?')} / {d.get('check', '?')}: {per}"))
    if unreachable:
        out.append(f"Unreachable ({len(unreachable)}): no report from these nodes")
        for u in unreachable:
            out.append(visible(f"  [x] {u['node_id']}  host {u.get('host', '?')}: {u.get('reason', '')}"))
    not_run = report.get("not_run", [])
    if not_run:
        out.append(f"Not run on any node: folder not trusted ({len(not_run)}):")
        for n in not_run:
            out.append(visible(f"  [-] {n.get('case', '?')} / {n.get('check', '?')}: {n.get('reason', '')} "
                               f"(trust with: {n.get('trust_command', '')})"))
    return "\n".join(out)


class BadClusterReport(ValueError):
    """A saved report that is not a `kb doctor --ray --json` object."""


def load_cluster_report(path: Path) -> dict[str, Any]:
    """Read a saved `kb doctor --ray --json` file; BadClusterReport names the file and what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadClusterReport(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise BadClusterReport(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadClusterReport(f"{path}: expected a JSON object from `kb doctor --ray ... --json`")
    for field_name in ("nodes", "differences", "unreachable"):
        if not isinstance(data.get(field_name), list):
            raise BadClusterReport(f"{path}: field '{field_name}' missing or not a list; is this `kb doctor --ray ... --json` output?")
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("node_id"), str) or not isinstance(node.get("facts"), dict) \
                or not isinstance(node.get("checks"), list):
            raise BadClusterReport(f"{path}: nodes[{i}] needs 'node_id' (text), 'facts' (object) and 'checks' (list)")
        for j, c in enumerate(node["checks"]):
            if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("name", "case", "verdict")):
                raise BadClusterReport(f"{path}: nodes[{i}].checks[{j}] needs 'name', 'case' and 'verdict' (text)")
    for i, d in enumerate(data["differences"]):
        if not isinstance(d, dict) or not isinstance(d.get("key"), str) or not isinstance(d.get("sides", []), list):
            raise BadClusterReport(f"{path}: differences[{i}] needs 'key' (text)")
    for i, u in enumerate(data["unreachable"]):
        if not isinstance(u, dict) or not isinstance(u.get("node_id"), str):
            raise BadClusterReport(f"{path}: unreachable[{i}] needs 'node_id' (text)")
    for name in ("check_differences", "not_run"):
        items = data.get(name, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise BadClusterReport(f"{path}: field '{name}' must be a list of objects")
    for i, d in enumerate(data["differences"]):
        if "values" in d and not isinstance(d["values"], dict):
            raise BadClusterReport(f"{path}: differences[{i}].values must be an object (node id -> value)")
        for j, side in enumerate(d.get("sides") or []):
            if not isinstance(side, dict) or not isinstance(side.get("nodes"), list):
                raise BadClusterReport(f"{path}: differences[{i}].sides[{j}] needs 'value' and 'nodes' (list)")
    return data
