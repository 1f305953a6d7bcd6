"""vLLM's Triton unified attention (triton_unified_attention.unified_attention) as a kvconform kernel.

    PY=$(bash plugins/triton/setup_env.sh)
    TRITON_INTERPRET=1 kvconform run --backend-cmd "$PY plugins/triton/vllm_triton_adapter.py" [kvconform run args]

Each call is one call of unified_attention as vLLM's Triton backend (v1/attention/backends/triton_attn.py)
makes it, on the CPU under Triton's interpreter: the K/V of every sequence are written into a paged cache
of 16-token blocks in the backend's layout (a [num_blocks, Hkv, block_size, 2 * D] tensor, transposed and
split into key and value caches as forward() does), whose blocks are handed out in a shuffled order with
spare blocks of finite garbage, so the block table is really followed; then one unified_attention over all
sequences (cu_seqlens_q, seqused_k, block_table, k/v_descale of ones as the backend expands
layer._k_scale), with causal=True, softcap 0, and the case's per-head sink logits as sinks= where it sends them (the
sinks layout; gpt-oss's attention sinks, which the backend passes as a float32 [num_heads] tensor).

Window convention, as the backend's __init__ converts a model's sliding_window W: window_size =
(W - 1, 0) for a decoder, (-1, -1) without a window; the kernel then masks keys with
query - key < SLIDING_WINDOW = 1 + window_size[0]. That is kvconform's "flash" convention, passed as is.
A chunked layer (llama4's attention_chunk_size C) is the backend's chunk_lookback = 0 with
window_size = (C - 1, 0): the kernel's chunk size is (1 + window_size[0]) // (chunk_lookback + 1) = C
and it masks keys of another chunk (query // C != key // C), chunks counted from the sequence's first token.

Flags (after the script's path):
  --window-offset N   window_size[0] + N (default 0). +1 / -1 are mutants: FAIL.
  --chunk-offset N    chunk size C + N on chunked layers (default 0). A mutant: FAIL.
  --decode-3d         decode steps through the backend's 3D kernel (KV split into segments and
                      reduce_segments), as the backend does for batches of decodes: softmax segment
                      buffers of 16 segments (the backend's NUM_PAR_SOFTMAX_SEGMENTS), seq_threshold_3D 64.
  --judge-bfloat16    judge bfloat16 all the same (to measure the interpreter's error; FAILs).
  --drop-sinks        call the kernel with sinks=None even where the case sends sinks. A mutant: FAIL
                      (the sinks form).
Known limits, answered unsupported (SKIP with the reason): bfloat16 (Triton 3.9's interpreter computes
bfloat16 dots wrongly on this CPU: NOTES.md, "bfloat16"), float64 (the kernel's dot takes no float64),
the explicit-mask form (the kernel takes no mask), queries that are not the last tokens of their keys.
"""
import argparse
import os
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, here)
import kvconform  # noqa: E402  (the project's package, from the checkout: nothing installed into the venv)
import seqs as packing  # noqa: E402
import triton_env  # noqa: E402
from kvconform.zygote import hand_off  # noqa: E402

hand_off(("torch",))  # KVC_ZYGOTE=1: a fork server's child (triton is imported after TRITON_INTERPRET is set)

BLOCK = 16  # the Triton backend's default KV cache block size
SPARE_BLOCKS = 3  # unused blocks in the pool, so the table must be followed, not just counted
SEGMENTS = 16  # the backend's NUM_PAR_SOFTMAX_SEGMENTS for the 3D decode kernel
OPTIONS = argparse.Namespace(judge_bfloat16=False, window_offset=0, chunk_offset=0, decode_3d=False, drop_sinks=False)


