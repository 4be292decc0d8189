"""The parts of a pasted issue report that its template wrote, not its author.

People paste whole GitHub issues: the form's headings and checkbox options, and the environment dump the
form asks for, come with every report, whatever went wrong. Read as words they are the first 256 tokens the
dense model sees, and they match whatever entry quotes a similar header or machine. So:

- **boilerplate** lines are dropped: a heading that is only a form's field label, and a form's checkbox
  options. The labels and options are verl's bug-report form (`.github/ISSUE_TEMPLATE/bug-report.yml`,
  verl v0.4.0 onwards, itself from transformers' form) and the headings seen in pasted vLLM, SGLang and
  lmdeploy reports and in the report sample; an unknown heading ("## Error message:") is kept.
- **environment** lines are kept but moved out of the text the scorers read first: the blocks of verl's
  `scripts/diagnose.py` (`----------Python Info----------` ... `----------System Info----------`) and
  the lines of torch's / vLLM's `collect_env.py` (`PyTorch version: ...`, `[pip3] torch==...`). The
  versions in them are still read (kb.search.versions reads the paste itself).
- **script** lines are kept but read as context too: the launch script pasted under "Reproduction" (`export
  VAR=...`, `ray job submit ...`, `python3 -m verl.trainer.main_ppo` with a continuation backslash, one Hydra override per line). It sets
  the same dozens of keys in every report, whatever failed, and its words outweighed the author's few.
"""

from __future__ import annotations

import re

# a heading (markdown, any level) whose text is only one of these form labels
_LABELS = (
    # verl's bug-report form (v0.4.0 on)
    "system info", "information", "tasks", "reproduction", "expected behavior",
    # vLLM's, SGLang's and lmdeploy's forms, as pasted reports show them
    "your current environment", "describe the bug", "🐛 describe the bug", "checklist", "environment", "error traceback",
    # seen in the report sample
    "bug description", "steps to reproduce",
)
HEADING_RE = re.compile(r"^\s*#{1,6}\s*(?P<label>.+?)\s*:?\s*$")
_CHECKBOX_OPTIONS = (
    "the official example scripts",
    "my own modified scripts",
    "an officially supported task in the `examples` folder (such as glue/squad, ...)",
    "my own task or dataset (give details below)",
)
CHECKBOX_RE = re.compile(r"^\s*[-*]\s*\[[ xX]\]\s*(?P<text>.+?)\s*$")

# verl's scripts/diagnose.py: section rules, then "Key : value" lines until the next rule or a blank line
DIAGNOSE_RULE_RE = re.compile(r"^\s*-{4,}\s*(?:Python|Pip|verl|Platform|Hardware|Network Test|Environment|System)(?: Info)?\s*-{4,}\s*$")
KEY_VALUE_RE = re.compile(r"^\s*[\w .()/\t-]{1,40}?\s*:\s")
ENV_ASSIGN_RE = re.compile(r"^\s*[A-Z][A-Z0-9_]+=([\"']).*\1\s*$")  # diagnose's Environment block prints VAR="value"
# collect_env.py (torch, vLLM): the lines it prints, each a "Label: value"
COLLECT_ENV_RE = re.compile(
    r"^\s*(?:PyTorch version|Is debug build|CUDA used to build PyTorch|ROCM used to build PyTorch|OS|GCC version|"
    r"Clang version|CMake version|Libc version|Python version|Python platform|Is CUDA available|CUDA runtime version|"
    r"CUDA_MODULE_LOADING set to|GPU models and configuration|Nvidia driver version|cuDNN version|HIP runtime version|"
    r"MIOpen runtime version|Is XNNPACK available|CPU|Architecture|CPU op-mode\(s\)|Byte Order|Address sizes|"
    r"Versions of relevant libraries|vLLM Version|vLLM Build Flags|GPU Topology|Neuron SDK Version|"
    r"ROCM Version|Aphrodite Version|NVIDIA_VISIBLE_DEVICES|NCCL_VERSION|CUDA_VERSION|LD_LIBRARY_PATH)\s*:"
    r"|^\s*\[(?:pip3?|conda)\]\s"
    r"|^\s*GPU \d+:\s*NVIDIA\b"
)


