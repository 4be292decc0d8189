"""Parse one case file (Markdown with YAML front matter) into a `Case`.

Parsing never raises on bad content: it returns the case (or None) and a list
of `Problem`s, each naming the file and line, so that one broken file is
reported and skipped while the others load. The format is documented in
docs/case-format.md.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.cases.blocks import Block, parse_body, section_markdown
from kb.cases.check_code import code_findings
from kb.cases.frontmatter import FrontMatterError, load_front_matter
from kb.cases.names import FAMILY_TAGS, REGEX_PREFIX
from kb.cases.params import DEFAULT_TYPE, ENV_REF_RE, PARAM_TYPES, env_name, value_error
from kb.core.safe_text import UNSAFE_BLOCK_RE, visible

REQUIRED_KEYS = ("id", "title", "category", "signatures", "symptoms", "sources")
OPTIONAL_KEYS = ("tags", "params", "status", "reviewed", "overrides", "versions", "kind")
KNOWN_KEYS = REQUIRED_KEYS + OPTIONAL_KEYS
STATUSES = ("draft", "reviewed")
# A curated case has checks; a light entry records one root cause of the long
# tail (signature, cause, fix, versions, sources) and may have none.
KINDS = ("curated", "light")
REQUIRED_SECTIONS = ("Symptoms", "Causes", "Fix", "Verify")
LIGHT_REQUIRED_SECTIONS = ("Symptoms", "Causes", "Fix")
SIGNATURE_KEYS = ("text", "regex", "source")
OPTIONAL_SECTIONS = ("Advice that does not work",)
SECTION_ORDER = REQUIRED_SECTIONS + OPTIONAL_SECTIONS
CHECK_LANGS = {"bash": "bash", "sh": "bash", "python": "python", "python3": "python"}
CHECK_ATTRS = ("name", "timeout", "needs", "doctor", "description")
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0
_LIST_ITEM_RE = re.compile(r"^(?:\d+[.)]|[-*]) ", re.M)  # a numbered or bulleted candidate cause
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")
NEED_RE = re.compile(r"^(gpu|multi-gpu|cmd:[A-Za-z0-9_.+-]+|py:[A-Za-z0-9_.]+)$")
# Bounds on one case (case files are untrusted input; docs/case-format.md).
MAX_SIGNATURES = 200
MAX_CHECKS = 50
MAX_PARAMS = 50
MAX_LIST_ITEMS = 500  # symptoms, sources, tags
PARAM_KEYS = ("type", "description", "default")


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    message: str
    severity: str = "error"  # "error" keeps the case out; "warning" only reports; "note" says what happened (an override)

    def __str__(self) -> str:
        return visible(f"{self.path}:{self.line}: {self.severity}: {self.message}")


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    default: str | None = None
    type: str = DEFAULT_TYPE  # int, name, path or text (kb.cases.params)


@dataclass(frozen=True)
class Check:
    name: str
    lang: str  # "bash" or "python"
    code: str
    timeout: float
    needs: tuple[str, ...]
    doctor: bool
    description: str
    line: int  # line of the opening fence in the case file

    def env_refs(self) -> set[str]:
        """The KB_PARAM_<NAME> variables its code reads (the upper-cased names)."""
        return set(ENV_REF_RE.findall(self.code))


@dataclass
class Case:
    id: str
    title: str
    category: str
    signatures: list[str]
    symptoms: list[str]
    sources: list[str]
    path: Path
    tags: list[str] = field(default_factory=list)
    params: dict[str, Param] = field(default_factory=dict)
    status: str = "draft"
    reviewed: str | None = None
    overrides: bool = False
    versions: str | None = None
    kind: str = "curated"
    # signature string (as in `signatures`) -> where it comes from: the source
    # file and tag that emits it, or a quoted real report
    signature_sources: dict[str, str] = field(default_factory=dict)
    body: str = ""
    sections: dict[str, str] = field(default_factory=dict)
    # The one parse of the body (kb.cases.blocks): views render these, the runner runs `checks` made from them.
    blocks: list[Block] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    content_hash: str = ""
    # Where it was loaded from (set by kb.cases.caseset.load_cases): the folder layer
    # ("built-in", "team", "personal", "KB_CASES", "--cases"), that folder, and
    # the file of a lower layer this case replaces with `overrides: true`.
    layer: str = ""
    folder: Path | None = None
    replaces: Path | None = None
    replaces_layer: str = ""
    # SHA-256 of the folder's case files exactly as they were read for this load
    # (kb.cases.trust.FolderDigest): trust is judged on the bytes that were parsed.
    folder_hash: str = ""

    def section(self, name: str) -> str:
        return self.sections.get(name, "")

    @property
    def is_family(self) -> bool:
        """A family entry: one message or symptom with several candidate causes, and what tells them apart.

        Tagged `family`/`triage`, or its Causes list at least two candidates and a check (or, for a
        curated case, its Verify section) separates them; a light entry records one cause, so without
        a check it is no family. Structural: whether the checks really discriminate is the reviewer's call.
        """
        if FAMILY_TAGS & {t.lower() for t in self.tags}:
            return True
        return len(_LIST_ITEM_RE.findall(self.section("Causes"))) >= 2 and bool(self.checks or (self.kind == "curated" and self.section("Verify").strip()))

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def fix_text(self) -> str:
        """The Fix section rebuilt from the parsed blocks (what 'Copy fix' copies)."""
        return section_markdown(self.blocks, "Fix")

    def check_at(self, line: int) -> Check | None:
        """The check whose fence opens on `line`, if that fence is a loaded check."""
        return next((c for c in self.checks if c.line == line), None)

    def params_of(self, check: Check) -> list[str]:
        """The declared parameters a check reads (through KB_PARAM_<NAME>), in declaration order."""
        refs = check.env_refs()
        return [name for name in self.params if name.upper() in refs]


def split_front_matter(text: str) -> tuple[str, str, int] | None:
    """Return (yaml text, body, line number where the body starts) or None."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1 :]), i + 2
    return None


