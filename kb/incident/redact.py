"""Keep secrets and identities out of case files: `redact(text) -> str`.

Replaced with typed placeholders:

- tokens and keys: Slack `xoxb-...`/`xoxp-...` (`<slack-token>`), Slack and
  Discord webhook paths (`<webhook>`), Google `AIza...` keys (`<google-key>`),
  PEM key bodies, also with JSON's escaped `\\n` (`<private-key>`),
  Hugging Face `hf_...` (`<hf-token>`), wandb API keys
  (40 hex, `<wandb-key>`), AWS access key ids `AKIA...`/`ASIA...`
  (`<aws-key-id>`) and secret keys (`<aws-secret>`), OpenAI-style `sk-...` and
  GitHub `ghp_...` tokens (`<api-key>`, `<github-token>`),
  `Authorization: Bearer ...` (`<token>`), and the value of any
  `api_key=`/`token=`/`password=`/`secret=`... assignment, also when the name
  only ends in one (`PGPASSWORD=`, `MY_SERVICE_TOKEN=`), or ends in `_PASS`/`_PWD` or, upper
  case, `_KEY` (`DB_PASS=`, `KAGGLE_KEY=`), and Chinese labels (密码, 令牌, 密钥 ...), with any
  separator (`=`, `:`, `=>`, full-width `：`/`＝`); a quoted value is taken up to its quote, spaces and
  all (`<secret>`). Known-prefix tokens are found also right after Chinese text and inside
  paths and file names (no `\b`, which counts CJK letters and `_` as word characters), and an
  `hf_` token a terminal wrapped over two lines;
- passwords on command lines: `mysql -pPW`, `sshpass -p PW`, `curl -u user:PW`,
  `docker login -p PW`, `redis-cli -a PW` (`<password>`);
- credentials in URLs, wherever the URL stands (also inside an environment value):
  `https://user:pass@host` -> `https://<user>:<password>@host`, `redis://:pass@` -> `redis://:<password>@`;
- user names in home folders (`/home/alice/`, `/Users/alice/`,
  `C:\\Users\\alice\\` -> `<user>`) and `USER=alice`;
- e-mail addresses (`<email>`);
- host names: fully qualified names with a private or common top-level domain
  (`node-17.cluster.local`, `ip-10-0-0-5.ec2.internal`), AWS-style `ip-10-0-0-5`,
  the host of NCCL's `hostname:pid:tid [dev]` prefix, `host=`/`hostname=`
  values, single-label hosts in URLs (`http://trainbox:8000`) and after
  `user@` (`alice@gpubox7`) (`<host>`); public hosts such as huggingface.co
  or github.com stay;
- IP addresses, v4 and v6 (`<ip>`); loopback and 0.0.0.0 stay;
- last, any long random-looking token no rule above knows (`<random-token>`,
  see `looks_random`).

Host and user names learnt from one place (an NCCL prefix, a home folder) are
replaced wherever else they occur in the same text. `Redactor.spans` gives the
positions instead of the replaced text (kb.incident.signatures uses them to keep secrets
out of signatures). Patterns are linear and the text is processed once per
pattern, so a long excerpt costs little.
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from kb.text.variable_tokens import IPV4, IPV6

# Hosts that identify nothing private; kept so that URLs in errors stay meaningful.
PUBLIC_HOSTS = (
    "huggingface.co", "hf.co", "github.com", "githubusercontent.com", "pypi.org", "pythonhosted.org",
    "pytorch.org", "nvidia.com", "ray.io", "wandb.ai", "python.org", "readthedocs.io", "anaconda.org",
    "anaconda.com", "conda.io", "docker.io", "docker.com", "nvcr.io", "modelscope.cn", "vllm.ai",
    "example.com", "example.org", "slack.com",
)
# Generic account names: still hidden inside paths, not hunted down everywhere else.
GENERIC_USERS = {
    "root", "user", "ubuntu", "admin", "runner", "ec2-user", "home", "shared", "data",
    "git", "postgres", "mysql", "nobody", "www-data", "centos", "debian", "fedora", "opc",
}
# Single-label names that are not a private host when they follow `scheme://` or `user@`.
GENERIC_HOSTS = {"localhost", "localhost4", "localhost6", "ip6-localhost", "host", "hostname", "server", "remote"}
TLDS = (
    "local|localdomain|internal|intranet|intra|lan|corp|cluster|svc|home|private|"
    "com|net|org|edu|gov|io|ai|cn|cloud|dev|app|tech|xyz|us|uk|de|fr|jp|kr|sg|in|ru|ca|au|nl|ch|hk|tw"
)

_SECRET_NAMES = (
    r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?access[_-]?key|secret[_-]?key|secret|client[_-]?secret|"
    r"password|passwd|passphrase|mysql[_-]?pwd|token|auth[_-]?token|access[_-]?token|refresh[_-]?token|private[_-]?key|"
    r"(?:proxy[_-]?)?authorization|cookie)"
)
# Names that are a secret only as the end of a longer name: DB_PASS, REDIS_PWD, KAGGLE_KEY (not PWD=, the
# working directory, nor sort_key=: an upper-case environment name ending in _KEY).
_SECRET_SUFFIXES = r"(?:(?i:[A-Za-z0-9-]{1,40}_(?:pass|pwd))|[A-Z0-9_]{1,40}_KEY)"
# Any identifier ending in a secret name: PGPASSWORD, MYSQL_ROOT_PASSWORD, MY_SERVICE_TOKEN, DB_SECRET.
# Bounded, so that a long run of word characters costs linear time.
_SECRET_PREFIX = r"[A-Za-z0-9_-]{0,40}?"
# Labels in Chinese: 密码 (password), 口令 (passphrase), 令牌 (token), 密钥/秘钥/私钥 (key), 凭证/凭据 (credential).
_SECRET_NAMES_ZH = r"(?:密码|口令|令牌|密钥|秘钥|私钥|凭证|凭据)"
# Between a name and its value: = or : in ASCII or full width, or =>.
_SEP = r"\s*(?:=>|[=:\uff1a\uff1d])\s*"
# A value: quoted (spaces allowed, up to the closing quote) or a bare run of non-separators.
_VALUE = (
    r"(?:\"(?P<q2>(?!<|-----)[^\"\n]{1,256})\"|'(?P<q1>(?!<|-----)[^'\n]{1,256})'"
    r"|(?P<v>(?!<|-----|(?:Bearer|Basic|Token|Digest)\s)[^\s\"',;&)}\]\u3000\uff0c\u3002\uff1b\u3001]{4,}))"
)
_VALUE_ZH = r"[\"']?(?P<v>(?!<)[^\s\"',;&)}\]\u3000\uff0c\u3002\uff1b\u3001]{2,})"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"


@dataclass(frozen=True)
class Rule:
    kind: str  # placeholder name without brackets
    pattern: re.Pattern[str]
    # the replaced part is the named group "v" when the pattern has one, else the whole match
    accept: Callable[[str], bool] | None = None  # a further test of the replaced part
    learn: Callable[[str], bool] | None = None  # which values to hunt down elsewhere too (None: all)


def _r(
    kind: str, pattern: str, flags: int = 0, accept: Callable[[str], bool] | None = None, learn: Callable[[str], bool] | None = None
) -> Rule:
    return Rule(kind, re.compile(pattern, flags), accept, learn)


def _host_like(name: str) -> bool:
    """A single-label name worth hunting down everywhere: has a digit or a dash (`gpubox7`, `dgx-a`).

    A plain word (`trainbox`) is replaced where it stands as a host, but not
    elsewhere: `pass@all` must not turn every "all" into `<host>`.
    """
    return any(c.isdigit() or c == "-" for c in name)


def _never(_: str) -> bool:
    return False


# ------------------------------------------------------------------ the entropy fallback

ENTROPY_MIN_LEN = 20
ENTROPY_MIN_BITS = 3.0  # Shannon entropy per character; random hex of 20 chars has about 3.6
ENTROPY_MIN_SWITCHES = 0.3  # share of neighbours of different class (upper/lower/digit)
ENTROPY_MAX_WORDS = 0.5  # share of characters in word-like runs above which a token is an identifier
_WORDISH = re.compile(r"[A-Z][a-z]{3,}|[a-z]{4,}|[A-Z]{4,}(?![a-z])")


def _char_class(c: str) -> str:
    if c.isdigit():
        return "d"
    if c.isupper():
        return "u"
    if c.islower():
        return "l"
    return ""


def looks_random(token: str) -> bool:
    """A long token of base64/hex characters that reads like a key, not like words, a path or a number.

    Secrets from unknown services have no prefix to recognise, so kb new falls
    back on how they look: at least 20 characters, two or more of upper case,
    lower case and digits, high Shannon entropy, and -- what tells
    `Zq8Lm3Vb7Nx2Kc9Wd4` from `cudaErrorMemoryAllocation`, `Qwen2-7B-Instruct`
    or `/pytorch/torch/csrc` -- frequent switches between character classes,
    counted inside the pieces between separators (`/ _ - + = .`).
    """
    if token.startswith(("/", "~/", "./", "../")):
        return False  # a path: its pieces are folder names, even when one is a hash
    core = token.strip("=/+-_.")
    if len(core) < ENTROPY_MIN_LEN:
        return False
    if sum(len(w) for w in _WORDISH.findall(core)) >= ENTROPY_MAX_WORDS * len(core):
        return False  # mostly words: an identifier such as `M2M100PreTrainedModel`
    classes = {_char_class(c) for c in core} - {""}
    if len(classes) < 2:
        return False
    counts: dict[str, int] = {}
    for c in core:
        counts[c] = counts.get(c, 0) + 1
    n = len(core)
    bits = -sum(k / n * math.log2(k / n) for k in counts.values())
    if bits < ENTROPY_MIN_BITS:
        return False
    pairs = switches = 0
    for piece in re.split(r"[/_+=.-]+", core):
        for a, b in zip(piece, piece[1:]):
            ca, cb = _char_class(a), _char_class(b)
            pairs += 1
            # upper then lower is how a word starts (`Memory`), not a switch
            if ca != cb and not (ca == "u" and cb == "l"):
                switches += 1
    return pairs >= ENTROPY_MIN_LEN // 2 and switches / pairs >= ENTROPY_MIN_SWITCHES


def _hf_token(token: str) -> bool:
    """`hf_` then mixed letters and digits (a token, also one a terminal wrapped), not `hf_config`/`hf_model_path`."""
    body = re.sub(r"\s", "", token[3:])
    return len(body) >= 8 and sum(map(bool, (re.search(r"[a-z]", body), re.search(r"[A-Z]", body), re.search(r"\d", body)))) >= 2


def _not_a_flag(value: str) -> bool:
    """`FORWARD_PASS=true` or `secret: None` holds no secret."""
    return value.strip().lower() not in ("true", "false", "none", "null", "yes", "no", "on", "off")


# Order matters: earlier rules claim their text first.
RULES: list[Rule] = [
    # PEM blocks: the body between BEGIN and END (real newlines or JSON's escaped `\n`), header kept
    _r(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]{0,40}(?:PRIVATE KEY|CERTIFICATE|KEY BLOCK)-----(?P<v>(?:\\[nr]|[\s\S]){1,20000}?)(?=-----END [A-Z0-9 ]{0,40}-----)",
    ),
    _r(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]{0,40}(?:PRIVATE KEY|KEY BLOCK)-----(?P<v>(?:(?:\\[nr]|\s)*[A-Za-z0-9+/=]{2,})+)",
    ),
    # chat tokens and webhooks
    _r("slack-token", r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}"),
    _r("slack-token", r"(?<![A-Za-z0-9])xapp-\d-[A-Za-z0-9-]{10,}"),
    _r(
        "webhook",
        r"(?i)\b(?:hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/)(?P<v>[A-Za-z0-9/_-]+)",
    ),
    _r("google-key", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{30,}"),
    # passwords on command lines: mysql -pSECRET, sshpass -p SECRET, curl -u user:SECRET
    _r(
        "password",
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)\b[^\n]{0,200}?\s-p(?P<v>[^\s'\"]+)",
    ),
    _r("password", r"\bsshpass\s+-p\s*[\"']?(?P<v>[^\s\"']+)"),
    _r("password", r"\bdocker\s+login\b[^\n]{0,200}?\s(?:-p|--password)(?:\s+|=)[\"']?(?P<v>(?!-)[^\s\"']+)"),
    _r("password", r"\bredis-cli\b[^\n]{0,200}?\s(?:-a|--pass|--askpass)(?:\s+|=)[\"']?(?P<v>(?!-)[^\s\"']+)"),
    _r("password", r"\bcurl\b[^\n]{0,200}?\s(?:-u|--user)\s*[\"']?[^\s:\"']+:(?P<v>[^\s\"']+)"),
    # credentials in URLs: scheme://user:pass@ and scheme://user@
    # (anywhere: also inside an environment value `DATABASE_URL=postgres://...`, and with no user: redis://:pw@)
    _r("user", r"[A-Za-z][A-Za-z0-9+.-]{0,15}://(?P<v>[^\s/:@<>'\"]+)(?=(?::[^\s/@<>'\"]*)?@)"),
    _r("password", r"[A-Za-z][A-Za-z0-9+.-]{0,15}://(?:[^\s/:@<>'\"]*|<user>):(?P<v>[^\s/@<>'\"]+)(?=@)"),
    _r("token", r"(?i)\b(?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest)\s+(?P<v>[^\s\"',;]+)"),
    _r("token", r"(?i)\bBearer\s+(?P<v>[A-Za-z0-9._~+/=-]{8,})"),
    # tokens with a known prefix, also inside a path or a file name (`/cache/run_hf_...`, `AKIA..._creds`)
    # and right after Chinese text (hence no \b, which counts CJK letters as word characters)
    _r("hf-token", r"(?<![A-Za-z0-9])hf_(?:[A-Za-z0-9]{30,}|[A-Za-z0-9]{6,29}(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9]{1,30}(?![^\s]))?)",
       accept=_hf_token),
    _r("github-token", r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})(?![A-Za-z0-9])"),
    _r("api-key", r"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    _r("aws-key-id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    # key = value assignments (env, CLI flags, JSON/YAML, query strings)
    # key = value (env, CLI flags, JSON/YAML, dict reprs, query strings): a secret-ish name, any separator
    # (also full width), then a quoted value up to its quote or a bare one up to a separator
    _r("secret", r"(?i)(?<![A-Za-z0-9])[\"']?" + _SECRET_PREFIX + _SECRET_NAMES + r"[\"']?" + _SEP + _VALUE, accept=_not_a_flag),
    _r("secret", r"(?<![A-Za-z0-9])[\"']?" + _SECRET_SUFFIXES + r"[\"']?" + _SEP + _VALUE, accept=_not_a_flag),
    _r("secret", _SECRET_NAMES_ZH + r"[\"']?" + _SEP + _VALUE_ZH, accept=_not_a_flag),
    _r("secret", r"(?i)(?<![A-Za-z0-9-])--" + _SECRET_PREFIX + r"(?:" + _SECRET_NAMES[3:-1] + r"|pass|pwd)" + r"\s+[\"']?(?P<v>(?!<|-)[^\s\"',;&)}\]]{4,})"),
    _r("aws-secret", r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])(?!/)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    _r("wandb-key", r"(?<![0-9a-fA-F])[0-9a-f]{40}(?![0-9a-fA-F])"),
    _r("email", r"\b[A-Za-z0-9._%+-]+@" + _LABEL + r"(?:\." + _LABEL + r")+\b"),
    # user names in home folders
    _r("user", r"(?:(?<=/home/)|(?<=/Users/)|(?<=/u/)|(?<=\\Users\\)|(?<=\\home\\))(?P<v>(?!<)[^/\\\s:'\"<>]+)"),
    _r("user", r"(?<![A-Za-z0-9_])(?:USER|LOGNAME|USERNAME|user|username)=(?P<v>(?!<)[^\s\"',;]+)"),
    # host names
    _r("host", r"(?m)^(?P<pre>\s*)(?P<v>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\]"),
    _r("host", r"(?i)(?<![A-Za-z0-9_])(?:host|hostname|node_name|nodename)\s*[=:]\s*[\"']?(?P<v>(?!<)[A-Za-z0-9][\w.-]*[A-Za-z0-9])"),
    _r("host", r"\bip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?:\.[A-Za-z0-9-]+)*\b"),
    _r("host", r"(?<![\w.-])(?:" + _LABEL + r"\.)+(?:" + TLDS + r")(?![\w-]|\.[A-Za-z0-9])", re.I),
    # short (single-label) host names: in URLs, and after `user@` (ssh, scp, rsync)
    _r("host", r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://(?:[^\s/@<>]*@)?(?P<v>[A-Za-z][A-Za-z0-9-]{0,62})(?=[:/?#'\")\]\s]|$)",
       accept=lambda v: v.lower() not in GENERIC_HOSTS, learn=_host_like),
    # `user@host` (ssh, scp, rsync); the host has 3+ characters, so metric names like `recall@k` stay
    _r("user", r"(?<![\w.+%@:/-])(?P<v>[A-Za-z_][\w.-]{0,31})(?=@[A-Za-z][A-Za-z0-9-]{2,62}(?![\w.@-]))", learn=_never),
    _r("host", r"(?<![\w.+%@:/-])[A-Za-z_][\w.-]{0,31}@(?P<v>[A-Za-z][A-Za-z0-9-]{2,62})(?![\w.@-])",
       accept=lambda v: v.lower() not in GENERIC_HOSTS, learn=_host_like),
    # last: long random-looking tokens that no rule above recognised
    _r("random-token", r"(?<![A-Za-z0-9+/=_.-])[A-Za-z0-9+/=_.-]{20,512}(?![A-Za-z0-9+/=_.-])", accept=looks_random),
    # ... and such a token as one folder or file name of a path (`/secrets/Zq8Lm3.../key.json`)
    _r("random-token", r"(?<=[/\\])[A-Za-z0-9+=_-]{20,512}(?=[/\\.]|[^A-Za-z0-9+=_./\\-]|$)", accept=looks_random),
]

_IPV4 = re.compile(IPV4)
_IPV6 = re.compile(IPV6)  # candidates: _ip_spans keeps those ipaddress accepts


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str
    learn: bool = True  # remember the value and replace it wherever else it occurs

    @property
    def placeholder(self) -> str:
        return f"<{self.kind}>"


def _is_public_host(host: str) -> bool:
    h = host.lower().rstrip(".")
    return any(h == p or h.endswith("." + p) for p in PUBLIC_HOSTS)


def _ip_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    for rx in (_IPV4, _IPV6):
        for m in rx.finditer(text):
            try:
                ip = ipaddress.ip_address(m.group(0))
            except ValueError:
                continue
            if ip.is_loopback or ip.is_unspecified:
                continue
            spans.append(Span(m.start(), m.end(), "ip"))
    return spans


@dataclass
class Redactor:
    """Finds secrets; remembers host and user names so that every mention goes."""

    hosts: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)

    def learn(self, text: str) -> None:
        """Remember the host and user names that `text` reveals (call before `spans`/`redact`)."""
        self._learn_from(text, self._rule_spans(text))

    def _learn_from(self, text: str, spans: list[Span]) -> None:
        for span in spans:
            value = text[span.start:span.end]
            if not span.learn:
                continue
            if span.kind == "host" and len(value) >= 3:
                self.hosts.add(value)
                first = value.split(".")[0]
                if "." in value and len(first) >= 4 and not first.isdigit():
                    self.hosts.add(first)
            elif span.kind == "user" and len(value) >= 3 and value.lower() not in GENERIC_USERS:
                self.users.add(value)

    def _rule_spans(self, text: str) -> list[Span]:
        spans: list[Span] = []
        for rule in RULES:
            for m in rule.pattern.finditer(text):
                groups = [g for g in ("v", "q1", "q2") if g in rule.pattern.groupindex and m.group(g) is not None]
                if groups:
                    start, end = m.span(groups[0])
                elif rule.pattern.groupindex.keys() & {"v", "q1", "q2"}:
                    continue
                else:
                    start, end = m.span()
                if start == end:
                    continue
                if rule.kind == "host" and _is_public_host(text[start:end]):
                    continue
                if rule.accept is not None and not rule.accept(text[start:end]):
                    continue
                spans.append(Span(start, end, rule.kind, rule.learn is None or rule.learn(text[start:end])))
        return spans

    def spans(self, text: str) -> list[Span]:
        """Non-overlapping spans to replace, in order; earlier rules win overlaps."""
        candidates = self._rule_spans(text)
        self._learn_from(text, candidates)
        for names, kind in ((self.hosts, "host"), (self.users, "user")):
            for name in sorted(names, key=len, reverse=True):
                for m in re.finditer(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", text):
                    candidates.append(Span(m.start(), m.end(), kind))
        candidates += _ip_spans(text)
        starts: list[int] = []  # taken spans, sorted and disjoint
        taken: list[Span] = []
        for span in candidates:  # rule order first, then learnt names, then IPs
            i = bisect.bisect_right(starts, span.start)
            if i and taken[i - 1].end > span.start:
                continue
            if i < len(taken) and taken[i].start < span.end:
                continue
            starts.insert(i, span.start)
            taken.insert(i, span)
        return taken

    def redact(self, text: str) -> str:
        out: list[str] = []
        pos = 0
        for span in self.spans(text):
            out.append(text[pos:span.start])
            out.append(span.placeholder)
            pos = span.end
        out.append(text[pos:])
        return "".join(out)


def redact(text: str) -> str:
    """`text` with secrets, credentials, user names, host names and IP addresses replaced by `<kind>`."""
    return Redactor().redact(text)
