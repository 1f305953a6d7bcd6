"""kvconform kernel adapter in pure PyTorch (docs/plugins.md, "Kernels in another process").
Declares the optional layouts key_padding_mask (a per-key padding mask instead of left_padding),
varlen (FlashAttention's packed cu_seqlens batches) and sinks (gpt-oss's per-head sink logits).
--window-delta N: a mutant whose mask uses a sliding window of W + N (must FAIL).
--ignore-key-padding: a mutant that attends padding keys in the key_padding form (must FAIL).
--varlen-top-left: a mutant that aligns a varlen sequence's queries with its first keys (must FAIL).
--drop-sinks: a mutant that ignores the sinks buffer (must FAIL the sinks form).
--scaled-sinks: a mutant that multiplies the sink logits by the softmax scale like a score (must FAIL).
Numerics mutants (docs/mutants.md, "Kernel mutants"; each FAILs a named numerics case):
--softmax-in-input-dtype: scores, max, exp and the softmax sum in the input dtype (float16: long_keys_4096).
--f16-accumulation: the softmax sum and the P@V accumulator kept in the 16-bit input dtype (long_keys_4096).
--no-max-subtraction: exp of the raw scores, no max subtracted (overflows: large_logits)."""
import ctypes, json, struct, sys
import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "uint8": torch.uint8}
DELTA = int(sys.argv[sys.argv.index("--window-delta") + 1]) if "--window-delta" in sys.argv else 0
IGNORE_KEY_PADDING = "--ignore-key-padding" in sys.argv
TOP_LEFT = "--varlen-top-left" in sys.argv
SINKS_MUTANT = next((f for f in ("--drop-sinks", "--scaled-sinks") if f in sys.argv), None)
NUMERICS = [f for f in ("--softmax-in-input-dtype", "--f16-accumulation", "--no-max-subtraction") if f in sys.argv]


def read_exact(n):
    data = sys.stdin.buffer.read(n)
    return data if len(data) == n else sys.exit(0)  # EOF: the host is done with us


def receive():
    header = json.loads(read_exact(struct.unpack("<I", read_exact(4))[0]))
    tensors = {}
    for b in header.get("buffers", []):
        raw = bytearray(read_exact(b["nbytes"])) or bytearray(1)  # frombuffer refuses empty buffers
        flat = torch.frombuffer(raw, dtype=DTYPES[b["dtype"]])[: b["nbytes"] // DTYPES[b["dtype"]].itemsize]
        tensors[b["name"]] = flat.reshape(b["shape"])
    return header, tensors


def send(header, out=None):
    payload = b""
    if out is not None:
        out = out.contiguous()
        payload = ctypes.string_at(out.data_ptr(), out.numel() * out.element_size())
        header["buffers"] = [{"name": "out", "dtype": str(out.dtype)[6:], "shape": list(out.shape), "nbytes": len(payload)}]
    data = json.dumps(header).encode()
    sys.stdout.buffer.write(struct.pack("<I", len(data)) + data + payload)
    sys.stdout.buffer.flush()


def allowed(h, batch, kv, key_padding=None):
    """[B, q, kv] bool: causal, inside the window or chunk, never a padding key."""
    k = torch.arange(kv) + h["kv_offset"]
    q = torch.tensor(h["query_positions"])[:, None]
    lp = torch.tensor(h["left_padding"] or [0] * batch)[:, None, None]
    m = (k <= q).expand(batch, -1, -1) & (k >= lp)
    if key_padding is not None and not IGNORE_KEY_PADDING:  # the key_padding form: [B, kv], 1 = real key
        m = m & key_padding.bool()[:, None, :]
    if h["layer_type"] == "sliding":
        m &= k > q - (h["window"] + DELTA)
    elif h["layer_type"] == "chunked":
        m &= (k - lp) // h["window"] == (q - lp) // h["window"]
    return m


def varlen(h, t):
    """The varlen form: each sequence's queries end where its keys end (bottom-right causal)."""
    cq, ck, outs = h["cu_seqlens_q"], h["cu_seqlens_k"], []
    for b in range(len(cq) - 1):
        q, k, v = (t[n][c[b]:c[b + 1]].transpose(0, 1)[None] for n, c in (("query", cq), ("key", ck), ("value", ck)))
        if q.shape[2] == 0:  # a sequence whose queries are all padding
            outs.append(q[0].transpose(0, 1))
            continue
        i = torch.arange(q.shape[2])[:, None] + (0 if TOP_LEFT else k.shape[2] - q.shape[2])
        j = torch.arange(k.shape[2])
        m = (j <= i) & ((j > i - (h["window"] + DELTA)) if h["layer_type"] == "sliding" else True)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=h["scale"], enable_gqa=True)
        outs.append(torch.where(m.any(-1)[:, None], o[0], 0).transpose(0, 1))
    return torch.cat(outs)


