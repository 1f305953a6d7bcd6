"""SGLang's Triton extend attention (extend_attention.extend_attention_fwd) as a kvconform kernel.

    PY=$(bash plugins/triton/setup_env.sh)
    kvconform run --backend-cmd "$PY plugins/triton/sglang_extend_adapter.py" [kvconform run args]

Each call is one extend_attention_fwd as SGLang's Triton backend (srt/layers/attention/triton_backend.py,
forward_extend) makes it, on the CPU under Triton's interpreter (TRITON_INTERPRET=1): a sequence's
queries are its extend tokens, whose K/V go in as k_extend / v_extend; the keys before them are the
prefix, read from a token pool (k_buffer / v_buffer, page size 1) through kv_indices, slots handed out
in a shuffled order with spare slots of finite garbage. On a sliding layer the prefix is the backend's
window rail: update_sliding_window_buffer over the prefix lengths keeps the last
min(prefix_len, sliding_window_size) prefix tokens (window_kv_indptr / window_kv_indices), exactly as
forward_extend passes it; a full layer gets the whole prefix. k_scale = v_scale = 1.0 (no KV scales),
logit_cap 0, no custom mask, causal, and the case's per-head sink logits as sinks= where it sends them
(the sinks layout; gpt-oss's attention sinks, a float32 [num_heads] tensor).

Window convention, as SGLang's models set RadixAttention's sliding_window_size (gemma2, gpt_oss:
get_attention_sliding_window_size = config.sliding_window - 1): sliding_window_size = W - 1, -1 without
a window; the kernel keeps keys with q <= k + sliding_window_size. That is kvconform's "flashinfer"
convention (window_left = W - 1), passed as is.

Flags (after the script's path):
  --window-offset N   sliding_window_size + N, for both the kernel and the window rail (default 0).
                      +1 / -1 are mutants: FAIL.
  --full-prefix       hand the whole prefix on sliding layers (no window rail): the kernel's own mask
                      must then do all the windowing.
  --judge-bfloat16    judge bfloat16 all the same (to measure the interpreter's error; FAILs).
  --drop-sinks        call the kernel with sinks=None even where the case sends sinks. A mutant: FAIL
                      (the sinks form).
Known limits, answered unsupported (SKIP with the reason): bfloat16 (Triton 3.9's interpreter computes
bfloat16 dots wrongly on this CPU: NOTES.md), float64 (the kernel's tl.dot takes no float64), chunked
layers (SGLang's Triton backend has no chunked attention: llama4's chunk is taken as a sliding window),
the explicit-mask form (custom_mask is speculative decoding's tree mask, not a per-case mask here).
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
OPTIONS = argparse.Namespace(judge_bfloat16=False, window_offset=0, full_prefix=False, drop_sinks=False)


def extend(seqs, sliding_window_size, scale, seed, sinks=None):
    """One extend_attention_fwd over seqs (packing.Seq); returns the outputs [n, H, D] of each."""
    import torch
    ea = triton_env.sglang_extend_attention()
    live = [i for i, s in enumerate(seqs) if s.q.shape[0] > 0]
    outs = [torch.zeros_like(s.q) for s in seqs]
    if not live:
        return outs
    s0 = seqs[live[0]]
    dtype, kv_heads, d = s0.q.dtype, s0.k.shape[1], s0.q.shape[2]
    q_lens = [seqs[i].q.shape[0] for i in live]
    prefix_lens = [seqs[i].k.shape[0] - n for i, n in zip(live, q_lens)]
    # the window rail: the last min(prefix_len, sliding_window_size) prefix tokens (update_sliding_window_buffer)
    if sliding_window_size > 0 and not OPTIONS.full_prefix:
        rail = [min(p, sliding_window_size) for p in prefix_lens]
    else:
        rail = prefix_lens
    gen = torch.Generator().manual_seed(seed)
    pool_size = sum(rail) + SPARE_SLOTS
    slots = torch.randperm(pool_size, generator=gen)
    k_buffer = torch.randn(pool_size, kv_heads, d, generator=gen).to(dtype)
    v_buffer = torch.randn(pool_size, kv_heads, d, generator=gen).to(dtype)
    kv_indices, at = [], 0
    for i, p, r in zip(live, prefix_lens, rail):
        mine = slots[at:at + r]
        at += r
        k_buffer[mine] = seqs[i].k[p - r:p]
        v_buffer[mine] = seqs[i].v[p - r:p]
        kv_indices.append(mine)
    q = torch.cat([seqs[i].q for i in live]).contiguous()
    k_extend = torch.cat([seqs[i].k[p:] for i, p in zip(live, prefix_lens)]).contiguous()
    v_extend = torch.cat([seqs[i].v[p:] for i, p in zip(live, prefix_lens)]).contiguous()
    o = torch.empty_like(q)
    qo_indptr = torch.tensor([0] + q_lens).cumsum(0)
    kv_indptr = torch.tensor([0] + rail, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    ea.extend_attention_fwd(q, k_extend, v_extend, o, k_buffer, v_buffer, qo_indptr, kv_indptr,
                            torch.cat(kv_indices).to(torch.int64), None, True, None, max(q_lens), 1.0, 1.0,
                            sm_scale=scale, logit_cap=0.0, sliding_window_size=sliding_window_size, sinks=sinks,
                            window_kv_offsets=None)
    for i, out in zip(live, o.split(q_lens)):
        outs[i] = out
    return outs


# window="flashinfer": the kernel receives window_left = W - 1 (-1 without a window): SGLang's
# sliding_window_size.
@kvconform.kernel(window="flashinfer", layouts=["window", "key_padding_mask", "varlen", "sinks"],
                  dtypes=("float32", "float16", "bfloat16", "float64"), layer_types=("sliding", "full"),
                  qkv="bshd", name="sglang_triton_extend")
def sglang_triton_extend(q, k, v, *, window_left, scale, query_positions=None, kv_offset=0, left_padding=None,
                         key_padding_mask=None, cu_seqlens_q=None, cu_seqlens_k=None, sinks=None, case=None,
                         step=None):
    """SGLang's Triton extend_attention_fwd over its token pool (TRITON_INTERPRET=1 on the CPU)"""
    packing.check_dtype(q)
    sws = window_left + OPTIONS.window_offset if window_left >= 0 else -1
    import torch
    sinks = None if sinks is None or OPTIONS.drop_sinks else sinks.to(torch.float32).contiguous()
    if cu_seqlens_q is not None:
        seqs = packing.from_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        return torch.cat(extend(seqs, sws, scale, zlib.crc32(repr(cu_seqlens_k.tolist()).encode()), sinks))
    seqs, back = packing.from_window(q, k, v, query_positions, kv_offset, left_padding, key_padding_mask)
    return back(extend(seqs, sws, scale, zlib.crc32(f"{case}/{step}/{k.shape[1]}".encode()), sinks))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-offset", type=int, default=0)
    parser.add_argument("--full-prefix", action="store_true")
    parser.add_argument("--judge-bfloat16", action="store_true")
    parser.add_argument("--drop-sinks", action="store_true")
    parser.parse_args(namespace=OPTIONS)
    packing.JUDGE_BFLOAT16 = OPTIONS.judge_bfloat16
    protocol = os.fdopen(os.dup(1), "wb")  # the protocol owns file descriptor 1; prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU here: before triton is imported
    triton_env.sglang_extend_attention()
    n = OPTIONS.window_offset
    sglang_triton_extend.name += (f"_window_{'plus' if n > 0 else 'minus'}_{abs(n)}" if n else "") \
        + ("_full_prefix" if OPTIONS.full_prefix else "") + ("_drop_sinks" if OPTIONS.drop_sinks else "")
    from kvconform.serve import serve
    serve(sglang_triton_extend, stdout=protocol)


def extend_packed(q, k, v, window, scale):
    """One sequence (q [n, H, D], k, v [L, Hkv, D]) with a window of W keys (triton_env --check)."""
    return extend([packing.Seq(q, k, v)], window - 1, scale, 0)[0]


if __name__ == "__main__":
    main()
