# mlx-lm 0.32.2 / mlx 0.32.4: Olmo3Model.__init__ looks up one layer of each kind for its masks,
# layer_types.index("sliding_attention") and .index("full_attention") (olmo3.py:178-179), so a model whose layers
# are all sliding (or all full) does not build: `ValueError: 'full_attention' is not in list`. transformers 5.24.0
# accepts any layer_types (Olmo3Model builds one mask per type present), and its own default,
# sliding iff (i + 1) % 4 != 0 (configuration_olmo3.py:92-95, mlx-lm's too), is all sliding for 1-3 layers.
import sys

from mlx_lm.models import olmo3

base = dict(model_type="olmo3", hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
            head_dim=32, rms_norm_eps=1e-6, vocab_size=256, max_position_embeddings=4096, sliding_window=1,
            rope_theta=10000.0)
bad = 0
for name, extra in (("1 layer, default layer_types (transformers: [sliding])", {"num_hidden_layers": 1}),
                    ("2 layers, [full, full]", {"num_hidden_layers": 2, "layer_types": ["full_attention"] * 2})):
    try:
        olmo3.Model(olmo3.ModelArgs.from_dict({**base, **extra}))
        print(f"{name}: builds")
    except ValueError as e:
        bad += 1
        print(f"{name}: ValueError: {e}")
sys.exit(1 if bad else 0)
