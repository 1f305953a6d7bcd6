"""llama.cpp (llama-cpp-python 0.3.36): a Mistral checkpoint converts to the plain `llama` architecture, which has
no sliding window: llama_model_n_swa is 0 although config.json says sliding_window 5, and a token outside every
query's window still changes its logits. Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --only mistral-w5     # a tiny Mistral, every layer sliding (W=5)
    python engines/llama_cpp/convert.py /tmp/zoo/mistral-w5 /tmp/m5.gguf  # llama.cpp's own converter classes
    python repro_mistral_no_window.py /tmp/m5.gguf"""
import sys
import numpy as np
import llama_cpp
from llama_cpp import Llama


def last(tokens):
    llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
    llm.eval(tokens)
    return llm, np.array(llm.scores[len(tokens) - 1])


a = list(range(10, 26))  # 16 tokens, 3 layers of window 5: position 15 sees nothing before position 3
llm, la = last(a)
_, lb = last([200] + a[1:])  # change token 0 only
print(f"n_swa = {llama_cpp.llama_model_n_swa(llm.model)}; |logit change| at position 15 after changing token 0 = "
      f"{np.abs(la - lb).max():.3g} (a window of 5 on every layer: 0)")
sys.exit(1 if np.abs(la - lb).max() > 1e-4 else 0)
