"""Signatures against what they must not match: healthy logs and other cases.

A signature is evidence only if it is specific. Three tests:
- **healthy**: it matches a routine line of a working run (start-up, progress,
  metrics, a harmless warning) in the background corpus `eval/healthy/`.
  Such a signature fires on every run, so `kb check` refuses it (error) and
  names the line;
- **cross-case**: it matches another case's title, symptoms or signatures (or
  a labelled query of another case). It is not wrong, but it does not tell
  the cases apart: weak evidence;
- **generic**: little is left once generic words (exception class names,
  "error", "failed", "no module named", ...) are taken out: weak evidence.

Weak signatures still match and rank, but cannot make an answer "high" on
their own (see kb/search/confidence.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kb.cases.names import REGEX_PREFIX
from kb.core.paths import PACKAGE_ROOT
from kb.index.documents import CaseDoc, readable_regex
from kb.search.signatures import SEARCH_REGEX_BUDGET_S, SignatureHit, SignatureMatcher
from kb.text.signals import clean_line

if TYPE_CHECKING:
    from kb.cases.casefile import Case, Problem

HEALTHY_SUFFIXES = (".log", ".txt")
# A case tagged `harmless` documents a benign message (a warning users mistake for the
# failure): its signatures must match routine lines, so the healthy check skips them, and
# they are weak evidence: such a case never outranks a case that explains a real error line.
HARMLESS_TAG = "harmless"
MAX_HEALTHY_BYTES = 8 * 1024 * 1024  # per file: the corpus is a few hundred lines, not a dump
MIN_SPECIFIC_LITERAL = 4  # characters of non-generic words a literal keeps (a module name is enough)
MIN_SPECIFIC_REGEX = 8  # a pattern with wildcards needs more fixed text to be specific

# Words that occur in errors of every kind: a signature made only of these
# (plus a short name) says little about which case it is.
GENERIC_WORDS = frozenset(
    """
    error errors exception failed failure fail fatal warning warn traceback raise raised
    no module named modulenotfounderror importerror cannot import name from
    runtimeerror valueerror typeerror keyerror attributeerror assertionerror indexerror
    oserror ioerror notimplementederror filenotfounderror permissionerror memoryerror
    raytaskerror rayactorerror actordiederror exceptions ray task actor worker system_error exit type died
    cuda out of memory the a an of to in is not for with on at by be was
    object has attribute has no unexpected invalid call last most recent file line
    """.split()
)
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|\d+")
# Lines PyTorch prints with every CUDA error of its kind, whatever the cause: the
# words around them are generic too (any device assert; any asynchronous CUDA error).
# Texts as PyTorch's c10_cuda_check_implementation (c10/cuda/CUDAException.cpp) appends
# them to every CUDA error, quoted verbatim in reports such as verl#421 (eval/reports.jsonl repA-067);
# "device-side assert triggered" is the CUDA runtime's description of cudaErrorAssert.
GENERIC_PHRASES = (
    "device-side assert triggered",
    "CUDA kernel errors might be asynchronously reported at some other API call",
    "so the stacktrace below might be incorrect",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions",
)
_GENERIC_PHRASES_RE = re.compile("|".join(re.escape(p) for p in GENERIC_PHRASES), re.IGNORECASE)


def default_healthy_dir() -> Path | None:
    """`eval/healthy/` of a checkout (None when kb runs from an installed wheel)."""
    d = PACKAGE_ROOT / "eval" / "healthy"
    return d if d.is_dir() else None


@dataclass(frozen=True)
class HealthyLine:
    path: Path
    line: int  # 1-based line in the file
    text: str  # the cleaned line, as search sees it


def read_healthy(folder: Path) -> list[HealthyLine]:
    """Every non-empty cleaned line of the corpus files (*.log, *.txt, recursively)."""
    out: list[HealthyLine] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in HEALTHY_SUFFIXES):
        try:
            data = path.read_bytes()[:MAX_HEALTHY_BYTES]
        except OSError:
            continue
        for n, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            cleaned, _ = clean_line(raw)
            if cleaned.strip():
                out.append(HealthyLine(path, n, cleaned))
    return out


@dataclass(frozen=True)
class Finding:
    case_id: str
    signature: str  # as written in the case (`regex:` prefix kept)
    kind: str  # "healthy", "cross-case", "generic"
    detail: str  # the line it matched and where, or why it is generic


def specific_chars(signature: str) -> int:
    """Characters of the signature's words that are not generic vocabulary."""
    text = readable_regex(signature[len(REGEX_PREFIX):]) if signature.startswith(REGEX_PREFIX) else signature
    text = _GENERIC_PHRASES_RE.sub(" ", text)
    return sum(len(w) for w in _WORD_RE.findall(text) if w.lower().strip(".") not in GENERIC_WORDS and not w.isdigit())


