"""A tiny Ray job (local cluster, 2 CPUs): a trainer actor and rollout tasks, one injectable fault."""

from __future__ import annotations

import argparse
import os
import sys

import ray


@ray.remote(num_cpus=0.5)
class Worker:
    def __init__(self, rank: int, fault: str | None) -> None:
        self.rank, self.fault = rank, fault

    def train_step(self, step: int) -> float:
        if self.fault == "actor-exc" and self.rank == 1 and step == 3:
            batch = {"input_ids": [1, 2, 3]}
            return float(batch["attention_mask"][0])  # the job's bug
        if self.fault == "actor-exit" and self.rank == 1 and step == 3:
            os._exit(1)
        return 0.1 * step


@ray.remote(num_cpus=0.5)
def rollout(i: int, fault: str | None) -> int:
    if fault == "task-exc" and i == 2:
        raise ValueError(f"reward function returned None for sample {i}")
    if fault == "task-import":
        import flash_attn  # noqa: F401  (not installed on the worker)
    return i


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault", choices=("actor-exc", "actor-exit", "task-exc", "task-import"))
    args = ap.parse_args()
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        workers = [Worker.remote(r, args.fault) for r in range(2)]
        for step in range(1, 6):
            outs = ray.get([rollout.remote(i, args.fault) for i in range(4)])
            print(f"step:{step} rollout done, {len(outs)} samples", flush=True)
            losses = ray.get([w.train_step.remote(step) for w in workers])
            print(f"step:{step} - actor/loss:{sum(losses):.3f}", flush=True)
        print("training finished", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
