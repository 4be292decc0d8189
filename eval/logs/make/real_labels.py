"""How the posted logs (eval/logs/real-*.log) were labelled: per log, the regexes of its failure lines.

Chosen by hand after reading each log (eval/logs/README.md has the rules);
`python eval/logs/make/real_labels.py` recomputes `failure_lines` of the
sidecars from these (frames are never labelled). The other fields
(suspect_rank, expected, stage, multi_rank, split) were set by hand too.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent

# name: (url, failure-line regexes, suspect rank, stage, step, expected case ids, multi-rank)
META = {
 "basicsr-737": ("https://github.com/XPixelGroup/BasicSR/issues/737", [r"Watchdog caught collective operation timeout"], None, None, None, ["nccl-watchdog-timeout"], True),
 "sglang-1693": ("https://github.com/sgl-project/sglang/issues/1693", [r"^terminate called", r"^\s+what\(\)"], None, None, None, ["nccl-watchdog-timeout"], False),
 "llamafactory-7396": ("https://github.com/hiyouga/LlamaFactory/issues/7396", [r"Watchdog caught collective operation timeout"], None, None, None, ["nccl-watchdog-timeout"], True),
 "pytorch-118369": ("https://github.com/pytorch/pytorch/issues/118369", [r"Watchdog caught collective operation timeout"], None, "step", None, ["nccl-watchdog-timeout"], True),
 "llamafactory-6269": ("https://github.com/hiyouga/LlamaFactory/issues/6269", [r"Watchdog caught collective operation timeout"], None, None, None, ["nccl-watchdog-timeout"], True),
 "arctic-219": ("https://github.com/snowflakedb/ArcticTraining/issues/219", [r"Watchdog caught collective operation timeout", r"watchdog got stuck"], None, None, None, ["nccl-watchdog-timeout"], True),
 "openr1-620": ("https://github.com/huggingface/open-r1/issues/620", [r"what\(\):", r"^ Watchdog caught"], None, None, None, ["nccl-watchdog-timeout"], False),
 "vllm-6042": ("https://github.com/vllm-project/vllm/issues/6042", [r"\] Watchdog caught collective", r"watchdog thread terminated with exception"], None, None, None, ["nccl-watchdog-timeout"], False),
 "chinese-vicuna-113": ("https://github.com/Facico/Chinese-Vicuna/issues/113", [r"failed \(exitcode: 1\) local_rank: 0"], None, None, None, [], False),
 "llamafactory-7032": ("https://github.com/hiyouga/LlamaFactory/issues/7032", [r"exitcode\s+: 1 "], None, None, None, [], False),
 "cppo-6": ("https://github.com/lzhxmu/CPPO/issues/6", [r"exitcode\s+: -9", r"Signal 9 \(SIGKILL\)"], None, None, None, [], False),
 "firefly-32": ("https://github.com/yangjianxin1/Firefly/issues/32", [r"^Exception: expected value"], None, None, None, [], False),
 "verl-4921": ("https://github.com/verl-project/verl/issues/4921", [r"^\(raylet\) A worker died"], None, None, None, ["ray-actor-died-unexpectedly"], False),
 "verl-5659": ("https://github.com/verl-project/verl/issues/5659", [r"ActorDiedError: The actor died", r"^The actor is dead because"], None, None, None, ["ray-actor-died-unexpectedly"], False),
 "verl-1633": ("https://github.com/verl-project/verl/issues/1633", [r"ActorDiedError", r"^The actor is dead because"], None, "rollout", None, ["ray-actor-died-unexpectedly"], False),
 "verl-2987": ("https://github.com/verl-project/verl/issues/2987", [r"^\(raylet\) A worker died"], None, None, None, ["ray-actor-died-unexpectedly"], False),
 "easyr1-9": ("https://github.com/markingprowlik/EasyR1/issues/9", [r"RayTaskError\(OutOfMemoryError\)"], None, "step", None, ["cuda-oom-training"], False),
 "sglang-3820": ("https://github.com/sgl-project/sglang/issues/3820", [r"NCCL WARN"], None, "init", None, [], False),
 "nccl-1105": ("https://github.com/NVIDIA/nccl/issues/1105", [r"NCCL WARN"], None, None, None, [], True),
 "nccl-952": ("https://github.com/NVIDIA/nccl/issues/952", [r"NCCL WARN \[Service thread\]", r"NCCL WARN \[Proxy Service"], None, None, None, [], True),
 "nccl-tests-166": ("https://github.com/NVIDIA/nccl-tests/issues/166", [r"NCCL WARN socketStartConnect", r"NCCL WARN \[Proxy Service"], None, None, None, [], True),
 "nccl-975": ("https://github.com/NVIDIA/nccl/issues/975", [r"NCCL WARN"], None, "init", None, [], True),
 "nccl-875": ("https://github.com/NVIDIA/nccl/issues/875", [r"^RuntimeError: NCCL error", r"^ncclSystemError"], None, None, None, ["nccl-unhandled-system-error"], False),
 "prime-diloco-68": ("https://github.com/PrimeIntellect-ai/prime-diloco/issues/68", [r"^terminate called", r"^\s+what\(\)"], None, None, None, [], False),
 "pytorch-10936": ("https://github.com/pytorch/pytorch/issues/10936", [r"^terminate called", r"^\s+what\(\)"], None, None, None, [], True),
}


def main() -> int:
    for name, (_url, pats, *_rest) in META.items():
        side = OUT / f"real-{name}.labels.json"
        lines = (OUT / f"real-{name}.log").read_text(encoding="utf-8").split("\n")
        labels = json.loads(side.read_text(encoding="utf-8"))
        labels["failure_lines"] = [i for i, l in enumerate(lines, 1)
                                   if any(re.search(p, l) for p in pats) and not re.match(r'\s*File "', l)]
        side.write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
