"""`kb new --from-log`: from an incident log to a valid draft case, found by the next search."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kb.cases.casefile import REGEX_PREFIX, parse_case_file, parse_case_text, split_front_matter
from kb.cases.caseset import load_cases, validate
from kb.core.paths import builtin_cases_dir
from kb.incident.folder_policy import NotWritable, write_draft
from kb.incident.from_log import draft_from_text
from kb.incident.signature_edit import add_signatures, insert_signatures
from kb.incident.signatures import is_linear, literal_for_line, regex_for_line

WIDGET_LOG = """\
2024-11-30 02:14:35,123 INFO starting step 37 on gpu-node-3.cluster.local
(TaskRunner pid=4242, ip=10.2.3.4) Traceback (most recent call last):
(TaskRunner pid=4242, ip=10.2.3.4)   File "/home/alice/verl/widgets.py", line 17, in spin
(TaskRunner pid=4242, ip=10.2.3.4)     raise WidgetError(msg)
(TaskRunner pid=4242, ip=10.2.3.4) WidgetError: the frobnicator overheated on gpu-node-3.cluster.local at 10.2.3.4 after 37 steps
"""

OOM_LOG = """\
Traceback (most recent call last):
  File "/home/bob/verl/verl/workers/actor/dp_actor.py", line 300, in update_policy
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.
"""

SECRETS_LOG = """\
export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789
wandb: WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567
aws_access_key_id=AKIAIOSFODNN7EXAMPLE aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
node-17:12345:12399 [0] NCCL WARN Connect to 10.1.2.4<34567> failed : Connection refused
ERROR Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig rejected by https://carol:s3cr3tpass@git.corp.example.net/repo.git
ERROR api_key=live_5f3a9c token=abcdef123456 password=hunter22 USER=dave
File "/home/alice/verl/gadget.py", line 9, in spin
GadgetError: the sprocket jammed on node-17 (gpu-node-3.cluster.local, 10.1.2.4) key 0123456789abcdef0123456789abcdef01234567 hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789
"""
SECRETS = [
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "0123456789abcdef0123456789abcdef01234567", "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "eyJhbGciOiJIUzI1NiJ9", "s3cr3tpass", "carol", "live_5f3a9c",
    "abcdef123456", "hunter22", "dave", "alice", "node-17", "gpu-node-3", "cluster.local", "10.1.2.4", "git.corp.example.net",
]

LINES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.",
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    "[rank3]:[E1130 02:14:35.123 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023 milliseconds before timing out.",
    "FileNotFoundError: [Errno 2] No such file or directory: '/home/alice/data/gsm8k/train.parquet'",
    "ray.exceptions.RaySystemError: System error: Failed to connect to GCS at address 10.0.0.5:6379 within 60 seconds, request id 7f3a9c0d1e2b4a5f",
    "ValueError: token=abcdef123456 rejected by https://bob:pw1234@hub.corp.example.net/api at 2024-11-30T02:14:35.123Z",
    "RuntimeError: shape mismatch in the packed batch: " + ", ".join(str(i) for i in range(3000)),
]


def _sigs(text: str) -> list[str]:
    fm = split_front_matter(text)
    assert fm is not None
    return yaml.safe_load(fm[0])["signatures"]


# ---------------------------------------------------------------- signatures


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_proposed_signatures_compile_match_and_are_linear(line: str) -> None:
    from kb.text.signals import clean_line

    cleaned, _ = clean_line(line)
    pattern = regex_for_line(cleaned)
    literal = literal_for_line(cleaned)
    assert pattern or literal
    if pattern is not None:
        rx = re.compile(pattern, re.I)
        assert rx.search(line), pattern
        assert is_linear(pattern), pattern
        assert len(pattern) < 600
    if literal is not None:
        assert len(literal) >= 6
        assert " ".join(literal.lower().split()) in " ".join(line.lower().split())
        assert not re.search(r"\d{3,}", literal), literal  # volatile numbers are cut off


def test_numbers_paths_and_secrets_are_generalised() -> None:
    pattern = regex_for_line(LINES[5])
    assert pattern is not None
    for volatile in ("abcdef123456", "bob", "pw1234", "hub.corp.example.net", "2024", "14:35"):
        assert volatile not in pattern
    assert re.search(pattern, "ValueError: token=zzzzzz999 rejected by https://eve:other@h.example.org/api at 2025-01-01T00:00:00Z")


def test_is_linear_rejects_nested_quantifiers() -> None:
    assert is_linear(r"CUDA out of memory\. Tried to allocate [\d.]+ GiB")
    assert not is_linear(r"(a+)+b")
    assert not is_linear(r"(?:\w*\s)*x")
    assert not is_linear(r"(x|y+)*")
    assert not is_linear(r"(")


# ---------------------------------------------------------------- the draft


def test_draft_is_a_valid_case_with_placeholders(tmp_path: Path) -> None:
    draft = draft_from_text(WIDGET_LOG)
    assert draft.id == "widget-error-frobnicator-overheated"
    assert draft.title == "WidgetError: the frobnicator overheated"
    assert draft.category == "uncategorized"
    assert draft.signatures[0] == "WidgetError: the frobnicator overheated"
    assert draft.signatures[1].startswith(REGEX_PREFIX)
    path = write_draft(draft, tmp_path / "mine")
    assert path == tmp_path / "mine" / "uncategorized" / "widget-error-frobnicator-overheated.md"
    assert path.read_text(encoding="utf-8") == draft.text
    case, problems = parse_case_file(path)
    assert case is not None and not [p for p in problems if p.severity == "error"], problems
    assert case.status == "draft" and case.signatures == draft.signatures
    assert [c.name for c in case.checks] == ["todo"]
    assert "exit 2" in case.checks[0].code
    assert any("TODO" in s for s in case.sources)
    assert not [p for p in validate(load_cases([tmp_path / "mine"], include_builtin=False)) if p.severity == "error"]
    with pytest.raises(FileExistsError):
        write_draft(draft, tmp_path / "mine")


def test_secrets_never_reach_the_written_file(tmp_path: Path) -> None:
    draft = draft_from_text(SECRETS_LOG)
    path = write_draft(draft, tmp_path)
    text = path.read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret not in text, secret
    assert "GadgetError: the sprocket jammed" in text
    for placeholder in ("<host>", "<ip>", "<hf-token>", "<user>"):
        assert placeholder in text
    # the regex still matches the line it came from
    rx = next(s for s in draft.signatures if s.startswith(REGEX_PREFIX))[len(REGEX_PREFIX):]
    assert re.search(rx, SECRETS_LOG.splitlines()[-1], re.I)


def test_explicit_choices_and_unique_ids(tmp_path: Path) -> None:
    draft = draft_from_text(WIDGET_LOG, title="Frobnicator overheats", category="hardware", taken_ids={"frobnicator-overheats"})
    assert (draft.id, draft.title, draft.category) == ("frobnicator-overheats-2", "Frobnicator overheats", "hardware")
    renamed = draft.replace(id="frob-hot", category="performance")
    assert "id: frob-hot\n" in renamed.text and "category: performance\n" in renamed.text
    with pytest.raises(ValueError):
        draft_from_text(WIDGET_LOG, case_id="Not A Slug")
    with pytest.raises(ValueError):
        draft_from_text("   \n")


def test_category_from_keywords() -> None:
    assert draft_from_text(OOM_LOG).category == "memory"
    assert draft_from_text("ModuleNotFoundError: No module named 'flash_attn_2_cuda'").category == "install-env"


def test_never_writes_into_the_builtin_cases() -> None:
    draft = draft_from_text(WIDGET_LOG)
    with pytest.raises(NotWritable):
        write_draft(draft, builtin_cases_dir())
    with pytest.raises(NotWritable):
        write_draft(draft, builtin_cases_dir() / "config")
    assert not list(builtin_cases_dir().rglob("widget-error-*.md"))


def test_draft_with_engine_finds_the_duplicate(engine) -> None:
    draft = draft_from_text(OOM_LOG, engine=engine)
    assert draft.duplicate is not None and draft.duplicate.id == "cuda-oom-training"
    assert draft.category == "memory"
    assert draft.id not in {d["id"] for d in engine.docs}
    fresh = draft_from_text(WIDGET_LOG, engine=engine)
    assert fresh.duplicate is None


# ---------------------------------------------------------------- --add-to keeps the file


def _assert_only_inserted(before: str, after: str, added: list[str]) -> None:
    """`after` is `before` plus whole inserted lines (or one edited signatures line)."""
    b, a = before.splitlines(keepends=True), after.splitlines(keepends=True)
    i = 0
    while i < len(b) and b[i] == a[i]:
        i += 1
    j = 0
    while j < len(b) - i and b[len(b) - 1 - j] == a[len(a) - 1 - j]:
        j += 1
    changed_before = b[i:len(b) - j]
    changed_after = a[i:len(a) - j]
    assert "".join(b[:i]) + "".join(b[len(b) - j:]) == before.replace("".join(changed_before), "", 1) or not changed_before
    for line in changed_before:
        assert line.startswith("signatures:")
    for line in changed_after:
        assert line.startswith("signatures:") or line.lstrip().startswith("- ")
    assert _sigs(after) == _sigs(before) + added


@pytest.mark.parametrize(
    "front",
    [
        'signatures:\n  - "GadgetError: the sprocket jammed"\n  - \'regex:GadgetError: code \\d+\'\n',
        "signatures:\n- GadgetError: the sprocket jammed\n\n# kept comment\n",
        "signatures: []\n",
        'signatures: ["GadgetError: the sprocket jammed"]  # flow\n',
    ],
    ids=["block", "block-no-indent", "empty", "flow"],
)
def test_insert_signatures_touches_only_the_list(front: str) -> None:
    text = f"---\nid: gadget\ntitle: Gadget\ncategory: config\n{front}symptoms: [x]\nsources: [y]\n---\n\n# Gadget\n\nbody with signatures: in it\n"
    out = insert_signatures(text, ["WidgetError: new one", "regex:Widget \\d+ \"q\""])
    _assert_only_inserted(text, out, ["WidgetError: new one", "regex:Widget \\d+ \"q\""])


# ---------------------------------------------------------------- the command


def kb(*args: str, input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], capture_output=True, text=True, input=input, cwd=cwd, timeout=600)


@pytest.fixture
def index_copy(tmp_path: Path, shared_index_dir: Path, engine) -> Path:
    """A copy of the shared index, so that the ONNX export is reused."""
    index_dir = tmp_path / "index"
    shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
    return index_dir


def test_new_case_is_found_by_the_next_search(tmp_path: Path, index_copy: Path) -> None:
    log = tmp_path / "incident.log"
    log.write_text(WIDGET_LOG, encoding="utf-8")
    mine = tmp_path / "mine"
    res = kb("new", "--from-log", str(log), "--dir", str(mine), "--no-edit", "--json", "--index-dir", str(index_copy))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) >= {"path", "id", "signatures", "similar"}
    path = Path(out["path"])
    assert path.is_file() and path.parent.parent == mine and out["id"] == path.stem
    assert out["signatures"] and all(set(s) == {"id", "score"} for s in out["similar"])
    text = path.read_text(encoding="utf-8")
    for secret in ("alice", "gpu-node-3", "10.2.3.4"):
        assert secret not in text

    check = kb("check", "--only", "--cases", str(mine))
    assert check.returncode == 0, check.stdout + check.stderr

    found = kb("search", "--file", str(log), "--json", "--cases", str(mine), "--index-dir", str(index_copy))
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["id"] == out["id"]


def test_standard_input_and_personal_folder_by_default(tmp_path: Path, index_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CONFIG_DIR", str(tmp_path / "config"))  # no config.toml: personal = KB_DATA_DIR/cases
    from kb.core.paths import data_dir

    res = kb("new", "--from-log", "-", "--no-dense", "--json", "--index-dir", str(index_copy), input=WIDGET_LOG)
    assert res.returncode == 0, res.stderr
    path = Path(json.loads(res.stdout)["path"])
    assert path.parent.parent == data_dir() / "cases"
    # the personal folder is now a layer: the same log again is a high-confidence duplicate
    again = kb("new", "--from-log", "-", "--no-dense", "--json", "--index-dir", str(index_copy), input=WIDGET_LOG)
    assert again.returncode == 1
    assert json.loads(again.stdout)["duplicate"]["id"] == path.stem


def test_duplicate_of_a_builtin_case_is_refused_without_force(tmp_path: Path, index_copy: Path) -> None:
    log = tmp_path / "oom.log"
    log.write_text(OOM_LOG, encoding="utf-8")
    mine = tmp_path / "mine"
    res = kb("new", "--from-log", str(log), "--dir", str(mine), "--no-edit", "--json", "--index-dir", str(index_copy))
    assert res.returncode == 1, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["path"] is None and out["duplicate"]["id"] == "cuda-oom-training"
    assert "cuda-oom-training" in res.stderr and "--add-to" in res.stderr
    assert not list(mine.rglob("*.md"))

    plain = kb("new", "--from-log", str(log), "--dir", str(mine), "--no-edit", "--no-dense", "--index-dir", str(index_copy))
    assert plain.returncode == 1 and "cuda-oom-training" in plain.stderr

    forced = kb("new", "--from-log", str(log), "--dir", str(mine), "--no-edit", "--no-dense", "--force", "--index-dir", str(index_copy))
    assert forced.returncode == 0, forced.stderr
    assert len(list(mine.rglob("*.md"))) == 1


def test_add_to_keeps_the_file_byte_for_byte(tmp_path: Path) -> None:
    team = tmp_path / "team"
    (team / "memory").mkdir(parents=True)
    original = builtin_cases_dir() / "memory" / "cuda-oom-training.md"
    target = team / "memory" / "team-oom.md"
    before_bytes = original.read_bytes().replace(b"id: cuda-oom-training", b"id: team-oom")
    target.write_bytes(before_bytes)
    log = tmp_path / "new-oom.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory while packing micro batch 17 of 64 on GPU 3\n", encoding="utf-8")

    res = kb("new", "--from-log", str(log), "--add-to", "team-oom", "--cases", str(team), "--json")
    assert res.returncode == 0, res.stderr
    added = json.loads(res.stdout)["signatures"]
    assert added and all(s not in _sigs(before_bytes.decode()) for s in added)
    after_bytes = target.read_bytes()
    inserted = "".join(f'  - {json.dumps(s, ensure_ascii=False)}\n' for s in added).encode()
    assert after_bytes.replace(inserted, b"", 1) == before_bytes
    assert _sigs(after_bytes.decode()) == _sigs(before_bytes.decode()) + added
    assert not [p for p in parse_case_text(target, after_bytes.decode())[1] if p.severity == "error"]

    again = kb("new", "--from-log", str(log), "--add-to", "team-oom", "--cases", str(team))
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert target.read_bytes() == after_bytes

    unknown = kb("new", "--from-log", str(log), "--add-to", "no-such-case", "--cases", str(team))
    assert unknown.returncode == 2 and "no-such-case" in unknown.stderr


def test_add_signatures_function(tmp_path: Path) -> None:
    path = tmp_path / "gadget.md"
    draft = draft_from_text(WIDGET_LOG, case_id="gadget", category="config")
    path.write_text(draft.text, encoding="utf-8")
    before = path.read_bytes()
    assert add_signatures(path, list(draft.signatures)) == []
    assert path.read_bytes() == before
    assert add_signatures(path, ["GadgetError: brand new message"]) == ["GadgetError: brand new message"]
    assert _sigs(path.read_text(encoding="utf-8")) == draft.signatures + ["GadgetError: brand new message"]


def test_usage_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("  \n", encoding="utf-8")
    assert kb("new", "--from-log", str(empty), "--dir", str(tmp_path / "x")).returncode == 2
    assert kb("new", "--from-log", str(tmp_path / "missing.log")).returncode == 2
    log = tmp_path / "w.log"
    log.write_text(WIDGET_LOG, encoding="utf-8")
    res = kb("new", "--from-log", str(log), "--dir", str(builtin_cases_dir() / "config"), "--no-edit")
    assert res.returncode == 2 and "built-in" in res.stderr
