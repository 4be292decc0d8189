"""Whether a paste is only training metrics: `step:1 - actor/grad_norm:0.020 - ...` and nothing else.

Such lines share words with every numerics entry (reward, loss, grad_norm) yet say nothing is wrong;
a NaN or inf value is the one thing in them that is a symptom, so it keeps the text out of this class.
"""

from __future__ import annotations

import re

# `key:value` / `key=value` / `key: value` with a number as the value; keys are metric paths (`actor/pg_loss`, `mean@1`)
_PAIR_RE = re.compile(r"(?<![\w/@.\-\[\]])[\w/@.\-\[\]]{1,120}\s?[:=]\s?[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\b")
_ANOMALY_RE = re.compile(r"(?<![\w/@.\-\[\]])[\w/@.\-\[\]]{1,120}\s?[:=]\s?[-+]?(?:nan|inf|infinity)\b", re.IGNORECASE)
_PREFIX_RE = re.compile(r"\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\)")  # Ray's `(TaskRunner pid=16292)`
_WORD_RE = re.compile(r"[^\W\d_]{2,}")

MAX_CHARS = 200_000  # a metrics paste shows its kind in its head; the keys start at a token and are bounded (a
# million `[` with an unbounded key took minutes: every start position rescanned the rest)
MIN_PAIRS = 3  # one `step:1` is not a metrics line
MAX_WORDS_PER_PAIR = 0.2  # words outside the pairs (a sentence, an error) make it something else


def only_metrics(text: str) -> bool:
    """True when the text is step-metric lines with finite values and (almost) no other words."""
    text = text[:MAX_CHARS]
    if _ANOMALY_RE.search(text):
        return False
    pairs = len(_PAIR_RE.findall(text))
    if pairs < MIN_PAIRS:
        return False
    rest = _PAIR_RE.sub(" ", _PREFIX_RE.sub(" ", text))
    return len(_WORD_RE.findall(rest)) <= MAX_WORDS_PER_PAIR * pairs
