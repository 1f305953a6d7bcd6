# mlx-lm 0.32.2 / mlx 0.32.4: cohere2 ignores layer_types. Its layer i slides iff (i + 1) % sliding_window_pattern
# != 0 (cohere2.py:59, the pattern defaulting to 4), and its caches follow the same rule (cohere2.py:167-206).
# transformers 5.24.0's Cohere2Config takes layer_types when given (the pattern only derives a missing one), and
# Cohere2Attention slides, with rope, exactly the layers layer_types marks sliding. A 4-layer config with
# layer_types [S, S, F, S] (what the model campaign drew): mlx-lm builds [S, S, S, F].
import sys

from mlx_lm.models import cohere2
from mlx_lm.models.cache import make_prompt_cache

S, F = "sliding_attention", "full_attention"
want = [S, S, F, S]
cfg = dict(model_type="cohere2", hidden_size=64, num_hidden_layers=4, intermediate_size=128, num_attention_heads=4,
           num_key_value_heads=4, head_dim=16, layer_norm_eps=1e-5, vocab_size=256, rope_theta=10000.0,
           sliding_window=2, layer_types=want, logit_scale=0.25)
model = cohere2.Model(cohere2.ModelArgs.from_dict(cfg))
got = [S if layer.self_attn.use_sliding_window else F for layer in model.model.layers]
print("layer_types:", want)
print("mlx-lm builds:", got, "caches:", [type(c).__name__ for c in make_prompt_cache(model)])
sys.exit(0 if got == want else 1)
