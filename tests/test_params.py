"""Parameters reach a check only as KB_PARAM_<NAME> environment variables (issue 28, item 1).

kb never edits a check's text with a value: the code that runs is byte for
byte the parsed block, whatever the values. Values are validated against
their type, and refuse control and invisible characters.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.cases.casefile import parse_case_text
from kb.cases.caseset import load_cases
from kb.cases.params import BadParam, env_name, value_error
from kb.checks.runner import RULED_OUT, plan_check, run_check
from kb.cli import main

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
    env = dict(os.environ, KB_PARAM_GPUS_PER_NODE=f"a[$(touch {marker})]", KB_PARAM_NNODES="1")
    proc = subprocess.run(["bash", "-c", check.code], capture_output=True, text=True, timeout=20, env=env)
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
    assert value_error("text", "anything at all; (even this) 'and' \"this\" | x > y") is None
    # $ and ` could start an expansion where a bash check uses the value as a number (tests/test_adversary.py)
    assert value_error("text", "$(even this)") is not None and value_error("path", "/x/`y`") is not None
    assert value_error("text", "nul\x00") is not None


def test_plan_refuses_invalid_values_and_run_raises(tmp_path: Path) -> None:
    case, problems = typed_case('n="$KB_PARAM_N"\necho $n\nexit 0', "  n: {type: int, description: a count, default: '2'}\n")
    assert case is not None, problems
    plan = plan_check(case, case.checks[0], {"n": "1;touch x"})
    assert not plan.ready and "n" in plan.invalid and plan.code == case.checks[0].code
    with pytest.raises(BadParam) as exc:
        run_check(case, case.checks[0], {"n": "1;touch x"}, record=False)
    assert exc.value.name == "n"


def test_default_must_fit_its_type() -> None:
    case, problems = typed_case('n="$KB_PARAM_N"\nexit 0', "  n: {type: int, description: a count, default: many}\n")
    assert case is None
    assert any("param 'n': default 'many' is not an int" in p.message for p in problems)
    case, problems = typed_case('n="$KB_PARAM_N"\nexit 0', "  n: {type: number, description: a count}\n")
    assert case is None and any("type must be one of int, name, path, text" in p.message for p in problems)
    case, problems = typed_case('n="$KB_PARAM_N"\nexit 0', "  n: {description: untyped is text}\n")
    assert case is not None and case.params["n"].type == "text"


# ---------------------------------------------------------------- issue 28, item 1: values never become code

# Every placement that ran a value as code in the adversarial pass (kb check reported 0 errors for each on
# main). Placeholders are gone, so each is now refused by kb check, with the migration in the message.
PLACEHOLDER_ATTACKS = [
    ("bash", "cat <<EOF\n{{v}}\nEOF"),
    ("bash", "cat <<< {{v}}"),
    ("bash", "x=$'{{v}}'"),
    ("bash", "printf -v out {{v}}"),
    ("bash", "read -r x <<< {{v}}"),
    ("bash", "test -v {{v}}"),
    ("bash", "declare -i n\nn={{v}}"),
    ("bash", "declare -n ref={{v}}\necho $ref"),
    ("bash", "echo ${!v}\nv={{v}}"),
    ("bash", "awk {{v}} /dev/null"),
    ("bash", "sh -c {{v}}"),
    ("python", "e = eval\ne({{v}})"),
    ("python", "import subprocess\ncmd = {{v}}\nsubprocess.run(cmd,\n    shell=True)"),
    ("python", "x = {{v}}"),
]


@pytest.mark.parametrize("lang, code", PLACEHOLDER_ATTACKS)
def test_kb_check_refuses_any_placeholder_with_the_migration(lang: str, code: str) -> None:
    case, problems = typed_case(code + ("\nexit 0" if lang == "bash" else ""), "  v: {description: a value, default: x}\n", lang=lang)
    assert case is None
    found = [p for p in problems if "{{v}} is no longer substituted" in p.message]
    assert found and found[0].severity == "error", problems
    assert '"$KB_PARAM_V"' in found[0].message and 'os.environ["KB_PARAM_V"]' in found[0].message
    text = CASE.format(params="  v: {description: a value, default: x}\n", code=code, lang=lang)
    want = next(i for i, ln in enumerate(text.split("\n"), 1) if "{{v}}" in ln)
    assert found[0].line == want, found[0]  # the line of the placeholder itself


def test_kb_check_cli_names_file_and_line_of_a_placeholder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "typed.md").write_text(CASE.format(params="  v: {description: a value}\n", code="echo {{v}}", lang="bash"))
    rc = main(["check", "--only", "--cases", str(folder)])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"{folder / 'typed.md'}:25: error: check 'c': {{{{v}}}} is no longer substituted" in out


# Without $ and `: a text value refuses them (bash could expand them where a check reads the
# value as a number; tests/test_adversary.py), so they never reach a check.
SHELL_PY_META = st.text(alphabet=st.sampled_from(list("'\"\\;|&(){}[]<>*?!#~ %=+-_.:,/abcXYZ019\t")), max_size=64)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=SHELL_PY_META)
def test_the_text_that_runs_is_the_parsed_block_for_any_value(tmp_path: Path, value: str) -> None:
    """Construction: the script kb writes and runs is byte-identical to the parsed block, whatever the value,
    and the check sees the value exactly, as data."""
    code_bash = 'cat "$0" > "$KB_PARAM_OUT.script"\nprintf %s "$KB_PARAM_V" > "$KB_PARAM_OUT"\nexit 0'
    code_py = ('import os, sys\nopen(os.environ["KB_PARAM_OUT"] + ".script", "w").write(open(sys.argv[0]).read())\n'
               'open(os.environ["KB_PARAM_OUT"], "w").write(os.environ["KB_PARAM_V"])')
    params = "  v: {description: a value}\n  out: {type: path, description: where}\n"
    for lang, code in (("bash", code_bash), ("python", code_py)):
        case, problems = typed_case(code, params, lang=lang)
        assert case is not None, problems
        check = case.checks[0]
        out = tmp_path / f"out-{lang}"
        plan = plan_check(case, check, {"v": value, "out": str(out)}, sys.executable)
        assert plan.code == check.code
        assert plan.environment == {"KB_PARAM_V": value, "KB_PARAM_OUT": str(out)}
        result = run_check(case, check, {"v": value, "out": str(out)}, sys.executable, record=False)
        assert result.verdict == RULED_OUT, result.output
        assert Path(str(out) + ".script").read_text() == check.code
        assert out.read_text() == value


def test_no_code_path_substitutes_values_into_check_text() -> None:
    """Construction, statically: no module of kb rewrites check code with a value any more."""
    root = Path(__file__).resolve().parents[1] / "kb"
    assert not (root / "placement.py").exists()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for needle in ("PLACEHOLDER_RE", "quote_value", "def substitute", "unsafe_placements"):
            assert needle not in text, (path, needle)


def test_builtin_checks_read_parameters_from_the_environment_and_defaults_apply() -> None:
    cases = load_cases().cases
    with_params = 0
    for case in cases:
        for check in case.checks:
            assert "{{" not in check.code, (case.id, check.name)
            names = case.params_of(check)
            with_params += bool(names)
            plan = plan_check(case, check)
            assert plan.code == check.code
            for name in names:
                param = case.params[name]
                if param.default is not None:
                    assert plan.environment[env_name(name)] == param.default, (case.id, name)
                else:
                    assert name in plan.missing
    assert with_params >= 100  # the converted built-in checks (about 111)


@pytest.mark.parametrize("ch", ["\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200b", "\u00a0", "\u3000",
                                "\u3164", "\u2800", "\U000e0020", "\u034f", "\ufe0f", "\u00ad", "\n", "\x1b"])
@pytest.mark.parametrize("ptype", ["text", "path"])
def test_values_refuse_control_and_invisible_characters(ch: str, ptype: str) -> None:
    why = value_error(ptype, f"abc{ch}def")
    assert why is not None and ("control or invisible" in why or "is not a path" in why), (repr(ch), why)


def test_run_refuses_a_bidi_value_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "world-size-device-count-mismatch", "--param", "gpus_per_node=8\u202e", "--dry-run"])
    assert rc == 2
    assert "\\u202e" in capsys.readouterr().err  # named, escaped, never raw on the terminal


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_inherited_kb_param_variables_do_not_reach_a_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only values kb validated are in the environment: a KB_PARAM_* set in the user's shell is dropped."""
    monkeypatch.setenv("KB_PARAM_V", "$(touch /nonexistent)")
    monkeypatch.setenv("KB_PARAM_OTHER", "leaked")
    case, problems = typed_case('[ "$(env | grep -c "^KB""_PARAM_")" = 1 ] || exit 1\n[ "$KB_PARAM_V" = ok ] || exit 1\nexit 0',
                                "  v: {description: a value}\n")
    assert case is not None, problems
    assert run_check(case, case.checks[0], {"v": "ok"}, record=False).verdict == RULED_OUT
