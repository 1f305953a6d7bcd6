#!/usr/bin/env python3
"""Standalone reproduction: T5Gemma's encoder reaches one key further under sdpa and eager than under
flash attention, from transformers 5.0 (5.13.1 to 5.25.0 pinned here); 4.56.2 and 4.57.6 agree.

    golden/.venv-X/bin/python engines/transformers/repro_t5gemma_flash_window.py

A tiny T5Gemma encoder (sliding_window 3, 8 tokens) runs one forward under eager; a pre-hook on its
sliding self-attention reads the mask it is given, and the reach of that mask is the largest
abs(q - kv) it lets through. The same module's `sliding_window` attribute is what its flash-attention
path passes on: transformers' _process_flash_attention_kwargs turns it into the kernel's
window_size = (sliding_window - 1, sliding_window - 1), a reach of sliding_window - 1. From 5.0 the
encoders' masks come from masking_utils.create_bidirectional_sliding_window_mask
(abs(q - kv) <= sliding_window): ModernBERT, UltraBERT, EmbeddingGemma2 and the privacy filter give
their modules sliding_window + 1 ("flash attention sets inclusive boundaries") and agree; T5Gemma keeps
config.sliding_window, so its flash path reaches sliding_window - 1 and its sdpa/eager path
sliding_window. In 4.x T5Gemma's own overlay was (q - w < kv < q + w): a reach of w - 1 on every path.
The same checkpoint gives different encoder outputs by attention implementation. Exit 1 where the two
reaches differ, 0 where they agree. Needs torch and transformers only; no flash-attention kernel (the
window it would be given is read from transformers' own kwargs function).
"""
import collections
import inspect
import sys

import torch
import transformers
from transformers import modeling_flash_attention_utils as fa
from transformers.models.t5gemma import configuration_t5gemma, modeling_t5gemma

WINDOW, LENGTH = 3, 8


def main():
    torch.manual_seed(0)
    cfg = configuration_t5gemma.T5GemmaModuleConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                    num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                                    sliding_window=WINDOW, layer_types=["sliding_attention"])
    cfg.is_decoder, cfg.dropout_rate, cfg._attn_implementation = False, 0.0, "eager"
    enc = modeling_t5gemma.T5GemmaEncoder(cfg).eval()
    attn = enc.layers[0].self_attn
    seen = {}
    attn.register_forward_pre_hook(lambda m, a, kw: seen.update(mask=kw["attention_mask"]), with_kwargs=True)
    with torch.no_grad():
        enc(input_ids=torch.arange(1, LENGTH + 1).unsqueeze(0), attention_mask=torch.ones(1, LENGTH, dtype=torch.long))
    allowed = seen["mask"][0, 0] == 0 if seen["mask"].dtype != torch.bool else seen["mask"][0, 0]
    pos = torch.arange(LENGTH)
    mask_reach = int((pos.view(-1, 1) - pos.view(1, -1)).abs()[allowed].max())
    params = inspect.signature(fa._process_flash_attention_kwargs).parameters
    supports = collections.defaultdict(lambda: True)  # a kernel that supports every feature, window_size included
    args = dict(query_length=LENGTH, key_length=LENGTH, is_causal=False, sliding_window=attn.sliding_window)
    if "supports_mapping" in params:
        args["supports_mapping"] = supports
    window_size = fa._process_flash_attention_kwargs(**args).get("window_size")
    flash_reach = window_size[0] if window_size else LENGTH - 1
    print(f"transformers {transformers.__version__}: T5Gemma encoder, config sliding_window {WINDOW}, module sliding_window "
          f"{attn.sliding_window}: eager mask reach abs(q - kv) <= {mask_reach}; flash attention window_size {window_size} "
          f"(reach {flash_reach})")
    if mask_reach != flash_reach:
        print("the eager/sdpa encoder and the flash-attention encoder attend to different keys")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
