"""Typed parameters: values are validated, then substituted only where quoting protects them (issue 11, point 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kb.casefile import parse_case_text
from kb.caseset import load_cases
from kb.cli import main
from kb.params import BadParam, quote_value, value_error
from kb.placement import unsafe_placements
from kb.runner import plan_check, run_check

CASE = """---
id: typed
title: Typed params
category: config
signatures: []
symptoms: [x]
sources: [tests]
params:
{params}---

# Typed params

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```{lang} {{name=c}}
{code}
```
"""


def typed_case(code: str, params: str, lang: str = "bash") -> tuple[object, list]:
    return parse_case_text(Path("x/typed.md"), CASE.format(params=params, code=code, lang=lang))


def test_world_size_check_refuses_an_arithmetic_injection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reproduced attack: bash arithmetic evaluates `a[$(cmd)]`, so an int param must be digits."""
    marker = tmp_path / "X"
    rc = main(["run", "world-size-device-count-mismatch", "--param", f"gpus_per_node=a[$(touch {marker})]", "--yes"])
    err = capsys.readouterr().err
    assert rc == 2
    assert not marker.exists()
    assert "gpus_per_node" in err and "is not an int" in err


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_builtin_arithmetic_only_sees_validated_digits(tmp_path: Path) -> None:
    """Even past kb's own validation, the check's bash validates before $(( ))."""
    case = load_cases().get("world-size-device-count-mismatch")
    assert case is not None and case.params["gpus_per_node"].type == "int" and case.params["nnodes"].type == "int"
    check = case.check("ray-free-gpus")
    marker = tmp_path / "Y"
    # Bypass kb's validation on purpose (as if a caller skipped it): the check itself must not evaluate it.
    code = check.code.replace("{{gpus_per_node}}", f"'a[$(touch {marker})]'").replace("{{nnodes}}", "1")
    import subprocess

    proc = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2
    assert not marker.exists()


def test_value_types() -> None:
    assert value_error("int", "8") is None
    for bad in ("a[$(touch x)]", "8 ", "-1", "", "0x10", "1" * 19):
        assert value_error("int", bad), bad
    assert value_error("name", "eth0") is None and value_error("name", "10.0.0.1:6379") is None
    for bad in ("a b", "$(x)", "-rf", "a;b", ""):
        assert value_error("name", bad), bad
    assert value_error("path", "~/data/my file.parquet") is None
    for bad in ("a\nb", "a\x1bb", "--help", ""):
        assert value_error("path", bad), bad
    assert value_error("text", "anything at all; $(even this) 'and' \"this\"") is None
    assert value_error("text", "nul\x00") is not None


def test_values_are_one_word_or_one_literal() -> None:
    assert quote_value("bash", "a'b $(x)") == "'a'\"'\"'b $(x)'"
    assert quote_value("python", "a'b") == repr("a'b")
    assert quote_value("python", "08", "int") == "8"  # a Python int literal, no leading zero


def test_plan_refuses_invalid_values_and_run_raises(tmp_path: Path) -> None:
    case, problems = typed_case("n={{n}}\necho $n\nexit 0", "  n: {type: int, description: a count, default: '2'}\n")
    assert case is not None, problems
    plan = plan_check(case, case.checks[0], {"n": "1;touch x"})
    assert not plan.ready and "n" in plan.invalid and "{{n}}" in plan.code
    with pytest.raises(BadParam) as exc:
        run_check(case, case.checks[0], {"n": "1;touch x"}, record=False)
    assert exc.value.name == "n"


def test_default_must_fit_its_type() -> None:
    case, problems = typed_case("n={{n}}\nexit 0", "  n: {type: int, description: a count, default: many}\n")
    assert case is None
    assert any("param 'n': default 'many' is not an int" in p.message for p in problems)
    case, problems = typed_case("n={{n}}\nexit 0", "  n: {type: number, description: a count}\n")
    assert case is None and any("type must be one of int, name, path, text" in p.message for p in problems)
    case, problems = typed_case("n={{n}}\nexit 0", "  n: {description: untyped is text}\n")
    assert case is not None and case.params["n"].type == "text"


BASH_REFUSED = [
    "echo '{{v}}'",
    'echo "{{v}}"',
    "cat <<EOF\n{{v}}\nEOF",
    "python3 - <<'EOF'\nprint({{v}})\nEOF",
    "true # {{v}}",
    "n=$(( {{v}} + 1 ))",
    "(( {{v}} > 1 )) && exit 1",
    "a[{{v}}]=1",
    "echo ${a[{{v}}]}",
    "[[ {{v}} -eq 1 ]] && exit 1",
    "eval echo {{v}}",
    "bash -c {{v}}",
    "declare -i n={{v}}",
    "trap {{v}} EXIT",
    "ssh somehost {{v}}",
    "timeout 5 bash -lc {{v}}",
]
PY_REFUSED = ["print('{{v}}')", 'print(f"{ {{v}} }")', "x = 1  # {{v}}", 'x = """\n{{v}}\n"""', "x = b'{{v}}'",
              "eval({{v}})", "import os\nos.system({{v}})", "import subprocess\nsubprocess.run({{v}}, shell=True)"]


@pytest.mark.parametrize("code", BASH_REFUSED)
def test_kb_check_refuses_bash_placeholders_quoting_cannot_protect(code: str) -> None:
    case, problems = typed_case(code + "\nexit 0", "  v: {description: a value, default: x}\n")
    assert case is None
    assert any("placeholder {{v}}" in p.message and p.severity == "error" for p in problems), problems


@pytest.mark.parametrize("code", PY_REFUSED)
def test_kb_check_refuses_python_placeholders_in_strings_and_comments(code: str) -> None:
    case, problems = typed_case(code, "  v: {description: a value, default: x}\n", lang="python")
    assert case is None
    assert any("placeholder {{v}}" in p.message for p in problems), problems


@pytest.mark.parametrize("code", ["v={{v}}", "echo {{v}}", 'out="$(cat {{v}})"', "[ -e {{v}} ] && exit 1", "case {{v}} in a) ;; esac"])
def test_word_positions_are_accepted(code: str) -> None:
    case, problems = typed_case(code + "\nexit 0", "  v: {description: a value, default: x}\n")
    assert case is not None, problems


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_injection_payloads_stay_data_in_accepted_positions(tmp_path: Path) -> None:
    """Every accepted position keeps a hostile text value as data: no marker file."""
    marker = tmp_path / "M"
    payloads = [f"$(touch {marker})", f"`touch {marker}`", f"'; touch {marker}; '", f'"; touch {marker}; "', f"a\ntouch {marker}"]
    for code in ["v={{v}}\necho \"$v\"", "echo {{v}}", 'out="$(echo {{v}})"; echo "$out"']:
        case, problems = typed_case(code + "\nexit 0", "  v: {description: a value}\n")
        assert case is not None, problems
        for payload in payloads:
            result = run_check(case, case.checks[0], {"v": payload}, record=False)
            assert result.verdict == "ruled out", (code, payload, result.output)
            assert not marker.exists(), (code, payload)


def test_builtin_cases_have_no_unsafe_placement() -> None:
    for case in load_cases().cases:
        for check in case.checks:
            assert unsafe_placements(check.lang, check.code) == [], (case.id, check.name)
