"""The question kb asks instead of guessing: what tells the nearest entries apart.

When kb declines a description (no error line, the best entry unlikely to be right), it lists the
nearest entries. A generic "which stage, which engine?" does not tell those entries apart; what
does is what each one's cause would show: its own symptom, in the words its reports use, and the
message it would leave in the log. So the question offers one choice per nearest entry (the
entry's first symptom line and its clearest literal signature), then the generic question for a
run that shows none of them (issue 24: a report whose cause nothing establishes is served by a
question that tells the candidates apart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kb.cases.names import REGEX_PREFIX
from kb.index.documents import regex_words

GENERIC_QUESTION = ("Which stage fails: rollout (generation), training (actor/critic update) or checkpoint "
                    "(save/load)? And which engine: vLLM, SGLang, or HF? Paste the error lines if there are any.")
MIN_MESSAGE_CHARS = 20  # shorter signatures are fragments ("OOM", a key name) that say little on their own
MAX_SHOWN_CHARS = 110
# a nearest entry scored below this shares next to nothing with the paste (the fused score of unrelated text
# is ~0.1 without the dense scorer): offering it as a choice would be noise, so the generic question stays
MIN_CHOICE_SCORE = 0.2


@dataclass(frozen=True)
class Choice:
    """One nearest entry and what its cause would show."""

    id: str
    symptom: str  # the entry's first symptom line ("" when it has none)
    message: str  # a log line its cause leaves, readable ("" when it has no usable signature)

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "symptom": self.symptom, "message": self.message}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3].rstrip() + "..."


def _message(signatures: Sequence[str]) -> str:
    """The entry's first literal signature long enough to recognise; else a regex's literal words."""
    literal = [s for s in signatures if not s.startswith(REGEX_PREFIX) and len(s.strip()) >= MIN_MESSAGE_CHARS]
    if literal:
        return _short(literal[0])
    for sig in signatures:
        if sig.startswith(REGEX_PREFIX):
            # a pattern's literal words, without the leftovers of its classes and groups ("' '")
            words = " ".join(t for t in regex_words(sig[len(REGEX_PREFIX):]).split() if any(ch.isalnum() for ch in t))
            if len(words) >= MIN_MESSAGE_CHARS:
                return _short(words)
    return ""


def choices(docs: Sequence[Mapping[str, Any]]) -> list[Choice]:
    """One choice per entry (index documents of the nearest entries, in their order); entries that
    would read the same as an earlier one are left out: they do not tell anything apart."""
    out: list[Choice] = []
    seen: set[str] = set()
    for doc in docs:
        symptoms = [s for s in doc.get("symptoms", []) if s.strip()]
        choice = Choice(str(doc["id"]), _short(symptoms[0]) if symptoms else "", _message(doc.get("signatures", [])))
        key = (choice.symptom or choice.message).lower()
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(choice)
    return out


def question_text(options: Sequence[Choice]) -> str:
    """The question as shown: one line per choice, then the generic question for none of them."""
    if len(options) < 2:  # one candidate is not a choice between causes
        return GENERIC_QUESTION
    lines = ["Which of these is closest to what your run shows?"]
    for c in options:
        said = c.symptom or c.message
        log = f' (log line: "{c.message}")' if c.symptom and c.message else ""
        lines.append(f"  - {said}{log}: {c.id}")
    lines.append("If none: " + GENERIC_QUESTION[0].lower() + GENERIC_QUESTION[1:])
    return "\n".join(lines)
