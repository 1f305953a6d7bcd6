# mlx-lm 0.32.2 / mlx 0.32.4: gemma2 ignores sliding_window and layer_types; every layer is full attention.
# Check without a reference: with every layer sliding (window W=4, 2 layers), position 15 only sees
# positions >= 15 - 2*(W-1) = 9 (HF: key j visible from query i iff i - W < j <= i), so token 0 cannot matter.
import mlx.core as mx
import numpy as np
from mlx_lm.models import gemma2
from mlx_lm.models.cache import make_prompt_cache

cfg = dict(model_type="gemma2", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256,
           query_pre_attn_scalar=16, sliding_window=4, layer_types=["sliding_attention"] * 2)
args = gemma2.ModelArgs.from_dict(cfg)
print("fields kept:", sorted(k for k in cfg if hasattr(args, k) and k in ("sliding_window", "layer_types")))
mx.random.seed(0)
model = gemma2.Model(args)
print("cache:", [type(c).__name__ for c in make_prompt_cache(model)])


def last(tokens):
    return np.array(model(mx.array([tokens]), cache=make_prompt_cache(model))[0, -1])


a = list(range(10, 26))
b = [200] + a[1:]
d = float(np.abs(last(a) - last(b)).max())
print(f"max |logit change| at position 15 after changing token 0: {d:.3g} (window 4: expected 0)")
assert d < 1e-5, "gemma2 sliding window not applied"
