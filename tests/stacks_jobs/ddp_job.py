"""A 4-rank gloo job on CPU that hangs on purpose: the scenario comes from STACKS_SCENARIO.

odd-sleep:  rank 2 sleeps in user code before the all_reduce that ranks 0, 1, 3 entered.
mismatch:   ranks 0, 1, 2 wait in all_reduce, rank 3 in barrier (different collectives).
healthy:    every rank steps (a sleep standing in for compute) and all-reduces, forever.
Each rank writes its pid to STACKS_READY/<rank> once it is where the scenario puts it.
"""

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist


def slow_step() -> None:
    time.sleep(600)


def compute() -> None:
    time.sleep(0.2)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    scenario = os.environ["STACKS_SCENARIO"]
    ready = Path(os.environ["STACKS_READY"])
    x = torch.ones(4)
    dist.barrier()  # everyone is up before the scenario starts
    (ready / str(rank)).write_text(str(os.getpid()))
    if scenario == "odd-sleep":
        if rank == 2:
            slow_step()
        dist.all_reduce(x)
    elif scenario == "mismatch":
        if rank == 3:
            dist.barrier()
        else:
            dist.all_reduce(x)
    else:
        while True:
            compute()
            dist.all_reduce(x)
    time.sleep(600)


if __name__ == "__main__":
    main()
