"""The installed verl's declared requirements against what the training environment has.

A pin conflict is the cause of many install reports (verl's vLLM/SGLang
extras against the engine installed, numpy<2 against numpy 2, tensordict
outside verl's range), and it can be read without running anything: the
target Python (one subprocess, importlib.metadata only, nothing imported)
reports the installed verl's `Requires-Dist` (extras included), the versions
of the packages they name, and its marker environment. kb then compares them
here, with `packaging`, and adds what verl's own files at that release
declare (kb/checks/data/verl_pins.json, made by scripts/verl_pins.py): e.g. a
requirements.txt pin that is not in the metadata. Dockerfile versions in that
file are shown as the stack verl's images used, never flagged.

Each conflict names the requirement, where it was read (the installed
metadata, or file:line@tag), and the kb entry that explains it.

Which extras count: pip does not record the extras a package was installed
with, so an extra's pins are *certain* only when the extra is evidently in use
(a distribution of the extra's name is installed, e.g. `vllm` for
`verl[vllm]`, or an extra in use pulls it in, `verl[verl-core]`); otherwise an
installed package outside an extra's pin is reported as *possible* ("applies
only if verl was installed with [X]").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kb.checks.needs import python_probe

DATA_FILE = Path(__file__).parent / "data" / "verl_pins.json"

# The entry that explains a conflict on this package; anything else goes to the general one.
PIN_ENTRIES = {
    "vllm": "vllm-verl-version-mismatch",
    "sglang": "sglang-version-mismatch",
    "tensordict": "tensordict-version-mismatch",
    "transformers": "transformers-version-mismatch",
    "numpy": "numpy2-abi-incompat",
    "torch": "vllm-sglang-torch-pin-conflict",
    "flash-attn": "flash-attn-undefined-symbol",
}
GENERAL_ENTRY = "verl-declared-requirement-conflict"
# An extra is in use when this distribution is installed (default: the extra's own name).
EXTRA_MARKER_DIST = {"npu": "torch-npu", "megatron": "megatron-core", "mcore": "mbridge", "trtllm": "tensorrt-llm"}
# requirements*.txt groups of the data file that users install from (the others are for tests and docs).
REQUIREMENT_FILE_GROUPS = {"requirements": "", "requirements:sglang": "sglang", "requirements:npu": "npu"}

# Run by the target Python. Standard library only; reads metadata, imports nothing.
_PROBE = r"""
import json, os, platform, re, sys
from importlib import metadata
names = set(sys.argv[1:])
out = {"verl": None, "versions": {}}
try:
    dist = metadata.distribution("verl")
    out["verl"] = {"version": dist.version, "requires": list(dist.requires or []),
                   "location": str(dist.locate_file(""))}
    for r in out["verl"]["requires"]:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r)
        if m:
            names.add(m.group(1))
except metadata.PackageNotFoundError:
    pass
except Exception as exc:
    out["error"] = "cannot read verl's metadata: %s: %s" % (type(exc).__name__, exc)
for name in sorted(names):
    version = None
    for cand in (name, name.replace("-", "_"), name.replace("_", "-"), name.lower()):
        try:
            version = metadata.version(cand)
            break
        except Exception:
            continue
    out["versions"][re.sub(r"[-_.]+", "-", name).lower()] = version
iver = sys.implementation.version
impl = "%d.%d.%d" % (iver.major, iver.minor, iver.micro)
if iver.releaselevel != "final":
    impl += iver.releaselevel[0] + str(iver.serial)
