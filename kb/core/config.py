"""User configuration: `config_dir()/config.toml` (see docs/case-folders.md).

Keys (all optional):

    team_cases = "/shared/kb-cases"      # a folder the team shares (read, and written by `kb new` as a last resort)
    personal_cases = "~/kb-cases"        # your own cases; default: data_dir()/cases

Relative paths are relative to the config folder; `~` is expanded. A broken
or unreadable file never stops kb: the defaults are used and the problem is
reported in `Config.problems`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kb.core.paths import config_dir, data_dir

CONFIG_NAME = "config.toml"
KNOWN_KEYS = ("team_cases", "personal_cases")


@dataclass
class Config:
    path: Path
    team_cases: Path | None = None
    personal_cases: Path = field(default_factory=lambda: data_dir() / "cases")
    personal_is_default: bool = True
    problems: list[str] = field(default_factory=list)


def config_path() -> Path:
    return config_dir() / CONFIG_NAME


def _folder(value: object, key: str, base: Path, problems: list[str]) -> Path | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{key} must be a folder path (a non-empty string)")
        return None
    path = Path(value.strip()).expanduser()
    return path if path.is_absolute() else base / path


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    cfg = Config(path=path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return cfg
    except OSError as exc:
        cfg.problems.append(f"{path}: cannot read: {exc.strerror or exc}")
        return cfg
    import tomllib  # only when there is a file: most runs have none

    try:
        data = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        cfg.problems.append(f"{path}: bad TOML: {exc}")
        return cfg
    problems: list[str] = []
    for key in data:
        if key not in KNOWN_KEYS:
            problems.append(f"unknown key {key!r} (known: {', '.join(KNOWN_KEYS)})")
    if "team_cases" in data:
        cfg.team_cases = _folder(data["team_cases"], "team_cases", path.parent, problems)
    if "personal_cases" in data:
        personal = _folder(data["personal_cases"], "personal_cases", path.parent, problems)
        if personal is not None:
            cfg.personal_cases, cfg.personal_is_default = personal, False
    cfg.problems = [f"{path}: {p}" for p in problems]
    return cfg
