"""Gemma2 with attn_implementation="sdpa" silently drops attn_logit_softcapping (transformers 4.56-5.13;
5.24 refuses sdpa for Gemma2 at load). Exit 1 while the bug is there. Only transformers and torch."""
import sys
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM, __version__

torch.manual_seed(0)
cfg = Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, sliding_window=4, query_pre_attn_scalar=16,
                   attn_logit_softcapping=2.0, final_logit_softcapping=None, attn_implementation="eager")
model = Gemma2ForCausalLM(cfg).eval()
with torch.no_grad():
    for p in model.parameters():
        p.normal_(0, 0.5)  # scores of several units: the cap at 2.0 bites
ids = torch.randint(0, 256, (1, 12))


def logits(impl, cap):
    model.config._attn_implementation = impl
    for layer in model.model.layers:
        layer.self_attn.attn_logit_softcapping = cap
    with torch.no_grad():
        return model(ids, use_cache=False).logits


eager = logits("eager", 2.0)
sdpa = logits("sdpa", 2.0)
uncapped = logits("eager", None)
print(f"transformers {__version__}: |sdpa - eager| = {(sdpa - eager).abs().max():.3g}, "
      f"|sdpa - eager without the cap| = {(sdpa - uncapped).abs().max():.3g}")
sys.exit(1 if (sdpa - eager).abs().max() > 1e-4 else 0)
