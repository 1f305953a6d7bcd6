"""llama.cpp (llama-cpp-python 0.3.36): SmolLM3's NoPE layers are hard-coded as every 4th layer
(src/models/smollm3.cpp: n_no_rope_layer_step = 4); config.json's no_rope_layer_interval / no_rope_layers have no GGUF
key and the vendored converter (SmolLM3Model, conversion/llama.py) writes neither. A checkpoint with interval 3 (layer 2
NoPE) runs with RoPE on layer 2 and without it on layer 3: wrong from position 1. Exit 1 while the bug is there.
    python3 engines/models/make_models.py --draw smollm3:20250917:0 \\
        | python3 engines/models/make_models.py /tmp/zoo --recipe -     # 5 layers, no_rope_layer_interval 3, no window
    python engines/llama_cpp/convert.py /tmp/zoo/draw-smollm3-20250917-0 /tmp/s3.gguf   # llama.cpp's own converter classes
    python repro_smollm3_nope_interval.py /tmp/zoo/draw-smollm3-20250917-0 /tmp/s3.gguf  # needs torch + transformers"""
import sys

import numpy as np
import torch
from llama_cpp import Llama
from transformers import AutoModelForCausalLM

tokens = [5, 17, 42, 99]
hf = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, attn_implementation="eager").eval()
with torch.no_grad():
    want = hf(torch.tensor([tokens])).logits[0].numpy()
    for i, layer in enumerate(hf.model.layers):  # what llama.cpp runs: NoPE on every 4th layer
        layer.self_attn.use_rope = int((i + 1) % 4 != 0)
    step4 = hf(torch.tensor([tokens])).logits[0].numpy()
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"no_rope_layers {hf.config.no_rope_layers}; |llama.cpp - transformers| per position: "
      + " ".join(f"{e:.3g}" for e in err) + f"; against transformers with NoPE on every 4th layer: {np.abs(got - step4).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
