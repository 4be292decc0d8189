"""The installed verl's declared pins against installed versions (kb/checks/envpins.py), kb env and kb doctor.

The mismatched environment is made of fake dist-info folders (METADATA only)
on PYTHONPATH, read by a fresh venv's Python that has nothing else installed:
importlib.metadata in the target Python reads them exactly as it reads a real
install, and no package code exists to be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases
from kb.checks import envpins
from kb.checks.doctor import format_report, run_doctor
from kb.checks.envpins import GENERAL_ENTRY, PIN_ENTRIES, compare, match_release, satisfies
from kb.cli import main

ROOT = Path(__file__).resolve().parent.parent


# --- the specifier comparison ------------------------------------------------------------------

@pytest.mark.parametrize(("version", "spec", "expected"), [
    ("0.11.0", ">=0.18.0", False),
    ("0.24.0", ">=0.18.0", True),
    ("0.9.0", ">=0.8.0,<=0.10.0,!=0.9.0", False),  # the one tensordict release verl excludes
    ("0.9.1", ">=0.8.0,<=0.10.0,!=0.9.0", True),
    ("0.10.1", ">=0.8.0,<=0.10.0,!=0.9.0", False),
    ("2.9.1+cu128", "==2.9.1", True),  # a local build label does not change the release
    ("2.9.0+cu128", "==2.9.1", False),
    ("1.26.4", "<2.0.0", True),
    ("2.0.0rc1", "<2.0.0", False),  # PEP 440: "<V" excludes V's own pre-releases (pip agrees)
    ("1.99.0rc1", "<2.0.0", True),
    ("2.1.0", "<2.0.0", False),
    ("5.6.0", ">=5.5.3,!=5.6.0,<5.11", False),
    ("5.6.1", ">=5.5.3,!=5.6.0,<5.11", True),
    ("0.12.0rc1", "<=0.12.0", True),  # an installed pre-release is judged by its number
    ("0.6.3.post1", "<=0.6.3", False),
    ("0.4.6.post5", "==0.4.6.post5", True),
    ("anything", "", None),  # not PEP 440: cannot be compared, never a conflict
    ("1.0", "=>1", None),  # a malformed specifier
    ("1.0", "", True),  # no version named: anything goes
])
def test_satisfies(version, spec, expected):
    assert satisfies(version, spec) is expected


# --- compare(): the logic on a probe's answer, with a small data table --------------------------

MARKERS = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "platform_machine": "x86_64",
           "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython", "implementation_version": "3.11.7",
           "platform_python_implementation": "CPython", "platform_release": "6", "platform_version": "1"}

DATA = {"releases": [{
    "tag": "v0.9.0", "version": "0.9.0", "version_file": "0.9.0",
    "declared": [
        {"name": "numpy", "requirement": "numpy>=2.0.0", "group": "install_requires", "source": "setup.py:32@v0.9.0"},
        {"name": "vllm", "requirement": "vllm>=0.18.0", "group": "extra:vllm", "source": "setup.py:55@v0.9.0"},
        {"name": "pre-commit", "requirement": "pre-commit", "group": "requirements", "source": "requirements.txt:13@v0.9.0"},
        {"name": "ray", "requirement": "ray[default]>=2.50", "group": "requirements", "source": "requirements.txt:15@v0.9.0"},
        {"name": "pytest", "requirement": "pytest>=99", "group": "requirements:other", "source": "requirements-test.txt:1@v0.9.0"},
        {"name": "torch-npu", "requirement": "torch-npu==2.1.0", "group": "requirements:npu", "source": "requirements-npu.txt:1@v0.9.0"},
    ],
    "tested_stacks": [{"file": "docker/Dockerfile.stable.vllm", "tag": "v0.9.0", "from": [],
                       "pins": [{"name": "vllm", "requirement": "vllm==0.24.0", "source": "docker/Dockerfile.stable.vllm:137@v0.9.0"}]},
                      {"file": "docker/old/Dockerfile.app.vllm", "tag": "v0.9.0", "from": [],
                       "pins": [{"name": "vllm", "requirement": "vllm==0.8.5", "source": "docker/old/Dockerfile.app.vllm:3@v0.9.0"}]}]},
    {"tag": "v0.8.0", "version": "0.8.0", "version_file": "0.8.0.dev", "declared": [], "tested_stacks": []},
]}


def probe(requires, versions, verl="0.9.0"):
    return {"verl": {"version": verl, "requires": requires, "location": "/site"}, "versions": versions, "markers": MARKERS}


def by_package(report):
    return {c.package: c for c in report.conflicts}


def test_base_pin_outside_is_certain_and_names_every_source():
    report = compare(probe(["numpy>=2.0.0"], {"numpy": "1.26.4"}), DATA)
    c = by_package(report)["numpy"]
    assert (c.kind, c.certain, c.installed, c.requirement, c.extras) == ("outside", True, "1.26.4", "numpy>=2.0.0", ())
    assert c.sources == ("verl 0.9.0 metadata (Requires-Dist)", "setup.py:32@v0.9.0")  # one conflict, both places
    assert c.entry == "numpy2-abi-incompat"
    assert report.release == "v0.9.0"


def test_extra_pin_counts_when_its_engine_is_installed():
    requires = ['vllm>=0.18.0; extra == "vllm"', 'torch==2.9.1; extra == "sglang"']
    report = compare(probe(requires, {"vllm": "0.11.0", "torch": "2.8.0"}), DATA)
    found = by_package(report)
    assert found["vllm"].certain and found["vllm"].extras == ("vllm",)
    assert found["vllm"].entry == "vllm-verl-version-mismatch"
    # the stable image's version is offered, the old app image of another release is not
    assert found["vllm"].tested == ("vllm==0.24.0 (docker/Dockerfile.stable.vllm:137@v0.9.0)",)
    # sglang is not installed: verl[sglang]'s torch pin may not apply, so it is only possible
    assert not found["torch"].certain and found["torch"].extras == ("sglang",)
    assert report.extras_in_use == ["vllm"]
    assert [c.package for c in report.certain()] == ["vllm"]
    assert "applies only if verl was installed with [sglang]" in found["torch"].describe("0.9.0")


def test_an_extra_pulled_in_by_an_extra_in_use_counts():
    requires = ['verl[verl-core]; extra == "vllm"', 'vllm==0.24.0; extra == "vllm"', 'ray[default]>=2.41.0; extra == "verl-core"']
    report = compare(probe(requires, {"vllm": "0.24.0", "ray": "2.40.0"}, verl="0.9.1"), DATA)
    assert report.extras_in_use == ["verl-core", "vllm"]
    ray = by_package(report)["ray"]
    assert ray.certain and ray.extras == ("verl-core",) and ray.entry == GENERAL_ENTRY
    assert report.release is None and "not a release in kb's pins table" in report.release_note


def test_missing_base_requirement_but_not_missing_data_file_tools():
    report = compare(probe(["codetiming", 'pytest; extra == "test"'], {"codetiming": None, "pytest": None, "pre-commit": None}), DATA)
    kinds = {(c.package, c.kind) for c in report.conflicts}
    # pip enforces the metadata's base requirement; requirements.txt's dev tools are not verl's dependencies
    assert kinds == {("codetiming", "missing")}


def test_data_file_pins_add_what_metadata_lacks_and_ignore_test_files():
    report = compare(probe([], {"ray": "2.46.0", "pytest": "8.0", "torch-npu": None}), DATA)
    ray = by_package(report)["ray"]
    assert ray.sources == ("requirements.txt:15@v0.9.0",) and ray.certain
    assert "pytest" not in by_package(report)  # requirements-test.txt is not an install path
    assert "torch-npu" not in by_package(report)  # requirements-npu.txt counts only on an Ascend install


def test_platform_requirements_file_counts_only_when_that_platform_is_installed():
    data = {"releases": [{"tag": "v0.9.0", "version": "0.9.0", "version_file": "0.9.0", "tested_stacks": [], "declared": [
        {"name": "numpy", "requirement": "numpy<2.0.0", "group": "requirements:npu", "source": "requirements-npu.txt:8@v0.9.0"}]}]}
    assert compare(probe([], {"numpy": "2.2.6", "torch-npu": None}), data).conflicts == []
    on_ascend = compare(probe([], {"numpy": "2.2.6", "torch-npu": "2.7.1"}), data)
    assert [(c.package, c.certain, c.extras) for c in on_ascend.conflicts] == [("numpy", True, ("npu",))]


def test_platform_marker_that_does_not_hold_is_skipped():
    requires = ['numpy<2; platform_machine == "aarch64"', 'numpy>=2; platform_machine == "x86_64"']
    report = compare(probe(requires, {"numpy": "1.26.4"}), {"releases": []})
    assert [c.requirement for c in report.conflicts] == ["numpy>=2"]


def test_unreadable_inputs_are_listed_not_flagged():
    report = compare(probe(["numpy>=2.0.0", "not a requirement !!"], {"numpy": "weird-build"}), {"releases": []})
    assert report.conflicts == []
    assert any("not a valid requirement" in u for u in report.unreadable)
    assert any("numpy weird-build" in u for u in report.unreadable)


def test_no_verl_and_probe_error():
    assert compare({"verl": None, "versions": {}}, DATA).error == "verl is not installed in the target environment"
    assert "cannot read" in compare({"error": "cannot read verl's metadata: X"}, DATA).error


def test_dev_version_matches_the_tag_whose_version_file_carries_it():
    release, how = match_release("0.8.0.dev", DATA)
    assert release is not None and release["tag"] == "v0.8.0" and "source install" in how


def test_every_entry_named_is_a_builtin_case():
    ids = {c.id for c in load_cases([], include_builtin=True).cases}
    for entry in [*PIN_ENTRIES.values(), GENERAL_ENTRY]:
        assert entry in ids, entry


# --- the shipped table ----------------------------------------------------------------------------

def test_shipped_table_holds_the_releases_and_names_where_each_pin_was_read():
    data = json.loads(envpins.DATA_FILE.read_text(encoding="utf-8"))
    tags = [r["tag"] for r in data["releases"]]
    assert tags[0] == "v0.2" and "v0.9.0" in tags and tags[-1].startswith("wheel:verl-0.9.1")
    for r in data["releases"]:
        for p in r["declared"]:
            assert "@" in p["source"] and ":" in p["source"].split("@")[0], p
    v090 = next(r for r in data["releases"] if r["tag"] == "v0.9.0")
    assert {"name": "vllm", "requirement": "vllm>=0.18.0", "group": "extra:vllm", "source": "setup.py:55@v0.9.0"} in v090["declared"]
    v091 = next(r for r in data["releases"] if r["version"] == "0.9.1")
    assert any(p["requirement"] == "vllm==0.24.0" and p["group"] == "extra:vllm" for p in v091["declared"])


def test_script_reads_a_tagged_checkout(tmp_path):
    """scripts/verl_pins.py on a two-file repository: setup.py lists, extras by name, requirements, Dockerfile ARGs."""
    repo = tmp_path / "verl"
    (repo / "verl" / "version").mkdir(parents=True)
    (repo / "verl" / "version" / "version").write_text("0.5.0\n")
    (repo / "setup.py").write_text(
        'install_requires = [\n    "numpy<2.0.0",\n    "ray[default]>=2.41.0",\n]\n'
        'VLLM_REQUIRES = ["vllm>=0.7.3,<=0.8.5"]\n'
        'extras_require = {"vllm": VLLM_REQUIRES, "gpu": ["flash-attn"]}\n')
    (repo / "requirements.txt").write_text("# comment\nnumpy<2.0.0\ntensordict<=0.6.2\n")
    (repo / "docker").mkdir()
    (repo / "docker" / "Dockerfile.stable.vllm").write_text(
        "FROM nvidia/cuda:12.4-devel\nARG VLLM_VERSION=0.8.5\nRUN pip install vllm==${VLLM_VERSION} torch==2.6.0\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    subprocess.run([*git, "tag", "v0.5.0"], check=True)
    out = tmp_path / "pins.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "verl_pins.py"), "--repo", str(repo), "--out", str(out)],
                   check=True, capture_output=True, timeout=60)
    data = json.loads(out.read_text())
    (release,) = data["releases"]
    declared = {(p["requirement"], p["group"], p["source"]) for p in release["declared"]}
    assert ("numpy<2.0.0", "install_requires", "setup.py:2@v0.5.0") in declared
    assert ("vllm>=0.7.3,<=0.8.5", "extra:vllm", "setup.py:5@v0.5.0") in declared
    assert ("flash-attn", "extra:gpu", "setup.py:6@v0.5.0") in declared
    assert ("tensordict<=0.6.2", "requirements", "requirements.txt:3@v0.5.0") in declared
    (stack,) = release["tested_stacks"]
    assert {p["requirement"] for p in stack["pins"]} == {"vllm==0.8.5", "torch==2.6.0"}
    assert stack["from"] == ["nvidia/cuda:12.4-devel (docker/Dockerfile.stable.vllm:1@v0.5.0)"]


# --- a deliberately mismatched environment, end to end ------------------------------------------

def fake_dist(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def mismatched(tmp_path_factory):
    """A bare venv (nothing installed) plus fake dist-infos: verl 0.9.0's own Requires-Dist against older packages."""
    base = tmp_path_factory.mktemp("mismatch")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = base / "site"
    fake_dist(site, "verl", "0.9.0", (
        "numpy>=2.0.0", "ray[default]>=2.41.0", "tensordict!=0.9.0,<=0.10.0,>=0.8.0", "transformers!=5.6.0,<5.11,>=5.5.3",
        'tensordict!=0.9.0,<=0.10.0,>=0.8.0; extra == "vllm"', 'vllm>=0.18.0; extra == "vllm"',
        'sglang[srt,openai]==0.5.8; extra == "sglang"', 'torch==2.9.1; extra == "sglang"'))
    for name, version in (("vllm", "0.11.0"), ("tensordict", "0.6.2"), ("numpy", "1.26.4"), ("transformers", "4.57.1"),
                          ("ray", "2.46.0"), ("torch", "2.8.0")):
        fake_dist(site, name, version)
    return str(venv / "bin" / "python"), str(site)


