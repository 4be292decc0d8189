"""How far a run got before it failed: launch, init, rollout, training step N, checkpoint, validation.

The stage is the last stage marker before the first cause line, refined by
the frames of the failing traceback (a crash inside `save_checkpoint` is a
checkpoint failure whatever the last progress line said). Cases are
matched against it: a start-up case (install, config, rendezvous) does not
explain a crash after training steps ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.logs.reduce import Reduction

ORDER = ("launch", "init", "rollout", "step", "checkpoint", "validation", "shutdown")

STEP_RES = [
    re.compile(r"\b(?:global_)?step[\s:=]+(\d+)(?:\s*/\s*\d+)?", re.I),
    re.compile(r"\bglobal_step=(\d+(?:\.\d+)?(?:e\+?\d+)?)"),
    re.compile(r"\biteration\s+(\d+)", re.I),
    re.compile(r"\bEpoch \d+:\s+\d+%\|.*?\|\s*(\d+)/\d+"),
    re.compile(r"Training Progress:\s+\d+%\|.*?\|\s*(\d+)/\d+"),
]
MARKERS: list[tuple[str, re.Pattern[str]]] = [
    ("shutdown", re.compile(r"\[shutdown\]|\btraining (?:is )?(?:finished|complete[d]?|done)\b|\bshutting down\b|"
                            r"destroy_process_group|Training completed", re.I)),
    ("checkpoint", re.compile(r"\[checkpoint\]|sav(?:e|ing) (?:the )?(?:checkpoint|ckpt|model)|save_checkpoint|checkpoint sav", re.I)),
    # `val/score:0.5` is a validation metric; `val_files: ...`, `data.val_batch_size=8` in a config dump or a
    # Hydra override are not (a typo in an override is a launch failure, not validation)
    ("validation", re.compile(r"\[validation\]|\bvalidat(?:e|ion|ing)\b(?![_.])|\bval/[\w/]+[:=]\s*-?\d|\brunning evaluation\b", re.I)),
    ("rollout", re.compile(r"\brollout\b|generate_sequences|\bgenerating\b|Processed prompts", re.I)),
    ("init", re.compile(r"init_process_group|process group (?:ready|initiali[sz]ed)|\[init\]|Initiali[sz]ing|rendezvous|"
                        r"Loading checkpoint shards|Started a local Ray instance|init_workers|connecting to|Connecting to existing Ray|"
                        r"NCCL INFO (?:Bootstrap|bootstrap\.cc|init\.cc)|Init START", re.I)),
]
FRAME_STAGE: list[tuple[str, re.Pattern[str]]] = [
    ("step", re.compile(r"in (?:train(?:ing)?_)?step\b|in update_(?:policy|actor|critic)\b|in fit\b|in train\b|in backward\b")),
    ("checkpoint", re.compile(r"save_checkpoint|_save_checkpoint|torch/serialization\.py|in save\b|save_pretrained", re.I)),
    ("validation", re.compile(r"in _?validate|in evaluate\b|in _?run_validation", re.I)),
    ("rollout", re.compile(r"generate_sequences|in rollout\b|in generate\b|\brollout(?:\.remote)?\(", re.I)),
    ("init", re.compile(r"init_process_group|init_workers|in _?init_model|in __init__\b|in <module>\s*$", re.I)),
]
STARTUP_CATEGORIES = {"install-env", "config"}
STARTUP_WORDS = re.compile(r"rendezvous|init[_ -]?(?:process|rendezvous|hang|fail)|startup|start-up|launch|"
                           r"not installed|module[_ -]not[_ -]found|version[_ -]mismatch|cannot[_ -]connect|address[_ -]already", re.I)


@dataclass
class Stage:
    name: str  # one of ORDER
    step: int | None = None
    line: str = ""  # the marker line it was read from
    steps_ran: bool = False  # a training step completed before the failure

    def label(self) -> str:
        if self.name == "step":
            return f"training step {self.step}" if self.step is not None else "training"
        return self.name

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "step": self.step, "label": self.label(), "evidence": self.line[:200]}


def _step_of(text: str) -> int | None:
    for rx in STEP_RES:
        m = rx.search(text)
        if m:
            try:
                return int(float(m.group(1)))
            except ValueError:
                return None
    return None


# a progress line that reports a finished step (its loss or metrics, a tqdm count): what fails after it is the next
# step. A line that only names the step (`step 5: generating`, `checkpoint barrier at step 4`) is that step.
FINISHED_RE = re.compile(r"\bloss\b|\breward|\bscore\b|\bacc(?:uracy)?\b|\blr\s*[=:]|[\w)]/\w+\s*[:=]\s*-?\d|"
                         r"\d+(?:\.\d+)?\s*(?:it/s|s/it)|\d+%\|", re.I)
DONE_RE = re.compile(r"\b(?:done|finished|complete[d]?)\b", re.I)
FAILED_ROLES = ("frame", "consequence", "cause", "timeout", "remote", "nonfinite", "launcher")


def _after(stage: Stage, t: str, last_step: int | None) -> tuple[Stage, int | None]:
    """The stage after a progress or marker line `t` (not an error line)."""
    step = _step_of(t)
    if step is not None and re.search(r"warmup_steps|total_steps|steps_per", t):
        step = None
    name = next((n for n, rx in MARKERS if rx.search(t)), None)
    if name == "init" and (last_step is not None or stage.name not in ("launch", "init")):
        return stage, last_step  # a late init line from another rank's stream; a run does not go back to start-up
    ran = last_step is not None or (step or 0) > 1
    if step is not None and name in (None, "rollout") and (name is None and FINISHED_RE.search(t) or DONE_RE.search(t)):
        # `step 5/10 loss=...` reports step 5 done (what fails next is step 6);
        # `step:3 rollout done` is step 3 still running: its update comes next
        return Stage("step", step + 1 if name is None else step, t.strip(), True), step
    if step is not None:
        return Stage(name or "step", step, t.strip(), ran or name not in (None, "rollout")), step
    if name is not None:
        steps = None if name == "init" else (last_step if name != "shutdown" else stage.step)
        return Stage(name, steps, t.strip(), last_step is not None or name == "shutdown"), last_step
    return stage, last_step


def detect(red: Reduction) -> Stage:
    """The last stage marker before the failure, read per stream: the failing rank's lines up to its first cause,
    every other rank's (and the unprefixed lines') up to its own first error; a peer's progress printed below
    the failing rank's traceback still happened before it (its output is buffered apart)."""
    lines = red.lines
    first = red.kept[0] if red.kept else None
    stage = Stage("launch")
    last_step: int | None = None
    stopped: set[tuple[str, int | None]] = set()  # (file, rank) streams past their first error
    for l in lines:
        stream = (l.file, l.rank)
        if first is not None and l is first:
            head = l.text.split("[E")[0]  # a progress bar the error was printed onto, or a warning naming its step
            step = _step_of(head)
            if step is not None:
                done = bool(re.search(r"\d+%\||it/s|s/it", head))  # a bar counts finished steps; a message names its own
                stage, last_step = Stage("step", step + 1 if done else step, l.text.strip(), done or step > 1), step
            stopped.add(stream)
            continue
        if stream in stopped:
            continue
        if l.role in FAILED_ROLES:
            if first is None or l.n >= first.n or l.file != first.file:
                stopped.add(stream)  # this stream's own failure (or the launcher's verdict): nothing later counts
            continue
        if l.role == "blank":
            continue
        stage, last_step = _after(stage, l.text, last_step)
    if stage.name == "step" and stage.step is None:
        # no progress line said which step: the failing traceback or its error may (`global_step=5`, `step 5`)
        for t in [*(k.text for k in red.kept), *_cause_frames(red)]:
            n = _step_of(t)
            if n is not None:
                stage = Stage("step", n, stage.line, True)
                break
    # the failing traceback's innermost frame that names a stage says where it broke
    frames = _cause_frames(red)
    hits = [(name, f) for f in reversed(frames) for name, rx in FRAME_STAGE if rx.search(f)]
    hit = next((h for h in hits if h[0] != "init"), hits[0] if hits else None)
    if hit is not None:
        name, frame = hit
        if name == "init" and stage.name not in ("launch", "init"):
            pass  # an __init__ frame inside a training step is not start-up
        elif name == "step" and stage.name not in ("launch", "init"):
            pass  # the progress lines already say which step
        elif ORDER.index(name) >= ORDER.index("rollout") or stage.name in ("launch", "init"):
            stage = Stage(name, stage.step if name != "init" else None, frame.strip(), stage.steps_ran)
    return stage


