"""vLLM's CPU attention and paged cache write as a kvconform kernel (docs/plugins.md, python/README.md).

    VPY=$(bash engines/setup_env.sh vllm)
    build/cli/kvconform run --backend-cmd "$VPY plugins/vllm/kernel_adapter.py" [--cases plugins/vllm/cases]

Each call is one vLLM v1 CPU attention step, made with the ops `vllm/v1/attention/backends/cpu_attn.py`
calls (`vllm._custom_ops`): the K/V of every sequence are written through `cpu_attn_reshape_and_cache`
into a paged cache of 32-token blocks (the backend's `[num_blocks, Hkv, block_size, 2 * D]` tensor,
viewed and split as the backend does), whose blocks are handed out in a shuffled order with spare
blocks left unused and filled with garbage, so the block table and slot mapping are really followed;
then `cpu_attn_get_scheduler_metadata` and `cpu_attention_with_kv_cache(..., causal=True,
sliding_window=W)` compute the output. Sequences are vLLM's packed layout (`query_start_loc`,
`seq_lens`; a sequence's queries are its last tokens), which is exactly kvconform's varlen layout;
a left-padded batch row becomes a sequence without its padding (a vLLM sequence holds no pad tokens).

Window convention: `window="transformers"`, the kernel gets `sliding_window=W` (a query sees W keys,
counting itself) and passes it unchanged: the CPU kernel takes the Hugging Face window, measured
(plugins/vllm/NOTES.md: keys i - W < j <= i), and the model layer passes `config.sliding_window`
as is. A full layer is `sliding_window=-1`, vLLM's "no window".

Flags (after the script's path):
  --window-offset N   pass W + N to both ops (default 0). N = +1 / -1 are the adapter mutants: FAIL.
  --isa ISA           vec, vec16 or amx (default: what the backend's _get_attn_isa picks: amx for
                      bfloat16 on a CPU with AMX tiles, vec16 for head_dim % 32 != 0, else vec).
  --no-kv-split       enable_kv_split=False (default True: VLLM_CPU_ATTN_SPLIT_KV's default).
  --pad-head-dim      pad Q/K/V with zero columns up to the smallest head size the backend lists
                      (32, 64, 80, ...) when the case's head_dim is not one: dot products, the scale
                      and the output's columns are unchanged, so kvconform's small-head_dim patterns
                      (head_dim 4 / 8) exercise the window and the paging too. Off by default.
Known limits, answered unsupported (SKIP with the reason): float64 (the ops are not implemented for
Double; the backend lists float16, bfloat16, float32), head dims the kernel refuses ("Unsupported CPU
attention configuration": 4, 8, 16 ...), chunked attention (not a kernel parameter in vLLM) and the
explicit-mask form (the kernel takes no mask).
"""
import argparse
import os
import sys
import zlib

import kvconform  # the checkout's python/ package: kvconform puts it on its workers' PYTHONPATH

BLOCK = 32  # the backend's block size (get_supported_kernel_block_sizes: multiples of 32)
SPARE_BLOCKS = 3  # unused blocks in the pool, so the table must be followed, not just counted
HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # CPUAttentionBackend.get_supported_head_sizes
OPTIONS = argparse.Namespace(window_offset=0, isa=None, kv_split=True, pad_head_dim=False)
_ops = None


def ops():
    global _ops
    if _ops is None:
        import vllm._custom_ops
        _ops = vllm._custom_ops
    return _ops


def pick_isa(dtype, head_dim):
    """The backend's _get_attn_isa for block size 32 and an "auto" KV cache on x86 (its module cannot be
    imported here: vllm.config pulls torchvision, which fails in this venv; NOTES.md)."""
    import torch
    if OPTIONS.isa == "amx" and dtype != torch.bfloat16:  # the backend's amx is bfloat16 only; float32 aborts
        raise kvconform.Unsupported(f"--isa amx: the backend picks amx for bfloat16 only, not {dtype}")
    if OPTIONS.isa:
        return OPTIONS.isa
    if head_dim % 32 != 0 and head_dim % 16 == 0:
        return "vec16"
    if torch.cpu._is_amx_tile_supported() and dtype == torch.bfloat16:
        return "amx"
    return "vec"


