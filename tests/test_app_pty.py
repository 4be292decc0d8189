"""The app as a person uses it: the real `kb` binary in a pseudo-terminal.

Pilot delivers events inside Textual; a terminal delivers bytes. A doubled
paste slipped past Pilot, so these tests send what a terminal sends (a
bracketed paste is `ESC[200~ ... ESC[201~` with line ends as CR) and read the
screen back through a terminal emulator (pyte) at 80x24 and 160x45.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest

pytest.importorskip("pexpect")
pytest.importorskip("pyte")

import pexpect
from ptyterm import Terminal

pytestmark = pytest.mark.slow

NCCL = "unhandled system error (run with NCCL_DEBUG=INFO for details)"


@pytest.fixture
def terminal(engine, shared_index_dir, tmp_path):
    opened: list[Terminal] = []

    def start(cols: int, rows: int, *args: str, env: dict[str, str] | None = None) -> Terminal:
        index_dir = shared_index_dir
        if "--cases" in args:
            # an extra folder changes what the index holds: a copy, or every other test's
            # search would wait while the session's index is rebuilt with and without it
            index_dir = tmp_path / "index"
            if not index_dir.exists():
                shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
        term = Terminal(cols, rows, index_dir, *args, env=env)
        opened.append(term)
        # the status line's "245 cases": the index is open (the welcome text says "cases" too)
        term.wait_for(lambda s: "Paste an error" in s and re.search(r"\d+ cases", s) is not None, "the app's first screen", timeout=120)
        return term

    yield start
    for term in opened:
        term.close()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_a_bracketed_paste_of_five_lines_shows_once(terminal, size) -> None:
    term = terminal(*size)
    lines = [f"paste line {i} marker{i}x" for i in range(1, 6)]
    term.paste("\n".join(lines))
    screen = term.wait_for(lambda s: "marker5x" in s, "the pasted text")
    term.pump(0.5)  # a doubled paste would arrive right after the first
    screen = term.text()
    for line in lines:
        assert screen.count(line) == 1, screen


def test_at_80x24_the_run_dialog_shows_run_and_cancel(terminal) -> None:
    term = terminal(80, 24)
    term.paste(NCCL)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer")
    term.send("\x0f")  # ctrl+o opens the top case
    term.wait_for(lambda s: "Verify" in s or "Run check" in s or "r Run" in s, "the case view")
    term.send("r")
    screen = term.wait_for(lambda s: "Run (y)" in s and "Cancel (n)" in s, "the run dialog's buttons")
    assert "Nothing runs until you press Run." in screen
    term.send("n")  # cancel: nothing ran
    term.wait_for(lambda s: "Run (y)" not in s, "the dialog to close")


def test_typing_while_a_card_has_focus_goes_to_the_prompt(terminal) -> None:
    term = terminal(160, 45)
    term.paste(NCCL)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer")
    term.send("\t")  # Tab: focus the first card
    term.pump(0.3)
    term.send("only on two nodes")
    screen = term.wait_for(lambda s: "only on two nodes" in s, "the typed text in the prompt")
    assert screen.count("only on two nodes") == 1


def test_quitting_while_a_check_runs_kills_it_and_exits_promptly(terminal, write_case) -> None:
    """ctrl+q with a check running: the check's processes are killed and the app is gone soon after (issue 14)."""
    folder = write_case("kbtest-sleeper", [("bash {name=sleeps timeout=120}", 'sleep 60 &\necho "sleeper $!"\nwait')])
    term = terminal(160, 45, "--cases", str(folder))
    term.send("/open kbtest-sleeper\r")
    term.wait_for(lambda s: "Checks (1)" in s, "the case view")
    term.send("r")
    term.wait_for(lambda s: "Run once (y)" in s, "the run dialog")
    term.send("y")
    screen = term.wait_for(lambda s: re.search(r"sleeper \d+", s) is not None, "the check's output")
    pid = int(re.search(r"sleeper (\d+)", screen).group(1))
    assert alive(pid)
    start = time.monotonic()
    term.send("\x11")  # ctrl+q
    term.child.expect(pexpect.EOF, timeout=30)
    assert time.monotonic() - start < 10
    end = time.monotonic() + 5
    while alive(pid):
        if time.monotonic() > end:
            pytest.fail(f"the check's process {pid} outlived the app")
        time.sleep(0.05)


