"""llama.cpp (llama-cpp-python 0.3.36): a q8_0 K cache with flash attention off, on a model whose head_dim (16)
is not a multiple of q8_0's block size (32), is accepted and computes garbage; with flash attention on the same
context is refused. Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --only gemma2-w4     # a tiny Gemma2, head_dim 16
    python engines/llama_cpp/convert.py /tmp/zoo/gemma2-w4 /tmp/g2.gguf  # llama.cpp's own converter classes
    python repro_q8_0_k_cache.py /tmp/g2.gguf"""
import sys
import numpy as np
from llama_cpp import GGML_TYPE_F16, GGML_TYPE_Q8_0, Llama


def logits(type_k):
    llm = Llama(model_path=sys.argv[1], n_ctx=256, type_k=type_k, type_v=GGML_TYPE_F16, flash_attn=False,
                n_threads=1, logits_all=True, verbose=False)
    llm.eval([3, 7])
    return np.array(llm.scores[:2])


err = np.abs(logits(GGML_TYPE_Q8_0) - logits(GGML_TYPE_F16)).max()
print(f"|q8_0 K cache - f16 K cache| over two positions = {err:.3g}")
sys.exit(1 if err > 0.5 else 0)
