"""From an incident log to a draft case (`kb new --from-log`, the app's ctrl+r).

The API the CLI and the app share:

    draft = draft_from_text(log_text, engine=engine)   # nothing is written
    draft.duplicate                                    # a case that already matches with high confidence, or None
    path = write_draft(draft, target_folder())         # kb.incident.folder_policy: <folder>/<category>/<id>.md, never overwrites
    add_signatures(existing_case_path, draft.signatures)  # kb.incident.signature_edit: the other way, extend an existing case

Everything that reaches the file from the log goes through kb.incident.redact first
(excerpt, title); signatures are built from the stable parts of the main error
line only, with the volatile and secret parts generalised into a `regex:`
(kb.incident.signatures).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from kb.cases.casefile import ID_RE, REGEX_PREFIX
from kb.cases.quality import is_broad_literal
from kb.incident.draft_case import Draft, Similar, render, scrub_secrets, scrub_slug
from kb.incident.naming import guess_category, slugify, unique_id
from kb.incident.redact import Redactor
from kb.incident.signatures import MODULE_PREFIX_RE, TRIM, drop_dangling, literal_for_line, main_line, regex_for_line, strip_log_brackets
from kb.search.signatures import canon
from kb.text.signals import extract

MAX_EXCERPT_LINES = 30
MAX_EXCERPT_LINE = 300
LEARN_CHARS = 200_000  # head and tail of the log read for host and user names


def _sanitise_excerpt_line(line: str) -> str:
    line = line.replace("```", "'''").replace("~~~", "'''")
    return line if len(line) <= MAX_EXCERPT_LINE else line[:MAX_EXCERPT_LINE] + " ..."


def _learn_text(text: str) -> str:
    if len(text) <= 2 * LEARN_CHARS:
        return text
    return text[:LEARN_CHARS] + "\n" + text[-LEARN_CHARS:]


def redact_log(text: str) -> str:
    """The whole log with its secrets replaced, as `kb new` redacts what it writes (names learnt from
    the head and tail are hidden wherever they occur)."""
    redactor = Redactor()
    redactor.learn(_learn_text(text))
    return redactor.redact(text)


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

    `engine` (a kb.search.engine.Engine) finds the similar cases, the category of a
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
    raw_main = strip_log_brackets(line.text.strip())

    signatures: list[str] = []
    literal = literal_for_line(raw_main, redactor)
    if literal and canon(literal) in canon(raw_main) and not is_broad_literal(literal):
        signatures.append(literal)  # not `OSError: [Errno`: it would match every OSError (kb.cases.quality)
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
            # an unedited draft matched for sure is the case that covers this log, though never "high" to a reader
            similar.append(Similar(r.id, float(r.score), "high" if r.capped_draft or r.capped_family else r.confidence, r.title, r.category, str(r.path)))
        ids |= {d["id"] for d in engine.docs}

    if title:
        the_title = redactor.redact(title.strip())
    else:
        the_title = literal or main_redacted
        if len(the_title) > 100:
            cut = the_title.rfind(" ", 0, 100)
            the_title = the_title[: cut if cut > 50 else 100].rstrip(TRIM)
        the_title = drop_dangling(the_title)
    the_category = category or guess_category(signals.focus_text, similar)
    the_id = case_id or unique_id(slugify(MODULE_PREFIX_RE.sub("", the_title)), ids)

    if case_id is None:
        the_id = unique_id(scrub_slug(the_id, secrets), ids)
    the_category = the_category if category is not None else scrub_slug(the_category, secrets)
    draft = Draft(the_id, the_title, the_category, signatures, similar, main_redacted, excerpt, "", secrets)
    return dataclasses.replace(draft, text=scrub_secrets(render(draft), secrets))
