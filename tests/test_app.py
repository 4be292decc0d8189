"""The kb app driven with Textual's Pilot, over the real engine and the real cases.

The index is built once per session into a temporary folder (the first build
exports the model to ONNX); every test's app reuses that open Engine.
Tests wait on workers or poll with `wait_until`, never on fixed sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual import events

from kb.search.engine import Engine
from tui.app import KbApp
from tui.conversation import Conversation, Turn
from tui.report import render_report
from tui.screens.case import CaseScreen
from tui.screens.confirm import ConfirmRunScreen
from tui.screens.help import HelpScreen
from tui.widgets.prompt import PromptArea, pasted_path

NCCL = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5"
)
GO_PANIC = """panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a3b2c]

goroutine 1 [running]:
main.main()
\t/home/u/x/main.go:12 +0x1c
"""
SIZE = (120, 40)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def wait_until(pilot, cond: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def ready(pilot) -> KbApp:
    app: KbApp = pilot.app
    await wait_until(pilot, lambda: app.caseset is not None, what="the cases")
    return app


async def send(pilot, text: str) -> Turn:
    app: KbApp = pilot.app
    prompt = app.chat.query_one(PromptArea)
    prompt.focus()
    prompt.load_text(text)
    before = len(app.chat.conv.turns)
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(app.chat.conv.turns) > before and not app.chat.conv.turns[-1].pending, what="the answer")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return app.chat.conv.turns[-1]


def harmless_case(write_case, **extra) -> Path:
    return write_case(
        "kbtest-harmless",
        [
            ('bash {name=says-confirmed timeout=10 description="prints and exits 1"}', 'what="$KB_PARAM_WHAT"\necho "looking at $what"\nexit 1'),
            ("bash {name=sleeps timeout=120}", "echo started\nsleep 60\necho never"),
        ],
        params={"what": "the-node"},
        **extra,
    )


# ---------------------------------------------------------------- search


async def test_nccl_paste_first_card_and_open(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        turn = await send(pilot, NCCL)
        assert turn.answer is not None and not turn.answer.abstained
        cards = app.chat.latest_cards()
        assert cards[0].result.id == "nccl-unhandled-system-error"
        assert any("unhandled system error" in line for line in cards[0].result.matched_lines)
        assert any("ProcessGroupNCCL" in s for s in turn.answer.searched_for)
        # Tab from the prompt reaches the first card; Enter opens it.
        await pilot.press("tab")
        assert app.focused is cards[0]
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen), what="the case screen")
        assert app.screen.case.id == "nccl-unhandled-system-error"
        assert len(app.screen.case.checks) >= 1
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, CaseScreen), what="back to the chat")


async def test_searched_for_lists_the_lines_kb_search_explain_lists(engine: Engine, shared_index_dir: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The app's "kb searched for" is the log reader's kept lines, every one, as `kb search --explain` prints them:
    NCCL's `Last error:` detail (the failing connect) included, no bare frames."""
    from test_logs_reduce import NCCL_LAST_ERROR

    from kb.cli import main

    log = tmp_path / "nccl.log"
    log.write_text(NCCL_LAST_ERROR)
    main(["search", "--file", str(log), "--explain", "--no-dense", "--index-dir", str(shared_index_dir)])
    cli = [line.removeprefix("  | ") for line in capsys.readouterr().out.splitlines() if line.startswith("  | ")]
    assert any(line.startswith("socketStartConnect: Connect to 10.0.0.13") for line in cli), cli

    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, NCCL_LAST_ERROR)
        shown = str(app.chat.query_one(".searched").render()).splitlines()
        assert shown[0] == "kb searched for:"
        assert [line.strip() for line in shown[1:]] == cli
        assert not any(line.strip().startswith("File ") for line in shown)


