"""Pastes as terminals send them (issue 26): CR / CRLF line ends, and a lone path to a file.

tmux's `paste-buffer -p` and many terminals send a paste's line breaks as CR. The log
reader took a whole log with CR line ends for one line redrawn by a progress bar and
searched only its last line (Hydra's "Set the environment variable HYDRA_FULL_ERROR=1"),
answering hydra-key-not-in-struct for a CUDA OOM."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kb.commands.common import read_log_arg, read_query
from kb.text.paste_text import named_file, normalise_line_endings
from kb.text.signals import decode_bytes

ROOT = Path(__file__).resolve().parent.parent

OOM_TAIL = """Error executing job with overrides: ['trainer.n_gpus_per_node=8']
Traceback (most recent call last):
  File "/opt/verl/verl/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
  File "/opt/verl/verl/workers/actor/dp_actor.py", line 380, in update_policy
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.10 GiB of which \
1.02 GiB is free. Of the allocated memory 75.11 GiB is allocated by PyTorch, and 1.44 GiB is reserved by PyTorch but unallocated.

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def whole_log(size: int = 78_000) -> str:
    """A healthy run's step-metric lines (eval/healthy) repeated to `size`, then a CUDA OOM under Hydra: over 64 KB,
    so the app keeps the paste aside as an attachment."""
    healthy = (ROOT / "eval/healthy/public-verl-step-metrics.log").read_text()
    body = ""
    while len(body) < size:
        body += healthy
    return body + OOM_TAIL


def test_line_ends_are_made_lf() -> None:
    assert normalise_line_endings("a\r\nb\r\n") == "a\nb\n"
    assert normalise_line_endings("a\rb\rc") == "a\nb\nc"  # a paste through tmux: CR only
    assert normalise_line_endings("a\rb\r") == "a\nb\n"
    assert normalise_line_endings("a\rb\n") == "a\nb\n"  # CR line ends, one LF at the very end
    # a log with LF line ends keeps a progress bar's CRs: the log reader keeps its last drawing
    assert normalise_line_endings("start\n 10%\r 50%\r100%\ndone\n") == "start\n 10%\r 50%\r100%\ndone\n"
    assert normalise_line_endings("plain") == "plain"


def test_every_reader_of_a_log_makes_line_ends_lf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert decode_bytes(b"a\rb\rc") == "a\nb\nc"
    log = tmp_path / "cr.log"
    log.write_bytes(b"line one\rline two\r")
    assert read_log_arg(log) == "line one\nline two\n"  # --file, kb new --from-log, --baseline
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"x\r\ny\r\n")))
    assert read_log_arg("-") == "x\ny\n"  # standard input
    assert read_query(["first\rsecond"], None) == ("first\nsecond", True)  # a quoted paste on the command line


def test_a_lone_path_to_an_existing_file_is_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.log"
    log.write_text("RuntimeError: boom\n")
    assert named_file(str(log)) == log
    assert named_file(f"  '{log}'\n") == log
    assert named_file(str(tmp_path)) is None  # a folder
    assert named_file(str(tmp_path / "missing.log")) is None
    assert named_file(f"{log} crashed") is None  # words around it: a query
    monkeypatch.chdir(tmp_path)
    assert named_file("run.log") is None  # not path-shaped: a one-word query stays a query
    assert named_file("./run.log") == Path("./run.log")
    text, typed = read_query([str(log)], None)
    assert (text, typed) == ("RuntimeError: boom\n", False)
    assert f"reading {log} as a log file" in capsys.readouterr().err


@pytest.mark.slow
def test_kb_search_gives_the_same_answer_for_cr_crlf_lf_and_a_path(shared_index_dir: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from kb.cli import main

    log = whole_log()
    tops = {}
    for name, text in (("lf", log), ("cr", log.replace("\n", "\r")), ("crlf", log.replace("\n", "\r\n"))):
        path = tmp_path / f"{name}.log"
        path.write_bytes(text.encode())
        for how, argv in (("file", ["--file", str(path)]), ("path", [str(path)]), ("text", [text])):
            main(["search", "--json", "--no-dense", "--index-dir", str(shared_index_dir), *argv])
            answer = json.loads(capsys.readouterr().out)
            tops[name, how] = (answer["results"][0]["id"], answer["results"][0]["confidence"])
    assert set(tops.values()) == {("cuda-oom-training", "medium")}, tops
