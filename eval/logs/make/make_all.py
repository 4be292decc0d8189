"""Rerun the made-here logs of eval/logs: real tiny jobs (torchrun/gloo, Ray, Hydra) with one fault each.

    PYTHONPATH=. .venv/bin/python eval/logs/make/make_all.py [NAME ...] [--good]

Each scenario writes eval/logs/made-NAME.log and its sidecar made-NAME.labels.json.
The failure lines are labelled from what the fault is known to print (the
regexes below name the message the injected fault raises, on the faulting
rank only unless the failure shows on every rank): the labeller knows the
fault, the reducer under test does not. `--good` writes the faultless runs of
each job to eval/logs/good/ (the baselines for `kb search --baseline`).
Pids, ports and times differ between reruns; the labels follow the text.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent
VENV = Path(os.environ.get("KB_LOGS_VENV", "/work/main/.venv"))
PY = str(VENV / "bin" / "python")
TORCHRUN = str(VENV / "bin" / "torchrun")
RANK_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:")


@dataclass
class Scenario:
    name: str
    argv: list[str]  # after the launcher
    kind: str = "torchrun"  # torchrun | python
    nproc: int = 2
    tee: bool = False
    label: list[str] = field(default_factory=list)  # regexes of the failure lines
    label_rank: int | None = None  # only lines of this rank (when prefixed)
    suspect: int | None = None
    expected: list[str] = field(default_factory=list)
    stage: str = ""
    step: int | None = None
    good: str = ""  # the good run of the same job (eval/logs/good/NAME.log)
    busy_port: bool = False
    timeout: int = 120


def T(name: str, fault: str, rank: int = 1, step: int = 6, nproc: int = 2, tee: bool = False, **kw) -> Scenario:
    argv = [str(HERE / "train.py"), "--fault", fault, "--fault-rank", str(rank), "--fault-step", str(step)]
    good = f"train-{nproc}{'-tee' if tee else ''}.log"
    kw["step"] = kw.pop("at", step if kw.get("stage") == "step" else None)
    return Scenario(name, argv, "torchrun", nproc, tee, good=good, **kw)


SCENARIOS: list[Scenario] = [
    T("attr-step6", "attr", label=[r"AttributeError: 'Trainer' object has no attribute 'scheduler'"], label_rank=1,
      suspect=1, stage="step"),
    T("attr-4ranks-tee", "attr", rank=2, step=4, nproc=4, tee=True,
      label=[r"AttributeError: 'Trainer' object has no attribute 'scheduler'"], label_rank=2, suspect=2, stage="step"),
    T("size-mismatch", "size", step=3, label=[r"terminate called after throwing", r"what\(\):", r"EnforceNotMet", r"Received data size",
      r"doesn't match expected size", r"Sizes of tensors|size mismatch"], suspect=None, stage="step"),
    T("size-mismatch-3ranks-tee", "size", rank=2, step=2, nproc=3, tee=True, label=[r"terminate called after throwing", r"what\(\):",
      r"EnforceNotMet", r"Received data size", r"doesn't match expected size"], suspect=None, stage="step"),
    T("hang-allreduce", "hang", step=5, label=[r"Timed out waiting|timed out|Timeout"], suspect=1, stage="step"),
    T("hang-3ranks-tee", "hang", rank=2, step=4, nproc=3, tee=True, label=[r"Timed out waiting|timed out|Timeout"], suspect=2,
      stage="step"),
    T("nan-anomaly", "nan", rank=0, step=4, label=[r"returned nan values"], label_rank=0, suspect=0, stage="step"),
    T("missing-module-rank1", "preinit", label=[r"ModuleNotFoundError: No module named 'deepspeed'"], label_rank=1, suspect=1,
      stage="init"),  # rank 1 failed at import, while its peers had reached init
    T("ckpt-bad-dir", "ckpt", rank=0, label=[r"Parent directory .* does not exist", r"^(?:\[rank0\]: )?\w*Error: .*kb-no-such-dir"],
      label_rank=0, suspect=0, stage="checkpoint", at=6),
    T("val-shape", "val", label=[r"mat1 and mat2 shapes cannot be multiplied"], label_rank=1, suspect=1, stage="validation", at=10),
    T("kill-rank1", "kill", step=5, label=[r"Signal 9 \(SIGKILL\) received by PID", r"exitcode: -9\) local_rank: 1",
      r"exitcode\s+: -9"], suspect=1, stage="step", expected=["host-oom-killed-colocation"]),
    T("alloc-rank1", "alloc", step=3, label=[r"DefaultCPUAllocator: can't allocate memory"], label_rank=1, suspect=1, stage="step"),
    T("cuda-on-cpu", "cuda", rank=0, label=[r"has no attribute '_cuda_setDevice'|Torch not compiled with CUDA enabled"], label_rank=0, suspect=0, stage="init"),
    T("keyerror-4ranks", "keyerror", rank=3, step=2, nproc=4, label=[r"KeyError: 'warmup_steps'"], label_rank=3, suspect=3,
      stage="step"),
    T("exit-rank1-silent", "exit", rank=1, step=4, label=[r"failed \(exitcode: 3\) local_rank: 1", r"exitcode\s+: 3 "],
      suspect=1, stage="step"),
    Scenario("busy-port", [str(HERE / "train.py")], "torchrun", 2, busy_port=True,
             label=[r"EADDRINUSE|address already in use|Address already in use"], suspect=None,
             expected=["address-already-in-use"], stage="init", good="train-2.log"),
    Scenario("hydra-not-in-struct", [str(HERE / "hydra_app.py"), "data.train_files=/tmp/x.parquet", "trainer.n_gpus=2"], "python",
             label=[r"Could not override 'trainer.n_gpus'", r"Key 'n_gpus' (?:is )?not in"], expected=["hydra-key-not-in-struct"],
             stage="launch", good="hydra.log"),
    Scenario("hydra-missing-value", [str(HERE / "hydra_app.py")], "python", label=[r"Missing mandatory value"],
             expected=["hydra-missing-mandatory-value"], stage="launch", good="hydra.log"),
    Scenario("ray-actor-exception", [str(HERE / "ray_job.py"), "--fault", "actor-exc"], "python",
             label=[r"^KeyError: 'attention_mask'", r"RayTaskError\(KeyError\)"], stage="step", step=3, good="ray.log"),
    Scenario("ray-actor-exit", [str(HERE / "ray_job.py"), "--fault", "actor-exit"], "python",
             label=[r"ActorDiedError", r"The actor died unexpectedly|exited unexpectedly|worker exit|Worker exit|exit_code|exit code"],
             expected=["ray-actor-died-unexpectedly"], stage="step", step=3, good="ray.log"),
    Scenario("ray-task-exception", [str(HERE / "ray_job.py"), "--fault", "task-exc"], "python",
             label=[r"ValueError: reward function returned None", r"RayTaskError\(ValueError\)"], stage="rollout", step=1, good="ray.log"),
    Scenario("ray-task-missing-module", [str(HERE / "ray_job.py"), "--fault", "task-import"], "python",
             label=[r"ModuleNotFoundError: No module named 'flash_attn'", r"RayTaskError\(ModuleNotFoundError\)"],
             expected=["flash-attn-not-installed"], stage="rollout", step=1, good="ray.log"),
]

# Process deaths, hangs and late stages (issue 26): made with the same jobs.
DEATH = [r"failed \(exitcode: -\d+\) local_rank: 1", r"exitcode\s+: -(?:9|11) ", r"Signal (?:9|11) \(SIG(?:KILL|SEGV)\) received by PID"]
SCENARIOS += [
    T("segv-rank1", "segv", step=4, label=[r"^Fatal Python error: Segmentation fault", *DEATH], suspect=1, stage="step"),
    T("dataloader-killed", "dlkill", step=4, label=[r"DataLoader worker \(pid \d+\) is killed by signal: Killed",
      r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"], label_rank=1, suspect=1, stage="step",
      expected=["host-oom-killed-colocation"]),
    T("ddp-unused-param", "unused", step=3, label=[r"Expected to have finished reduction in the prior iteration",
      r"Parameter indices which did not receive grad for rank 1"], label_rank=1, suspect=1, stage="step",
      expected=["ddp-expected-finished-reduction"]),
    T("skip-collective-hang", "skip", step=4, label=[r"Timed out waiting|timed out|Timeout", r"UserWarning: rank 1: batch at step \d+ is empty after filtering"],
      suspect=1, stage="step"),
    T("ckpt-barrier-hang", "ckpt-hang", rank=0, step=6, label=[r"Timed out waiting|timed out|Timeout"], suspect=0,
      stage="checkpoint", at=6),
    T("shutdown-rank1", "shutdown", label=[r"FileNotFoundError: .*kb-no-such-dir/metrics\.json"], label_rank=1, suspect=1,
      stage="shutdown"),
    # the first non-finite loss (rank 0, step 4) says where it started; every later NaN line follows from it
    T("nan-loss-clip", "nanloss", rank=0, step=4, label=[r"The total norm of order 2\.0 for gradients from `parameters` is non-finite",
      r"^\[rank0\] WARNING: step 4: loss is inf"], suspect=0, stage="step"),
    Scenario("ray-memory-monitor", [str(HERE / "ray_job.py"), "--fault", "task-oom"], "python",
             label=[r"OutOfMemoryError", r"OOM kill reason", r"killed due to (?:the node running low on memory|memory pressure)"],
             expected=["ray-oom-killer-memory-monitor"], stage="rollout", step=1, good="ray.log", timeout=240),
]

# Not run through the reducer while its rules were tuned (eval/logs/README.md).
HELDOUT = {"nan-anomaly", "exit-rank1-silent", "keyerror-4ranks", "ray-actor-exit"}

GOOD: dict[str, list[str]] = {
    "train-2.log": [TORCHRUN, "--nproc-per-node", "2", "--master-port", "{port}", str(HERE / "train.py")],
    "train-3-tee.log": [TORCHRUN, "--nproc-per-node", "3", "--tee", "3", "--master-port", "{port}", str(HERE / "train.py")],
    "train-4.log": [TORCHRUN, "--nproc-per-node", "4", "--master-port", "{port}", str(HERE / "train.py")],
    "train-4-tee.log": [TORCHRUN, "--nproc-per-node", "4", "--tee", "3", "--master-port", "{port}", str(HERE / "train.py")],
    "hydra.log": [PY, str(HERE / "hydra_app.py"), "data.train_files=/tmp/x.parquet"],
    "ray.log": [PY, str(HERE / "ray_job.py")],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], timeout: int) -> tuple[str, int]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", RAY_DEDUP_LOGS="1", HYDRA_FULL_ERROR="0")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(cmd, cwd="/tmp", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    text = proc.stdout.decode("utf-8", "replace")
    return (text if text.endswith("\n") else text + "\n"), proc.returncode


def command(s: Scenario, port: int) -> list[str]:
    if s.kind == "python":
        return [PY, *s.argv]
    return [TORCHRUN, "--nproc-per-node", str(s.nproc), *(["--tee", "3"] if s.tee else []), "--master-port", str(port), *s.argv]


def label_lines(text: str, s: Scenario) -> list[int]:
    pats = [re.compile(p) for p in s.label]
    picked = []
    for n, line in enumerate(text.split("\n"), 1):
        m = RANK_PREFIX.match(line)
        if s.label_rank is not None and m and int(m.group(1)) != s.label_rank:
            continue
        if re.match(r"^\s*(?:\[\w+\]:\s*)?File \"", line):
            continue  # frames are not failure lines
        if any(p.search(line) for p in pats):
            picked.append(n)
    return picked


def make(s: Scenario) -> None:
    port = free_port()
    cmd = command(s, port)
    holder = None
    if s.busy_port:
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
    try:
        text, _ = run(cmd, s.timeout)
    finally:
        if holder:
            holder.close()
    shown = " ".join(shlex.quote(c.replace(str(VENV), ".venv").replace(str(HERE.parents[2]) + "/", "")) for c in cmd)
    labels = {
        "source": f"made here: {shown}" + ("  (port held by another listener)" if s.busy_port else ""),
        "failure_lines": label_lines(text, s),
        "suspect_rank": s.suspect,
        "expected": s.expected,
        "stage": s.stage,
        "step": s.step,
        "baseline": f"good/{s.good}" if s.good else None,
        "multi_rank": s.kind == "torchrun" and s.nproc > 1,
        "split": "heldout" if s.name in HELDOUT else "dev",
    }
    (OUT / f"made-{s.name}.log").write_text(text, encoding="utf-8")
    (OUT / f"made-{s.name}.labels.json").write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    print(f"made-{s.name}: {len(text.splitlines())} lines, {len(labels['failure_lines'])} labelled", flush=True)


def make_good(name: str) -> None:
    cmd = [c.replace("{port}", str(free_port())) for c in GOOD[name]]
    (OUT / "good").mkdir(exist_ok=True)
    text, rc = run(cmd, 180)
    if rc != 0:  # a good run must be good: a baseline with a failure in it would hide that failure
        raise SystemExit(f"good/{name}: the faultless run failed (exit {rc}):\n{text[-2000:]}")
    (OUT / "good" / name).write_text(text, encoding="utf-8")
    print(f"good/{name}: {len(text.splitlines())} lines", flush=True)


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    if "--relabel" in argv:  # labels again from the logs already made (after a change of the rules)
        for s in SCENARIOS:
            path = OUT / f"made-{s.name}.labels.json"
            if (not names or s.name in names) and path.exists():
                labels = json.loads(path.read_text(encoding="utf-8"))
                labels["failure_lines"] = label_lines((OUT / f"made-{s.name}.log").read_text(encoding="utf-8"), s)
                path.write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
        return 0
    if "--good" in argv:
        for g in GOOD:
            if not names or g in names:
                make_good(g)
        return 0
    for s in SCENARIOS:
        if not names or s.name in names:
            make(s)
    os.system("%s -m ray.scripts.scripts stop --force >/dev/null 2>&1" % PY)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
