"""Names of the case format that search matches on, apart from the case parser.

A search of a current index needs the `regex:` prefix of a signature and the
tags of a family entry, not kb.cases.casefile: the parser, with its body
blocks and check rules, is about a fortieth of a cold `kb search` to import.
"""

from __future__ import annotations

REGEX_PREFIX = "regex:"  # a signature that is a regular expression
FAMILY_TAGS = frozenset({"family", "triage"})  # tags of a family (triage) entry: several candidate causes