def with_sinks(q, k, v, mask, scale, sinks):
    """The sinks layout: softmax over [scores, sink] per row, the sink's column dropped (gpt-oss's eager
    attention); q [B, H, nq, D], k, v [B, Hkv, nk, D], mask [B, 1, nq, nk], sinks [H] float32."""
    dt, g = q.dtype, q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    wide = torch.float64 if dt == torch.float64 else torch.float32
    s = ((q.to(wide) @ k.to(wide).transpose(-1, -2)) * scale).masked_fill(~mask, float("-inf"))
    sink = sinks.to(wide) * (scale if SINKS_MUTANT == "--scaled-sinks" else 1)  # BUG when scaled
    s = torch.cat([s, sink.view(1, -1, 1, 1).expand(*s.shape[:3], 1)], -1)
    p = torch.softmax(s, -1)[..., :-1]
    return (p @ v.to(wide)).to(dt)


def numerics_mutant(q, k, v, mask, scale):
    """The numerics mutants on the window and mask forms: q [B, H, nq, D], k, v [B, Hkv, nk, D], mask [B, 1, nq, nk]."""
    dt, g = q.dtype, q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    wide = torch.float64 if dt == torch.float64 else torch.float32
    s = (q.to(wide) @ k.to(wide).transpose(-1, -2)) * scale
    if NUMERICS[0] == "--no-max-subtraction":  # BUG: exp of the raw scores
        e = torch.exp(s).masked_fill(~mask, 0)
        return ((e / e.sum(-1, keepdim=True)) @ v.to(wide)).to(dt)
    if NUMERICS[0] == "--softmax-in-input-dtype":  # BUG: the whole softmax in the input dtype
        s = s.to(dt).masked_fill(~mask, float("-inf"))
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - torch.where(torch.isinf(m), 0, m))  # rounded to dt
        total = torch.zeros_like(m)
        for j in range(p.shape[-1]):  # a sequential sum, rounded to dt after every key
            total = total + p[..., j:j + 1]
        return ((p / total).to(wide) @ v.to(wide)).to(dt)
    # --f16-accumulation. BUG: the softmax sum and P@V accumulated in the (16-bit) input dtype
    s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isinf(m), 0, m))
    total, acc = torch.zeros(m.shape, dtype=dt), torch.zeros(q.shape, dtype=dt)
    for j in range(p.shape[-1]):
        pj = p[..., j:j + 1]
        total = total + pj.to(dt)
        acc = acc + (pj * v[:, :, j:j + 1, :].to(wide)).to(dt)
    return acc / total


while True:
    h, t = receive()
    if h["op"] == "hello":
        send({"status": "ok", "name": "minimal_adapter" + (f"_window_plus_{DELTA}" if DELTA else "")
              + ("_ignore_key_padding" if IGNORE_KEY_PADDING else "") + ("_varlen_top_left" if TOP_LEFT else "")
              + (SINKS_MUTANT[1:].replace("-", "_") if SINKS_MUTANT else "")
              + "".join("_" + f[2:].replace("-", "_") for f in NUMERICS),
              "description": "torch scaled_dot_product_attention with a boolean mask",
              "layouts": ["key_padding_mask", "varlen", "sinks"]})
        continue
    if h["form"] == "varlen":
        send({"status": "ok"}, varlen(h, t))
        continue
    mask = t["mask"].bool() if h["form"] == "mask" else allowed(
        h, t["query"].shape[0], t["key"].shape[2], t.get("key_padding_mask"))
    if "sinks" in t and SINKS_MUTANT != "--drop-sinks":  # BUG when dropped: the window form's answer
        out = with_sinks(t["query"], t["key"], t["value"], mask[:, None], h["scale"], t["sinks"])
    elif NUMERICS:
        out = numerics_mutant(t["query"], t["key"], t["value"], mask[:, None], h["scale"])
    else:
        out = torch.nn.functional.scaled_dot_product_attention(
            t["query"], t["key"], t["value"], attn_mask=mask[:, None], scale=h["scale"], enable_gqa=True)
    send({"status": "ok"}, torch.where(mask.any(-1)[:, None, :, None], out, 0))  # no key seen: zeros
