# scratch: rows in draw order; converted to reports-repC.jsonl by tools at end
R = []
def row(src, kind, lang, query, expected, in_scope):
    R.append(dict(source=src, kind=kind, lang=lang, query=query, expected=expected, in_scope=in_scope))

# A01
row("https://github.com/OpenRLHF/OpenRLHF/issues/792", "symptom", "zh",
    "RL训练模型时，gpu在利用率较低（50%-70%），colocate_all_models虽然可以拉高gpu利用率，但是极易超显存，能否增加下面两种hybrid engine策略", [], False)
# A02
row("https://github.com/yandex-research/rtdl-revisiting-models/issues/26", "paste", "en",
    "AttributeError: module 'zero' has no attribute 'set_randomness'\nAttributeError: module 'zero' has no attribute 'Timer'\nAttributeError: module 'zero' has no attribute 'Stream'", [], False)
row("https://github.com/HelloZeroNet/ZeroNet/issues/1540", "paste", "en",
    "Internal error: AttributeError: 'NoneType' object has no attribute 'strip'\nUiWebsocket.py line 81 > UiWebsocket.py line 267 > UiWebsocket.py line 1041 > TorManager.py line 284 > TorManager.py line 303", [], False)
row("https://github.com/HelloZeroNet/ZeroMail/issues/42", "paste", "en",
    "Internal error: AttributeError: '_OpenSSL' object has no attribute 'digest_ecdsa_sha1'", [], False)
row("https://github.com/HelloZeroNet/ZeroNet/issues/500", "paste", "en",
    "Internal error: AttributeError: 'NoneType' object has no attribute 'enabled'\nUiWebsocket.py line 107 > UiWebsocket.py line 183 > UiWebsocket.py line 277 > UiWebsocket.py line 239", [], False)
row("https://github.com/HKUDS/GPT-ST/issues/1", "paste", "en",
    "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nAttributeError: 'Namespace' object has no attribute 'scaler_zeros'", [], False)
# A04
row("https://github.com/MoonshotAI/checkpoint-engine/issues/12", "symptom", "en",
    "I tried the following commands without staring vllm ... It works fine.\nBut logs stucked at the following lines  on both nodes.", [], False)
row("https://github.com/sgl-project/sglang/issues/4283", "symptom", "en",
    "why dp_size must be 1 for update weights from distributed / tensor? Is dp_size==1 also required for update_weights_from_disk?", [], False)
row("https://github.com/sgl-project/sglang/issues/3646", "symptom", "en",
    "The current sglang implementation only offers one weight update request at a time for `update_weights_from_distributed`.", [], False)
row("https://github.com/MoonshotAI/checkpoint-engine/issues/17", "symptom", "en",
    "This project is currently only tested with vLLM. We need  integrate with sglang.", [], False)
# B01
row("https://github.com/langchain-ai/langchain-teacher/issues/8", "paste", "en",
    "AttributeError: module 'langchain' has no attribute 'verbose'", [], False)
row("https://github.com/minghanqin/LangSplat/issues/9", "paste", "en",
    "AttributeError: 'GroupParams' object has no attribute 'language_features_name'", [], False)
row("https://github.com/google/langextract/issues/92", "paste", "en",
    "AttributeError: module 'langextract' has no attribute 'data'", [], False)
row("https://github.com/sgl-project/sglang/issues/8081", "symptom", "en",
    "Unable to launch sglang server using google/gemma-3n-E2B-it", [], False)
row("https://github.com/zai-org/GLM-V/issues/185", "paste", "zh",
    "即使安装最新版sglang，也无法运行\n\nAttributeError: 'Glm4vMoeForConditionalGeneration' object has no attribute 'capture_aux_hidden_states'", [], False)
# B02
row("https://github.com/vllm-project/vime/issues/434", "symptom", "en",
    "[NPU][Bug] vLLM raise error when updating weights using data parallelism", [], True)
row("https://github.com/vllm-project/vllm/issues/11702", "symptom", "en",
    "vLLM LoRA Crash when using Dynamic Loading", [], False)
row("https://github.com/vllm-project/vllm/issues/20284", "symptom", "en",
    "vLLM Crashes When Using N-gram Speculative Decoding with LoRA", [], False)
row("https://github.com/LMCache/LMCache/issues/1455", "symptom", "en",
    "v0.3.4 vllm with LMCache startup crash, but normal in v0.3.2", [], False)
