"""The training environment's package versions, for version-aware ranking of a paste from this machine.

`kb search --installed` and the app's `--installed` read them the way `kb env` does: the target Python
(`--python`, else KB_PYTHON, else python3 on PATH) reads the installed metadata and imports nothing
(kb.checks.envreport). Off by default: a paste is often from another machine than the one kb runs on.
"""

from __future__ import annotations

from kb.checks.envreport import target_versions
from kb.checks.needs import target_python
from kb.search.versions import Version, installed_versions, show


def read_installed(python: str | None) -> tuple[dict[str, Version], str]:
    """The typed versions of the packages kb dates, and the note that says which were read (or why none)."""
    tp = target_python(python)
    report = target_versions(tp.path)
    packages = report.get("packages")
    if not isinstance(packages, dict):
        return {}, f"--installed: could not read the versions of {tp.path} ({packages}); only the paste's versions are read"
    versions = installed_versions(packages)
    found = ", ".join(f"{name} {show(v)}" for name, v in sorted(versions.items())) or "none of the packages kb dates"
    return versions, f"--installed: versions of {tp.path} ({tp.source}) read where the paste names none: {found}"