def attend(seqs, window_size, scale, seed, chunk_lookback=-1, sinks=None):
    """One unified_attention call over seqs (packing.Seq); returns the outputs [n, H, D] of each."""
    import torch
    ua = triton_env.vllm_unified_attention()
    live = [i for i, s in enumerate(seqs) if s.q.shape[0] > 0]
    outs = [torch.zeros_like(s.q) for s in seqs]
    if not live:
        return outs
    s0 = seqs[live[0]]
    dtype, heads, kv_heads, d = s0.q.dtype, s0.q.shape[1], s0.k.shape[1], s0.q.shape[2]
    lead = [seqs[i].origin if chunk_lookback >= 0 else 0 for i in live]  # chunk origin: tokens before key row 0
    if chunk_lookback >= 0:  # those tokens are garbage in the cache: they must lie in earlier chunks
        chunk = (1 + window_size[0]) // (chunk_lookback + 1)
        for x, i in enumerate(live):
            first_query = lead[x] + seqs[i].k.shape[0] - seqs[i].q.shape[0]
            if lead[x] > first_query // chunk * chunk:
                raise kvconform.Unsupported(
                    f"the keys handed over start {lead[x] - first_query // chunk * chunk} token(s) into the query's "
                    f"chunk of {chunk}: a vLLM sequence holds every token of its chunk (a cache shorter than its "
                    "chunk drops some)")
    q_lens = [seqs[i].q.shape[0] for i in live]
    k_lens = [lead[x] + seqs[i].k.shape[0] for x, i in enumerate(live)]
    blocks = [(n + BLOCK - 1) // BLOCK for n in k_lens]
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(blocks) + SPARE_BLOCKS
    pool = torch.randperm(num_blocks, generator=gen)
    table = torch.zeros(len(live), max(blocks), dtype=torch.int32)
    # the backend's cache tensor and its view (TritonAttentionImpl.forward: transpose(1, 2), split);
    # finite garbage where nothing is written (the tokens before a chunk origin stay garbage too)
    kv_cache = torch.randn(num_blocks, kv_heads, BLOCK, 2 * d, generator=gen).to(dtype)
    key_cache, value_cache = kv_cache.transpose(1, 2).split(d, dim=-1)
    at = 0
    for x, (i, n, nb) in enumerate(zip(live, k_lens, blocks)):
        table[x, :nb] = pool[at:at + nb].to(torch.int32)
        at += nb
        t = torch.arange(lead[x], n)
        blk, off = table[x, t // BLOCK].long(), t % BLOCK
        key_cache[blk, off] = seqs[i].k
        value_cache[blk, off] = seqs[i].v
    q = torch.cat([seqs[i].q for i in live]).contiguous()
    out = torch.empty_like(q)
    cu_seqlens_q = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    seqused_k = torch.tensor(k_lens, dtype=torch.int32)
    descale = torch.ones(len(live), kv_heads)  # layer._k_scale (1.0) expanded as the backend does
    extra = {}
    if OPTIONS.decode_3d and max(q_lens) == 1:
        t = q.shape[0]
        extra = dict(seq_threshold_3D=64, num_par_softmax_segments=SEGMENTS,
                     softmax_segm_output=torch.empty(t, heads, SEGMENTS, 1 << (d - 1).bit_length()),
                     softmax_segm_max=torch.empty(t, heads, SEGMENTS),
                     softmax_segm_expsum=torch.empty(t, heads, SEGMENTS))
    ua.unified_attention(q=q, k=key_cache, v=value_cache, out=out, cu_seqlens_q=cu_seqlens_q,
                         max_seqlen_q=max(q_lens), seqused_k=seqused_k, max_seqlen_k=max(k_lens),
                         softmax_scale=scale, causal=True, window_size=window_size, block_table=table,
                         softcap=0, q_descale=None, k_descale=descale, v_descale=descale, sinks=sinks,
                         chunk_lookback=chunk_lookback, **extra)
    for i, o in zip(live, out.split(q_lens)):
        outs[i] = o
    return outs


def window_arguments(window_size, chunk_size):
    """kvconform's convention values -> (unified_attention's window_size, chunk_lookback), mutants applied."""
    if chunk_size is not None:  # the backend's chunked layer: chunk_lookback 0, the chunk as the window
        return (chunk_size + OPTIONS.chunk_offset - 1, 0), 0
    if window_size[0] >= 0:
        return (window_size[0] + OPTIONS.window_offset, window_size[1]), -1
    return (-1, -1), -1  # the backend's no-window value


# window="flash": the kernel receives window_size=(W - 1, 0) ((-1, 0) without a window), the tuple
# vLLM's backend builds from a model's sliding_window W; chunk_size=C on a chunked layer.
@kvconform.kernel(window="flash", layouts=["window", "key_padding_mask", "varlen", "sinks"],
                  dtypes=("float32", "float16", "bfloat16", "float64"), layer_types=("sliding", "full", "chunked"),
                  qkv="bshd", name="vllm_triton_unified")
def vllm_triton_unified(q, k, v, *, window_size, scale, chunk_size=None, query_positions=None, kv_offset=0,
                        left_padding=None, key_padding_mask=None, cu_seqlens_q=None, cu_seqlens_k=None,
                        sinks=None, case=None, step=None):
    """vLLM's Triton unified_attention over its paged KV cache (TRITON_INTERPRET=1 on the CPU)"""
    packing.check_dtype(q)
    ws, lookback = window_arguments(window_size, chunk_size)
    import torch
    sinks = None if sinks is None or OPTIONS.drop_sinks else sinks.to(torch.float32).contiguous()
    if cu_seqlens_q is not None:
        seqs = packing.from_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
        return torch.cat(attend(seqs, ws, scale, zlib.crc32(repr(cu_seqlens_k.tolist()).encode()), lookback, sinks))
    seqs, back = packing.from_window(q, k, v, query_positions, kv_offset, left_padding, key_padding_mask)
    return back(attend(seqs, ws, scale, zlib.crc32(f"{case}/{step}/{k.shape[1]}".encode()), lookback, sinks))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-offset", type=int, default=0)
    parser.add_argument("--chunk-offset", type=int, default=0)
    parser.add_argument("--decode-3d", action="store_true")
    parser.add_argument("--judge-bfloat16", action="store_true")
    parser.add_argument("--drop-sinks", action="store_true")
    parser.parse_args(namespace=OPTIONS)
    packing.JUDGE_BFLOAT16 = OPTIONS.judge_bfloat16
    protocol = os.fdopen(os.dup(1), "wb")  # the protocol owns file descriptor 1; prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU here: before triton is imported
    triton_env.vllm_unified_attention()  # the slow import, before the hello answer
    suffix = "".join(f"_{name}_{'plus' if n > 0 else 'minus'}_{abs(n)}" for name, n in
                     (("window", OPTIONS.window_offset), ("chunk", OPTIONS.chunk_offset)) if n)
    vllm_triton_unified.name += suffix + ("_3d" if OPTIONS.decode_3d else "") + ("_drop_sinks" if OPTIONS.drop_sinks else "")
    from kvconform.serve import serve
    serve(vllm_triton_unified, stdout=protocol)


def attend_packed(q, k, v, window, scale):
    """One sequence (q [n, H, D], k, v [L, Hkv, D]) with a window of W keys (triton_env --check)."""
    return attend([packing.Seq(q, k, v)], (window - 1, 0), scale, 0)[0]


if __name__ == "__main__":
    main()