async def test_baseline_command_sets_aside_the_good_runs_lines(engine: Engine, tmp_path: Path) -> None:
    """`/baseline PATH` attaches a good run for the conversation (issue 18): every search sets aside its lines."""
    good = tmp_path / "good.log"
    good.write_text("[init] rank 0/2 connecting to 127.0.0.1:40000\nstep 1/10 loss=0.5 lr=0.01\n"
                    "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.\n")
    bad = ("[init] rank 0/2 connecting to 127.0.0.1:29500\nstep 1/10 loss=0.9 lr=0.01\n"
           "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.\n"
           "[rank1]: KeyError: 'warmup_steps'\n")
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text(f"/baseline {tmp_path / 'missing.log'}")
        await pilot.press("enter")
        await pilot.pause()
        assert app.chat.conv.baseline is None  # a bad path is refused, with a message
        prompt.load_text(f"/baseline {good}")
        await pilot.press("enter")
        await pilot.pause()
        assert app.chat.conv.baseline == good.resolve()
        assert "baseline good.log" in str(app.chat.query_one("#status").render())
        turn = await send(pilot, bad)
        assert turn.answer is not None
        assert turn.answer.extra["baseline"] == {"path": str(good.resolve()), "lines_set_aside": 3}
        assert turn.answer.searched_for == ["KeyError: 'warmup_steps'"]
        summary = str(app.chat.query_one(".logsummary").render())
        assert "3 line(s) also in the good run set aside" in summary
        prompt.load_text("/baseline off")
        await pilot.press("enter")
        await pilot.pause()
        assert app.chat.conv.baseline is None
        assert "baseline" not in str(app.chat.query_one("#status").render())


