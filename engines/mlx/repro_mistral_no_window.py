# mlx-lm 0.32.2 / mlx 0.32.4: "mistral" maps to models/llama.py, which only slides the layers that
# config.layer_types marks "sliding_attention". HF Mistral configs have sliding_window but no layer_types
# (every layer slides), so mlx-lm runs them as full attention; and an all-sliding layer_types crashes.
import mlx.core as mx
import numpy as np
from mlx_lm.models import llama
from mlx_lm.models.cache import make_prompt_cache

cfg = dict(model_type="mistral", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256,
           sliding_window=4, tie_word_embeddings=False)
mx.random.seed(0)
model = llama.Model(llama.ModelArgs.from_dict(cfg))
print("cache:", [type(c).__name__ for c in make_prompt_cache(model)])


def last(tokens):
    return np.array(model(mx.array([tokens]), cache=make_prompt_cache(model))[0, -1])


a = list(range(10, 26))
b = [200] + a[1:]
d = float(np.abs(last(a) - last(b)).max())
# window 4 on both layers: position 15 sees positions >= 15 - 2*3 = 9, so token 0 cannot matter
print(f"max |logit change| at position 15 after changing token 0: {d:.3g} (window 4: expected 0)")
try:
    llama.Model(llama.ModelArgs.from_dict({**cfg, "layer_types": ["sliding_attention"] * 2}))
except ValueError as e:
    print("with layer_types all sliding:", type(e).__name__, e)
assert d < 1e-5, "mistral sliding window not applied"
