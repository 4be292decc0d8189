"""From an incident log to a draft case: signatures, title, category, id, file text.

The API the CLI (`kb new`) and the app share:

    draft = draft_from_text(log_text, engine=engine)   # nothing is written
    draft.duplicate                                    # a case that already matches with high confidence, or None
    path = write_draft(draft, target_folder())         # <folder>/<category>/<id>.md, never overwrites
    add_signatures(existing_case_path, draft.signatures)  # the other way: extend an existing case

Everything that reaches the file from the log goes through kb.redact first
(excerpt, title); signatures are built from the stable parts of the main error
line only, with the volatile and secret parts generalised into a `regex:`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import store
from .casefile import ID_RE, REGEX_PREFIX, parse_case_text, split_front_matter
from .paths import is_writable_dir
from .redact import Redactor
from .signals import SignalLine, Signals, extract
from .signatures import canon, has_nested_repeat

DEFAULT_CATEGORY = "uncategorized"
MAX_REGEX_SOURCE = 200  # characters of the main line a regex signature covers
MAX_LITERAL = 120
MIN_LITERAL = 12
MAX_EXCERPT_LINES = 30
MAX_EXCERPT_LINE = 300
LEARN_CHARS = 200_000  # head and tail of the log read for host and user names

CATEGORY_KEYWORDS: dict[str, list[str]] = {
    "memory": [r"out of memory", r"\bOOM\b", r"OutOfMemory", r"^Killed\b", r"oom-kill", r"cudaErrorMemoryAllocation", r"memory monitor", r"Bus error", r"/dev/shm"],
    "distributed-comm": [r"\bNCCL\b", r"ProcessGroup", r"DistBackendError", r"\bc10d\b", r"collective", r"[Ww]atchdog", r"\bgloo\b", r"init_process_group", r"TCPStore", r"all_?reduce|all_?gather"],
    "ray": [r"\bray\.exceptions\b", r"raylet", r"RayTaskError", r"ActorDiedError", r"\bGCS\b", r"object store", r"RayActorError", r"ray::", r"placement group"],
    "rollout-inference": [r"\bvllm\b", r"\bsglang\b", r"rollout", r"KV cache", r"EngineCore", r"sampling_params", r"gpu_memory_utilization"],
    "install-env": [r"ModuleNotFoundError", r"ImportError", r"No module named", r"undefined symbol", r"GLIBC", r"flash_attn", r"version mismatch", r"requires .* but you have", r"CUDA driver version"],
    "config": [r"hydra", r"omegaconf", r"ConfigAttributeError", r"Missing mandatory value", r"divisible", r"not in struct", r"config\.", r"must be (?:set|greater|less|positive)"],
    "checkpoint": [r"checkpoint", r"state_dict", r"No space left on device", r"model_merger", r"resume"],
    "model-loading": [r"from_pretrained", r"config\.json", r"does not appear to have a file", r"trust_remote_code", r"safetensors", r"tokenizer"],
    "training-numerics": [r"\bnan\b", r"\binf\b", r"grad_norm", r"loss is", r"overflow", r"non-finite"],
    "data-reward": [r"reward", r"parquet", r"dataset", r"reward_fn", r"compute_score", r"data_source"],
    "performance": [r"\bslow\b", r"throughput", r"\bMFU\b", r"tokens/s"],
}

_WRAPPER_RE = re.compile(r"RayTaskError|ActorDiedError|RaySystemError|RayActorError|ChildFailedError|^ray::|WorkerCrashedError")
_MODULE_PREFIX_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b)")
_ONLY_NAME_RE = re.compile(r"^[\w.]+(?:\([^)]*\))?:?$")
_TRIM = " \t:,;=([{'\"`<|-"
_LEAD = " \t:,;.)]}>|-"
_STOPWORDS = {"the", "a", "an"}
_EXC_HEAD_RE = re.compile(r"^[\w.]+(?:\([^)]*\))?: ")
_DANGLING_RE = re.compile(r"(?:\s+(?:on|at|in|with|for|from|to|of|after|by|and|or|is|was|the|a|an|via|host|node|rank|step|pid|port|file|version|GPU|device))+$", re.I)


def _drop_dangling(text: str) -> str:
    """Drop words left hanging where a volatile part was cut off ("... overheated on host")."""
    out = _DANGLING_RE.sub("", text).strip(_TRIM)
    head, sep, tail = out.rpartition(", ")
    if sep and len(tail.split()) <= 2 and len(head) >= MIN_LITERAL:
        out = head.strip(_TRIM)
    return out if len(out) >= MIN_LITERAL else text


# ------------------------------------------------------------------ volatile parts of a line


def _gen_number(text: str) -> str:
    if re.search(r"[eE]", text):
        return r"[\d.]+[eE][-+]?\d+"
    return r"[\d.]+" if "." in text else r"\d+"


# (kind, detector, pattern for the regex signature); earlier entries claim text first.
VOLATILE: list[tuple[str, re.Pattern[str], Any]] = [
    ("url", re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s'\"<>()]+"), r"\w+://[^\s'\"<>()]+"),
    ("uuid", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), r"[0-9a-fA-F-]+"),
    ("datetime", re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"), r"[\d-]+[ T][\d:.,]+"),
    ("time", re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), r"[\d:.,]+"),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), r"[\d-]+"),
    ("ip", re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)"), r"\d+\.\d+\.\d+\.\d+"),
    ("ipv6", re.compile(r"\[[0-9a-fA-F:]{3,}\]"), r"\[[0-9a-fA-F:]+\]"),
    ("addr", re.compile(r"\b0x[0-9a-fA-F]+\b"), r"0x[0-9a-fA-F]+"),
    ("path", re.compile(r"(?<![\w.])(?:~?/|\.\.?/)[\w.+@/\\~-]*[\w+]"), r"[^\s'\"(),;:]+"),
    ("hex", re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), r"[0-9a-fA-F]+"),
    ("number", re.compile(r"(?<!\w)\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?![\d_])"), _gen_number),
]

# Patterns for the secret kinds kb.redact finds (a secret never reaches a signature).
REDACTED_PATTERNS = {
    "ip": r"[0-9a-fA-F.:]+",
    "host": r"[\w.-]+",
    "user": r"[^/\\\s:'\"]+",
    "email": r"[\w.+%-]+@[\w.-]+",
}
SECRET_PATTERN = r"[^\s'\",;]+"


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    pattern: str


def _volatile_spans(line: str, redactor: Redactor) -> list[_Span]:
    spans: list[_Span] = []

    def free(s: int, e: int) -> bool:
        return not any(s < t.end and t.start < e for t in spans)

    # URLs first, so that credentials inside a URL fall inside the URL's span
    for _kind, rx, gen in VOLATILE[:1]:
        for m in rx.finditer(line):
            spans.append(_Span(m.start(), m.end(), gen))
    for s in redactor.spans(line):
        if free(s.start, s.end):
            spans.append(_Span(s.start, s.end, REDACTED_PATTERNS.get(s.kind, SECRET_PATTERN)))
    for _kind, rx, gen in VOLATILE[1:]:
        for m in rx.finditer(line):
            if m.end() > m.start() and free(m.start(), m.end()):
                spans.append(_Span(m.start(), m.end(), gen(m.group(0)) if callable(gen) else gen))
    spans.sort(key=lambda s: s.start)
    merged: list[_Span] = []
    for sp in spans:  # two volatile parts back to back become one \S+ (no ambiguous neighbours)
        if merged and merged[-1].end == sp.start:
            merged[-1] = _Span(merged[-1].start, sp.end, r"\S+")
        else:
            merged.append(sp)
    return merged


def _escape(text: str) -> str:
    """Escape regex metacharacters only (spaces, dashes and colons stay readable)."""
    return re.sub(r"([\\.^$*+?{}\[\]|()])", r"\\\1", text)


def is_linear(pattern: str) -> bool:
    """True when no quantified part contains another quantifier (the check `kb check` applies)."""
    return not has_nested_repeat(pattern)


def _cut(line: str, spans: list[_Span], limit: int) -> tuple[str, list[_Span]]:
    """Shorten a long line for a regex: at its last clause break before `limit`, else at a word."""
    if len(line) <= limit:
        return line, spans
    end = None
    for m in re.finditer(r"[.;,] ", line[:limit]):
        if m.start() >= 40 and not any(s.start <= m.start() < s.end for s in spans):
            end = m.start()
    if end is None:
        end = limit
        for s in spans:
            if s.start < end < s.end:
                end = s.start
        space = line.rfind(" ", 0, end)
        if space > limit // 2 and not any(s.start < space < s.end for s in spans):
            end = space
    return line[:end].rstrip(), [s for s in spans if s.end <= end]


_LOG_BRACKETS_RE = re.compile(r"^(?:\[[^\]]{0,80}\]:?\s*)+")


def _strip_log_brackets(line: str) -> str:
    """`[E1130 02:14:35 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog ...` -> `Watchdog ...`."""
    rest = _LOG_BRACKETS_RE.sub("", line, count=1)
    return rest if len(rest) >= 20 else line


def regex_for_line(line: str, redactor: Redactor | None = None) -> str | None:
    """A linear regex matching `line`, its volatile and secret parts generalised."""
    redactor = redactor or Redactor()
    text, spans = _cut(line.strip(), _volatile_spans(line.strip(), redactor), MAX_REGEX_SOURCE)
    parts: list[str] = []
    pos = 0
    for s in spans:
        parts.append(_escape(text[pos:s.start]))
        parts.append(s.pattern)
        pos = s.end
    parts.append(_escape(text[pos:]))
    pattern = "".join(parts).strip()
    if not pattern or not spans:
        return None  # nothing volatile: the literal signature says it all
    try:
        rx = re.compile(pattern, re.I)
    except re.error:
        return None
    if not rx.search(line) or not is_linear(pattern):
        return None
    return pattern


def literal_for_line(line: str, redactor: Redactor | None = None) -> str | None:
    """The stable part of `line`: the text before its first volatile part, else its longest stable run."""
    redactor = redactor or Redactor()
    text = line.strip()
    spans = _volatile_spans(text, redactor)
    bounds = [0] + [x for s in spans for x in (s.start, s.end)] + [len(text)]
    runs = [text[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2)]
    prefix = _MODULE_PREFIX_RE.sub("", runs[0].lstrip(_LEAD)).strip(_TRIM)
    message = prefix.split(": ", 1)[1] if _EXC_HEAD_RE.match(prefix) else prefix
    best = prefix
    if len(message) < 20:
        longest = max((r.lstrip(_LEAD).strip(_TRIM) for r in runs[1:]), key=len, default="")
        if len(longest) > max(len(message) + 8, 20):
            best = _MODULE_PREFIX_RE.sub("", longest.lstrip(_LEAD)).strip(_TRIM)
    if len(best) > MAX_LITERAL:
        cut = best.rfind(" ", 0, MAX_LITERAL)
        best = best[: cut if cut > MAX_LITERAL // 2 else MAX_LITERAL].strip(_TRIM)
    best = _drop_dangling(best)
    if len(best) < MIN_LITERAL or _ONLY_NAME_RE.match(best):
        return None
    return best


# ------------------------------------------------------------------ the draft


@dataclass(frozen=True)
class Similar:
    id: str
    score: float
    confidence: str
    title: str = ""
    category: str = ""
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "score": round(self.score, 4), "confidence": self.confidence, "title": self.title, "path": self.path}


@dataclass(frozen=True)
class Draft:
    id: str
    title: str
    category: str
    signatures: list[str]
    similar: list[Similar]
    main_line: str  # the chosen error line, redacted
    excerpt: list[str]  # the error lines, redacted
    text: str  # the rendered case file
    secrets: tuple[str, ...] = field(default=(), repr=False)  # found in the log; never in `text`

    @property
    def duplicate(self) -> Similar | None:
        """The existing case that already matches this log with high confidence, if any."""
        return self.similar[0] if self.similar and self.similar[0].confidence == "high" else None

    def replace(self, **changes: Any) -> Draft:
        """A copy with id/title/category/signatures changed and the file text rendered again."""
        if "title" in changes:
            changes["title"] = Redactor().redact(str(changes["title"])).strip()
        d = dataclasses.replace(self, **changes)
        return dataclasses.replace(d, text=_scrub(render(d), d.secrets))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "signatures": list(self.signatures),
            "similar": [s.to_json() for s in self.similar],
        }


def slugify(text: str, max_len: int = 60) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", text)
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in _STOPWORDS]
    slug = ""
    for w in words:
        candidate = f"{slug}-{w}" if slug else w
        if len(candidate) > max_len:
            break
        slug = candidate
    slug = slug or (words[0][:max_len] if words else "")
    return slug if ID_RE.match(slug) else "new-case"


def unique_id(base: str, taken: Iterable[str]) -> str:
    taken = set(taken)
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def _line_rank(line: SignalLine) -> int:
    text = line.text.strip()
    if "exception" in line.kinds:
        return 3 if _WRAPPER_RE.search(text) else 5
    if line.kinds & {"cuda", "nccl"}:
        return 4
    if line.kinds & {"killed", "raylet-error", "logged-error"}:
        return 2
    if "keyword" in line.kinds:
        return 1
    return 0


def main_line(signals: Signals) -> SignalLine | None:
    """The line a signature should come from: the last, most specific error line."""
    candidates = [l for l in signals.error_lines if "frame" not in l.kinds] or [l for l in signals.lines if "keyword" in l.kinds] or signals.lines[-1:]
    best: SignalLine | None = None
    for line in candidates:  # later wins ties: the final exception is the one raised
        if best is None or _line_rank(line) >= _line_rank(best):
            best = line
    return best


def guess_category(text: str, similar: list[Similar]) -> str:
    if similar and similar[0].confidence in ("high", "medium") and ID_RE.match(similar[0].category or ""):
        return similar[0].category
    counts = {cat: sum(len(re.findall(p, text, re.I | re.M)) for p in pats) for cat, pats in CATEGORY_KEYWORDS.items()}
    best = max(counts, key=lambda c: counts[c])
    return best if counts[best] > 0 else DEFAULT_CATEGORY


def _sanitise_excerpt_line(line: str) -> str:
    line = line.replace("```", "'''").replace("~~~", "'''")
    return line if len(line) <= MAX_EXCERPT_LINE else line[:MAX_EXCERPT_LINE] + " ..."


def _learn_text(text: str) -> str:
    if len(text) <= 2 * LEARN_CHARS:
        return text
    return text[:LEARN_CHARS] + "\n" + text[-LEARN_CHARS:]


def _scrub(rendered: str, secrets: Iterable[str]) -> str:
    """Last line of defence: no secret value found in the log survives in the file text."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if len(value) >= 3 and value in rendered:
            rendered = rendered.replace(value, "<redacted>")
    return rendered


