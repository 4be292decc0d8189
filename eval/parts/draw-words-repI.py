import random

COMP = ["agent loop", "reward loop", "fully async", "TransferQueue", "megatron bridge", "vllm 0.11", "vllm 0.12", "sglang 0.5", "trtllm", "checkpoint engine", "Qwen3-VL", "Qwen3 MoE", "model engine", "rollout server", "LoRA", "dynamic sampling", "multi-turn tool", "NPU", "FP8", "router replay", "critic", "SFT trainer", "one-step off-policy", "DAPO recipe", "GSPO", "ulysses sequence parallel", "remove padding", "gradient checkpointing", "offload", "val_kwargs"]
ERR = ["error", "AssertionError", "KeyError", "AttributeError", "TypeError", "hang", "OOM", "ImportError"]
rng = random.Random(9101)
draws = [("verl", rng.choice(COMP), rng.choice(ERR)) for _ in range(120)]
for i, d in enumerate(draws, 1):
    print(i, " ".join(d))
