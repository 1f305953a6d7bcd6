"""SGLang's Triton decode attention (decode_attention.decode_attention_fwd) as a kvconform kernel.

    PY=$(bash plugins/triton/setup_env.sh)
    kvconform run --backend-cmd "$PY plugins/triton/sglang_decode_adapter.py" [kvconform run args]

The decode kernel has no window of its own: it attends every token its kv_indices list, and SGLang's
Triton backend (srt/layers/attention/triton_backend.py) makes the window by what it lists, the rail
update_sliding_window_buffer fills: the last min(seq_len, sliding_window_size) tokens of each sequence
(seq_len counting the token being decoded, whose K/V are in the pool already), with the model's
sliding_window_size = W - 1 (gemma2, gpt_oss: config.sliding_window - 1). A full layer lists the whole
sequence. Each query is one decode row: a call with n queries (a prefill) is n decode rows, row i being
the sequence up to query i, so every step of a case is judged. K/V live in a token pool (page size 1)
at shuffled slots, with spare slots of finite garbage; the split-KV launch is the backend's static one
(num_kv_splits = max_kv_splits = 8, its default), attn_logits / attn_lse in float32, k_scale = v_scale =
1.0, logit_cap 0, and the case's per-head sink logits as sinks= where it sends them (the sinks layout;
gpt-oss's attention sinks, a float32 [num_heads] tensor).

Flags (after the script's path):
  --rail backend      list min(seq_len, sliding_window_size) tokens, as SGLang 0.5.23's backend does:
                      the default, and a finding (NOTES.md): W - 1 keys for a window of W.
  --rail window       list min(seq_len, sliding_window_size + 1) tokens: the W keys a query of a
                      window W sees (the rail sliding_window_size + 1 that SGLang's FlashInfer backend keeps).
  --window-offset N   sliding_window_size + N (default 0): with --rail window, +1 / -1 are mutants: FAIL.
  --kv-splits N       max_kv_splits (default 8).
  --judge-bfloat16    judge bfloat16 all the same (to measure the interpreter's error; FAILs).
  --drop-sinks        call the kernel with sinks=None even where the case sends sinks. A mutant: FAIL
                      (the sinks form).
Known limits, answered unsupported (SKIP with the reason): bfloat16 (the interpreter's bfloat16, NOTES.md),
float64 (no float64 tl.dot), chunked layers (no chunked attention in SGLang's Triton backend), the
explicit-mask form (the decode kernel takes no mask).
"""
import argparse
import os
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, here)
import kvconform  # noqa: E402  (the project's package, from the checkout)
import seqs as packing  # noqa: E402
import triton_env  # noqa: E402
from kvconform.zygote import hand_off  # noqa: E402

hand_off(("torch",))  # KVC_ZYGOTE=1: a fork server's child (triton is imported after TRITON_INTERPRET is set)

SPARE_SLOTS = 7
OPTIONS = argparse.Namespace(judge_bfloat16=False, rail="backend", window_offset=0, kv_splits=8, drop_sinks=False)


