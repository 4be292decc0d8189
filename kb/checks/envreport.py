"""`kb env`: what this node and the training environment have, for a bug report.

It also compares the installed verl's declared requirements with the installed
versions (`verl_pins`, kb/checks/envpins.py) and names the entry for each conflict.

In the spirit of `python -m torch.utils.collect_env`: every external command
goes through one wrapper with a timeout (`needs.run_cmd`), anything missing
reads "could not collect (...)" instead of crashing, package versions come
from the TARGET Python (one subprocess, importlib.metadata, each guarded, so
nothing is imported), and environment variables whose names look secret are
left out.
"""

from __future__ import annotations

import json
import os
import platform
import re
from typing import Any

from kb.checks.envpins import check_pins, format_pins, pin_report_from_dict
from kb.checks.needs import python_probe, run_cmd, target_python

NOT_COLLECTED = "could not collect"
PACKAGES = ("torch", "vllm", "sglang", "ray", "transformers", "flash-attn", "tensordict", "verl",
            "nvidia-nccl-cu12", "megatron-core", "deepspeed", "accelerate", "peft", "numpy")
ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "CREDENTIAL", "AUTH")

# Run by the target Python; importlib.metadata reads the installed metadata
# without importing the packages (importing torch or vllm takes seconds).
_VERSIONS_SCRIPT = r"""
import json, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
out = {"python": sys.version.split()[0], "executable": sys.executable, "packages": {}}
for name in sys.argv[1:]:
    version = None
    for candidate in (name, name.replace("-", "_")):
        try:
            version = metadata.version(candidate)
            break
        except Exception:
            continue
    out["packages"][name] = version
print(json.dumps(out))
"""


def not_collected(why: str) -> str:
    return f"{NOT_COLLECTED} ({why})" if why else NOT_COLLECTED


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def relevant_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """NCCL_/CUDA_/TORCH_/PYTORCH_ variables, without any whose name looks like a secret."""
    environ = dict(os.environ) if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(ENV_PREFIXES) and not looks_secret(k)}


def gpu_info() -> dict[str, Any]:
    res = run_cmd(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader"])
    if not res.ok:
        why = not_collected(res.error)
        return {"gpus": why, "driver": why}
    gpus = []
    drivers = set()
    for line in res.output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4:
            gpus.append({"index": parts[0], "name": parts[1], "memory": parts[3]})
            drivers.add(parts[2])
    return {"gpus": gpus, "driver": ", ".join(sorted(drivers)) or not_collected("no GPU listed")}


def cuda_version() -> str:
    """The CUDA version the driver supports, from the `nvidia-smi` header."""
    res = run_cmd(["nvidia-smi"])
    if not res.ok:
        return not_collected(res.error)
    m = re.search(r"CUDA Version:\s*([0-9.]+)", res.output)
    return m.group(1) if m else not_collected("no 'CUDA Version' in nvidia-smi output")


def nvcc_version() -> str:
    res = run_cmd(["nvcc", "--version"])
    if not res.ok:
        return not_collected(res.error)
    m = re.search(r"release ([0-9.]+)", res.output)
    return m.group(1) if m else not_collected("unexpected nvcc output")


def topology() -> str:
    res = run_cmd(["nvidia-smi", "topo", "-m"])
    return res.output.rstrip() if res.ok else not_collected(res.error)


def target_versions(python: str) -> dict[str, Any]:
    res = python_probe(python, _VERSIONS_SCRIPT, *PACKAGES)
    if res.ok:
        try:
            data = json.loads(res.output.strip().splitlines()[-1])
            if isinstance(data, dict):
                return data
        except (ValueError, IndexError):
            pass
        why = not_collected("unexpected output from the target Python")
    else:
        why = not_collected(res.error)
    return {"python": why, "executable": python, "packages": why}


def collect(python: str | None = None) -> dict[str, Any]:
    """The whole report as a dict (the `--json` shape)."""
    tp = target_python(python)
    versions = target_versions(tp.path)
    return {
        "os": platform.platform(),
        "target_python": {"path": tp.path, "chosen_by": tp.source, "version": versions.get("python"),
                          "executable": versions.get("executable")},
        **gpu_info(),
        "cuda_driver_supports": cuda_version(),
        "nvcc": nvcc_version(),
        "topology": topology(),
        "packages": versions.get("packages"),
        "env": relevant_env(),
        # the installed verl's declared requirements against the installed versions (kb/checks/envpins.py)
        "verl_pins": check_pins(tp.path).to_dict(),
    }


def format_report(report: dict[str, Any]) -> str:
    tp = report["target_python"]
    lines = [
        f"OS: {report['os']}",
        f"Target Python: {tp['path']} ({tp['chosen_by']}), version {tp['version']}",
        f"GPU driver: {report['driver']}",
        f"CUDA (driver supports): {report['cuda_driver_supports']}",
        f"nvcc: {report['nvcc']}",
    ]
    gpus = report["gpus"]
    if isinstance(gpus, list):
        lines.append(f"GPUs ({len(gpus)}):")
        lines += [f"  GPU {g['index']}: {g['name']} ({g['memory']})" for g in gpus]
    else:
        lines.append(f"GPUs: {gpus}")
    lines.append("GPU topology (nvidia-smi topo -m):")
    lines += [f"  {ln}" for ln in str(report["topology"]).splitlines()]
    packages = report["packages"]
    lines.append("Packages in the target environment:")
    if isinstance(packages, dict):
        lines += [f"  {name}: {version or 'not installed'}" for name, version in packages.items()]
    else:
        lines.append(f"  {packages}")
    pins = report.get("verl_pins")
    if isinstance(pins, dict):
        lines.append("What the installed verl declares, against what is installed:")
        lines += format_pins(pin_report_from_dict(pins))
    env = report["env"]
    lines.append("Environment (NCCL_*, CUDA_*, TORCH_*, PYTORCH_*; names that look secret left out):")
    lines += [f"  {k}={v}" for k, v in env.items()] or ["  (none set)"]
    return "\n".join(lines)