async def test_status_line_spins_while_a_search_runs(engine: Engine) -> None:
    """A visible loading state: while a search is in progress the status line spins and says so; then it stops."""
    app = KbApp(engine=engine, cursor_blink=False)
    release = threading.Event()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        status = app.chat.query_one("#status")
        assert "searching" not in str(status.render())
        real_wait = app.wait_engine

        def slow_wait(cancelled):
            release.wait(15)
            return real_wait(cancelled)

        app.wait_engine = slow_wait  # type: ignore[method-assign]
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text(NCCL)
        await pilot.press("enter")
        await wait_until(pilot, lambda: "searching" in str(status.render()), what="the status to say searching")
        first = str(status.render())
        await wait_until(pilot, lambda: str(status.render()) != first, what="the spinner to turn")
        assert any(ch in str(status.render()) for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
        release.set()
        await wait_until(pilot, lambda: not app.chat.conv.turns[-1].pending, what="the answer")
        await pilot.pause()
        shown = str(status.render())
        assert "searching" not in shown and not any(ch in shown for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


async def test_multiline_paste_does_not_send_and_enter_does(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.focus()
        log = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n" + NCCL + "\n"
        prompt.post_message(events.Paste(log))
        await pilot.pause()
        assert app.chat.conv.turns == []
        assert "ProcessGroupNCCL" in prompt.text
        await pilot.press("ctrl+j")
        await pilot.press(*"more")
        assert prompt.text.endswith("\nmore")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.conv.turns and not app.chat.conv.turns[0].pending)
        assert prompt.text == ""
        assert app.chat.latest_cards()[0].result.id == "nccl-unhandled-system-error"


async def test_prompt_history_up_down(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "first message")
        await send(pilot, "second message")
        prompt = app.chat.query_one(PromptArea)
        await pilot.press("up")
        assert prompt.text == "second message"
        await pilot.press("up")
        assert prompt.text == "first message"
        await pilot.press("down")
        assert prompt.text == "second message"
        await pilot.press("down")
        assert prompt.text == ""


async def test_abstains_on_go_panic_and_offers_new_case(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        turn = await send(pilot, GO_PANIC)
        assert turn.answer is not None and turn.answer.abstained
        assert app.chat.latest_cards() == []
        assert app.chat.query(".abstain")
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        import os

        saved = list((Path(os.environ["KB_DATA_DIR"]) / "incidents").glob("paste-*.log"))
        assert len(saved) == 1 and "nil pointer dereference" in saved[0].read_text()
        outcome = app.last_new_case
        assert outcome.draft_path is not None and outcome.draft_path.is_file(), outcome.message
        assert "nil pointer dereference" in outcome.draft_path.read_text()


async def test_ctrl_r_saves_a_redacted_private_incident_copy(engine: Engine) -> None:
    """Issue 26: the copy ctrl+r keeps of the paste held the raw HF_TOKEN, world-readable."""
    import os
    import stat

    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        turn = await send(pilot, f"export HF_TOKEN={token}\n" + GO_PANIC)
        assert turn.answer is not None
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        saved = list((Path(os.environ["KB_DATA_DIR"]) / "incidents").glob("paste-*.log"))
        assert len(saved) == 1
        text = saved[0].read_text()
        assert token not in text and "HF_TOKEN=<" in text and "nil pointer dereference" in text
        assert stat.S_IMODE(saved[0].stat().st_mode) == 0o600
        outcome = app.last_new_case
        if outcome.draft_path is not None:
            assert token not in outcome.draft_path.read_text()


async def test_follow_up_refines_and_new_conversation(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        first = await send(pilot, "NCCL unhandled system error when training starts")
        follow = await send(pilot, "only on multi-node, single node works")
        assert "NCCL unhandled system error" in follow.context
        assert follow.answer is not None and follow.answer.results
        assert follow.answer.results[0].id == "nccl-unhandled-system-error"
        assert first.context == ""
        # The same words without the conversation rank differently: the context did the refining.
        alone = engine.search("only on multi-node, single node works")
        assert [r.id for r in alone.results] != [r.id for r in follow.answer.results]
        await pilot.press("ctrl+n")
        # A conversation with answers is offered for export before it is cleared.
        await wait_until(pilot, lambda: type(app.screen).__name__ == "AskScreen", what="the new-conversation question")
        await pilot.press("n")  # keep it
        assert len(app.chat.conv.turns) == 2
        app.chat.query_one(PromptArea).load_text("half-typed")
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "AskScreen", what="the question again")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.chat.conv.turns == [], what="the conversation cleared")
        assert app.chat.query_one(PromptArea).text == ""  # the prompt starts fresh too
        fresh = await send(pilot, "only on multi-node, single node works")
        assert fresh.context == ""


async def test_escape_cancels_search_in_progress(engine: Engine) -> None:
    class SlowStart(KbApp):
        def _open_engine(self) -> None:  # the index never opens: the search waits
            pass

    app = SlowStart(engine=None, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text(NCCL)
        await pilot.press("enter")
        await pilot.pause()
        assert app.chat.conv.turns[0].pending
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        assert app.chat.conv.turns[0].cancelled
        assert app.chat.query(".cancelled")


# ---------------------------------------------------------------- big pastes


async def test_huge_paste_is_kept_aside(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    noise = "step 12 | loss 0.4213 | grad_norm 1.02 | lr 1e-6 | throughput 3021 tok/s\n"
    big = noise * (20_000_000 // len(noise)) + NCCL + "\n"
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.focus()
        prompt.post_message(events.Paste(big))
        await pilot.pause()
        assert len(prompt.text) < 200
        assert prompt.text.startswith("[pasted ") and "MB" in prompt.text and "lines" in prompt.text
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.chat.conv.turns[0].pending, timeout=60)
        turn = app.chat.conv.turns[0]
        assert turn.text == big
        assert any("unhandled system error" in s for s in turn.answer.searched_for)
        assert app.chat.latest_cards()[0].result.id == "nccl-unhandled-system-error"
        # What a follow-up carries is the extracted lines, not 20 MB.
        assert len(app.chat.conv.context()) < 5000


async def test_pasted_log_path_loads_the_file(engine: Engine, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    # the file's first line reads like a sentence; it is the program's, not the user's words
    log.write_text("Starting the rollout workers now\n" + "INFO starting\n" * 100 + NCCL + "\n", encoding="utf-8")
    assert pasted_path(f"  {log}\n") == log
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.focus()
        prompt.post_message(events.Paste(str(log)))
        await pilot.pause()
        assert prompt.text.startswith(f"[log file {log}")
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.chat.conv.turns[0].pending)
        assert app.chat.latest_cards()[0].result.id == "nccl-unhandled-system-error"
        assert "Starting the rollout workers now" not in app.chat.conv.turns[0].answer.searched_for


# ---------------------------------------------------------------- checks


async def test_run_check_through_confirm_modal(engine: Engine, write_case) -> None:
    folder = harmless_case(write_case)
    app = KbApp([folder], engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text("/open kbtest-harmless")
        await pilot.press("enter")  # an omnibox command: no search turn
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen))
        case_screen = app.screen
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmRunScreen), what="the confirm dialog")
        dialog = app.screen
        assert dialog.values == {"what": "the-node"}
        plan = dialog.plans()[0]
        assert plan.code == plan.check.code and plan.environment == {"KB_PARAM_WHAT": "the-node"}  # value beside the code, not in it
        assert case_screen.results == []  # nothing runs before yes
        await pilot.press("y")
        await wait_until(pilot, lambda: case_screen.verdicts.get("says-confirmed") is not None, what="the verdict")
        assert case_screen.verdicts["says-confirmed"] == "confirmed"
        await wait_until(pilot, lambda: "looking at the-node" in case_screen.query_one("CheckOutput").log_text())
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, CaseScreen))
        assert app.chat.conv.turns == []
        assert [r.result.verdict for r in app.chat.conv.checks] == ["confirmed"]
        assert app.chat.query(".check")


