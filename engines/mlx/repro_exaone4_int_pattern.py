# mlx-lm 0.32.2 / mlx 0.32.4: exaone4 reads sliding_window_pattern only as an "L"/"G" string ("LLLG") and ignores
# layer_types. transformers 5.24.0's Exaone4Config types it `str | int | None`, defaults it to the int 4, sets it
# to 0 when sliding_window is None, and derives the layers from layer_types (given) or `(i + 1) % pattern`.
# (1) sliding_window_pattern 4 (int, the HF default): TypeError `len(pattern)` (exaone4.py:149).
# (2) sliding_window null with layer_types all full (pattern 4 kept in the file): the same TypeError; HF runs
#     every layer full with rope.
# (3) no sliding_window_pattern at all: ModelArgs has no default for it (TypeError), HF uses 4.
import sys

from mlx_lm.models import exaone4

base = dict(model_type="exaone4", hidden_size=64, num_hidden_layers=4, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256, max_position_embeddings=4096,
            rope_theta=10000.0, tie_word_embeddings=True, rope_scaling=None, sliding_window=3)
F = "full_attention"
cases = {"(1) sliding_window_pattern=4": {"sliding_window_pattern": 4},
         "(2) sliding_window=None, layer_types all full": {"sliding_window": None, "sliding_window_pattern": 4,
                                                           "layer_types": [F] * 4},
         "(3) no sliding_window_pattern": {}}
bad = 0
for name, over in cases.items():
    try:
        exaone4.Model(exaone4.ModelArgs.from_dict({**base, **over}))
        print(name, "builds")
    except TypeError as e:
        bad += 1
        print(name, "TypeError:", e)
m = exaone4.Model(exaone4.ModelArgs.from_dict({**base, "sliding_window_pattern": "LLLG"}))
print('("LLLG" builds:', [l.self_attn.is_local for l in m.layers], ")")
sys.exit(1 if bad else 0)
