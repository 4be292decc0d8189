"""Turn an unexpected exception into one line plus a crash log (exit 3).

User errors (`UsageError`) print their message and exit 2. Anything else is a
bug of kb's: the user sees one line naming the log, which holds versions and
the traceback for a bug report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from kb import __version__
from kb.core.errors import EXIT_CRASH, EXIT_USAGE, UsageError


def write_crash_log(exc: BaseException) -> str:
    # imported here: every kb command (and the app's start) imports this module, few ever crash
    import datetime as _dt
    import platform
    import traceback

    from kb.core.paths import data_dir

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = data_dir() / "crashes"
    text = (
        f"kb {__version__}\npython {sys.version}\nplatform {platform.platform()}\n"
        f"argv {sys.argv}\n\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{stamp}.log"
        path.write_text(text, encoding="utf-8")
        return str(path)
    except OSError:
        sys.stderr.write(text)
        return "(could not write a log; traceback printed above)"


def guarded(func: Callable[[Any], int], args: Any) -> int:
    try:
        return int(func(args) or 0)
    except UsageError as exc:
        from kb.core.safe_text import visible_block

        print(f"kb: {visible_block(exc)}", file=sys.stderr)  # it may quote a file name or a value from a file
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        log = write_crash_log(exc)
        print(f"kb: internal error: {type(exc).__name__}: {exc} (details: {log})", file=sys.stderr)
        return EXIT_CRASH
