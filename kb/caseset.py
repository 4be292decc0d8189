"""Load case folders into one set: layering, duplicate ids, deep validation.

Folders are searched in this order, later layers above earlier ones: the
built-in cases, then each folder of `KB_CASES` (os.pathsep-separated), then each
`--cases DIR`. An id defined twice is an error naming both files, and the first
definition wins, unless the later file says `overrides: true`, which replaces
the earlier case on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .casefile import PLACEHOLDER_RE, Case, Check, Problem, parse_case_file
from .paths import builtin_cases_dir

IGNORED_NAMES = {"README.md", "index.md"}


@dataclass
class CaseSet:
    cases: list[Case] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    def get(self, case_id: str) -> Case | None:
        return self.by_id().get(case_id)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def env_case_dirs() -> list[Path]:
    raw = os.environ.get("KB_CASES", "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def case_folders(extra: list[Path] | None = None, include_builtin: bool = True) -> list[Path]:
    folders: list[Path] = [builtin_cases_dir()] if include_builtin else []
    folders += env_case_dirs()
    folders += [Path(p).expanduser() for p in (extra or [])]
    seen: list[Path] = []
    for f in folders:
        r = f.resolve() if f.exists() else f
        if r not in seen:
            seen.append(r)
    return seen


def case_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.md") if p.name not in IGNORED_NAMES and p.is_file())


def load_cases(extra: list[Path] | None = None, include_builtin: bool = True) -> CaseSet:
    result = CaseSet(folders=case_folders(extra, include_builtin))
    where: dict[str, Case] = {}
    for folder in result.folders:
        if not folder.is_dir():
            result.problems.append(Problem(folder, 0, "case folder does not exist or is not a folder"))
            continue
        for path in case_files(folder):
            case, problems = parse_case_file(path)
            result.problems.extend(problems)
            if case is None:
                continue
            earlier = where.get(case.id)
            if earlier is None:
                where[case.id] = case
            elif case.overrides and earlier.path.parent != case.path.parent:
                where[case.id] = case
            else:
                result.problems.append(
                    Problem(path, 1, f"duplicate id {case.id!r}: also defined in {earlier.path} (set 'overrides: true' to replace it on purpose)")
                )
    result.cases = sorted(where.values(), key=lambda c: (c.category, c.id))
    return result


def dummy_substitute(check: Check) -> str:
    """The check's code with every placeholder replaced by a harmless literal, for syntax checks."""
    if check.lang == "python":
        return PLACEHOLDER_RE.sub("'x'", check.code)
    return PLACEHOLDER_RE.sub("x", check.code)


def validate_check_syntax(case: Case) -> list[Problem]:
    """`bash -n` for bash checks, compile() for python checks."""
    problems: list[Problem] = []
    bash = shutil.which("bash")
    for check in case.checks:
        code = dummy_substitute(check)
        if check.lang == "python":
            try:
                compile(code, f"{case.path}:{check.name}", "exec")
            except SyntaxError as exc:
                line = check.line + (exc.lineno or 0)
                problems.append(Problem(case.path, line, f"check {check.name!r} does not parse: {exc.msg}"))
        elif bash:
            proc = subprocess.run([bash, "-n"], input=code, capture_output=True, text=True, timeout=10)
            if proc.returncode != 0:
                msg = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "syntax error"
                problems.append(Problem(case.path, check.line, f"check {check.name!r} does not parse (bash -n): {msg}"))
    return problems


def validate(caseset: CaseSet) -> list[Problem]:
    """Everything `kb check` reports: load problems plus check syntax."""
    problems = list(caseset.problems)
    for case in caseset.cases:
        if not case.checks:
            problems.append(Problem(case.path, 1, "no check under '## Verify' (add a fenced block with {name=...})", "warning"))
        problems.extend(validate_check_syntax(case))
    return problems