def _matcher_for(doc: CaseDoc) -> SignatureMatcher:
    return SignatureMatcher([doc])


def _hits_per_doc(docs: list[CaseDoc], texts: list[str]) -> list[list[SignatureHit]]:
    """Each doc's signature hits on the texts, as if each doc were matched alone.

    With unique ids one matcher over all docs gives the same hits (the word index only
    picks candidates; every candidate is still tested on the text), and the corpus is
    canonicalised once instead of once per case: `kb check` spent ~1.3 s of its ~2 s here.
    Each doc kept its own regex budget; together they get the sum of them.
    """
    if len({doc["id"] for doc in docs}) < len(docs):  # an id twice: its hits could not be told apart
        return [_matcher_for(doc).match(texts).get(doc["id"], []) for doc in docs]
    hits = SignatureMatcher(docs).match(texts, budget_s=SEARCH_REGEX_BUDGET_S * len(docs))
    return [hits.get(doc["id"], []) for doc in docs]


def healthy_findings(docs: list[CaseDoc], lines: list[HealthyLine], root: Path | None = None) -> list[Finding]:
    """Signatures that match a healthy line (one finding per signature, first line found)."""
    if not lines:
        return []
    texts = [h.text for h in lines]
    findings: list[Finding] = []
    checked = [doc for doc in docs if not is_harmless(doc)]
    for doc, hits in zip(checked, _hits_per_doc(checked, texts)):
        seen: set[str] = set()
        for hit in hits:
            if hit.signature in seen:
                continue
            seen.add(hit.signature)
            where = next((h for h in lines if h.text.strip() == hit.line), None)
            loc = ""
            if where is not None:
                p = where.path
                if root is not None:
                    try:
                        p = p.relative_to(root)
                    except ValueError:
                        pass
                loc = f"{p}:{where.line}: "
            findings.append(Finding(doc["id"], hit.signature, "healthy", f"{loc}{hit.line[:200]}"))
    return findings


def _case_texts(doc: CaseDoc) -> list[str]:
    sig_texts = [readable_regex(s[len(REGEX_PREFIX):]) if s.startswith(REGEX_PREFIX) else s for s in doc["signatures"]]
    return [doc["title"], *doc["symptoms"], *sig_texts]


def cross_case_findings(docs: list[CaseDoc], queries: Iterable[tuple[str, list[str]]] = ()) -> list[Finding]:
    """Signatures that match another case's title, symptoms or signatures, or another case's labelled query.

    `queries` are (text, expected case ids); a query labelled with the
    signature's own case does not count against it.
    """
    matcher = SignatureMatcher(docs)
    findings: dict[tuple[str, str], Finding] = {}
    sources: list[tuple[str, set[str], str]] = [
        (text, {doc["id"]}, f"case {doc['id']}") for doc in docs for text in _case_texts(doc)
    ]
    for i, (text, expected) in enumerate(queries):
        sources.append((text, set(expected), f"query {i + 1}"))
    for text, owners, label in sources:
        lines = [clean_line(l)[0] for l in text.splitlines() if l.strip()]
        for cid, hits in matcher.match(lines).items():
            if cid in owners:
                continue
            for hit in hits:
                key = (cid, hit.signature)
                if key not in findings:
                    findings[key] = Finding(cid, hit.signature, "cross-case", f"matches {label}: {hit.line[:160]}")
    return list(findings.values())


