"""The command palette's case search: type part of an id or title, Enter opens the case."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from kb.core.safe_text import visible

MAX_HITS = 30


class CaseCommands(Provider):
    """Cases by id and title, from the App's loaded case set."""

    def _cases(self) -> list[tuple[str, str, str]]:
        caseset = getattr(self.app, "caseset", None)
        if caseset is None:
            return []
        return [(c.id, visible(c.title), c.kind) for c in caseset.cases]

    async def discover(self) -> Hits:
        for case_id, title, kind in self._cases()[:MAX_HITS]:
            yield DiscoveryHit(f"case {case_id}", partial(self.app.open_case, case_id), help=title + (" (light entry)" if kind == "light" else ""))  # type: ignore[attr-defined]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        scored: list[tuple[float, str, str, str]] = []
        for case_id, title, kind in self._cases():
            score = max(matcher.match(case_id), matcher.match(title) * 0.9)
            if score > 0:
                scored.append((score, case_id, title, kind))
        scored.sort(key=lambda t: -t[0])
        for score, case_id, title, kind in scored[:MAX_HITS]:
            yield Hit(
                score,
                matcher.highlight(f"case {case_id}"),
                partial(self.app.open_case, case_id),  # type: ignore[attr-defined]
                help=title + (" (light entry)" if kind == "light" else ""),
            )
