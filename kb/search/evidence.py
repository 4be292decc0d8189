"""Why a case matched, as typed evidence carried from the scorers to every view.

Each scorer that found something about a case leaves one `Evidence`: its kind,
the sentence a reader sees (`text`, which `kb search --json` still lists as
`why`), the pasted line it matched when there is one, and the typed fields a
view needs (the signature, the shared terms, the dense similarity) so that no
view parses the sentence back. Views choose how to show each kind: the text
output prints `text`, a card names the signature and points at the
highlighted line, the incident report lists `text`.

No imports from the rest of kb: the app's widgets read this before the engine loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

LINE_SHOWN = 200  # characters of a matched line quoted in the sentence
CASE_TEXT_SHOWN = 160  # characters of the closest case text quoted in the sentence
MEMBERS_SHOWN = 6  # specific entries a family's evidence names
WEAK_NOTE = "broad pattern: weak evidence"
# beside a family entry's answer (`Result.capped_family`): the message matched, which cause is not established
CAUSE_OPEN_NOTE = "cause not established: its checks or Verify steps tell the causes apart"


class Kind(str, Enum):
    """What produced a piece of evidence (the value is what `--json` writes)."""

    SIGNATURE = "signature"  # one of the case's signatures matched a pasted line (kb.search.signatures)
    TERMS = "terms"  # query terms the case shares (kb.index.lexical, BM25)
    DENSE = "dense"  # the case text closest to the query (kb.index.encoder, cosine)
    STAGE = "stage"  # demoted: a start-up case, but the log got further (kb.logs.logsearch, kb.logs.stage)
    NEAR_MISS = "near_miss"  # a pasted line has a signature's words but other quoted names (kb.search.near_miss)
    DEATH = "death"  # promoted: a process died by SIGKILL, the host-OOM entry explains it (kb.logs.logsearch, kb.logs.death)
    VERSION = "version"  # the paste's version of a package is outside (or inside) the case's range (kb.search.versions)
    MEMBERS = "members"  # a family entry: the specific entries it lists, those among these results first (CaseDoc.members)


def quoted(text: str) -> str:
    """`text` in quotes as written: repr() would double every backslash of a regex signature."""
    quote = '"' if "'" in text and '"' not in text else "'"
    return f"{quote}{text}{quote}"


@dataclass(frozen=True)
class Evidence:
    """One reason a case ranks where it does.

    `line` is the pasted line the evidence rests on (signature hits), else None.
    Only the fields of its kind are set; build one with the constructors below so
    that `text` and the typed fields always agree.
    """

    kind: Kind
    text: str
    line: str | None = None
    signature: str = ""  # SIGNATURE: the case's signature as written (`regex:` ones with their prefix)
    weak: bool = False  # SIGNATURE: a broad or generic signature (kb.search.background), weak evidence
    terms: tuple[str, ...] = ()  # TERMS: the shared terms as the user wrote them
    similarity: float | None = None  # DENSE: the cosine of the closest case text
    case_text: str = ""  # DENSE: that case text
    stage: str = ""  # STAGE: how far the log got ("step 6", "checkpoint", ...)
    case_name: str = ""  # NEAR_MISS: the name the case's signature quotes
    pasted_name: str = ""  # NEAR_MISS: the name the pasted line quotes in its place
    package: str = ""  # VERSION: the package whose version decided
    pasted_version: str = ""  # VERSION: the version the paste shows
    verdict: str = ""  # VERSION: "excluded" (outside the case's range, ranked down) or "included"
    version_from: str = ""  # VERSION: "paste", or "installed" (kb search --installed: the environment's, the paste names none)
    members: tuple[str, ...] = ()  # MEMBERS: the specific entries the family lists
    members_here: tuple[tuple[str, int], ...] = ()  # MEMBERS: those among these results, with their rank

    @classmethod
    def signature_hit(cls, signature: str, line: str, weak: bool = False) -> Evidence:
        note = f" ({WEAK_NOTE})" if weak else ""
        return cls(Kind.SIGNATURE, f"signature {quoted(signature)} matched{note}: {line[:LINE_SHOWN]}", line, signature=signature, weak=weak)

    @classmethod
    def shared_terms(cls, terms: list[str] | tuple[str, ...]) -> Evidence:
        return cls(Kind.TERMS, "shared terms: " + ", ".join(terms), terms=tuple(terms))

    @classmethod
    def dense_match(cls, similarity: float, case_text: str) -> Evidence:
        return cls(Kind.DENSE, f"dense similarity {similarity:.2f} to: {case_text[:CASE_TEXT_SHOWN]}", similarity=similarity, case_text=case_text)

    @classmethod
    def stage_demotion(cls, stage: str) -> Evidence:
        return cls(Kind.STAGE, f"demoted: a start-up case, but the log reached {stage}", stage=stage)

    @classmethod
    def process_death(cls, text: str, line: str) -> Evidence:
        return cls(Kind.DEATH, text, line)

    @classmethod
    def near_miss(cls, signature: str, line: str, case_name: str, pasted_name: str) -> Evidence:
        return cls(
            Kind.NEAR_MISS,
            f"not the same name: this case is about {quoted(case_name)}, the paste names {quoted(pasted_name)} "
            f"in the same message: {line[:LINE_SHOWN]}",
            line, signature=signature, case_name=case_name, pasted_name=pasted_name,
        )

    @classmethod
    def version(cls, verdict: str, package: str, pasted_version: str, text: str, ranked_down: bool = False,
                installed: bool = False) -> Evidence:
        lead = "version, ranked down: " if ranked_down else "version: "
        return cls(Kind.VERSION, lead + text, package=package, pasted_version=pasted_version, verdict=verdict,
                   version_from="installed" if installed else "paste")

    @classmethod
    def family_members(cls, members: list[str], here: list[tuple[str, int]], shown: int = MEMBERS_SHOWN) -> Evidence:
        """A family entry lists its specific entries (issue 25: "comes first and lists its specific entries
        beneath"): the ones in this answer with their rank, then the rest it names."""
        ranked = [f"{m} (#{rank})" for m, rank in here]
        listed = {m for m, _ in here}
        others = [m for m in members if m not in listed]
        parts = ranked + others
        more = f", and {len(parts) - shown} more" if len(parts) > shown else ""
        return cls(Kind.MEMBERS, "family entry; its specific entries: " + ", ".join(parts[:shown]) + more,
                   members=tuple(members), members_here=tuple(here))

    def to_json(self) -> dict[str, Any]:
        """{kind, text, line} and the typed fields of its kind."""
        out: dict[str, Any] = {"kind": self.kind.value, "text": self.text, "line": self.line}
        if self.kind is Kind.SIGNATURE:
            out.update(signature=self.signature, weak=self.weak)
        elif self.kind is Kind.TERMS:
            out["terms"] = list(self.terms)
        elif self.kind is Kind.DENSE:
            out.update(similarity=None if self.similarity is None else round(self.similarity, 4), case_text=self.case_text)
        elif self.kind is Kind.STAGE:
            out["stage"] = self.stage
        elif self.kind is Kind.NEAR_MISS:
            out.update(signature=self.signature, case_name=self.case_name, pasted_name=self.pasted_name)
        elif self.kind is Kind.VERSION:
            out.update(package=self.package, pasted_version=self.pasted_version, verdict=self.verdict, version_from=self.version_from)
        elif self.kind is Kind.MEMBERS:
            out.update(members=list(self.members), members_here=[{"id": m, "rank": r} for m, r in self.members_here])
        return out
