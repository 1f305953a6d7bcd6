# vLLM CPU attention kernel (torch.ops._C via vllm._custom_ops) with a sliding window, against a float64 reference:
# query at position i sees keys j with i - W < j <= i (Hugging Face / kvconform window W). Prints, per (W passed,
# isa, case), the max error vs that reference and which window the kernel's output matches. Runs on CPU only.
import itertools, sys, torch
import vllm._custom_ops as ops
torch.manual_seed(0)
H, KVH, D, BS = 4, 2, 32, 32  # heads, kv heads, head_dim, block size (head_dim 16: "Unsupported CPU attention configuration")


def ref(q, k, v, W, start):  # q [n,H,D] at positions start..start+n-1; k,v [L,KVH,D]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for t in range(q.shape[0]):
        i = start + t; lo = 0 if W < 0 else max(0, i - W + 1)
        for h in range(H):
            kk, vv = k[lo:i + 1, h // (H // KVH)].double(), v[lo:i + 1, h // (H // KVH)].double()
            p = torch.softmax(q[t, h].double() @ kk.T / D ** 0.5, -1); out[t, h] = p @ vv
    return out


def run(q, k, v, W, start, isa):  # the whole sequence k,v is written through the paged cache first
    L = k.shape[0]; nb = (L + BS - 1) // BS + 1
    cache = torch.zeros(nb, KVH, BS * 2, D); kc, vc = cache.chunk(2, dim=2)
    ops.cpu_attn_reshape_and_cache(k, v, kc, vc, torch.arange(L, dtype=torch.long), isa)
    qsl = torch.tensor([0, q.shape[0]], dtype=torch.int32); sl = torch.tensor([L], dtype=torch.int32)
    meta = ops.cpu_attn_get_scheduler_metadata(1, H, KVH, D, sl, torch.float32, qsl, True, W, isa, False)
    out = torch.empty_like(q)
    ops.cpu_attention_with_kv_cache(q, kc, vc, out, qsl, sl, D ** -0.5, True, None, W,
                                    torch.arange(nb, dtype=torch.int32)[None], 0.0, meta, None)
    return out


bad = 0
for isa, (L, n), W in itertools.product(["vec", "vec16"], [(9, 9), (12, 1), (20, 3), (40, 40)], [3, 4, 5]):
    k, v = torch.randn(L, KVH, D), torch.randn(L, KVH, D); q = torch.randn(n, H, D)
    got = run(q, k, v, W, L - n, isa).double()
    errs = {w: (got - ref(q, k, v, w, L - n)).abs().max().item() for w in (W - 1, W, W + 1)}
    match = min(errs, key=errs.get)
    print(f"isa={isa} seq={L} new={n} sliding_window passed={W}: error vs window W {errs[W]:.2e}, "
          f"W-1 {errs[W - 1]:.2e}, W+1 {errs[W + 1]:.2e} -> matches window {match}")
    bad += errs[W] > 1e-4
sys.exit(1 if bad else 0)