# the folding around a pasted environment dump: <details>, </details>, <summary>...</summary>
HTML_FOLD_RE = re.compile(r"^\s*(?:</?details>|<summary>.*</summary>)\s*$", re.I)
# a collect_env.py run pasted whole: from the command (or its first line) to the end of its fold or fence
COLLECT_ENV_START_RE = re.compile(r"collect_env\.py\s*$|^\s*Collecting environment information\.\.\.\s*$")
COLLECT_ENV_END_RE = re.compile(r"^\s*(?:</details>|```)\s*$")
MAX_COLLECT_ENV_LINES = 250  # collect_env.py prints about 100; a paste without the closing fence ends here
# a traceback or an exception line is never part of a dump: it ends the block (a paste that forgot the fence, or an
# exception printed right under diagnose.py's "Key : value" lines, keeps its error line)
ERROR_LINE_RE = re.compile(r'^\s*(?:Traceback \(most recent call last\)|File "|(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?:\([\w.]*\))?:)')


# a pasted screenshot: the line is only an image (an <img> tag or a markdown image), its words are its URL's
IMAGE_LINE_RE = re.compile(r"^\s*(?:<img\b[^>]*>|!\[[^\]]*\]\([^)]*\))\s*$", re.I)


def is_boilerplate(line: str) -> bool:
    """A form's field label as a heading, one of its checkbox options, the fold around a dump, or a line that
    is only a pasted screenshot."""
    if HTML_FOLD_RE.match(line) or IMAGE_LINE_RE.match(line):
        return True
    m = HEADING_RE.match(line)
    if m and m.group("label").strip().lower().rstrip(":") in _LABELS:
        return True
    m = CHECKBOX_RE.match(line)
    return bool(m and m.group("text").lower() in _CHECKBOX_OPTIONS)


def environment_lines(lines: list[str]) -> set[int]:
    """Indexes of the lines an environment dump printed (diagnose.py blocks, collect_env.py lines and whole
    runs); an empty line ends a diagnose.py block, the fold's end or a code fence a collect_env.py run."""
    out: set[int] = set()
    in_block = False
    in_collect = False
    collect_from = 0
    for i, line in enumerate(lines):
        if ERROR_LINE_RE.match(line):
            in_block = in_collect = False
            continue
        if in_collect:
            if COLLECT_ENV_END_RE.match(line) or i - collect_from >= MAX_COLLECT_ENV_LINES:
                in_collect = False
            else:
                out.add(i)
            continue
        if COLLECT_ENV_START_RE.search(line):
            in_collect, collect_from = True, i
            out.add(i)
            continue
        if DIAGNOSE_RULE_RE.match(line):
            in_block = True
            out.add(i)
            continue
        if in_block and line.strip() and (KEY_VALUE_RE.match(line) or ENV_ASSIGN_RE.match(line)):
            out.add(i)
            continue
        in_block = False
        if COLLECT_ENV_RE.match(line):
            out.add(i)
    return out


# a launch script: shell exports and variables, the launcher's command, one Hydra override or CLI flag per line
SCRIPT_LINE_RE = re.compile(
    r"^\s*(?:export\s+[A-Za-z_]\w*="
    r"|[A-Za-z_]\w*=(?:\S*|[\"'].*|\$[({].*)\s*$"  # WORKING_DIR=${WORKING_DIR:-"${PWD}"}, model_path=/data/Qwen3
    r"|set\s+[-+][a-z]+\b.*|ulimit\s|unset\s"
    r"|(?:nohup\s+)?(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(?:python3?|torchrun|deepspeed|accelerate\s+launch|srun|ray\s+(?:job\s+submit|start|stop))\b.*"
    r"|[+~]?[A-Za-z_]\w*(?:\.[\w-]+)+=\S.*"  # a Hydra override: actor_rollout_ref.rollout.n=5
    r"|.*\s\\\s*$)"  # any line a shell continues: `--working-dir "$DIR" \`
)
MIN_SCRIPT_RUN = 6  # a command or a few override lines in a description are what it is about; a run of them is a script


def script_lines(lines: list[str]) -> set[int]:
    """Indexes of the lines of a pasted launch script: runs of at least MIN_SCRIPT_RUN script lines (blank
    lines and `#` comments inside a run neither break nor count); an error line is never one."""
    out: set[int] = set()
    run: list[int] = []

    def close() -> None:
        if len(run) >= MIN_SCRIPT_RUN:
            out.update(run)
        run.clear()

    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#") and not HEADING_RE.match(line):
            continue
        if SCRIPT_LINE_RE.match(line) and not ERROR_LINE_RE.match(line):
            run.append(i)
        else:
            close()
    close()
    return out
