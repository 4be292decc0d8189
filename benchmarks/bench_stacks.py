"""Time `kb stacks` end to end on 8 processes: discovery, 3 py-spy samples of each, analysis.

Starts 8 Python processes that look like torchrun ranks (RANK/LOCAL_RANK/WORLD_SIZE set; rank 5
waits somewhere else), runs the same code as `kb stacks --under PID` over them, prints the wall
times and the verdict, and stops the processes. Usage: .venv/bin/python benchmarks/bench_stacks.py [--runs N]
The issue's target: within 10 s on the development machine (2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from kb.hangs.analyse import stacks_report

RANK_CODE = """
import os, threading, time
def all_reduce_stand_in():
    threading.Event().wait()
def slow_reward():
    time.sleep(3600)
open(os.environ["READY"], "a").write(os.environ["RANK"] + "\\n")
(slow_reward if os.environ["RANK"] == "5" else all_reduce_stand_in)()
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    ready = f"/tmp/kb-bench-stacks-{os.getpid()}"
    procs = []
    try:
        for r in range(8):
            env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "8", "READY": ready}
            procs.append(subprocess.Popen([sys.executable, "-c", RANK_CODE], env=env))
        while not os.path.exists(ready) or len(open(ready).read().split()) < 8:
            time.sleep(0.1)
        within = {p.pid for p in procs}
        times = []
        for _ in range(max(1, args.runs)):
            start = time.monotonic()
            a = stacks_report(within=within)
            times.append(round(time.monotonic() - start, 2))
        print(json.dumps({"processes": len(a.stacks), "samples": 3, "seconds": times, "verdict": a.verdict,
                          "odd": [o.proc.name for o, _ in a.odd]}, indent=2))
        return 0 if len(a.stacks) == 8 and max(times) <= 10 else 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
        if os.path.exists(ready):
            os.unlink(ready)


if __name__ == "__main__":
    sys.exit(main())
