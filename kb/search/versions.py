"""Versions: which package versions a paste shows, and which versions an entry's facts hold for.

A paste names versions in pins (`vllm==0.8.5`), prose ("verl 0.7.1", "on vLLM v0.9.2"),
`pip list` / `pip freeze` / `pip show` lines, start-up banners (`vLLM version 0.8.5`,
`INFO ... verl version: 0.7.1`) and the `verl Info` block of verl's `scripts/diagnose.py`. Install paths (`python3.10/site-packages/vllm/...`) carry no
version and are not read. An entry's `versions` front matter is free text written tag by tag
("verl v0.4.1-v0.7.1 with trl >= 0.29; fixed in verl v0.8.0"); each package mention followed by
a range is parsed into typed bounds, and what cannot be parsed is ignored (no range: no opinion).

`judge` compares the two: an entry whose range excludes the pasted version of the same package
is "excluded" (ranked down, and says why); one whose range includes it is "included" (gains
slightly). The weights are learned with the rest of the ranking (kb.search.rerank).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Version = tuple[int, ...]

# Package names as people and banners write them -> one canonical name.
PACKAGES: dict[str, str] = {
    "verl": "verl", "vllm": "vllm", "sglang": "sglang", "transformers": "transformers",
    "torch": "torch", "pytorch": "torch", "ray": "ray", "trl": "trl", "megatron-core": "megatron-core",
    "megatron_core": "megatron-core", "mcore": "megatron-core", "flash-attn": "flash-attn", "flash_attn": "flash-attn",
    "tensordict": "tensordict", "mbridge": "mbridge", "deepspeed": "deepspeed", "peft": "peft",
    "numpy": "numpy", "openrlhf": "openrlhf", "triton": "triton", "accelerate": "accelerate",
}
# The newest verl tag case writers read (docs/case-format.md: ranges are read up to it). A range whose
# upper end is this tag or later says "still there", not "gone after it".
VERL_NEWEST_READ: Version = (0, 9, 0)

_NAME = "|".join(sorted((re.escape(k) for k in PACKAGES), key=len, reverse=True))
_VER = r"v?(\d+\.\d+(?:\.\d+)?)(?:\.?(?:post|rc|dev|a|b)\d*)?(?:\+[\w.]+)?"
_VER_RE = re.compile(_VER)
# pins and prose: vllm==0.8.5, vllm 0.8.5, vLLM v0.9.2, vllm: 0.8.5, "vllm version 0.8.5", "verl version: 0.7.1"
_PASTE_RE = re.compile(
    rf"(?<![\w./-])({_NAME})(?:\s*(?:==|===|~=|@)\s*|\s*[:=]?\s*(?:version\s*[:=]?\s*)?|\s+)" + _VER + r"(?![\w.])",
    re.IGNORECASE,
)
# `pip show`: "Name: vllm" then "Version: 0.8.5"
_PIP_SHOW_RE = re.compile(rf"^Name:\s*({_NAME})\s*$\s*^Version:\s*{_VER}", re.IGNORECASE | re.MULTILINE)


# verl's scripts/diagnose.py: "----------verl Info-----------" then "Version      : 0.7.0.dev"
_DIAGNOSE_VERL_RE = re.compile(rf"^\s*-{{3,}}\s*(verl) Info\s*-{{3,}}\s*$\s*^\s*Version\s*:\s*{_VER}", re.IGNORECASE | re.MULTILINE)


PASTE_WHERE = "this paste is from"
INSTALLED_WHERE = "the installed environment has"


def installed_versions(packages: dict[str, str | None]) -> dict[str, Version]:
    """An environment report's package versions (kb.checks.envreport: name -> version string or None) as the
    canonical package names and typed versions version-aware ranking reads; unknown names and unparsable or
    missing versions are left out."""
    out: dict[str, Version] = {}
    for name, text in packages.items():
        canonical = PACKAGES.get(name.lower())
        v = parse_version(text) if canonical and isinstance(text, str) else None
        if canonical and v is not None:
            out.setdefault(canonical, v)
    return out


def parse_version(text: str) -> Version | None:
    m = _VER_RE.fullmatch(text.strip()) or _VER_RE.match(text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def show(v: Version) -> str:
    return ".".join(str(x) for x in v)


def paste_versions(text: str) -> dict[str, Version]:
    """Package -> the version the paste shows (the first one named; a paste rarely names two)."""
    found: dict[str, Version] = {}
    head = text[:200_000] + ("\n" + text[-200_000:] if len(text) > 400_000 else "")  # bounded cost on huge pastes
    for m in list(_DIAGNOSE_VERL_RE.finditer(head)) + list(_PIP_SHOW_RE.finditer(head)) + list(_PASTE_RE.finditer(head)):
        name = PACKAGES[m.group(1).lower()]
        v = tuple(int(x) for x in m.group(2).split("."))
        if name == "torch" and v[0] > 3:  # "torch 12.1" is a CUDA version in prose, not torch
            continue
        found.setdefault(name, v)
    return found


@dataclass(frozen=True)
class Range:
    """One package's versions an entry holds for; a missing bound is open."""

    package: str
    low: Version | None = None  # inclusive
    high: Version | None = None
    high_inclusive: bool = True
    fixed_in: bool = False  # the upper bound is stated as a fix ("fixed in", "gone from", "before")

    def contains(self, v: Version) -> bool:
        n = max(len(v), 3)

        def pad(x: Version) -> Version:
            return tuple(list(x) + [0] * (n - len(x)))

        if self.low is not None and pad(v) < pad(self.low):
            return False
        if self.high is not None:
            # a bound written "0.11.x" or "0.8" holds for every patch release of it
            hi = self.high
            cut = pad(v)[: len(hi)] if len(hi) < 3 and self.high_inclusive else pad(v)
            if (cut > pad(hi)[: len(cut)]) if self.high_inclusive else (pad(v) >= pad(hi)):
                return False
        return True

    def why_not(self, v: Version, where: str = PASTE_WHERE) -> str:
        """The sentence a reader sees when the pasted (or installed) version is outside the range."""
        if self.low is not None and v < self.low:
            return f"needs {self.package} >= {show(self.low)}; {where} {self.package} {show(v)}"
        if self.high is not None and self.fixed_in:
            return f"fixed in {self.package} {show(self.high)}; {where} {self.package} {show(v)}"
        bound = show(self.high) if self.high is not None else "?"
        return f"holds up to {self.package} {bound}; {where} {self.package} {show(v)}"