def _cause_frames(red: Reduction) -> list[str]:
    """Frames around the cause lines: Python prints them above the error, Ray prints the remote ones below its wrapper."""
    if not red.kept:
        return []
    first, last = red.kept[0], red.kept[-1]
    lo, hi = first.n - 80, (last.n if last.file == first.file else first.n) + 40
    out: list[str] = []
    lines = red.lines
    for i, l in enumerate(lines):
        if l.role == "frame" and l.file == first.file and lo <= l.n <= hi and l.rank in (first.rank, None):
            out.append(l.text)
            nxt = lines[i + 1] if i + 1 < len(lines) else None
            if nxt is not None and nxt.role == "other" and nxt.text[:1].isspace():
                out.append(nxt.text)  # the source line printed under the frame
    return out


def is_startup_case(doc: dict) -> bool:
    """A case about starting a run (install, config, rendezvous), by category, id, tags and title."""
    if doc.get("category") in STARTUP_CATEGORIES:
        return True
    hay = " ".join([doc.get("id", ""), doc.get("title", ""), " ".join(doc.get("tags", []))])
    return bool(STARTUP_WORDS.search(hay))


def contradicts(stage: Stage, doc: dict) -> bool:
    """True when the case is about start-up but the log shows training steps ran before the failure."""
    return stage.steps_ran and stage.name in ("step", "checkpoint", "validation") and is_startup_case(doc)
