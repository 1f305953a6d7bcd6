# mlx-lm 0.32.2 / mlx 0.32.4: gpt_oss loads neither a tied checkpoint nor one in transformers' own expert layout.
# (1) tie_word_embeddings is ignored (no ModelArgs field): Model always builds lm_head (gpt_oss.py:215), so a
#     checkpoint saved with tie_word_embeddings true (GptOssConfig field; HF ties lm_head to embed_tokens and
#     save_pretrained omits lm_head.weight) fails: "Missing 1 parameters: lm_head.weight".
# (2) sanitize (gpt_oss.py:220-252) only knows the OpenAI release's MXFP4 `*_blocks`/`*_scales` (out x in);
#     transformers' GptOssExperts parameters `experts.gate_up_proj` (E, hidden, 2I) and `experts.down_proj`
#     (E, I, hidden) come out as `experts.gate_proj` (no `.weight`): "Received ... parameters not in model".
import sys

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import gpt_oss

E, H, I = 4, 64, 32
cfg = dict(model_type="gpt_oss", num_hidden_layers=2, num_local_experts=E, num_experts_per_tok=1, vocab_size=256,
           hidden_size=H, intermediate_size=I, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
           sliding_window=4, layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=True)
m = gpt_oss.Model(gpt_oss.ModelArgs.from_dict(cfg))
own = dict(tree_flatten(m.parameters()))
bad = 0
try:  # (1) the tied checkpoint: everything but lm_head.weight, in mlx-lm's own names
    m.load_weights([(k, v) for k, v in own.items() if k != "lm_head.weight"], strict=True)
    print("(1) tied checkpoint loads")
except ValueError as e:
    bad += 1
    print("(1) tie_word_embeddings=True:", " ".join(str(e).split()))
hf = {k: v for k, v in own.items() if ".experts." not in k}  # (2) the experts as transformers saves them
for p in ("model.layers.0.mlp.experts.", "model.layers.1.mlp.experts."):
    hf.update({p + "gate_up_proj": mx.zeros((E, H, 2 * I)), p + "gate_up_proj_bias": mx.zeros((E, 2 * I)),
               p + "down_proj": mx.zeros((E, I, H)), p + "down_proj_bias": mx.zeros((E, H))})
try:
    m.load_weights(list(m.sanitize(hf).items()), strict=True)
    print("(2) transformers-layout experts load")
except ValueError as e:
    bad += 1
    print("(2) experts.gate_up_proj (E, hidden, 2I):", " ".join(str(e).split()))
sys.exit(1 if bad else 0)
