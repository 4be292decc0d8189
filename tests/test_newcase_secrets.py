"""`kb new` never writes a secret that sits in an error line (issue 11, point 4).

Each incident log below carries one kind of secret on the very line kb new
turns into the id, the title, the symptoms and the signatures. The written
case file must hold the secret in no form: not verbatim, not lower-cased, and
not slugified into the id (`tr0ub4dor3` in `...-pgpassword-tr0ub4dor3`).
"""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest

from kb.cases.casefile import parse_case_file
from kb.incident.folder_policy import write_draft
from kb.incident.from_log import draft_from_text
from kb.incident.redact import looks_random, redact

# kind -> (error line, the secret values that must not reach the file)
KINDS: dict[str, tuple[str, list[str]]] = {
    "slack-bot-token": (
        "RuntimeError: slack notify failed with xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        ["123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
    ),
    "slack-user-token": (
        "RuntimeError: token xoxp-2222222222-3333333333-4444444444-9f8e7d6c5b4a39281706f5e4d3c2b1a0 revoked",
        ["2222222222-3333333333-4444444444", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"],
    ),
    "slack-webhook": (
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2",
        ["T01ABCDEF", "B02GHIJKL", "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"],
    ),
    "pem-key": (
        "ValueError: Could not deserialize key data: -----BEGIN RSA PRIVATE KEY-----MIIEowIBAAKCAQEAq7BFUpkGp3+LQmlQYx2eqzDV+xeG8kx/sQFV18S5JhzGeIRq",
        ["MIIEowIBAAKCAQEAq7BFUpkGp3", "LQmlQYx2eqzDV", "xeG8kx/sQFV18S5JhzGeIRq"],
    ),
    "pem-in-json": (
        'json.decoder.JSONDecodeError: bad service account {"type": "service_account", "private_key": '
        '"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\nk3Yt9Qz8Lp2Vx\\n-----END PRIVATE KEY-----\\n"}',
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "k3Yt9Qz8Lp2Vx"],
    ),
    "pgpassword": ("psql: error: connection to server failed PGPASSWORD=Tr0ub4dor3 psql -h db", ["Tr0ub4dor3"]),
    "env-assignments": (
        "RuntimeError: bad env MYSERVICETOKEN=q1w2e3r4t5 DBSECRET=zaqxsw21qq MYSQL_ROOT_PASSWORD=plokij98",
        ["q1w2e3r4t5", "zaqxsw21qq", "plokij98"],
    ),
    "google-api-key": (
        "google.api_core.exceptions.PermissionDenied: 403 API key not valid AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
        ["AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"],
    ),
    "mysql-p": ("ERROR 1045 (28000): Access denied when running mysql -uroot -pS3cretPw9 -h db1", ["S3cretPw9"]),
    "password-flag": ("RuntimeError: command failed: mysqldump --password=Qw3rtyZ99 --all-databases", ["Qw3rtyZ99"]),
    "short-host-in-url": (
        "requests.exceptions.ConnectionError: Max retries exceeded, failed to reach http://trainbox:8000/v1/completions",
        ["trainbox"],
    ),
    "short-host-after-user": ("ssh: connect to host via alice@gpubox7 port 22: Connection refused", ["gpubox7", "alice"]),
    "random-token": (
        "RuntimeError: upload rejected, credential Zq8Lm3Vb7Nx2Kc9Wd4Rf6Ty1Hg5Js0Pa failed",
        ["Zq8Lm3Vb7Nx2Kc9Wd4Rf6Ty1Hg5Js0Pa"],
    ),
}


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@pytest.mark.parametrize("kind", list(KINDS))
def test_secret_in_the_error_line_never_reaches_the_case_file(kind: str, tmp_path: Path) -> None:
    line, secrets = KINDS[kind]
    log = f"INFO step 1 started\nTraceback (most recent call last):\n  File \"train.py\", line 3, in main\n{line}\n"
    draft = draft_from_text(log)
    path = write_draft(draft, tmp_path)
    written = path.read_text(encoding="utf-8")
    case = parse_case_file(path)[0]
    assert case is not None
    made_from_line = [case.id, case.title, *case.symptoms, *[str(s) for s in case.signatures]]
    for secret in secrets:
        assert secret not in written, f"{kind}: {secret!r} in\n{written}"
        assert secret.lower() not in written.lower(), f"{kind}: {secret!r} (any case) in\n{written}"
        assert _alnum(secret) not in _alnum(written), f"{kind}: {secret!r} slugified in\n{written}"
        assert path.stem == draft.id and _alnum(secret) not in _alnum(path.name)
        for field in made_from_line:
            assert _alnum(secret) not in _alnum(field)
    # the error stays recognisable: the title still says what failed
    assert len(case.title) >= 12


def test_pem_block_over_several_lines_is_removed() -> None:
    text = (
        "ValueError: bad key -----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "QyNTUxOQAAACBfQ2K8\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    out = redact(text)
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in out and "QyNTUxOQAAACBfQ2K8" not in out
    assert "-----BEGIN OPENSSH PRIVATE KEY-----<private-key>-----END OPENSSH PRIVATE KEY-----" in out


@pytest.mark.parametrize(
    "line",
    [
        "PWD=/home/<user>/verl OLDPWD=/tmp",  # the working directory is no secret
        "ValueError: max_tokens=5 tokenizer=Qwen pad_token=<pad> eos_token_id=2",
        "torch.OutOfMemoryError: CUDA out of memory while loading Qwen2-7B-Instruct-GPTQ-Int4",
        "RuntimeError: cudaErrorMemoryAllocation in ProcessGroupNCCL with TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "OSError: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: model-00001-of-00004.safetensors",
        "ImportError: cannot import name 'AutoModelForCausalLM' from deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "connect to redis://localhost:6379 failed",
        "pip install flash-attn==2.7.4.post1 --no-build-isolation",
        "val-core/gsm8k/reward/best@4/mean: 0.71 recall@k=0.3 for all prompts",
    ],
)
def test_ordinary_error_text_is_kept(line: str) -> None:
    assert redact(line) == line


def test_entropy_fallback_catches_random_tokens_and_spares_identifiers() -> None:
    rng = random.Random(11)
    alphabets = [string.ascii_letters + string.digits, string.ascii_letters + string.digits + "+/", "0123456789abcdef"]
    tokens = ["".join(rng.choice(a) for _ in range(32)) for a in alphabets for _ in range(300)]
    caught = sum(looks_random(t) for t in tokens) / len(tokens)
    assert caught >= 0.85, caught
    identifiers = [
        "cudaErrorMemoryAllocation", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "ppo_micro_batch_size_per_gpu",
        "Qwen2-7B-Instruct-GPTQ-Int4", "M2M100PreTrainedModel", "Meta-Llama-3.1-8B-Instruct",
        "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "nvidia-cublas-cu12==12.1.3.1",
        "sm_90a-cuda12.4-torch2.5.1", "actor_rollout_ref.rollout.gpu_memory_utilization",
        "/tmp/kb_nccl_p2p_p2p.log", "model-00001-of-00004.safetensors",
    ]
    assert [i for i in identifiers if looks_random(i)] == []


def test_a_plain_word_host_is_not_hunted_down_everywhere() -> None:
    """`pass@all` or an `http://trainbox/` host hides that spot only; a host with a digit goes everywhere."""
    out = redact("ssh alice@gpubox7 failed\npass@all 0.5 on all ranks\nRuntimeError: gpubox7 unreachable")
    assert "gpubox7" not in out and "RuntimeError: <host> unreachable" in out
    assert "on all ranks" in out
