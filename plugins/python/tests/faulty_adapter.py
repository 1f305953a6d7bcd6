"""A worker that misbehaves on its first call with batch > 1 in a run and computes correctly otherwise,
to show that a crash, a hang, an exit or a broken reply fails only that case, and that the worker is
restarted and serves the following cases (batch > 1 ones included).

    faulty_adapter.py --fault crash|hang|exit|garbage|print|refuse     (KVC_FAULT_DIR: where "already failed" is noted)
    faulty_adapter.py --fault crash-always     (crashes on every batch > 1 call: --max-worker-failures)
    faulty_adapter.py --fault nomask           (answers "unsupported" to every explicit-mask call)

print: a stray print to the protocol's stdout; refuse: an error reply that quotes the header's
"case", "step" and "layer" (a KeyError if the host does not send them).
"""
import argparse
import os
import signal
import sys
import time

from kvconform.zygote import hand_off

hand_off(("torch",))  # KVC_ZYGOTE=1: a fork server's child, whose crash, hang or exit is the worker's
import torch  # noqa: E402

from kvconform import Unsupported
from kvconform.serve import serve_handler

# The protocol's own pipe, taken before serve_handler guards it: kvconform's worker points descriptor 1
# at stderr while it serves (protocol.protocol_stdout), so a stray print cannot reach the frames. The
# garbage and print faults write here on purpose, as a worker without that guard (another language, an
# older package) would: the host must still name the protocol error.
PROTOCOL = os.dup(1)

_flags = argparse.ArgumentParser()
_flags.add_argument("--fault", default="crash")
FAULT = _flags.parse_args().fault
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def attention(h, buffers):
    dtype = DTYPES[h["dtype"]]
    t = {n: torch.frombuffer(bytearray(d), dtype=dtype).reshape(s) for n, (_, s, d) in buffers.items() if n != "mask"}
    if FAULT == "nomask" and h["form"] == "mask":
        raise Unsupported("only the window form")
    marker = os.path.join(os.environ.get("KVC_FAULT_DIR", "/tmp"), "faulted-" + FAULT)
    if FAULT == "crash-always" and t["query"].shape[0] > 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    if t["query"].shape[0] > 1 and not os.path.exists(marker) and FAULT not in ("nomask", "crash-always"):
        open(marker, "w").close()
        print(f"faulty_adapter: {FAULT} now", file=sys.stderr, flush=True)
        if FAULT == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif FAULT == "hang":
            time.sleep(3600)
        elif FAULT == "exit":
            os._exit(3)
        elif FAULT == "garbage":
            os.write(PROTOCOL, b"\xff\xff\xff\x7fnot a header")
            time.sleep(3600)
        elif FAULT == "print":
            os.write(PROTOCOL, b"Loading weights from /tmp/model.bin\n")
        elif FAULT == "refuse":
            raise RuntimeError(f"refused case {h['case']} step {h['step']} layer {h['layer']}")
    kv = t["key"].shape[2]
    k = torch.arange(kv) + h["kv_offset"]
    q = torch.tensor(h["query_positions"])[:, None]
    lp = torch.tensor(h["left_padding"] or [0] * t["query"].shape[0])[:, None, None]
    m = (k <= q) & (k >= lp)
    if h["layer_type"] == "sliding":
        m &= k > q - h["window"]
    elif h["layer_type"] == "chunked":
        m &= (k - lp) // h["window"] == (q - lp) // h["window"]
    out = torch.nn.functional.scaled_dot_product_attention(
        t["query"], t["key"], t["value"], attn_mask=m[:, None], scale=h["scale"], enable_gqa=True)
    out = torch.where(m.any(-1)[:, None, :, None], out, 0).contiguous()
    import ctypes
    return h["dtype"], tuple(out.shape), ctypes.string_at(out.data_ptr(), out.numel() * out.element_size())


serve_handler("faulty_" + FAULT, "fails on batch > 1", attention)
