"""Regenerate the calibration figures of docs/search.md section 6 and its reliability diagrams.

Run after `kb eval --fit ...` (which writes kb/search/confidence.json):

    python benchmarks/calibration_figures.py ../shared/eval/dev.jsonl eval/reports.jsonl

It reads the fitted model's weights and held-out figures, runs `kb eval` on the
dev queries, the report sample, eval/other-stacks.jsonl and the held-out
eval/other-stacks-heldout.jsonl (writing
docs/reliability-dev.svg and docs/reliability-reports.svg), and rewrites the
blocks between the `fitted:` and `measured:` markers in docs/search.md.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _eval(path: str, svg: Path, label: str) -> tuple[str, dict]:
    res = subprocess.run([sys.executable, "-m", "kb.cli", "eval", path, "--json", "--diagram", str(svg)],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if res.returncode != 0:
        sys.exit(f"kb eval {path} failed:\n{res.stderr}")
    rep = json.loads(res.stdout)
    cal, fz = rep["calibration"], rep["scorers"]["fused"]
    lv, nc = cal["levels"], cal["no_case"]
    answered = any(b["n"] for b in cal["bins"])
    row = (f"| {label} | {rep['queries']} | {lv['high']['right']}/{lv['high']['answers']} | {lv['medium']['right']}/{lv['medium']['answers']} | "
           f"{lv['low']['right']}/{lv['low']['answers']} | {nc['declined']}/{nc['queries']} | {nc['declined_or_low_share']:.0%} | {nc['high']} | "
           + (f"{cal['ece']:.3f} | " if answered else "– | ")
           + (f"{cal['coverage']['coverage']:.0%} | {fz['recall@1']:.3f} / {fz['recall@3']:.3f} |" if cal["coverage"]["in_scope_rows"] else "– | – |"))
    return row, cal


def fitted_block(m: dict) -> str:
    h, fo = m["held_out"], m["fitted_on"]
    rows = ["| feature | weight |", "|---|---|"] + [f"| `{f}` | {w:+.3f} |" for f, w in zip(m["features"], m["weights"])] + [f"| bias | {m['bias']:+.3f} |"]
    return "\n".join(rows) + f"""

Thresholds: `high` at p ≥ {m['thresholds']['high']:.3f}, `low` below {m['thresholds']['low']:.3f}. Fitted
{m['fitted']} on {fo['queries']} queries ({', '.join(fo['files'])}): {fo['answered']} answered with a clear label
({fo['right']} right), {fo['no_case']} that no case covers, {fo['declined']} declined, {fo['left_out_case_not_loaded']} left out (their case is not in this
corpus). Held out ({h['folds']} folds by source thread): `high` {h['high_right']}/{h['high_answers']} right
({h['high_precision']:.0%}), `medium` {h['medium_right']}/{h['medium_answers']}, `low` {h['low_right']}/{h['low_answers']}; of
{h['no_case_queries']} no-case queries {h['no_case_declined_or_low']} declined or `low`
({h['no_case_declined_or_low_share']:.0%}), {h['no_case_high']} `high`; ECE {h['ece']:.3f}. The weights say what the evidence is worth:
a specific signature, words and meaning shared with the case, and a clear lead over the second case
raise the chance; an error line that none of the case's signatures explains lowers it. A weight of
0 means no answered query had that evidence, so there was nothing to learn."""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit("usage: python benchmarks/calibration_figures.py DEV.jsonl REPORTS.jsonl")
    dev, reports = argv
    m = json.loads((ROOT / "kb" / "search" / "confidence.json").read_text(encoding="utf-8"))
    a, _ = _eval(dev, ROOT / "docs" / "reliability-dev.svg", "dev queries")
    n = sum(1 for line in Path(reports).read_text(encoding="utf-8").splitlines() if line.strip())
    b, cal = _eval(reports, ROOT / "docs" / "reliability-reports.svg", f"report sample ({n} rows)")
    with tempfile.TemporaryDirectory() as tmp:
        c, _ = _eval(str(ROOT / "eval" / "other-stacks.jsonl"), Path(tmp) / "o.svg", "other stacks (eval/other-stacks.jsonl)")
        d, _ = _eval(str(ROOT / "eval" / "other-stacks-heldout.jsonl"), Path(tmp) / "h.svg",
                     "other stacks, held out (eval/other-stacks-heldout.jsonl)")
    nl = cal["case_not_loaded"]
    measured = f"""Measured with the fitted model (in sample: these rows were part of the fit; the held-out figures
are above):

| set | queries | high right | medium right | low right | no-case declined | no-case declined or low | no-case high | ECE | coverage | covered R@1 / R@3 |
|---|---|---|---|---|---|---|---|---|---|---|
{a}
{b}
{c}
{d}

On the report sample {nl['queries']} rows name a case that is not loaded: declined {nl['declined']}, `low` {nl['low']},
`medium` {nl['medium']}, `high` {nl['high']}. Reliability diagrams (bars: observed share right per bin of
`p_right`; dots: the mean predicted p; the dashed diagonal is perfect calibration):

![reliability, dev queries](reliability-dev.svg) ![reliability, report sample](reliability-reports.svg)"""
    doc = ROOT / "docs" / "search.md"
    text = doc.read_text(encoding="utf-8")
    for name, body in (("fitted", fitted_block(m)), ("measured", measured)):
        pattern = re.compile(rf"(<!-- {name}:begin[^>]*-->\n)(.*?)(\n<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            sys.exit(f"{doc}: markers <!-- {name}:begin --> ... <!-- {name}:end --> not found")
        text = pattern.sub(lambda mm, body=body: mm.group(1) + body + mm.group(3), text)
    doc.write_text(text, encoding="utf-8")
    print(f"updated {doc} and the diagrams")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