EXPECTED = {  # package -> (entry, certain)
    "vllm": ("vllm-verl-version-mismatch", True),
    "tensordict": ("tensordict-version-mismatch", True),
    "numpy": ("numpy2-abi-incompat", True),
    "transformers": ("transformers-version-mismatch", True),
    "torch": ("vllm-sglang-torch-pin-conflict", False),  # sglang is not installed: verl[sglang] may not be in use
}


def test_kb_env_names_each_conflict_and_its_entry(mismatched, monkeypatch, capsys):
    python, site = mismatched
    monkeypatch.setenv("PYTHONPATH", site)
    assert main(["env", "--json", "--python", python]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["packages"]["verl"] == "0.9.0" and data["packages"]["vllm"] == "0.11.0"  # the existing fields are unchanged
    pins = data["verl_pins"]
    assert (pins["verl"], pins["release"]) == ("0.9.0", "v0.9.0")
    got = {c["package"]: (c["entry"], c["certain"]) for c in pins["conflicts"]}
    assert got == EXPECTED  # ray 2.46.0 is inside >=2.41.0: not listed
    vllm = next(c for c in pins["conflicts"] if c["package"] == "vllm")
    assert vllm["installed"] == "0.11.0" and vllm["requirement"] == "vllm>=0.18.0"
    assert "setup.py:55@v0.9.0" in vllm["sources"]  # the shipped table adds the line that declares it
    assert main(["env", "--python", python]) == 0
    text = capsys.readouterr().out
    assert "[!] vllm 0.11.0 is outside verl[vllm] 0.9.0's vllm>=0.18.0" in text
    assert "see: kb show vllm-verl-version-mismatch" in text
    assert "[?] torch 2.8.0 is outside verl[sglang] 0.9.0's torch==2.9.1" in text


def test_kb_doctor_lists_confirmed_conflicts_with_the_case_id(mismatched, monkeypatch, capsys):
    python, site = mismatched
    monkeypatch.setenv("PYTHONPATH", site)
    report = run_doctor([], python=python, progress=False)
    confirmed = {(c["case"], c["check"]) for c in report.to_dict()["confirmed"]}
    assert confirmed == {(entry, "verl-pins") for entry, certain in EXPECTED.values() if certain}
    assert {c["case"] for c in report.to_dict()["inconclusive"]} == {"vllm-sglang-torch-pin-conflict"}
    text = format_report(report)
    assert text.startswith("Confirmed on this node (4):")
    assert "[!] tensordict-version-mismatch / verl-pins: tensordict 0.6.2 is outside verl 0.9.0's" in text
    assert "[?] vllm-sglang-torch-pin-conflict / verl-pins: torch 2.8.0" in text
    empty = Path(site).parent / "no-cases"
    empty.mkdir(exist_ok=True)
    assert main(["doctor", "--json", "--only", "--cases", str(empty), "--python", python]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["package"] for c in data["pins"]["conflicts"]} == set(EXPECTED)


def test_a_healthy_environment_has_no_conflicts(mismatched, tmp_path, monkeypatch):
    python, _ = mismatched
    site = tmp_path / "site"
    fake_dist(site, "verl", "0.9.0", ("numpy>=2.0.0", 'vllm>=0.18.0; extra == "vllm"'))
    fake_dist(site, "numpy", "2.2.6")
    fake_dist(site, "vllm", "0.24.0")
    monkeypatch.setenv("PYTHONPATH", str(site))
    report = envpins.check_pins(python)
    assert report.error == "" and report.conflicts == [] and report.checked >= 2
    assert "no conflicts" in "\n".join(envpins.format_pins(report))


def test_flash_attn_pin_of_091_is_possible_unless_its_extra_is_evidently_used():
    requires = ['verl[flash-attn-cu130torch211]; extra == "fsdp"', 'flash-attn==2.8.3; extra == "flash-attn-cu130torch211"',
                'torch==2.11.0; extra == "fsdp"']
    report = compare(probe(requires, {"flash-attn": "2.7.4.post1", "torch": "2.11.0"}, verl="0.9.1"), {"releases": []})
    (c,) = report.conflicts
    assert (c.package, c.certain, c.extras, c.entry) == ("flash-attn", False, ("flash-attn-cu130torch211",), "flash-attn-undefined-symbol")


def test_conflict_summary_is_one_comparable_line_for_the_cluster_doctor():
    report = compare(probe(["numpy>=2.0.0", 'torch==2.9.1; extra == "sglang"'], {"numpy": "1.26.4", "torch": "2.8.0"}), {"releases": []})
    assert envpins.conflict_summary(report) == "numpy 1.26.4 vs numpy>=2.0.0 (numpy2-abi-incompat)"  # the possible one is left out
    assert envpins.conflict_summary(compare(probe([], {}), {"releases": []})) == "no conflicts"
    assert envpins.conflict_summary(compare({"verl": None, "versions": {}}, {"releases": []})) is None


def test_cluster_node_facts_carry_the_pin_summary(mismatched, monkeypatch):
    from kb.cluster.node import node_facts

    python, site = mismatched
    monkeypatch.setenv("PYTHONPATH", site)
    facts = node_facts(python)
    assert facts["verl"] == "0.9.0"
    assert "vllm 0.11.0 vs vllm>=0.18.0 (vllm-verl-version-mismatch)" in facts["verl_pins"]
    assert "torch" not in facts["verl_pins"]  # only what is certain: the sglang extra may not be in use


def test_v02_pins_come_from_pyproject_not_setup_py():
    """At v0.2 pyproject.toml's [project] table wins over setup.py: requirements.txt's tensordict<0.6 and
    pyarrow>=15 never reached the installed metadata, so they are not conflicts (reviewP)."""
    release = next(r for r in json.loads(envpins.DATA_FILE.read_text(encoding="utf-8"))["releases"] if r.get("tag") == "v0.2")
    pins = {p.name: p for p in envpins.data_pins(release, {}, [])}
    assert "pyarrow" not in pins and "tensordict" not in pins  # pyarrow undeclared, tensordict unversioned
    assert pins["transformers"].specifier == "<4.48" and pins["transformers"].source.startswith("pyproject.toml:")
