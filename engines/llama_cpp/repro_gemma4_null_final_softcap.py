"""llama.cpp (llama-cpp-python 0.3.36; the same code in b11434): a Gemma 4 whose final_logit_softcapping is null
(transformers then applies no cap) is soft-capped at 30. The converter (conversion/gemma.py) writes
gemma4.final_logit_softcapping only when the config sets it, llama_hparams defaults f_final_logit_softcapping to
30.0f (src/llama-hparams.h) and gemma4.cpp applies it when non-zero, so every logit is 30·tanh(x/30): wrong from
position 0. Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --set families --only gemma4-keqv   # final_logit_softcapping null
    python engines/llama_cpp/convert.py /tmp/zoo/gemma4-keqv /tmp/gemma4.gguf           # llama.cpp's own converter classes
    python repro_gemma4_null_final_softcap.py /tmp/zoo/gemma4-keqv /tmp/gemma4.gguf     # needs torch + transformers>=5.13"""
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
capped = 30.0 * np.tanh(want / 30.0)  # what llama.cpp computes: the default cap of 30
llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval(tokens)
got = np.array(llm.scores[:len(tokens)])
err = np.abs(got - want).max(axis=1)
print(f"final_logit_softcapping {hf.config.final_logit_softcapping}; |llama.cpp - transformers| per position: "
      + " ".join(f"{e:.3g}" for e in err) + f"; against 30·tanh(transformers/30): {np.abs(got - capped).max():.3g}")
sys.exit(1 if err.max() > 0.05 else 0)
