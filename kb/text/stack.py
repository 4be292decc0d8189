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
#
# Every marker is a format the ecosystem's own tools print (a frame layout, a CLI or log
# prefix, a log-line layout, a class-naming rule), cited beside it, so that any paste from
# that stack tends to carry it. None is the message of one report: eval/other-stacks.jsonl
# is what they were checked on, eval/other-stacks-heldout.jsonl (never used to write them)
# is what they are scored on, and tests/test_calibration.py keeps them off verl's own pastes
# and logs (eval/reports.jsonl, the dev set, eval/healthy/, eval/logs/).
_FOREIGN: list[tuple[str, str, int]] = [
    # --- Node.js / npm / webpack
    # V8 stack frames, "    at fn (file.js:L:C)" / "    at file.js:L:C" (nodejs.org/api/errors.html#errorstack)
    ("node", r"^\s*at .+\((?:node:[\w/]+|[^()]*\.(?:js|mjs|cjs|ts)):\d+:\d+\)\s*$", 2),
    ("node", r"^\s*at (?:async )?(?:node:[\w/]+|\S+\.(?:js|mjs|cjs)):\d+:\d+\s*$", 2),
    # the rethrow line Node prints for an unhandled 'error' event (lib/events.js)
    ("node", r"throw er; // Unhandled 'error' event", 2),
    # system errors: "Error: <syscall> <CODE>" and the code/errno/syscall properties (errors.html#class-systemerror)
    ("node", r"^(?:\w*Error: )?(?:listen|connect|read|write|open|spawn|getaddrinfo|bind) E[A-Z]{2,}\b", 2),
    ("node", r"\b(?:code: 'E[A-Z]+'|errno: -\d+,\s*$|syscall: '\w+')", 2),
    # Node's own error codes, "[ERR_MODULE_NOT_FOUND]" (errors.html#nodejs-error-codes)
    ("node", r"\[ERR_[A-Z][A-Z_]{3,}\]|code: 'ERR_[A-Z_]+'", 2),
    ("node", r"\bnode_modules/", 1),
    ("node", r"^Node\.js v\d+", 2),  # printed after an uncaught exception (Node >= 17)
    # npm's CLI prefixes and its debug log "<n> <level> ..." (npmlog levels: silly, verbose, timing, http, warn, error)
    ("node", r"^npm (?:ERR!|error|WARN|warn) ", 2),
    ("node", r"^\d+ (?:silly|verbose|timing|http|warn|error) \S", 2),
    # native frames of the node binary, namespaces node:: and v8:: (gdb / lldb / WinDbg)
    ("node", r"\b(?:node|v8)::[\w:]+|^Thread \d+ \"(?:node|npm)\" received signal", 2),
    ("node", r"^Module not found: Error: Can't resolve", 2),  # webpack's resolver
    ("node", r"\b(?:webpack|yarn|pnpm)\b.*\b(?:error|ERR)", 1),
    # --- Java / JVM (Spring, Tomcat, Kafka, Elasticsearch, Gradle, Maven)
    # frames as Throwable.printStackTrace writes StackTraceElement.toString(): "\tat pkg.Cls.m(File.java:12)",
    # with an optional "module@ver/" prefix, "(Native Method)", "(Unknown Source)" (java.lang.StackTraceElement docs)
    ("java", r"^\s*at [\w$./@<>-]+\((?:[\w$-]+\.(?:java|kt|scala|groovy|clj):\d+|Native Method|Unknown Source)\)", 2),
    ("java", r"^\s*\.\.\. \d+ (?:more|common frames omitted)\s*$", 1),  # printStackTrace's elision line, logback's variant
    ("java", r"^Caused by: [\w$]+(?:\.[\w$]+)+", 2),  # printStackTrace's cause chain
    ("java", r"Exception in thread \"[^\"]+\" [\w$]+(?:\.[\w$]+)+", 2),  # ThreadGroup.uncaughtException
    # JVM class naming: reverse-domain packages (JLS 6.1) ending in an ...Exception/...Error class
    ("java", r"\b(?:java|javax|jdk|sun|org|com|io|net|kotlin|kotlinx|scala|groovy|clojure)\.(?:[\w$]+\.)+[A-Z][\w$]*(?:Exception|Error)\b", 2),
    # HotSpot's fatal error report (docs.oracle.com, "Fatal Error Log")
    ("java", r"^# A fatal error has been detected by the Java Runtime Environment|\bhs_err_pid\d+\.log\b", 2),
    # java.util.logging lines: SimpleFormatter "SEVERE: msg", Tomcat's OneLineFormatter "dd-MMM-yyyy HH:mm:ss.SSS SEVERE [thread]"
    ("java", r"^(?:SEVERE|WARNING): |^\d{2}-\w{3}-\d{4} [\d:.]+ (?:SEVERE|WARNING) \[", 2),
    ("java", r"\b[Tt]omcat\d*\b|\bcatalina\.(?:sh|bat|out)\b", 1),
    # Spring Boot's failure analyzer banner and its packages
    ("java", r"^APPLICATION FAILED TO START$", 2),
    ("java", r"\borg\.springframework\.|\bSpring Boot\b", 2),
    # build tools: Maven "[ERROR] Failed to execute goal", "BUILD FAILURE"; Ant "BUILD FAILED";
    # Gradle's BuildExceptionReporter "FAILURE: Build failed with an exception." / "* What went wrong:" / "> Task :x FAILED"
    ("java", r"\[ERROR\] Failed to execute goal|^\[\w+\] BUILD FAILURE$|^BUILD FAILED\b|> Task :\S+ FAILED", 2),
    ("java", r"^\s*FAILURE: Build failed with an exception|^\s*\* What went wrong:|\bGradle (?:build )?daemon\b", 2),
    # --- Go: runtime panics and tracebacks (go.dev/src/runtime/panic.go, traceback.go)
    ("go", r"^panic: ", 2),
    ("go", r"^goroutine \d+ \[[\w ,]+\]:", 2),
    ("go", r"^\s+/\S+\.go:\d+(?: \+0x[0-9a-f]+)?$", 2),
    ("go", r"^created by [\w./*()]+(?: in goroutine \d+)?$", 2),
    ("go", r"^\[signal SIG\w+: .* code=0x", 1),
    ("go", r"^fatal error: (?:all goroutines are asleep|concurrent map|unexpected signal|out of memory|stack overflow)", 2),
    # --- Rust: rustc diagnostics, the std panic hook, std backtraces, cargo
    ("rust", r"^error\[E\d{4}\]: ", 2),
    ("rust", r"^\s*--> \S+\.rs:\d+:\d+", 2),
    ("rust", r"^thread '[^']+' panicked at |note: run with `RUST_BACKTRACE=1`", 2),
    ("rust", r"^\s+at \S+\.rs:\d+(?::\d+)?$|^\s+\d+: [\w:<>]+::h[0-9a-f]{16}\b", 2),
    ("rust", r"^error: could not compile `|\bcargo (?:build|run|test)\b|^\s*Compiling \S+ v\d", 1),
    # --- Kubernetes: pod statuses, kubelet events, kubectl tables (kubernetes.io, pod lifecycle)
    ("kubernetes", r"\bCrashLoopBackOff\b", 2),
    ("kubernetes", r"\bBack-off restarting failed container\b", 2),
    ("kubernetes", r"\b(?:ImagePullBackOff|ErrImagePull|CreateContainerConfigError)\b", 2),
    ("kubernetes", r"\bOOMKilled\b", 1),  # also how a verl pod dies of host memory: a hint only
    ("kubernetes", r"^\s*(?:Warning|Normal)\s+\w+\s+\S+\s+(?:kubelet|default-scheduler)\b", 2),
    ("kubernetes", r"\bkubectl (?:get|describe|logs|apply)\b", 1),
    ("kubernetes", r"^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE", 2),
    # --- PostgreSQL: libpq/psql client errors, the server's log lines (two spaces after the severity, elog.c)
    ("postgresql", r"^psql: (?:error|FATAL)", 2),
    ("postgresql", r"\bIs the server running (?:on host|on that host|locally)\b", 2),
    ("postgresql", r"could not connect to server: |\bconnection to server (?:at|on socket) \S+.* failed: ", 2),
    ("postgresql", r"(?:^|\s)(?:PANIC|FATAL|ERROR|LOG|DETAIL|HINT|STATEMENT|WARNING):  \S", 2),
    ("postgresql", r"\b(?:PG::|PSQLException|psycopg2?\.(?:errors\.|Operational|Programming|Integrity)\w*|SQLSTATE\[)", 2),
    # --- MySQL / MariaDB: client errors, the server's error log (dev.mysql.com, "The Error Log"), its crash handler
    ("mysql", r"^ERROR \d{4} \(\w{5}\): ", 2),
    ("mysql", r"\bAccess denied for user '[^']*'@'[^']*'", 2),
    ("mysql", r"^\d{4}-\d\d-\d\dT[\d:.]+Z \d+ \[(?:ERROR|Warning|Note|System)\] \[MY-\d{6}\]", 2),  # MySQL 8 log line
    ("mysql", r"^\d{6} {1,2}\d{1,2}:\d\d:\d\d \[(?:ERROR|Warning|Note)\] ", 2),  # MySQL 5.x log line
    ("mysql", r"\b(?:mysqld|mariadbd)\S*\([\w+.]+\)\[0x[0-9a-f]+\]|\bmysqld got signal \d+", 2),  # handle_fatal_signal's backtrace
    ("mysql", r"\bmysqld?\b.*\b(?:error|denied|refused)\b", 1),
    # --- MongoDB: driver error classes, mongod's structured log ("s":"E","c":"...", mongodb.com docs, log messages)
    ("mongodb", r"\bMongo\w*Error\b", 2),
    ("mongodb", r"\"s\":\s*\"[EFW]\",\s*\"c\":\s*\"", 2),
    # --- Redis: the server's log line "pid:role dd Mon yyyy hh:mm:ss.mmm <level>" (server.c serverLogRaw;
    # 2.x "[pid] dd Mon hh:mm:ss <level>"), its crash-report banner (debug.c), redis-cli's "(error) ...", redis-py
    ("redis", r"^\d+:[MSCX] \d{1,2} \w{3} \d{4} [\d:.]+ [#*.-] |^\[\d+\] \d{1,2} \w{3} [\d:.]+ [#*.-] ", 2),
    ("redis", r"=== REDIS BUG REPORT (?:START|END)|\bredis-server\b", 2),
    ("redis", r"^\(error\) (?:ERR|WRONGTYPE|NOAUTH|MOVED|ASK|LOADING|MISCONF|READONLY|OOM)\b", 2),
    ("redis", r"\bredis\.exceptions\.\w+Error\b|\bCould not connect to Redis\b", 2),
    # --- Elasticsearch: REST error types are snake_case exception names ("type":"..._exception"),
    # its log4j layout "[LEVEL][o.e.x.Y ]" (elastic.co, logging)
    ("elasticsearch", r"['\"][a-z]+(?: ?_ ?[a-z]+)* ?_ ?exception['\"]", 2),
    ("elasticsearch", r"\[(?:ERROR|WARN|INFO|DEBUG|TRACE)\s*\]\[o\.e\.[\w.]+\s*\]", 2),
    # --- nginx: CLI prefix "nginx: [level]", error-log line "yyyy/mm/dd hh:mm:ss [level] pid#tid: "
    # (nginx.org, ngx_core_module error_log), systemd unit lines, ngx_* functions in native backtraces
    ("nginx", r"\bnginx: \[(?:emerg|alert|crit|error|warn|notice)\]|\bnginx: configuration file \S+ test (?:failed|is successful)", 2),
    ("nginx", r"^\[emerg\]:? ", 2),
    ("nginx", r"\bnginx\.service: (?:Failed|Control process exited|Main process exited)", 2),
    ("nginx", r"\[(?:emerg|alert|crit|error|warn|notice|info|debug)\] \d+#\d+: ", 2),
    ("nginx", r"^\d{3} Bad Gateway$|^<center>nginx", 2),
    ("nginx", r"^#\d+\s+(?:0x[0-9a-f]+ in )?ngx_\w+ \(", 2),
    # --- Apache httpd: AH message ids, the 2.4 error-log line "[Www Mon dd hh:mm:ss.us yyyy] [module:level] ",
    # the config parser's "Syntax error on line N of FILE" (httpd.apache.org, ErrorLogFormat / server/config.c)
    ("apache", r"\bAH\d{5}: ", 2),
    ("apache", r"^\[\w{3} \w{3} \d{1,2} [\d:.]+ \d{4}\] \[(?:\w+:)?(?:emerg|alert|crit|error|warn|notice|info|debug)\] ", 2),
    ("apache", r"\b(?:httpd|apache2): Syntax error on line \d+ of |\b(?:httpd|apache2?)\.exe\b|\bapache2?ctl\b", 2),
    ("apache", r"^\(\d+\)[\w ]+: AH\d+|httpd(?:\.service)?\b.*\bfailed\b", 1),
    # --- docker build (the build machinery, not what runs inside a RUN step): the classic builder's
    # "Step n/m : ", BuildKit's "#n [stage n/m]" and "ERROR: failed to solve:", the layer store's errors
    ("docker-build", r"^Sending build context to Docker daemon", 2),
    ("docker-build", r"^Step \d+/\d+ : ", 2),
    ("docker-build", r"^#\d+ \[[\w\s/-]*\d+/\d+\] ", 2),
    ("docker-build", r"^(?:ERROR: )?failed to solve: ", 2),
    ("docker-build", r"\bfailed to register layer\b|\bError processing tar file\b", 2),
    ("docker", r"^(?:docker: )?Error response from daemon: ", 2),
    ("docker", r"\bport is already allocated\b|\bCannot connect to the Docker daemon\b", 2),
    # --- R: the condition message "Error in f(x) :" and Rscript's "Execution halted"
    ("r", r"^Error in [\w.:]+\(.*\) ?:", 2),
    ("r", r"^Execution halted$", 2),
    # --- PHP: "PHP Fatal error: ... in FILE on line N", Exception::getTraceAsString "#0 /x.php(12): f()"
    ("php", r"^PHP (?:Fatal|Parse|Warning|Notice|Deprecated) ", 2),
    ("php", r"\b(?:Fatal error|Parse error|Warning|Notice): .* in \S+\.php on line \d+", 2),
    ("php", r"^#\d+ \S+\.php\(\d+\): |^#\d+ \{main\}$", 2),
    # --- Ruby: backtrace lines "file.rb:12:in `meth'" (also "from ..."; Ruby 3.4 quotes with '),
    # the VM's bug report (vm_dump.c: "[BUG]", "-- C level backtrace information --")
    ("ruby", r"(?<!\S)\S+\.rb:\d+:in [`']", 2),
    ("ruby", r"^\S+:\d+: \[BUG\] |^-- (?:Control frame|Ruby level backtrace|C level backtrace) information -+", 2),
    # --- .NET: "   at Ns.Type.Method(args) in file.cs:line N", the runtime's rethrow and inner-exception separators,
    # exceptions of the System namespace, the host's "Unhandled exception." (learn.microsoft.com, Exception.StackTrace)
    ("dotnet", r"^\s*at [\w.<>`$\[\],]+\(.*\) in \S+\.(?:cs|vb|fs):line \d+", 2),
    ("dotnet", r"--- End of (?:stack trace from previous location|inner exception stack trace) ---", 2),
    ("dotnet", r"\bSystem\.(?:[A-Z]\w*\.)*[A-Z]\w*Exception\b", 2),
    ("dotnet", r"\bA \.NET application failed\b|^Unhandled [Ee]xception\. |\.NET Runtime\b", 2),
    # --- Ansible: display.error's "ERROR! ", the default callback's "fatal: [host]: FAILED!" and TASK/PLAY banners
    ("ansible", r"^ERROR! |^fatal: \[[\w.-]+\]: (?:FAILED|UNREACHABLE)!|\bansible-playbook\b", 2),
    ("ansible", r"^(?:TASK|PLAY|RUNNING HANDLER) \[.*\] \*{3,}|^PLAY RECAP \*{3,}", 2),
    # --- Terraform: diagnostics drawn in a box "│ Error: ..." with "on FILE.tf line N" (command/format/diagnostic.go),
    # the panic banner of its crash handler, a provider plugin's crash
    ("terraform", r"^[│╷]\s*Error: |\bon \S+\.tf line \d+\b", 2),
    ("terraform", r"TERRAFORM CRASH|^Terraform crashed!|Stack trace from the terraform-provider-\S+ plugin", 2),
    ("terraform", r"^\W*Error: .*\bterraform\b|\bterraform (?:init|plan|apply|validate)\b", 1),
    # --- Apple: crash-report header fields (developer.apple.com, "Examining the fields in a crash report"),
    # Xcode tools' diagnostics on Apple-only sources and their bug-report line
    ("macos", r"^Exception Type:\s+EXC_|^Crashed Thread:\s+\d+|^Termination Signal:\s|^Thread \d+ Crashed::?|^Exception Codes:\s", 2),
    ("macos", r"(?<!\S)\S+\.(?:xib|storyboard|swift|m|mm)(?::\d+(?::\d+)?)?: (?:error|Internal error)\b|\bbugreport\.apple\.com\b|^\*\* BUILD FAILED \*\*$", 2),
    # --- Windows Error Reporting / Application event 1000 fields
    ("windows", r"\bAPPCRASH\b|^Faulting application name:|^\s*Fault(?:ing)? Module Name:|\bException [Cc]ode: ?0x[0-9a-fA-F]{8}\b", 2),
    # --- C/C++ sanitizers (compiler-rt sanitizer_common report format)
    ("sanitizer", r"\b(?:Address|Thread|Memory|UndefinedBehavior|Leak)Sanitizer: |^==\d+==(?:ERROR|WARNING): \w+Sanitizer", 2),
    ("sanitizer", r"^SUMMARY: \w+Sanitizer: ", 2),
    # --- Emacs: the debugger's "Debugger entered--Lisp error:", the messages of its standard error symbols
    ("emacs", r"^Debugger entered--Lisp error: |\bSymbol.s (?:function|value) definition is void: |\bCannot open load file: ", 2),
    ("emacs", r"^(?:eval-buffer|load|require|command-execute|File mode specification error): ", 1),
    # --- BYOND DreamMaker: the runtime error report's "proc name: x (/path)" and "source file: x.dm,N"
    ("byond", r"^\s*(?:\[[\d:]+\])?\s*source file: \S+\.dm,\d+|^\s*(?:\[[\d:]+\])?\s*proc name: \S.* \(/[\w/]+\)", 2),
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