def draft_from_text(
    text: str,
    engine: Any = None,
    *,
    case_id: str | None = None,
    title: str | None = None,
    category: str | None = None,
    taken_ids: Iterable[str] = (),
    k: int = 5,
) -> Draft:
    """Propose a case for an incident log. Pure: nothing is written.

    `engine` (a kb.search.Engine) finds the similar cases, the category of a
    strong match and the ids already used; without it there is no similarity
    check. `taken_ids` adds ids to avoid (e.g. files in the target folder).
    Raises ValueError on an empty log or an invalid explicit id/category.
    """
    if not text.strip():
        raise ValueError("the log is empty")
    if case_id is not None and not ID_RE.match(case_id):
        raise ValueError(f"id {case_id!r} must be a lowercase slug (a-z, 0-9, -)")
    if category is not None and not ID_RE.match(category):
        raise ValueError(f"category {category!r} must be a lowercase slug (a-z, 0-9, -)")
    signals = extract(text)
    line = main_line(signals)
    if line is None:
        raise ValueError("the log has no text")
    redactor = Redactor()
    redactor.learn(_learn_text(text))
    raw_main = _strip_log_brackets(line.text.strip())

    signatures: list[str] = []
    literal = literal_for_line(raw_main, redactor)
    if literal and canon(literal) in canon(raw_main):
        signatures.append(literal)
    pattern = regex_for_line(raw_main, redactor)
    if pattern:
        signatures.append(REGEX_PREFIX + pattern)

    source_lines = [l for l in signals.error_lines if "frame" not in l.kinds] or signals.lines[-15:]
    excerpt_raw = [l.text.rstrip() + (f"   [x{l.count}]" if l.count > 1 else "") for l in source_lines[-MAX_EXCERPT_LINES:]]
    found = redactor.spans("\n".join(excerpt_raw + [raw_main]))
    joined = "\n".join(excerpt_raw + [raw_main])
    secrets = tuple({joined[s.start:s.end] for s in found} | redactor.hosts | redactor.users)
    excerpt = [_sanitise_excerpt_line(x) for x in redactor.redact("\n".join(excerpt_raw)).split("\n")]
    main_redacted = redactor.redact(raw_main)

    similar: list[Similar] = []
    ids: set[str] = set(taken_ids)
    if engine is not None:
        answer = engine.search(text, k=k, abstain=False)
        for r in answer.results:
            similar.append(Similar(r.id, float(r.score), r.confidence, r.title, r.category, str(r.path)))
        ids |= {d["id"] for d in engine.docs}

    if title:
        the_title = redactor.redact(title.strip())
    else:
        the_title = literal or main_redacted
        if len(the_title) > 100:
            cut = the_title.rfind(" ", 0, 100)
            the_title = the_title[: cut if cut > 50 else 100].rstrip(_TRIM)
        the_title = _drop_dangling(the_title)
    the_category = category or guess_category(signals.focus_text, similar)
    the_id = case_id or unique_id(slugify(_MODULE_PREFIX_RE.sub("", the_title)), ids)

    draft = Draft(the_id, the_title, the_category, signatures, similar, main_redacted, excerpt, "", secrets)
    return dataclasses.replace(draft, text=_scrub(render(draft), secrets))


