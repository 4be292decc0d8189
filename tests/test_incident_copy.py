"""Issue 26: ctrl+r saved the raw paste, HF_TOKEN and all, as a world-readable file.

The incident copy is now redacted as `kb new` redacts a draft and created 0600 in a 0700 folder.
(The app's own path is tested with Pilot in test_app.py and in a real terminal in test_app_pty.py.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kb.incident.folder_policy import save_incident

TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
PASTE = f"""export HF_TOKEN={TOKEN}
export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567
Traceback (most recent call last):
  File "/home/alice/verl/train.py", line 3, in main
huggingface_hub.errors.GatedRepoError: 401 Client Error for https://huggingface.co/meta-llama/x (token {TOKEN})
"""


def _check(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert TOKEN not in text and "0123456789abcdef0123456789abcdef01234567" not in text and "alice" not in text
    assert "GatedRepoError: 401 Client Error" in text  # the error itself is kept
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0


def test_save_incident_is_redacted_and_private(tmp_path: Path) -> None:
    old = os.umask(0o000)  # even with a permissive umask
    try:
        path = save_incident(PASTE, tmp_path / "incidents")
    finally:
        os.umask(old)
    _check(path)


def test_the_apps_save_paste_is_redacted_and_private() -> None:
    from tui.newcase import save_paste

    path = save_paste(PASTE)
    assert path.parent == Path(os.environ["KB_DATA_DIR"]) / "incidents"
    _check(path)
