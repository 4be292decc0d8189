"""kb doctor: which checks it picks, parallel runs, ordering, JSON shape."""

from __future__ import annotations

import json
import sys

import pytest

from kb.cases.caseset import load_cases
from kb.cases.trust import trust_folder
from kb.checks.doctor import doctor_checks, format_report, run_doctor
from kb.checks.history import read_history
from kb.cli import main


@pytest.fixture
def doctor_cases(write_case, tmp_path):
    ran = tmp_path / "ran"
    ran.mkdir()
    write_case("aa-ruled-out", [("bash {name=ok doctor=yes}", "touch \"$KB_PARAM_D\"/ok\necho all good\nexit 0")], params={"d": str(ran)})
    write_case("bb-confirmed", [("bash {name=bad doctor=yes}", "touch \"$KB_PARAM_D\"/bad\necho 'evidence: the thing is broken'\nexit 1")],
               params={"d": str(ran)}, title="The thing is broken")
    write_case("cc-inconclusive", [("python {name=info doctor=yes}", "print('only information')\nraise SystemExit(2)")])
    write_case("dd-skipped", [("bash {name=needs-gpu-tool doctor=yes needs=cmd:kb-no-such-tool}", "exit 1")])
    write_case("ee-no-default", [("bash {name=needs-value doctor=yes}", "touch \"$KB_PARAM_D\"/no-default\necho \"$KB_PARAM_NIC\"\nexit 1")],
               params={"d": str(ran), "nic": None})
    write_case("ff-not-doctor", [("bash {name=manual}", "touch \"$KB_PARAM_D\"/manual\nexit 1")], params={"d": str(ran)})
    folder = write_case("gg-confirmed-too", [("bash {name=also-bad doctor=yes}", "echo second problem\nexit 1")])
    trust_folder(folder)  # doctor runs only checks of trusted folders (tests/test_trust.py)
    return folder, ran


def test_doctor_picks_safe_checks_only(doctor_cases):
    folder, _ = doctor_cases
    cases = load_cases([folder], include_builtin=False).cases
    picked = [(case.id, check.name) for case, check in doctor_checks(cases)]
    assert ("ee-no-default", "needs-value") not in picked  # a placeholder without default
    assert ("ff-not-doctor", "manual") not in picked
    assert len(picked) == 5


def test_doctor_runs_and_sorts(doctor_cases):
    folder, ran = doctor_cases
    cases = load_cases([folder], include_builtin=False).cases
    report = run_doctor(cases, python=sys.executable, workers=3, progress=False)
    assert sorted(p.name for p in ran.iterdir()) == ["bad", "ok"]  # never the excluded ones
    data = report.to_dict()
    assert [(c["case"], c["check"]) for c in data["confirmed"]] == [("bb-confirmed", "bad"), ("gg-confirmed-too", "also-bad")]
    assert "evidence: the thing is broken" in data["confirmed"][0]["output"]
    assert [c["case"] for c in data["inconclusive"]] == ["cc-inconclusive"]
    assert (data["ruled_out"], data["skipped"]) == (1, 1)
    assert len(data["results"]) == 5
    assert set(data["results"][0]) >= {"case", "check", "verdict", "exit_code", "duration_s", "output", "reason"}
    text = format_report(report)
    assert text.index("Confirmed on this node (2)") < text.index("bb-confirmed") < text.index("Inconclusive (1)")
    assert text.index("Inconclusive (1)") < text.index("cc-inconclusive") < text.index("1 ruled out, 1 skipped")
    assert "evidence: the thing is broken" in text
    # the skip's reason, as --json has it (the text said "1 skipped" only)
    skip_reason = next(r["reason"] for r in data["results"] if r["verdict"] == "skipped")
    assert "kb-no-such-tool" in skip_reason
    assert f"Skipped (1):\n  [-] {skip_reason} (1): dd-skipped / needs-gpu-tool" in text
    assert len(read_history()) == 5  # doctor runs are recorded too


def test_doctor_runs_checks_in_parallel(write_case, tmp_path):
    # Each check announces itself and waits (bounded) to see the others: only
    # parallel workers can all succeed.
    meet = tmp_path / "meet"
    meet.mkdir()
    code = ("touch \"$KB_PARAM_D\"/$$\nfor i in $(seq 200); do\n  [ \"$(ls \"$KB_PARAM_D\" | wc -l)\" -ge 3 ] && exit 0\n  sleep 0.02\ndone\nexit 1")
    for name in ("p1", "p2", "p3"):
        folder = write_case(f"par-{name}", [("bash {name=meet doctor=yes timeout=10}", code)], params={"d": str(meet)})
    trust_folder(folder)
    report = run_doctor(load_cases([folder], include_builtin=False).cases, workers=3, progress=False)
    assert [r.verdict for r in report.results] == ["ruled out"] * 3


def test_doctor_cancelled_before_start_runs_nothing(doctor_cases):
    import threading

    folder, ran = doctor_cases
    cancel = threading.Event()
    cancel.set()
    report = run_doctor(load_cases([folder], include_builtin=False).cases, progress=False, cancel_event=cancel)
    assert {(r.verdict, r.reason) for r in report.results} == {("inconclusive", "cancelled")}
    assert list(ran.iterdir()) == []


def test_kb_doctor_json(doctor_cases, capsys):
    folder, _ = doctor_cases
    assert main(["doctor", "--json", "--only", "--cases", str(folder), "--python", sys.executable]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert set(data) == {"confirmed", "inconclusive", "ruled_out", "skipped", "results", "not_run", "pins", "stacks"}
    assert data["stacks"] is None or "verdict" in data["stacks"] or "error" in data["stacks"]  # kb stacks' step: None without training processes
    assert data["not_run"] == []
    assert {tuple(sorted(c)) for c in data["confirmed"]} == {("case", "check", "output", "reason")}
    assert "it/s" not in captured.err and "kb doctor" not in captured.err  # no progress bar off a terminal


def test_kb_doctor_text(doctor_cases, capsys):
    folder, _ = doctor_cases
    assert main(["doctor", "--only", "--cases", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Confirmed on this node (2):")
    assert "1 ruled out, 1 skipped" in out