# ------------------------------------------------------------------ rendering and writing


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def render(draft: Draft) -> str:
    """The case file text of a draft (valid for `kb check` as it stands)."""
    sig_lines = "".join(f"  - {_q(s)}\n" for s in draft.signatures)
    signatures = "signatures:\n" + sig_lines if sig_lines else "signatures: []\n"
    excerpt = "\n".join(draft.excerpt) if draft.excerpt else draft.main_line
    similar = "".join(f"- `{s.id}` ({s.confidence}, {s.score:.2f}): {s.title}\n" for s in draft.similar if s.confidence != "low")
    similar_section = (
        "\n## Similar cases\nFound by `kb search` when this draft was made: merge into one of them if it is the same error,\n"
        "or say here how this one differs (delete this section when done).\n\n" + similar
        if similar else ""
    )
    return f"""---
id: {draft.id}
title: {_q(draft.title)}
category: {draft.category}
tags: []
{signatures}symptoms:
  - {_q(draft.title)}
  # TODO: add plain-language phrasings a user would type (Chinese ones welcome)
sources:
  - "TODO: link the issue, doc or source file that backs the causes and the fix"
status: draft
---

# {draft.title}

## Symptoms
TODO: what the user sees, in words. The error lines of the incident log (redacted by `kb new`):

```text
{excerpt}
```

## Causes
1. TODO: the most likely cause first.

## Fix
TODO: the smallest fix first, with real config keys and commands of the versions named.

## Verify
TODO: how to confirm or rule out each cause on the node. Replace this placeholder check
(exit 0: ruled out, exit 1: confirmed, anything else: inconclusive).

```bash {{name=todo timeout=10 description="placeholder: replace with a real check"}}
echo "TODO: write a check"
exit 2
```
{similar_section}"""


