"""Where a signature's text comes from, in one form a reader (and a test) can check.

A signature is either emitted by a line of some project's source (`<project> <path> @ <tag>`,
optionally a few more tags and one short note in parentheses) or quoted verbatim in a real report
(`report <URL>` of an issue, discussion or pull request, optionally with a note). Several places are
joined by "; " (a report that quotes the text and the line that emits it, for example). The built-in
cases must all have one (tests/test_provenance.py); `kb check` warns about any that is malformed.
"""

from __future__ import annotations

import re

_ONE_SOURCE = r"\S+ \S+ @ [^\s,;()]+(?:(?:,| and|, and) [^\s,;()]+)*(?: \([^()]*\))?"
SOURCE_FORM = re.compile(rf"^{_ONE_SOURCE}(?:; {_ONE_SOURCE})*$")
REPORT_FORM = re.compile(r"^report (https?://\S+)(?: \([^()]*\))?$")
# an issue, discussion or pull-request page (GitHub; GitLab's issues and merge requests)
REPORT_PAGE = re.compile(
    r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+([/#?]\S*)?$"
    r"|^https://gitlab\.com/\S+/-/(issues|merge_requests)/\d+([/#?]\S*)?$"
)


def source_parts(source: str) -> list[str]:
    """`source` split at the "; " that join several places (not those inside a note's parentheses)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(source):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and source.startswith("; ", i):
            parts.append(source[start:i])
            start = i + 2
    parts.append(source[start:])
    return parts


def source_problem(source: str) -> str | None:
    """What is wrong with one signature's source, or None when it is in form."""
    if SOURCE_FORM.match(source):
        return None
    for part in source_parts(source):
        report = REPORT_FORM.match(part)
        if report:
            if not REPORT_PAGE.match(report.group(1)):
                return f"report URL is not an issue/discussion/PR page: {source!r}"
        elif not SOURCE_FORM.match(part):
            return (f"source is neither '<project> <path> @ <tag> (<note>)' nor 'report <URL> (<note>)' "
                    f"(one note in parentheses, nothing after it): {source!r}")
    return None
