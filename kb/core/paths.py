"""Every location kb reads or writes, decided in one place.

Precedence for each folder: an explicit argument, then an environment
variable, then the default. `kb paths` prints them.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from platformdirs import user_cache_dir, user_config_dir, user_data_dir

APP = "kb-verl"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # kb/core/paths.py -> the checkout


def is_checkout() -> bool:
    """True when kb runs from a source checkout (cases/ and pyproject beside kb/)."""
    return (PACKAGE_ROOT / "pyproject.toml").is_file() and (PACKAGE_ROOT / "cases").is_dir()


def builtin_cases_dir() -> Path:
    """The built-in cases: `cases/` of a checkout, else the installed `kb_cases` package."""
    if is_checkout():
        return PACKAGE_ROOT / "cases"
    spec = importlib.util.find_spec("kb_cases")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return PACKAGE_ROOT / "cases"


def data_dir() -> Path:
    """History, crash logs, personal cases. KB_DATA_DIR overrides."""
    env = os.environ.get("KB_DATA_DIR")
    return Path(env) if env else Path(user_data_dir(APP))


def config_dir() -> Path:
    """`config.toml` (team and personal case folders). KB_CONFIG_DIR overrides."""
    env = os.environ.get("KB_CONFIG_DIR")
    return Path(env) if env else Path(user_config_dir(APP))


def cache_dir() -> Path:
    env = os.environ.get("KB_CACHE_DIR")
    return Path(env) if env else Path(user_cache_dir(APP))


def default_index_dir() -> Path:
    """`index/` in a checkout, else a user cache folder. KB_INDEX_DIR overrides."""
    env = os.environ.get("KB_INDEX_DIR")
    if env:
        return Path(env)
    if is_checkout():
        return PACKAGE_ROOT / "index"
    return cache_dir() / "index"


def fallback_index_dir() -> Path:
    """Where the index goes when the default folder cannot be written."""
    return cache_dir() / "index"


def is_writable_dir(folder: Path) -> bool:
    """Create the folder if needed and prove a file can be written in it (permissions alone lie for root)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".kb-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
        return True
    except OSError:
        return False
