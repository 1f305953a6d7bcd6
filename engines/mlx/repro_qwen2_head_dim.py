# mlx-lm 0.32.2 / mlx 0.32.4: qwen2 and phi3 ignore config.head_dim and use hidden_size // num_attention_heads
# (qwen2.py:42, phi3.py:58; neither ModelArgs has the field). transformers 5.24.0 reads it:
# Qwen2Attention / Phi3Attention `getattr(config, "head_dim", hidden_size // num_attention_heads)`.
# hidden 64, 2 heads, head_dim 16: HF q_proj is (32, 64), mlx-lm builds (64, 64) and the checkpoint does not load.
import sys

from mlx_lm.models import phi3, qwen2

base = dict(hidden_size=64, num_hidden_layers=1, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
            head_dim=16, rms_norm_eps=1e-6, vocab_size=256)
bad = 0
q = qwen2.Model(qwen2.ModelArgs.from_dict({**base, "model_type": "qwen2"})).model.layers[0].self_attn.q_proj.weight.shape
print(f"qwen2 q_proj {tuple(q)}, transformers (32, 64)")
bad += tuple(q) != (32, 64)
p = phi3.Model(phi3.ModelArgs.from_dict({**base, "model_type": "phi3", "partial_rotary_factor": 0.5}))
qkv = p.model.layers[0].self_attn.qkv_proj.weight.shape
print(f"phi3 qkv_proj {tuple(qkv)}, transformers ({(2 + 2 * 1) * 16}, 64)")
bad += tuple(qkv) != (64, 64)
sys.exit(1 if bad else 0)
