"""`kb run ID`: show a case's checks, ask, run them on this node, print verdicts.

Nothing runs without consent: on a terminal kb shows the final code (control
characters made visible), the interpreter, timeout and needs, the case's
folder layer and file, and asks; elsewhere it needs `--yes`. `--yes` runs only
checks of trusted folders (built-in, or `kb trust DIR`); a check of another
folder runs only when the user confirms that run on a terminal after seeing it.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kb.cases.casefile import Case, Check
from kb.cases.caseset import load_cases
from kb.cases.params import value_error
from kb.cases.provenance import case_origin
from kb.cases.trust import TrustState, case_trust
from kb.checks.needs import target_python
from kb.checks.runner import CheckResult, Plan, plan_check, run_check
from kb.core.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from kb.core.safe_text import dumps, visible, visible_block, visible_code


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a case's checks on this node (asks first)")
    p.add_argument("id", help="case id")
    p.add_argument("--check", metavar="NAME", help="run only this check")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="value for a parameter, passed to the check as the environment variable KB_PARAM_<KEY> (repeatable)")
    p.add_argument("--python", metavar="PATH", help="Python of the training environment (default: KB_PYTHON, else python3 on PATH)")
    p.add_argument("--dry-run", action="store_true", help="only print what would run")
    p.add_argument("--yes", "-y", action="store_true", help="run without asking")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.set_defaults(func=run)


def is_interactive() -> bool:
    """Asking needs a person: stdin must be a terminal."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def find_case(case_id: str, cases: list[Case]) -> Case:
    by_id = {c.id: c for c in cases}
    if case_id in by_id:
        return by_id[case_id]
    hint = difflib.get_close_matches(case_id, list(by_id), n=1)
    raise UsageError(visible(f"no case {case_id!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "; `kb search` finds cases")))


def select_checks(case: Case, name: str | None) -> list[Check]:
    if not case.checks:
        raise UsageError(f"case {case.id!r} has no checks to run")
    if name is None:
        return list(case.checks)
    check = case.check(name)
    if check is None:
        raise UsageError(visible(f"case {case.id!r} has no check {name!r}; its checks: {', '.join(c.name for c in case.checks)}"))
    return [check]


def parse_params(items: list[str], case: Case) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(visible(f"--param wants KEY=VALUE, got {item!r}"))
        if key not in case.params:
            known = ", ".join(case.params) or "none"
            raise UsageError(f"case {case.id!r} has no parameter {visible(key)!r} (its parameters: {known})")
        why = value_error(case.params[key].type, value)
        if why:
            # Refused before anything is planned: the value never reaches the code.
            raise UsageError(f"--param {key}: {visible(repr(value))} {why}")
        values[key] = value
    return values


def check_python(explicit: str | None) -> None:
    """A --python or KB_PYTHON that does not exist is the user's mistake, said before anything runs."""
    tp = target_python(explicit)
    if tp.source in ("--python", "KB_PYTHON") and not (os.path.isfile(tp.path) and os.access(tp.path, os.X_OK)):
        raise UsageError(f"{tp.source} {tp.path!r} is not an executable file")


def ask_missing(plans: list[Plan], case: Case, values: dict[str, str], interactive: bool, out: TextIO) -> None:
    missing = sorted({name for plan in plans for name in plan.missing})
    if not missing:
        return
    if not interactive:
        flags = " ".join(f"--param {n}=VALUE" for n in missing)
        raise UsageError(f"missing parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)} (no default): pass {flags}")
    for name in missing:
        param = case.params.get(name)
        desc = f" ({param.description}; {param.type})" if param else ""
        while True:
            out.write(visible(f"{name}{desc}") + ": ")  # not input(): with --json, stdout is for the JSON alone
            out.flush()
            answer = sys.stdin.readline()
            if not answer:
                raise UsageError(f"no value for parameter {name!r}")
            if answer.strip():
                why = value_error(param.type if param else "text", answer.strip())
                if why:
                    out.write(f"  {visible(repr(answer.strip()))} {why}; try again\n")
                    continue
                values[name] = answer.strip()
                break


def describe(plan: Plan, index: int, total: int, out: TextIO) -> None:
    check = plan.check
    print(visible(f"--- check {index}/{total}: {check.name} ({check.lang}) ---"), file=out)
    if check.description:
        print(f"  {visible(check.description)}", file=out)
    print(f"  interpreter: {visible(plan.interpreter_desc)}", file=out)
    print(f"  timeout: {check.timeout:g} s    needs: {visible(', '.join(check.needs) or 'nothing')}", file=out)
    if plan.values:
        print("  parameters (in its environment, never in its code): "
              + visible(", ".join(f"{k}={v!r}" for k, v in plan.environment.items())), file=out)
    if plan.missing:
        print(f"  missing (asked before running): {', '.join(plan.missing)}", file=out)
    for line in visible_code(plan.code).rstrip("\n").splitlines():
        print(f"  | {line}", file=out)


def describe_case(case: Case, state: TrustState, out: TextIO) -> None:
    """Title, folder layer and file (and what it overrides), and whether its folder is trusted."""
    print(visible(f"{case.id}: {case.title}"), file=out)
    print(f"  from {case_origin(case).describe()}", file=out)
    if state.trusted:
        print(f"  trust: {state.reason}", file=out)
    else:
        print(visible(f"  trust: NOT TRUSTED ({state.reason}): answering y runs this once; "
                      f"to trust the folder after reading its checks: {state.command}"), file=out)


def confirm(count: int, out: TextIO) -> bool:
    out.write(f"Run {'this check' if count == 1 else f'these {count} checks'} on this node? [y/N] ")
    out.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def print_result(result: CheckResult, out: TextIO) -> None:
    print(visible(f"=> {result.name}: {result.verdict.upper()} ({result.reason}; {result.duration_s:.2f} s)"), file=out)


def run(args: argparse.Namespace) -> int:
    caseset = load_cases(args.cases)
    case = find_case(args.id, caseset.cases)
    checks = select_checks(case, args.check)
    values = parse_params(args.param, case)
    check_python(args.python)
    out = sys.stderr if args.json else sys.stdout  # --json keeps stdout for the JSON alone

    plans = [plan_check(case, c, values, args.python) for c in checks]
    if args.dry_run:
        describe_case(case, case_trust(case), out)
        for i, plan in enumerate(plans, 1):
            describe(plan, i, len(plans), out)
        return EXIT_OK

    interactive = is_interactive()
    state = case_trust(case)
    if args.yes and not state.trusted:
        # --yes is consent without reading: only for folders the user trusted.
        raise UsageError(visible(
            f"case {case.id!r} comes from {case_origin(case).describe()}, and that folder is not trusted "
            f"({state.reason}): --yes runs only checks of trusted folders. Read them with `kb run {case.id} --dry-run`, "
            f"then trust the folder with `{state.command}`, or run without --yes on a terminal to confirm this one run."))
    ask_missing(plans, case, values, interactive, out)
    plans = [plan_check(case, c, values, args.python) for c in checks]
    if not args.yes:
        if not interactive:
            raise UsageError("refusing to run checks without confirmation: stdin is not a terminal. "
                             "Pass --yes to run them, or --dry-run to only print them.")
        describe_case(case, state, out)
        for i, plan in enumerate(plans, 1):
            describe(plan, i, len(plans), out)
        if not confirm(len(plans), out):
            print("Nothing was run.", file=out)
            return EXIT_NEGATIVE

    results: list[CheckResult] = []
    for plan in plans:
        if not args.json:
            print(visible(f"--- running {plan.check.name} with {plan.interpreter_desc} ---"), file=out, flush=True)
        stream = None if args.json else _streamer(out)
        result = run_check(case, plan.check, plan.values, args.python, on_output=stream)
        results.append(result)
        if not args.json:
            if result.output and not result.output.endswith("\n"):
                print(file=out)
            print_result(result, out)
    if args.json:
        print(dumps({"case": case.id, **case_origin(case).to_json(), "checks": [r.to_dict() for r in results]}, indent=2))
    else:
        print("A verdict covers only what the check looked at. Recorded in `kb history`.", file=out)
    return EXIT_OK


def _streamer(out: TextIO) -> Callable[[str], None]:
    """A check's output as it comes, escapes made visible."""

    def write(text: str) -> None:
        out.write(visible_block(text))
        out.flush()

    return write
