# mlx-lm 0.32.2 / mlx 0.32.4: gemma3_text multiplies the embeddings by sqrt(hidden_size) rounded to
# bfloat16 whatever the model's dtype (Gemma3Model.__call__: mx.array(hidden_size**0.5, mx.bfloat16)).
# transformers (Gemma3TextScaledWordEmbedding) uses embed_scale in the weights' dtype: exact in float32.
# hidden 72: sqrt = 8.4853 -> bf16 8.5 (Gemma 3 1B: 1152 -> 33.94 vs 33.75). Not window-related; the
# zoo's hidden 64 (sqrt 8) is exact in bf16, so it does not show there.
import mlx.core as mx
import numpy as np
from mlx_lm.models import gemma3_text

H = 72
args = gemma3_text.ModelArgs.from_dict(dict(
    model_type="gemma3_text", hidden_size=H, num_hidden_layers=6, intermediate_size=128, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, vocab_size=256, query_pre_attn_scalar=16, sliding_window=4))
mx.random.seed(0)
m = gemma3_text.Model(args)  # untied lm_head: rescaling the input embeddings leaves the output head alone
x = mx.array([list(range(3, 23))])
got = np.array(m(x))
# float32 semantics: embed * sqrt(72). Pre-scale the table so that mlx-lm's "* 8.5" gives exactly that.
m.model.embed_tokens.weight = m.model.embed_tokens.weight * (H ** 0.5 / 8.5)
want = np.array(m(x))
print("scale used:", mx.array(H ** 0.5, mx.bfloat16).item(), "exact:", H ** 0.5)
d = float(np.abs(got - want).max())
print(f"max |logit difference| from the bf16-rounded embedding scale: {d:.3g}")
assert d < 1e-4, "gemma3_text rounds the embedding scale to bfloat16 in a float32 model"
