#!/usr/bin/env python3
"""vLLM's Llama 4 differs from transformers once attention temperature tuning acts (standalone).

    VPY=$(bash engines/setup_env.sh vllm)
    python3 engines/models/make_models.py /tmp/m --set families --only llama4-top1 >/dev/null
    python3 -c "import json; c = json.load(open('/tmp/m/llama4-top1/config.json')); c.update(head_dim=32, \
        attention_chunk_size=64); print(json.dumps({'name': 'l4', 'layout': 'llama4_text', 'config': c}))" \
        | python3 engines/models/make_models.py /tmp/m --recipe -      # 4 layers, top-1 MoE, floor_scale 4
    $VPY engines/vllm/repro_llama4_temperature.py /tmp/m/l4          # floor_scale 4: exit 1, from position 3
    $VPY engines/vllm/repro_llama4_temperature.py /tmp/m/l4 8192     # the temperature never acts: exit 0

(vLLM's CPU attention wants head_dim 32 or more, and its chunked attention a chunk of whole 32-token blocks.)
Llama 4's NoPE layers scale their queries by log(floor((position + 1) / floor_scale) + 1) * attn_scale + 1
(attn_temperature_tuning). transformers and vLLM's Llama4Attention._get_attn_scale write the same formula, yet the
logits part from the first position where the scale leaves 1 (position floor_scale - 1), and agree when floor_scale
is out of reach: the cause is not isolated. Released Llama 4 uses floor_scale 8192, so it acts past 8191 tokens.
Exit 1 when vLLM is more than 1e-3 away from transformers.
"""
import os
import sys
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; else vLLM wants 92 % of the RAM
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

src, tokens = sys.argv[1], [17, 101, 5, 230, 64, 9, 33, 71]
hf = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager",
                                          floor_scale=int(sys.argv[2]) if len(sys.argv) > 2 else 4)
model = tempfile.mkdtemp()
hf.save_pretrained(model)  # the same weights, the floor_scale asked for
with torch.no_grad():
    ref = hf(torch.tensor([tokens])).logits[0]
llm = LLM(model=model, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, max_model_len=256, block_size=32,
          logprobs_mode="raw_logits", max_logprobs=-1)
out, = llm.generate(TokensPrompt(prompt_token_ids=tokens),
                    SamplingParams(max_tokens=1, temperature=0, logprobs=-1, prompt_logprobs=-1, detokenize=False))
rows = out.prompt_logprobs[1:] + [out.outputs[0].logprobs[0]]
got = torch.stack([torch.tensor([r[t].logprob for t in range(ref.shape[1])]) for r in rows])
err = (got - ref).abs().max(dim=1).values
print(f"floor_scale {hf.config.floor_scale}: max |vLLM - transformers| per position " + " ".join(f"{e:.3g}" for e in err.tolist()))
sys.exit(1 if err.max().item() > 1e-3 else 0)
