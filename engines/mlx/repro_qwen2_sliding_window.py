# mlx-lm 0.32.2 / mlx 0.32.4: qwen2.py and qwen3.py have no sliding window at all: neither ModelArgs has
# use_sliding_window, sliding_window, max_window_layers or layer_types (qwen2.py:16-30, qwen3.py:15-30), every
# Attention is full and make_cache gives KVCache everywhere. transformers 5.24.0: Qwen2Config / Qwen3Config keep
# sliding_window only if use_sliding_window, derive layer_types (layer i slides iff sliding_window is set and
# i >= max_window_layers) unless given, and Qwen2Attention / Qwen3Attention slide the layers layer_types marks.
# Check without a reference: 2 layers, both sliding (W=4), position 15 sees only positions >= 15 - 2*(W-1) = 9
# (HF: key j visible from query i iff i - W < j <= i), so changing token 0 must leave its logits unchanged.
import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models import qwen2, qwen3
from mlx_lm.models.cache import make_prompt_cache

cfg = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
           head_dim=16, rms_norm_eps=1e-6, vocab_size=256, max_position_embeddings=4096, rope_theta=10000.0,
           tie_word_embeddings=True, use_sliding_window=True, sliding_window=4, max_window_layers=0,
           layer_types=["sliding_attention"] * 2)
a = list(range(10, 26))
b = [200] + a[1:]
bad = 0
for mod in (qwen2, qwen3):
    mx.random.seed(0)
    args = mod.ModelArgs.from_dict({**cfg, "model_type": mod.__name__.split(".")[-1]})
    model = mod.Model(args)
    last = lambda t: np.array(model(mx.array([t]), cache=make_prompt_cache(model))[0, -1])
    d = float(np.abs(last(a) - last(b)).max())
    kept = [k for k in ("use_sliding_window", "sliding_window", "max_window_layers", "layer_types") if hasattr(args, k)]
    print(f"{mod.__name__.split('.')[-1]}: fields kept {kept}, caches {[type(c).__name__ for c in make_prompt_cache(model)]},",
          f"max |logit change| at position 15 after changing token 0: {d:.3g} (window 4: expected 0)")
    bad += d >= 1e-5
sys.exit(1 if bad else 0)
