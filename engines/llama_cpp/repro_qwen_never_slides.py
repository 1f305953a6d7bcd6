"""llama.cpp (llama-cpp-python 0.3.36; the same code in b11434): Qwen2 and Qwen3 never slide. The converter
classes (conversion/qwen.py) write no sliding_window for Qwen2ForCausalLM / Qwen3ForCausalLM (use_sliding_window
and max_window_layers are never read), and src/models/qwen2.cpp / qwen3.cpp have no SWA, so the layers that
transformers slides (use_sliding_window true: the layers from max_window_layers up) attend to the whole sequence.
Released Qwen2.5 / Qwen3 ship use_sliding_window false; a fine-tune that sets it is wrong past its window.
Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --set families --only qwen2-mwl2   # 4 layers, 2 and 3 slide, W = 4
    python engines/llama_cpp/convert.py /tmp/zoo/qwen2-mwl2 /tmp/qwen2.gguf             # llama.cpp's own converter classes
    python repro_qwen_never_slides.py /tmp/zoo/qwen2-mwl2 /tmp/qwen2.gguf              # needs torch + transformers"""
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
    # what llama.cpp runs: the same weights with every layer full
    no_window = AutoModelForCausalLM.from_pretrained(sys.argv[1], layer_types=["full_attention"] * hf.config.num_hidden_layers,
                                                     **load).eval()
    unwindowed = no_window(torch.tensor([tokens])).logits[0].numpy()
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"sliding_window {hf.config.sliding_window}, layer_types {hf.config.layer_types}; |llama.cpp - transformers| "
      "per position: " + " ".join(f"{e:.3g}" for e in err) + f"; against every layer full: {np.abs(got - unwindowed).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
