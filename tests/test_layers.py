"""Case folder layers: built-in < team < personal < KB_CASES < --cases; config.toml; where `kb new` writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.caseset import case_folders, case_layers, load_cases
from kb.core.config import load_config
from kb.core.paths import builtin_cases_dir, config_dir, data_dir
from kb.incident.folder_policy import NotWritable, target_folder

CASE = """---
id: {id}
title: "{title}"
category: config
signatures: []
symptoms: [something odd happens]
sources: [tests]
{extra}---

# {title}

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```bash {{name=ok timeout=5}}
exit 0
```
"""


def write_case(folder: Path, case_id: str, title: str, overrides: bool = False) -> Path:
    (folder / "config").mkdir(parents=True, exist_ok=True)
    path = folder / "config" / f"{case_id}.md"
    path.write_text(CASE.format(id=case_id, title=title, extra="overrides: true\n" if overrides else ""), encoding="utf-8")
    return path


@pytest.fixture
def layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A config.toml naming a team and a personal folder, plus a KB_CASES and a --cases folder."""
    folders = {name: tmp_path / name for name in ("team", "personal", "env", "cli")}
    for f in folders.values():
        f.mkdir()
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text(f'team_cases = "{folders["team"]}"\npersonal_cases = "personal-link"\n', encoding="utf-8")
    (cfg / "personal-link").symlink_to(folders["personal"])  # relative paths are relative to the config folder
    monkeypatch.setenv("KB_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("KB_CASES", str(folders["env"]))
    return folders


def test_config_dir_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CONFIG_DIR", str(tmp_path / "cfg"))
    assert config_dir() == tmp_path / "cfg"
    monkeypatch.delenv("KB_CONFIG_DIR")
    assert config_dir() != tmp_path / "cfg"


def test_config_defaults_and_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CONFIG_DIR", str(tmp_path))
    cfg = load_config()
    assert cfg.team_cases is None and cfg.personal_cases == data_dir() / "cases" and cfg.personal_is_default
    (tmp_path / "config.toml").write_text('personal_cases = "~/my-cases"\nteam_case = "/x"\n', encoding="utf-8")
    cfg = load_config()
    assert cfg.personal_cases == Path("~/my-cases").expanduser()
    assert any("team_case" in p for p in cfg.problems)
    (tmp_path / "config.toml").write_text("team_cases = [unclosed\n", encoding="utf-8")
    cfg = load_config()
    assert cfg.team_cases is None and cfg.problems and "bad TOML" in cfg.problems[0]
    # a broken config is a warning in `kb check`, never a crash
    assert any("bad TOML" in p.message and p.severity == "warning" for p in load_cases().problems)


def test_layer_order(layers: dict[str, Path]) -> None:
    got = case_layers([layers["cli"]])
    assert [l.source for l in got] == ["built-in", "team", "personal", "KB_CASES", "--cases"]
    assert [l.path for l in got] == [builtin_cases_dir().resolve()] + [layers[n].resolve() for n in ("team", "personal", "env", "cli")]
    assert case_folders([layers["cli"]]) == [l.path for l in got]
    # --only (include_builtin=False) reads the named folders and KB_CASES, not the configured ones
    assert case_folders([layers["cli"]], include_builtin=False) == [layers["env"].resolve(), layers["cli"].resolve()]


def test_missing_personal_folder_is_skipped_missing_team_folder_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.toml").write_text(f'team_cases = "{tmp_path / "no-team"}"\n', encoding="utf-8")
    assert [l.source for l in case_layers()] == ["built-in", "team"]
    caseset = load_cases()
    assert any(p.path == tmp_path / "no-team" and "does not exist" in p.message for p in caseset.errors)
    assert caseset.get("cuda-oom-training") is not None  # the built-in cases still load


def test_precedence_through_the_layers(layers: dict[str, Path]) -> None:
    # the same id in every layer: each higher layer overrides on purpose
    write_case(layers["team"], "cuda-oom-training", "team version", overrides=True)
    assert load_cases().get("cuda-oom-training").title == "team version"
    write_case(layers["personal"], "cuda-oom-training", "personal version", overrides=True)
    assert load_cases().get("cuda-oom-training").title == "personal version"
    write_case(layers["env"], "cuda-oom-training", "KB_CASES version", overrides=True)
    assert load_cases().get("cuda-oom-training").title == "KB_CASES version"
    write_case(layers["cli"], "cuda-oom-training", "--cases version", overrides=True)
    caseset = load_cases([layers["cli"]])
    assert caseset.get("cuda-oom-training").title == "--cases version"
    assert not [p for p in caseset.errors if "duplicate" in p.message]


def test_override_of_a_builtin_case_is_searched(layers: dict[str, Path], tmp_path: Path, shared_index_dir: Path, engine) -> None:
    import shutil

    from kb.search.engine import Engine

    path = write_case(layers["personal"], "verl-module-not-found", "Personal note on No module named verl", overrides=True)
    index_dir = tmp_path / "index"
    shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
    eng = Engine.open(index_dir=index_dir, progress=False, dense=False)
    docs = {d["id"]: d for d in eng.docs}
    assert docs["verl-module-not-found"]["path"] == str(path.resolve())
    assert docs["verl-module-not-found"]["title"] == "Personal note on No module named verl"


def test_duplicate_id_without_overrides_is_reported_with_both_paths(layers: dict[str, Path]) -> None:
    team_path = write_case(layers["team"], "shared-widget", "team widget")
    personal_path = write_case(layers["personal"], "shared-widget", "personal widget")
    caseset = load_cases()
    assert caseset.get("shared-widget").title == "team widget"  # the lower layer keeps it
    dup = [p for p in caseset.errors if "duplicate id 'shared-widget'" in p.message]
    assert len(dup) == 1 and dup[0].path == personal_path.resolve() and str(team_path.resolve()) in dup[0].message

    builtin_dup = write_case(layers["cli"], "cuda-oom-training", "no overrides flag")
    res = subprocess.run([sys.executable, "-m", "kb.cli", "check", "--json", "--cases", str(layers["cli"])], capture_output=True, text=True, env=os.environ.copy())
    assert res.returncode == 1
    problems = json.loads(res.stdout)["problems"]
    messages = [(p["path"], p["message"]) for p in problems if "duplicate id" in p["message"]]
    assert any(path == str(personal_path.resolve()) and str(team_path.resolve()) in msg for path, msg in messages)
    builtin = str((builtin_cases_dir() / "memory" / "cuda-oom-training.md").resolve())
    assert any(path == str(builtin_dup.resolve()) and builtin in msg for path, msg in messages)


def test_new_writes_to_dir_then_personal_then_team(layers: dict[str, Path], tmp_path: Path) -> None:
    explicit = tmp_path / "explicit"
    assert target_folder(explicit) == explicit and explicit.is_dir()
    assert target_folder() == load_config().personal_cases
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder", encoding="utf-8")  # cannot be written even as root
    (tmp_path / "config" / "config.toml").write_text(f'team_cases = "{layers["team"]}"\npersonal_cases = "{blocked}"\n', encoding="utf-8")
    assert target_folder() == layers["team"]
    with pytest.raises(NotWritable):
        target_folder(blocked)  # an explicit folder is never silently replaced
    (tmp_path / "config" / "config.toml").write_text(f'team_cases = "{blocked}"\npersonal_cases = "{blocked}"\n', encoding="utf-8")
    with pytest.raises(NotWritable):
        target_folder()


def test_new_never_targets_the_builtin_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.toml").write_text(f'personal_cases = "{builtin_cases_dir()}"\n', encoding="utf-8")
    with pytest.raises(NotWritable):
        target_folder()
    with pytest.raises(NotWritable):
        target_folder(builtin_cases_dir() / "memory")
    (tmp_path / "config.toml").write_text(f'personal_cases = "{builtin_cases_dir()}"\nteam_cases = "{tmp_path / "team"}"\n', encoding="utf-8")
    assert target_folder() == tmp_path / "team"
