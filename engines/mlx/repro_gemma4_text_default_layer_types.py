# mlx-lm 0.32.2 / mlx 0.32.4: gemma4_text derives a missing layer_types from its own sliding_window_pattern field,
# default 5 ([S, S, S, S, F] repeated, gemma4_text.py:38, :64-70), and does not force the last layer full.
# transformers 5.24.0's Gemma4TextConfig.__post_init__ (configuration_gemma4.py:188-199): pattern 6 hard-coded
# (layer i slides iff (i + 1) % 6), then the last layer forced to full_attention. (1) 1 layer, attention_k_eq_v:
# transformers [F] (k_eq_v: no v_proj, global_head_dim); mlx-lm [S], with a v_proj the checkpoint lacks:
# `Missing 1 parameters: model.layers.0.self_attn.v_proj.weight`. (2) 6 layers: transformers
# [S, S, S, S, S, F], mlx-lm [S, S, S, S, F, S].
import sys

from mlx_lm.models import gemma4_text

base = dict(model_type="gemma4_text", hidden_size=64, intermediate_size=128, num_attention_heads=1, head_dim=8,
            global_head_dim=16, num_key_value_heads=1, num_global_key_value_heads=1, vocab_size=256,
            vocab_size_per_layer_input=256, hidden_size_per_layer_input=0, sliding_window=1,
            use_double_wide_mlp=False, num_kv_shared_layers=0, attention_k_eq_v=True)
S, F = "S", "F"
short = lambda m: [S if l.layer_type == "sliding_attention" else F for l in m.model.layers]
bad = 0
for n, want in ((1, [F]), (6, [S] * 5 + [F])):
    m = gemma4_text.Model(gemma4_text.ModelArgs.from_dict({**base, "num_hidden_layers": n}))
    got = short(m)
    extra = f", layer 0 v_proj {'built' if hasattr(m.model.layers[0].self_attn, 'v_proj') else 'absent'}" if n == 1 else ""
    print(f"({1 if n == 1 else 2}) {n} layer(s), no layer_types: mlx-lm {got}, transformers {want}{extra}")
    bad += got != want
sys.exit(1 if bad else 0)
