# mlx-lm 0.32.2 / mlx 0.32.4: smollm3 ignores use_sliding_window. transformers 5.24.0's SmolLM3Config derives
# layer_types when absent: layer i slides iff use_sliding_window and sliding_window is set and layer i is NoPE
# (no_rope_layers[i] == 0) (configuration_smollm3.py __post_init__). mlx-lm's smollm3.ModelArgs inherits
# llama.ModelArgs.__post_init__ (llama.py:41-42): no layer_types -> every layer full; smollm3.Model has no
# make_cache either (KVCache everywhere). Check: 3 layers, no_rope_layers [0, 0, 1], W=3 (HF: [S, S, F]) against
# the same weights with those layer_types spelt out (which mlx-lm's llama.py honours): expected identical.
import sys

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.models import smollm3
from mlx_lm.models.cache import make_prompt_cache

S, F = "sliding_attention", "full_attention"
cfg = dict(model_type="smollm3", hidden_size=64, num_hidden_layers=3, intermediate_size=128, num_attention_heads=4,
           num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256, rope_theta=10000.0,
           use_sliding_window=True, sliding_window=3, no_rope_layers=[0, 0, 1])
args = smollm3.ModelArgs.from_dict(cfg)
print("layer_types:", args.layer_types, "(transformers:", [S, S, F], ")")
mx.random.seed(0)
model = smollm3.Model(args)
spelt = smollm3.Model(smollm3.ModelArgs.from_dict({**cfg, "layer_types": [S, S, F]}))
spelt.load_weights(list(tree_flatten(model.parameters())))
print("cache:", [type(c).__name__ for c in make_prompt_cache(model)])
tokens = mx.array([list(range(10, 26))])
run = lambda m: np.array(m(tokens, cache=make_prompt_cache(m))[0])  # noqa: E731
d = float(np.abs(run(model) - run(spelt)).max())
print(f"max |logit difference| over 16 positions, derived vs spelt-out layer_types: {d:.3g} (expected 0)")
sys.exit(0 if d < 1e-5 else 1)  # 1 while use_sliding_window is not applied
