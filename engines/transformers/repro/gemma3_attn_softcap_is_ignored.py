"""transformers (4.56 to 5.25, CPU): Gemma3TextConfig stores attn_logit_softcapping and Gemma3Attention keeps it as
self.attn_logit_softcapping, but never hands it to the attention function, so a gemma3 config's attention soft-cap
changes nothing (gemma2's, the same code otherwise, bends the scores). Exit 1 while the cap is ignored.
Only transformers and torch."""
import sys
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, __version__


def cap_effect(config_class, model_class):
    torch.manual_seed(0)
    cfg = config_class(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, sliding_window=4, final_logit_softcapping=None,
                       layer_types=["sliding_attention", "full_attention"], attn_logit_softcapping=None,
                       attn_implementation="eager")
    model = model_class(cfg).double().eval()
    ids = torch.arange(12)[None]
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(20)  # scores far above a cap of 1.0
        plain = model(ids).logits
        model.config.attn_logit_softcapping = 1.0
        for layer in model.model.layers:
            layer.self_attn.attn_logit_softcapping = 1.0
        return (model(ids).logits - plain).abs().max().item()


g2, g3 = cap_effect(Gemma2Config, Gemma2ForCausalLM), cap_effect(Gemma3TextConfig, Gemma3ForCausalLM)
print(f"transformers {__version__}: attn_logit_softcapping 1.0 moves the logits by {g2:.3g} on gemma2, {g3:.3g} on gemma3")
sys.exit(1 if g2 > 0 and g3 == 0 else 0)
