"""kvconform's attention calls as the packed sequences vLLM's and SGLang's Triton kernels take.

Both kernels see a batch as sequences without padding whose queries are their last tokens (vLLM's
query_start_loc / seq_lens, SGLang's qo_indptr / kv_indptr): kvconform's varlen form is exactly that;
a window-form batch row becomes one such sequence, its left padding dropped.
"""
import kvconform

# --judge-bfloat16 (every adapter): judge bfloat16 all the same, to measure the interpreter's error
JUDGE_BFLOAT16 = False


def check_dtype(q):
    """The dtypes the kernels cannot be judged in here: SKIP with the reason."""
    import torch
    if q.dtype == torch.bfloat16 and not JUDGE_BFLOAT16:
        raise kvconform.Unsupported("Triton 3.9's interpreter computes a bfloat16 tl.dot wrongly (errors "
                                    "of 1e10 on a 16 x 16 product, NOTES.md 'bfloat16'); judged on a GPU only")
    if q.dtype == torch.float64:
        raise kvconform.Unsupported("the kernel accumulates in float32 (acc = tl.zeros(..., "
                                    "tl.float32)); vLLM's Triton backend lists float16, bfloat16, float32")


class Seq:
    """One sequence: q [n, H, D], k, v [L, Hkv, D] (n <= L, the queries being the last n keys); origin:
    how many tokens precede key row 0 since the sequence's first real token (nonzero only when a
    window cache dropped old keys: it matters to chunked attention, whose chunks count from there)."""

    def __init__(self, q, k, v, origin=0):
        self.q, self.k, self.v, self.origin = q, k, v, origin


def from_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k):
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    return [Seq(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]) for b in range(len(cq) - 1)]


def from_window(q, k, v, query_positions, kv_offset, left_padding=None, key_padding_mask=None):
    """The window / key padding forms (q [B, n, H, D], k, v [B, kv, Hkv, D], bshd) taken with their
    positions: returns (the sequences, a function putting the sequences' outputs back as [B, n, H, D])."""
    import torch
    positions = query_positions.tolist()
    if any(p != positions[0] + i for i, p in enumerate(positions)):
        raise kvconform.Unsupported("the queries are not consecutive: a sequence's queries are its last tokens")
    n = len(positions)
    keep = max(0, min(k.shape[1], positions[-1] - kv_offset + 1))  # keys after the last query: never seen
    seqs, skipped = [], []
    for b in range(q.shape[0]):
        if key_padding_mask is not None:  # left padding as a per-key mask: the row starts at its first real key
            real = key_padding_mask[b, :keep].tolist()
            first = real.index(True) if True in real else keep
            if not all(real[first:]):
                raise kvconform.Unsupported("a key padding mask that is not left padding: a sequence holds no pad tokens")
            # the padding's end is unknown when it lies before key row 0; this form comes for sliding and
            # full layers only, which need no origin
            lp = kv_offset + first if first > 0 else None
        else:
            lp = int(left_padding[b]) if left_padding is not None else 0
            first = min(keep, max(0, lp - kv_offset))
        origin = kv_offset + first - lp if lp is not None else None
        skip = max(0, n - (keep - first))  # queries inside the padding see no key (zeroed by kvconform)
        skipped.append(skip)
        seqs.append(Seq(q[b, skip:], k[b, first:keep], v[b, first:keep], origin))

    def back(outs):
        return torch.stack([torch.cat([torch.zeros_like(q[b, :skipped[b]]), o]) for b, o in enumerate(outs)])
    return seqs, back
