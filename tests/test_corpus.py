"""The built-in corpus: every catalog id exists, each case is complete, sourced and honest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases, validate

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CATALOG = SHARED / "case-catalog.md"
CJK = re.compile(r"[\u4e00-\u9fff]")
INVENTED = [
    "verl check_dataflow",
    "verl analyze_placement",
    "verl.launcher",
    "DataFlowConfig",
    "ShardableModule",
    "load_reward_model",
    "nvidia-smi -g 0 -p 2",
]


@pytest.fixture(scope="module")
def cases():
    caseset = load_cases()
    assert not caseset.errors, [str(p) for p in caseset.errors]
    return caseset.cases


def catalog_ids() -> set[str]:
    """Ids from the catalog's index tables (the '| `id` | category | origin | ...' rows)."""
    ids: set[str] = set()
    in_index = False
    for line in CATALOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            in_index = "index" in line.lower()
            continue
        m = re.match(r"^\| `([a-z0-9-]+)` \| [a-z-]+ \|", line)
        if in_index and m:
            ids.add(m.group(1))
    return ids


@pytest.mark.skipif(not CATALOG.is_file(), reason="shared/case-catalog.md is not beside the checkout")
def test_every_catalog_id_has_a_case(cases) -> None:
    wanted = catalog_ids()
    assert len(wanted) >= 100
    missing = sorted(wanted - {c.id for c in cases})
    assert missing == []


def test_kb_check_passes_without_warnings_on_builtin_cases(cases) -> None:
    problems = [str(p) for p in validate(load_cases())]
    assert problems == []


def test_each_case_is_complete(cases) -> None:
    for c in cases:
        assert c.sources, c.id
        assert c.path.parent.name == c.category, f"{c.id}: file not under cases/{c.category}/"
        assert any(CJK.search(s) for s in c.symptoms), f"{c.id}: no Chinese symptom"
        if c.kind == "light":
            # a light entry: one root cause with its verbatim signature, cause, fix and versions
            assert c.signatures or len(c.symptoms) >= 3, f"{c.id}: a light entry needs its signature (or symptoms, when nothing is printed)"
            assert c.versions, f"{c.id}: a light entry says which versions it applies to"
            assert c.section("Causes") and c.section("Fix"), c.id
            continue
        assert c.signatures or len(c.symptoms) >= (4 if c.status == "reviewed" else 3), f"{c.id}: no signatures needs rich symptoms"
        assert len(c.symptoms) >= 3, c.id
        assert c.checks, f"{c.id}: no check"
        assert c.status in ("reviewed", "draft"), c.id


def test_family_entries_tell_their_causes_apart(cases) -> None:
    """A family answer says "cause not established: its checks or Verify steps tell the causes apart": every
    family entry (tagged, or by structure) must have one or the other, or the answer would promise nothing."""
    bare = [c.id for c in cases if c.is_family and not c.checks and not c.section("Verify").strip()]
    assert not bare, f"family entries with neither a check nor a Verify section: {bare}"


def test_reviewed_cases_say_when(cases) -> None:
    for c in cases:
        assert c.status in ("reviewed", "draft"), c.id
        if c.status == "reviewed":
            assert c.reviewed, f"{c.id}: reviewed needs a date"


def _code_only(code: str) -> str:
    """Code without comments and string literals (advice printed to the user is fine)."""
    code = re.sub(r"(?m)^\s*#.*$|\s#\s.*$", "", code)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'', '""', code)


def test_checks_are_bounded_and_never_use_sudo_or_install(cases) -> None:
    forbidden = re.compile(r"(^|[\s;&|(`])(sudo|pip3? install|apt(-get)? install|conda install|reboot|shutdown|systemctl (restart|stop)|kill -9|pkill|rm -rf /)\b", re.M)
    for c in cases:
        for check in c.checks:
            assert check.timeout <= 600 and (not check.doctor or check.timeout <= 60), f"{c.id}:{check.name}"
            assert not forbidden.search(_code_only(check.code)), f"{c.id}:{check.name} changes the system"
            if check.doctor:
                assert all(c.params[p].default is not None for p in c.params_of(check))


def test_gpu_checks_say_so(cases) -> None:
    gpu_use = re.compile(r"torch\.cuda\.(?!is_available)|nvidia-smi")
    for c in cases:
        for check in c.checks:
            if gpu_use.search(check.code):
                handles_absence = ("command -v", "which nvidia-smi", "is_available", "2>/dev/null", "OSError", "FileNotFoundError", "shutil.which")
                guarded = any(n in check.needs for n in ("gpu", "multi-gpu", "cmd:nvidia-smi", "py:torch")) or any(h in check.code for h in handles_absence)
                assert guarded, f"{c.id}:{check.name} uses the GPU without needs=gpu"


def test_params_have_descriptions(cases) -> None:
    for c in cases:
        for p in c.params.values():
            assert len(p.description) > 5, f"{c.id}: param {p.name}"


def test_invented_names_only_under_advice_that_does_not_work(cases) -> None:
    for c in cases:
        text = c.path.read_text(encoding="utf-8")
        advice = c.section("Advice that does not work")
        outside = text.replace(advice, "") if advice else text
        for name in INVENTED:
            assert name not in outside, f"{c.id}: invented name {name!r} outside 'Advice that does not work'"


def test_seed_cases_say_what_advice_is_wrong(cases) -> None:
    seeds = {
        "verl-module-not-found", "verl-version-attribute-missing", "cuda-runtime-lib-missing", "cuda-no-kernel-image",
        "tokenizer-pad-token-none", "tensors-different-devices", "world-size-device-count-mismatch",
        "default-process-group-not-initialized", "address-already-in-use", "nccl-unhandled-system-error",
        "nccl-watchdog-timeout", "training-hang-no-progress", "rollout-stuck-dataflow-register", "vllm-hang-p2p",
        "hybridengine-reshard-shape-mismatch", "cuda-oom-training", "host-oom-killed-colocation", "hf-cant-load-config",
        "hf-gated-model-reference-load", "reward-flat-loss-not-decreasing", "slow-training-low-gpu-util",
        "loss-nan-isfinite", "prompt-exceeds-max-length", "ray-cannot-connect-cluster",
    }
    by_id = {c.id: c for c in cases}
    for sid in seeds:
        assert sid in by_id, sid
        assert len(by_id[sid].section("Advice that does not work")) > 40, f"{sid}: no 'Advice that does not work'"


def test_each_case_cites_a_checkable_source(cases) -> None:
    for c in cases:
        assert any(s.startswith("https://") or "/" in s for s in c.sources), f"{c.id}: no link or source path"


def test_overview_is_current() -> None:
    res = subprocess.run([sys.executable, "-m", "kb.cli", "overview", "--check"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
