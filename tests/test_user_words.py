"""The sentence a user typed above a pasted log is searched with its error lines (kb.text.user_words)."""

from __future__ import annotations

from kb.text.user_words import is_prose, leading_words

TRACE = """Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 657, in __init__
    self.llm = LLM(
  File "/opt/conda/lib/python3.11/site-packages/vllm/entrypoints/llm.py", line 243, in __init__
    self.llm_engine = LLMEngine.from_engine_args(
ValueError: something failed
"""


def test_the_words_above_a_log_are_kept_and_the_log_is_not() -> None:
    assert leading_words("GRPO max_num_batched_tokens hardcoded\n" + TRACE) == "GRPO max_num_batched_tokens hardcoded"
    assert leading_words("训练到第 55 步报错\n请问怎么解决\n" + TRACE) == "训练到第 55 步报错\n请问怎么解决"
    assert leading_words(TRACE) == ""  # a log alone has no user words
    # at most three lines, and they stop at the first log or code line
    assert leading_words("rollout hangs here\nafter two steps\nwith vllm engine\nand sglang too\n" + TRACE).count("\n") == 2
    assert leading_words("GRPO fails like this\npython train.py --x 1 \\\n" + TRACE) == "GRPO fails like this"


def test_log_and_code_lines_are_not_prose() -> None:
    for line in [
        'File "/x/y.py", line 3, in f', "Traceback (most recent call last):", "Original Traceback (most recent call last):",
        "ValueError: bad value here", "INFO 01-12 17:24:20 [core.py:769] Starting engine", "(WorkerDict pid=1) loading",
        "[rank0]: NCCL error", "training_args = GRPOConfig(max_prompt_length=6144)", "python3 -m verl.trainer.main_ppo \\",
        "--model_name_or_path Qwen/Qwen3-1.7B", "2024-01-01 00:00:00 starting", "see https://github.com/x/y",
        "x", "",
    ]:
        assert not is_prose(line), line
    for line in ["Having issues with vLLM for GRPO", "GRPO训练报错", "Multi-GPU training deadlocks at initialization"]:
        assert is_prose(line), line


def test_a_pasted_log_is_searched_with_the_users_words(engine) -> None:
    from kb.logs.logsearch import search_text

    answer = search_text(engine, "Rollout with vllm max_num_batched_tokens smaller than max_model_len\n" + TRACE)
    assert answer.searched_for[0] == "Rollout with vllm max_num_batched_tokens smaller than max_model_len"
    assert "max_num_batched_tokens" in answer.query
    assert answer.results and answer.results[0].id == "vllm-max-num-batched-tokens-lt-max-model-len"


def test_escape_codes_in_the_users_words_do_not_reach_the_query() -> None:
    words = leading_words("\x1b[31mrollout hangs after step two\x1b[0m\x07\n" + TRACE)
    assert words == "rollout hangs after step two"


def test_a_log_read_from_a_file_has_no_user_words(engine) -> None:
    # A log file's opening lines are the program's, not a person's: `kb search --file` and a pipe pass typed=False.
    from kb.logs.logsearch import search_text

    log = "Rollout with vllm max_num_batched_tokens smaller than max_model_len\n" + TRACE
    answer = search_text(engine, log, typed=False)
    assert "Rollout with vllm max_num_batched_tokens smaller than max_model_len" not in answer.searched_for
    assert "max_num_batched_tokens smaller" not in answer.query


def test_kb_search_file_does_not_search_the_logs_first_line_as_user_words(tmp_path, shared_index_dir, capsys) -> None:
    import json

    from kb.cli import main

    log = tmp_path / "run.log"
    log.write_text("Starting the rollout workers now\n" + TRACE)
    main(["search", "--no-dense", "--json", "--index-dir", str(shared_index_dir), "--file", str(log)])
    assert "Starting the rollout workers now" not in json.loads(capsys.readouterr().out)["searched_for"]
    main(["search", "--no-dense", "--json", "--index-dir", str(shared_index_dir), "Starting the rollout workers now\n" + TRACE])
    assert "Starting the rollout workers now" in json.loads(capsys.readouterr().out)["searched_for"]
