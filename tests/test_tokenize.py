"""The BM25 tokenizer keeps identifiers whole, splits them too, and handles Chinese."""

from kb.text.tokenize import tokenize


def test_identifiers_stay_whole_and_yield_parts() -> None:
    toks = tokenize("tokenizer.pad_token_id is None")
    assert "pad_token_id" in toks and {"pad", "token", "id"} <= set(toks)


def test_env_var_names_are_kept() -> None:
    assert "nccl_p2p_disable" in tokenize("export NCCL_P2P_DISABLE=1")


def test_config_keys_yield_each_level() -> None:
    toks = tokenize("actor_rollout_ref.rollout.gpu_memory_utilization=0.5")
    assert {"actor_rollout_ref", "gpu_memory_utilization", "rollout", "gpu", "memory"} <= set(toks)


def test_camel_case_exception_names() -> None:
    toks = tokenize("torch.distributed.DistBackendError")
    assert {"distbackenderror", "dist", "backend", "error", "torch"} <= set(toks)


def test_numbers_and_hex_are_dropped() -> None:
    assert tokenize("12345 0x7f3a 9d1e5f6a7b8c 3.14") == []


def test_chinese_unigrams_and_bigrams() -> None:
    toks = tokenize("训练卡住")
    assert toks == ["训", "练", "卡", "住", "训练", "练卡", "卡住"]


def test_mixed_chinese_and_english() -> None:
    toks = tokenize("显存OOM了")
    assert "oom" in toks and "显存" in toks


def test_inflections_fold_together() -> None:
    assert tokenize("hangs")[0] == tokenize("hanging")[0] == tokenize("hang")[0]
    assert tokenize("nans") == tokenize("nan")
    assert tokenize("loss") == ["loss"]


def test_stopwords_removed() -> None:
    assert tokenize("the and of to") == []


def test_explanations_show_words_not_stems_and_chinese_runs() -> None:
    from kb.text.tokenize import display_terms, tokenize

    q = "训练卡住了 torch.distributed hangs in utils"
    shown = display_terms(tokenize(q), q)
    assert "distributed" in shown and "utils" in shown and "hangs" in shown
    assert "distribut" not in shown and "util" not in shown
    assert any("训练卡住" in t for t in shown)  # the run, not 训, 练, 卡, 住
    assert not any(len(t) == 1 and "\u4e00" <= t <= "\u9fff" for t in shown)


def test_negated_errors_are_left_out_of_the_query() -> None:
    from kb.text.tokenize import drop_negated, tokenize

    assert "报错" not in tokenize(drop_negated("训练卡住了，没有报错"))
    assert "error" not in tokenize(drop_negated("it hangs with no error at all"))
    # an error line keeps its words
    assert "error" in tokenize(drop_negated("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp"))


def test_cli_flag_and_config_key_are_one_token() -> None:
    # vLLM's `--tensor-parallel-size` and verl's `tensor_parallel_size` name the same setting
    flag = tokenize("vllm serve --tensor-parallel-size 16")
    assert "tensor_parallel_size" in flag
    assert "tensor_parallel_size" in tokenize("rollout.tensor_parallel_size=16")
    assert {"tensor", "parallel", "size"} <= set(flag)  # the parts still match one by one
    from kb.text.tokenize import display_terms

    assert display_terms(["tensor_parallel_size"], "--gpu-memory-utilization --tensor-parallel-size 16") == ["tensor-parallel-size"]


def test_an_install_prefix_says_nothing_about_the_error() -> None:
    # two users with the same failure, installed in different places, give the same tokens
    a = tokenize('File "/root/miniconda3/lib/python3.10/site-packages/verl/protocol.py", line 27, in <module>')
    b = tokenize('File "/usr/local/lib/python3.12/dist-packages/verl/protocol.py", line 27, in <module>')
    assert a == b and "protocol" in a and "verl" in a
    assert not {"miniconda3", "root", "site", "usr", "python3.10"} & set(a)
    # a source checkout keeps the last three parts of the path; URLs and relative paths are left whole
    assert {"ppo", "ray_trainer.py"} <= set(tokenize('File "/home/me/src/verl/verl/trainer/ppo/ray_trainer.py", line 9'))
    assert "home" not in tokenize('File "/home/me/src/verl/verl/trainer/ppo/ray_trainer.py"')
    assert {"github.com", "verl_project"} <= set(tokenize("https://github.com/verl-project/verl/blob/main/setup.py"))
    assert "recipe" in tokenize("recipe/dapo/src/main_dapo.py")


def test_a_link_to_another_thread_is_not_searched() -> None:
    toks = tokenize("randomly stuck, similar to https:github.com/volcengine/verl/issues/340。 and "
                    "https://github.com/verl-project/verl/pull/156#issuecomment-12")
    assert "volcengine" not in toks and "github" not in toks and "stuck" in toks
    # an install URL is part of the error's story and stays
    assert "volcengine" in tokenize("pip install git+https://github.com/volcengine/verl.git")
