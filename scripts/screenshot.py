#!/usr/bin/env python
"""Regenerate docs/screenshot.svg: the app answering a real NCCL paste.

Runs the app headless under Pilot over the real cases and index (the index
is built first if needed, which can take a while on a first run), waits for
the dense model so the screenshot shows the fused answer, and saves an SVG.

    .venv/bin/python scripts/screenshot.py [--out docs/screenshot.svg]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PASTE = """(WorkerDict pid=48213) Traceback (most recent call last):
(WorkerDict pid=48213)   File "verl/single_controller/base/decorator.py", line 540, in inner
(WorkerDict pid=48213)   File "verl/workers/fsdp_workers.py", line 612, in init_model
(WorkerDict pid=48213)     torch.distributed.barrier()
(WorkerDict pid=48213) torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
(WorkerDict pid=48213) ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
(WorkerDict pid=48213) Last error:
(WorkerDict pid=48213) socketStartConnect: Connect to 172.17.0.2<43521> failed : Software caused connection abort"""


async def shoot(out: Path, size: tuple[int, int]) -> None:
    from tui.app import KbApp
    from tui.widgets.prompt import PromptArea

    app = KbApp(cursor_blink=False)
    async with app.run_test(size=size) as pilot:
        end = time.monotonic() + 600
        while app.engine is None or app.engine_error:
            if app.engine_error or time.monotonic() > end:
                raise SystemExit(f"the index did not open: {app.engine_error or 'timeout'}")
            await pilot.pause(0.1)
        await app.workers.wait_for_complete()  # the dense model, so the answer is the fused one
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text(PASTE)
        await pilot.press("enter")
        while any(t.pending for t in app.chat.conv.turns):
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.svg")
    parser.add_argument("--width", type=int, default=120)
    parser.add_argument("--height", type=int, default=44)
    args = parser.parse_args()
    asyncio.run(shoot(args.out, (args.width, args.height)))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