def flat(text: str) -> str:
    """Screen text without spaces, line ends, box borders and scrollbar glyphs: a long line wrapped by the app
    still matches when the chat's scrollbar thumb is drawn on one of its rows."""
    return re.sub(r"[\s│╭╮╰╯─▁▂▃▄▅▆▇█▉▊▋▌▍▎▏▐▔▕]", "", text)


def prompt_text(screen: str) -> str:
    """The text in the prompt's box: the last box drawn on the screen (the footer is below it)."""
    lines = screen.splitlines()
    tops = [i for i, l in enumerate(lines) if l.lstrip().startswith("╭")]
    if not tops:
        return ""
    inside = []
    for line in lines[tops[-1] + 1:]:
        if line.lstrip().startswith("╰"):
            break
        inside.append(line.strip().strip("│").strip())
    return " ".join(x for x in inside if x)


def answered(screen: str) -> bool:
    """An answer is on the screen: its cards, a decline, or the log reader's lines above cards pushed below the fold."""
    done = "│ 1. " in screen or "No known case" in screen or "kb searched for" in screen
    return done and "searching" not in screen


def ask_and_wait(term: Terminal, text: str = NCCL) -> str:
    term.paste(text)
    term.send("\r")
    # a loaded 2-core CI machine answers the first search slowly; the bound is on hanging, not speed
    return term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer", timeout=120)


@pytest.mark.parametrize("keys", ["nn", "yy", "y only on two nodes"])
def test_keys_typed_fast_into_the_new_conversation_dialog_do_not_crash(terminal, keys) -> None:
    """ctrl+n, then `nn`/`yy` or the next question at once: the dialog answers once, the rest is typed
    into the prompt; the app lives on (a second dismiss popped the chat: ScreenStackError, exit 1)."""
    term = terminal(80, 24)
    ask_and_wait(term)
    term.send("\x0e")  # ctrl+n
    term.wait_for(lambda s: "Start a new conversation?" in s, "the new-conversation dialog")
    term.send(keys)
    rest = keys[1:]
    screen = term.wait_for(lambda s: "Start a new conversation?" not in s and prompt_text(s) == rest.strip(),
                           "the dialog to close, the rest typed into the prompt")
    term.pump(1.0)
    assert term.child.isalive(), term.text()
    screen = term.text()
    assert "internal error" not in screen and "Traceback" not in screen
    if keys.startswith("y"):
        assert "New conversation: the next message starts a fresh search." in screen
    else:
        assert "nccl-unhandled-system-error" in screen  # kept
    # the app still answers; each step waits for the prompt (a loaded machine applied a burst of
    # backspaces and letters out of step with the prompt's redraw)
    term.send("\x7f" * len(rest))
    term.wait_for(lambda s: prompt_text(s).startswith("Paste an error"), "the prompt emptied (its placeholder shown)")
    term.send("ECC error")
    term.wait_for(lambda s: prompt_text(s) == "ECC error", "the next question typed")
    term.send("\r")
    term.wait_for(lambda s: "ECC error" in s and "searching" not in s, "an answer after the dialog")