_RANGE_FORMS: list[tuple[re.Pattern[str], str]] = [
    # "verl v0.4.1-v0.7.1", "vLLM 0.11.x-0.12.0", "verl v0.4.1 - v0.9.0", "verl v0.7.0 to v0.8.0"
    (re.compile(rf"^\s*{_VER}(?:\.x)?\s*(?:-|–|to|through)\s*{_VER}(?:\.x)?"), "between"),
    (re.compile(rf"^\s*(?:<=|≤|=<|up to)\s*{_VER}"), "le"),
    (re.compile(rf"^\s*(?:<|before|older than)\s*{_VER}"), "lt"),
    (re.compile(rf"^\s*(?:>=|≥|=>|from)\s*{_VER}"), "ge"),
    (re.compile(rf"^\s*(?:>|after|newer than)\s*{_VER}"), "gt"),
    (re.compile(rf"^\s*{_VER}\s*(?:or|and)\s*(?:newer|later|above)"), "ge"),
    (re.compile(rf"^\s*{_VER}\s*(?:or|and)\s*(?:older|earlier|below)"), "le"),
    (re.compile(rf"^\s*{_VER}\+"), "ge"),
    # "verl v0.7.0 (the new engine only)": where the fact was first read; for verl only (another
    # package's lone version is usually the reporter's install, not a range); not "v0.7.0 -> v0.8.0"
    (re.compile(rf"^\s*{_VER}(?![\w.+-])(?!\s*(?:->|→))"), "single"),
]
_MENTION_RE = re.compile(rf"(?<![\w-])({_NAME})(?![\w-])", re.IGNORECASE)
# "fixed in verl v0.8.0", "gone from 0.9.1", and the wheel forms "fixed in the 0.9.1 wheel", "fixed in the verl 0.9.1 wheel"
_FIXED_RE = re.compile(rf"(?:fixed|gone|removed)\s+(?:in|from|since)\s+(?:the\s+)?(?:({_NAME})\s+)?{_VER}", re.IGNORECASE)


