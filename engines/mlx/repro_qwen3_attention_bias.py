# mlx-lm 0.32.2 / mlx 0.32.4: qwen3 ignores config.attention_bias: q/k/v/o_proj are always bias=False (qwen3.py:55-58;
# no ModelArgs field; qwen3_moe.py:53-56 the same). transformers 5.24.0: Qwen3Config.attention_bias (default False),
# and Qwen3Attention builds all four projections with bias=config.attention_bias. A checkpoint with
# attention_bias true carries q/k/v/o_proj.bias: `Received 4 parameters not in model` (one per projection per layer).
import sys

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import qwen3

cfg = dict(model_type="qwen3", hidden_size=64, num_hidden_layers=1, intermediate_size=128, num_attention_heads=4,
           num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256, max_position_embeddings=4096,
           rope_theta=10000.0, tie_word_embeddings=True, attention_bias=True)
model = qwen3.Model(qwen3.ModelArgs.from_dict(cfg))
weights = dict(tree_flatten(model.parameters()))
for p, n in (("q", 64), ("k", 32), ("v", 32), ("o", 64)):  # what transformers' state dict has on top
    weights[f"model.layers.0.self_attn.{p}_proj.bias"] = mx.zeros((n,))
try:
    model.load_weights(list(weights.items()))
    print("attention_bias true: loads")
    sys.exit(0)
except ValueError as e:
    print("attention_bias true:", " ".join(str(e).split()))
    sys.exit(1)