def generic_findings(docs: list[CaseDoc]) -> list[Finding]:
    out = []
    for doc in docs:
        for sig in doc["signatures"]:
            n = specific_chars(sig)
            if n < (MIN_SPECIFIC_REGEX if sig.startswith(REGEX_PREFIX) else MIN_SPECIFIC_LITERAL):
                out.append(Finding(doc["id"], sig, "generic", f"only {n} characters beyond generic words"))
    return out


def is_harmless(doc: CaseDoc) -> bool:
    return HARMLESS_TAG in (t.lower() for t in doc.get("tags", []))


def weak_signatures(docs: list[CaseDoc]) -> dict[tuple[str, str], str]:
    """(case id, signature) -> why it is weak evidence (cross-case, generic, or a harmless message).

    Computed from the loaded cases alone, so search needs no corpus files.
    """
    weak: dict[tuple[str, str], str] = {}
    for doc in docs:
        if is_harmless(doc):
            for sig in doc["signatures"]:
                weak[(doc["id"], sig)] = "harmless: the case documents a benign message"
    for f in generic_findings(docs) + cross_case_findings(docs):
        weak.setdefault((f.case_id, f.signature), f"{f.kind}: {f.detail}")
    return weak


def _signature_line(case_path: Path, signature: str) -> int:
    """Best-effort line of a signature in its case file (1 when not found)."""
    body = signature.removeprefix(REGEX_PREFIX)
    snippet = body[:40]
    try:
        lines = case_path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    for i, l in enumerate(lines, 1):
        if snippet in l or snippet in l.replace("\\\\", "\\"):
            return i
    return 1


def healthy_problems(cases: list[Case], folder: Path | None) -> list[Problem]:
    """`kb check` errors: each signature that matches a line of the healthy corpus, naming that line."""
    from kb.cases.casefile import Problem
    from kb.index.documents import build_doc

    if folder is None:
        return []
    lines = read_healthy(folder)
    by_id = {c.id: c for c in cases}
    problems = []
    for f in healthy_findings([build_doc(c) for c in cases], lines, Path.cwd()):
        case = by_id[f.case_id]
        problems.append(Problem(case.path, _signature_line(case.path, f.signature),
                                f"signature {f.signature!r} matches a routine line of a healthy run ({f.detail}); "
                                "it would fire on working jobs: use the distinctive part of the error message"))
    return problems


WEAK_CACHE = "weak-signatures.json"


def _weak_key(docs: list[CaseDoc], cross: bool) -> str:
    """What the weak set depends on: the cases' matched texts and these rules."""
    h = hashlib.sha256()
    rules = [sorted(GENERIC_WORDS), list(GENERIC_PHRASES), MIN_SPECIFIC_LITERAL, MIN_SPECIFIC_REGEX, cross]
    h.update(json.dumps(rules).encode())
    for d in docs:
        h.update(json.dumps([d["id"], d["title"], d["symptoms"], d["signatures"], d.get("tags", [])], ensure_ascii=False).encode())
    return h.hexdigest()


def cached_weak_signatures(docs: list[CaseDoc], folder: Path | None, max_cross_cases: int = 5000) -> dict[tuple[str, str], str]:
    """`weak_signatures`, remembered beside the index generation (it costs ~1 ms per case to compute).

    Above `max_cross_cases` only the generic-words test runs (the cross-case
    test grows with the square of the corpus). A missing, stale or unreadable
    cache is recomputed; an unwritable folder only costs the recomputation.
    """
    cross = len(docs) <= max_cross_cases
    key = _weak_key(docs, cross)
    path = folder / WEAK_CACHE if folder is not None else None
    if path is not None:
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
            if obj.get("key") == key:
                return {(c, s): why for c, s, why in obj["weak"]}
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if cross:
        weak = weak_signatures(docs)
    else:
        weak = {(f.case_id, f.signature): f"generic: {f.detail}" for f in generic_findings(docs)}
    if path is not None:
        from kb.core.atomic_files import atomic_write_bytes

        try:
            data = json.dumps({"key": key, "weak": [[c, s, why] for (c, s), why in sorted(weak.items())]}, ensure_ascii=False)
            atomic_write_bytes(path, data.encode("utf-8"))
        except OSError:
            pass
    return weak