def test_an_unexpected_exception_takes_kbs_crash_path(terminal, tmp_path) -> None:
    """A bug anywhere in the app: one line naming the crash log, the conversation saved, exit 3
    (not Textual's traceback over the terminal, exit 1, everything lost). The bug is injected
    into the real binary by a sitecustomize module on PYTHONPATH."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "def _boom(self):\n    raise RuntimeError('injected by the test')\n"
        "import tui.screens.chat as _chat\n_chat.ChatScreen.action_export = _boom\n"
    )
    data = tmp_path / "data"
    term = terminal(160, 45, env={"PYTHONPATH": str(inject), "KB_DATA_DIR": str(data)})
    ask_and_wait(term)
    term.send("\x13")  # ctrl+s: export, which the injected bug breaks
    assert term.exit_status() == 3
    screen = term.text()
    assert "kb: internal error: RuntimeError: injected by the test" in screen, screen
    assert "Traceback" not in screen
    logs = list((data / "crashes").glob("crash-*.log"))
    kept = list((data / "crashes").glob("kb-incident-*.md"))
    assert len(logs) == 1 and "injected by the test" in logs[0].read_text()
    assert len(kept) == 1 and NCCL in kept[0].read_text()
    assert "the conversation is saved in" in screen.replace("\n", "")


def test_a_whole_log_pasted_with_cr_line_ends_gets_the_answer_of_the_same_log_with_lf(terminal, engine) -> None:
    """An ~80 KB log (kept aside as an attachment) pasted as terminals send it, CR line ends: the CUDA OOM,
    as for the same log with LF; it was read as one line, its last (Hydra's HYDRA_FULL_ERROR hint)."""
    from test_paste_text import whole_log

    from kb.logs.logsearch import search_text

    log = whole_log()
    assert len(log) > 64 * 1024
    lf_top = search_text(engine, log, use=("signature", "lexical")).results[0].id
    assert lf_top == "cuda-oom-training"
    term = terminal(160, 45)
    term.paste(log)  # every line end sent as CR
    term.wait_for(lambda s: re.search(r"\[pasted [\d.]+ KB, \d+ lines #1\]", s) is not None, "the paste's placeholder")
    term.send("\r")
    term.wait_for(answered, "the answer", timeout=240)
    term.pump(0.5)
    seen = [term.text()]
    for _ in range(6):  # the card's id may sit below the notes (longer while the dense model loads): PageDown
        if lf_top in seen[-1]:
            break
        term.send("\x1b[6~")
        term.pump(0.4)
        seen.append(term.text())
    screens = "\n".join(seen)
    assert "CUDA out of memory" in screens  # the OOM line was read, not only the last line
    assert lf_top in screens and "hydra-key-not-in-struct" not in screens, seen[-1]


def test_a_typed_path_to_a_log_is_read_as_that_file(terminal, tmp_path) -> None:
    """The welcome offers "a path to a log file": typed (not pasted) it is read as the file, and the answer says so."""
    from test_paste_text import whole_log

    log = tmp_path / "run.log"
    log.write_text(whole_log(8_000))
    term = terminal(160, 45)
    term.send(str(log))
    # a long temporary path wraps inside the prompt's box: compare without spaces, line ends and borders
    term.wait_for(lambda s: flat(str(log)) in flat(s), "the typed path")
    term.send("\r")
    term.wait_for(answered, "the answer", timeout=240)
    term.pump(0.5)
    seen = [term.text()]
    for _ in range(6):  # the card's id may sit below the log reader's lines: PageDown
        if "cuda-oom-training" in seen[-1]:
            break
        term.send("\x1b[6~")
        term.pump(0.4)
        seen.append(term.text())
    screens = "\n".join(seen)
    assert "No known case matches" not in screens
    assert "cuda-oom-training" in screens, seen[-1]
    note = flat(f"read {log} as a log file")
    for _ in range(6):  # the answer's notes are below its cards: PageDown from the prompt scrolls the chat
        if note in flat(term.text()):
            break
        term.send("\x1b[6~")
        term.pump(0.4)
    assert note in flat(term.text()), term.text()


def test_at_80x24_the_case_view_scrolls_by_keyboard(terminal) -> None:
    """PageDown scrolls the case's body (the Fix section needed the mouse at 80x24); Tab moves to the body,
    where Down scrolls it (focus stayed on the checks list)."""
    term = terminal(80, 24)
    term.send("/open cuda-oom-training\r")
    top = term.wait_for(lambda s: "Checks (" in s and "Symptoms" in s, "the case view with its body")
    assert "Fix" not in top.split("Checks (")[1]
    term.send("\t")  # to the body
    term.pump(0.3)
    term.send("\x1b[B" * 4)  # Down scrolls the body, not the checks' highlight
    def body(screen: str) -> list[str]:  # the left pane only: the checks list beside it may scroll too
        return [line[:40] for line in screen.splitlines()[3:20]]

    term.wait_for(lambda s: body(s) != body(top), "Down to scroll the body", timeout=10)
    for _ in range(12):
        term.send("\x1b[6~")  # PageDown
        term.pump(0.4)
        if re.search(r"^ Fix\b", term.text(), re.M):
            break
    else:
        raise AssertionError(f"PageDown never reached the Fix section:\n{term.text()}")


def test_at_80x24_wrapped_check_output_keeps_the_ends_of_lines(terminal, write_case) -> None:
    """The side pane is about 30 cells wide at 80x24: a long output line wraps whole (RichLog rendered it 78 wide and cut it)."""
    folder = write_case("kbtest-long-line", [("bash {name=long timeout=10}",
                                              'echo "the check looked at every device of this node and it says at the end ENDMARK42"')])
    term = terminal(80, 24, "--cases", str(folder))
    term.send("/open kbtest-long-line\r")
    term.wait_for(lambda s: "Checks (1)" in s, "the case view")
    term.send("r")
    term.wait_for(lambda s: "Run once (y)" in s, "the run dialog")
    term.send("y")
    term.wait_for(lambda s: "ENDMARK42" in s, "the end of the output line", timeout=30)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_r_after_a_real_paste_saves_a_redacted_private_copy(terminal) -> None:
    """Issue 26: a bracketed paste holding HF_TOKEN, then ctrl+r: the saved incident copy is redacted and 0600."""
    import os
    import stat
    from pathlib import Path

    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    term = terminal(160, 45)
    term.paste(f"export HF_TOKEN={token}\npanic: runtime error: invalid memory address or nil pointer dereference\n"
               "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a3b2c]\n\ngoroutine 1 [running]:\nmain.main()")
    term.send("\r")
    term.wait_for(lambda s: "No known case" in s or "nil pointer" in s, "the answer")
    term.send("\x12")  # ctrl+r
    folder = Path(os.environ["KB_DATA_DIR"]) / "incidents"
    deadline = time.monotonic() + 60
    saved: list[Path] = []
    while time.monotonic() < deadline and not saved:
        term.pump(0.2)
        saved = list(folder.glob("paste-*.log")) if folder.is_dir() else []
    assert len(saved) == 1, term.text()
    term.pump(0.5)
    text = saved[0].read_text(encoding="utf-8")
    assert token not in text and "nil pointer dereference" in text
    assert stat.S_IMODE(saved[0].stat().st_mode) == 0o600


def test_a_vague_description_gets_a_question_that_names_the_nearest_entries(shared_index_dir) -> None:
    """With the dense scorer (the app's normal state), a description nothing separates is answered with the
    question that tells the nearest entries apart, one line per entry, as a terminal shows it."""
    term = Terminal(160, 45, shared_index_dir, dense=True, env={"COLUMNS": "160", "LINES": "45"})
    try:
        term.wait_for(lambda s: "Paste an error" in s and re.search(r"\d+ cases", s) is not None, "the app's first screen", timeout=120)
        term.wait_for(lambda s: "dense" in s, "the dense scorer ready", timeout=120)
        term.send("GRPO training behaves strangely on my cluster")
        term.send("\r")
        term.wait_for(lambda s: "Which of these is closest to what your run shows?" in s, "the question", timeout=120)
        term.pump(0.5)
        # the card's lines without its frame, joined: a narrow terminal wraps them
        card = " ".join(line.strip(" │╭╮╰╯─") for line in term.text().splitlines())
        card = re.sub(r"\s+", " ", card)
        listed = re.search(r"nearest, not a match: (.+?) Which of these is closest", card)
        assert listed is not None, card
        ids = [i.strip() for i in listed.group(1).split(",")]
        asked = card.split("Which of these is closest to what your run shows?", 1)[1]
        named = [i for i in ids if re.search(rf": {re.escape(i)}\b", asked)]
        assert len(named) >= 2, (ids, asked)  # one choice per nearest entry, each ending in its id
    finally:
        term.close()
