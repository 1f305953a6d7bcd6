#!/usr/bin/env python3
"""vLLM's Qwen2 ignores the config's head_dim: it uses hidden_size // num_attention_heads (standalone).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py /tmp/m --set vllm --only vllm-qwen2-0-0
    $VPY engines/vllm/repro_qwen2_head_dim.py /tmp/m/vllm-qwen2-0-0    # exit 1: reproduced

vllm-qwen2-0-0 has hidden_size 64, 2 query heads, 1 KV head and head_dim 64 (q_proj 128 x 64), which
transformers' Qwen2Attention honours (getattr(config, "head_dim", hidden // heads)); vLLM's
Qwen2Attention sets self.head_dim = hidden_size // total_num_heads = 32 (model_executor/models/qwen2.py)
and loads the checkpoint without a shape error. Compares the logits of every position of 5 tokens
through transformers' own forward and vLLM's offline LLM (raw logits via prompt_logprobs and the sampled
position's logprobs); exit 1 when vLLM is more than 1e-3 away.
"""
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; else vLLM wants 92 % of the RAM
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

model, tokens = sys.argv[1], [17, 101, 5, 230, 64]
with torch.no_grad():
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="eager")
    ref = hf(torch.tensor([tokens])).logits[0]
llm = LLM(model=model, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, max_model_len=64,
          logprobs_mode="raw_logits", max_logprobs=-1)
out, = llm.generate(TokensPrompt(prompt_token_ids=tokens),
                    SamplingParams(max_tokens=1, temperature=0, logprobs=-1, prompt_logprobs=-1, detokenize=False))
rows = out.prompt_logprobs[1:] + [out.outputs[0].logprobs[0]]
worst = 0.0
for pos, scores in enumerate(rows):
    got = torch.tensor([scores[t].logprob for t in range(ref.shape[1])])
    diff = (got - ref[pos]).abs().max().item()
    worst = max(worst, diff)
    print(f"position {pos}: vLLM max |logit| {got.abs().max().item():.3g}, transformers {ref[pos].abs().max().item():.3g}, "
          f"max difference {diff:.3g}")
sys.exit(1 if worst > 1e-3 else 0)
