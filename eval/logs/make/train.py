"""A tiny data-parallel training job (gloo, CPU) with one injectable fault.

Run under torchrun; `--fault NAME --fault-rank R --fault-step S` picks what goes
wrong, where and when (see FAULTS). Without --fault it is the good run.
Stages print the way training frameworks do (init, step N, checkpoint,
validation) so a log shows how far the job got.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import faulthandler
import os
import signal
import sys
import time
import warnings

import torch
import torch.distributed as dist

FAULTS = ("attr", "size", "hang", "nan", "ckpt", "val", "kill", "alloc", "preinit", "cuda", "exit", "keyerror",
          "segv", "dlkill", "unused", "skip", "ckpt-hang", "shutdown", "nanloss")


class Batches(torch.utils.data.Dataset):
    """Random batches; `--fault dlkill` kills the DataLoader worker that loads the fault step's batch."""

    def __init__(self, kill_at: int | None) -> None:
        self.kill_at = kill_at

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.kill_at is not None and i == self.kill_at - 1:
            os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does to a worker
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)


class Net(torch.nn.Module):
    def __init__(self, body: torch.nn.Module, head: torch.nn.Module) -> None:
        super().__init__()
        self.body, self.head = body, head

    def forward(self, x: torch.Tensor, skip_head: bool = False) -> torch.Tensor:
        h = self.body(x)
        return h if skip_head else self.head(h)


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        torch.manual_seed(0)
        self.model = torch.nn.Linear(8, 1)
        self.head = torch.nn.Linear(1, 1)  # used by the DDP run (--fault unused)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def wrap_ddp(self) -> None:
        self.ddp = torch.nn.parallel.DistributedDataParallel(Net(self.model, self.head))
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=0.01)

    def step(self, step: int, args: argparse.Namespace, batch: tuple[torch.Tensor, torch.Tensor] | None = None) -> float:
        x, y = batch if batch is not None else (torch.randn(16, 8), torch.randn(16, 1))
        bad = args.fault and self.rank == args.fault_rank and step == args.fault_step
        if bad and args.fault == "attr":
            self.scheduler.step()  # the job's own bug: there is no scheduler
        if bad and args.fault == "nan":
            with torch.autograd.detect_anomaly():
                out = self.model(x)
                loss = torch.sqrt(-out.abs().sum() - 1.0)  # sqrt of a negative number: NaN, and a NaN gradient
                loss.backward()
        if bad and args.fault == "alloc":
            torch.empty(1 << 44, dtype=torch.float32)  # 64 TiB
        if bad and args.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if bad and args.fault == "segv":
            ctypes.string_at(0)  # a native extension reading address 0
        if bad and args.fault == "skip":
            warnings.warn(f"rank {self.rank}: batch at step {step} is empty after filtering, skipping the step", stacklevel=1)
            time.sleep(args.timeout * 4)  # reloading its shard: it is not in the step's all_reduce, its peers wait
            return float("nan")
        if bad and args.fault == "exit":
            sys.exit(3)  # a rank that quits without a traceback
        if bad and args.fault == "keyerror":
            cfg = {"lr": 0.01}
            _ = cfg["warmup_steps"]
        if args.fault == "unused":  # DDP: rank R skips the head at step S, so its grads never arrive
            out = self.ddp(x, skip_head=bad)
            loss = torch.nn.functional.mse_loss(out, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return float(loss)
        if args.fault == "nanloss" and self.rank == args.fault_rank and step >= args.fault_step:
            x = x * 1e38  # a bad batch: the loss overflows, then every step is NaN
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        if args.fault == "nanloss":
            if not torch.isfinite(loss):
                print(f"[rank{self.rank}] WARNING: step {step}: loss is {float(loss)}, grad_norm is not finite", flush=True)
            if step >= args.fault_step + 2:  # the job clips with error_if_nonfinite after its warm-up of bad steps
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, error_if_nonfinite=True)
        for p in self.model.parameters():
            grad = p.grad
            if bad and args.fault == "size":
                grad = torch.zeros(grad.numel() + 3)
            if bad and args.fault == "hang":
                time.sleep(args.timeout * 4)  # never reaches the collective in time
            dist.all_reduce(grad)
            p.grad = grad / self.world
        self.opt.step()
        return float(loss)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault", choices=FAULTS)
    ap.add_argument("--fault-rank", type=int, default=1)
    ap.add_argument("--fault-step", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=6.0)
    ap.add_argument("--ckpt-dir", default="/tmp/kb-logs-ckpt")
    args = ap.parse_args()
    faulthandler.enable()  # as training frameworks do: a native crash prints "Fatal Python error"
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if args.fault == "preinit" and rank == args.fault_rank:
        import deepspeed  # noqa: F401  (not installed: the job's missing dependency)
    print(f"[init] rank {rank}/{world} connecting to {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    if args.fault == "cuda" and rank == args.fault_rank:
        torch.cuda.set_device(rank)
    trainer = Trainer(rank, world)
    if args.fault == "unused":
        trainer.wrap_ddp()
    batches = None
    if args.fault == "dlkill":  # batches from a DataLoader worker process
        kill_at = args.fault_step if rank == args.fault_rank else None
        batches = iter(torch.utils.data.DataLoader(Batches(kill_at), batch_size=None, num_workers=1, prefetch_factor=1))
    print(f"[init] rank {rank} process group ready, world size {world}", flush=True)
    for step in range(1, args.steps + 1):
        loss = trainer.step(step, args, next(batches) if batches is not None else None)
        if rank == 0:
            print(f"step {step}/{args.steps} loss={loss:.4f} lr=0.01", flush=True)
        if step == args.steps // 2 + 1 and rank == 0:
            path = args.ckpt_dir if args.fault != "ckpt" else "/proc/kb-no-such-dir/ckpt"
            print(f"[checkpoint] saving step {step} to {path}", flush=True)
            os.makedirs(path, exist_ok=True) if args.fault != "ckpt" else None
            if args.fault == "ckpt-hang":
                time.sleep(args.timeout * 4)  # a save that stalls (a slow or hung filesystem)
            torch.save(trainer.model.state_dict(), os.path.join(path, f"step_{step}.pt"))
        if step == args.steps // 2 + 1 and args.fault == "ckpt-hang":
            print(f"[checkpoint] rank {rank} waiting at the checkpoint barrier at step {step}", flush=True)
            dist.barrier()
        if step == args.steps:
            print(f"[validation] rank {rank} running validation", flush=True)
            w = trainer.model.weight
            if args.fault == "val" and rank == args.fault_rank:
                w = w.t()
            val = torch.nn.functional.linear(torch.randn(4, 8), w)
            dist.all_reduce(val)
            if rank == 0:
                print(f"[validation] val_score={float(val.mean()):.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("training finished", flush=True)
    print(f"[shutdown] rank {rank} writing final metrics", flush=True)
    if args.fault == "shutdown" and rank == args.fault_rank:
        with open("/proc/kb-no-such-dir/metrics.json", "w") as f:  # the job's own bug at exit
            f.write("{}")
    # no destroy_process_group(): with gloo on CPU a rank that tears down while its peer is still
    # leaving the barrier can abort ("terminate called without an active exception"); exiting is enough


if __name__ == "__main__":
    sys.exit(main())
