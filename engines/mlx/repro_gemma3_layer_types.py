# mlx-lm 0.32.2 / mlx 0.32.4: gemma3_text ignores config.layer_types and derives the layers from
# sliding_window_pattern (default 6): layer i is full iff i % 6 == 5 (attention, rope base, cache type).
# (1) 4 layers [sliding, full, full, sliding] (a valid HF Gemma3TextConfig): IndexError on the first call.
# (2) 6 layers all "sliding_attention", window 3: layer 5 still runs full, so token 0 reaches position 15
#     although each position only sees the 6*(3-1) = 12 before it.
import mlx.core as mx
import numpy as np
from mlx_lm.models import gemma3_text
from mlx_lm.models.cache import make_prompt_cache

S, F = "sliding_attention", "full_attention"
base = dict(model_type="gemma3_text", hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256, query_pre_attn_scalar=16)
mx.random.seed(0)
m = gemma3_text.Model(gemma3_text.ModelArgs.from_dict({**base, "num_hidden_layers": 4, "sliding_window": 4,
                                                         "layer_types": [S, F, F, S]}))
try:
    m(mx.array([[5, 6, 7]]), cache=make_prompt_cache(m))
except IndexError as e:
    print("(1) [S, F, F, S]:", type(e).__name__, e)
m = gemma3_text.Model(gemma3_text.ModelArgs.from_dict({**base, "num_hidden_layers": 6, "sliding_window": 3,
                                                         "layer_types": [S] * 6}))
print("(2) cache:", [type(c).__name__ for c in make_prompt_cache(m)])
a = list(range(10, 26))
last = lambda t: np.array(m(mx.array([t]), cache=make_prompt_cache(m))[0, -1])  # noqa: E731
d = float(np.abs(last(a) - last([200] + a[1:])).max())
print(f"(2) max |logit change| at position 15 after changing token 0: {d:.3g} (expected 0)")
assert d < 1e-5, "gemma3_text layer_types not honoured"