class NotWritable(Exception):
    """No folder kb may write a case into (or the one given is read-only or built-in)."""


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def is_protected(folder: Path) -> bool:
    """The built-in cases and the kb package itself are never written by `kb new`."""
    from .paths import builtin_cases_dir

    return _inside(folder, builtin_cases_dir()) or _inside(folder, Path(__file__).resolve().parent)


def target_folder(explicit: Path | None = None) -> Path:
    """Where `kb new` writes: `explicit` (`--dir`), else the personal folder, else the team folder.

    The first that is writable wins (it is created if missing); the built-in
    cases are never a target. An explicit folder that cannot be written is an
    error rather than a silent fallback. Raises NotWritable.
    """
    from .config import load_config

    if explicit is not None:
        folder = Path(explicit).expanduser()
        if is_protected(folder):
            raise NotWritable(f"{folder} is the built-in case folder; write to a personal or team folder (--dir)")
        if not is_writable_dir(folder):
            raise NotWritable(f"cannot write to {folder}")
        return folder
    cfg = load_config()
    tried: list[str] = []
    for candidate in (cfg.personal_cases, cfg.team_cases):
        if candidate is None:
            continue
        if not is_protected(candidate) and is_writable_dir(candidate):
            return candidate
        tried.append(str(candidate))
    raise NotWritable("no writable case folder (tried " + ", ".join(tried) + "); give one with --dir")


