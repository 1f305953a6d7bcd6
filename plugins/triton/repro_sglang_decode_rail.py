"""SGLang 0.5.23's Triton backend decodes a sliding-window layer over W - 1 keys (NOTES.md, "Finding").

    TRITON_INTERPRET=1 $(bash plugins/triton/setup_env.sh) plugins/triton/repro_sglang_decode_rail.py

A model's sliding_window_size is config.sliding_window - 1 (gemma2.py, gpt_oss.py); for a decode,
update_sliding_window_buffer lists min(seq_len, sliding_window_size) tokens, seq_len counting the token
being decoded; decode_attention_fwd attends exactly the listed tokens. Window W = 4, 6 tokens.
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch
import triton_env

W, seq_len, H, D = 4, 6, 1, 16
g = torch.Generator().manual_seed(0)
q, k, v = torch.randn(1, H, D, generator=g), torch.randn(seq_len, H, D, generator=g), torch.randn(seq_len, H, D, generator=g)
da = triton_env.sglang_decode_attention()


def decode(listed):  # the decode kernel over the last `listed` tokens, as the backend calls it
    o = torch.empty_like(q)
    indptr = torch.tensor([0, listed], dtype=torch.int32)
    indices = torch.arange(seq_len - listed, seq_len)
    da.decode_attention_fwd(q, k, v, o, indptr, indices, torch.empty(1, H, 8, D), torch.empty(1, H, 8),
                            torch.full((1,), 8, dtype=torch.int32), 8, D ** -0.5, 1.0, 1.0)
    return o


# transformers' sliding window: the query (position 5) sees keys 2, 3, 4, 5
scores = torch.einsum("hd,whd->hw", q[0], k[seq_len - W:]) * D ** -0.5
expected = torch.einsum("hw,whd->hd", scores.softmax(-1), v[seq_len - W:])[None]
backend = decode(min(seq_len, W - 1))  # update_sliding_window_buffer(sliding_window_size = W - 1)
print("rail of W - 1 keys (SGLang 0.5.23): max error", (backend - expected).abs().max().item())
print("rail of W keys:                      max error", (decode(min(seq_len, W)) - expected).abs().max().item())
