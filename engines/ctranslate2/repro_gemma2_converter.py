"""CTranslate2 4.8.5: its Gemma2 converter (converters/transformers.py, Gemma2Loader) writes no
final_logit_softcapping, no attn_logit_softcapping, no query_pre_attn_scalar and no sliding window:
the converted model runs every Gemma 2 layer as full attention with plain 1/sqrt(head_dim) scores and
uncapped logits.

Standalone: writes the zoo's gemma2-w4 (final_logit_softcapping 8, attn_logit_softcapping 10,
query_pre_attn_scalar 32, head_dim 16, window 4) with engines/models/make_models.py, converts it as
ct2-transformers-converter does, and compares the logits of a 12-token prompt with transformers'
float64 forward. Run with the engine's venv:

    $(bash engines/setup_env.sh ctranslate2) engines/ctranslate2/repro_gemma2_converter.py

Exit 1 while the bug is present (the logits pass the softcap of 8, and already position 0, which
attends only to itself, is off by more than 1), 0 once fixed."""
import json
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
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "make_models.py"), tmp, "--only", "gemma2-w4"],
                   check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(tmp, "gemma2-w4")
    cfg = json.load(open(os.path.join(model, "config.json")))
    TransformersConverter(model).convert(os.path.join(tmp, "ct2"), force=True)
    spec = json.load(open(os.path.join(tmp, "ct2", "config.json")))
    ids = [(i * 7 + 3) % cfg["vocab_size"] for i in range(12)]
    gen = ctranslate2.Generator(os.path.join(tmp, "ct2"), device="cpu", compute_type="float32")
    got = np.array([np.asarray(x) for x in gen.generate_batch([[f"<{t}>" for t in ids]], max_length=len(ids),
                                                              include_prompt_in_result=True,
                                                              return_logits_vocab=True)[0].logits[0][:len(ids)]])
    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float64, attn_implementation="eager")
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
err = np.abs(got - ref).max(axis=1)
print(f"ctranslate2 {ctranslate2.__version__}, transformers {transformers.__version__}")
print("config:", {k: cfg[k] for k in ("final_logit_softcapping", "attn_logit_softcapping", "query_pre_attn_scalar",
                                       "sliding_window", "layer_types")})
print("converted config.json keys:", sorted(spec))
print(f"max |logit| CTranslate2 {np.abs(got).max():.3g}, transformers {np.abs(ref).max():.3g} "
      f"(final_logit_softcapping {cfg['final_logit_softcapping']} caps it)")
print("max |logit error| per position:", " ".join(f"{e:.2g}" for e in err))
bad = np.abs(got).max() > cfg["final_logit_softcapping"] or err[0] > 1
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
