"""Small valid case files for tests that need a folder of cases, not their content."""

from __future__ import annotations

from pathlib import Path

SIMPLE_CASE = """---
id: {id}
title: {title}
category: config
signatures: ["{sig}"]
symptoms: [{symptom}]
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


def write_simple_cases(folder: Path, table: dict[str, tuple[str, str, str]]) -> Path:
    """One file per id: `table[id] = (signature, title, symptom)`. Returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for cid, (sig, title, symptom) in table.items():
        (folder / f"{cid}.md").write_text(SIMPLE_CASE.format(id=cid, title=title, sig=sig, symptom=symptom), encoding="utf-8")
    return folder