def _key_line(yaml_text: str, key: str) -> int:
    """1-based line of a top-level key in the file (front matter starts at line 2)."""
    m = re.search(rf"^{re.escape(key)}\s*:", yaml_text, re.M)
    return yaml_text.count("\n", 0, m.start()) + 2 if m else 1


def _item_line(yaml_text: str, key: str, value: str) -> int:
    """Best-effort line of a list item's text under `key` (for signature errors)."""
    start = _key_line(yaml_text, key)
    snippet = value[:40]
    for offset, line in enumerate(yaml_text.splitlines()[start - 2 :]):
        if snippet and snippet in line.replace("\\\\", "\\"):
            return start + offset
    return start


def _as_str_list(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    return None


def _signature_field(meta: dict[Any, Any], fm_text: str, path: Path, problems: list[Problem]) -> tuple[list[str], dict[str, str]]:
    """`signatures`: each item a string (`regex:` prefix for a pattern) or a
    mapping `{text: ..., source: ...}` / `{regex: ..., source: ...}`.

    Returns the signature strings (regexes keep their `regex:` prefix, so every
    consumer sees one shape) and the source of each that names one.
    """
    raw = meta.get("signatures")
    if raw is None:
        return [], {}
    line = _key_line(fm_text, "signatures")
    if not isinstance(raw, list):
        problems.append(Problem(path, line, "'signatures' must be a list"))
        return [], {}
    sigs: list[str] = []
    sources: dict[str, str] = {}
    if len(raw) > MAX_SIGNATURES:
        problems.append(Problem(path, line, f"{len(raw)} signatures; at most {MAX_SIGNATURES} per case"))
        return [], {}
    for item in raw:
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            sigs.append(str(item))
            continue
        if not isinstance(item, dict):
            problems.append(Problem(path, line, f"a signature must be a string or a mapping with text/regex and source, got {type(item).__name__}"))
            continue
        unknown = [k for k in item if k not in SIGNATURE_KEYS]
        if unknown:
            problems.append(Problem(path, line, f"unknown signature key {unknown[0]!r} (use text or regex, and source)"))
            continue
        has_text, has_regex = "text" in item, "regex" in item
        if has_text == has_regex:
            problems.append(Problem(path, line, "a signature mapping needs exactly one of 'text' or 'regex'"))
            continue
        value = item["text"] if has_text else item["regex"]
        if not isinstance(value, str):
            problems.append(Problem(path, line, "a signature's text or regex must be a string"))
            continue
        sig = value if has_text else REGEX_PREFIX + value
        source = item.get("source")
        if source is not None and (not isinstance(source, str) or not source.strip()):
            problems.append(Problem(path, _item_line(fm_text, "signatures", value), "a signature's source must be a non-empty string"))
        elif source is not None:
            sources[sig] = source.strip()
        sigs.append(sig)
    return sigs, sources


def _params_field(meta: dict[Any, Any], fm_text: str, path: Path, problems: list[Problem]) -> dict[str, Param]:
    """`params: {name: {type, description, default}}`; a default must fit its type."""
    params: dict[str, Param] = {}
    raw = meta.get("params") or {}
    line = _key_line(fm_text, "params")
    if not isinstance(raw, dict):
        problems.append(Problem(path, line, "params must be a mapping of name to {type, description, default}"))
        return params
    if len(raw) > MAX_PARAMS:
        problems.append(Problem(path, line, f"{len(raw)} params; at most {MAX_PARAMS} per case"))
        return params
    for name, spec in raw.items():
        name = str(name)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            problems.append(Problem(path, line, f"param name {name!r} must be an identifier (letters, digits, _)"))
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("description"), str):
            problems.append(Problem(path, line, f"param {name!r} needs a description (and optionally a type and a default)"))
            continue
        unknown = [str(k) for k in spec if k not in PARAM_KEYS]
        if unknown:
            problems.append(Problem(path, line, f"param {name!r}: unknown key {unknown[0]!r} (use type, description, default)"))
            continue
        ptype = spec.get("type", DEFAULT_TYPE)
        if ptype not in PARAM_TYPES:
            problems.append(Problem(path, line, f"param {name!r}: type must be one of {', '.join(PARAM_TYPES)}, got {ptype!r}"))
            continue
        default = spec.get("default")
        if default is not None and (isinstance(default, bool) or not isinstance(default, (str, int, float))):
            problems.append(Problem(path, line, f"param {name!r}: default must be a single value, got {type(default).__name__}"))
            continue
        default_s = None if default is None else str(default)
        if default_s is not None and (why := value_error(ptype, default_s)):
            problems.append(Problem(path, line, f"param {name!r}: default {default_s!r} {why}"))
            continue
        params[name] = Param(name, spec["description"].strip(), default_s, ptype)
    return params


