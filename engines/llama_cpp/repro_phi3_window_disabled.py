"""llama.cpp (llama-cpp-python 0.3.36): Phi-3's sliding window is switched off on load. load_arch_hparams
(src/models/phi3.cpp:13-24) reads phi3.attention.sliding_window, warns "Phi SWA is currently disabled - results
might be suboptimal for some models" (llama.cpp pull request 13676) and sets swa_type NONE, n_swa 0: every layer
attends to the whole sequence, so a Phi-3 whose sliding_window is shorter than the context (Phi-3-mini-4k's is
2047) is wrong from the first position past the window. Exit 1 while the bug is there.
    python3 engines/models/make_models.py --draw phi3:20250917:0 | python3 -c "import json,sys; r=json.load(sys.stdin); \\
        r['config']['sliding_window'] = 4; r['folder'] = r['name'] = 'phi3-w4'; print(json.dumps(r))" \\
        | python3 engines/models/make_models.py /tmp/zoo --recipe -      # 3 layers, W = 4 on every layer
    python engines/llama_cpp/convert.py /tmp/zoo/phi3-w4 /tmp/phi3.gguf    # llama.cpp's own converter classes
    python repro_phi3_window_disabled.py /tmp/zoo/phi3-w4 /tmp/phi3.gguf  # needs torch + transformers"""
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
                                                      sliding_window=None).eval()
    no_window = unwindowed(torch.tensor([tokens])).logits[0].numpy()
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"{hf.config.num_hidden_layers} layer(s), sliding_window {window}; |llama.cpp - transformers| per position: "
      + " ".join(f"{e:.3g}" for e in err) + f"; against transformers without the window: {np.abs(got - no_window).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
