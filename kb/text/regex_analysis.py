"""What a regex signature requires and whether it can backtrack badly, read from its parse tree.

Used when signatures are loaded (the literal a pattern cannot match without, so
it only runs on pastes that hold it), when the index stores that literal per
case, and by `kb check` and drafted signatures (patterns that could hang a search).
"""

from __future__ import annotations

import re
import time

try:  # the `regex` package: same syntax as `re`, plus a per-call timeout
    import regex as _rx

    HAVE_TIMEOUT = True
except ImportError:  # pragma: no cover - a dependency
    _rx = re  # type: ignore[assignment]
    HAVE_TIMEOUT = False

PROBE_TIMEOUT_S = 0.05


def _sre():  # the regex parser module; its constants come with it on 3.10 and 3.11+
    try:
        import re._parser as sre_parse
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse  # type: ignore[no-redef]
    return sre_parse


def _parse(pattern: str):  # -> sre parse tree or None
    try:
        return _sre().parse(pattern, re.I)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


def _literal_runs(tree) -> list[str]:
    """Literal runs every match must contain, read from the top level of the pattern.

    Conservative: groups, alternations, classes and optional items end a run;
    `x+` keeps its first `x`. Returns [] when nothing is certain.
    """
    from re._constants import LITERAL, MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT

    runs: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    for op, av in tree:
        if op is LITERAL:
            cur.append(chr(av))
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            lo, _hi, sub = av
            items = list(sub)
            if lo >= 1 and len(items) == 1 and items[0][0] is LITERAL:
                cur.append(chr(items[0][1]))  # x+ : one x is certain, then the run ends
            flush()
        else:
            flush()
    flush()
    return runs


def required_literal(pattern: str) -> str:
    """The longest casefolded literal run the pattern requires ('' if unsure or too short)."""
    tree = _parse(pattern)
    if tree is None:
        return ""
    try:
        runs = _literal_runs(tree)
    except Exception:
        return ""
    best = max(runs, key=len, default="")
    if len(best) < 3 or not best.isascii():
        return ""
    return best.casefold()


def _nested_repeat(tree, inside: bool = False) -> bool:
    sre = _sre()
    BRANCH, SUBPATTERN, ASSERT, ASSERT_NOT, MAXREPEAT = sre.BRANCH, sre.SUBPATTERN, sre.ASSERT, sre.ASSERT_NOT, sre.MAXREPEAT
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT} | ({sre.POSSESSIVE_REPEAT} if hasattr(sre, "POSSESSIVE_REPEAT") else set())
    ATOMIC_GROUP = getattr(sre, "ATOMIC_GROUP", object())

    for op, av in tree:
        if op in repeats:
            lo, hi, sub = av
            unbounded = hi is MAXREPEAT or hi > 16
            if inside and unbounded:
                return True
            if _nested_repeat(sub, inside or unbounded):
                return True
        elif op is SUBPATTERN:
            if _nested_repeat(av[-1], inside):
                return True
        elif op is BRANCH:
            if any(_nested_repeat(b, inside) for b in av[1]):
                return True
        elif op in (ATOMIC_GROUP,):
            if _nested_repeat(av, inside):
                return True
        elif op in (ASSERT, ASSERT_NOT):
            if _nested_repeat(av[1], inside):
                return True
    return False


def has_nested_repeat(pattern: str) -> bool:
    """True for a repeat inside an unbounded repeat (`(a+)+`), or a pattern that does not parse."""
    tree = _parse(pattern)
    if tree is None:
        return True
    try:
        return _nested_repeat(tree)
    except RecursionError:
        return True


def _probes(pattern: str) -> list[str]:
    chars = sorted({c for c in pattern if c.isalnum()} | set("a0 _-./:x\t"))
    out = []
    for c in chars[:40]:
        out.append(c * 3000 + "\x00")
        out.append((c + " ") * 1500 + "\x00")
    return out


def regex_risk(pattern: str) -> str | None:
    """Why a signature regex could make a search slow (None if it looks safe).

    Two tests: a repeat inside a repeat (`(a+)+`, `(\\w+\\s?)*`), the shape of
    catastrophic backtracking; and adversarial probes (long runs of one
    character followed by a character that breaks the match), each with a
    time limit.
    """
    tree = _parse(pattern)
    if tree is None:
        return None  # not compiling is reported separately
    try:
        if _nested_repeat(tree):
            return "has a repeat nested inside a repeat (catastrophic backtracking); rewrite it without the outer repeat"
    except RecursionError:
        return "is nested too deeply"
    try:
        rx = _rx.compile(pattern, _rx.I)
    except Exception:
        return None
    for probe in _probes(pattern):
        t0 = time.perf_counter()
        try:
            if HAVE_TIMEOUT:
                rx.search(probe, timeout=PROBE_TIMEOUT_S)
            else:  # pragma: no cover
                rx.search(probe)
        except TimeoutError:
            return f"takes over {PROBE_TIMEOUT_S * 1000:.0f} ms on a {len(probe)}-character probe (catastrophic backtracking)"
        if time.perf_counter() - t0 > PROBE_TIMEOUT_S * 4:
            return f"takes {time.perf_counter() - t0:.2f} s on a {len(probe)}-character probe"
    return None
