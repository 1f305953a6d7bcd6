"""llama.cpp (llama-cpp-python 0.3.36): a rollback behind what a non-full SWA cache still holds answers from a
cache that lost the window. llama-cpp-python's own prefix reuse does it: a second prompt that shares only a
short prefix with a long first one. Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo --only gemma2-w4     # a tiny Gemma2, sliding window 4
    python engines/llama_cpp/convert.py /tmp/zoo/gemma2-w4 /tmp/g2.gguf  # llama.cpp's own converter classes
    python repro_swa_rollback.py /tmp/g2.gguf"""
import sys
import numpy as np
from llama_cpp import Llama

long_prompt = [1 + (7 * i + 3) % 250 for i in range(260)]
short_prompt = long_prompt[:5] + [42]  # shares its first 5 tokens with the long prompt


def logits_after(swa_full, first=None):
    llm = Llama(model_path=sys.argv[1], n_ctx=512, n_batch=512, n_ubatch=3, swa_full=swa_full, n_threads=1,
                logits_all=True, verbose=False)
    for prompt in ([first] if first else []) + [short_prompt]:
        next(llm.generate(prompt, top_k=1))  # generate() reuses the cached prefix: rolls back to 5 tokens
    return np.array(llm.scores[len(short_prompt) - 1])


for swa_full in (True, False):
    err = np.abs(logits_after(swa_full, long_prompt) - logits_after(swa_full)).max()
    print(f"swa_full={swa_full}: |logits after prefix reuse - fresh context| = {err:.3g}")
sys.exit(1 if err > 1e-3 else 0)
