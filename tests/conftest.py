"""Shared test fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _kb_private_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes history, crash logs or caches into the real home directory."""
    base = tmp_path_factory.mktemp("kbhome")
    monkeypatch.setenv("KB_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("KB_CACHE_DIR", str(base / "cache"))
