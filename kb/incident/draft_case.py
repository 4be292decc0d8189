"""A drafted case: its fields (`Draft`, the `Similar` cases found) and its file text (`render`).

The text is valid for `kb check` as it stands, and `scrub_secrets` is the last
line of defence: no secret value found in the log survives in it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kb.cases.casefile import ID_RE
from kb.cases.frontmatter import yaml_quote
from kb.core.safe_text import visible
from kb.incident.redact import Redactor


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
        d = dataclasses.replace(d, id=scrub_slug(d.id, d.secrets), category=scrub_slug(d.category, d.secrets))
        return dataclasses.replace(d, text=scrub_secrets(render(d), d.secrets))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "signatures": list(self.signatures),
            "similar": [s.to_json() for s in self.similar],
        }


def scrub_secrets(rendered: str, secrets: Iterable[str]) -> str:
    """Last line of defence: no secret value found in the log survives in the file text."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if len(value) >= 3 and value in rendered:
            rendered = rendered.replace(value, "`<redacted>`" if "`" not in value else "<redacted>")
    return rendered


_REDACTION_MARK_RE = re.compile(r"<[^<>\s`]{1,60}>")


def _inline(text: str) -> str:
    """One line of Markdown from a case file or a log: a title of another case, an id.

    The same escaping as a title shown on a terminal (kb.core.safe_text.visible: a newline becomes
    `\\x0a`), so a multi-line title can never open a section or a fence in the draft; backticks
    become quotes so it cannot close the inline code around an id either.
    """
    # `<password>`-style placeholders of the redaction read as inline HTML to a Markdown view, which
    # hides them while Copy fix copies them (kb check refuses that): they go in inline code
    return _REDACTION_MARK_RE.sub(r"`\g<0>`", visible(text).replace("`", "'"))


def _excerpt_line(line: str) -> str:
    """A log line inside the draft's ```text block: no fence, no control character."""
    return visible(line).replace("```", "'''").replace("~~~", "'''")


def scrub_slug(slug: str, secrets: Iterable[str]) -> str:
    """A slug (id, category) with every secret found in the log replaced by `redacted`, still a valid slug.

    scrub_secrets would put `<redacted>` into the id line and make the draft invalid
    (a host `proxy.corp.io` teaches `proxy`, which is in `...-http-proxy`)."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if len(value) < 3:
            continue
        for form in {value.lower(), re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")}:
            if len(form) >= 3 and form in slug:
                slug = slug.replace(form, "redacted")
    slug = re.sub(r"-{2,}", "-", slug).strip("-")
    return slug if ID_RE.match(slug) else "new-case"


def render(draft: Draft) -> str:
    """The case file text of a draft (valid for `kb check` as it stands)."""
    sig_lines = "".join(f"  - {yaml_quote(s)}\n" for s in draft.signatures)
    signatures = "signatures:\n" + sig_lines if sig_lines else "signatures: []\n"
    excerpt = "\n".join(_excerpt_line(x) for x in (draft.excerpt or [draft.main_line]))
    similar = "".join(
        f"- `{_inline(s.id)}` ({_inline(s.confidence)}, {s.score:.2f}): {_inline(s.title)}\n" for s in draft.similar if s.confidence != "low"
    )
    similar_section = (
        "\n## Similar cases\nFound by `kb search` when this draft was made: merge into one of them if it is the same error,\n"
        "or say here how this one differs (delete this section when done).\n\n" + similar
        if similar else ""
    )
    return f"""---
id: {draft.id}
title: {yaml_quote(draft.title)}
category: {draft.category}
tags: []
{signatures}symptoms:
  - {yaml_quote(draft.title)}
  # TODO: add plain-language phrasings a user would type (Chinese ones welcome)
sources:
  - "TODO: link the issue, doc or source file that backs the causes and the fix"
status: draft
---

# {_inline(draft.title)}

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
