"""A tokenizer for error text, code and mixed English/Chinese prose (used by BM25).

- identifiers stay whole (`pad_token_id`, `nccl_p2p_disable`) and also yield
  their parts, so "pad token" still finds `pad_token_id`;
- dotted and CamelCase names yield the whole and the parts
  (`torch.OutOfMemoryError` -> `torch.outofmemoryerror`, `torch`, `out`, `of`, `memory`, `error`);
- pure numbers, hex and typed placeholders are dropped (they vary between runs);
- CJK runs become single characters and overlapping bigrams, so Chinese is
  searchable without a segmenter;
- a light suffix stripper folds plurals and -ing/-ed forms of plain words;
- hyphens and underscores inside an identifier are the same token, so a CLI
  flag finds its config key (`--tensor-parallel-size` -> `tensor_parallel_size`);
- a file path loses its install prefix (`/root/miniconda3/lib/python3.10/site-packages/`):
  where a package is installed says nothing about the error, and its rare words
  (`miniconda3`, `site`, `root`) matched whichever case quoted a traceback from a
  similar machine. What follows `site-packages/` is kept, else the last three parts;
- a link to an issue, pull request or discussion (`https://github.com/volcengine/verl/issues/340`) is
  dropped: it points at another thread, and its rare words (`github`, `volcengine`) matched whichever
  entry quotes an install URL.
"""

from __future__ import annotations

import functools
import re