async def test_confirm_no_runs_nothing(engine: Engine, write_case) -> None:
    folder = harmless_case(write_case)
    app = KbApp([folder], engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_case("kbtest-harmless")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen))
        case_screen = app.screen
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmRunScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is case_screen)
        await app.workers.wait_for_complete()
        assert case_screen.results == [] and app.chat.conv.checks == []


async def test_dialog_says_which_checks_will_be_skipped_before_run(engine: Engine, write_case) -> None:
    """A check whose needs are missing is said to be skipped in the dialog, before the user confirms (issue 14)."""
    folder = write_case("kbtest-needs", [
        ("bash {name=needs-a-missing-tool timeout=10 needs=cmd:kb-no-such-tool-xyz}", "kb-no-such-tool-xyz --version"),
        ("bash {name=needs-sh timeout=10 needs=cmd:sh}", "echo fine"),
    ])
    app = KbApp([folder], engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_case("kbtest-needs")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen))
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmRunScreen))
        dialog = app.screen
        await wait_until(pilot, lambda: not any(r == "\0checking" for r in dialog.unmet.values()), what="the needs detected")
        await pilot.pause()
        first = str(dialog.query_one("#plan-head-0").render())
        second = str(dialog.query_one("#plan-head-1").render())
        assert "will be skipped: needs kb-no-such-tool-xyz on PATH; not found" in first
        assert "needs: met on this node" in second and "skipped" not in second
        assert "1 of 2 checks will be skipped" in str(dialog.query_one("#dialog-missing").render())
        await pilot.press("n")


async def test_cancel_running_check(engine: Engine, write_case) -> None:
    folder = harmless_case(write_case)
    app = KbApp([folder], engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_case("kbtest-harmless")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen))
        case_screen = app.screen
        await pilot.press("down", "r")  # the second check: sleeps
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmRunScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: "started" in case_screen.query_one("CheckOutput").log_text(), what="the check to start")
        assert case_screen.running
        t0 = time.monotonic()
        await pilot.press("escape")  # cancels, does not leave
        assert isinstance(app.screen, CaseScreen)
        await wait_until(pilot, lambda: "sleeps" in case_screen.verdicts, timeout=10, what="the cancelled verdict")
        assert time.monotonic() - t0 < 8
        assert case_screen.verdicts["sleeps"] == "inconclusive"
        assert case_screen.results[-1].reason == "cancelled"
        await wait_until(pilot, lambda: not case_screen.running)


