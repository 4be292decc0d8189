"""The app's speed as a person meets it: the real `kb` in a pseudo-terminal.

    .venv/bin/python benchmarks/bench_app.py [--runs 5] [--no-dense]

- first paint: from starting `kb` to the welcome text on screen;
- open case: from ctrl+o (the top card of an answer) to the case view on screen
  (its header and checks panel); then to its footer keys, and to its rendered body;
- quit: from ctrl+q to the process gone.
The screen is read through a terminal emulator (pyte), as in tests/test_app_pty.py.
Medians go to stdout and into benchmarks/results.json under "app"; the README quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pexpect  # noqa: E402
from ptyterm import Terminal  # noqa: E402

QUERY = "unhandled system error (run with NCCL_DEBUG=INFO for details)"


def one_run(args: argparse.Namespace) -> dict[str, float]:
    t0 = time.monotonic()
    term = Terminal(160, 45, None, dense=not args.no_dense)
    term.wait_for(lambda s: "Paste an error" in s, "first paint", timeout=60)
    first_paint = time.monotonic() - t0
    term.wait_for(lambda s: re.search(r"\d+ cases", s) is not None, "the cases loaded", timeout=300)  # the status line
    term.paste(QUERY)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error ·" in s, "the answer", timeout=60)
    t1 = time.monotonic()
    term.send("\x0f")  # ctrl+o
    # The case view on screen: its header (title, id) and its checks panel; they paint together.
    term.wait_for(lambda s: "Checks (" in s and "nccl-unhandled-system-error · " in s.splitlines()[1], "the case view", timeout=30)
    open_case = time.monotonic() - t1
    # Then its keys in the footer (Textual composes the footer after the first paint),
    # and the rendered Markdown body (rendered after the view is up).
    term.wait_for(lambda s: "r Run check" in s, "the case view's keys", timeout=30)
    open_keys = time.monotonic() - t1
    term.wait_for(lambda s: "rendering the case" not in s, "the case body", timeout=30)
    open_body = time.monotonic() - t1
    t2 = time.monotonic()
    term.send("\x11")  # ctrl+q
    term.child.expect(pexpect.EOF, timeout=30)
    quit_s = time.monotonic() - t2
    return {"first_paint_s": first_paint, "open_case_s": open_case, "open_case_keys_s": open_keys, "open_case_body_s": open_body, "quit_s": quit_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-dense", action="store_true", help="start the app without the embedding model")
    args = ap.parse_args()
    runs = [one_run(args) for _ in range(args.runs)]
    summary = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        summary[key] = {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}
        print(f"{key:14s} median {summary[key]['median']:.3f} s  (min {summary[key]['min']:.3f}, max {summary[key]['max']:.3f}, {len(values)} runs)")
    out = ROOT / "benchmarks" / "results.json"
    data = json.loads(out.read_text()) if out.exists() else {}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    data["app"] = {"runs": args.runs, "no_dense": args.no_dense, "date": time.strftime("%Y-%m-%d"),
                   "cores": os.cpu_count(), "load_1min_after": round(load, 2) if load is not None else None, **summary}
    out.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
