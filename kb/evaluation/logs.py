"""`kb eval --logs DIR`: how well kb reads whole logs, against line labels.

Each `NAME.log` has a sidecar `NAME.labels.json`:
`{"source": URL or "made here: <command>", "failure_lines": [line numbers],
"suspect_rank": K or null, "expected": [case ids], "stage": name or null,
"baseline": "good/NAME.log" or null, "multi_rank": bool, "split": "dev"|"heldout"}`.

Measured per log and summed over the set:
- kept-line precision, recall and F1: the lines kb searched for (`searched_for`)
  against the labelled failure lines, compared by template (the same error on
  four ranks is one line);
- suspect-rank accuracy on the multi-rank logs whose label names a rank;
- stage accuracy where the label names a stage (and the step number too, where
  the label gives one for a stage inside a step);
- the same lines read as a folder of per-rank files (`--logs DIR`): each
  multi-rank log is split by its `[rankN]:` / `[defaultN]:` prefixes into
  `rankN.log` files (prefix removed, as torchrun --log-dir writes them; lines
  without a prefix go to `launcher.log`) and measured against the same labels;
- R@1 where a case applies (needs the engine; `--no-search` skips it);
- with `baseline`: kept-line precision with the good run set aside, which
  must not be lower than without it.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.logs.logsearch import LogAnalysis, analyse_files, analyse_text, search_analysis
from kb.logs.reduce import _template, parse
from kb.text.signals import read_log

if TYPE_CHECKING:
    from kb.search.engine import Engine


class LogEvalError(Exception):
    pass


@dataclass
class LabelledLog:
    name: str
    path: Path
    failure_lines: list[int]
    suspect_rank: int | None
    expected: list[str]
    stage: str | None
    baseline: Path | None
    multi_rank: bool
    split: str
    source: str
    step: int | None = None


@dataclass
class Counts:
    tp: int = 0
    kept: int = 0
    labelled: int = 0

    def add(self, other: Counts) -> None:
        self.tp += other.tp
        self.kept += other.kept
        self.labelled += other.labelled

    def prf(self) -> dict[str, float]:
        p = self.tp / self.kept if self.kept else 0.0
        r = self.tp / self.labelled if self.labelled else 0.0
        return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def load_set(root: Path) -> list[LabelledLog]:
    if not root.is_dir():
        raise LogEvalError(f"{root}: not a directory of labelled logs")
    out: list[LabelledLog] = []
    for path in sorted(root.glob("*.log")):
        side = path.with_suffix(".labels.json")
        if not side.exists():
            raise LogEvalError(f"{path}: no sidecar {side.name}")
        try:
            lab = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LogEvalError(f"{side}: not readable JSON: {exc}") from exc
        lines = lab.get("failure_lines")
        if not isinstance(lab, dict) or not isinstance(lines, list) or not all(isinstance(n, int) and n > 0 for n in lines):
            raise LogEvalError(f"{side}: needs \"failure_lines\" (a list of line numbers from 1)")
        suspect = lab.get("suspect_rank")
        if suspect is not None and not isinstance(suspect, int):
            raise LogEvalError(f"{side}: \"suspect_rank\" must be an integer or null")
        expected = lab.get("expected", [])
        if not isinstance(expected, list):
            raise LogEvalError(f"{side}: \"expected\" must be a list of case ids")
        base = lab.get("baseline")
        step = lab.get("step")
        if step is not None and not isinstance(step, int):
            raise LogEvalError(f"{side}: \"step\" must be an integer or null")
        out.append(LabelledLog(path.stem, path, lines, suspect, [str(e) for e in expected], lab.get("stage"),
                               root / base if base else None, bool(lab.get("multi_rank")), str(lab.get("split", "dev")),
                               str(lab.get("source", "")), step))
    if not out:
        raise LogEvalError(f"{root}: no *.log files")
    return out


def _counts(log: LabelledLog, text: str, analysis: LogAnalysis) -> Counts:
    by_n = {l.n: l for l in parse(text)}
    missing = [n for n in log.failure_lines if n not in by_n]
    if missing:
        raise LogEvalError(f"{log.path}: labelled line(s) {missing} beyond the end of the log")
    labelled = {_template(by_n[n].norm) for n in log.failure_lines if by_n[n].norm}
    kept = {_template(l.norm) for l in analysis.reduction.kept}
    return Counts(len(kept & labelled), len(kept), len(labelled))


PREFIX_RE = re.compile(r"^(?:\[default(\d+)\]:)?(?:\[rank(\d+)\]:)?")  # torchrun --tee / torch's own prefixes


def split_by_rank(text: str) -> dict[str, str] | None:
    """A multi-rank log as torchrun --log-dir would have written it: one file per rank, prefixes removed.

    Lines without a rank prefix (the launcher, rank 0's unprefixed prints) go to `launcher.log`.
    None when no line carries a rank prefix (nothing to split)."""
    files: dict[str, list[str]] = {}
    for line in text.split("\n"):
        m = PREFIX_RE.match(line)
        rank = (m.group(1) or m.group(2)) if m else None
        name = f"rank{rank}.log" if rank is not None else "launcher.log"
        files.setdefault(name, []).append(line[m.end():] if m and rank is not None else line)
    if not any(n.startswith("rank") for n in files) or len(files) < 2:
        return None
    return {n: "\n".join(ls) + "\n" for n, ls in files.items()}


def _folder_analysis(text: str) -> LogAnalysis | None:
    parts = split_by_rank(text)
    if parts is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kb-logs-") as tmp:
        for name, body in parts.items():
            (Path(tmp) / name).write_text(body, encoding="utf-8")
        return analyse_files(Path(tmp))


def _stage_right(log: LabelledLog, analysis: LogAnalysis) -> bool:
    if analysis.stage.name != log.stage:
        return False
    # the step it failed in, where the label knows it and the stage is inside a training step
    return log.step is None or log.stage not in ("step", "checkpoint") or analysis.stage.step == log.step


def evaluate_logs(root: Path, engine: Engine | None = None) -> dict[str, Any]:
    logs = load_set(root)
    per_split: dict[str, Counts] = {}
    total = Counts()
    rows: list[dict[str, Any]] = []
    suspect_ok = suspect_n = stage_ok = stage_n = r1_ok = r1_n = 0
    baseline_rows: list[dict[str, Any]] = []
    folder_one, folder_dir = Counts(), Counts()  # the split logs, read as one file and as a folder
    folder_logs = folder_suspect = 0
    for log in logs:
        try:
            text = read_log(log.path)
        except OSError as exc:  # a FIFO or an unreadable file: named, not a crash (kb.core.file_bounds)
            raise LogEvalError(f"{log.path}: cannot read: {exc.strerror or exc}") from exc
        analysis = analyse_text(text)
        c = _counts(log, text, analysis)
        total.add(c)
        per_split.setdefault(log.split, Counts()).add(c)
        row: dict[str, Any] = {"log": log.name, "split": log.split, **{k: round(v, 3) for k, v in c.prf().items()},
                               "suspect": analysis.verdict.suspect, "suspect_label": log.suspect_rank,
                               "stage": analysis.stage.name, "stage_step": analysis.stage.step, "stage_label": log.stage,
                               "step_label": log.step, "stage_ok": _stage_right(log, analysis) if log.stage else None}
        folder = _folder_analysis(text)
        if folder is not None:
            cf = _counts(log, text, folder)
            folder_one.add(c)
            folder_dir.add(cf)
            folder_logs += 1
            folder_suspect += folder.verdict.suspect == analysis.verdict.suspect
            row["folder_f1"] = round(cf.prf()["f1"], 3)
            row["folder_suspect"] = folder.verdict.suspect
        if log.multi_rank and log.suspect_rank is not None:
            suspect_n += 1
            suspect_ok += analysis.verdict.suspect == log.suspect_rank
        if log.stage:
            stage_n += 1
            stage_ok += _stage_right(log, analysis)
        if engine is not None and log.expected:
            answer = search_analysis(engine, analysis, k=5)
            got = [r.id for r in answer.results]
            r1_n += 1
            hit = bool(got) and got[0] in log.expected
            r1_ok += hit
            row["r1"] = hit
            row["got"] = got[:3]
        if log.baseline is not None:
            if not log.baseline.exists():
                raise LogEvalError(f"{log.path}: baseline {log.baseline} does not exist")
            with_base = analyse_text(text, read_log(log.baseline), str(log.baseline))
            cb = _counts(log, text, with_base)
            p0, p1 = c.prf()["precision"], cb.prf()["precision"]
            baseline_rows.append({"log": log.name, "precision": round(p0, 3), "precision_with_baseline": round(p1, 3),
                                  "recall_with_baseline": round(cb.prf()["recall"], 3),
                                  "lines_set_aside": with_base.baseline_removed, "not_lower": p1 >= p0})
        rows.append(row)
    return {
        "logs": len(logs),
        "kept_lines": {k: round(v, 4) for k, v in total.prf().items()},
        "by_split": {s: {k: round(v, 4) for k, v in c.prf().items()} | {"logs": sum(1 for l in logs if l.split == s)}
                     for s, c in sorted(per_split.items())},
        "suspect": {"right": suspect_ok, "of": suspect_n, "accuracy": round(suspect_ok / suspect_n, 4) if suspect_n else None},
        "stage": {"right": stage_ok, "of": stage_n, "accuracy": round(stage_ok / stage_n, 4) if stage_n else None},
        "folder": {"logs": folder_logs, "one_file": {k: round(v, 4) for k, v in folder_one.prf().items()},
                   "per_rank_files": {k: round(v, 4) for k, v in folder_dir.prf().items()},
                   "same_suspect": folder_suspect},
        "recall@1": {"right": r1_ok, "of": r1_n, "value": round(r1_ok / r1_n, 4) if r1_n else None} if engine is not None else None,
        "baseline": {"logs": len(baseline_rows), "never_lower": all(b["not_lower"] for b in baseline_rows), "rows": baseline_rows},
        "rows": rows,
    }


def format_log_report(rep: dict[str, Any], verbose: bool = False) -> str:
    k = rep["kept_lines"]
    out = [f"{rep['logs']} labelled logs; kept lines: precision {k['precision']:.3f}, recall {k['recall']:.3f}, F1 {k['f1']:.3f}"]
    for s, m in rep["by_split"].items():
        out.append(f"  {s:<8} ({m['logs']} logs): precision {m['precision']:.3f}, recall {m['recall']:.3f}, F1 {m['f1']:.3f}")
    s = rep["suspect"]
    out.append(f"suspect rank: {s['right']}/{s['of']} multi-rank logs where the log can tell"
               + (f" ({s['accuracy']:.0%})" if s["accuracy"] is not None else ""))
    st = rep["stage"]
    out.append(f"stage: {st['right']}/{st['of']} right" + (f" ({st['accuracy']:.0%})" if st["accuracy"] is not None else ""))
    f = rep["folder"]
    out.append(f"--logs DIR (the {f['logs']} multi-rank logs split into per-rank files): F1 {f['per_rank_files']['f1']:.3f} "
               f"against {f['one_file']['f1']:.3f} as one file; same suspect on {f['same_suspect']}/{f['logs']}")
    if rep["recall@1"] is not None:
        r = rep["recall@1"]
        out.append(f"R@1 where a case applies: {r['right']}/{r['of']}" + (f" ({r['value']:.2f})" if r["value"] is not None else ""))
    b = rep["baseline"]
    lower = [x["log"] for x in b["rows"] if not x["not_lower"]]
    out.append(f"with --baseline (good run): precision never lower on {b['logs'] - len(lower)}/{b['logs']} logs"
               + (f"; lower on {', '.join(lower)}" if lower else ""))
    for x in b["rows"] if verbose else []:
        out.append(f"  {x['log']:<40} P {x['precision']:.2f} -> {x['precision_with_baseline']:.2f} ({x['lines_set_aside']} lines set aside)")
    for row in rep["rows"]:
        bad = row["f1"] < 1.0 or (row["suspect_label"] is not None and row["suspect"] != row["suspect_label"]) \
            or row["stage_ok"] is False or row.get("r1") is False or row.get("folder_f1", 1.0) < row["f1"]
        if verbose or bad:
            extra = f" r1={row.get('r1')} got={row.get('got')}" if "r1" in row else ""
            out.append(f"  {row['log']:<40} [{row['split']}] P {row['precision']:.2f} R {row['recall']:.2f} "
                       f"suspect {row['suspect']} (label {row['suspect_label']}) stage {row['stage']} {row['stage_step']} "
                       f"(label {row['stage_label']} {row['step_label']})"
                       + (f" folder F1 {row['folder_f1']:.2f} suspect {row['folder_suspect']}" if "folder_f1" in row else "") + extra)
    return "\n".join(out)