def _v(s: str) -> Version:
    return tuple(int(x) for x in s.split("."))


def entry_ranges(text: str) -> dict[str, Range]:
    """Package -> the range an entry's `versions` text states for it (first statement per package).

    Unparseable text gives no range. A range's upper end at or past the newest verl tag read is
    open (the fact still held there); "fixed in X" and "before X" close it.
    """
    out: dict[str, Range] = {}
    if not text or len(text) > 2000:
        return out
    first: str | None = None
    seen: set[str] = set()
    stated_high: dict[str, Version] = {}  # the upper end a "A-B" range states, before it is opened
    for m in _MENTION_RE.finditer(text):
        name = PACKAGES[m.group(1).lower()]
        first = first or name
        if name in seen:
            continue  # only the first statement about a package is its range ("0.7+ avoids it" later is an aside)
        seen.add(name)
        rest = text[m.end(): m.end() + 60]
        for rx, form in _RANGE_FORMS:
            r = rx.match(rest)
            if not r:
                continue
            a = _v(r.group(1))
            if form == "between":
                b = _v(r.group(2))
                stated_high[name] = b
                # the upper end of a range is the last release read with the fact; past it only verl's
                # tags are known to have been read (other packages' newest read release is not recorded)
                closed = name == "verl" and b < VERL_NEWEST_READ[: len(b)]
                out[name] = Range(name, a, b if closed else None, True)
            elif form == "single":
                if name != "verl":
                    continue
                # a lower bound only: entries that name one tag often add later ones in prose ("v0.8.0
                # still fails when ..."), so the end stays open unless a "fixed in" closes it
                out[name] = Range(name, a, None, True)
            elif form in ("le", "lt"):
                out[name] = Range(name, None, a, form == "le", fixed_in=form == "lt")
            else:
                out[name] = Range(name, a if form == "ge" else a + (1,), None)
            break
    for m in _FIXED_RE.finditer(text):
        named = PACKAGES[m.group(1).lower()] if m.group(1) else first
        if named is None:
            continue
        name = named
        fix = _v(m.group(2))
        old = out.get(name)
        low = old.low if old is not None else None
        if low is not None and fix <= low:
            continue  # "fixed in" an earlier line than the range start: about another package's code
        if name in stated_high and fix <= stated_high[name]:
            continue  # the range says the fact held through a later release: this fix is about one cause of it
        out[name] = Range(name, low, fix, False, fixed_in=True)
    return out


Verdict = Literal["excluded", "included", "unknown"]


@dataclass(frozen=True)
class VersionJudgement:
    verdict: Verdict
    package: str = ""
    pasted: Version = ()
    text: str = ""  # the sentence a reader sees
    fixed: bool = False  # excluded because the paste's version is at or past the release that fixed it
    installed: bool = False  # the version is the installed environment's (kb search --installed), not the paste's


def judge(pasted: dict[str, Version], ranges: dict[str, Range], installed: frozenset[str] = frozenset()) -> VersionJudgement:
    """Whether the paste's versions fall in an entry's ranges: one excluded package decides. `installed`: the
    packages whose version is the installed environment's, because the paste names none (the reader is told)."""
    inside: list[str] = []
    for name, v in pasted.items():
        r = ranges.get(name)
        if r is None:
            continue
        if not r.contains(v):
            fixed = r.fixed_in and r.high is not None and not (r.low is not None and v < r.low)
            where = INSTALLED_WHERE if name in installed else PASTE_WHERE
            return VersionJudgement("excluded", name, v, r.why_not(v, where), fixed, name in installed)
        inside.append(name)
    if inside:
        name = inside[0]
        where = INSTALLED_WHERE if name in installed else PASTE_WHERE
        return VersionJudgement("included", name, pasted[name], f"{where} {name} {show(pasted[name])}, inside the entry's range",
                                installed=name in installed)
    return VersionJudgement("unknown")
