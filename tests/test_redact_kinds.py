"""Issue 28 item 4: the eleven kinds of secret that reached new cases, each through `kb new`'s own path.

Each line below sits on the error line of an incident log; the written draft must hold the secret in no
form, and ordinary log text must come through unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb.cases.casefile import parse_case_file
from kb.incident.folder_policy import write_draft
from kb.incident.from_log import draft_from_text
from kb.incident.redact import redact

# kind -> (error line, secrets that must not reach the file, what the redacted line must still say)
KINDS: dict[str, tuple[str, list[str], str]] = {
    "aws-key-after-chinese": ("RuntimeError: 上传失败AKIAIOSFODNN7EXAMPLE被拒绝", ["AKIAIOSFODNN7EXAMPLE"], "上传失败<aws-key-id>被拒绝"),
    "redis-url-no-user": ("ConnectionError: redis://:Sup3rRedisPw@cache:6379/0 refused", ["Sup3rRedisPw"], "redis://:<password>@"),
    "proxy-authorization-dict": (
        "ProxyError: headers={'Proxy-Authorization': 'Basic dXNlcjpwYXNzd29yZA==', 'Accept': '*/*'}",
        ["dXNlcjpwYXNzd29yZA"], "'Accept': '*/*'",
    ),
    "hf-token-split-over-lines": ("OSError: invalid token hf_AbCdEfGhIjKlMn\nOpQrStUvWx12 for repo", ["AbCdEfGhIjKlMn", "OpQrStUvWx12"], "invalid token <hf-token>"),
    "hf-token-in-path": ("OSError: /cache/run_hf_Xy9AbCdEfGhIjKlMnOpQrSt/model.bin not found", ["Xy9AbCdEfGhIjKlMnOpQrSt"], "/model.bin not found"),
    "random-token-as-folder": ("FileNotFoundError: /secrets/Zq8Lm3Vb7Nx2Kc9Wd4Rf6Ty1Hg5Js0Pa/key.json", ["Zq8Lm3Vb7Nx2Kc9Wd4Rf6Ty1Hg5Js0Pa"], "/key.json"),
    "aws-key-in-file-name": ("FileNotFoundError: /data/AKIAIOSFODNN7EXAMPLE_creds.txt", ["AKIAIOSFODNN7EXAMPLE"], "_creds.txt"),
    "chinese-fullwidth-colon": ("RuntimeError: 登录失败 密码：hunter22x 错误", ["hunter22x"], "密码：<secret> 错误"),
    "chinese-token-equals": ("RuntimeError: 令牌=abcd1234efgh 无效", ["abcd1234efgh"], "令牌=<secret> 无效"),
    "docker-login-p": ("RuntimeError: command failed: docker login -u bob -p Sup3rSecret registry.example.com", ["Sup3rSecret"], "-p <password>"),
    "redis-cli-a": ("RuntimeError: command failed: redis-cli -h cache -a Redp4ssw0rd ping", ["Redp4ssw0rd"], "-a <password> ping"),
    "pass-pwd-passphrase-kaggle": (
        "RuntimeError: bad env DB_PASS=plokij98 REDIS_PWD=qazwsx12 SSH_PASSPHRASE=correcthorse KAGGLE_KEY=0123abcd4567ef",
        ["plokij98", "qazwsx12", "correcthorse", "0123abcd4567ef"], "DB_PASS=<secret>",
    ),
    "quoted-secret-with-spaces": ('RuntimeError: login failed password = "my secret phrase here" rejected', ["my secret phrase", "phrase here"], "rejected"),
    "url-password-in-env-value": (
        "ValueError: os.environ['HTTP_PROXY']='http://bob:hunter22@proxy.corp.io:3128' rejected",
        ["hunter22", "proxy.corp.io"], "rejected",
    ),
}


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@pytest.mark.parametrize("kind", list(KINDS))
def test_redact_replaces_each_kind(kind: str) -> None:
    line, secrets, kept = KINDS[kind]
    out = redact(line)
    for secret in secrets:
        assert secret not in out, out
    assert kept in out, out


@pytest.mark.parametrize("kind", list(KINDS))
def test_kb_new_writes_each_kind_redacted(kind: str, tmp_path: Path) -> None:
    line, secrets, _kept = KINDS[kind]
    log = f"INFO step 1 started\nTraceback (most recent call last):\n  File \"train.py\", line 3, in main\n{line}\n"
    draft = draft_from_text(log)  # used to raise for the URL in an environment value: the id held `<redacted>`
    path = write_draft(draft, tmp_path)
    written = path.read_text(encoding="utf-8")
    case = parse_case_file(path)[0]
    assert case is not None
    for secret in secrets:
        assert secret not in written, f"{kind}: {secret!r} in\n{written}"
        assert _alnum(secret) not in _alnum(written), f"{kind}: {secret!r} slugified in\n{written}"


@pytest.mark.parametrize(
    "line",
    [
        "PWD=/home/<user>/verl OLDPWD=/tmp",
        "INFO 12-03 10:01:02 [model_runner.py:1021] Loading model weights took 14.2 GB",
        "step 37: loss=0.412 grad_norm=1.07 lr=1e-06 pass@1=0.55 response_length/mean=512.3",
        "FORWARD_PASS=true NUM_PASS=3 sort_key=length cache_key=abc",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct hf_model_path=/models/qwen hf_config=None",
        "Warning: token_type_ids not used; max_tokens=512 pad_token=<pad>",
        "训练在第 37 步失败：显存不足（CUDA out of memory）",
        "connect to redis://localhost:6379 failed",
        "OSError: /root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B/blobs missing",
    ],
)
def test_ordinary_log_lines_are_not_mangled(line: str) -> None:
    assert redact(line) == line
