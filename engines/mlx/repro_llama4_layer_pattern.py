# mlx-lm 0.32.2 / mlx 0.32.4: models/llama4.py takes Llama 4's layer pattern from the layer index,
# not from the config: layer i is chunked with rope iff (i + 1) % 4 != 0 (Attention.use_rope, the
# mask choice, make_cache), and MoE iff i % interleave_moe_layer_step == step - 1. Llama4TextConfig's
# no_rope_layers, layer_types and moe_layers are never read, and a config that gives moe_layers
# without interleave_moe_layer_step (transformers defaults the step to 1) does not load.
# (1) no_rope_layers [0, 1, 1] (layer 0 NoPE and full, as transformers runs it): mlx-lm gives layer 0
#     rope and a chunked cache. (2) moe_layers [2] alone: TypeError at ModelArgs.
from mlx_lm.models import llama4
from mlx_lm.models.cache import make_prompt_cache

text = dict(model_type="llama4_text", attention_bias=False, attention_chunk_size=3, head_dim=16, hidden_size=64,
            intermediate_size=32, intermediate_size_mlp=128, max_position_embeddings=4096, num_attention_heads=4,
            num_experts_per_tok=1, num_hidden_layers=3, num_key_value_heads=2, num_local_experts=4,
            rms_norm_eps=1e-5, rope_scaling=None, rope_theta=10000.0, use_qk_norm=True, vocab_size=256,
            no_rope_layers=[0, 1, 1], layer_types=["full_attention", "chunked_attention", "chunked_attention"])
m = llama4.Model(llama4.ModelArgs.from_dict({"model_type": "llama4", "text_config": {**text, "interleave_moe_layer_step": 1}}))
rope = [bool(l.self_attn.use_rope) for l in m.layers]
caches = [type(c).__name__ for c in make_prompt_cache(m)]
print("(1) config: layer 0 NoPE + full; mlx-lm use_rope", rope, "caches", caches)
try:
    llama4.ModelArgs.from_dict({"model_type": "llama4", "text_config": {**text, "moe_layers": [2]}})
    print("(2) moe_layers alone: loaded")
except TypeError as e:
    print("(2) moe_layers alone:", type(e).__name__, e)
assert not rope[0] and caches[0] == "KVCache", "llama4 no_rope_layers / layer_types not honoured"