def attend(seqs, window, scale, seed):
    """seqs: [(q [n, H, D], k [L, Hkv, D], v [L, Hkv, D])], n <= L, the queries being the last n tokens.
    One vLLM CPU attention call over all of them; returns the outputs [n, H, D]."""
    import torch
    live = [i for i, (q, k, _) in enumerate(seqs) if q.shape[0] > 0]
    outs = [torch.zeros_like(q) for q, _, _ in seqs]
    if not live:
        return outs
    q0, k0, _ = seqs[live[0]]
    dtype, heads, kv_heads, d = q0.dtype, q0.shape[1], k0.shape[1], q0.shape[2]
    pad = 0
    if OPTIONS.pad_head_dim and d not in HEAD_SIZES:
        pad = next(s for s in HEAD_SIZES if s >= d) - d
    dp = d + pad
    isa = pick_isa(dtype, dp)

    def padded(x):
        return torch.nn.functional.pad(x, (0, pad)) if pad else x

    q_all = padded(torch.cat([seqs[i][0] for i in live])).contiguous()
    k_all = padded(torch.cat([seqs[i][1] for i in live])).contiguous()
    v_all = padded(torch.cat([seqs[i][2] for i in live])).contiguous()
    q_lens = [seqs[i][0].shape[0] for i in live]
    k_lens = [seqs[i][1].shape[0] for i in live]
    # the block table: each sequence's blocks drawn from a shuffled pool (deterministic per call)
    blocks = [(n + BLOCK - 1) // BLOCK for n in k_lens]
    gen = torch.Generator().manual_seed(seed)
    pool = torch.randperm(sum(blocks) + SPARE_BLOCKS, generator=gen).to(torch.int32)
    table = torch.zeros(len(live), max(blocks), dtype=torch.int32)
    slots, at = [], 0
    for s, (n, nb) in enumerate(zip(k_lens, blocks)):
        table[s, :nb] = pool[at:at + nb]
        at += nb
        t = torch.arange(n)
        slots.append(table[s, t // BLOCK].long() * BLOCK + t % BLOCK)
    num_blocks = sum(blocks) + SPARE_BLOCKS
    # the backend's cache tensor and its view (CPUAttentionBackendImpl.do_kv_cache_update); stale
    # finite garbage where nothing is written, as a reused cache holds
    kv_cache = torch.randn(num_blocks, kv_heads, BLOCK, 2 * dp, generator=gen).to(dtype)
    key_cache, value_cache = kv_cache.view(num_blocks, kv_heads, 2 * BLOCK, dp).chunk(2, dim=2)
    ops().cpu_attn_reshape_and_cache(k_all, v_all, key_cache, value_cache, torch.cat(slots), isa)

    query_start_loc = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    seq_lens = torch.tensor(k_lens, dtype=torch.int32)
    sliding_window = -1 if window is None else window + OPTIONS.window_offset
    meta = ops().cpu_attn_get_scheduler_metadata(len(live), heads, kv_heads, dp, seq_lens, dtype, query_start_loc,
                                                 True, sliding_window, isa, OPTIONS.kv_split)
    out = torch.empty_like(q_all)
    ops().cpu_attention_with_kv_cache(q_all, key_cache, value_cache, out, query_start_loc, seq_lens, scale, True,
                                      None, sliding_window, table, 0.0, meta, None)
    for i, o in zip(live, out[:, :, :d].split(q_lens)):
        outs[i] = o
    return outs


def call(seqs, window, scale, seed):
    try:
        return attend(seqs, window, scale, seed)
    except RuntimeError as e:  # the kernel's own refusal of a configuration is a known limit, not a bug
        if "Unsupported CPU attention configuration" in str(e):
            raise kvconform.Unsupported(str(e).splitlines()[0]) from None
        raise


# window="transformers": the kernel receives sliding_window=W (None on a full layer), the convention
# vLLM's CPU kernel takes (measured: query i sees keys i - W < j <= i), so it is passed unchanged.
@kvconform.kernel(window="transformers", layouts=["window", "key_padding_mask", "varlen"],
                  dtypes=("float32", "float16", "bfloat16"), layer_types=("sliding", "full"), qkv="bshd",
                  name="vllm_cpu")
def vllm_cpu_attention(q, k, v, *, sliding_window, scale, key_padding_mask=None, cu_seqlens_q=None,
                       cu_seqlens_k=None, case=None, step=None):
    """vLLM CPU attention (cpu_attention_with_kv_cache) over its paged cache (cpu_attn_reshape_and_cache)"""
    if cu_seqlens_q is not None:  # varlen: q [total_q, H, D], k, v [total_k, Hkv, D]: vLLM's own packing
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        seqs = [(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]) for b in range(len(cq) - 1)]
        import torch
        return torch.cat(call(seqs, sliding_window, scale, zlib.crc32(repr((cq, ck)).encode())))
    # window / key padding: q [B, n, H, D], k, v [B, L, Hkv, D], the queries being the last n keys
    n, length = q.shape[1], k.shape[1]
    if n > length:  # a vLLM sequence's queries are its last tokens: its keys must include them
        raise kvconform.Unsupported(f"{n} queries but {length} keys: queries whose own keys are not handed over")
    seqs = []
    for b in range(q.shape[0]):
        first = 0
        if key_padding_mask is not None:  # left padding: the row's sequence starts at its first real key
            real = key_padding_mask[b].tolist()
            first = real.index(True) if True in real else length
            if not all(real[first:]):
                raise kvconform.Unsupported("a key padding mask that is not left padding: a vLLM sequence holds "
                                            "no pad tokens")
        skip = max(0, first - (length - n))  # queries inside the padding see no key (zeroed by kvconform)
        seqs.append((q[b, skip:], k[b, first:], v[b, first:]))
    outs = call(seqs, sliding_window, scale, zlib.crc32(f"{case}/{step}/{length}".encode()))
    import torch
    return torch.stack([torch.cat([torch.zeros_like(q[b, :n - o.shape[0]]), o]) for b, o in enumerate(outs)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-offset", type=int, default=0)
    parser.add_argument("--isa", choices=("vec", "vec16", "amx"))
    parser.add_argument("--no-kv-split", dest="kv_split", action="store_false")
    parser.add_argument("--pad-head-dim", action="store_true")
    parser.parse_args(namespace=OPTIONS)
    # the protocol owns file descriptor 1: Python's and C++'s prints (vLLM's logger, OpenMP) go to stderr
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch
    if OPTIONS.isa == "amx" and not torch.cpu._is_amx_tile_supported():
        sys.exit("kernel_adapter: --isa amx on a CPU without AMX tiles (the kernel aborts the process)")
    ops()  # the slow import, before the hello answer (docs/plugins.md, "Isolation")
    suffix = {1: "_window_plus_1", -1: "_window_minus_1"}.get(OPTIONS.window_offset,
                                                              f"_window_offset_{OPTIONS.window_offset}")
    vllm_cpu_attention.name += (suffix if OPTIONS.window_offset else "") + (f"_{OPTIONS.isa}" if OPTIONS.isa else "") \
        + ("" if OPTIONS.kv_split else "_no_kv_split") + ("_padded" if OPTIONS.pad_head_dim else "")
    from kvconform.serve import serve
    serve(vllm_cpu_attention, stdout=protocol)


if __name__ == "__main__":
    main()