row("https://github.com/vllm-project/vllm/issues/7699", "symptom", "en",
    "vLLM inconsistently crashes on startup for multinode cluster", [], False)
row("https://github.com/vllm-project/vllm/issues/7936", "symptom", "en",
    "vllm api_server often crashes when the version is higher than 0.5.3.", [], False)
row("https://github.com/vllm-project/vllm-ascend/issues/3772", "symptom", "en",
    "vllm crashes every few hours", [], False)
row("https://github.com/vllm-project/vllm/issues/36843", "symptom", "en",
    "VLLM 0.17.1 initial mtp randomly crash", [], False)
# B03: only PRs -> no rows
# B04: only non-slice feature requests/PRs with no failure text -> none
# B05
row("https://github.com/nlzy/vllm-gfx906/issues/31", "symptom", "en",
    "ImportError: cannot import name 'LLM' from 'vllm'", [], True)
row("https://github.com/wangxiongts/vllm/issues/5", "symptom", "en",
    "import error of LLM class in vllm", [], True)
row("https://github.com/kyegomez/swarms/issues/373", "paste", "en",
    "ImportError while importing test module '/home/kye/swarms/tests/models/test_vllm.py'.\n../.local/lib/python3.10/site-packages/swarms/models/vllm.py:7: in <module>\n    from vllm import LLM, SamplingParams\nE   ModuleNotFoundError: No module named 'vllm'", [], False)
row("https://github.com/mistralai/mistral-finetune/issues/93", "symptom", "en",
    "[BUG] Error with vllm", [], False)
# B06
row("https://github.com/gpustack/gpustack/issues/1268", "symptom", "en",
    "HFValidationError", [], False)
row("https://github.com/LMCache/LMCache/issues/2306", "symptom", "en",
    "ValueError: vllm model for vllm-instance not found.", [], False)
row("https://github.com/OpenRLHF/OpenRLHF/issues/520", "symptom", "en",
    "Gemma2 Ray vllm\nAny possibility to fix this maybe some version of vllm?", [], True)
row("https://github.com/modelscope/ms-swift/issues/3522", "paste", "en",
    "[rank3]:   File \"/home/hotaisle/docker_training/vllm/vllm/distributed/parallel_state.py\", line 922, in initialize_model_parallel\n[rank3]:     all_ranks = torch.arange(world_size).reshape(\n[rank3]: RuntimeError: shape '[1, 1, 1]' is invalid for input of size 4", [], True)
row("https://github.com/OpenBMB/AgentCPM-GUI/issues/80", "paste", "zh",
    "vllm 起 RFT后的模型报错， ValueError: Following weights were not initialized from checkpoint:", ["vllm-weights-not-initialized-from-checkpoint"], True)
row("https://github.com/vllm-project/vllm/issues/21811", "symptom", "en",
    "GLM-4.1V-Thinking ValueError", [], False)
row("https://github.com/modelscope/ms-swift/issues/8223", "paste", "en",
    "[rank12]:   File \"/opt/anaconda3/envs/qwen3_vllm_infer/lib/python3.12/site-packages/vllm/sampling_params.py\", line 416, in _verify_args\n[rank12]:     raise ValueError(\n[rank12]: ValueError: max_tokens must be at least 1, got -239.", ["vllm-max-tokens-negative-prompt-too-long"], True)
# B07
row("https://github.com/PeterGriffinJin/Search-R1/issues/44", "paste", "en",
    "ray.exceptions.RaySystemError: System error: Failed to create placement group 'd1c0110401ccaefbbf8fd4b69bfd01000000' because name 'global_poolverl_group_8:0' already exists.", ["ray-placement-group-name-exists-after-retry"], True)
row("https://github.com/OpenRLHF/OpenRLHF/issues/911", "paste", "en",
    "(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero.", ["ray-oom-killer-memory-monitor"], True)
row("https://github.com/OpenRLHF/OpenRLHF/issues/1013", "symptom", "zh",
    "Task was killed due to the node running low on memory (ray oom)\n然后尝试了去掉 --vllm_enable_sleep 之后就不会出现这个问题了\n如果保留--vllm_enable_sleep 就会在load data或model的时候报ray oom的错，如果去掉就可以正常跑。", ["ray-oom-killer-memory-monitor"], True)
