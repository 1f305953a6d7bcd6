"""transformers 5.x + torch 2.13 (CPU): with attn_implementation="flex_attention", the second decode step of a
cached generation fails to compile (inductor recompiles for a dynamic key length; its C++ says
'cur_kvSplitSize0' was not declared in this scope). 4.57 runs it. Exit 1 while the bug is there.
Only transformers and torch."""
import sys
import torch
from transformers import DynamicCache, MistralConfig, MistralForCausalLM, __version__

torch.manual_seed(0)
cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, sliding_window=4, attn_implementation="flex_attention")
model = MistralForCausalLM(cfg).eval()
cache, n = DynamicCache(config=cfg), 0
with torch.no_grad():
    for k in (4, 1, 1):  # a prompt of 4, then two decode steps, as generate runs them
        ids = torch.randint(0, 256, (1, k))
        try:
            model(ids, attention_mask=torch.ones(1, n + k, dtype=torch.long), position_ids=torch.arange(n, n + k)[None],
                  past_key_values=cache, use_cache=True)
        except Exception as e:
            msg = [line for line in str(e).splitlines() if "error" in line.lower()]
            print(f"transformers {__version__}, torch {torch.__version__}: step of {k} at position {n}: "
                  f"{type(e).__name__}: {(msg or [str(e)])[0][:200]}")
            sys.exit(1)
        n += k
print(f"transformers {__version__}: three flex_attention steps ran")
