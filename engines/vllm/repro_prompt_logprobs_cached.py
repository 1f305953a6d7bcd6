#!/usr/bin/env python3
"""vLLM's prompt_logprobs at prefix-cache hits are unwritten memory, not scores (standalone, vLLM only).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py /tmp/m --set vllm --only vllm-mistral-0-0
    $VPY engines/vllm/repro_prompt_logprobs_cached.py /tmp/m/vllm-mistral-0-0    # exit 1: reproduced

SamplingParams(prompt_logprobs=k) skips the prefix-cache read by default; with
skip_reading_prefix_cache=False (a public field) the request reads the cache, and the prompt_logprobs
list still has one entry per prompt token, but the entries of the cached positions were never
computed (the runner allocates the whole prompt's rows with torch.empty and writes only the computed
ones), with nothing to tell them apart. Prints the largest difference between those entries and the
same positions' scores from the first request; exit 1 when they differ (the bug), 0 when they match.
"""
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; else vLLM wants 92 % of the RAM
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

llm = LLM(model=sys.argv[1], skip_tokenizer_init=True, dtype="float32", enforce_eager=True, block_size=16,
          enable_prefix_caching=True, max_model_len=256, logprobs_mode="raw_logits", max_logprobs=-1)
tokens = [(7 * i + 3) % 250 + 3 for i in range(40)]
first, = llm.generate(TokensPrompt(prompt_token_ids=tokens), SamplingParams(max_tokens=1, prompt_logprobs=-1, detokenize=False))
params = SamplingParams(max_tokens=1, prompt_logprobs=-1, detokenize=False, skip_reading_prefix_cache=False)
second, = llm.generate(TokensPrompt(prompt_token_ids=tokens + [5, 6]), params)
cached = second.num_cached_tokens
print(f"second request: {len(second.prompt_logprobs)} prompt_logprobs entries for {len(tokens) + 2} tokens, "
      f"{cached} served from the prefix cache")
worst = 0.0
for pos in range(1, len(tokens)):
    a, b = first.prompt_logprobs[pos], second.prompt_logprobs[pos]
    diff = max(abs(a[t].logprob - b[t].logprob) if t in b else float("inf") for t in a)
    hit = pos - 1 < cached  # entry pos holds the scores at position pos - 1
    worst = max(worst, diff) if hit else worst
    if pos in (1, cached, cached + 1):
        print(f"position {pos - 1} ({'cached' if hit else 'computed'}): max |difference| {diff:.3g}")
print(f"cached positions: largest difference {worst:.3g}")
sys.exit(1 if worst > 1e-5 else 0)
