"""Where a case comes from: its folder layer, its file, and the file it overrides.

Every view of a case names these (docs/case-folders.md), so a team copy that
replaces a built-in case with `overrides: true` is never silent.

- `case_origin(case)`: for a Case loaded by kb.cases.caseset.load_cases (which
  records layer, folder and the replaced file on the Case);
- `OriginMap`: for search results, which come from the index and carry only a
  path. It lists the case files of each layer once (file names only, no YAML:
  a case's id equals its file name) and answers by path and id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.cases.caseset import Layer, case_files, case_layers
from kb.core.safe_text import visible

if TYPE_CHECKING:
    from kb.cases.casefile import Case


@dataclass(frozen=True)
class Origin:
    layer: str  # built-in, team, personal, KB_CASES, --cases ("" when unknown)
    file: Path
    folder: Path | None = None
    replaces: Path | None = None  # the file of a lower layer this case overrides
    replaces_layer: str = ""

    def describe(self) -> str:
        """One display line, e.g. `team folder: /t/x.md (overrides built-in /k/cases/config/x.md)`."""
        where = f"{self.layer} folder: {self.file}" if self.layer else str(self.file)
        if self.replaces is not None:
            where += f" (overrides {self.replaces_layer} {self.replaces})"
        return visible(where)

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "file": str(self.file),
            "overrides": None if self.replaces is None else {"layer": self.replaces_layer, "file": str(self.replaces)},
        }


def case_origin(case: Case) -> Origin:
    return Origin(case.layer, case.path, case.folder, case.replaces, case.replaces_layer)


class OriginMap:
    """Layer and overridden file of any case file of the current layers."""

    def __init__(self, layers: list[Layer], walked: dict[Path, list[Path]] | None = None) -> None:
        self.layers = layers
        self._walked = walked  # folder -> its case files, when the caller has just listed them
        self._by_stem: dict[str, list[tuple[int, Path]]] | None = None

    @classmethod
    def current(cls, extra: list[Path] | None = None, include_builtin: bool = True,
                walked: dict[Path, list[Path]] | None = None) -> OriginMap:
        return cls(case_layers(extra, include_builtin), walked)

    def _files(self, folder: Path) -> list[Path]:
        if self._walked is not None and folder in self._walked:
            return self._walked[folder]
        return case_files(folder) if folder.is_dir() else []

    def _stems(self) -> dict[str, list[tuple[int, Path]]]:
        if self._by_stem is None:
            by_stem: dict[str, list[tuple[int, Path]]] = {}
            for i, layer in enumerate(self.layers):
                for path in self._files(layer.path):
                    by_stem.setdefault(path.stem, []).append((i, path))
            self._by_stem = by_stem
        return self._by_stem

    def _layer_index(self, path: Path) -> int | None:
        best: tuple[int, int] | None = None  # (depth of the folder, index): the innermost folder holding the file
        for i, layer in enumerate(self.layers):
            try:
                path.relative_to(layer.path)
            except ValueError:
                continue
            depth = len(layer.path.parts)
            if best is None or depth > best[0]:
                best = (depth, i)
        return None if best is None else best[1]

    def origin(self, path: str | Path, case_id: str) -> Origin:
        p = Path(path)
        i = self._layer_index(p)
        if i is None:
            return Origin("", p)
        lower = [(j, q) for j, q in self._stems().get(case_id, []) if j < i]
        layer = self.layers[i]
        if not lower:
            return Origin(layer.source, p, layer.path)
        j, q = lower[-1]  # the nearest lower layer: the case this one replaced
        return Origin(layer.source, p, layer.path, q, self.layers[j].source)