out["markers"] = {
    "implementation_name": sys.implementation.name, "implementation_version": impl,
    "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
    "platform_system": platform.system(), "platform_version": platform.version(),
    "python_full_version": platform.python_version(), "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}
print(json.dumps(out))
"""


def canonical(name: str) -> str:
    """PEP 503 name: `Flash_Attn` and `flash-attn` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether an installed `version` is inside `specifier` (PEP 440); None when either cannot be read.

    Pre-releases count as inside when the range admits them by number (what is
    installed is judged, not what pip would pick); a local label (`+cu128`) is
    ignored unless the specifier names one, as PEP 440 says.
    """
    try:
        spec = SpecifierSet(specifier)
        parsed = Version(version)
    except (InvalidSpecifier, InvalidVersion):
        return None
    return spec.contains(parsed, prereleases=True)


@dataclass(frozen=True)
class Pin:
    """One declared requirement, with where it was read and which extra (if any) it belongs to."""

    name: str  # canonical
    specifier: str  # "" when the requirement names no version
    requirement: str  # as written
    extra: str  # "" for a base requirement
    source: str  # "verl 0.9.0 metadata (Requires-Dist)" or "setup.py:55@v0.9.0"
    from_metadata: bool
    # a requirements file of one platform or engine (requirements-npu.txt): it is no extra pip knows,
    # so it counts only when that platform's package is installed, never as a "possible" conflict
    only_if_used: bool = False


@dataclass(frozen=True)
class Conflict:
    package: str
    installed: str | None  # None: not installed
    requirement: str  # "vllm>=0.18.0"
    extras: tuple[str, ...]  # () a base requirement; else the extras that declare it (those in use, when any is)
    kind: str  # "outside": installed outside the range; "missing": a base requirement not installed
    certain: bool  # False: an extra not evidently in use
    sources: tuple[str, ...]
    entry: str  # the kb case id that explains it
    tested: tuple[str, ...] = ()  # what verl's Dockerfiles of that release install, for the fix

    def describe(self, verl: str) -> str:
        where = f"verl[{','.join(self.extras)}]" if self.extras else "verl"
        if self.kind == "missing":
            what = f"{self.package} is not installed; {where} {verl} requires {self.requirement}"
        else:
            what = f"{self.package} {self.installed} is outside {where} {verl}'s {self.requirement}"
        if not self.certain:
            what += f" (applies only if verl was installed with [{'] or ['.join(self.extras)}])"
        return what

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "installed": self.installed, "requirement": self.requirement,
                "extras": list(self.extras), "kind": self.kind, "certain": self.certain,
                "sources": list(self.sources), "entry": self.entry, "tested": list(self.tested)}


@dataclass
class PinReport:
    verl: str | None = None  # installed verl version
    location: str | None = None
    release: str | None = None  # the data file's release it matched (tag), if any
    release_note: str = ""
    extras_in_use: list[str] = field(default_factory=list)
    checked: int = 0  # requirements compared
    conflicts: list[Conflict] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # requirements or versions that could not be compared
    error: str = ""  # why nothing could be checked

    def certain(self) -> list[Conflict]:
        return [c for c in self.conflicts if c.certain]

    def possible(self) -> list[Conflict]:
        return [c for c in self.conflicts if not c.certain]

    def to_dict(self) -> dict[str, Any]:
        return {"verl": self.verl, "location": self.location, "release": self.release, "release_note": self.release_note,
                "extras_in_use": self.extras_in_use, "checked": self.checked,
                "conflicts": [c.to_dict() for c in self.conflicts], "unreadable": self.unreadable,
                "error": self.error or None}


def pin_report_from_dict(d: dict[str, Any]) -> PinReport:
    """The inverse of `PinReport.to_dict` (kb env formats its JSON shape)."""
    conflicts = [Conflict(str(c["package"]), c.get("installed"), str(c["requirement"]), tuple(c.get("extras") or ()),
                          str(c["kind"]), bool(c["certain"]), tuple(c.get("sources") or ()), str(c["entry"]),
                          tuple(c.get("tested") or ())) for c in d.get("conflicts") or []]
    return PinReport(verl=d.get("verl"), location=d.get("location"), release=d.get("release"),
                     release_note=str(d.get("release_note") or ""), extras_in_use=list(d.get("extras_in_use") or []),
                     checked=int(d.get("checked") or 0), conflicts=conflicts, unreadable=list(d.get("unreadable") or []),
                     error=str(d.get("error") or ""))


@lru_cache(maxsize=4)
def load_data(path: Path = DATA_FILE) -> dict[str, Any]:
    """The releases' declared pins; an empty table (and the check runs on metadata alone) if the file is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("releases"), list) else {"releases": []}
    except (OSError, ValueError):
        return {"releases": []}


def match_release(version: str, data: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The data file's release for an installed verl version, and how it matched."""
    releases = [r for r in data.get("releases", []) if isinstance(r, dict)]
    for r in releases:
        if r.get("version") == version:
            return r, f"release {r.get('tag')}"
    for r in releases:
        if r.get("version_file") and r.get("version_file") == version:
            # v0.7.0 and v0.8.0 carry "0.7.0.dev"/"0.8.0.dev" in verl/version/version: a source install of
            # that tag, or of main between releases, which carries the same string.
            return r, (f"version file of tag {r.get('tag')} (a source install: that tag, or main before it, "
                       "which carries the same version string)")
    return None, f"verl {version} is not a release in kb's pins table; only its installed metadata is checked"


def _extras_of(marker: Marker | None, candidates: set[str], env: dict[str, str]) -> tuple[bool, set[str]]:
    """(applies without any extra, the extras under which it applies) for a requirement's marker."""
    if marker is None:
        return True, set()

    def ev(extra: str) -> bool:
        try:
            return bool(marker.evaluate({**env, "extra": extra}))
        except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
            return False

    if ev(""):
        return True, set()
    return False, {e for e in candidates if ev(e)}


def metadata_pins(requires: list[str], verl: str, env: dict[str, str], unreadable: list[str]) -> tuple[list[Pin], dict[str, set[str]]]:
    """The installed verl's Requires-Dist as pins, and for each extra the verl extras it pulls in (`verl[verl-core]`)."""
    candidates = {canonical(m) for r in requires for m in re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", r)}
    pins: list[Pin] = []
    pulls: dict[str, set[str]] = {}
    source = f"verl {verl} metadata (Requires-Dist)"
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            unreadable.append(f"{text} (not a valid requirement)")
            continue
        base, extras = _extras_of(req.marker, candidates, env)
        targets = [""] if base else sorted(extras)
        name = canonical(req.name)
        if name == "verl":  # verl[vllm] -> verl[verl-core]
            for extra in targets:
                pulls.setdefault(extra, set()).update(canonical(e) for e in req.extras)
            continue
        for extra in targets:
            pins.append(Pin(name, str(req.specifier), text, extra, source, True))
    return pins, pulls


def data_pins(release: dict[str, Any], env: dict[str, str], unreadable: list[str]) -> list[Pin]:
    """The data file's declared pins of one release that pip or the install docs act on."""
    pins: list[Pin] = []
    declared = [e for e in release.get("declared", []) if isinstance(e, dict)]
    # setuptools applies a pyproject.toml [project] table over setup.py: where a release has one
    # (v0.2), what setup.py passes (install_requires, extras) never reaches the installed metadata
    pyproject = any(str(e.get("group", "")).startswith("pyproject:") for e in declared)
    for entry in declared:
        group = str(entry.get("group", ""))
        conditional = False
        if pyproject and (group == "install_requires" or group.startswith("extra:")):
            continue
        if group in ("install_requires", "pyproject:dependencies"):
            extra = ""
        elif group.startswith(("extra:", "pyproject:extra:")):
            extra = canonical(group.rsplit(":", 1)[1])
        elif group in REQUIREMENT_FILE_GROUPS:
            extra = REQUIREMENT_FILE_GROUPS[group]
            conditional = extra != ""
        else:
            continue
        text = str(entry.get("requirement", ""))
        try:
            req = Requirement(text)
        except InvalidRequirement:
            unreadable.append(f"{text} ({entry.get('source')}: not a valid requirement)")
            continue
        if req.marker is not None and not _extras_of(req.marker, set(), env)[0]:
            continue  # a platform marker that does not hold here
        if not req.specifier or canonical(req.name) == "verl":
            continue
        pins.append(Pin(canonical(req.name), str(req.specifier), text, extra, str(entry.get("source", "")), False, conditional))
    return pins


def extras_in_use(extras: set[str], pulls: dict[str, set[str]], versions: dict[str, str | None]) -> set[str]:
    """Extras evidently installed: a distribution of the extra's name is there, or an extra in use pulls it in."""
    used = {e for e in extras if versions.get(canonical(EXTRA_MARKER_DIST.get(e, e)))}
    todo = list(used)
    while todo:
        for pulled in pulls.get(todo.pop(), set()):
            if pulled not in used:
                used.add(pulled)
                todo.append(pulled)
    return used


def tested_versions(release: dict[str, Any] | None, package: str) -> tuple[str, ...]:
    """What the release's stable images (docker/Dockerfile.stable.*, from v0.7.0) install; the other Dockerfiles
    in a tag include images of older releases, so they say nothing about this one."""
    if not release:
        return ()
    seen: list[str] = []
    for stack in release.get("tested_stacks", []):
        if not isinstance(stack, dict) or ".stable." not in str(stack.get("file", "")):
            continue
        for image in stack.get("from", []):
            if package in str(image).split("(")[0] and f"image {image}" not in seen:
                seen.append(f"image {image}")
        for p in stack.get("pins", []):
            if isinstance(p, dict) and canonical(str(p.get("name", ""))) == package:
                text = f"{p.get('requirement')} ({p.get('source')})"
                if text not in seen:
                    seen.append(text)
    return tuple(seen[:3])


def compare(probe: dict[str, Any], data: dict[str, Any] | None = None) -> PinReport:
    """The conflicts between a probe's answer (see _PROBE) and what verl declares."""
    data = load_data() if data is None else data
    report = PinReport()
    verl_info = probe.get("verl")
    if probe.get("error"):
        report.error = str(probe["error"])
        return report
    if not isinstance(verl_info, dict):
        report.error = "verl is not installed in the target environment"
        return report
    verl = str(verl_info.get("version"))
    report.verl, report.location = verl, verl_info.get("location")
    env = {k: str(v) for k, v in (probe.get("markers") or {}).items()}
    versions: dict[str, str | None] = {canonical(k): v for k, v in (probe.get("versions") or {}).items()}
    pins, pulls = metadata_pins([str(r) for r in verl_info.get("requires") or []], verl, env, report.unreadable)
    release, report.release_note = match_release(verl, data)
    if release is not None:
        report.release = str(release.get("tag"))
        pins += data_pins(release, env, report.unreadable)
    used = extras_in_use({p.extra for p in pins if p.extra}, pulls, versions)
    report.extras_in_use = sorted(used)
    pins = [p for p in pins if not p.only_if_used or p.extra in used]
    # One conflict per (package, range), with every extra and every place that declares it.
    merged: dict[tuple[str, str], tuple[Pin, list[str], list[str]]] = {}
    for p in pins:
        key = (p.name, str(SpecifierSet(p.specifier)) if p.specifier else "")
        pin, sources, extras = merged.setdefault(key, (p, [], []))
        if p.source not in sources:
            sources.append(p.source)
        if p.extra not in extras:
            extras.append(p.extra)
        if p.from_metadata and not pin.from_metadata:
            merged[key] = (p, sources, extras)
    for (name, spec), (pin, sources, extras) in merged.items():
        installed = versions.get(name)
        applying = [e for e in extras if e == "" or e in used]
        certain = bool(applying)
        shown = () if "" in extras else tuple(sorted(applying if certain else extras))
        if installed is None:
            if pin.from_metadata and "" in extras:
                report.checked += 1
                report.conflicts.append(Conflict(name, None, pin.requirement, (), "missing", True, tuple(sources), GENERAL_ENTRY))
            continue
        if not spec:
            continue
        report.checked += 1
        ok = satisfies(installed, spec)
        if ok is None:
            report.unreadable.append(f"{name} {installed} against {spec} (a version that PEP 440 cannot read)")
        elif not ok:
            report.conflicts.append(Conflict(name, installed, f"{name}{spec}", shown, "outside", certain,
                                             tuple(sources), PIN_ENTRIES.get(name, GENERAL_ENTRY), tested_versions(release, name)))
    report.conflicts.sort(key=lambda c: (not c.certain, c.kind != "outside", c.package))
    return report


def probe_names(data: dict[str, Any]) -> list[str]:
    """Every package the data file pins, so that one probe answers for whichever release is installed."""
    names = {canonical(str(p.get("name", ""))) for r in data.get("releases", []) if isinstance(r, dict)
             for p in r.get("declared", []) if isinstance(p, dict) and p.get("name")}
    names |= {canonical(n) for n in EXTRA_MARKER_DIST.values()}  # what tells an extra is in use
    return sorted(n for n in names if n and n != "verl")


def check_pins(python: str) -> PinReport:
    """Ask the target Python what verl declares and what is installed; compare. Read-only, one subprocess."""
    data = load_data()
    res = python_probe(python, _PROBE, *probe_names(data))
    if not res.ok:
        return PinReport(error=f"could not ask {python}: {res.error}")
    try:
        probe = json.loads(res.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return PinReport(error=f"unexpected output from {python}")
    if not isinstance(probe, dict):
        return PinReport(error=f"unexpected output from {python}")
    return compare(probe, data)


def conflict_summary(report: PinReport) -> str | None:
    """One comparable line for `kb doctor --ray`'s node facts: the certain conflicts, or None without verl."""
    if report.error:
        return None if report.verl is None and "not installed" in report.error else f"could not check ({report.error})"
    certain = report.certain()
    if not certain:
        return "no conflicts"
    return "; ".join(f"{c.package} {c.installed or 'missing'} vs {c.requirement} ({c.entry})" for c in certain)


def format_pins(report: PinReport, indent: str = "  ") -> list[str]:
    """The text lines of `kb env`'s and `kb doctor`'s pin section."""
    if report.error:
        return [f"{indent}not checked: {report.error}"]
    head = f"{indent}verl {report.verl} ({report.location}); pins from its metadata"
    head += f" and {report.release}" if report.release else f"; {report.release_note}"
    lines = [head]
    if report.extras_in_use:
        lines.append(f"{indent}extras in use (their package is installed): {', '.join(report.extras_in_use)}")
    certain, possible = report.certain(), report.possible()
    if not certain and not possible:
        lines.append(f"{indent}no conflicts ({report.checked} requirements compared)")
    for c in certain + possible:
        mark = "[!]" if c.certain else "[?]"
        lines.append(f"{indent}{mark} {c.describe(report.verl or '?')}")
        lines.append(f"{indent}    declared in: {'; '.join(c.sources)}")
        if c.tested:
            lines.append(f"{indent}    verl's images install: {'; '.join(c.tested)}")
        lines.append(f"{indent}    see: kb show {c.entry}")
    for u in report.unreadable:
        lines.append(f"{indent}not compared: {u}")
    return lines
