"""Search quality floors on the dev queries (a regression fails CI); kb eval's contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kb.evaluate import evaluate, load_queries

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "dev.jsonl"


@pytest.mark.skipif(not DEV.is_file(), reason="shared/eval/dev.jsonl is not beside the checkout")
def test_dev_queries_floor(engine) -> None:
    report = evaluate(engine, load_queries(DEV))
    fused = report["scorers"]["fused"]
    # README figures: R@1 0.929, R@3 0.952, 6/6 abstained. Floors sit at or a little below.
    assert report["skipped"] == []
    assert fused["recall@1"] >= 0.90, report["failures"]
    assert fused["recall@3"] >= 0.95, report["failures"]
    assert report["abstention"]["abstained_correctly"] >= 5
    assert report["abstention"]["abstained_wrongly"] <= 1
    for scorer in ("signature", "lexical", "dense"):
        assert fused["mrr"] > report["scorers"][scorer]["mrr"], scorer


def test_eval_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"query": "x", "expected": []}\n{"query": 3}\n', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "kb.cli", "eval", str(bad)], capture_output=True, text=True)
    assert res.returncode == 2 and f"{bad}:2" in res.stderr


def test_eval_json_shape(shared_index_dir: Path, tmp_path: Path) -> None:
    q = tmp_path / "q.jsonl"
    q.write_text(
        json.dumps({"id": "a", "query": "ModuleNotFoundError: No module named 'verl'", "expected": ["verl-module-not-found"]}) + "\n"
        + json.dumps({"id": "b", "query": "ERROR 1045 (28000): Access denied for user 'root'@'localhost'", "expected": []}) + "\n",
        encoding="utf-8",
    )
    res = subprocess.run([sys.executable, "-m", "kb.cli", "eval", str(q), "--json", "--index-dir", str(shared_index_dir)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert set(report["scorers"]) == {"signature", "lexical", "dense", "fused"}
    assert set(report["scorers"]["fused"]) == {"recall@1", "recall@3", "recall@5", "mrr"}
    assert report["scorers"]["fused"]["recall@1"] == 1.0
    assert report["abstention"]["recall"] == 1.0


def test_eval_logs_without_a_folder_works_outside_the_checkout(tmp_path, monkeypatch) -> None:
    """`kb eval --logs` with no folder, run from another directory: the checkout's eval/logs; outside a checkout,
    a usage error that says what to pass (it failed on a bare relative path; issue 26)."""
    import pytest

    from kb import paths
    from kb.commands import eval as eval_cmd
    from kb.errors import UsageError

    monkeypatch.chdir(tmp_path)
    args = eval_cmd_parser().parse_args(["eval", "--logs"])
    assert args.logs is eval_cmd.DEFAULT_LOGS
    assert eval_cmd.default_logs() == paths.PACKAGE_ROOT / "eval" / "logs"
    monkeypatch.setattr(paths, "is_checkout", lambda: False)
    with pytest.raises(UsageError, match="pass the folder: kb eval --logs DIR"):
        eval_cmd.default_logs()


def eval_cmd_parser():
    from kb.cli import build_parser

    return build_parser()
