"""Add signatures to an existing case file (`kb new --add-to`): only its `signatures:` list changes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kb.cases.casefile import parse_case_text, split_front_matter
from kb.cases.frontmatter import yaml_quote
from kb.core import atomic_files
from kb.search.signatures import canon


def _front_matter_span(lines: list[str]) -> tuple[int, int]:
    """Indexes of the opening and closing `---` lines."""
    if not lines or lines[0].strip() != "---":
        raise ValueError("no YAML front matter")
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return 0, i
    raise ValueError("front matter is not closed")


def _read_signatures(text: str) -> list[str]:
    split = split_front_matter(text)
    if split is None:
        raise ValueError("no YAML front matter")
    meta = yaml.safe_load(split[0]) or {}
    sigs = meta.get("signatures") or []
    if not isinstance(sigs, list):
        raise ValueError("'signatures' is not a list")
    return [str(s) for s in sigs]


def insert_signatures(text: str, new: list[str]) -> str:
    """`text` with `new` appended to the front matter's `signatures:` list; every other byte kept.

    Handles a block list (`signatures:` then `- item` lines), a one-line flow
    list (`signatures: [...]`, including `[]`) and a missing key (added before
    the closing `---`). The result is parsed again and must hold exactly the
    old signatures plus `new`, else ValueError.
    """
    if not new:
        return text
    before = _read_signatures(text)
    lines = text.splitlines(keepends=True)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    _, close = _front_matter_span(lines)
    key = next((i for i in range(1, close) if re.match(r"^signatures\s*:", lines[i])), None)
    if key is None:
        block = f"signatures:{nl}" + "".join(f"  - {yaml_quote(s)}{nl}" for s in new)
        lines.insert(close, block)
    else:
        head = lines[key]
        m = re.match(r"^(signatures\s*:\s*)(.*?)(\s*)$", head, re.S)
        assert m is not None
        value = m.group(2)
        value_nocomment = re.sub(r"\s+#.*$", "", value).strip()
        if value_nocomment.startswith("[") and value_nocomment.endswith("]"):
            inner = value_nocomment[1:-1].strip()
            items = ", ".join(yaml_quote(s) for s in new)
            new_value = f"[{inner}, {items}]" if inner else f"[{items}]"
            lines[key] = m.group(1) + value.replace(value_nocomment, new_value, 1) + m.group(3)
        elif value_nocomment == "":
            # block list: the items are the following indented (or "- ") lines
            last = key
            indent = "  "
            j = key + 1
            seen_item = False
            while j < close:
                line = lines[j]
                stripped = line.strip()
                if stripped == "" or stripped.startswith("#"):
                    j += 1
                    continue
                if line[:1] in (" ", "\t") or line.startswith("- ") or line.rstrip("\r\n") == "-":
                    if not seen_item and stripped.startswith("-"):
                        indent = line[: len(line) - len(line.lstrip())]
                        seen_item = True
                    last = j
                    j += 1
                    continue
                break
            if not lines[last].endswith(("\n", "\r")):
                lines[last] += nl
            lines.insert(last + 1, "".join(f"{indent}- {yaml_quote(s)}{nl}" for s in new))
        else:
            raise ValueError(f"cannot edit 'signatures: {value.strip()}' safely; add the signature by hand")
    out = "".join(lines)
    after = _read_signatures(out)
    if after != before + list(new):
        raise ValueError("editing the signatures list went wrong; add the signature by hand")
    return out


def add_signatures(path: Path, signatures: list[str]) -> list[str]:
    """Append the signatures not already in the case at `path`; return those added.

    Only the `signatures:` list of the front matter changes: the rest of the
    file is kept byte for byte. The file is replaced atomically, and only when
    the edited text still parses as a valid case.
    """
    path = Path(path)
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    existing = _read_signatures(text)
    known = {canon(s) for s in existing} | set(existing)
    new: list[str] = []
    for s in signatures:
        if s not in known and canon(s) not in known:
            new.append(s)
            known |= {s, canon(s)}
    if not new:
        return []
    out = insert_signatures(text, new)
    _case, problems = parse_case_text(path, out)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ValueError("the edited case would not be valid: " + "; ".join(p.message for p in errors))
    atomic_files.atomic_write_bytes(path, out.encode("utf-8"), mode=path.stat().st_mode & 0o7777)
    return new
