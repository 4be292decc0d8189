"""Subsystems are packages and arrows only go down: each package imports only packages below it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bottom to top; kb's own top-level modules (cli, crash, __main__) and kb.commands sit above them all
LAYERS = ["core", "text", "cases", "index", "search", "logs", "hangs", "checks", "incident", "cluster", "evaluation", "commands", ""]
TOP_MODULES = {"__init__", "__main__", "cli", "crash"}


def _package(parts: tuple[str, ...]) -> str:
    """The layer of a module given its path parts under kb/ ('' for kb's top-level modules)."""
    return "" if len(parts) == 1 else parts[0]


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute kb module, line) for every import of kb in the file, lazy ones included."""
    rel = path.relative_to(ROOT).with_suffix("").parts  # ('kb', 'search', 'engine')
    here = list(rel[:-1]) if path.name != "__init__.py" else list(rel[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name == "kb" or a.name.startswith("kb.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "kb" or mod.startswith("kb."):
                names = [f"{mod}.{a.name}" for a in node.names] if mod.count(".") <= 1 else [mod]
                out += [(n, node.lineno) for n in names]
    return out


def test_every_module_is_in_a_package() -> None:
    loose = [p.name for p in (ROOT / "kb").glob("*.py") if p.stem not in TOP_MODULES]
    assert not loose, f"modules at kb/'s top level belong in a subsystem package: {loose}"
    for folder in (ROOT / "kb").iterdir():
        if folder.is_dir() and folder.name != "__pycache__" and list(folder.glob("*.py")):
            init = folder / "__init__.py"
            assert init.is_file(), f"kb/{folder.name} has modules but no __init__.py"
            assert folder.name in LAYERS, f"kb/{folder.name} is not in LAYERS: say where it sits"
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            assert "May import" in doc, f"kb/{folder.name}/__init__.py must say what the package owns and may import"


def test_arrows_only_go_down() -> None:
    rank = {name: i for i, name in enumerate(LAYERS)}
    up = []
    for path in sorted((ROOT / "kb").rglob("*.py")):
        src = _package(path.relative_to(ROOT / "kb").with_suffix("").parts)
        for mod, line in _imports(path):
            parts = mod.split(".")[1:]
            if not parts:
                continue
            dst = parts[0] if parts[0] in rank and parts[0] != "" and len(parts) >= 1 and (ROOT / "kb" / parts[0]).is_dir() else ""
            if dst != src and rank[dst] > rank[src]:
                up.append(f"{path.relative_to(ROOT)}:{line} imports {mod} (kb.{src or 'top'} may not import kb.{dst or 'top'})")
    assert not up, "arrows up between packages:\n" + "\n".join(up)


def test_the_engine_never_imports_the_app() -> None:
    bad = [str(p.relative_to(ROOT)) for p in (ROOT / "kb").rglob("*.py") if "textual" in p.read_text(encoding="utf-8") and "import textual" in p.read_text(encoding="utf-8")]
    assert not bad, bad
