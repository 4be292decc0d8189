"""Load case folders into one set: layering, duplicate ids, deep validation.

Folders are layered, lowest first (docs/case-folders.md): the built-in cases,
the team folder and the personal folder of `config.toml` (kb.core.config), each
folder of `KB_CASES` (os.pathsep-separated), then each `--cases DIR`. An id
defined twice is an error naming both files, and the first (lower) definition
wins, unless the later file says `overrides: true`, which replaces the earlier
case on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kb.cases.digest import FolderDigest
from kb.core.file_bounds import MAX_WALK_ENTRIES, WalkResult, walk_files
from kb.core.paths import builtin_cases_dir

if TYPE_CHECKING:  # the parser is imported where cases are parsed: a search of a current index lists case files only
    from kb.cases.casefile import Case, Problem

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


@dataclass(frozen=True)
class Layer:
    """One case folder and where it came from: built-in, team, personal, KB_CASES or --cases."""

    source: str
    path: Path


def case_layers(extra: list[Path] | None = None, include_builtin: bool = True, include_config: bool | None = None) -> list[Layer]:
    """The case folders, lowest precedence first, each once (the lowest layer naming it keeps it).

    `include_config` (default: same as `include_builtin`) adds the team and
    personal folders of config.toml; the personal folder is skipped while it
    does not exist (`kb new` creates it), a configured team folder is kept so
    that a wrong path is reported.
    """
    if include_config is None:
        include_config = include_builtin
    layers: list[Layer] = [Layer("built-in", builtin_cases_dir())] if include_builtin else []
    if include_config:
        from kb.core.config import load_config

        cfg = load_config()
        if cfg.team_cases is not None:
            layers.append(Layer("team", cfg.team_cases))
        if cfg.personal_cases.is_dir():
            layers.append(Layer("personal", cfg.personal_cases))
    layers += [Layer("KB_CASES", p) for p in env_case_dirs()]
    layers += [Layer("--cases", Path(p).expanduser()) for p in (extra or [])]
    seen: list[Path] = []
    result: list[Layer] = []
    for layer in layers:
        r = layer.path.resolve() if layer.path.exists() else layer.path
        if r not in seen:
            seen.append(r)
            result.append(Layer(layer.source, r))
    return result


def case_folders(extra: list[Path] | None = None, include_builtin: bool = True, include_config: bool | None = None) -> list[Path]:
    """The folders of `case_layers`, lowest precedence first."""
    return [layer.path for layer in case_layers(extra, include_builtin, include_config)]


def _is_case_name(name: str) -> bool:
    return name.endswith(".md") and name not in IGNORED_NAMES


def walk_case_files(folder: Path) -> WalkResult:
    """The case files under `folder` (any depth, no recursion) and what was passed over: a FIFO or
    a link to /proc named `*.md` is never opened (kb.core.file_bounds)."""
    return walk_files(folder, _is_case_name)


def case_files(folder: Path) -> list[Path]:
    return walk_case_files(folder).files


def load_cases(extra: list[Path] | None = None, include_builtin: bool = True) -> CaseSet:
    """Parse every layer's case files; each Case records its layer, folder and the file it overrides.

    An override is reported as a note (never silent); two files with one id
    inside the same folder layer are an error whatever `overrides` says.
    """
    from kb.cases.casefile import Problem, parse_case_bytes, read_case_bytes

    layers = case_layers(extra, include_builtin)
    result = CaseSet(folders=[layer.path for layer in layers])
    if include_builtin:
        from kb.core.config import load_config

        cfg = load_config()
        result.problems += [Problem(cfg.path, 0, msg, "warning") for msg in cfg.problems]
    where: dict[str, Case] = {}
    for layer in layers:
        folder = layer.path
        if not folder.is_dir():
            result.problems.append(Problem(folder, 0, "case folder does not exist or is not a folder"))
            continue
        digest = FolderDigest(folder)
        loaded: list[Case] = []
        walked = walk_case_files(folder)
        result.problems += [Problem(folder, 0, f"skipped {line}", "warning") for line in walked.skipped]
        if walked.truncated:
            result.problems.append(Problem(folder, 0, f"more than {MAX_WALK_ENTRIES} entries; the rest were not read"))
        for path in walked.files:
            raw, problems = read_case_bytes(path)
            digest.add(path, raw)  # the same bytes that are parsed: trust is judged on what runs
            case, more = parse_case_bytes(path, raw) if raw is not None else (None, [])
            result.problems.extend(problems + more)
            if case is None:
                continue
            case.layer, case.folder = layer.source, folder
            loaded.append(case)
            earlier = where.get(case.id)
            if earlier is None:
                where[case.id] = case
                if case.overrides:
                    result.problems.append(Problem(path, 1, f"'overrides: true' but no lower folder layer has a case {case.id!r}", "warning"))
            elif earlier.folder == folder:
                result.problems.append(Problem(
                    path, 1, f"duplicate id {case.id!r} inside one folder: also defined in {earlier.path} "
                             "('overrides' only replaces a case of a lower folder layer)"))
            elif case.overrides:
                case.replaces, case.replaces_layer = earlier.path, earlier.layer
                where[case.id] = case
                result.problems.append(Problem(path, 1, f"overrides {earlier.layer} case {case.id!r} of {earlier.path}", "note"))
            else:
                result.problems.append(
                    Problem(path, 1, f"duplicate id {case.id!r}: also defined in {earlier.path} (set 'overrides: true' to replace it on purpose)")
                )
        for case in loaded:
            case.folder_hash = digest.hexdigest()
    result.cases = sorted(where.values(), key=lambda c: (c.category, c.id))
    return result


def validate_check_syntax(case: Case) -> list[Problem]:
    """`bash -n` for bash checks, compile() for python checks."""
    from kb.cases.casefile import Problem

    problems: list[Problem] = []
    bash = shutil.which("bash")
    for check in case.checks:
        code = check.code
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


def validate_regex_cost(case: Case) -> list[Problem]:
    """Regex signatures that could backtrack catastrophically (nested repeats, slow on probes)."""
    from kb.cases.casefile import Problem
    from kb.cases.names import REGEX_PREFIX
    from kb.text.regex_analysis import regex_risk

    problems: list[Problem] = []
    lines = _FileLines(case.path)
    for sig in case.signatures:
        if not sig.startswith(REGEX_PREFIX):
            continue
        pattern = sig[len(REGEX_PREFIX):].strip()
        risk = regex_risk(pattern)
        if not risk:
            continue
        line = lines.first(pattern[:40], unescape=True)
        problems.append(Problem(case.path, line, f"signature regex {pattern!r} {risk}"))
    return problems


class _FileLines:
    """A case file's lines, read once and only when a problem needs its line number."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines: list[str] | None = None

    def first(self, *needles: str, unescape: bool = False) -> int:
        """The 1-based number of the first line holding every needle, else 1; `unescape`: read the
        line's doubled backslashes (a YAML double-quoted regex) as single ones."""
        if self._lines is None:
            try:
                self._lines = self.path.read_text(encoding="utf-8").splitlines()
            except OSError:
                self._lines = []
        for i, line in enumerate(self._lines):
            text = line.replace("\\\\", "\\") if unescape else line
            if all(n in text for n in needles):
                return i + 1
        return 1


