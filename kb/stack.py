"""Which software stack a paste comes from: ours (Python / PyTorch / verl and its stack) or another.

kb's cases are about verl and the libraries under it. A Node.js
`EADDRINUSE`, a psql "connection refused" or a Kubernetes CrashLoopBackOff
shares words with our cases ("address already in use", "connection
refused", "restart") but none of our fixes apply. Each foreign stack is
recognised by markers that only it prints (its frame format, its CLI's
prefix, its event names); our stack by Python tracebacks and the names of
our libraries. A paste is declared foreign when a foreign stack has evidence
and ours has less: a Docker build that fails in `pip install flash-attn`
stays ours, one that fails writing a layer is Docker's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# (stack name, pattern, weight). Patterns are searched per line (MULTILINE);
# weight 2 marks a line only that stack prints, 1 a strong hint.
_FOREIGN: list[tuple[str, str, int]] = [
    # Node.js / npm / webpack
    ("node", r"^\s*at .+\((?:node:[\w/]+|[^()]*\.(?:js|mjs|cjs|ts)):\d+:\d+\)\s*$", 2),
    ("node", r"^\s*at (?:node:[\w/]+|\S+\.(?:js|mjs|cjs)):\d+:\d+\s*$", 2),
    ("node", r"^npm (?:ERR!|error|WARN)", 2),
    ("node", r"\bnode_modules/", 1),
    ("node", r"^Node\.js v\d+", 2),
    ("node", r"\b(?:Error: listen EADDRINUSE|code: 'E[A-Z]+'|errno: -\d+,\s*$|syscall: '\w+')", 2),
    ("node", r"^Module not found: Error: Can't resolve", 2),
    ("node", r"\b(?:webpack|yarn|pnpm)\b.*\b(?:error|ERR)", 1),
    # Java / JVM / Spring
    ("java", r"^\s*at [\w$.]+\([\w$]+\.(?:java|kt|scala):\d+\)", 2),
    ("java", r"^\s*at [\w$.]+\((?:Native Method|Unknown Source)\)", 2),
    ("java", r"Exception in thread \"[^\"]+\" (?:java|javax|org|com)\.", 2),
    ("java", r"\b(?:java|javax)\.(?:lang|io|net|sql|util)\.\w+(?:Exception|Error)\b", 2),
    ("java", r"^APPLICATION FAILED TO START$", 2),
    ("java", r"\borg\.springframework\.|\bSpring Boot\b|\bDataSource\b.*\battribute\b", 2),
    ("java", r"^Caused by: (?:java|javax|org|com)\.[\w.$]+", 2),
    ("java", r"\[ERROR\] Failed to execute goal|BUILD FAILED|> Task :\S+ FAILED", 2),
    # Go
    ("go", r"^panic: ", 2),
    ("go", r"^goroutine \d+ \[[\w ]+\]:", 2),
    ("go", r"^\s+/\S+\.go:\d+(?: \+0x[0-9a-f]+)?$", 2),
    ("go", r"^\[signal SIG\w+: .* code=0x", 1),
    # Rust
    ("rust", r"^error\[E\d{4}\]: ", 2),
    ("rust", r"^\s*--> \S+\.rs:\d+:\d+", 2),
    ("rust", r"^thread '[^']+' panicked at ", 2),
    ("rust", r"\bcargo (?:build|run|test)\b|^\s*Compiling \S+ v\d", 1),
    # Kubernetes
    ("kubernetes", r"\bCrashLoopBackOff\b", 2),
    ("kubernetes", r"\bBack-off restarting failed container\b", 2),
    ("kubernetes", r"\b(?:ImagePullBackOff|ErrImagePull|CreateContainerConfigError)\b", 2),
    ("kubernetes", r"\bOOMKilled\b", 1),  # also how a verl pod dies of host memory: a hint only
    ("kubernetes", r"^\s*(?:Warning|Normal)\s+\w+\s+\S+\s+(?:kubelet|default-scheduler)\b", 2),
    ("kubernetes", r"\bkubectl (?:get|describe|logs|apply)\b", 1),
    ("kubernetes", r"^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE", 2),
    # databases
    ("postgresql", r"^psql: (?:error|FATAL)", 2),
    ("postgresql", r"\bIs the server running (?:on host|on that host|locally)\b", 2),
    ("postgresql", r"could not connect to server: ", 2),
    ("postgresql", r"\b(?:PG::|PSQLException|psycopg2?\.OperationalError|SQLSTATE\[)", 2),
    ("mysql", r"^ERROR \d{4} \(\w{5}\): ", 2),
    ("mysql", r"\bAccess denied for user '[^']*'@'[^']*'", 2),
    ("mysql", r"\bmysqld?\b.*\b(?:error|denied|refused)\b", 1),
    ("mongodb", r"\bMongo(?:Server|Network)?Error\b", 2),
    ("redis", r"\bredis\.exceptions\.ConnectionError\b|\bCould not connect to Redis\b", 2),
    # web servers
    ("nginx", r"\bnginx: \[(?:emerg|alert|crit|error|warn)\]", 2),
    ("nginx", r"^\[emerg\]:? ", 2),
    ("nginx", r"\bnginx\.service: (?:Failed|Control process exited)", 2),
    ("nginx", r"\[(?:error|crit|emerg)\] \d+#\d+: \*?\d*", 2),
    ("nginx", r"^\d{3} Bad Gateway$|^<center>nginx", 2),
    ("apache", r"\bAH\d{5}: ", 2),
    ("apache", r"^\(\d+\)[\w ]+: AH\d+|httpd(?:\.service)?\b.*\bfailed\b", 1),
    # Docker builds (the build machinery, not what runs inside a RUN step)
    ("docker-build", r"^Sending build context to Docker daemon", 2),
    ("docker-build", r"^Step \d+/\d+ : ", 2),
    ("docker-build", r"^#\d+ \[[\w\s/-]*\d+/\d+\] ", 2),
    ("docker-build", r"^(?:ERROR: )?failed to solve: ", 2),
    ("docker-build", r"\bfailed to register layer\b|\bError processing tar file\b", 2),
    ("docker", r"^docker: Error response from daemon: ", 2),
    ("docker", r"\bport is already allocated\b|\bCannot connect to the Docker daemon\b", 2),
    # R
    ("r", r"^Error in [\w.:]+\(.*\) ?:", 2),
    ("r", r"^Execution halted$", 2),
    # PHP / Ruby
    ("php", r"^PHP (?:Fatal|Parse|Warning) ", 2),
    ("ruby", r"^\S+\.rb:\d+:in `", 2),
    # .NET
    ("dotnet", r"^\s*at [\w.<>`]+\(.*\) in \S+\.cs:line \d+", 2),
    ("dotnet", r"\bSystem\.(?:NullReference|InvalidOperation|IO\.\w+)Exception\b", 2),
    ("dotnet", r"\bA \.NET application failed\b|^Unhandled exception\. System\.|\.NET Runtime\b", 2),
    # JVM exception classes outside java.* (com.x.FooException: ...), Gradle, Tomcat
    ("java", r"^(?:com|org|net|io)\.[\w$]+\.[\w.$]+(?:Exception|Error): ", 2),
    ("java", r"^\s*FAILURE: Build failed with an exception|^\s*\* What went wrong:|\bGradle build daemon\b", 2),
    ("java", r"\btomcat\s*\d*\s+service error\b", 2),
    # Redis / MySQL server crash reports
    ("redis", r"=== REDIS BUG REPORT START|\bredis-server\b", 2),
    ("mysql", r"\bmysqld\((?:my_print_stacktrace|handle_fatal_signal|_Z\w+)|where mysqld died\b", 2),
    # Elasticsearch
    ("elasticsearch", r"\bsearch_phase_execution_exception\b|\bsearch _ phase _ execution _ exception\b", 2),
    # Apache httpd in syslog / Windows
    ("apache", r"\bhttpd(?:\[\d+\])?: httpd: |\bhttpd\.exe\b", 2),
    # nginx / node native backtraces (gdb)
    ("nginx", r"^#\d+\s+(?:0x[0-9a-f]+ in )?ngx_\w+ \(", 2),
    ("node", r"\bin (?:node|v8)::\w+|^Thread \d+ \"(?:node|npm)\" received signal", 2),
    ("node", r"^\d+ (?:error|verbose|silly) (?:argv \".*npm|npm\s+v\d|node v\d)", 2),
    # Ansible, Terraform
    ("ansible", r"^ERROR! |^fatal: \[[\w.-]+\]: (?:FAILED|UNREACHABLE)!|\bansible-playbook\b", 2),
    ("terraform", r"TERRAFORM CRASH|^Terraform crashed!|^\W*Error: .*\bterraform\b", 2),
    # Apple crash reports and tools, Windows crash dialogs
    ("macos", r"^Exception Type:\s+EXC_|^Crashed Thread:\s+\d+|^Termination Signal:\s", 2),
    ("macos", r"\.xib: Internal error\b|\bbugreport\.apple\.com\b", 2),
    ("windows", r"\bAPPCRASH\b|^Faulting application name:", 2),
    # sanitizers of C/C++ programs, Emacs Lisp, BYOND (DreamMaker) game servers
    ("sanitizer", r"\bThreadSanitizer: ", 2),
    ("emacs", r"^\(\"emacs\"|^eval-buffer: |^Debugger entered--Lisp error:", 2),
    ("byond", r"^\s*(?:\[\d\d:\d\d:\d\d\])?\s*source file: \S+\.dm,\d+|^\s*(?:\[\d\d:\d\d:\d\d\])?proc name: ", 2),
]

# Python frames inside frameworks that are not verl's stack: a traceback that runs only
# through them (and names none of our libraries) is another project's, though it is Python.
_PYTHON_OTHER_RE = re.compile(
    r'^\s*File "(?:[^"]*[/\\])?(django|flask|werkzeug|celery|airflow|scout_apm|fastapi|starlette|sqlalchemy|scrapy|tensorflow|keras|jax|jaxlib|sklearn|streamlit|gradio)[/\\]',
    re.MULTILINE,
)

_OUR_LIBRARIES = r"\b(?:verl|vllm|sglang|megatron|deepspeed|flash_attn|flash-attn|transformers|torch|pytorch|nccl|NCCL|cuda|CUDA|cudnn|triton|hydra|omegaconf|fsdp|FSDP|ray::|raylet|RayTaskError|ActorDiedError|accelerate|peft|safetensors|tokenizer|huggingface|hf_hub|wandb|ppo|grpo|GRPO|PPO|rollout|actor_rollout_ref|TaskRunner|WorkerDict)\b"
# Evidence the paste is from our stack: Python tracebacks and our libraries' names.
_OURS: list[tuple[str, int]] = [
    (r"^Traceback \(most recent call last\):", 2),
    (r'^\s*File "[^"]+\.py", line \d+', 2),
    (_OUR_LIBRARIES, 1),
    (r"\b(?:pip|pip3|conda|python3?|uv) (?:install|-m)\b", 1),
    (r"\b\w+Error: |\bModuleNotFoundError\b|\bImportError\b", 1),
]

_FOREIGN_RES = [(name, re.compile(p, re.MULTILINE | re.IGNORECASE if name in {"kubernetes"} else re.MULTILINE), w) for name, p, w in _FOREIGN]
_OURS_RES = [(re.compile(p, re.MULTILINE), w) for p, w in _OURS]
_OUR_LIBRARIES_RE = re.compile(_OUR_LIBRARIES)
MAX_SCAN_CHARS = 200_000  # markers sit in the first lines of a paste; a huge log is ours by volume anyway

LABELS = {
    "python": "Python (verl's stack)",
    "unknown": "no marker of any stack",
    "python-other": "Python (another framework)",
    "elasticsearch": "Elasticsearch",
    "ansible": "Ansible",
    "terraform": "Terraform",
    "macos": "macOS / Xcode crash report",
    "windows": "Windows crash report",
    "sanitizer": "C/C++ sanitizer",
    "emacs": "Emacs",
    "byond": "BYOND (DreamMaker)",
    "node": "Node.js / npm",
    "java": "Java / JVM",
    "go": "Go",
    "rust": "Rust",
    "kubernetes": "Kubernetes",
    "postgresql": "PostgreSQL",
    "mysql": "MySQL",
    "mongodb": "MongoDB",
    "redis": "Redis",
    "nginx": "nginx",
    "apache": "Apache httpd",
    "docker-build": "docker build",
    "docker": "Docker",
    "r": "R",
    "php": "PHP",
    "ruby": "Ruby",
    "dotnet": ".NET",
}


@dataclass(frozen=True)
class StackVerdict:
    name: str  # "python" (ours), "unknown" (no marker either way, searched as ours) or a foreign stack's key
    evidence: str  # the line that gave it away
    foreign_score: int
    ours_score: int

    @property
    def foreign(self) -> bool:
        return self.name not in ("python", "unknown")

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "label": self.label, "evidence": self.evidence[:200]}


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)].strip()


def detect(text: str) -> StackVerdict:
    """The stack a paste comes from, with the line that shows it."""
    text = text[:MAX_SCAN_CHARS]
    scores: dict[str, int] = {}
    first: dict[str, tuple[int, int]] = {}  # stack -> (-weight, position) of its best evidence line
    for name, rx, w in _FOREIGN_RES:
        hits = list(rx.finditer(text))
        if not hits:
            continue
        # repeated frames count a little more than one, not per line
        scores[name] = scores.get(name, 0) + w * min(len(hits), 2)
        cand = (-w, hits[0].start())
        if name not in first or cand < first[name]:
            first[name] = cand  # the earliest line of the strongest kind
    evidence = {name: _line_at(text, pos) for name, (_, pos) in first.items()}
    ours = 0
    ours_line = ""
    for rx, w in _OURS_RES:
        hits = list(rx.finditer(text))
        if hits:
            ours += w * min(len(hits), 3)
            ours_line = ours_line or _line_at(text, hits[0].start())
    other = _PYTHON_OTHER_RE.search(text)
    if other and not _OUR_LIBRARIES_RE.search(text):
        # Python, but every framework it names is someone else's (Django, Celery, Airflow, TensorFlow...)
        # the frames decide, not the weights: its score is reported as just above ours
        return StackVerdict("python-other", _line_at(text, other.start()), max(ours, 2) + 1, ours)
    if not scores:
        return StackVerdict("python" if ours else "unknown", ours_line, 0, ours)
    name = max(scores, key=lambda k: scores[k])
    best = scores[name]
    # foreign only with a marker only that stack prints, and more of it than of ours
    if best >= 2 and best > ours:
        return StackVerdict(name, evidence[name], best, ours)
    return StackVerdict("python" if ours else "unknown", ours_line, best, ours)
