"""What the scorers see of a case: a weighted BM25 document and several dense texts.

A case is stored as a plain dict (`CaseDoc`) in the index, so a cold query
needs no YAML parsing.
"""

from __future__ import annotations

import re
from typing import TypedDict

from .casefile import REGEX_PREFIX, Case

MAX_SECTION_CHARS = 3000
_CODE_FENCE_RE = re.compile(r"```.*?```", re.S)
_REGEX_SYNTAX_RE = re.compile(r"\\[dswbSWDB]|\\|[\^$*+?{}\[\]()|]|\(\?[:=!<]")


class CaseDoc(TypedDict):
    id: str
    title: str
    category: str
    path: str
    signatures: list[str]
    symptoms: list[str]
    tags: list[str]
    lexical: str
    dense_texts: list[str]
    dense_kinds: list[str]
    content_hash: str
    kind: str  # "curated" or "light"


def readable_regex(pattern: str) -> str:
    """The literal words of a regex signature, for BM25 and embeddings."""
    text = _REGEX_SYNTAX_RE.sub(" ", pattern)
    return re.sub(r"\s+", " ", text).strip()


def signature_text(sig: str) -> str:
    return readable_regex(sig[len(REGEX_PREFIX):]) if sig.startswith(REGEX_PREFIX) else sig


def _prose(section: str) -> str:
    return _CODE_FENCE_RE.sub(" ", section)[:MAX_SECTION_CHARS]


def build_doc(case: Case) -> CaseDoc:
    sigs = [signature_text(s) for s in case.signatures]
    lexical = "\n".join(
        [case.title] * 3
        + sigs * 2
        + case.symptoms * 2
        + [" ".join(case.tags), case.category.replace("-", " ")]
        + [_prose(case.section("Symptoms")), _prose(case.section("Causes")), _prose(case.section("Fix"))]
    )
    summary = f"{case.title}. {_prose(case.section('Symptoms'))[:400]}"
    dense_texts = [case.title, summary] + case.symptoms + [s for s in sigs if len(s) >= 12]
    kinds = ["title", "summary"] + ["symptom"] * len(case.symptoms) + ["signature"] * sum(1 for s in sigs if len(s) >= 12)
    return CaseDoc(
        id=case.id,
        title=case.title,
        category=case.category,
        path=str(case.path),
        signatures=list(case.signatures),
        symptoms=list(case.symptoms),
        tags=list(case.tags),
        lexical=lexical,
        dense_texts=dense_texts,
        dense_kinds=kinds,
        content_hash=case.content_hash,
        kind=case.kind,
    )
