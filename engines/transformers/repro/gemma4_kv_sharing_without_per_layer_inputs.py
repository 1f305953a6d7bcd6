"""Gemma4 with KV sharing (num_kv_shared_layers > 0) and no per-layer input embeddings
(hidden_size_per_layer_input 0) fails on every multi-token forward in transformers 5.23.0 and
5.24.0: Gemma4TextModel._maybe_slice_kv_shared_inputs (new in 5.23.0) slices per_layer_inputs, which
is None, and raises TypeError (5.13.1 runs it; single-token decodes run). Fixed in 5.25.0, which
guards the slice (`if per_layer_inputs is not None`): it runs there. Exit 1 while the bug is there.
Only transformers and torch."""
import sys
import torch
from transformers import Gemma4ForCausalLM, Gemma4TextConfig, __version__

torch.manual_seed(0)
cfg = Gemma4TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, global_head_dim=32, sliding_window=3,
                       layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                       num_kv_shared_layers=2, hidden_size_per_layer_input=0, attn_implementation="eager")
model = Gemma4ForCausalLM(cfg).eval()
ids = torch.randint(0, 256, (1, 7))
with torch.no_grad():
    one = model(ids[:, :1], use_cache=False).logits  # a single token runs
    try:
        model(ids, use_cache=False)
    except TypeError as e:
        print(f"transformers {__version__}: a 7-token forward fails: TypeError: {e}")
        sys.exit(1)
    hidden = model(ids, use_cache=False, output_hidden_states=True).logits  # the slicing is skipped here
print(f"transformers {__version__}: the 7-token forward runs (first position vs a 1-token forward: "
      f"{(hidden[:, :1] - one).abs().max():.3g})")
