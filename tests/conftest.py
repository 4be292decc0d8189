"""Shared test fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _kb_private_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes history, crash logs or caches into the real home directory."""
    base = tmp_path_factory.mktemp("kbhome")
    monkeypatch.setenv("KB_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("KB_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("KB_CONFIG_DIR", str(base / "config"))


@pytest.fixture(autouse=True)
def _kb_clean_target_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks and needs are judged afresh in each test: no inherited KB_PYTHON/KB_CASES, no cached needs."""
    from kb import needs

    monkeypatch.delenv("KB_PYTHON", raising=False)
    monkeypatch.delenv("KB_CASES", raising=False)
    needs.clear_cache()


CASE_TEMPLATE = """---
id: {id}
title: {title}
category: config
signatures: []
symptoms: [a test case]
sources: [tests]
{params}---

# {title}

## Symptoms
Test.

## Causes
Test.

## Fix
Test.

## Verify
{checks}
"""


@pytest.fixture
def write_case(tmp_path):
    """write_case(id, [(info, code), ...], params={name: default-or-None}) -> the case folder.

    `info` is the fence info string, e.g. "bash {name=x timeout=5}"; the file is
    a valid case per docs/case-format.md, loaded with
    load_cases([folder], include_builtin=False).
    """
    import yaml

    folder = tmp_path / "cases"

    def write(case_id: str, checks: list[tuple[str, str]], params: dict | None = None, title: str | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        params_yaml = ""
        if params:
            spec = {k: ({"description": f"the {k}"} | ({} if v is None else {"default": v})) for k, v in params.items()}
            params_yaml = yaml.safe_dump({"params": spec}, sort_keys=False)
        blocks = "\n".join(f"```{info}\n{code.rstrip()}\n```\n" for info, code in checks)
        text = CASE_TEMPLATE.format(id=case_id, title=title or f"Test case {case_id}", params=params_yaml, checks=blocks)
        (folder / f"{case_id}.md").write_text(text, encoding="utf-8")
        return folder

    return write


@pytest.fixture(scope="session")
def shared_index_dir(tmp_path_factory: pytest.TempPathFactory):
    """One index of the built-in cases for the whole session (the first build exports the model)."""
    return tmp_path_factory.mktemp("shared-index")


@pytest.fixture(scope="session")
def engine(shared_index_dir):
    """The real engine over the real built-in cases and the real model, dense loaded."""
    from kb.search import Engine

    eng = Engine.open(index_dir=shared_index_dir, progress=False)
    assert eng.load_dense(), eng.dense_error
    return eng


# Tests that need the real model or a real index of the built-in cases are the
# slow lane; everything else runs in `-m "not slow"` (about a minute).
SLOW_FIXTURES = {"engine", "shared_index_dir"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
