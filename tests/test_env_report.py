"""kb env: the command wrapper, nvidia-smi parsing, target-env versions, secret filtering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from kb.checks import envreport
from kb.checks.needs import run_cmd
from kb.cli import main

FAKE_SMI = r"""#!/bin/bash
case "$*" in
  "--query-gpu=index,name,driver_version,memory.total --format=csv,noheader")
    echo "0, NVIDIA H200, 570.124.06, 143771 MiB"
    echo "1, NVIDIA H200, 570.124.06, 143771 MiB";;
  "topo -m")
    printf '\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n';;
  "")
    echo "| NVIDIA-SMI 570.124.06   Driver Version: 570.124.06   CUDA Version: 12.8 |";;
  *) exit 9;;
esac
"""


def bin_dir(tmp_path: Path, **scripts: str) -> Path:
    """A PATH folder holding only the given scripts and a python3 link (no real nvidia-smi or nvcc)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    if not (folder / "python3").exists():
        (folder / "python3").symlink_to(sys.executable)
    return folder


def test_secret_looking_names_are_left_out(monkeypatch):
    env = {
        "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "CUDA_VISIBLE_DEVICES": "0,1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "NCCL_IB_AUTH_TOKEN": "t0p", "CUDA_API_KEY": "k3y", "TORCH_SECRET": "s", "NCCL_PASSWORD": "p",
        "TORCH_HUB_CREDENTIALS": "c", "CUDA_PASS": "x", "HF_TOKEN": "hf", "HOME": "/root",
    }
    shown = envreport.relevant_env(env)
    assert shown == {
        "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    monkeypatch.setenv("NCCL_IB_AUTH_TOKEN", "t0p-secret-value")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    report = envreport.collect(sys.executable)
    assert report["env"]["NCCL_DEBUG"] == "WARN"
    assert "t0p-secret-value" not in json.dumps(report) + envreport.format_report(report)


def test_run_cmd_never_raises(tmp_path):
    sleeper = bin_dir(tmp_path, sleeper="#!/bin/bash\nsleep 30\n") / "sleeper"
    start = time.monotonic()
    res = run_cmd([str(sleeper)], timeout=0.5)
    assert time.monotonic() - start < 5
    assert not res.ok and "timed out" in res.error
    missing = run_cmd(["kb-no-such-binary-xyz"])
    assert not missing.ok and "not found" in missing.error
    failing = run_cmd(["bash", "-c", "echo oops >&2; exit 3"])
    assert not failing.ok and failing.returncode == 3 and "oops" in failing.error
    assert run_cmd(["bash", "-c", "echo hi"]).output == "hi\n"


def test_without_nvidia_smi_everything_reads_could_not_collect(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(bin_dir(tmp_path)))
    report = envreport.collect()
    for key in ("gpus", "driver", "cuda_driver_supports", "nvcc", "topology"):
        assert str(report[key]).startswith("could not collect"), key
    assert report["target_python"]["chosen_by"].startswith("first python3")
    text = envreport.format_report(report)
    assert "GPUs: could not collect (nvidia-smi not found on PATH)" in text


def test_nvidia_smi_output_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(bin_dir(tmp_path, **{"nvidia-smi": FAKE_SMI})))
    report = envreport.collect(sys.executable)
    assert report["gpus"] == [
        {"index": "0", "name": "NVIDIA H200", "memory": "143771 MiB"},
        {"index": "1", "name": "NVIDIA H200", "memory": "143771 MiB"},
    ]
    assert report["driver"] == "570.124.06"
    assert report["cuda_driver_supports"] == "12.8"
    assert "NV18" in report["topology"]
    text = envreport.format_report(report)
    assert "GPU 1: NVIDIA H200 (143771 MiB)" in text and "CUDA (driver supports): 12.8" in text


def _version_or_none(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_versions_come_from_the_target_python(tmp_path):
    report = envreport.collect(sys.executable)
    packages = report["packages"]
    assert list(packages)[:8] == ["torch", "vllm", "sglang", "ray", "transformers", "flash-attn", "tensordict", "verl"]
    assert packages["numpy"] == metadata.version("numpy")
    assert packages["sglang"] is None or packages["sglang"] == _version_or_none("sglang")
    # A fresh, empty venv stands in for a training env without torch: kb's own
    # packages must not leak into its report.
    empty = tmp_path / "empty-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(empty)], check=True, timeout=60)
    empty_packages = envreport.collect(str(empty / "bin" / "python"))["packages"]
    assert empty_packages["numpy"] is None and empty_packages["torch"] is None
    broken = envreport.collect(str(tmp_path / "no-python"))
    assert str(broken["packages"]).startswith("could not collect")
    assert "could not collect" in envreport.format_report(broken)


def test_kb_env_json(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{bin_dir(tmp_path, **{'nvidia-smi': FAKE_SMI})}{os.pathsep}{os.environ['PATH']}")
    assert main(["env", "--json", "--python", sys.executable]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"os", "target_python", "gpus", "driver", "cuda_driver_supports", "topology", "packages", "env"} <= set(data)
    assert data["target_python"]["chosen_by"] == "--python"
    assert main(["env"]) == 0
    assert "Packages in the target environment:" in capsys.readouterr().out


def test_kb_env_bad_python_is_a_usage_error(capsys, tmp_path):
    assert main(["env", "--python", str(tmp_path / "nope")]) == 2
    assert "not an executable" in capsys.readouterr().err


def test_runner_modules_import_neither_torch_nor_textual():
    code = (
        "import sys\n"
        "import kb.checks.runner, kb.checks.needs, kb.checks.history, kb.checks.doctor, kb.checks.envreport\n"
        "import kb.commands.run, kb.commands.doctor, kb.commands.env, kb.commands.history\n"
        "bad = [m for m in ('torch', 'textual') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
