"""Text in, ranked cases out: signals -> three scorers -> fusion -> evidence.

Each scorer yields a number in [0, 1] per case:
- signature: the best literal/regex signature that matched (see signatures.py);
- lexical: BM25 of the error lines, divided by the best case's BM25 and damped
  when even the best case shares little with the query;
- dense: the best cosine between the query and any of the case's vectors,
  rescaled from the range where unrelated text lands to where matches land.
The fused score is a weighted sum; the weights and the abstention threshold
are chosen with `kb eval` on the dev queries (docs/search.md has the figures).
Each result carries typed evidence (kb.search.evidence) of what each scorer found;
views render from it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kb.cases.provenance import Origin, OriginMap
from kb.index import adapter as query_adapter
from kb.index.documents import CaseDoc
from kb.index.encoder import EncoderLoad
from kb.index.opener import LoadedIndex, open_index
from kb.search.confidence import ConfidenceFeatures, Level, Model, ModelFileError, asks, load_model
from kb.search.evidence import Evidence
from kb.search.near_miss import near_miss
from kb.search.question import MIN_CHOICE_SCORE, Choice, question_text
from kb.search.question import choices as question_choices
from kb.search.rerank import (
    CANDIDATES,
    Candidate,
    Distinctive,
    RankFileError,
    RankModel,
    candidate_features,
    gathered_families,
    is_any_family,
    is_family,
    load_rank_model,
    paste_identifiers,
    rerank_order,
)
from kb.search.signatures import SEARCH_REGEX_BUDGET_S, SignatureHit, SignatureMatcher, signature_score, template_variants
from kb.search.versions import Version, VersionJudgement, judge, paste_versions
from kb.text.metric_lines import only_metrics
from kb.text.signals import Signals, extract

# --- calibration (issue 13): stack detection, weak signatures, fitted confidence
from kb.text.stack import StackVerdict
from kb.text.stack import detect as detect_stack
from kb.text.tokenize import display_terms, drop_negated

# --- end calibration

SCORERS = ("signature", "lexical", "dense")
WEAK_CROSS_CHECK_MAX_CASES = 5000  # above this only the generic-words test marks weak signatures
DENSE_NEIGHBOURS = 160  # nearest vectors read per query (a case has ~11)


@dataclass(frozen=True)
class Weights:
    signature: float = 0.30
    lexical: float = 0.30
    dense: float = 0.40
    abstain_below: float = 0.30  # fused score of the top result; dev: out-of-scope <= 0.25, in-scope >= 0.33
    dense_floor: float = 0.20  # cosine that unrelated text reaches
    dense_ceiling: float = 0.80  # cosine of a near-verbatim match
    dense_second: float = 0.30  # share of a case's second-best vector in its dense cosine
    context_weight: float = 0.2  # BM25 weight of the non-error lines and earlier turns
    bm25_saturation: float = 20.0  # BM25 of a query that clearly hits a case
    sig_base: float = 0.5  # fused score floor of a case whose signature matched
    sig_gain: float = 0.10
    # confidence from the fused score alone, where the fitted model is not used (no dense scorer, no model)
    high_from: float = 0.70
    medium_from: float = 0.45
    runner_up_gap: float = 0.10  # a runner-up this far below the top answer is "low" at best
    # A description with no error line whose best entry the confidence model gives less than this
    # chance of being right gets a question instead of a guess (issue 24: a report whose cause nothing
    # establishes is served by a question that narrows it). Measured in docs/search.md; 0 turns it off.
    ask_below: float = 0.15
    # the same for a specific entry with nothing in the paste that tells it apart (no specific signature, no
    # identifier): kb.search.confidence.asks; measured in docs/search.md; 0 turns it off
    ask_specific_below: float = 0.25

    def level(self, score: float) -> Level:
        """The score band of a fused score: "high", "medium" or "low"."""
        return "high" if score >= self.high_from else "medium" if score >= self.medium_from else "low"


DEFAULT_WEIGHTS = Weights()


def _below(p: float | None, threshold: float) -> str:
    """p as a percentage that reads as below `threshold` (14.8 % is "14.8%", not "15% < 15%")."""
    p = p or 0.0
    return f"{p:.0%}" if round(p * 100) < round(threshold * 100) else f"{p:.1%}"


@dataclass
class Result:
    id: str
    title: str
    category: str
    path: str
    score: float
    confidence: Level
    scores: dict[str, float]
    evidence: list[Evidence]  # why it matched, strongest first (kb.search.evidence); views render from it
    matched_lines: list[str] = field(default_factory=list)
    # Where the case comes from (kb.cases.provenance): its folder layer, and the file
    # of a lower layer it overrides ("" / None when it overrides nothing).
    layer: str = ""
    overrides: str | None = None
    overrides_layer: str = ""
    kind: str = "curated"  # "light": one root cause from a few reports, checks optional
    p_right: float | None = None  # calibrated chance this answer is right (top result only)
    # "high" lowered to "medium" only because the case is an unedited draft: the error line is matched for
    # sure, so `kb new` still treats it as the case that already covers the log
    capped_draft: bool = False
    # "high" lowered to "medium" only because the case is a family entry (several causes): the message is
    # matched, which cause is not established; views say so beside the chance, `kb new` treats it as covered
    capped_family: bool = False

    @property
    def why(self) -> list[str]:
        """The evidence as sentences (`why` of `kb search --json`)."""
        return [e.text for e in self.evidence]

    def origin(self) -> Origin:
        return Origin(self.layer, Path(self.path), None, Path(self.overrides) if self.overrides else None, self.overrides_layer)

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            **self.origin().to_json(),
            "kind": self.kind,
            "score": round(self.score, 4),
            "confidence": self.confidence,
            "why": self.why,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
            "matched_lines": self.matched_lines,
            "evidence": [e.to_json() for e in self.evidence],
        }
        if self.p_right is not None:
            out["p_right"] = round(self.p_right, 4)
        if self.capped_family:
            out["cause_open"] = True  # a family entry: the message matched, which of its causes is not established
        return out


@dataclass
class Answer:
    query: str
    abstained: bool
    results: list[Result]
    signals: Signals
    searched_for: list[str]  # the extracted lines shown to the user
    dense_used: bool
    notes: list[str] = field(default_factory=list)
    # --- logs (issue 18): ranks, stage, consequences, baseline; filled by logsearch.search_analysis
    extra: dict[str, Any] = field(default_factory=dict)
    # --- calibration (issue 13)
    stack: StackVerdict | None = None  # which software stack the paste comes from
    nearest: list[Result] = field(default_factory=list)  # when declined: the closest cases, not a match
    question: str = ""  # when declined without an error line: one question to narrow it down (kb.search.question)
    choices: list[Choice] = field(default_factory=list)  # the question's choices: what each nearest entry would show
    features: ConfidenceFeatures | None = None  # what the confidence model read (for `kb eval --fit`)
    candidates: list[tuple[str, np.ndarray]] = field(default_factory=list)  # (case id, RANK_FEATURES) for the ranking fit

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "abstained": self.abstained,
            "results": [r.to_json() for r in self.results],
            "searched_for": self.searched_for,
            "dense": self.dense_used,
            "notes": self.notes,
            **self.extra,
        }
        if self.stack is not None:
            out["stack"] = self.stack.to_json()
        if self.abstained:
            out["nearest"] = [{"id": r.id, "title": r.title, "score": round(r.score, 4)} for r in self.nearest]
            if self.question:
                out["question"] = self.question
                out["question_choices"] = [c.to_json() for c in self.choices]
        return out


@dataclass
class RawScores:
    """What the scorers found, before normalisation (kept apart so fusion can be studied)."""

    signals: Signals
    n: int
    hits: dict[str, list[SignatureHit]] = field(default_factory=dict)
    terms: list[str] = field(default_factory=list)
    signature: np.ndarray | None = None
    bm25: np.ndarray | None = None
    bm25_context: np.ndarray | None = None
    cos: np.ndarray | None = None
    best_row: np.ndarray | None = None
    timed_out: list[str] = field(default_factory=list)  # regex signatures skipped for running too long
    not_tried: list[str] = field(default_factory=list)  # regex signatures left once the search's regex budget was spent
    text: str = ""  # what the lexical scorer read, to show shared terms as the user wrote them
    weak_only: set[int] = field(default_factory=set)  # rows whose signature hits are all broad/generic


def fuse(raw: RawScores, w: Weights) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Normalise each scorer to [0, 1] and combine; returns (fused, parts: scorer name -> its part)."""
    n = raw.n
    parts: dict[str, np.ndarray] = {}
    if raw.signature is not None:
        parts["signature"] = raw.signature
    if raw.bm25 is not None:
        bm = raw.bm25 + w.context_weight * (raw.bm25_context if raw.bm25_context is not None else 0)
        top = float(bm.max()) if n else 0.0
        # relative to the best case, damped when even the best case shares little with the query
        parts["lexical"] = (bm / top) * min(1.0, top / w.bm25_saturation) if top > 0 else np.zeros(n, np.float32)
    if raw.cos is not None:
        parts["dense"] = np.clip((raw.cos - w.dense_floor) / (w.dense_ceiling - w.dense_floor), 0.0, 1.0)
    weights = {"signature": w.signature, "lexical": w.lexical, "dense": w.dense}
    active = [s for s in SCORERS if s in parts]
    fused = np.zeros(n, dtype=np.float32)
    for s in active:
        fused += weights[s] * parts[s]
    fused /= sum(weights[s] for s in active) or 1.0
    if "signature" in parts:
        # A signature hit is near-certain evidence: it lifts the case on its own, and
        # among several cases whose signatures matched, the other scorers decide.
        sig = parts["signature"]
        others = [s for s in active if s != "signature"]
        rest = sum(weights[s] * parts[s] for s in others) / sum(weights[s] for s in others) if others else np.zeros(n, np.float32)
        fused = np.where(sig > 0, np.maximum(fused, w.sig_base + w.sig_gain * sig + (1 - w.sig_base - w.sig_gain) * rest), fused)
    return fused.astype(np.float32), parts