async def test_copy_keys(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.open_case("nccl-unhandled-system-error")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen))
        await pilot.press("c")
        assert app.clipboard == app.screen.case.checks[0].code
        await pilot.press("f")
        assert "NCCL_SOCKET_IFNAME" in app.clipboard
        await pilot.press("s")
        assert "unhandled system error (run with NCCL_DEBUG=INFO for details)" in app.clipboard


# ---------------------------------------------------------------- dense model


async def test_dense_results_merge_in_when_ready(engine: Engine) -> None:
    release = threading.Event()

    class LateModel(KbApp):
        def _load_dense(self) -> None:
            def later() -> None:
                release.wait(30)
                self.call_from_thread(self.on_dense_loaded, __import__("tui.messages").messages.DenseLoaded(self.engine.load_dense(), ""))

            threading.Thread(target=later, daemon=True).start()

    fresh = Engine(engine.index)  # same index, model not loaded yet
    app = LateModel(engine=fresh, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        turn = await send(pilot, NCCL)
        assert not turn.answer.dense_used
        assert app.chat.latest_cards()[0].result.id == "nccl-unhandled-system-error"
        release.set()
        await wait_until(pilot, lambda: app.chat.conv.turns[0].answer.dense_used, what="the re-rank")
        await app.workers.wait_for_complete()
        await pilot.pause()
        cards = app.chat.latest_cards()
        assert cards[0].result.id == "nccl-unhandled-system-error"
        assert "dense" in cards[0].result.scores


async def test_dense_failure_is_said_and_search_goes_on(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = Engine(engine.index)

    def fail() -> bool:
        broken._encoder_error = "dense model failed to load: OSError: no such file"
        return False

    monkeypatch.setattr(broken, "load_dense", fail)
    app = KbApp(engine=broken, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(app.chat.query_one("#status").render())
        assert "dense model unavailable" in status
        await send(pilot, NCCL)
        assert app.chat.latest_cards()[0].result.id == "nccl-unhandled-system-error"


# ---------------------------------------------------------------- export, help, palette


async def test_export_report(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, NCCL)
        await pilot.press("ctrl+s")
        await pilot.pause()
        reports = list(tmp_path.glob("kb-incident-*.md"))
        assert len(reports) == 1
        text = reports[0].read_text()
        assert "nccl-unhandled-system-error" in text and "kb searched for" in text


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_report_renders_checks_and_abstention(anyio_backend: str) -> None:
    from kb.checks.runner import CheckResult
    from tui.conversation import CheckRecord

    conv = Conversation(turns=[Turn(label="x", text="```weird```")])
    conv.checks.append(CheckRecord("T", CheckResult("c", "n", "ruled out", 0, 0.1, "ok\n", "exit status 0", {"a": "b"}, "bash", "t")))
    md = render_report(conv)
    assert "````text" in md and "**ruled out**" in md and "`a=b`" in md


async def test_help_and_command_palette(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("New conversation", "Export report", "Open top case", "New case from paste", "Help: keys"):
            assert wanted in titles
        assert "Change theme" not in titles  # only kb's own actions (and Quit)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        # The palette finds cases by id or title; Enter opens the case. The whole id: "nccl unhandled" alone also
        # fits a TRL entry whose title quotes NCCL's "unhandled system error" (7 December), and fuzzy order is Textual's
        await pilot.press(*"nccl-unhandled-system-error")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "CaseScreen", what="the case opened from the palette")
        assert app.screen.case.id == "nccl-unhandled-system-error"


async def test_help_shows_keys_as_the_footer_does(engine: Engine) -> None:
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        keys = [key for _, rows in app.screen.sections for key, _ in rows]
        text = " ".join(keys)
        assert "question_mark" not in text and "escape" not in text and "ctrl+" not in text
        assert "^o" in keys and "?" in text and "esc" in text


async def test_a_case_drafted_with_ctrl_r_is_named_in_the_transcript_and_opens_at_once(engine: Engine) -> None:
    """ctrl+r's draft: its path stays in the transcript (a toast went away with it), and `/open ID` opens it
    in this session (it said "No case with id" until a restart re-indexed the folder)."""
    from textual.widgets import Static

    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, GO_PANIC)
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        draft = app.last_new_case.draft_path
        assert draft is not None
        await wait_until(pilot, lambda: any(str(draft) in str(w.render()) for w in app.chat.query(".info").results(Static)),
                         what="the draft's path in the transcript")
        case_id = next(i for i, p in app.drafted.items() if p == draft)
        prompt = app.chat.query_one(PromptArea)
        prompt.focus()
        prompt.load_text(f"/open {case_id}")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CaseScreen), what="the drafted case opened")
        assert app.screen.case.id == case_id