def folder_ids(folder: Path) -> set[str]:
    """Ids already taken by files in a case folder (also broken ones, which load_cases skips)."""
    from .caseset import case_files

    return {p.stem for p in case_files(folder)} if folder.is_dir() else set()


def case_path(draft: Draft, folder: Path) -> Path:
    return Path(folder) / draft.category / f"{draft.id}.md"


def write_draft(draft: Draft, folder: Path) -> Path:
    """Write the draft to `<folder>/<category>/<id>.md` and return the path.

    Never overwrites (FileExistsError), never writes into the built-in cases
    (NotWritable), and refuses a text that `kb check` would reject (ValueError).
    """
    folder = Path(folder).expanduser()
    if is_protected(folder):
        raise NotWritable(f"{folder} is the built-in case folder; write to a personal or team folder")
    path = case_path(draft, folder)
    _case, problems = parse_case_text(path, draft.text)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ValueError("the draft is not a valid case: " + "; ".join(p.message for p in errors))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="utf-8", newline="") as fh:  # "x": fails if the file exists
        fh.write(draft.text)
    return path


# ------------------------------------------------------------------ adding signatures to an existing case


def _front_matter_span(lines: list[str]) -> tuple[int, int]:
    """Indexes of the opening and closing `---` lines."""
    if not lines or lines[0].strip() != "---":
        raise ValueError("no YAML front matter")
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return 0, i
    raise ValueError("front matter is not closed")


