"""A pasted issue report: its form's headings and checkboxes are dropped, its environment dump is read last."""

from __future__ import annotations

from kb.text.report_template import environment_lines, is_boilerplate, script_lines
from kb.text.signals import extract

# the shape of a real verl bug report: the form of .github/ISSUE_TEMPLATE/bug-report.yml and the output of
# scripts/diagnose.py, as they come pasted together
VERL_REPORT = """[Bug] Rollout infer_tp size is incorrectly set

### System Info

----------Python Info----------
Version      : 3.10.12
Compiler     : GCC 11.4.0
------------Pip Info-----------
vllm         :  0.10.0
torch        : 2.7.1+cu126
----------verl Info-----------
Version      : 0.7.0.dev
----------Environment----------
VERL_LOGGING_LEVEL=''
CUDA Runtime : 12.6
----------System Info----------
GPU Count       : 2
GPU 1   Type    : NVIDIA A100 80GB PCIe

### Information

- [ ] The official example scripts
- [x] My own modified scripts

### Tasks

- [x] An officially supported task in the `examples` folder (such as GLUE/SQuAD, ...)
- [ ] My own task or dataset (give details below)

### Reproduction

ACTOR_TP=1
rollout.tensor_model_parallel_size is ignored and every server gets both GPUs

### Expected behavior

the rollout uses tp 1
"""

VLLM_REPORT = """[Bug]: cpu memory not released when wake up the vLLM instance

### Your current environment

<details>
<summary>The output of `python collect_env.py`</summary>

```text
root@host:/workspace# python3 collect_env.py
INFO 04-15 11:22:23 [__init__.py:239] Automatically detected platform cuda.
Collecting environment information...
PyTorch version: 2.6.0+cu124
GPU 0: NVIDIA A800 80GB PCIe
/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0
```

</details>

### 🐛 Describe the bug

after wake_up the host memory of the sleeping engine is never given back
"""


def test_the_forms_headings_and_checkboxes_are_not_read() -> None:
    s = extract(VERL_REPORT)
    texts = [line.text for line in s.lines]
    assert not any(t.startswith("###") for t in texts)
    assert not any("official example scripts" in t or "GLUE/SQuAD" in t for t in texts)
    assert "ACTOR_TP=1" in texts  # the author's own lines stay, a shell assignment included
    assert is_boilerplate("### Expected behavior") and is_boilerplate("## Reproduction:")
    assert not is_boilerplate("## Error message:")  # a heading the author wrote is kept
    assert not is_boilerplate("- [x] I set use_remove_padding=True")  # an author's own checkbox is kept


def test_the_environment_dump_is_read_after_the_authors_words() -> None:
    s = extract(VERL_REPORT)
    focus = s.focus_text
    assert focus.startswith("[Bug] Rollout infer_tp size is incorrectly set")
    assert "tensor_model_parallel_size is ignored" in focus
    assert "Compiler" not in focus and "GPU Count" not in focus and "VERL_LOGGING_LEVEL" not in focus
    assert "vllm         :  0.10.0" in s.rest_text  # kept as context (and kb.search.versions reads the paste)
    assert not s.error_lines


def test_a_pasted_collect_env_run_is_environment_to_its_fence() -> None:
    s = extract(VLLM_REPORT)
    assert "Automatically detected platform cuda" not in s.focus_text  # vLLM's start-up line inside the dump
    assert "libcudnn" not in s.focus_text and "<details>" not in s.focus_text
    assert "host memory of the sleeping engine is never given back" in s.focus_text
    assert "PyTorch version: 2.6.0+cu124" in s.rest_text


def test_an_environment_dump_alone_is_still_read() -> None:
    """A paste that is nothing but a dump has no other text: the scorers read the dump, not nothing."""
    dump = "PyTorch version: 2.6.0+cu124\nIs CUDA available: False\nGPU 0: NVIDIA A800 80GB PCIe"
    s = extract(dump)
    assert s.focus_text == s.cleaned_text and s.rest_text == ""
    assert environment_lines(dump.splitlines()) == {0, 1, 2}


def test_error_lines_are_unchanged_by_a_form_around_them() -> None:
    pasted = "### System Info\n\nverl 0.5.0\n\n### Reproduction\n\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    s = extract(pasted)
    assert [l.text for l in s.error_lines] == ["RuntimeError: CUDA error: an illegal memory access was encountered"]
    assert "System Info" not in s.rest_text


def test_markdown_bold_around_a_name_is_read_without_the_stars() -> None:
    """`Unregistered model type: **qwen3_5_moe**` in an issue is the message `Unregistered model type: qwen3_5_moe`
    (a regex signature `\\w+` after the colon did not match the stars); Python's `**` is left alone."""
    from kb.text.signals import clean_line

    assert clean_line("ValueError: Unregistered model type: **qwen3_5_moe**, now only")[0] == \
        "ValueError: Unregistered model type: qwen3_5_moe, now only"
    assert clean_line("max is 2**31 and 2**32")[0] == "max is 2**31 and 2**32"
    assert clean_line("    return fn(*args, **kwargs)")[0] == "    return fn(*args, **kwargs)"
    assert clean_line("f(**a, **b)")[0] == "f(**a, **b)"


