#!/usr/bin/env python3
"""vLLM's Gemma 2 cannot load an untied lm_head (standalone).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py --draw gemma2:20250917:0 --head-dims 32,64 \\
        | python3 engines/models/make_models.py /tmp/m --recipe -       # untied (tie_word_embeddings false)
    $VPY engines/vllm/repro_gemma2_untied_head.py /tmp/m/draw-gemma2-20250917-0-hd32x64   # exit 1: ValueError

transformers' Gemma2ForCausalLM unties its head when tie_word_embeddings is false (the checkpoint then carries
lm_head.weight). vLLM's Gemma2ForCausalLM always reads the logits through embed_tokens: it has no lm_head
module, so loading such a checkpoint raises "There is no module or parameter named 'lm_head' in
Gemma2ForCausalLM". Released Gemma 2 checkpoints are tied. Exit 1 when vLLM does not load it or is more than
1e-3 away from transformers.
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
print(f"tie_word_embeddings {hf.config.tie_word_embeddings}")
try:
    llm = LLM(model=model, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, max_model_len=64,
              logprobs_mode="raw_logits", max_logprobs=-1)
except ValueError as e:
    print(f"vLLM does not load it: {str(e)[:160]}")
    sys.exit(1)
out, = llm.generate(TokensPrompt(prompt_token_ids=tokens),
                    SamplingParams(max_tokens=1, temperature=0, logprobs=-1, prompt_logprobs=-1, detokenize=False))
rows = out.prompt_logprobs[1:] + [out.outputs[0].logprobs[0]]
worst = max((torch.tensor([r[t].logprob for t in range(ref.shape[1])]) - ref[p]).abs().max().item() for p, r in enumerate(rows))
print(f"max |vLLM - transformers| {worst:.3g}")
sys.exit(1 if worst > 1e-3 else 0)
