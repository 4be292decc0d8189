"""What the scorers see of a case: a weighted BM25 document and several dense texts.

A case is stored as a plain dict (`CaseDoc`) in the index, so a cold query
needs no YAML parsing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypedDict

from kb.cases.names import REGEX_PREFIX
from kb.cases.quality import is_unedited
from kb.text.regex_analysis import required_literal

if TYPE_CHECKING:  # documents are built from parsed cases; a search only reads them
    from kb.cases.casefile import Case

MAX_SECTION_CHARS = 3000
# Bump when build_doc's output changes: the index rebuilds docs.json and BM25 when it
# was built with another version (vectors of unchanged dense texts are reused).
DOC_VERSION = 8  # 3: regex_required; 4: `unedited`; 5: versions and identifiers (ranking, issue 25); 6: family; 7: members;
# 8: `lexical` not stored in docs.json
_CODE_FENCE_RE = re.compile(r"```.*?```", re.S)
_REGEX_SYNTAX_RE = re.compile(r"\\[dswbSWDB]|\\|[\^$*+?{}\[\]()|]|\(\?[:=!<]")


class _CaseDocBase(TypedDict):
    id: str
    title: str
    category: str
    path: str
    signatures: list[str]
    symptoms: list[str]
    tags: list[str]
    dense_texts: list[str]
    dense_kinds: list[str]
    content_hash: str
    kind: str  # "curated" or "light"
    versions: str  # the `versions` front matter ("" when none), parsed by kb.search.versions
    idents: list[str]  # code identifiers and config keys the case names (kb.search.rerank)
    unedited: bool  # a draft whose Causes/Fix still say TODO: never answered "high" (kb.cases.quality)
    family: bool  # several candidate causes (Case.is_family): knows the message, not which cause; never "high"
    members: list[str]  # a family's specific entries: the ids its Causes/Fix/Verify name in backticks (unresolved)


class CaseDoc(_CaseDocBase, total=False):
    # The weighted BM25 text: built for tokenizing and identifiers, not stored in docs.json (tokens.json
    # keeps its tokens, the BM25 matrices its terms): it was over half of docs.json, parsed by every
    # cold search for nothing.
    lexical: str
    # regex signature -> the casefolded literal it requires ("" if none is certain), read at index
    # time so a cold query does not parse every pattern; absent in indexes built before it
    regex_required: dict[str, str]


def readable_regex(pattern: str) -> str:
    """The literal words of a regex signature, for BM25 and embeddings."""
    text = _REGEX_SYNTAX_RE.sub(" ", pattern)
    return re.sub(r"\s+", " ", text).strip()


_QUANTIFIER_RE = re.compile(r"\{\d*(?:,\d*)?\}")
_GROUP_OPEN_RE = re.compile(r"\(\?(?:P<\w+>|<\w+>|[aiLmsux]+(?:-[imsx]+)?:|[aiLmsux]+\)|:)")
_LOOKAROUND = ("(?!", "(?<!", "(?=", "(?<=")


def _skip_group(pattern: str, i: int) -> int:
    """Index just past the group that opens at pattern[i]."""
    depth = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "(":
            depth += 1
        elif pattern[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def regex_words(pattern: str) -> str:
    """What a regex signature says, as the message it matches would read (for BM25 and embeddings).

    Escaped characters are the characters (`rollout\\.prompt_length` -> `rollout.prompt_length`,
    one dotted name, not two words); character classes, quantifiers, wildcards and group
    syntax become a space; a lookaround says what must (not) follow, not what is there, so
    it is dropped. Alternatives stay side by side (`(image|video)` -> `image video`).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(" " if pattern[i + 1].isalnum() else pattern[i + 1])  # \d \w \s \b vs \. \( \[
            i += 2
        elif c == "[":
            j = i + 1
            j += 1 if pattern.startswith("^", j) else 0
            j += 1 if pattern.startswith("]", j) else 0
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        elif c == "{" and (m := _QUANTIFIER_RE.match(pattern, i)):
            out.append(" ")
            i = m.end()
        elif pattern.startswith(_LOOKAROUND, i):
            out.append(" ")
            i = _skip_group(pattern, i)
        elif c == "(":
            g = _GROUP_OPEN_RE.match(pattern, i)
            out.append(" ")
            i = g.end() if g else i + 1
        else:
            out.append(" " if c in "^$*+?|)." else c)
            i += 1
    return re.sub(r"\s+", " ", "".join(out)).strip()


def signature_text(sig: str) -> str:
    return regex_words(sig[len(REGEX_PREFIX):]) if sig.startswith(REGEX_PREFIX) else sig


def _prose(section: str) -> str:
    return _CODE_FENCE_RE.sub(" ", section)[:MAX_SECTION_CHARS]


# A code identifier or config key: snake_case, dotted names, CamelCase with two humps; 6+ characters.
_IDENT_RE = re.compile(r"(?<![\w.])(?:[A-Za-z_][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w])")
_VERSIONISH_RE = re.compile(r"v?[\d.]+(?:post\d+|rc\d+)?")
MAX_IDENTS = 300


def identifiers(text: str) -> list[str]:
    """The identifiers a text names, lower-cased, sorted (what tells one case's paste from another's)."""
    found = {m.group(0).strip("._").lower() for m in _IDENT_RE.finditer(text[:200_000])}
    return sorted(x for x in found if len(x) >= 6 and not _VERSIONISH_RE.fullmatch(x))[:MAX_IDENTS]


# An entry id quoted in backticks: lower-case words joined by hyphens (config keys have dots/underscores).
_MEMBER_RE = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`")
MAX_MEMBERS = 40


def family_members(case: Case) -> list[str]:
    """The entry ids a family entry names in its Causes, Fix and Verify (its specific entries), in order.

    Not resolved against the corpus here (a doc is built from one case); the engine keeps those that exist.
    """
    if not case.is_family:
        return []
    found: dict[str, None] = {}
    for name in ("Causes", "Fix", "Verify"):
        for m in _MEMBER_RE.finditer(case.section(name)):
            if m.group(1) != case.id:
                found.setdefault(m.group(1))
    return list(found)[:MAX_MEMBERS]


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
        regex_required={s: required_literal(s[len(REGEX_PREFIX):].strip()) for s in case.signatures if s.startswith(REGEX_PREFIX)},
        unedited=is_unedited(case),
        family=case.is_family,
        members=family_members(case),
        versions=str(case.versions or ""),
        idents=identifiers(lexical),
    )
