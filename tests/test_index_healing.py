"""The index heals itself or says why it cannot, in one line; never a crash, never a silent loss (issue 11, point 8).

Every test works on a tiny index: a temporary folder of three small cases and
an index folder in tmp. Where dense vectors matter, a deterministic hash
encoder stands in for the model, so the index bookkeeping (rows, counts,
NaN) is what is tested, in seconds, without exporting the real model.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from casefiles import write_simple_cases

import kb.index.model_export
import kb.index.opener
from kb.core.errors import UsageError
from kb.index.opener import open_index
from kb.search.engine import Engine

ROOT = Path(__file__).resolve().parent.parent

TINY = {
    "tiny-widget": ("WidgetError: the frobnicator overheated", "The frobnicator overheats", "training stops when the widget gets hot"),
    "tiny-sprocket": ("GadgetError: the sprocket jammed", "The sprocket jams", "the gadget stops turning"),
    "tiny-flux": ("FluxError: capacitor leaking flux", "The flux capacitor leaks", "time travel fails at 88 mph"),
}


def write_cases(folder: Path) -> Path:
    return write_simple_cases(folder, TINY)


class HashEncoder:
    """Deterministic unit vectors from a text's sha256: stands in for the model in bookkeeping tests."""

    dim = 16

    def encode(self, texts, on_batch=None):
        vecs = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            raw = np.frombuffer(hashlib.sha256(text.encode()).digest()[: self.dim], dtype=np.uint8).astype(np.float32) + 1
            vecs[i] = raw / np.linalg.norm(raw)
        if on_batch:
            on_batch(len(texts))
        return vecs


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    return write_cases(tmp_path / "team"), tmp_path / "index"


@pytest.fixture
def hash_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    info = {"enabled": True, "reason": "", "model": "hash", "model_path": "/nonexistent", "weights_sha256": "hash-encoder-test"}
    monkeypatch.setattr(kb.index.model_export, "prepare_model", lambda root, spec, err, texts: (dict(info), HashEncoder()))
    monkeypatch.setattr(kb.index.model_export, "export_check", lambda models, sha: {"weights_sha256": sha} if sha == info["weights_sha256"] else None)


def open_tiny(team: Path, index_dir: Path, dense: bool = False):
    return open_index([team], index_dir=index_dir, include_builtin=False, progress=False, dense=dense)


def answers(idx) -> None:
    eng = Engine(idx)
    for cid, (sig, _, _) in TINY.items():
        assert eng.search(f"Traceback (most recent call last):\n{sig} at step 7", use=("signature", "lexical")).results[0].id == cid


def total_texts(idx) -> int:
    return sum(len(d["dense_texts"]) for d in idx.docs)


# ---------------------------------------------------------------- docs.json of the wrong shape


@pytest.mark.parametrize(
    "content, words",
    [
        ('{"id": "tiny-widget"}', "docs.json is not a list"),
        ("[1, 2, 3]", "docs.json entry 0 is not a case record"),
        ('[{"id": "tiny-widget"}, {"id": "tiny-flux"}, {"id": "tiny-sprocket"}]', "docs.json entry 0 has no valid 'title'"),
        ("[]", "docs.json does not hold the cases the manifest lists"),
    ],
    ids=["dict", "ints", "records-missing-fields", "empty-list"],
)
def test_docs_json_of_the_wrong_shape_is_rebuilt_and_said(tiny, content: str, words: str) -> None:
    team, index_dir = tiny
    first = open_tiny(team, index_dir)
    (first.generation / "docs.json").write_text(content, encoding="utf-8")
    again = open_tiny(team, index_dir)
    assert again.generation != first.generation  # not "current": it was rebuilt
    assert [n for n in again.status.notes if words in n and "rebuilding" in n], again.status.notes
    answers(again)


