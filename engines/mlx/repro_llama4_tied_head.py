# mlx-lm 0.32.2 / mlx 0.32.4: models/llama4.py ignores tie_word_embeddings: LanguageModel always builds its own
# lm_head (llama4.py:265-267; TextArgs has no such field, sanitize adds nothing). transformers 5.24.0:
# Llama4TextConfig.tie_word_embeddings (default False); Llama4ForCausalLM ties lm_head.weight to
# model.embed_tokens.weight (_tied_weights_keys) when it is true, and saves no lm_head.weight. Such a checkpoint
# (in the adapter's Llama4ForConditionalGeneration layout, language_model.*) gives `Missing 1 parameters:
# language_model.lm_head.weight`. (llama4_text.py reads the field, but has no chunked attention nor MoE.)
import sys

from mlx.utils import tree_flatten
from mlx_lm.models import llama4

text = dict(model_type="llama4_text", attention_bias=False, attention_chunk_size=2, head_dim=16, hidden_size=64,
            interleave_moe_layer_step=1, intermediate_size=32, intermediate_size_mlp=128, max_position_embeddings=4096,
            num_attention_heads=4, num_experts_per_tok=1, num_hidden_layers=1, num_key_value_heads=2,
            num_local_experts=4, rms_norm_eps=1e-5, rope_scaling=None, rope_theta=10000.0, use_qk_norm=False,
            vocab_size=256, tie_word_embeddings=True)
model = llama4.Model(llama4.ModelArgs.from_dict({"model_type": "llama4", "text_config": text}))
weights = {k: v for k, v in tree_flatten(model.parameters()) if k != "language_model.lm_head.weight"}  # tied: not saved
try:
    model.load_weights(list(weights.items()))
    print("tie_word_embeddings true: loads")
    sys.exit(0)
except ValueError as e:
    print("tie_word_embeddings true:", " ".join(str(e).split()))
    sys.exit(1)