def validate(caseset: CaseSet) -> list[Problem]:
    """Everything `kb check` reports: load problems, check syntax, risky regexes."""
    from kb.cases.casefile import Problem

    problems = list(caseset.problems)
    for case in caseset.cases:
        problems.extend(validate_regex_cost(case))
        if not case.checks and case.kind != "light":
            problems.append(Problem(case.path, 1, "no check under '## Verify' (add a fenced block with {name=...})", "warning"))
        problems.extend(validate_check_syntax(case))
        problems.extend(validate_draft_quality(case))
        problems.extend(validate_sources(case))
    return problems


def validate_sources(case: Case) -> list[Problem]:
    """A signature source that is not in the one checkable form (kb.cases.sources): a warning, with its line."""
    from kb.cases.casefile import Problem
    from kb.cases.sources import source_problem

    problems: list[Problem] = []
    lines = _FileLines(case.path)
    for sig in case.signatures:
        source = case.signature_sources.get(sig)
        problem = source_problem(source) if source is not None else None
        if source is None or problem is None:
            continue
        line = lines.first("source:", source[:40])
        problems.append(Problem(case.path, line, f"signature {sig[:60]!r}: {problem}", "warning"))
    return problems


def validate_draft_quality(case: Case) -> list[Problem]:
    """Warnings for a draft nobody finished: a TODO body (never answered "high") and broad literal signatures."""
    from kb.cases.casefile import Problem
    from kb.cases.quality import is_broad_literal, todo_sections

    out: list[Problem] = []
    todo = todo_sections(case)
    if todo:
        out.append(Problem(case.path, 1, f"unedited draft: {', '.join(todo)} still say TODO; kb never answers this case "
                                         "'high' until they are written", "warning"))
    for sig in case.signatures:
        if is_broad_literal(str(sig)):
            out.append(Problem(case.path, 1, f"signature {str(sig)!r} is broad: a generic exception type with almost no "
                                             "message matches unrelated errors; quote more of the message or use a regex:", "warning"))
    return out