async def test_baseline_attached_after_an_answer_searches_the_latest_message_again(engine: Engine, tmp_path: Path) -> None:
    """`/baseline PATH` after the answer re-runs the latest search with it, in place (it only applied to the next
    message); `/baseline off` re-runs it without. It is in the help screen and the command palette."""
    good = tmp_path / "good.log"
    good.write_text("[init] rank 0/2 connecting to 127.0.0.1:40000\nstep 1/10 loss=0.5 lr=0.01\n"
                    "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.\n")
    bad = ("[init] rank 0/2 connecting to 127.0.0.1:29500\nstep 1/10 loss=0.9 lr=0.01\n"
           "train.py:66: UserWarning: Converting a tensor to a scalar may lead to unexpected behavior.\n"
           "[rank1]: KeyError: 'warmup_steps'\n")
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        turn = await send(pilot, bad)
        assert turn.answer is not None and "baseline" not in turn.answer.extra
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text(f"/baseline {good}")
        await pilot.press("enter")
        await wait_until(pilot, lambda: turn.answer is not None and "baseline" in turn.answer.extra, what="the search again")
        assert turn.answer.extra["baseline"]["lines_set_aside"] == 3
        assert len(app.chat.conv.turns) == 1  # in place, not a new message
        assert "3 line(s) also in the good run set aside" in str(app.chat.query_one(".logsummary").render())
        prompt.load_text("/baseline off")
        await pilot.press("enter")
        await wait_until(pilot, lambda: turn.answer is not None and "baseline" not in turn.answer.extra, what="the search without")
        assert "Baseline" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert any("/baseline PATH" in key for _, rows in app.screen.sections for key, _ in rows)


async def test_stacks_command_shows_the_odd_one_out_as_a_card(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/stacks` runs kb stacks in a worker and shows its answer (issue 27); here on dumps captured from a real job."""
    from kb.hangs import analyse as hangs_analyse
    from kb.hangs.dump import parse_json
    from kb.hangs.find import TrainingProcess

    dumps_dir = Path(__file__).parent / "stacks_dumps"

    def fake_report(**_: object) -> hangs_analyse.Analysis:
        procs = [TrainingProcess(100 + r, 1, "rank", "python train.py", r, r, 4, node="node-a") for r in range(4)]
        dumps = {}
        for r in range(4):
            d = parse_json(100 + r, (dumps_dir / f"mismatch_rank{3 if r == 3 else 0}.json").read_text())
            d.threads[0].os_id = 100 + r
            dumps[100 + r] = [d]
        return hangs_analyse.analyse(procs, dumps)

    monkeypatch.setattr(hangs_analyse, "stacks_report", fake_report)
    app = KbApp(engine=engine, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat.query_one(PromptArea)
        prompt.load_text("/stacks")
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(app.chat.query(".stacks")), what="the stacks card")
        card = str(app.chat.query_one(".stacks").render())
        assert "rank 3 waits in barrier while ranks 0, 1, 2 wait in all_reduce" in card
        assert "Open: kb show nccl-watchdog-timeout" in card
        assert app.chat.conv.turns == []  # a command, not a search
