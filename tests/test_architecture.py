"""docs/architecture.md names every module of kb/ and tui/, so the map stays true to the code."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_module_is_on_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for package in ("kb", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" or rel.startswith("kb/commands/"):
                continue  # packages, and the commands covered as kb/commands/*.py
            if f"`{rel}`" not in page:
                missing.append(rel)
    assert not missing, f"add these modules to docs/architecture.md: {missing}"


def test_the_page_names_no_module_that_is_gone() -> None:
    import re

    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:kb|tui)/[\w/]+\.py)`", page))
    gone = [n for n in named if not (ROOT / n).exists()]
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"