def decode(seqs, sliding_window_size, scale, seed, sinks=None):
    """decode_attention_fwd over every query of seqs (packing.Seq) as a decode row; outputs [n, H, D] of each."""
    import torch
    da = triton_env.sglang_decode_attention()
    rows = []  # (seq, query index, the row's keys: the sequence up to that query)
    for s in seqs:
        n, length = s.q.shape[0], s.k.shape[0]
        rows += [(s, i, length - n + i + 1) for i in range(n)]
    outs = [torch.zeros_like(s.q) for s in seqs]
    if not rows:
        return outs
    s0 = rows[0][0]
    dtype, heads, kv_heads, d = s0.q.dtype, s0.q.shape[1], s0.k.shape[1], s0.q.shape[2]
    keep = sliding_window_size + (1 if OPTIONS.rail == "window" else 0)
    # the backend fills a rail only when sliding_window_size > 0 (so W = 1 lists the whole sequence)
    windowed = sliding_window_size > 0 if OPTIONS.rail == "backend" else sliding_window_size >= 0
    listed = [min(seq_len, keep) if windowed else seq_len for _, _, seq_len in rows]
    gen = torch.Generator().manual_seed(seed)
    pool_size = sum(listed) + SPARE_SLOTS
    slots = torch.randperm(pool_size, generator=gen)
    k_buffer = torch.randn(pool_size, kv_heads, d, generator=gen).to(dtype)
    v_buffer = torch.randn(pool_size, kv_heads, d, generator=gen).to(dtype)
    kv_indices, at = [], 0
    for (s, _, seq_len), m in zip(rows, listed):
        mine = slots[at:at + m]
        at += m
        k_buffer[mine] = s.k[seq_len - m:seq_len]
        v_buffer[mine] = s.v[seq_len - m:seq_len]
        kv_indices.append(mine)
    q = torch.stack([s.q[i] for s, i, _ in rows]).contiguous()
    o = torch.empty_like(q)
    bs, splits = len(rows), OPTIONS.kv_splits
    kv_indptr = torch.tensor([0] + listed, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    attn_logits = torch.empty(bs, heads, splits, d, dtype=torch.float32)
    attn_lse = torch.empty(bs, heads, splits, dtype=torch.float32)
    num_kv_splits = torch.full((bs,), splits, dtype=torch.int32)  # get_num_kv_splits' static fill
    da.decode_attention_fwd(q, k_buffer, v_buffer, o, kv_indptr, torch.cat(kv_indices).to(torch.int64), attn_logits,
                            attn_lse, num_kv_splits, splits, scale, 1.0, 1.0, logit_cap=0.0, sinks=sinks)
    at = 0
    for x, s in enumerate(seqs):
        n = s.q.shape[0]
        outs[x] = o[at:at + n]
        at += n
    return outs


# window="flashinfer": window_left = W - 1 (-1 without a window), SGLang's sliding_window_size.
@kvconform.kernel(window="flashinfer", layouts=["window", "key_padding_mask", "varlen", "sinks"],
                  dtypes=("float32", "float16", "bfloat16", "float64"), layer_types=("sliding", "full"),
                  qkv="bshd", name="sglang_triton_decode")
def sglang_triton_decode(q, k, v, *, window_left, scale, query_positions=None, kv_offset=0, left_padding=None,
                         key_padding_mask=None, cu_seqlens_q=None, cu_seqlens_k=None, sinks=None, case=None,
                         step=None):
    """SGLang's Triton decode_attention_fwd over its token pool and window rail (TRITON_INTERPRET=1 on the CPU)"""
    packing.check_dtype(q)
    sws = window_left + OPTIONS.window_offset if window_left >= 0 else -1
    import torch
    sinks = None if sinks is None or OPTIONS.drop_sinks else sinks.to(torch.float32).contiguous()
    if cu_seqlens_q is not None:
        seqs = packing.from_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        return torch.cat(decode(seqs, sws, scale, zlib.crc32(repr(cu_seqlens_k.tolist()).encode()), sinks))
    seqs, back = packing.from_window(q, k, v, query_positions, kv_offset, left_padding, key_padding_mask)
    return back(decode(seqs, sws, scale, zlib.crc32(f"{case}/{step}/{k.shape[1]}".encode()), sinks))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rail", choices=("backend", "window"), default="backend")
    parser.add_argument("--window-offset", type=int, default=0)
    parser.add_argument("--kv-splits", type=int, default=8)
    parser.add_argument("--judge-bfloat16", action="store_true")
    parser.add_argument("--drop-sinks", action="store_true")
    parser.parse_args(namespace=OPTIONS)
    packing.JUDGE_BFLOAT16 = OPTIONS.judge_bfloat16
    if OPTIONS.kv_splits < 1:
        parser.error(f"--kv-splits {OPTIONS.kv_splits}: at least 1")
    protocol = os.fdopen(os.dup(1), "wb")  # the protocol owns file descriptor 1; prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU here: before triton is imported
    triton_env.sglang_decode_attention()
    n = OPTIONS.window_offset
    sglang_triton_decode.name += f"_{OPTIONS.rail}_rail" + (f"_window_{'plus' if n > 0 else 'minus'}_{abs(n)}"
                                                           if n else "") + ("_drop_sinks" if OPTIONS.drop_sinks else "")
    from kvconform.serve import serve
    serve(sglang_triton_decode, stdout=protocol)


def decode_packed(q, k, v, window, scale):
    """The last query of one sequence with a window of W keys on the window rail (triton_env --check)."""
    OPTIONS.rail = "window"
    return decode([packing.Seq(q, k, v)], window - 1, scale, 0)[0]


if __name__ == "__main__":
    main()
