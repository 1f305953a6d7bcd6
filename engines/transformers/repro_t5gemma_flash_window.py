#!/usr/bin/env python3
"""Standalone reproduction: T5Gemma's encoder reaches one key further under sdpa and eager than under
flash attention, from transformers 5.0 (5.13.1 to 5.25.0 pinned here); 4.56.2 and 4.57.6 agree. T5Gemma2's
text encoder (5.13.1 on) looks (w + 1) // 2 - 1 keys back and w // 2 ahead under sdpa and eager (its own
sliding_window_mask_function(is_causal=False)), and w - 1 either side under flash attention.

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
The same checkpoint gives different encoder outputs by attention implementation. Exit 1 where the
reaches differ in either family, 0 where they agree. Needs torch and transformers only; no flash-attention kernel (the
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


def encoder(family):
    """A one-layer sliding T5Gemma (or T5Gemma2 text) encoder under eager; None where the release lacks it."""
    small = dict(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=8, sliding_window=WINDOW, layer_types=["sliding_attention"])
    if family == "t5gemma":
        cfg = configuration_t5gemma.T5GemmaModuleConfig(**small)
        cfg.is_decoder = False
        build = modeling_t5gemma.T5GemmaEncoder
    else:
        try:
            from transformers.models.t5gemma2 import configuration_t5gemma2, modeling_t5gemma2
        except ImportError:
            return None
        cfg = configuration_t5gemma2.T5Gemma2TextConfig(**small)
        build = lambda c: modeling_t5gemma2.T5Gemma2TextEncoder(c, eoi_token_index=31)
    cfg.dropout_rate, cfg._attn_implementation = 0.0, "eager"
    return build(cfg).eval()


def reaches(family):
    """(keys reached before, after the query by the eager mask; the flash-attention window_size) or None."""
    enc = encoder(family)
    if enc is None:
        return None
    attn = enc.layers[0].self_attn
    seen = {}
    attn.register_forward_pre_hook(lambda m, a, kw: seen.update(mask=kw["attention_mask"]), with_kwargs=True)
    with torch.no_grad():
        enc(input_ids=torch.arange(1, LENGTH + 1).unsqueeze(0), attention_mask=torch.ones(1, LENGTH, dtype=torch.long))
    allowed = seen["mask"][0, 0] == 0 if seen["mask"].dtype != torch.bool else seen["mask"][0, 0]
    pos = torch.arange(LENGTH)
    dist = pos.view(-1, 1) - pos.view(1, -1)  # q - kv
    before, after = int(dist[allowed].max()), int((-dist)[allowed].max())
    params = inspect.signature(fa._process_flash_attention_kwargs).parameters
    args = dict(query_length=LENGTH, key_length=LENGTH, is_causal=False, sliding_window=attn.sliding_window)
    if "supports_mapping" in params:
        args["supports_mapping"] = collections.defaultdict(lambda: True)  # a kernel with every feature, window_size included
    window_size = fa._process_flash_attention_kwargs(**args).get("window_size") or (LENGTH - 1, LENGTH - 1)
    return before, after, attn.sliding_window, tuple(window_size)


def main():
    torch.manual_seed(0)
    differ = False
    for family in ("t5gemma", "t5gemma2"):
        got = reaches(family)
        if got is None:
            print(f"transformers {transformers.__version__}: no {family}")
            continue
        before, after, module_window, window_size = got
        print(f"transformers {transformers.__version__}: {family} encoder, config sliding_window {WINDOW}, module "
              f"sliding_window {module_window}: eager mask reaches {before} keys back and {after} ahead; flash attention "
              f"window_size {window_size}")
        if (before, after) != window_size:
            print(f"  {family}: the eager/sdpa encoder and the flash-attention encoder attend to different keys")
            differ = True
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