# Bump when tokens change: the index keeps each case's tokens and rebuilds its
# BM25 matrices when this differs from the version it was built with.
TOKENIZER_VERSION = 4  # 4: thread links dropped
CJK_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Chinese characters, for the tokenizer and kb.text.user_words
_TOKEN_RE = re.compile(rf"[{CJK_RANGES}]+|[A-Za-z0-9_][A-Za-z0-9_.\-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_CJK_RE = re.compile(rf"^[{CJK_RANGES}]+$")
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


# An absolute path of three or more parts (POSIX or Windows).
# Not a URL's path (`://host/...`) nor a relative one (`verl/trainer/...`).
_PATH_RE = re.compile(r"(?<![:/\\\w.~-])(?:[A-Za-z]:)?(?:[/\\][\w.+@~-]+){3,}[/\\]?")
_INSTALL_DIRS = ("site-packages", "dist-packages")
PATH_PARTS_KEPT = 3


def _package_relative(match: re.Match[str]) -> str:
    parts = [p for p in re.split(r"[/\\]", match.group(0)) if p]
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _INSTALL_DIRS:
            return " " + "/".join(parts[i + 1:]) + " "
    return " " + "/".join(parts[-PATH_PARTS_KEPT:]) + " "


# A link to a thread of a code host: issue, pull request, discussion (with an optional #anchor).
_THREAD_URL_RE = re.compile(r"(?:https?:/*)?(?:www\.)?(?:github|gitlab)\.com/[\w.-]+/[\w.-]+/(?:issues|pull|pulls|discussions|merge_requests)/\d+[\w#/=?&.-]*", re.I)


def drop_thread_links(text: str) -> str:
    return _THREAD_URL_RE.sub(" ", text)


def strip_install_prefixes(text: str) -> str:
    """`text` with each absolute path cut to the part that names code, not a machine."""
    return _PATH_RE.sub(_package_relative, text)


def tokenize(text: str) -> list[str]:
    """Tokens for BM25, in order, with repeats (term frequency matters)."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(strip_install_prefixes(drop_thread_links(text))):
        tok = m.group(0)
        out.extend(_cached_token_terms(tok) if len(tok) <= _CACHED_TOKEN_CHARS else _token_terms(tok))
    return out


_SEGMENT_SPLIT_RE = re.compile(r"[.\-]+")


def _token_terms(tok: str) -> tuple[str, ...]:
    """The terms one raw token yields."""
    if _CJK_RE.match(tok):
        return tuple(_cjk_tokens(tok))
    low = tok.lower().strip(".-")
    if not low or _NUMBERISH_RE.match(low):
        return ()
    emitted: list[str] = []
    segments = [seg for seg in _SEGMENT_SPLIT_RE.split(tok) if seg]
    if len(segments) > 1:
        emitted.append(low.replace("-", "_"))
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
    return tuple(e for e in emitted if len(e) > 1 and e not in STOPWORDS and not _NUMBERISH_RE.match(e))


# Words repeat: the index of the built-in cases tokenizes 225,000 words, mostly the same few
# thousand, so each short token's terms are computed once (long ones are rare and would only
# fill the cache).
_CACHED_TOKEN_CHARS = 64
_cached_token_terms = functools.lru_cache(maxsize=65536)(_token_terms)


# "no error", "没有报错": the user says what did NOT happen. Matching 报错 / error
# there pulls cases about errors, so these phrases are left out of the query.
NEGATED_RE = re.compile(
    r"\b(?:no|not any|without|never (?:an?|any))\s+(?:errors?|error messages?|exceptions?|tracebacks?|warnings?)\b"
    r"|(?:没有|没|无|不|并未|未)(?:任何)?(?:报错|错误|异常|报警|警告)",
    re.IGNORECASE,
)


def drop_negated(text: str) -> str:
    """`text` without phrases that deny an error ("no error", "没有报错")."""
    return NEGATED_RE.sub(" ", text)


DISPLAY_SCAN = 200_000  # characters of the searched text read to show terms as written


@functools.lru_cache(maxsize=4)
def surface_map(text: str) -> dict[str, str]:
    """Each token of `text` -> the word it came from, so explanations show
    `distributed`, not the stem `distribut`. Cached: every shown result of one
    search reads the same text (a 3 MB paste took 6 s a result without it)."""
    out: dict[str, str] = {}
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        if _CJK_RE.match(tok):
            continue
        low = tok.lower().strip(".-")
        out.setdefault(low, low)
        out.setdefault(low.replace("-", "_"), low)
        for piece in re.split(r"[._\-]+", tok):
            for word in [piece, *piece.split("_"), *_CAMEL_RE.findall(piece)]:
                if word:
                    out.setdefault(_stem(word.lower()), word.lower())
                    out.setdefault(word.lower(), word.lower())
    return out


def display_terms(terms: list[str], text: str, limit: int = 8) -> list[str]:
    """Shared terms as a person reads them: whole words instead of stems, and
    Chinese as the longest runs of `text` whose bigrams are all shared (训练卡住,
    not 训, 练, 卡, 住)."""
    # The error lines come first in `text`; past 200k characters a term keeps its stem
    # rather than a multi-megabyte paste costing seconds per shown result.
    text = text[:DISPLAY_SCAN]
    surface = surface_map(text)
    wanted = set(terms)
    out: list[str] = []
    seen: set[str] = set()
    cjk_runs: list[str] = []
    for m in re.finditer(rf"[{CJK_RANGES}]+", text):
        run = m.group(0)
        start = None
        for i in range(len(run) - 1):
            if run[i : i + 2] in wanted:
                start = i if start is None else start
            elif start is not None:
                cjk_runs.append(run[start : i + 1])
                start = None
        if start is not None:
            cjk_runs.append(run[start:])
    covered = {ch for r in cjk_runs for ch in r} | {bg for r in cjk_runs for bg in (r[i : i + 2] for i in range(len(r) - 1))}
    for t in terms:
        if _CJK_RE.match(t):
            if t in covered or len(t) == 1:  # a lone character says little to a reader
                continue
            shown = t
        else:
            shown = surface.get(t, t)
        if shown not in seen:
            seen.add(shown)
            out.append(shown)
    for r in cjk_runs:
        if r not in seen:
            seen.add(r)
            out.append(r)
    return out[:limit]
