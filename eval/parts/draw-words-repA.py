import random

WORDS = """error fail crash hang stuck slow memory install import version config rollout reward
checkpoint save load model tokenizer dataset ray vllm sglang fsdp megatron nccl gpu node lora grpo
ppo validation batch sequence loss gradient nan timeout docker cuda assertion attribute key shape
dtype merge multimodal tool agent async logging wandb critic actor ref kl entropy response prompt
length padding offload sleep weight sync engine worker cluster resume optimizer learning qwen llama
deepseek npu amd ulysses sequence_parallel dynamic micro mini epoch step metric score math gsm8k
""".split()
rng = random.Random(20261202)
rng.shuffle(WORDS)
for i, w in enumerate(WORDS):
    print(i, f"verl {w}")
