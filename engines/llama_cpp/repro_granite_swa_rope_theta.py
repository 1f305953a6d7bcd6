"""llama.cpp (llama-cpp-python 0.3.36; the same code in b11434): granite_swa ignores layer_rope_theta. The
converter (conversion/granite.py:115-121) writes the per-layer rope pattern from `no_rope_layers`, a key
transformers' GraniteSwaConfig does not have, and never reads `layer_rope_theta` (per layer: a base, or 0 for a NoPE
layer), so every layer ropes, with the one rope_theta: a NoPE layer and a layer of another base are another model's.
Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --set families --only graniteswa-w4   # layer_rope_theta [1e4, 0, 1e4, 5e5]
    python engines/llama_cpp/convert.py /tmp/zoo/graniteswa-w4 /tmp/granite.gguf          # llama.cpp's own converter classes
    python repro_granite_swa_rope_theta.py /tmp/zoo/graniteswa-w4 /tmp/granite.gguf       # needs torch + transformers>=5.24"""
import sys

import numpy as np
import torch
from llama_cpp import Llama
from transformers import AutoModelForCausalLM

tokens = [5, 17, 42, 99, 7, 3, 61, 200, 11]
load = dict(dtype=torch.float32, attn_implementation="eager")
hf = AutoModelForCausalLM.from_pretrained(sys.argv[1], **load).eval()
with torch.no_grad():
    want = hf(torch.tensor([tokens])).logits[0].numpy()
    # what llama.cpp runs: every layer ropes with rope_theta
    theta = hf.config.rope_parameters["rope_theta"]
    one_base = AutoModelForCausalLM.from_pretrained(sys.argv[1], layer_rope_theta=[theta] * hf.config.num_hidden_layers,
                                                    **load).eval()
    same_base = one_base(torch.tensor([tokens])).logits[0].numpy()
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"layer_rope_theta {hf.config.layer_rope_theta}; |llama.cpp - transformers| per position: "
      + " ".join(f"{e:.3g}" for e in err) + f"; against every layer at rope_theta: {np.abs(got - same_base).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
