"""llama.cpp (llama-cpp-python 0.3.36): EXAONE 4 slides only when the model has 64 layers. load_arch_hparams
(src/models/exaone4.cpp:4-12) sets swa_type STANDARD, n_swa 4096 and the 3:1 pattern for n_layer == 64 (the 32B)
and nothing otherwise, so the sliding_window the converter writes (general's exaone4.attention.sliding_window) is
read into n_swa and never used: every layer attends to the whole sequence (and, with swa_type NONE, ropes, which is
what a sliding layer does in transformers). Wrong from the first position past the window. Exit 1 while the bug is
there.
    python3 engines/models/make_models.py --draw exaone4:20250917:7 | python3 -c "import json,sys; r=json.load(sys.stdin); \\
        r['config'].update(num_attention_heads=4, num_key_value_heads=4); r['folder'] = r['name'] = 'exaone4-w5'; \\
        print(json.dumps(r))" | python3 engines/models/make_models.py /tmp/zoo --recipe -   # 1 sliding layer, W = 5
    python engines/llama_cpp/convert.py /tmp/zoo/exaone4-w5 /tmp/ex4.gguf     # llama.cpp's own converter classes
    python repro_exaone4_window_ignored.py /tmp/zoo/exaone4-w5 /tmp/ex4.gguf  # needs torch + transformers
(4 heads of 16 = hidden 64: the draw's own 2 heads hit the head_dim load refusal of NOTES.md finding 6.)"""
import sys

import numpy as np
import torch
from llama_cpp import Llama
from transformers import AutoModelForCausalLM

tokens = [5, 17, 42, 99, 7, 3, 61, 200, 11]
hf = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, attn_implementation="eager").eval()
window = hf.config.sliding_window
with torch.no_grad():
    want = hf(torch.tensor([tokens])).logits[0].numpy()
    # what llama.cpp runs: the same layers without a window
    unwindowed = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, attn_implementation="eager",
                                                      sliding_window=4 * len(tokens)).eval()
    no_window = unwindowed(torch.tensor([tokens])).logits[0].numpy()
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"{hf.config.num_hidden_layers} layer(s), sliding_window {window}, layer_types {hf.config.layer_types}; "
      "|llama.cpp - transformers| per position: " + " ".join(f"{e:.3g}" for e in err)
      + f"; against transformers without the window: {np.abs(got - no_window).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
