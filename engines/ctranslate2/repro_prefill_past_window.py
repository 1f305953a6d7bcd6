"""CTranslate2 4.8.5: a prompt longer than the sliding window, forwarded at once
(generate_batch(include_prompt_in_result=False), how a prompt is prefilled), gives wrong logits;
forcing the same prompt through the decoding loop one token at a time (include_prompt_in_result=True)
gives transformers' logits. And Generator.forward_batch, the call that returns every position's
logits, refuses such a prompt ("buffer to copy is of size N but current storage size is W").

Standalone: writes the zoo's mistral-w5 (3 layers, every layer sliding, window 5) with
engines/models/make_models.py, converts it as ct2-transformers-converter does, and compares the
next-token logits after each prompt length with transformers' float64 forward. Run with the engine's venv:

    $(bash engines/setup_env.sh ctranslate2) engines/ctranslate2/repro_prefill_past_window.py

Exit 1 while the prefill is wrong past the window, 0 once fixed."""
import os
import subprocess
import sys
import tempfile

import ctranslate2
import numpy as np
import torch
import transformers
from ctranslate2.converters import TransformersConverter

HERE = os.path.dirname(os.path.abspath(__file__))
W = 5
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "make_models.py"), tmp, "--only", "mistral-w5"],
                   check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(tmp, "mistral-w5")
    TransformersConverter(model).convert(os.path.join(tmp, "ct2"), force=True)
    gen = ctranslate2.Generator(os.path.join(tmp, "ct2"), device="cpu", compute_type="float32")
    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float64, attn_implementation="eager")
    ids = [34, 208, 61, 17, 120, 179, 5, 77, 140, 9, 250, 33]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    print(f"ctranslate2 {ctranslate2.__version__}, transformers {transformers.__version__}, sliding_window {W}, all layers sliding")
    print("prompt length | prefill (include_prompt_in_result=False) | decoding loop (True): max |logit error| of the next token")
    worst_prefill = worst_loop = 0.0
    for n in range(2, len(ids) + 1):
        tokens = [f"<{t}>" for t in ids[:n]]
        pre = np.asarray(gen.generate_batch([tokens], max_length=1, include_prompt_in_result=False,
                                            return_logits_vocab=True)[0].logits[0][0])
        loop = np.asarray(gen.generate_batch([tokens], max_length=n, include_prompt_in_result=True,
                                             return_logits_vocab=True)[0].logits[0][n - 1])
        e_pre, e_loop = np.abs(pre - ref[n - 1]).max(), np.abs(loop - ref[n - 1]).max()
        worst_prefill, worst_loop = max(worst_prefill, e_pre), max(worst_loop, e_loop)
        print(f"{n:13d} | {e_pre:40.3g} | {e_loop:.3g}")
    try:
        gen.forward_batch([ids])
        print("forward_batch on 12 tokens: returned")
    except ValueError as e:
        print(f"forward_batch on {len(ids)} tokens (window {W}): ValueError: {e}")
bad = worst_prefill > 1e-3 and worst_loop < 1e-3
print("BUG PRESENT: the prefill is wrong past the window" if bad else "fixed")
sys.exit(1 if bad else 0)
