# mlx-lm 0.32.2 / mlx 0.32.4: phi3.py reads no sliding_window (ModelArgs has no such field and the mask
# is create_attention_mask's plain causal one), so a Phi-3 checkpoint with a window (Phi-3-mini-4k:
# 2047) attends to the whole sequence on every layer, where transformers' Phi3 slides every layer.
import mlx.core as mx
import numpy as np
from mlx_lm.models import phi3
from mlx_lm.models.cache import make_prompt_cache

cfg = dict(model_type="phi3", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
           num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=256,
           sliding_window=4, tie_word_embeddings=False)
mx.random.seed(0)
model = phi3.Model(phi3.ModelArgs.from_dict(cfg))
print("reads sliding_window:", hasattr(model.args, "sliding_window"))


def last(tokens):
    return np.array(model(mx.array([tokens]), cache=make_prompt_cache(model))[0, -1])


a = list(range(10, 26))
b = [200] + a[1:]
d = float(np.abs(last(a) - last(b)).max())
# window 4 on both layers: position 15 sees positions >= 15 - 2*3 = 9, so token 0 cannot matter
print(f"max |logit change| at position 15 after changing token 0: {d:.3g} (window 4: expected 0)")
assert d < 1e-5, "phi3 sliding window not applied"
