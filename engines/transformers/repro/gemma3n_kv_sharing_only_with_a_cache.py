"""Gemma3n with KV sharing (num_kv_shared_layers > 0): in transformers 4.56.2 and 4.57.6 a shared layer reads its
source layer's keys and values only through a cache (Gemma3nTextAttention: `if self.is_kv_shared_layer and
past_key_values is not None`); without one (use_cache=False) it projects K/V of its own with its own k_proj and
v_proj. So the no-cache forward and the cached one (what generation runs) give different logits for the same
tokens. 5.13.1 on share in both (shared_kv_states), and the shared layers have no K/V projections. Exit 1 while the
two forwards differ. Only transformers and torch."""
import sys
import torch
from transformers import Gemma3nForCausalLM, Gemma3nTextConfig, __version__

torch.manual_seed(0)
cfg = Gemma3nTextConfig(vocab_size=256, vocab_size_per_layer_input=256, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=3,
                        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                        num_kv_shared_layers=2, hidden_size_per_layer_input=16, altup_num_inputs=2, laurel_rank=4,
                        activation_sparsity_pattern=[0.0] * 4, attn_implementation="eager")
model = Gemma3nForCausalLM(cfg).to(torch.float64).eval()
ids = torch.randint(0, 256, (1, 7))
with torch.no_grad():
    plain = model(ids, use_cache=False).logits
    cached = model(ids, use_cache=True).logits
diff = float((plain - cached).abs().max())
print(f"transformers {__version__}: no-cache vs cached forward of the same 7 tokens: max |logit difference| {diff:.3g}")
sys.exit(1 if diff > 1e-10 else 0)
