"""Dev queries as the project measures them: the checkout's label fixes applied (kb.evaluation.label_fixes)."""

from __future__ import annotations

from pathlib import Path

from kb.evaluation.label_fixes import DEFAULT_FIXES, apply_fixes, load_fixes
from kb.evaluation.queries import EvalQuery, load_queries


def dev_queries(path: Path) -> list[EvalQuery]:
    queries, _ = apply_fixes(load_queries(path), load_fixes(DEFAULT_FIXES))
    return queries