# Slow lane: three real processes each build an index of the 438 built-in cases. The fast lane
# keeps every damage in process on the tiny index (test_docs_json_of_the_wrong_shape_is_rebuilt_and_said).
@pytest.mark.slow
def test_kb_search_and_kb_index_after_a_damaged_docs_json(tmp_path: Path) -> None:
    """The CLI: no exit 3, one line saying what was wrong, and `kb index` does not call it current."""
    team = write_cases(tmp_path / "team")
    env = dict(os.environ, PYTHONPATH=str(ROOT), KB_INDEX_DIR=str(tmp_path / "index"), KB_MODEL_DIR=str(tmp_path / "no-model"))

    def kb(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kb.cli", *args], env=env, capture_output=True, text=True, timeout=300)

    # no model here: dense is off the same way for `kb index` and `kb search`, so the index is shared
    built = kb("index", "--cases", str(team), "--json")
    assert built.returncode == 0, built.stderr
    gen = Path(json.loads(built.stdout)["index"])
    (gen / "docs.json").write_text('{"x": 1}', encoding="utf-8")
    index = kb("index", "--cases", str(team), "--json")
    assert index.returncode == 0, index.stderr
    info = json.loads(index.stdout)
    assert info["index"] != str(gen), "kb index called a damaged index current"
    assert any("docs.json is not a list" in n for n in info["notes"]), info
    (Path(info["index"]) / "docs.json").write_text("[1, 2, 3]", encoding="utf-8")
    search = kb("search", "--cases", str(team), "WidgetError: the frobnicator overheated")
    assert search.returncode == 0, search.stderr
    assert "tiny-widget" in search.stdout
    assert "docs.json entry 0 is not a case record" in search.stdout + search.stderr


# ---------------------------------------------------------------- vectors: rows out of range, NaN


def test_out_of_range_rows_rebuild_every_vector_not_zero(tiny, hash_dense) -> None:
    team, index_dir = tiny
    first = open_tiny(team, index_dir, dense=True)
    assert first.status.dense and first.status.vectors == total_texts(first) > 0
    rows = np.load(first.generation / "rows.npy")
    np.save(first.generation / "rows.npy", (rows + 1000).astype(rows.dtype), allow_pickle=False)
    again = open_tiny(team, index_dir, dense=True)
    assert again.generation != first.generation
    assert any("rows.npy points outside the cases" in n for n in again.status.notes), again.status.notes
    # dense on must mean vectors: every dense text has its vector again
    assert again.status.dense and again.status.vectors == total_texts(again)
    assert sorted(again.status.rebuilt) == sorted(TINY)
    assert np.array_equal(again.vectors, first.vectors)


def test_rows_out_of_case_order_are_rebuilt(tiny, hash_dense) -> None:
    team, index_dir = tiny
    first = open_tiny(team, index_dir, dense=True)
    rows = np.load(first.generation / "rows.npy")
    np.save(first.generation / "rows.npy", rows[::-1].copy(), allow_pickle=False)  # in range, same counts, wrong order
    again = open_tiny(team, index_dir, dense=True)
    assert again.generation != first.generation
    assert any("rows.npy is not in case order" in n for n in again.status.notes), again.status.notes
    assert np.all(np.diff(again.row_case) >= 0) and again.status.vectors == total_texts(again)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_vectors_are_found_and_only_their_case_embedded_again(tiny, hash_dense, bad: float) -> None:
    team, index_dir = tiny
    first = open_tiny(team, index_dir, dense=True)
    vectors = np.load(first.generation / "vectors.npy")
    vectors[0, 3] = bad
    np.save(first.generation / "vectors.npy", vectors, allow_pickle=False)
    damaged_case = first.docs[int(first.row_case[0])]["id"]
    again = open_tiny(team, index_dir, dense=True)
    assert any("NaN or infinite" in n for n in again.status.notes), again.status.notes
    assert np.isfinite(again.vectors).all() and again.status.vectors == total_texts(again)
    assert again.status.rebuilt == [damaged_case]
    assert np.array_equal(again.vectors, first.vectors)


# ---------------------------------------------------------------- CURRENT as a directory


def test_current_as_a_directory_is_moved_aside_not_lost(tiny) -> None:
    team, index_dir = tiny
    open_tiny(team, index_dir)
    (index_dir / "CURRENT").unlink()
    (index_dir / "CURRENT").mkdir()
    (index_dir / "CURRENT" / "someones-notes.txt").write_text("keep me", encoding="utf-8")
    again = open_tiny(team, index_dir)
    moved = [n for n in again.status.notes if "was a directory" in n]
    assert moved, again.status.notes
    aside = [p for p in index_dir.iterdir() if p.name.startswith("CURRENT.broken-")]
    assert len(aside) == 1 and (aside[0] / "someones-notes.txt").read_text() == "keep me"
    assert aside[0].name in moved[0]
    assert (index_dir / "CURRENT").is_file()
    answers(again)
    assert open_tiny(team, index_dir).generation == again.generation  # healed: the next one is current


# ---------------------------------------------------------------- read-only folders


def test_read_only_index_and_cache_fall_back_to_a_private_folder_and_say_where(tiny, tmp_path: Path, monkeypatch) -> None:
    team, _ = tiny
    blocker = tmp_path / "a-file"  # mkdir under a regular file fails for everyone, root included
    blocker.write_text("x")
    monkeypatch.setenv("KB_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    idx = open_tiny(team, blocker / "index")
    private = tmp_path / "tmp" / f"kb-index-{os.getuid()}"
    assert idx.root == private
    note = [n for n in idx.status.notes if "not writable" in n]
    assert note and str(blocker / "index") in note[0] and str(blocker / "cache" / "index") in note[0] and str(private) in note[0]
    assert private.stat().st_mode & 0o077 == 0
    answers(idx)


def test_a_read_only_index_that_is_current_is_used_as_it_is(tiny, tmp_path: Path, monkeypatch) -> None:
    team, index_dir = tiny
    built = open_tiny(team, index_dir)
    real = kb.index.opener.is_writable_dir
    monkeypatch.setattr(kb.index.opener, "is_writable_dir", lambda folder: False if Path(folder) == index_dir else real(folder))
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    idx = open_tiny(team, index_dir)
    assert idx.generation == built.generation
    assert any("read-only; using its index as it is" in n for n in idx.status.notes), idx.status.notes
    assert not (tmp_path / "cache").exists()  # nothing rebuilt elsewhere


# ---------------------------------------------------------------- a held lock

HOLD = """
import sys, time
from pathlib import Path
from kb.index import store
with store.locked(Path(sys.argv[1]), wait=5):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def lock_holder(tmp_path: Path):
    procs: list[subprocess.Popen] = []

    def hold(root: Path, seconds: float = 30.0) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root), str(seconds)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_held_lock_is_named_waited_for_a_bounded_time_and_the_previous_index_answers(tiny, lock_holder, monkeypatch, capsys) -> None:
    team, index_dir = tiny
    built = open_tiny(team, index_dir)
    (team / "tiny-flux.md").write_text((team / "tiny-flux.md").read_text() + "\nchanged\n", encoding="utf-8")
    holder = lock_holder(index_dir)
    monkeypatch.setenv("KB_INDEX_LOCK_TIMEOUT", "1.5")
    start = time.monotonic()
    idx = open_tiny(team, index_dir)
    took = time.monotonic() - start
    err = capsys.readouterr().err
    assert f"waiting for the index lock held by PID {holder.pid}" in err and f"({index_dir / '.lock'})" in err, err
    assert 1.0 <= took < 6, took
    assert idx.generation == built.generation
    assert any(f"still held by PID {holder.pid}" in n and "previous index" in n for n in idx.status.notes), idx.status.notes
    answers(idx)


def test_a_held_lock_with_no_index_yet_gives_a_clear_error_not_a_crash(tiny, lock_holder, tmp_path: Path) -> None:
    team, index_dir = tiny
    holder = lock_holder(index_dir)
    with pytest.raises(UsageError, match=rf"still held by PID {holder.pid}"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KB_INDEX_LOCK_TIMEOUT", "1")
            open_tiny(team, index_dir)
    env = dict(os.environ, PYTHONPATH=str(ROOT), KB_INDEX_DIR=str(index_dir), KB_INDEX_LOCK_TIMEOUT="1")
    proc = subprocess.run([sys.executable, "-m", "kb.cli", "search", "--no-dense", "--cases", str(team), "WidgetError"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"waiting for the index lock held by PID {holder.pid}" in proc.stderr
    assert f"still held by PID {holder.pid}" in proc.stderr and "internal error" not in proc.stderr
