"""The index keeps itself up to date, re-embeds only what changed, and survives damage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kb.index import store
from kb.index.model import ModelError, ModelSpec, resolve_model, sha256_file, verify_weights
from kb.index.opener import open_index
from kb.search.engine import Engine

ROOT = Path(__file__).resolve().parent.parent

CASE = """---
id: {id}
title: {title}
category: config
signatures: ["{sig}"]
symptoms: [something odd happens]
sources: [tests]
---

# {title}

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```bash {{name=ok timeout=5}}
exit 0
```
"""


def write_case(folder: Path, case_id: str, sig: str, title: str = "A team case") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case_id}.md"
    path.write_text(CASE.format(id=case_id, title=title, sig=sig), encoding="utf-8")
    return path


@pytest.fixture
def team_index(tmp_path: Path, shared_index_dir: Path) -> tuple[Path, Path]:
    """A copy of the shared index (so the ONNX export is reused) plus a team case folder."""
    index_dir = tmp_path / "index"
    shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
    team = tmp_path / "team"
    write_case(team, "team-widget-crash", "WidgetError: the frobnicator overheated")
    return index_dir, team


def test_extra_folder_is_searched_with_builtin_cases(team_index, engine) -> None:
    index_dir, team = team_index
    eng = Engine.open([team], index_dir=index_dir, progress=False)
    eng.load_dense()
    assert eng.search("WidgetError: the frobnicator overheated at step 3").results[0].id == "team-widget-crash"
    assert eng.search("No module named 'verl'").results[0].id == "verl-module-not-found"


def test_changed_case_is_reembedded_alone_and_found(team_index) -> None:
    index_dir, team = team_index
    first = open_index([team], index_dir=index_dir, progress=False)
    assert "team-widget-crash" in first.status.rebuilt
    again = open_index([team], index_dir=index_dir, progress=False)
    assert again.status.rebuilt == [] and again.generation == first.generation
    write_case(team, "team-widget-crash", "GadgetError: the sprocket jammed", title="Sprocket jam")
    updated = open_index([team], index_dir=index_dir, progress=False)
    assert updated.status.rebuilt == ["team-widget-crash"]
    eng = Engine(updated)
    assert eng.search("GadgetError: the sprocket jammed").results[0].id == "team-widget-crash"


def test_a_search_without_the_model_reuses_the_dense_index(team_index) -> None:
    """`--no-dense` once must not rebuild the index without vectors (the next dense search
    would re-embed every case); a dense search after a no-dense build does rebuild."""
    index_dir, team = team_index
    dense = open_index([team], index_dir=index_dir, progress=False)
    plain = open_index([team], index_dir=index_dir, progress=False, dense=False)
    assert plain.generation == dense.generation and plain.status.rebuilt == []
    again = open_index([team], index_dir=index_dir, progress=False)
    assert again.generation == dense.generation and again.dense_available
    res = subprocess.run([sys.executable, "-m", "kb.cli", "search", "--no-dense", "--json", "--cases", str(team), "--index-dir", str(index_dir),
                          "WidgetError: the frobnicator overheated"], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["results"][0]["id"] == "team-widget-crash" and out["dense"] is False
    assert store.current_generation(index_dir) == dense.generation


def test_kb_env_var_adds_folders(team_index, monkeypatch) -> None:
    index_dir, team = team_index
    monkeypatch.setenv("KB_CASES", str(team))
    idx = open_index(index_dir=index_dir, progress=False)
    assert "team-widget-crash" in {d["id"] for d in idx.docs}


def test_manifest_records_model_and_case_hashes(shared_index_dir: Path, engine) -> None:
    gen = store.current_generation(shared_index_dir)
    manifest = json.loads((gen / "manifest.json").read_text())
    assert manifest["format_version"] == store.FORMAT_VERSION
    assert manifest["dense"]["weights_sha256"] == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    assert manifest["dense"]["export_min_cosine"] >= 0.999
    assert manifest["cases"]["nccl-unhandled-system-error"]["hash"]


@pytest.mark.parametrize("damage", ["garbage-current", "truncated-manifest", "foreign-manifest", "truncated-vectors", "missing-docs"])
def test_damaged_index_is_detected_and_rebuilt(team_index, damage: str) -> None:
    index_dir, team = team_index
    # The team folder alone: damage is detected the same way, and the rebuild
    # embeds one case instead of every built-in one (the ONNX export is reused).
    first = open_index([team], index_dir=index_dir, progress=False, include_builtin=False)
    gen = first.generation
    if damage == "garbage-current":
        (index_dir / "CURRENT").write_bytes(b"\x00\xff not a generation")
    elif damage == "truncated-manifest":
        data = (gen / "manifest.json").read_bytes()
        (gen / "manifest.json").write_bytes(data[: len(data) // 2])
    elif damage == "foreign-manifest":
        (gen / "manifest.json").write_text(json.dumps({"app": "something-else"}))
    elif damage == "truncated-vectors":
        data = (gen / "vectors.npy").read_bytes()
        (gen / "vectors.npy").write_bytes(data[:200])
    elif damage == "missing-docs":
        (gen / "docs.json").unlink()
    fixed = open_index([team], index_dir=index_dir, progress=False, include_builtin=False)
    assert fixed.generation != gen
    assert Engine(fixed).search("WidgetError: the frobnicator overheated").results[0].id == "team-widget-crash"


def test_wrong_weights_are_refused_naming_file_and_hashes(tmp_path: Path) -> None:
    real = resolve_model()
    fake_dir = tmp_path / "model"
    fake_dir.mkdir()
    (fake_dir / "model.safetensors").write_bytes(b"not the real weights")
    spec = ModelSpec(name=real.name, path=fake_dir, expected_sha256=real.expected_sha256)
    with pytest.raises(ModelError) as err:
        verify_weights(spec)
    msg = str(err.value)
    assert str(fake_dir / "model.safetensors") in msg
    assert real.expected_sha256 in msg and sha256_file(fake_dir / "model.safetensors") in msg


def test_broken_model_leaves_lexical_search_working(tmp_path: Path) -> None:
    bad_model = tmp_path / "no-such-model"
    bad_model.mkdir()
    idx = open_index(index_dir=tmp_path / "index", model_dir=bad_model, progress=False)
    assert not idx.status.dense and "not found" in idx.status.dense_reason
    eng = Engine(idx)
    assert not eng.load_dense()
    answer = eng.search("ModuleNotFoundError: No module named 'verl'")
    assert answer.results[0].id == "verl-module-not-found"
    assert any("dense search not used" in n for n in answer.notes)


def test_index_of_an_older_tokenizer_or_document_builder_is_rebuilt(tmp_path: Path, monkeypatch) -> None:
    # No model: lexical only, so the test builds quickly. An index built with other
    # tokens must not keep its BM25 matrices (or the cached tokens) once the tokenizer changes.
    import kb.index.fingerprint as index_mod

    no_model = tmp_path / "no-model"
    no_model.mkdir()
    team = tmp_path / "team"
    write_case(team, "team-flag-case", "FlagError: bad value for tensor_parallel_size")
    kwargs = dict(index_dir=tmp_path / "index", model_dir=no_model, progress=False, include_builtin=False)
    first = open_index([team], **kwargs)
    assert first.manifest["tokenizer_version"] == index_mod.TOKENIZER_VERSION
    tokens = json.loads((first.generation / "tokens.json").read_text(encoding="utf-8"))
    assert all(k.startswith(f"t{index_mod.TOKENIZER_VERSION}.{index_mod.DOC_VERSION}:") for k in tokens)
    assert open_index([team], **kwargs).generation == first.generation  # nothing changed: reused
    monkeypatch.setattr(index_mod, "TOKENIZER_VERSION", index_mod.TOKENIZER_VERSION + 1)
    second = open_index([team], **kwargs)
    assert second.generation != first.generation
    tokens = json.loads((second.generation / "tokens.json").read_text(encoding="utf-8"))
    assert all(k.startswith(f"t{index_mod.TOKENIZER_VERSION}.{index_mod.DOC_VERSION}:") for k in tokens)
    assert "tensor_parallel_size" in Engine(second).lexical.vocab
    monkeypatch.setattr(index_mod, "DOC_VERSION", index_mod.DOC_VERSION + 1)  # build_doc changed: same
    third = open_index([team], **kwargs)
    assert third.generation != second.generation and third.manifest["doc_version"] == index_mod.DOC_VERSION


def test_docs_json_keeps_no_bm25_text_and_lost_matrices_are_rebuilt_from_tokens(team_index) -> None:
    """docs.json does not carry each case's BM25 text (over half its size, parsed by every cold search for
    nothing); when the BM25 matrices are lost, the index rebuilds them from tokens.json, with the same scores."""
    index_dir, team = team_index
    first = open_index([team], index_dir=index_dir, progress=False, include_builtin=False)
    docs = json.loads((first.generation / "docs.json").read_text())
    assert docs and all("lexical" not in d for d in docs)
    paste = "WidgetError: the frobnicator overheated"
    before = Engine(first).search(paste, use=("lexical",), abstain=False)
    shutil.rmtree(first.generation / "bm25")
    again = open_index([team], index_dir=index_dir, progress=False, include_builtin=False)
    after = Engine(again).search(paste, use=("lexical",), abstain=False)
    assert [r.id for r in after.results] == [r.id for r in before.results] == ["team-widget-crash"]
    assert after.results[0].scores["lexical"] == pytest.approx(before.results[0].scores["lexical"])
    assert after.results[0].evidence and "frobnicator" in " ".join(e.text for e in after.results[0].evidence)
    # with neither the matrices nor the tokens the generation is damaged and rebuilt, not searched without BM25
    (again.generation / "tokens.json").unlink()
    healed = open_index([team], index_dir=index_dir, progress=False, include_builtin=False)
    assert healed.generation != again.generation
    assert Engine(healed).search(paste, use=("lexical",), abstain=False).results[0].id == "team-widget-crash"
