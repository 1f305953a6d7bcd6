# mlx-lm 0.32.2 / mlx 0.32.4: gemma4_text takes config.layer_types as written; transformers 5.24.0's
# Gemma4TextConfig.__post_init__ forces the last layer to "full_attention" (configuration_gemma4.py:195-199,
# with a warning). (1) [full, sliding] with num_kv_shared_layers 1 is [F, F] to transformers (layer 1 reuses
# layer 0's K/V); mlx-lm looks for an unshared sliding producer: KeyError 'sliding_attention' (gemma4_text.py:444).
# (2) [sliding, sliding] is [S, F] to transformers; mlx-lm builds layer 1 sliding, with head_dim instead of
# global_head_dim (q_proj (32, 64) instead of (64, 64)), a RotatingKVCache and the window.
import sys

from mlx_lm.models import gemma4_text
from mlx_lm.models.cache import make_prompt_cache

S, F = "sliding_attention", "full_attention"
base = dict(model_type="gemma4_text", hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
            head_dim=8, global_head_dim=16, num_key_value_heads=1, vocab_size=256, vocab_size_per_layer_input=256,
            hidden_size_per_layer_input=0, sliding_window=4, use_double_wide_mlp=False, num_kv_shared_layers=0)
bad = 0
try:
    gemma4_text.Model(gemma4_text.ModelArgs.from_dict({**base, "layer_types": [F, S], "num_kv_shared_layers": 1}))
    print("(1) [F, S], 1 shared layer: builds")
except KeyError as e:
    bad += 1
    print("(1) [F, S], 1 shared layer: KeyError", e)
m = gemma4_text.Model(gemma4_text.ModelArgs.from_dict({**base, "layer_types": [S, S]}))
last = m.model.layers[-1]
print(f"(2) [S, S]: last layer {last.layer_type}, q_proj {tuple(last.self_attn.q_proj.weight.shape)},",
      "cache", [type(c).__name__ for c in make_prompt_cache(m)], "(transformers: full_attention, (64, 64), KVCache)")
bad += last.layer_type != F
sys.exit(1 if bad else 0)