def case_cosines(
    q: np.ndarray, vectors: np.ndarray, row_case: np.ndarray, candidates: list[int], n: int, second: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate case's dense cosine: its best vector, pulled toward its second best.

    A case has ~11 vectors (title, summary, each symptom, each signature); with the best
    one alone, a case wins on one lucky phrase, and cases with many short texts (light
    entries) get many tries. `(1 - second) * best + second * next best` prefers a case
    whose texts agree with the query twice. Rows are grouped by case (row_case sorted).
    Returns (cosine per case, -1 for non-candidates; row of the best vector, -1 if none).
    """
    best = np.full(n, -1.0, dtype=np.float32)
    best_row = np.full(n, -1, dtype=np.int64)
    for case in candidates:
        lo, hi = int(np.searchsorted(row_case, case)), int(np.searchsorted(row_case, case, side="right"))
        if hi <= lo:
            continue
        sims = vectors[lo:hi] @ q
        top = int(np.argmax(sims))
        best_row[case] = lo + top
        first = float(sims[top])
        rest = np.delete(sims, top)
        best[case] = first if not len(rest) else (1 - second) * first + second * float(rest.max())
    return best, best_row


class Engine:
    """Holds a loaded index and its scorers; thread-safe lazy loading of the dense model."""

    def __init__(self, index: LoadedIndex, weights: Weights = DEFAULT_WEIGHTS, origins: OriginMap | None = None) -> None:
        self.index = index
        self.weights = weights
        self.docs: list[CaseDoc] = index.docs
        self._position = {d["id"]: i for i, d in enumerate(self.docs)}  # case id -> row of every score array
        self.lexical = index.lexical_index()
        self.matcher = SignatureMatcher(self.docs)
        self._weak: dict[tuple[str, str], str] | None = None  # calibration: (case, signature) -> why it is weak
        self._model: Model | None = None
        self._model_error = ""
        self._distinctive: Distinctive | None = None  # ranking (issue 25): identifiers and version ranges per case
        self._rank_model: RankModel | None = None
        self._rank_loaded = False
        self._rank_error = ""
        self.keep: np.ndarray | None = None  # growth experiment (kb.evaluation.rank_fit): cases not kept score nothing
        # the installed environment's package versions (kb search --installed), read where a paste names none;
        # empty by default: a paste is often from another machine than the one kb runs on
        self.installed_versions: dict[str, Version] = {}
        self._encoder: Any = None
        self._encoder_error: str = ""
        self._encoder_load: EncoderLoad | None = None  # an encoder already being opened (from_index)
        self._lock = threading.Lock()
        # open() and from_index() pass the folders the index was built from
        self.origins = origins if origins is not None else OriginMap.current()

    @classmethod
    def open(cls, extra_dirs: list[Path] | None = None, **kwargs: Any) -> Engine:
        weights = kwargs.pop("weights", DEFAULT_WEIGHTS)
        index = open_index(extra_dirs, **kwargs)
        return cls.from_index(index, extra_dirs, kwargs.get("include_builtin", True), weights)

    @classmethod
    def from_index(cls, index: LoadedIndex, extra_dirs: list[Path] | None = None, include_builtin: bool = True,
                   weights: Weights = DEFAULT_WEIGHTS, encoder: EncoderLoad | None = None) -> Engine:
        """An engine over an index open_index() returned for these folders; `encoder`: the index's
        encoder already being opened (kb search starts it before importing the engine), which
        load_dense() then waits for."""
        # the folders open_index just listed: the results' origins need no second walk
        engine = cls(index, weights, OriginMap.current(extra_dirs, include_builtin, index.case_files))
        engine._encoder_load = encoder
        return engine

    # ------------------------------------------------------------ dense model

    @property
    def dense_ready(self) -> bool:
        return self._encoder is not None

    @property
    def dense_error(self) -> str:
        if not self.index.dense_available:
            return self.index.status.dense_reason or "dense search is off"
        return self._encoder_error

    def load_dense(self) -> bool:
        """Load the ONNX encoder (about a second, cold). Safe to call from a worker thread."""
        if not self.index.dense_available:
            return False
        with self._lock:
            if self._encoder is None and not self._encoder_error:
                try:
                    if self._encoder_load is not None:
                        self._encoder = self._encoder_load.result()
                    else:
                        from kb.index.encoder import OnnxEncoder

                        self._encoder = OnnxEncoder(self.index.onnx_path(), self.index.tokenizer_path(), threads=1)
                    if self.index.needs_faiss():
                        self.index.faiss_index()
                except Exception as exc:
                    self._encoder_error = f"dense model failed to load: {type(exc).__name__}: {exc}"
        return self._encoder is not None

    # ------------------------------------------------------------ scorers

    def _dense_scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Dense cosine per case (see `case_cosines`) and the row of its best vector."""
        n = len(self.docs)
        # mapped by the adapter fitted on the cases' own texts (kb.index.adapter), where the index has one
        q = query_adapter.apply(self.index.adapter, self._encoder.encode_one(text))
        # The nearest vectors name the candidate cases; the others keep cosine -1 (dense part 0).
        candidates = self.index.nearest_cases(q, int(min(len(self.index.vectors), DENSE_NEIGHBOURS)))
        cos, best_row = case_cosines(q, self.index.vectors, self.index.row_case, candidates, n, self.weights.dense_second)
        if self.index.adapter is not None:
            cos = query_adapter.calibrate(cos, *self.index.adapter_scale)
        return cos, best_row

    def score(self, text: str, use: tuple[str, ...] = SCORERS, context: str = "") -> RawScores:
        """Run the scorers; raw numbers, not yet normalised or fused."""
        signals = extract(text)
        focus = drop_negated(signals.focus_text)
        # --- calibration (issue 13): a follow-up without error lines of its own refines the same
        # problem, so the conversation's error lines stay the evidence (signatures, focus) and the
        # new words join them; before, they replaced them and an agreeing follow-up lost confidence.
        if context.strip() and not signals.error_lines:
            earlier = extract(context)
            if earlier.error_lines:
                signals = extract(f"{context}\n{text}")
                focus = drop_negated(f"{earlier.focus_text}\n{text}")
                context = earlier.rest_text
        # --- end calibration
        n = len(self.docs)
        raw = RawScores(signals=signals, n=n)
        if "signature" in use:
            lines = [l.text for l in signals.lines]
            if len(lines) > 5000:  # huge paste: error lines and the tail carry the signature
                lines = [l.text for l in signals.error_lines] + lines[-3000:]
            variants = template_variants(lines)
            raw.hits = self.matcher.match(lines + [v for v, _ in variants], raw.timed_out, unmatched=raw.not_tried)
            if variants:  # a hit on a rendered raise line is reported on the pasted line it came from
                source = dict(variants)
                raw.hits = {c: [replace(x, line=source.get(x.line, x.line)) for x in h] for c, h in raw.hits.items()}
            sig = np.zeros(n, dtype=np.float32)
            weak = self.weak_signatures()
            for cid, h in raw.hits.items():
                sig[self._position[cid]] = signature_score(h)
                if all((cid, x.signature) in weak for x in h):
                    raw.weak_only.add(self._position[cid])
            raw.signature = sig
        rest = drop_negated("\n".join(t for t in (signals.rest_text, context) if t))
        if "lexical" in use:
            raw.text = f"{focus}\n{rest}"
            raw.bm25, raw.terms = self.lexical.scores(focus)
            if rest:
                raw.bm25_context, extra_terms = self.lexical.scores(rest, exclude=set(raw.terms))
                raw.terms = raw.terms + extra_terms
            else:
                raw.bm25_context = np.zeros(n, dtype=np.float32)
        if "dense" in use and self._encoder is not None and n:
            # One encode: error lines first, then context; the model reads the first 256 tokens.
            raw.cos, raw.best_row = self._dense_scores(f"{focus[:2000]}\n{rest[:1000]}" if rest else focus[:3000])
        if self.keep is not None:
            self._drop_cases(raw, ~self.keep)
        return raw

    def _drop_cases(self, raw: RawScores, drop: np.ndarray) -> None:
        """Score as if the dropped cases were not in the corpus (the growth experiment; BM25's
        document frequencies still count them)."""
        raw.hits = {c: h for c, h in raw.hits.items() if not drop[self._position[c]]}
        raw.weak_only = {i for i in raw.weak_only if not drop[i]}
        for arr, empty in ((raw.signature, 0.0), (raw.bm25, 0.0), (raw.bm25_context, 0.0), (raw.cos, -1.0)):
            if arr is not None:
                arr[drop] = empty

    # ------------------------------------------------------------ search

    def search(self, text: str, k: int = 5, use: tuple[str, ...] = SCORERS, context: str = "", abstain: bool = True) -> Answer:
        raw = self.score(text, use, context)
        w = self.weights
        signals = raw.signals
        fused, parts = fuse(raw, w)
        self._demote_harmless(raw, fused)  # calibration (issue 13)
        # --- ranking (issue 25): family versus specific, versions; learned adjustment of the top candidates
        cands = self._candidates(text, raw, fused) if tuple(use) == SCORERS else []
        base = fused
        fused = rerank_order(fused, cands, self.rank_model() if cands else None, self._outexplained(raw, cands))
        by_row = {c.row: c for c in cands}
        # --- end ranking
        ranking = np.argsort(-fused, kind="stable")
        order = ranking[:k]
        results: list[Result] = []
        for i in order:
            if fused[i] <= 0:
                continue
            results.append(self._result(int(i), float(fused[i]), parts, raw, by_row.get(int(i))))
        # abstention reads the fused score of the top case before the learned adjustment: the
        # adjustment orders candidates; the threshold was chosen on the fused score
        top = float(base[int(order[0])]) if results else 0.0
        abstained = abstain and top < w.abstain_below
        # --- calibration (issue 13): other stacks are declined, the top answer's confidence is fitted
        stack = detect_stack(text)
        # the top case's margin over the next one whatever k is: `-k 1` gave another confidence than `-k 2`
        features = self._features(raw, fused, parts, ranking[:2], stack, by_row) if results else None
        model = self.model()
        # The model was fitted with all three scorers; without the dense one its inputs are off
        # the fitted range, so the score bands stay (a broad signature alone still cannot give high).
        if results and features is not None and (model is None or raw.cos is None) and features.sig_weak_only and results[0].confidence == "high":
            results[0].confidence = "medium"
        if results and (model is None or raw.cos is None) and not signals.error_lines:
            # Score bands without the fitted model (no dense scorer: the app's first seconds, --no-dense):
            # shared words alone in a text with no error line (healthy step metrics) are not "medium".
            for r in results:
                if r.confidence != "low" and not raw.hits.get(r.id):
                    r.confidence = "low"
        if results and features is not None and model is not None and raw.cos is not None:
            level, p = model.level(features)
            results[0].confidence, results[0].p_right = level, p
            for r in results[1:]:  # a runner-up is never more certain than the top answer
                r.confidence = "low" if level == "low" or r.score < results[0].score - w.runner_up_gap else "medium"
        metrics_only = bool(results) and not signals.error_lines and only_metrics(text)
        if metrics_only:
            # healthy step metrics share words with every numerics entry but show no failure: nothing is likely
            for r in results:
                if not raw.hits.get(r.id):
                    r.confidence, r.p_right = "low", None
        self._mark_near_misses(results, raw)
        self._list_members(results)
        unedited = self._cap_unedited(results)
        family = self._cap_family(results)
        if abstain and stack.foreign:
            abstained = True
        asked = abstain and not abstained and bool(results) and features is not None and asks(
            features, results[0].p_right, w.ask_below, w.ask_specific_below)
        abstained = abstained or asked
        nearest = results[:3] if abstained else []
        ask = abstained and not stack.foreign and not signals.error_lines
        options = question_choices([self.docs[self._position[r.id]] for r in nearest if r.score >= MIN_CHOICE_SCORE]) if ask else []
        question = question_text(options) if ask else ""
        # --- end calibration
        # one entry per line: views show them as lines (a joined block showed its newlines escaped)
        searched = [l.text.strip() for l in signals.error_lines][:12] or [
            line.strip() for line in signals.focus_text.strip()[:300].splitlines() if line.strip()
        ][:12]
        notes = list(self.index.status.notes)
        if unedited:
            notes.append(f"{', '.join(unedited)}: an unedited draft (its Causes and Fix still say TODO), so at most medium")
        if family:
            notes.append(f"{', '.join(family)}: an entry for a symptom with several possible causes; its checks or Verify steps tell them apart, so at most medium")
        if asked and (results[0].p_right or 0.0) < w.ask_below:
            notes.append(f"no error line, and the closest entry is unlikely to be right ({_below(results[0].p_right, w.ask_below)} < "
                         f"{w.ask_below:.0%}): kb asks instead of guessing; the closest entries are listed, not matches")
        elif asked:
            notes.append(f"no error line, and nothing in the paste tells the closest entry, a specific cause, apart from the "
                         f"others ({_below(results[0].p_right, w.ask_specific_below)} < {w.ask_specific_below:.0%}, no signature or name of its own): "
                         "kb asks instead of guessing; the closest entries are listed, not matches")
        if signals.error_lines and all("cut-traceback" in l.kinds for l in signals.error_lines):
            notes.append("the traceback stops before its exception line: kb read its last frame; "
                         "the lines after it (the error itself) would make the answer firmer")
        if metrics_only:
            notes.append("these lines are training metrics with no error line and no NaN or inf value: "
                         "the answers share words with them, nothing points at a failure")
        if stack.foreign:
            notes.append(f"this looks like {stack.label} output, not verl's stack (saw: {stack.evidence[:120]}); kb's cases do not cover it")
        if self._model_error:
            notes.append(self._model_error)
        if self._rank_error:
            notes.append(self._rank_error)
        if self.index.status.problems:
            notes.append(f"{len(self.index.status.problems)} case file(s) skipped because of errors; run `kb check`")
        if "dense" in use and raw.cos is None:
            notes.append(f"dense search not used: {self.dense_error or 'model not loaded yet'}")
        if raw.timed_out:
            notes.append(f"{len(raw.timed_out)} regex signature(s) skipped for taking too long (run `kb check`): " + ", ".join(s[:60] for s in raw.timed_out[:3]))
        if raw.not_tried:
            notes.append(
                f"signature matching stopped after {SEARCH_REGEX_BUDGET_S:g} s in all: {len(raw.not_tried)} regex signature(s) "
                "not tried (slow patterns; run `kb check`)"
            )
        if signals.truncated:
            notes.append(f"paste of {signals.original_chars} characters: searched its head, tail and error lines")
        return Answer(text, abstained, [] if abstained else results, signals, searched, raw.cos is not None, notes,
                      stack=stack, nearest=nearest, question=question, choices=options, features=features,
                      candidates=[(self.docs[c.row]["id"], c.features) for c in cands])

    # ------------------------------------------------------------ ranking (issue 25)

    def rank_model(self) -> RankModel | None:
        """The fitted ranking weights (kb/search/rank.json); None without the file, or with a note when it is unusable."""
        if not self._rank_loaded:
            self._rank_loaded = True
            try:
                self._rank_model = load_rank_model()
            except RankFileError as exc:
                self._rank_error = f"ranking model unusable, ranking by the fused score alone: {exc}"
        return self._rank_model

    def set_rank_model(self, model: RankModel | None) -> None:
        """Rank with these weights (the fit's folds; None: by the fused score alone)."""
        self._rank_model, self._rank_loaded, self._rank_error = model, True, ""

    def _candidates(self, text: str, raw: RawScores, fused: np.ndarray) -> list[Candidate]:
        """The top cases by fused score, with what tells them apart (kb.search.rerank)."""
        if not len(fused):
            return []
        dist = self._dist()
        rows = [int(i) for i in np.argsort(-fused, kind="stable")[:CANDIDATES] if fused[i] > 0]
        gathers = gathered_families(rows, dist.families_of, fused)
        rows += [f for f in gathers if f not in rows]
        strong = {self._position[c] for c in raw.hits} - raw.weak_only
        found = paste_identifiers(text)
        shown = paste_versions(text)
        # the installed environment's versions (kb search --installed) where the paste names none
        pasted = {**self.installed_versions, **shown}
        from_env = frozenset(self.installed_versions.keys() - shown.keys())
        return candidate_features(
            rows, fused, strong, [is_family(self.docs[r]) for r in rows],
            [tuple(sorted(dist.per_case[r] & found)) for r in rows],
            [self._version_judgement(pasted, r, from_env) for r in rows],
            bool(raw.signals.error_lines), gathers, [bool(self.docs[r].get("family", False)) for r in rows],
            vague=not raw.signals.error_lines and len(text.strip()) < 400,
        )

    def _dist(self) -> Distinctive:
        """Identifiers, version ranges and family members per case (kb.search.rerank.Distinctive), built on first use."""
        if self._distinctive is None:
            self._distinctive = Distinctive(self.docs)
        return self._distinctive

    def _version_judgement(self, pasted: dict[str, Version], row: int, installed: frozenset[str] = frozenset()) -> VersionJudgement:
        """The paste's versions against the entry's range. A family entry's range dates its listed causes, not
        its symptom (a slow weight sync, an SGLang mismatch happen at every version), so a version outside it
        does not rule the family out: only "inside" is said of it."""
        j = judge(pasted, self._distinctive.version_ranges(row) if self._distinctive else {}, installed)
        doc = self.docs[row]
        if j.verdict == "excluded" and is_any_family(doc):
            return VersionJudgement("unknown")
        return j

    # ------------------------------------------------------------ calibration (issue 13)

    def weak_signatures(self) -> dict[tuple[str, str], str]:
        """(case id, signature) -> why it is weak evidence; computed once per engine."""
        if self._weak is None:
            from kb.search.background import cached_weak_signatures

            self._weak = cached_weak_signatures(self.docs, self.index.generation, WEAK_CROSS_CHECK_MAX_CASES)
        return self._weak

    def _cap_family(self, results: list[Result]) -> list[str]:
        """A family entry names a symptom or a message, not which of its causes this is: never "high" (issue 24).

        Tagged `family`/`triage`, or one message with several listed causes and a check that tells them
        apart (Case.is_family, kept in the index). The match may be certain (a plain CUDA OOM is a CUDA OOM),
        but "high" would say the cause is known, and only the entry's checks establish it."""
        capped = []
        for r in results:
            doc = self.docs[self._position[r.id]]
            if r.confidence == "high" and is_any_family(doc):
                r.confidence = "medium"
                r.capped_family = True
                capped.append(r.id)
        return capped

    def _outexplained(self, raw: RawScores, cands: list[Candidate]) -> dict[int, set[int]]:
        """Candidates whose signature hits are all broad -> the candidates whose specific signature matched a
        pasted line they did not (kb.search.rerank.rerank_order puts the former below the latter)."""
        rows = {c.row for c in cands}
        lines = {self._position[cid]: {h.line for h in hits} for cid, hits in raw.hits.items()}
        strong = [r for r in rows if r in lines and r not in raw.weak_only]
        out: dict[int, set[int]] = {}
        for w in rows & raw.weak_only:
            better = {s for s in strong if lines[s] - lines.get(w, set())}
            if better:
                out[w] = better
        return out

    def _list_members(self, results: list[Result]) -> None:
        """A family result says which specific entries it lists, those among these results with their rank."""
        rank = {r.id: n for n, r in enumerate(results, 1)}
        named = self._dist().members
        for r in results:
            # only a family entry has members (kb.index.documents.family_members)
            members = [self.docs[m]["id"] for m in named[self._position[r.id]]]
            if members:
                # second, after the strongest reason: views show the first two or three, and for a family which
                # specific entries it lists is what the user reads next
                r.evidence.insert(1, Evidence.family_members(members, [(m, rank[m]) for m in members if m in rank]))

    def _cap_unedited(self, results: list[Result]) -> list[str]:
        """A draft whose Causes and Fix still say TODO knows an error line, not an answer: never "high"."""
        capped = []
        for r in results:
            if r.confidence == "high" and self.docs[self._position[r.id]].get("unedited"):
                r.confidence = "medium"
                r.capped_draft = True
                capped.append(r.id)
        return capped

    def _mark_near_misses(self, results: list[Result], raw: RawScores) -> None:
        """A case whose signature's words a pasted line has, with other quoted names, is told as such,
        and such a top answer is not "high": the same message about another module or key is
        another problem (kb.search.near_miss)."""
        lines = [l.text for l in raw.signals.error_lines] or raw.signals.focus_text.splitlines()
        for rank, r in enumerate(results):
            if raw.hits.get(r.id):
                continue
            miss = near_miss(lines, self.docs[self._position[r.id]]["signatures"])
            if miss is None:
                continue
            r.evidence.insert(0, Evidence.near_miss(miss.signature, miss.line, miss.case_name, miss.pasted_name))
            if rank == 0 and r.confidence == "high":
                r.confidence = "medium"  # runner-ups are already below the top answer

    def _demote_harmless(self, raw: RawScores, fused: np.ndarray) -> None:
        """A case about a benign message (tag `harmless`) ranks below any case whose signature
        explains another line of the paste: the warning is not the failure."""
        if not raw.hits:
            return
        from kb.search.background import is_harmless

        harmless = [self._position[c] for c in raw.hits if is_harmless(self.docs[self._position[c]])]
        real = [self._position[c] for c in raw.hits if not is_harmless(self.docs[self._position[c]])]
        if harmless and real:
            floor = float(min(fused[i] for i in real))
            for i in harmless:
                fused[i] = min(fused[i], max(0.0, floor - 0.01))

    def model(self) -> Model | None:
        """The fitted confidence model (kb/search/confidence.json); None, with a note, if it is unusable."""
        if self._model is None and not self._model_error:
            try:
                self._model = load_model()
            except ModelFileError as exc:
                self._model_error = f"confidence model unusable, falling back to score bands: {exc}"
        return self._model

    def _features(
        self, raw: RawScores, fused: np.ndarray, parts: dict[str, np.ndarray], order: np.ndarray, stack: StackVerdict,
        cands: dict[int, Candidate] | None = None,
    ) -> ConfidenceFeatures:
        """What the confidence model reads about the top case."""
        i = int(order[0])
        cand = (cands or {}).get(i)
        top_id = self.docs[i]["id"]
        top_lines = {h.line for h in raw.hits.get(top_id, [])}
        # the pasted lines the top case's signatures explain are all explained by another case's too
        shared = bool(top_lines) and any(top_lines <= {h.line for h in hs} for cid, hs in raw.hits.items() if cid != top_id)
        second = float(fused[int(order[1])]) if len(order) > 1 else 0.0
        sig = parts.get("signature")
        weak_only = i in raw.weak_only
        rival = sig is not None and bool(np.any(np.delete(sig, i) > 0))
        return ConfidenceFeatures(
            sig_strong=float(sig[i]) if sig is not None and not weak_only else 0.0,
            sig_weak_only=1.0 if weak_only else 0.0,
            sig_rival=1.0 if rival else 0.0,
            lexical=float(parts["lexical"][i]) if "lexical" in parts else 0.0,
            dense=float(parts["dense"][i]) if "dense" in parts else 0.0,
            fused=float(fused[i]),
            margin=float(fused[i]) - second,
            error_line=1.0 if raw.signals.error_lines else 0.0,
            foreign=min(1.0, stack.foreign_score / 4.0) if not stack.foreign else 1.0,
            unexplained_error=1.0 if raw.signals.error_lines and (sig is None or sig[i] <= 0) else 0.0,
            family=1.0 if is_family(self.docs[i]) else 0.0,
            ident=float(cand.features[2]) if cand is not None else 0.0,
            sig_shared=1.0 if shared else 0.0,
            version_excluded=1.0 if cand is not None and cand.version.verdict == "excluded" else 0.0,
            version_included=1.0 if cand is not None and cand.version.verdict == "included" else 0.0,
            specific_unseparated=1.0 if self._specific_unseparated(i, cand, sig is not None and sig[i] > 0 and not weak_only) else 0.0,
        )

    def _specific_unseparated(self, i: int, cand: Candidate | None, strong_hit: bool) -> bool:
        """A specific entry (neither a family by tag nor by structure) that nothing in the paste tells apart."""
        if is_any_family(self.docs[i]):
            return False
        return not (cand.separated if cand is not None else strong_hit)

    def _result(self, i: int, score: float, parts: dict[str, np.ndarray], raw: RawScores, cand: Candidate | None = None) -> Result:
        doc = self.docs[i]
        evidence: list[Evidence] = []
        version = None
        if cand is not None and cand.version.verdict != "unknown":
            v = cand.version
            # with a ranking model, kb.search.rerank.rerank_order puts an excluded entry below every
            # candidate whose range does not exclude the paste
            down = v.verdict == "excluded" and self._rank_model is not None
            version = Evidence.version(v.verdict, v.package, ".".join(map(str, v.pasted)), v.text, ranked_down=down,
                                       installed=v.installed)
            if v.verdict == "excluded":  # the first thing a reader should know about this case
                evidence.append(version)
                version = None
        weak = self._weak or {}
        hits = raw.hits.get(doc["id"], [])[:3]
        for h in hits:
            evidence.append(Evidence.signature_hit(h.signature, h.line, weak=(doc["id"], h.signature) in weak))
        if "lexical" in parts and parts["lexical"][i] > 0:
            shared = display_terms(self.lexical.shared_terms(i, raw.terms, limit=len(raw.terms)), raw.text)
            if shared:
                evidence.append(Evidence.shared_terms(shared))
        if raw.cos is not None and raw.best_row is not None and raw.best_row[i] >= 0:
            row = int(raw.best_row[i])
            local = row - int(np.searchsorted(self.index.row_case, i))
            texts = doc["dense_texts"]
            label = texts[local] if 0 <= local < len(texts) else doc["title"]
            evidence.append(Evidence.dense_match(float(raw.cos[i]), label))
        if version is not None:
            evidence.append(version)
        scores = {s: float(parts[s][i]) for s in SCORERS if s in parts}
        origin = self.origins.origin(doc["path"], doc["id"])
        return Result(doc["id"], doc["title"], doc["category"], doc["path"], score, self.weights.level(score), scores, evidence,
                      [h.line for h in hits], origin.layer, None if origin.replaces is None else str(origin.replaces),
                      origin.replaces_layer, doc.get("kind", "curated"))
