#!/usr/bin/env python3
"""vLLM's Qwen3 drops the output projection's bias (standalone).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py /tmp/m --set vllm --only vllm-qwen3-0-0   # attention_bias true
    $VPY engines/vllm/repro_qwen3_o_proj_bias.py /tmp/m/vllm-qwen3-0-0              # exit 1

transformers' Qwen3Attention gives q/k/v_proj and o_proj a bias when attention_bias is true; vLLM's
Qwen3Attention passes attention_bias to its qkv_proj only and builds o_proj with bias=False, and its
weight loader skips the checkpoint's o_proj.bias without a word, so every layer's attention output lacks
it: wrong from position 0. Released Qwen3 checkpoints have attention_bias false. Exit 1 when vLLM is more
than 1e-3 away from transformers (it then agrees with transformers with the o_proj biases zeroed).
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
    for layer in hf.model.layers:
        layer.self_attn.o_proj.bias.zero_()
    no_bias = hf(torch.tensor([tokens])).logits[0]
llm = LLM(model=model, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, max_model_len=64,
          logprobs_mode="raw_logits", max_logprobs=-1)
out, = llm.generate(TokensPrompt(prompt_token_ids=tokens),
                    SamplingParams(max_tokens=1, temperature=0, logprobs=-1, prompt_logprobs=-1, detokenize=False))
rows = out.prompt_logprobs[1:] + [out.outputs[0].logprobs[0]]
got = torch.stack([torch.tensor([r[t].logprob for t in range(ref.shape[1])]) for r in rows])
print(f"attention_bias {hf.config.attention_bias}: max |vLLM - transformers| per position "
      + " ".join(f"{e:.3g}" for e in (got - ref).abs().max(dim=1).values.tolist())
      + f"; against transformers without the o_proj biases {(got - no_bias).abs().max().item():.3g}")
sys.exit(1 if (got - ref).abs().max().item() > 1e-3 else 0)
