# mlx-lm 0.32.2 / mlx 0.32.4: mellum.py reads the expert count only as `num_experts` (a required ModelArgs field,
# mellum.py:22) and layer_types without a default (mellum.py:33). transformers (5.13.1 on) spells the count
# `num_local_experts` (MellumConfig.attribute_map maps num_experts to it, so save_pretrained writes
# num_local_experts) and defaults layer_types to all full: a config as transformers writes it does not load.
# With the count renamed to num_experts and layer_types spelt out, the same model builds (and, on the families
# set's draws without attention_bias or dense layers, agrees with transformers: docs/findings.md, finding 53).
import sys

from mlx_lm.models import mellum

cfg = dict(model_type="mellum", hidden_size=64, num_hidden_layers=2, intermediate_size=96, moe_intermediate_size=32,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256,
           max_position_embeddings=4096, num_experts_per_tok=2, norm_topk_prob=True, sliding_window=3,
           tie_word_embeddings=False, num_local_experts=4,  # as MellumConfig(num_experts=4).to_dict() writes it
           layer_types=["sliding_attention", "full_attention"],
           rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
try:
    mellum.Model(mellum.ModelArgs.from_dict(cfg))
    print("num_local_experts: builds")
    sys.exit(0)
except TypeError as e:
    print("num_local_experts:", e)
cfg["num_experts"] = cfg.pop("num_local_experts")
mellum.Model(mellum.ModelArgs.from_dict(cfg))
print("num_experts: builds")
sys.exit(1)
