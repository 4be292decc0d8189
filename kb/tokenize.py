"""A tokenizer for error text, code and mixed English/Chinese prose (used by BM25).

- identifiers stay whole (`pad_token_id`, `nccl_p2p_disable`) and also yield
  their parts, so "pad token" still finds `pad_token_id`;
- dotted and CamelCase names yield the whole and the parts
  (`torch.OutOfMemoryError` -> `torch.outofmemoryerror`, `torch`, `out`, `of`, `memory`, `error`);
- pure numbers, hex and typed placeholders are dropped (they vary between runs);
- CJK runs become single characters and overlapping bigrams, so Chinese is
  searchable without a segmenter;
- a light suffix stripper folds plurals and -ing/-ed forms of plain words.
"""

from __future__ import annotations

import re

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[A-Za-z0-9_][A-Za-z0-9_.\-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_CJK_RE = re.compile(rf"^[{_CJK}]+$")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_NUMBERISH_RE = re.compile(r"^(?:\d+(?:\.\d+)*|0x[0-9a-f]+|[0-9a-f]{8,})$")

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being
    it its this that these those there here i you we they he she my our your their me us them
    do does did doing have has had not no so than too very can could would should will shall may might
    into onto over under again further once about above below up down out off just also only such
    what which who whom when where why how all any both each few more most other some own same
    get got use used using please see e.g etc""".split()
)


def _stem(word: str) -> str:
    """Fold simple English inflections; identifiers and very short words are left alone."""
    if len(word) < 4 or not word.isalpha():
        return word
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _cjk_tokens(run: str) -> list[str]:
    chars = list(run)
    return chars + [a + b for a, b in zip(chars, chars[1:])]


def tokenize(text: str) -> list[str]:
    """Tokens for BM25, in order, with repeats (term frequency matters)."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        if _CJK_RE.match(tok):
            out.extend(_cjk_tokens(tok))
            continue
        low = tok.lower().strip(".-")
        if not low or _NUMBERISH_RE.match(low):
            continue
        emitted: list[str] = []
        segments = [seg for seg in re.split(r"[.\-]+", tok) if seg]
        if len(segments) > 1:
            emitted.append(low)
        for seg in segments:
            words = [w for w in seg.split("_") if w]
            if len(words) > 1:
                emitted.append(seg.lower())
            for word in words:
                camel = _CAMEL_RE.findall(word)
                if len(words) > 1 or len(segments) > 1 or len(camel) > 1:
                    emitted.append(_stem(word.lower()))
                if len(camel) > 1:
                    emitted.extend(_stem(c.lower()) for c in camel)
        if not emitted:
            emitted.append(_stem(low))
        for e in emitted:
            if len(e) > 1 and e not in STOPWORDS and not _NUMBERISH_RE.match(e):
                out.append(e)
    return out


def query_terms(text: str) -> list[str]:
    """Distinct tokens of a query, in first-seen order (for explanations)."""
    seen: dict[str, None] = {}
    for tok in tokenize(text):
        seen.setdefault(tok, None)
    return list(seen)
