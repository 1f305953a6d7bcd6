"""transformers 4.56: a StaticCache's sliding layer, once full, takes a multi-token update wrong: the logits of
the new tokens differ from a no-cache forward (Gemma), or the forward raises (Mistral). Fixed in 4.57.
Exit 1 while the bug is there. Only transformers and torch."""
import sys
import torch
from transformers import MistralConfig, MistralForCausalLM, StaticCache, __version__

torch.manual_seed(0)
cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, sliding_window=4, attn_implementation="eager")
model = MistralForCausalLM(cfg).eval()
ids = torch.randint(0, 256, (1, 10))
with torch.no_grad():
    want = model(ids, use_cache=False).logits[:, 5:]
    cache = StaticCache(config=cfg, max_batch_size=1, max_cache_len=16)
    model(ids[:, :5], past_key_values=cache, cache_position=torch.arange(5), use_cache=True)  # the window is full
    try:  # five more tokens in one call, as a chunked prefill or a speculative step does
        got = model(ids[:, 5:], past_key_values=cache, cache_position=torch.arange(5, 10), use_cache=True).logits
    except Exception as e:
        print(f"transformers {__version__}: the multi-token update raised {type(e).__name__}: {e}")
        sys.exit(1)
err = (got - want).abs().max().item()
print(f"transformers {__version__}: max |cached - no cache| over the 5 new positions = {err:.3g}")
sys.exit(1 if err > 1e-4 else 0)
