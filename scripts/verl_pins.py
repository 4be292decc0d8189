#!/usr/bin/env python3
"""Regenerate kb/checks/data/verl_pins.json: what each verl release declares, read from its own files.

Reads a verl git checkout (a bare mirror is enough: everything goes through
`git show TAG:FILE`) at every release tag from v0.2 on, and optionally a verl
wheel (its METADATA Requires-Dist) for releases newer than the checkout's tags:

    python scripts/verl_pins.py --repo /work/.mirror/verl-project+verl/repo \
        --wheel /tmp/pipdl/verl-0.9.1-py3-none-any.whl --out kb/checks/data/verl_pins.json

Two kinds of facts, kept apart:
- `declared`: requirements that pip acts on or that the release tells users to
  install: setup.py (`install_requires` and every `extras_require` group, list
  literals resolved by name), pyproject.toml `[project]` dependencies when they
  are static, requirements*.txt, a wheel's Requires-Dist. Each with file, line
  and tag, so every pin in kb names where it was read.
- `tested_stacks`: the versions verl's Dockerfiles install. They document a
  stack verl's CI or images used; they are NOT requirements (verl's own images
  sometimes run outside the pins), so the environment check never flags them.

Only the standard library; no verl code is imported or executed (setup.py is
parsed with `ast`). verl's sources are not copied into kb: only the pins.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import tomllib

FIRST_TAG = (0, 2)
# The packages whose versions users collide on; Dockerfiles are scanned for these only.
WATCHED = ("torch", "vllm", "sglang", "transformers", "flash-attn", "flash_attn", "ray", "megatron-core", "numpy",
           "tensordict", "peft", "accelerate", "pyarrow", "deepspeed", "xformers", "flashinfer-python", "triton",
           "megatron-bridge", "mbridge", "transformer-engine", "trl", "liger-kernel", "torchvision")
_DOCKER_PIN = re.compile(
    r"(?<![\w.-])(" + "|".join(re.escape(p) for p in sorted(WATCHED, key=len, reverse=True)) +
    r")(\[[\w,.-]*\])?\s*(==|>=|<=|~=|!=|<|>)\s*([0-9][\w.+*-]*)", re.IGNORECASE)
_FLASH_WHEEL = re.compile(r"flash_attn-([0-9][\w.]*?)\+")
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def release_tags(repo: Path) -> list[str]:
    tags = []
    for tag in git(repo, "tag").split():
        nums = re.findall(r"\d+", tag)
        if tag.startswith("v") and len(nums) >= 2 and (int(nums[0]), int(nums[1])) >= FIRST_TAG:
            tags.append(tag)

    def key(t: str) -> tuple[int, ...]:
        # v0.3.0.rc0 < v0.3.0.post0 < v0.3.0.post1
        parts = re.findall(r"\d+|rc|post", t)
        return tuple({"rc": -2, "post": -1}.get(p, 0) if not p.isdigit() else int(p) for p in parts)

    return sorted(tags, key=key)


def show(repo: Path, tag: str, path: str) -> str | None:
    try:
        return git(repo, "show", f"{tag}:{path}")
    except subprocess.CalledProcessError:
        return None


def req_name(text: str) -> str:
    m = _REQ_NAME.match(text)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def pin(requirement: str, group: str, file: str, line: int, tag: str) -> dict[str, Any]:
    return {"name": req_name(requirement), "requirement": requirement.strip(), "group": group,
            "source": f"{file}:{line}@{tag}"}


def from_setup_py(text: str, tag: str) -> tuple[list[dict[str, Any]], bool]:
    """Pins of setup.py, and whether install_requires is read from requirements.txt."""
    tree = ast.parse(text)
    lists: dict[str, list[tuple[str, int]]] = {}
    extras: dict[str, ast.expr] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        if isinstance(node.value, ast.List):
            lists[name] = [(e.value, e.lineno) for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        elif isinstance(node.value, ast.Dict) and name == "extras_require":
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    extras[k.value] = v
    pins: list[dict[str, Any]] = []
    for req, line in lists.get("install_requires", []):
        pins.append(pin(req, "install_requires", "setup.py", line, tag))
    for extra, value in extras.items():
        items: list[tuple[str, int]] = []
        if isinstance(value, ast.Name):
            items = lists.get(value.id, [])
        elif isinstance(value, ast.List):
            items = [(e.value, e.lineno) for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        for req, line in items:
            pins.append(pin(req, f"extra:{extra}", "setup.py", line, tag))
    reads_requirements = "install_requires" not in lists and "requirements.txt" in text
    return pins, reads_requirements


def from_requirements(text: str, file: str, group: str, tag: str) -> list[dict[str, Any]]:
    pins = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        pins.append(pin(line, group, file, n, tag))
    return pins


def from_pyproject(text: str, tag: str) -> list[dict[str, Any]]:
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return []
    lines = text.splitlines()

    def line_of(req: str) -> int:
        for n, ln in enumerate(lines, 1):
            if f'"{req}"' in ln or f"'{req}'" in ln:
                return n
        return 0

    pins = [pin(r, "pyproject:dependencies", "pyproject.toml", line_of(r), tag) for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        pins += [pin(r, f"pyproject:extra:{extra}", "pyproject.toml", line_of(r), tag) for r in reqs]
    return pins


def requirements_group(path: str) -> str:
    """How a requirements file is used: the plain one by everyone, the others by one backend or by tests."""
    base = path.rsplit("/", 1)[-1]
    if base == "requirements.txt":
        return "requirements"
    if "sglang" in base:
        return "requirements:sglang"
    if "npu" in base:
        return "requirements:npu"
    if "cuda" in base:
        return "requirements:cuda"
    return "requirements:other"  # test, docs


def from_dockerfile(text: str, file: str, tag: str) -> dict[str, Any] | None:
    images: list[str] = []
    pins: list[dict[str, Any]] = []
    args: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        m = re.match(r"ARG\s+(\w+)=(\S+)", stripped)
        if m:
            args[m.group(1)] = m.group(2).strip("\"'")
        # `pip install vllm==${VLLM_VERSION}`: the version is an ARG default further up
        line = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda v: args.get(v.group(1) or v.group(2), v.group(0)), raw)
        stripped = line.strip()
        if stripped.upper().startswith("FROM ") and re.match(r"FROM\s+\S*[/:]", stripped, re.IGNORECASE):
            images.append(f"{stripped.split()[1]} ({file}:{n}@{tag})")
        for m in _DOCKER_PIN.finditer(line):
            pins.append({"name": req_name(m.group(1)), "requirement": f"{m.group(1)}{m.group(3)}{m.group(4)}",
                         "source": f"{file}:{n}@{tag}"})
        for m in _FLASH_WHEEL.finditer(line):
            pins.append({"name": "flash-attn", "requirement": f"flash-attn=={m.group(1)}", "source": f"{file}:{n}@{tag}"})
    if not pins and not images:
        return None
    return {"file": file, "tag": tag, "from": images, "pins": pins}


def read_tag(repo: Path, tag: str) -> dict[str, Any]:
    files = git(repo, "ls-tree", "-r", "--name-only", tag).splitlines()
    declared: list[dict[str, Any]] = []
    setup = show(repo, tag, "setup.py")
    reads_requirements = False
    if setup is not None:
        setup_pins, reads_requirements = from_setup_py(setup, tag)
        declared += setup_pins
    pyproject = show(repo, tag, "pyproject.toml")
    if pyproject is not None:
        declared += from_pyproject(pyproject, tag)
    for path in files:
        base = path.rsplit("/", 1)[-1]
        if "/" not in path and re.fullmatch(r"requirements[\w.-]*\.txt", base):
            text = show(repo, tag, path) or ""
            group = requirements_group(path)
            if reads_requirements and group == "requirements":
                group = "install_requires"  # setup.py reads it as install_requires at this tag
            declared += from_requirements(text, path, group, tag)
    stacks = []
    for path in files:
        if re.search(r"(^|/)Dockerfile[^/]*$", path):
            found = from_dockerfile(show(repo, tag, path) or "", path, tag)
            if found:
                stacks.append(found)
    version_file = (show(repo, tag, "verl/version/version") or "").strip()
    return {"tag": tag, "version": tag.lstrip("v"), "version_file": version_file,
            "declared": declared, "tested_stacks": stacks}


def read_wheel(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta_name).decode("utf-8")
    msg = email.parser.Parser().parsestr(text, headersonly=True)
    version = str(msg["Version"])
    where = f"wheel {path.name}"
    lines = text.splitlines()
    declared = []
    for req in msg.get_all("Requires-Dist") or []:
        line = next((n for n, ln in enumerate(lines, 1) if ln == f"Requires-Dist: {req}"), 0)
        body, _, marker = req.partition(";")
        m = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        group = f"extra:{m.group(1)}" if m else "install_requires"
        other = re.sub(r"\s*(and\s+)?extra\s*==\s*['\"][^'\"]+['\"]", "", marker).strip()
        requirement = body.strip() + (f"; {other}" if other else "")
        entry = pin(requirement, group, meta_name, line, f"wheel {version}")
        entry["source"] = f"{meta_name}:{line}@{where}"
        declared.append(entry)
    return {"tag": f"wheel:{path.name}", "version": version, "version_file": version, "declared": declared, "tested_stacks": []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True, help="verl git checkout or bare mirror with its release tags")
    ap.add_argument("--wheel", type=Path, action="append", default=[], help="a verl wheel for a release not tagged in --repo")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "kb" / "checks" / "data" / "verl_pins.json")
    args = ap.parse_args(argv)
    releases = [read_tag(args.repo, t) for t in release_tags(args.repo)]
    releases += [read_wheel(w) for w in args.wheel]
    data = {
        "about": "Requirements each verl release declares (setup.py, pyproject.toml, requirements*.txt, wheel METADATA), "
                 "and the versions its Dockerfiles install (tested_stacks: documentation, not requirements). "
                 "Generated by scripts/verl_pins.py; do not edit by hand.",
        "generated_from": {"repo": "verl-project/verl release tags", "wheels": [w.name for w in args.wheel]},
        "releases": releases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # One pin per line: a regenerated file diffs line by line.
    text = json.dumps(data, indent=1, ensure_ascii=False)
    text = re.sub(r"\{\n\s+(\"name\"[^{}]*?)\n\s+\}", lambda m: "{" + re.sub(r",\n\s+", ", ", m.group(1)) + "}", text)
    args.out.write_text(text + "\n", encoding="utf-8")
    n = sum(len(r["declared"]) for r in releases)
    print(f"{len(releases)} releases, {n} declared requirements -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
