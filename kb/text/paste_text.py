"""What a paste or a typed query really is, before anything reads it.

- Line ends: many terminals (and tmux's `paste-buffer -p`) send a paste's line
  breaks as CR, and Windows tools write CRLF. The log reader reads a lone CR
  inside a line as a progress bar redrawing itself (it keeps the text after the
  last CR), so a whole log pasted with CR line ends was read as its final line
  only. Every input (a paste in the app, `kb search` text, standard input, a log
  file) goes through `normalise_line_endings`.
- A lone path: a message that is just the path of an existing file means that
  file (the app and `kb search PATH` read it, and say so), not the words of
  the path.
"""

from __future__ import annotations

import os
from pathlib import Path


def normalise_line_endings(text: str) -> str:
    """CRLF to LF; and when the text has no LF at all, every CR to LF (CR was its line end).

    A text that has LFs keeps its lone CRs: there they are progress bars redrawing one line
    (tqdm), which the log reader resolves to the last drawing."""
    if "\r" not in text:
        return text
    text = text.replace("\r\n", "\n")
    if "\n" not in text.rstrip("\n"):
        text = text.replace("\r", "\n")
    return text


def named_file(text: str) -> Path | None:
    """The existing file a message names when the message is one path and nothing else
    (quotes and a leading `~` allowed); None otherwise. Only path-shaped text counts (a `/`,
    or a leading `~` or `.`), so a one-word query is never taken for a file in the current folder."""
    s = text.strip().strip("'\"")
    if not s or "\n" in s or "\r" in s or len(s) > 4096:
        return None
    if not (s.startswith(("/", "~", "./", "../")) or os.sep in s):
        return None
    try:
        p = Path(s).expanduser()
        return p if p.is_file() else None
    except (OSError, ValueError):
        return None