def _read_signatures(text: str) -> list[str]:
    split = split_front_matter(text)
    if split is None:
        raise ValueError("no YAML front matter")
    meta = yaml.safe_load(split[0]) or {}
    sigs = meta.get("signatures") or []
    if not isinstance(sigs, list):
        raise ValueError("'signatures' is not a list")
    return [str(s) for s in sigs]


def insert_signatures(text: str, new: list[str]) -> str:
    """`text` with `new` appended to the front matter's `signatures:` list; every other byte kept.

    Handles a block list (`signatures:` then `- item` lines), a one-line flow
    list (`signatures: [...]`, including `[]`) and a missing key (added before
    the closing `---`). The result is parsed again and must hold exactly the
    old signatures plus `new`, else ValueError.
    """
    if not new:
        return text
    before = _read_signatures(text)
    lines = text.splitlines(keepends=True)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    _, close = _front_matter_span(lines)
    key = next((i for i in range(1, close) if re.match(r"^signatures\s*:", lines[i])), None)
    if key is None:
        block = f"signatures:{nl}" + "".join(f"  - {_q(s)}{nl}" for s in new)
        lines.insert(close, block)
    else:
        head = lines[key]
        m = re.match(r"^(signatures\s*:\s*)(.*?)(\s*)$", head, re.S)
        assert m is not None
        value = m.group(2)
        value_nocomment = re.sub(r"\s+#.*$", "", value).strip()
        if value_nocomment.startswith("[") and value_nocomment.endswith("]"):
            inner = value_nocomment[1:-1].strip()
            items = ", ".join(_q(s) for s in new)
            new_value = f"[{inner}, {items}]" if inner else f"[{items}]"
            lines[key] = m.group(1) + value.replace(value_nocomment, new_value, 1) + m.group(3)
        elif value_nocomment == "":
            # block list: the items are the following indented (or "- ") lines
            last = key
            indent = "  "
            j = key + 1
            seen_item = False
            while j < close:
                line = lines[j]
                stripped = line.strip()
                if stripped == "" or stripped.startswith("#"):
                    j += 1
                    continue
                if line[:1] in (" ", "\t") or line.startswith("- ") or line.rstrip("\r\n") == "-":
                    if not seen_item and stripped.startswith("-"):
                        indent = line[: len(line) - len(line.lstrip())]
                        seen_item = True
                    last = j
                    j += 1
                    continue
                break
            if not lines[last].endswith(("\n", "\r")):
                lines[last] += nl
            lines.insert(last + 1, "".join(f"{indent}- {_q(s)}{nl}" for s in new))
        else:
            raise ValueError(f"cannot edit 'signatures: {value.strip()}' safely; add the signature by hand")
    out = "".join(lines)
    after = _read_signatures(out)
    if after != before + list(new):
        raise ValueError("editing the signatures list went wrong; add the signature by hand")
    return out


def add_signatures(path: Path, signatures: list[str]) -> list[str]:
    """Append the signatures not already in the case at `path`; return those added.

    Only the `signatures:` list of the front matter changes: the rest of the
    file is kept byte for byte. The file is replaced atomically, and only when
    the edited text still parses as a valid case.
    """
    path = Path(path)
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    existing = _read_signatures(text)
    known = {canon(s) for s in existing} | set(existing)
    new: list[str] = []
    for s in signatures:
        if s not in known and canon(s) not in known:
            new.append(s)
            known |= {s, canon(s)}
    if not new:
        return []
    out = insert_signatures(text, new)
    _case, problems = parse_case_text(path, out)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ValueError("the edited case would not be valid: " + "; ".join(p.message for p in errors))
    store.atomic_write_bytes(path, out.encode("utf-8"), mode=path.stat().st_mode & 0o7777)
    return new