def parse_checks(path: Path, blocks: list[Block]) -> tuple[list[Check], list[Problem]]:
    """Fenced blocks with `{...}` attributes inside the Verify section are checks."""
    checks: list[Check] = []
    problems: list[Problem] = []
    for block in blocks:
        if not block.is_check_fence:
            continue
        if block.section != "Verify":
            problems.append(Problem(path, block.line, "a check (fence with {attributes}) must be in the Verify section", "warning"))
            continue
        if len(checks) >= MAX_CHECKS:
            problems.append(Problem(path, block.line, f"more than {MAX_CHECKS} checks in one case; split the case"))
            break
        check, errs = _build_check(path, block.line, block.lang, block.attrs, block.code)
        problems.extend(errs)
        if check:
            checks.append(check)
    first_line: dict[str, int] = {}
    for c in checks:  # one pass: a case may hold thousands of fences
        if c.name in first_line:
            problems.append(Problem(path, c.line, f"duplicate check name {c.name!r} (first on line {first_line[c.name]})"))
            break
        first_line[c.name] = c.line
    return checks, problems


def _build_check(path: Path, lineno: int, lang: str, attrs: dict[str, str], code: str) -> tuple[Check | None, list[Problem]]:
    problems: list[Problem] = []
    if lang not in CHECK_LANGS:
        return None, [Problem(path, lineno, f"check language {lang!r} is not one of bash, python")]
    for key in attrs:
        if key not in CHECK_ATTRS:
            hint = difflib.get_close_matches(key, CHECK_ATTRS, n=1)
            msg = f"unknown check attribute {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            problems.append(Problem(path, lineno, msg))
    name = attrs.get("name", "")
    if not name or not ID_RE.match(name) and not re.match(r"^[a-z0-9]$", name):
        problems.append(Problem(path, lineno, f"check needs name=<slug> (got {name!r})"))
    timeout = DEFAULT_TIMEOUT
    if "timeout" in attrs:
        try:
            timeout = float(attrs["timeout"])
            if not 0 < timeout <= MAX_TIMEOUT:
                raise ValueError
        except ValueError:
            problems.append(Problem(path, lineno, f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {attrs['timeout']!r}"))
    needs = tuple(n for n in attrs.get("needs", "").split(",") if n)
    for need in needs:
        if not NEED_RE.match(need):
            problems.append(Problem(path, lineno, f"unknown need {need!r} (use gpu, multi-gpu, cmd:NAME or py:MODULE)"))
    doctor = attrs.get("doctor", "no").lower()
    if doctor not in ("yes", "no", "true", "false"):
        problems.append(Problem(path, lineno, f"doctor must be yes or no, got {attrs['doctor']!r}"))
    for offset, why in code_findings(CHECK_LANGS[lang], code):
        problems.append(Problem(path, lineno + 1 + offset, f"check {name!r}: {why}"))
    if any(p.severity == "error" for p in problems):
        return None, problems
    check = Check(
        name=name,
        lang=CHECK_LANGS[lang],
        code=code,
        timeout=timeout,
        needs=needs,
        doctor=doctor in ("yes", "true"),
        description=attrs.get("description", ""),
        line=lineno,
    )
    return check, problems


MAX_UNSAFE_REPORTED = 10


def unsafe_char_problems(path: Path, text: str) -> list[Problem]:
    """Control, escape and bidi characters anywhere in a case file (tab, newline and CRLF allowed).

    A terminal obeys them, so check code or a title holding one can be shown as
    something else than it is; the file is refused, one error per line (capped).
    """
    problems: list[Problem] = []
    last_line = -1
    for m in UNSAFE_BLOCK_RE.finditer(text):
        if m.group(0) == "\r" and text.startswith("\n", m.end()):
            continue
        line = text.count("\n", 0, m.start()) + 1
        if line == last_line:
            continue
        last_line = line
        col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        problems.append(Problem(path, line, f"control, escape or bidi character {visible(m.group(0))} at column {col}: "
                                            "not allowed in a case file (what is shown must be what runs)"))
        if len(problems) >= MAX_UNSAFE_REPORTED:
            break
    return problems


def parse_case_text(path: Path, text: str) -> tuple[Case | None, list[Problem]]:
    problems: list[Problem] = []
    split = split_front_matter(text)
    if split is None:
        return None, [Problem(path, 1, "no YAML front matter: the file must start with '---' and close it with '---'")]
    fm_text, body, body_line = split
    unsafe = unsafe_char_problems(path, text)
    if unsafe:
        return None, unsafe
    try:
        meta = load_front_matter(fm_text)
    except FrontMatterError as exc:
        return None, [Problem(path, exc.line + 2, exc.message)]
    if not isinstance(meta, dict):
        return None, [Problem(path, 2, "front matter must be a mapping of keys to values")]

    for offset, raw_line in enumerate(fm_text.splitlines()):
        # An unquoted list item or value with " #" loses everything after it (YAML comment).
        if re.match(r"""^\s*(?:-\s+|[A-Za-z_]+:\s+)[^"'\s\[{|>].*\s#""", raw_line):
            problems.append(Problem(path, offset + 2, "' #' starts a YAML comment here and cuts the text; quote the value", "warning"))
    for key in meta:
        if key not in KNOWN_KEYS:
            hint = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
            msg = f"unknown front-matter key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
            problems.append(Problem(path, _key_line(fm_text, str(key)), msg))
    for key in REQUIRED_KEYS:
        if key not in meta:
            problems.append(Problem(path, 2, f"missing required field {key!r}"))

    def text_field(key: str) -> str:
        v = meta.get(key)
        if v is None:
            return ""
        if not isinstance(v, (str, int, float)):
            problems.append(Problem(path, _key_line(fm_text, key), f"{key!r} must be a string"))
            return ""
        return str(v).strip()

    def list_field(key: str, non_empty: bool) -> list[str]:
        if key not in meta:
            return []
        v = _as_str_list(meta.get(key))
        if v is None:
            problems.append(Problem(path, _key_line(fm_text, key), f"{key!r} must be a list of strings"))
            return []
        if non_empty and not v:
            problems.append(Problem(path, _key_line(fm_text, key), f"{key!r} must not be empty"))
        if len(v) > MAX_LIST_ITEMS:
            problems.append(Problem(path, _key_line(fm_text, key), f"{key!r} has {len(v)} items; at most {MAX_LIST_ITEMS}"))
            return []
        return v

    case_id = text_field("id")
    if "id" in meta:
        if not ID_RE.match(case_id):
            problems.append(Problem(path, _key_line(fm_text, "id"), f"id {case_id!r} must be a lowercase slug (a-z, 0-9, -)"))
        elif case_id != path.stem:
            problems.append(Problem(path, _key_line(fm_text, "id"), f"id {case_id!r} does not equal the file name {path.stem!r}"))
    title = text_field("title")
    category = text_field("category")
    if "category" in meta and not ID_RE.match(category):
        problems.append(Problem(path, _key_line(fm_text, "category"), f"category {category!r} must be a lowercase slug"))
    signatures, signature_sources = _signature_field(meta, fm_text, path, problems)
    symptoms = list_field("symptoms", non_empty=True)
    sources = list_field("sources", non_empty=True)
    tags = list_field("tags", non_empty=False)
    for sig in signatures:
        if sig.startswith(REGEX_PREFIX):
            pattern = sig[len(REGEX_PREFIX) :].strip()
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(Problem(path, _item_line(fm_text, "signatures", sig), f"signature regex does not compile: {exc} in {pattern!r}"))
            if not pattern:
                problems.append(Problem(path, _item_line(fm_text, "signatures", sig), "empty regex signature"))
        elif len(sig.strip()) < 6:
            problems.append(Problem(path, _item_line(fm_text, "signatures", sig), f"signature {sig!r} is too short to identify an error"))

    status = text_field("status") or "draft"
    if status not in STATUSES:
        problems.append(Problem(path, _key_line(fm_text, "status"), f"status must be one of {', '.join(STATUSES)}, got {status!r}"))
    reviewed = meta.get("reviewed")
    if reviewed is not None and not isinstance(reviewed, (str, _dt.date)):
        problems.append(Problem(path, _key_line(fm_text, "reviewed"), "'reviewed' must be a date (YYYY-MM-DD)"))
        reviewed = None
    reviewed_s = str(reviewed) if reviewed is not None else None
    overrides = meta.get("overrides", False)
    if not isinstance(overrides, bool):
        problems.append(Problem(path, _key_line(fm_text, "overrides"), "overrides must be true or false"))
        overrides = False
    versions = meta.get("versions")
    if versions is not None and (isinstance(versions, bool) or not isinstance(versions, (str, int, float))):
        problems.append(Problem(path, _key_line(fm_text, "versions"), f"'versions' must be a string (e.g. \"verl v0.4.1-v0.7.0\"), got {type(versions).__name__}"))
        versions = None
    kind = text_field("kind") or "curated"
    if kind not in KINDS:
        problems.append(Problem(path, _key_line(fm_text, "kind"), f"kind must be one of {', '.join(KINDS)}, got {kind!r}"))
        kind = "curated"
    if kind == "light" and not signatures and len(symptoms) < 3:
        # a failure that prints nothing (a silent misbehaviour) is found by its symptoms alone
        problems.append(Problem(path, _key_line(fm_text, "signatures"), "a light entry needs a signature, or three symptoms when the failure prints nothing"))

    params = _params_field(meta, fm_text, path, problems)

    parsed = parse_body(body, body_line)
    problems.extend(Problem(path, bp.line, bp.message, bp.severity) for bp in parsed.problems)
    sections, order = parsed.sections, parsed.order
    names = [n for n, _ in order]
    for required in LIGHT_REQUIRED_SECTIONS if kind == "light" else REQUIRED_SECTIONS:
        if required not in sections:
            problems.append(Problem(path, body_line, f"missing section '## {required}'"))
    known_in_order = [n for n in names if n in SECTION_ORDER]
    if known_in_order != sorted(known_in_order, key=SECTION_ORDER.index):
        line = next(ln for n, ln in order if n in SECTION_ORDER)
        problems.append(Problem(path, line, f"sections must come in the order {', '.join(SECTION_ORDER)}"))
    checks, check_problems = parse_checks(path, parsed.blocks)
    problems.extend(check_problems)
    by_env: dict[str, str] = {}
    for name in params:
        if env_name(name) in by_env:
            problems.append(Problem(path, _key_line(fm_text, "params"), f"params {by_env[env_name(name)]!r} and {name!r} "
                                                                       f"are both {env_name(name)}; rename one"))
        by_env[env_name(name)] = name
    used: set[str] = set()
    for check in checks:
        for ref in sorted(check.env_refs()):
            used.add(ref)
            if "KB_PARAM_" + ref not in by_env:
                problems.append(Problem(path, check.line, f"check {check.name!r} reads KB_PARAM_{ref}, but no parameter "
                                                          f"{ref.lower()!r} is declared under params"))
    for name in params:
        if name.upper() not in used:
            problems.append(Problem(path, _key_line(fm_text, "params"), f"param {name!r} is declared but no check reads {env_name(name)}", "warning"))

    if any(p.severity == "error" for p in problems):
        return None, problems
    case = Case(
        id=case_id,
        title=title,
        category=category,
        signatures=signatures,
        symptoms=symptoms,
        sources=sources,
        path=path,
        tags=tags,
        params=params,
        status=status,
        reviewed=reviewed_s,
        overrides=bool(overrides),
        versions=None if versions is None else str(versions),
        kind=kind,
        signature_sources=signature_sources,
        body=body,
        sections=sections,
        blocks=parsed.blocks,
        checks=checks,
        content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
    return case, problems


MAX_CASE_BYTES = 2_000_000


def read_case_bytes(path: Path) -> tuple[bytes | None, list[Problem]]:
    """The file's bytes, or None and a problem (unreadable, or over MAX_CASE_BYTES)."""
    from kb.core.file_bounds import read_capped

    try:
        # only a regular file, never more than the cap: a FIFO would block, /proc/self/pagemap reads gigabytes
        raw, more = read_capped(path, MAX_CASE_BYTES)
        if more:
            size = max(path.stat().st_size, MAX_CASE_BYTES + 1)
            return None, [Problem(path, 1, f"case file is {size} bytes; the limit is {MAX_CASE_BYTES} (a case is a page, not a log)")]
        return raw, []
    except OSError as exc:
        return None, [Problem(path, 1, f"cannot read: {exc.strerror or exc}")]


def parse_case_bytes(path: Path, raw: bytes) -> tuple[Case | None, list[Problem]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, [Problem(path, line, f"not valid UTF-8 (byte {exc.start})")]
    return parse_case_text(path, text)


def parse_case_file(path: Path) -> tuple[Case | None, list[Problem]]:
    """Read and parse a case file; unreadable or oversized files are problems, not crashes."""
    raw, problems = read_case_bytes(path)
    if raw is None:
        return None, problems
    return parse_case_bytes(path, raw)
