# mlx-lm 0.32.2 / mlx 0.32.4: gemma2 and cohere2 ignore tie_word_embeddings: their Model always ties the head
# (gemma2.py:198 / cohere2.py:197 `embed_tokens.as_linear`), has no lm_head and no sanitize, so a checkpoint with
# tie_word_embeddings false (valid: Gemma2Config / Cohere2Config field, honoured by *ForCausalLM.lm_head)
# fails to load: "Received 1 parameters not in model: lm_head.weight".
import sys

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import cohere2, gemma2

cfgs = {
    gemma2: dict(model_type="gemma2", hidden_size=64, num_hidden_layers=1, intermediate_size=128, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=256, query_pre_attn_scalar=16,
                 tie_word_embeddings=False),
    cohere2: dict(model_type="cohere2", hidden_size=64, num_hidden_layers=1, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, layer_norm_eps=1e-5, vocab_size=256, sliding_window=4,
                  tie_word_embeddings=False),
}
bad = 0
for mod, cfg in cfgs.items():
    m = mod.Model(mod.ModelArgs.from_dict(cfg))
    weights = dict(tree_flatten(m.parameters()))
    weights["lm_head.weight"] = mx.zeros((256, 64))  # what an untied HF checkpoint carries
    if hasattr(m, "sanitize"):
        weights = m.sanitize(weights)
    try:
        m.load_weights(list(weights.items()), strict=True)
        print(f"{cfg['model_type']}: untied checkpoint loads")
    except ValueError as e:
        bad += 1
        print(f"{cfg['model_type']}: tie_word_embeddings=False:", " ".join(str(e).split()))
sys.exit(1 if bad else 0)