row("https://github.com/hiyouga/EasyR1/issues/97", "paste", "en",
    "`(main_task pid=974579) [2025-03-11 19:10:21,439 E 974579 974579] accessor.cc:1063: Failed to be registered. Invalid: Failed to create placement group '15635544d772892ea6254018189d01000000' because name 'global_poolverl_group_4:0' already exists. placement_group_id=15635544d772892ea6254018189d01000000\n    raise value.as_instanceof_cause()\nray.exceptions.RayTaskError(RaySystemError): ray::main_task() (pid=974579, ip=10.122.198.107)", ["ray-placement-group-name-exists-after-retry"], True)
row("https://github.com/PRIME-RL/PRIME/issues/16", "symptom", "en",
    "OutofMemory Error", [], True)
row("https://github.com/hpcaitech/ColossalAI/issues/3832", "symptom", "en",
    "I received an \"out of memory\" error when executing `/applications/Chat/examples/train_prompts.sh`.", [], False)
row("https://github.com/PRIME-RL/SimpleVLA-RL/issues/30", "paste", "en",
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory", ["ray-oom-killer-memory-monitor"], True)
row("https://github.com/OpenRLHF/OpenRLHF/issues/398", "paste", "en",
    "[rank7]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 7 has a total capacity of 39.39 GiB of which 14.00 MiB is free. Process 1117993 has 39.36 GiB memory in use. Of the allocated memory 38.34 GiB is allocated by PyTorch, and 385.64 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.", ["cuda-oom-training"], True)
# B08: all PRs -> none
# B09
row("https://github.com/vllm-project/vllm/issues/15430", "symptom", "en",
    "We currently do not support collective rpc on V1. It would be great if someone could implement this!", [], False)
row("https://github.com/vllm-project/vllm/issues/16109", "symptom", "en",
    "[Installation]: how to run swiftkv with vllm", [], False)
# B10: feature requests / PRs of other agent stacks, no failure text -> none
# B11
row("https://github.com/NVlabs/DiffusionNFT/issues/21", "paste", "zh",
    "[2025-10-22 10:29:28] Initialization failed. warmup error: Traceback (most recent call last):\n  File \"/home/donkey/.local/lib/python3.11/site-packages/sglang/srt/entrypoints/http_server.py\", line 1407, in _execute_server_warmup\n    assert res.status_code == 200, f\"{res=}, {res.text=}\"\n           ^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: res=<Response [403]>, res.text='<html>\\n<head><title>403 Forbidden</title></head>\\n<body>\\n<div style=\"text-align: center;\"><h1>403 Forbidden</h1></div>\\n</body>\\n</html>'", [], True)
# B12
row("https://github.com/vllm-project/vllm/issues/3293", "symptom", "en",
    "When using ray cluster to deploy vLLM, How to pin ray-head node into vLLM's placement-groups?", [], False)
row("https://github.com/OpenRLHF/OpenRLHF/issues/831", "symptom", "en",
    "How to run with multi node?", [], False)
row("https://github.com/CarperAI/trlx/issues/446", "symptom", "en",
    "It seems that the RLHF part cannot support training using multi-nodes, can you support it?", [], False)
row("https://github.com/allenai/open-instruct/issues/1431", "symptom", "en",
    "The logs report a placement bundle of:\n[{'GPU': 6, 'CPU': 60}]\nand then hang indefinitely with:\nWaiting for placement group to be scheduled\nThis happens despite the node having 8 GPUs available.", [], True)
# B13
row("https://github.com/r-hub/pkgsearch/issues/111", "paste", "en",
    "Error in curl::curl_fetch_memory(url, handle = handle) : \n  Timeout was reached: [search.r-pkg.org:80] Connection timed out after 10012 milliseconds", [], False)
# B14
row("https://github.com/sii-research/siiRL/issues/11", "symptom", "en",
    "how to support DAPO VAPO?\ncan easy import from verl.dapo?", [], False)
# B15
row("https://github.com/OpenRLHF/OpenRLHF/issues/1120", "symptom", "en",
    "When the Global Step reached over 100 during training, Policy Loss suddenly changed to nan, while Reward sharply decreased to 0. The model is crazily outputting `!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!! `", ["grad-norm-nan-collapse"], True)
row("https://github.com/modelscope/ms-swift/issues/7316", "symptom", "zh",
    "RLHF训练同时评估报错", [], False)
row("https://github.com/OpenRLHF/OpenRLHF/issues/866", "paste", "zh",
    "RayWorkerWrapper 报错:Error executing method 'init_worker'和INTERNAL ASSERT FAILED at \"../aten/src/ATen/cuda/CUDAContext.cpp\":49", [], True)
row("https://github.com/OpenRL-Lab/openrl/issues/48", "paste", "zh",
    "File \"/Users/env/venv/lib/python3.8/site-packages/openrl/envs/vec_env/wrappers/reward_wrapper.py\", line 46, in step\n    rewards, new_infos = self.reward_class.step_reward(data=extra_data)\n  File \"/Users/env/venv/lib/python3.8/site-packages/openrl/rewards/base_reward.py\", line 15, in step_reward\n    rewards = data[\"reward\"].copy()\nKeyError: 'reward'", [], False)
# B16
row("https://github.com/wangyuduan0618/EasyR1/issues/9", "symptom", "en",
    "Training Memory Leak at various steps", [], True)
# B17
row("https://github.com/vllm-project/vllm/issues/3517", "symptom", "en",
    "I have Nvidia A10 running and if i will not use ray, everything works perfectly, but if i activate ray i got this error", [], False)
row("https://github.com/bminixhofer/tokenkit/issues/1", "symptom", "en",
    "GPU support?", [], False)
# B18
row("https://github.com/THUDM/slime/issues/2023", "symptom", "zh",
    "想问一下 sglang-omni 后面会怎么样接入 slime 吗", [], False)
row("https://github.com/sgl-project/sglang/issues/3512", "paste", "en",
    "[INFO] Activating environment on node \nrun.sh: 18: source: not found\n[ERROR] Failed to activate environment", [], False)
row("https://github.com/sgl-project/sglang/issues/2561", "symptom", "en",
    "Running multi-node offline engine inference ( via SLURM)", [], False)
row("https://github.com/THUDM/slime/issues/6", "symptom", "en",
    "Tracking sglang compatibility in slime", [], False)
# B19
row("https://github.com/OpenBMB/MiniCPM/issues/269", "symptom", "zh",
    "执行sglang.launch_server 出现KeyError \"rope_type\"", ["rollout-engine-too-old-for-model"], True)
row("https://github.com/THUDM/slime/issues/1514", "paste", "en",
    "(SGLangEngine pid=720234, ip=11.251.213.106)   File \"/sgl-workspace/sglang/python/sglang/srt/entrypoints/openai/serving_chat.py\", line 851, in _build_chat_response\n(SGLangEngine pid=720234, ip=11.251.213.106)     metadata={\"weight_version\": ret[0][\"meta_info\"][\"weight_version\"]},\n(SGLangEngine pid=720234, ip=11.251.213.106) KeyError: 'weight_version'\n(SGLangEngine pid=720234, ip=11.251.213.106) [2026-01-29 06:53:43] Error in request: 'weight_version'", [], True)
row("https://github.com/sgl-project/sglang/issues/377", "symptom", "en",
    "srt throws KeyError when sgl.gen(...) regex parameter contains Chinese characters", [], False)
row("https://github.com/LLaVA-VL/LLaVA-NeXT/issues/86", "symptom", "en",
    "SGLang example not working: KeyError: 'answer'", [], False)
row("https://github.com/sgl-project/sglang/issues/5200", "paste", "en",
    "path/to/miniconda3/envs/xinf/lib/python3.11/site-packages/xinference/model/llm/sglang/core.py\", line 463, in async_generate\n    output_text=state[\"text\"],\n                ~~~~~^^^^^^^^\nKeyError: 'text'", [], False)
row("https://github.com/machinelearningZH/simply-simplify-language/issues/11", "paste", "en",
    "KeyError: 'GPT-4o mini'\nTraceback:\nFile \"/root/simply-simplify-language/_streamlit_app/sprache-vereinfachen.py\", line 236, in <module>\n    model_id=MODEL_IDS[\"GPT-4o mini\"],", [], False)
# B20
row("https://github.com/Ascend/sglang/issues/520", "symptom", "en",
    "After export SGLANG_VIT_ENABLE_NPU_GRAPH=True, slime training process crashes, error log is included in attachments.", [], True)
row("https://github.com/slm-lang/slm/issues/50", "paste", "en",
    "WARNING in ./app/assets/angular/policy/trading_policy/en.tmpl.html.slim\nModule build failed: Error: Unknown line indicator", [], False)
row("https://github.com/slime-lang/slime/issues/52", "paste", "en",
    "** (SyntaxError) web/templates/page/index.html.slim:1: syntax error before: '|'", [], False)
row("https://github.com/sgl-project/sglang/issues/40797", "symptom", "en",
    "Sglang 0.5.17 crashing with the following stack trace", [], False)
row("https://github.com/hello-jason/middleman-bss/issues/6", "paste", "en",
    "Option :lang is not supported by Slim::Engine", [], False)
row("https://github.com/THUDM/slime/issues/1391", "symptom", "en",
    "Server error '503 Service Unavailable' for /generate happens after long-time RL training and resumption from ckpts just doesn't work to avoid the bug", [], True)
# B21
row("https://github.com/jingyaogong/minimind/issues/740", "symptom", "en",
    "Which version of sglang is recommended to install? the requirements.txt does not show this packages.", [], False)
row("https://github.com/allenlacie00jordanday/EasyR1/issues/16", "symptom", "en",
    "Is it possible to support the SGlang Rollout?", [], False)
row("https://github.com/Alibaba-NLP/DeepResearch/issues/25", "symptom", "en",
    "Can I install only 'sglang' instead of 'sglang[all]' in the requirements.txt file, since 'sglang[all]' seems to cause many environment conflicts?", ["vllm-sglang-torch-pin-conflict"], True)
# B22
row("https://github.com/modelscope/ms-swift/issues/6636", "symptom", "en",
    "the first sleep call does not release memory when initialized", ["vllm-expandable-segments-sleep-mode"], True)
row("https://github.com/vllm-project/vllm/issues/47654", "paste", "en",
    "`--enable-sleep-mode` leaks physical GPU HBM for models loaded with `--mm-encoder-tp-mode data` (multimodal). `POST /sleep` returns 200, but `nvidia-smi --query-compute-apps=used_memory` shows the worker still holding almost all of its awake-state HBM. When this container coexists with other sleep-mode-enabled containers on the same GPUs, a subsequent `POST /wake_up` on any of them fails with:\n\nRuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163", ["vllm-wakeup-cumem-oom"], True)
row("https://github.com/NVIDIA-NeMo/RL/issues/223", "symptom", "en",
    "I noticed when setting `policy.generation.vllm_cfg.tensor_parallel_size=2` , vllm doesn't seem to completely free memory when it's supposed to be asleep.", [], True)
row("https://github.com/vllm-project/vllm/issues/17117", "paste", "en",
    "INFO 04-23 16:21:37 [worker.py:145] Sleep mode freed 19.51 GiB memory, 26.31 GiB memory is still in use.\nIn the first iteration, I wake up, do generations, and then go to sleep. Then deepspeed's turn, it experiences OOM.", [], True)
row("https://github.com/vllm-project/vllm/issues/48680", "symptom", "en",
    "`--enable-sleep-mode` OOMs loading an NVFP4 (modelopt) 30B on 16GB SM120 cards where the identical model loads fine without it — cumem MemPool overhead, not resolved by raising max_split_size_m", [], True)
row("https://github.com/vllm-project/vllm/issues/16663", "symptom", "en",
    "cpu memory not released when wake up the vLLM instance", [], True)
# B23
row("https://github.com/OpenRLHF/OpenRLHF/issues/242", "symptom", "en",
    "From the code, the tokenizer of reward model seems to be same as policy model？", [], False)
# B24
row("https://github.com/vllm-project/vllm/issues/15349", "symptom", "en",
    "LLM.collective_rpc is broken in v1 by default\nbecause `self.llm_engine.model_executor` is in a different process.", [], True)
row("https://github.com/vllm-project/vllm/issues/36856", "symptom", "en",
    "'LLMEngine' object has no attribute 'collective_rpc'", [], True)
row("https://github.com/vllm-project/vllm/issues/16409", "symptom", "en",
    "[Usage]: xpxd is useless？", [], False)
row("https://github.com/OpenRLHF/OpenRLHF/issues/1193", "paste", "en",
    "(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094] Invocation of collective_rpc method failed\n(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094] Traceback (most recent call last):\n(LLMRayActor pid=585804) (EngineCore_DP0 pid=586112) ERROR 03-05 00:25:45 [core.py:1094]   File \"/home/jianh/.local/lib/python3.12/site-packages/vllm/v1/engine/core.py\", line 657, in collective_rpc", [], True)
row("https://github.com/modelscope/ms-swift/issues/7363", "paste", "zh",
    "swift rollout启动vllm服务，swift rlhf启动GKD后vllm服务遇到了Address already in use错误\n(EngineCore_0 pid=7121) ERROR 01-12 17:24:20 [core.py:769] Invocation of collective_rpc method failed", ["address-already-in-use"], True)
row("https://github.com/modelscope/ms-swift/issues/6935", "paste", "zh",
    "[ERROR:swift] Method execution failed: collective_rpc\n  File \"/opt/conda/lib/python3.10/site-packages/vllm/engine/async_llm_engine.py\", line 535, in collective_rpc_async\n    raise NotImplementedError\nNotImplementedError", ["vllm-v0-async-collective-rpc-not-implemented"], True)
# B25
row("https://github.com/eric19990110/EasyR1/issues/2", "symptom", "en",
    "Which version of verl is used in the EasyR1 project?", [], False)
# B26
row("https://github.com/YWenxi/think-with-images-through-self-calling/issues/3", "paste", "en",
    "When running VLM Subagent GRPO training with SGLang as the rollout backend and actor_rollout_ref.rollout.agent.num_workers=0, the training hangs and eventually fails with:\n`TimeoutError: Failed to get register_center_actor ... for 300 seconds`\n`Waiting for register center actor GS5TrW_register_center to be ready.\nElapsed time: 0 ... 300 seconds`", ["ray-register-center-actor-timeout"], True)
row("https://github.com/strands-agents/harness-sdk/issues/1412", "symptom", "en",
    "strands-sglang: SGLang model provider with Token-In/Token-Out (TITO) support for agentic RL training", [], False)
# B27
row("https://github.com/OpenRLHF/OpenRLHF/issues/660", "symptom", "en",
    "_broadcast_to_vllm DOES NOT seem to update the vllm weights", [], False)
row("https://github.com/vllm-project/vllm/issues/24869", "symptom", "en",
    "Assertion Error while serving vllm due to this error : assert param_data.shape == loaded_weight.shape", ["rollout-engine-too-old-for-model"], True)
row("https://github.com/vllm-project/vllm-ascend/issues/934", "symptom", "en",
    "vllm0.8.5rc1 run baichuan with TP，assert error", [], False)
row("https://github.com/OpenRLHF/OpenRLHF-M/issues/6", "symptom", "zh",
    "我看vllm更新权重的时候，只是将rank0上面的weight进行广播，但rank0上面只有部分模型权重，请问这个是怎么回事啊", [], False)
row("https://github.com/vllm-project/vllm/issues/11765", "paste", "en",
    "  File \"/data/anaconda3/envs/vllm_env/lib/python3.12/site-packages/vllm/model_executor/models/mllama.py\", line 1446, in load_weights\n    weight_loader(param, loaded_weight)\n  File \"/data/anaconda3/envs/vllm_env/lib/python3.12/site-packages/vllm/model_executor/layers/linear.py\", line 1087, in weight_loader\n    assert param_data.shape == loaded_weight.shape\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError", [], True)
row("https://github.com/StarsfieldAI/R1-V/issues/191", "paste", "en",
    "AssertionError: Attempted to load weight (torch.Size([0])) into parameter (torch.Size([1280, 3, 2, 14, 14]))", [], True)
row("https://github.com/vllm-project/vllm/issues/15124", "paste", "en",
    "[rank0]:   File \"/opt/conda/lib/python3.10/site-packages/trl/trainer/grpo_trainer.py\", line 514, in _move_model_to_vllm\n[rank0]:     llm_model.load_weights(state_dict.items())\nAssertionError - assert loaded_weight.shape[output_dim] == self.org_vocab_size", [], True)
# B28: only PRs and an unrelated task list -> none
# B29
row("https://github.com/OpenRLHF/OpenRLHF/issues/748", "symptom", "en",
    "i'm wondering if there's any more detailed introduction about openrlhf's training flow design from a mlsys view, which could help me know the project better and debug by myself", [], False)
# B30
row("https://github.com/TIGER-AI-Lab/verl-tool/issues/114", "symptom", "en",
    "Does the verl-tool currently support this type of training, or would you recommend using different agents to handle different tools?", [], False)
