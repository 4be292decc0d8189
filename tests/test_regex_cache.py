"""kb.core.regex_cache: the patterns it makes, from the cache file or not, are the ones re.compile makes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every module whose fixed patterns go through the cache; each of their patterns is compared with re.compile's
# (Pattern equality compares the flags and the engine code, not just the source).
PROBE = r"""
import importlib, json, re, sys
from kb.core import regex_cache
mods = sys.argv[1].split(",")
tricky = [(r"(?P<name>[\w.-]+)==(\d+(?:\.\d+)*)", re.I), (r"(?<![\w.])foo(?=\b|$)", re.M), (r"^\s*[一-鿿]+\s*$", 0),
          (r"(?x) a b (?i:c) \# d", 0), (r"(a)|(b)(?P<c>c)?", re.S | re.M)]
same = [regex_cache.compile(p, f) == re.compile(p, f) for p, f in tricky]
groups = [regex_cache.compile(p, f).groupindex == re.compile(p, f).groupindex for p, f in tricky]
found = 0
bad = []
def check(value):
    global found
    if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
        found += 1
        if value != re.compile(value.pattern, value.flags):
            bad.append(value.pattern[:60])
    elif isinstance(value, (list, tuple)):
        for v in value:
            check(v)
for name in mods:
    for value in vars(importlib.import_module(name)).values():
        check(value)
print(json.dumps({"same": all(same), "groups": all(groups), "found": found, "bad": bad,
                  "cached": len(regex_cache._load())}))
"""

MODULES = ["kb.text.stack", "kb.search.versions", "kb.logs.reduce", "kb.text.signals", "kb.text.tokenize", "kb.logs.stage",
           "kb.logs.death", "kb.text.variable_tokens", "kb.core.safe_text", "kb.index.documents", "kb.cases.casefile",
           "kb.search.background", "kb.logs.ranks", "kb.search.near_miss", "kb.text.user_words", "kb.cases.quality",
           "kb.cases.params", "kb.logs.logsearch"]


def _probe(cache: Path) -> dict:
    env = {**os.environ, "KB_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE, ",".join(MODULES)], env=env, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_patterns_equal_re_compile_without_and_with_the_cache_file(tmp_path: Path) -> None:
    first = _probe(tmp_path)  # compiles everything and writes the file at exit
    assert first["same"] and first["groups"] and first["bad"] == []
    assert first["found"] > 150  # the stack markers, version and log-line patterns are all there
    files = list(tmp_path.glob("regex-*.marshal"))
    assert len(files) == 1
    second = _probe(tmp_path)  # every pattern now comes from the file
    assert second == first
    assert second["cached"] >= first["found"] - 10  # (a few modules share a pattern)


def test_a_damaged_cache_file_is_ignored_and_rewritten(tmp_path: Path) -> None:
    _probe(tmp_path)
    (path,) = tmp_path.glob("regex-*.marshal")
    good = path.read_bytes()
    damaged = good[:100] + b"\x00garbage" + good[109:]  # same size, wrong checksum
    path.write_bytes(damaged)
    again = _probe(tmp_path)
    assert again["same"] and again["bad"] == [] and again["found"] > 150
    rewritten = path.read_bytes()  # made again from the patterns themselves
    assert rewritten != damaged and len(rewritten) == len(good)
