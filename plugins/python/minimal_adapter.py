"""kvconform kernel adapter in pure PyTorch (docs/plugins.md, "Kernels in another process").
--window-delta N: a mutant whose mask uses a sliding window of W + N (must FAIL)."""
import ctypes, json, struct, sys
import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "uint8": torch.uint8}
DELTA = int(sys.argv[sys.argv.index("--window-delta") + 1]) if "--window-delta" in sys.argv else 0


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


def allowed(h, batch, kv):
    """[B, q, kv] bool: causal, inside the window or chunk, never a left-padding key."""
    k = torch.arange(kv) + h["kv_offset"]
    q = torch.tensor(h["query_positions"])[:, None]
    lp = torch.tensor(h["left_padding"] or [0] * batch)[:, None, None]
    m = (k <= q).expand(batch, -1, -1) & (k >= lp)
    if h["layer_type"] == "sliding":
        m &= k > q - (h["window"] + DELTA)
    elif h["layer_type"] == "chunked":
        m &= (k - lp) // h["window"] == (q - lp) // h["window"]
    return m


while True:
    h, t = receive()
    if h["op"] == "hello":
        send({"status": "ok", "name": "minimal_adapter" + (f"_window_plus_{DELTA}" if DELTA else ""),
              "description": "torch scaled_dot_product_attention with a boolean mask"})
        continue
    mask = t["mask"].bool() if h["form"] == "mask" else allowed(h, t["query"].shape[0], t["key"].shape[2])
    out = torch.nn.functional.scaled_dot_product_attention(
        t["query"], t["key"], t["value"], attn_mask=mask[:, None], scale=h["scale"], enable_gqa=True)
    send({"status": "ok"}, torch.where(mask.any(-1)[:, None, :, None], out, 0))  # no key seen: zeros
