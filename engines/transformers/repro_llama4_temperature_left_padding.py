#!/usr/bin/env python3
"""Llama 4's attention temperature tuning ignores left padding: a left-padded prompt in a batch (as
generate runs prompts of different lengths) gets other logits than the same prompt alone.

    python3 engines/models/make_models.py /tmp/m --set families --only llama4-c4 >/dev/null
    golden/.venv-5.25.0/bin/python engines/transformers/repro_llama4_temperature_left_padding.py /tmp/m/llama4-c4

Llama4TextAttention scales the NoPE layers' queries by log1p(floor((p + 1) / floor_scale)) * attn_scale + 1
with p = arange(seq_len) + past_seen_tokens (5.x; 4.x: cache_position): the slot index, which counts a
row's pad tokens, not the row's position (its position_ids, which rope uses). So the padded row's real
tokens get the scales of positions P further on. With attn_temperature_tuning off, the padded and
unpadded logits agree (float32 rounding); on, they part by ~0.04 in every pinned release (4.56.2 to
5.25.0). floor_scale 4 here (released Llama 4: 8192, where prompts past 8192 tokens see it).
Exit 1 when the deviation reproduces, 0 when padded and unpadded agree within 1e-4 (fixed upstream).
"""
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def max_deviation(model_dir, tuning, pad=3):
    cfg = AutoConfig.from_pretrained(model_dir)
    cfg.attn_temperature_tuning = tuning
    model = AutoModelForCausalLM.from_pretrained(model_dir, config=cfg, attn_implementation="eager").to(torch.float64).eval()
    tokens = [5, 17, 33, 8, 99, 41, 7, 12, 60]
    ids = torch.tensor([[0] * pad + tokens, [9] * pad + tokens])  # row 1: a longer prompt that forces the padding
    mask = torch.tensor([[0] * pad + [1] * len(tokens), [1] * (pad + len(tokens))])
    with torch.no_grad():
        padded = model(ids, attention_mask=mask, use_cache=False).logits[0, pad:]
        alone = model(torch.tensor([tokens]), use_cache=False).logits[0]
    return float((padded - alone).abs().max())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    on, off = max_deviation(sys.argv[1], True), max_deviation(sys.argv[1], False)
    print(f"transformers {transformers.__version__}: max |left-padded row - same prompt alone| = {on:.3g} with "
          f"attn_temperature_tuning, {off:.3g} without")
    return 1 if on > 1e-4 and off <= 1e-4 else 0


if __name__ == "__main__":
    sys.exit(main())