def test_an_error_under_a_dump_is_still_an_error_line() -> None:
    """A collect_env.py run pasted without its closing fence, or an exception printed right under diagnose.py's
    `Key : value` lines, must not be swallowed into the dump (the dump's lines are never error lines)."""
    unfenced = ("Bug\n\nroot@h:/w# python collect_env.py\nPyTorch version: 2.6.0\nGPU 0: NVIDIA A100\n"
                "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in [l.text for l in extract(unfenced).error_lines]
    under = "----------verl Info-----------\nVersion      : 0.7.0\nRuntimeError: boom happened here\n"
    assert [l.text for l in extract(under).error_lines] == ["RuntimeError: boom happened here"]
    assert 200 < max(environment_lines(["python collect_env.py"] + ["x: y"] * 400)) <= 250  # a run without its fence ends


# the "Reproduction" of a report as people paste it: the launch script of their run (the shape of verl's
# examples/grpo_trainer scripts, submitted through `ray job submit`)
LAUNCH_REPORT = """GRPO on 2 nodes stops after step 3 with no error, GPUs idle

### Reproduction

set -x
export RAY_memory_usage_threshold=0.99
export VLLM_WORKER_MULTIPROC_METHOD=spawn
WORKING_DIR=${WORKING_DIR:-"${PWD}"}

ray job submit --runtime-env="${WORKING_DIR}/verl/trainer/runtime_env.yaml" \\
    --working-dir "${WORKING_DIR}" \\
    -- python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.truncation='error' \\
    actor_rollout_ref.rollout.free_cache_engine=True \\
    trainer.nnodes=2 $@

the last lines printed are the step 3 metrics
"""


def test_a_launch_script_is_read_after_the_authors_words() -> None:
    s = extract(LAUNCH_REPORT)
    focus = s.focus_text
    assert "stops after step 3 with no error" in focus and "the last lines printed are the step 3 metrics" in focus
    for scripted in ("RAY_memory_usage_threshold", "runtime_env.yaml", "free_cache_engine", "adv_estimator"):
        assert scripted not in focus and scripted in s.rest_text, scripted
    # an override's value is no error line (data.truncation='error')
    assert not s.error_lines


def test_a_short_command_is_what_the_report_is_about() -> None:
    """A merger command of four lines is the subject of the report, not a launch script: it stays in focus."""
    text = ("I ran the model merger and files are missing:\n"
            "python scripts/model_merger.py merge \\\n    --backend fsdp \\\n"
            "    --local_dir checkpoints/run/global_step_200/actor \\\n    --target_dir ckpt/hf\n")
    assert script_lines(text.splitlines()) == set()
    assert "model_merger.py merge" in extract(text).focus_text


def test_an_error_inside_a_script_is_still_an_error_line() -> None:
    lines = [f"    actor_rollout_ref.key{i}=1 \\" for i in range(14)]
    lines.insert(7, "RuntimeError: CUDA error: an illegal memory access was encountered")
    got = script_lines(lines)
    assert 7 not in got and len(got) == 14  # the error splits the script into two runs of seven
    s = extract("\n".join(lines))
    assert [l.text.strip() for l in s.error_lines] == ["RuntimeError: CUDA error: an illegal memory access was encountered"]


def test_a_pasted_screenshot_is_not_read() -> None:
    """A line that is only an image says nothing but its URL's words (github, user-attachments, assets)."""
    text = ('hf rollout with mode sync not found\n\n<img width="1289" height="332" alt="Image" '
            'src="https://github.com/user-attachments/assets/e7b77d25" />\n![Image](https://github.com/user-attachments/assets/f5)\n'
            "the error is in the screenshot above")
    assert is_boilerplate('<img width="1" alt="Image" src="https://x/y.png" />') and is_boilerplate("![Image](https://x/y.png)")
    assert not is_boilerplate("see ![Image](https://x/y.png) for the log")  # words of the author's around it stay
    focus = extract(text).focus_text
    assert "user-attachments" not in focus and "hf rollout with mode sync not found" in focus


def test_a_script_with_lowercase_variables_and_strict_mode_is_a_script() -> None:
    lines = ["set -xeuo pipefail", "model_path=/data/models/Qwen3-1.7B", "train_files=data/train.parquet",
             'DEVICE=${DEVICE:-$(python3 -c "import torch_npu" 2>/dev/null && echo npu || echo cuda)}',
             "project_name=sandbox", "experiment_name=qwen3-1.7b_dapo", "adv_estimator=grpo"]
    assert script_lines(lines) == set(range(7))
    # a sentence with an equals sign is no shell line
    assert script_lines(["I set lr = 1e-6 and it diverged"] * 7) == set()
