"""Mutant of examples/sdpa_kernel.py: one key too many on the left (must FAIL)."""
import torch
import kvconform


@kvconform.kernel(window="flash", layouts=["window", "mask", "key_padding_mask"])
def sdpa_window_plus_one(q, k, v, *, window_size, scale, attn_mask=None, key_padding_mask=None):
    i = torch.arange(q.shape[2])[:, None] + (k.shape[2] - q.shape[2])  # bottom-right causal
    j = torch.arange(k.shape[2])
    mask = (j <= i + window_size[1]) & ((j >= i - window_size[0] - 1) | (window_size[0] < 0))
    mask = mask if attn_mask is None else mask & attn_mask
    if key_padding_mask is not None:
        mask = mask & key_padding_mask[:, None, None, :]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
