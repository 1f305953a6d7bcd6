"""llama.cpp (llama-cpp-python 0.3.36): a Gemma 2 checkpoint with tie_word_embeddings false (its own lm_head.weight)
runs with token_embd as its output head. convert_hf_to_gguf's Gemma2Model.filter_tensors (conversion/gemma.py) skips
lm_head.weight ("not used in llama.cpp") and src/models/gemma2.cpp reads the head as token_embd, TENSOR_DUPLICATED
(gguf-py lists no OUTPUT tensor for GEMMA2): the logits are wrong from position 0, and equal what transformers
computes with the head tied. Exit 1 while the bug is there.
    python3 engines/models/make_models.py --draw gemma2:20250917:1 \\
        | python3 engines/models/make_models.py /tmp/zoo --recipe -     # 1 sliding layer, tie_word_embeddings false
    python engines/llama_cpp/convert.py /tmp/zoo/draw-gemma2-20250917-1 /tmp/g2u.gguf   # llama.cpp's own converter classes
    python repro_gemma2_untied_head.py /tmp/zoo/draw-gemma2-20250917-1 /tmp/g2u.gguf    # needs torch + transformers"""
import sys

import numpy as np
import torch
from llama_cpp import Llama
from transformers import AutoModelForCausalLM

token = 5
hf = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, attn_implementation="eager").eval()
with torch.no_grad():
    want = hf(torch.tensor([[token]])).logits[0, 0].numpy()
    hf.lm_head.weight.copy_(hf.model.embed_tokens.weight)  # the same model with the head tied
    tied = hf(torch.tensor([[token]])).logits[0, 0].numpy()

llm = Llama(model_path=sys.argv[2], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval([token])
got = np.array(llm.scores[0])
err, err_tied = np.abs(got - want).max(), np.abs(got - tied).max()
print(f"position 0: |llama.cpp - transformers| = {err:.3g}; |llama.cpp - transformers with lm_head := embed_tokens| = "
      f"{err_tied:.3g}")
sys.exit(1 if err > 0.05 else 0)
