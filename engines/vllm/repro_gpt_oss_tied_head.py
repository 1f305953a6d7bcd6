#!/usr/bin/env python3
"""vLLM's gpt-oss ignores tie_word_embeddings: a tied checkpoint's lm_head is never loaded (standalone).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py /tmp/m --set vllm --only vllm-gptoss-0-0 --only vllm-gptoss-0-1
    $VPY engines/vllm/repro_gpt_oss_tied_head.py /tmp/m/vllm-gptoss-0-0    # tied: exit 1, vLLM's logits 0
    $VPY engines/vllm/repro_gpt_oss_tied_head.py /tmp/m/vllm-gptoss-0-1    # untied: exit 0, within 1e-5

The same float32 checkpoint (an unquantized GptOssForCausalLM: q/k/v/o biases, sinks, a 4-expert MoE
with biases, sliding/full layers) through transformers' own forward and through vLLM's offline LLM
(raw logits of every prompt position via prompt_logprobs and the sampled position's logprobs). With
"tie_word_embeddings": true the checkpoint has no lm_head.weight (transformers ties it to
embed_tokens); vLLM's GptOssForCausalLM builds its own ParallelLMHead and never ties it, and loads
without a missing-weight error, so the head stays as allocated (logits 0 here, ~1e24 in another
process). Exit 1 when vLLM is more than 1e-3 away from transformers.
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
