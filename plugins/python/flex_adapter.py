"""kvconform kernel adapter: PyTorch flex_attention (eager, CPU) with the block mask transformers builds
for its flex-attention path (docs/plugins.md, docs/conformance.md).

    kvconform run --backend-cmd 'plugins/python/.venv-flex/bin/python plugins/python/flex_adapter.py'

The block mask is `transformers.masking_utils.flex_attention_mask` itself, with transformers' own mask
functions: `sliding_window_causal_mask_function(W)`, `chunked_causal_mask_function(chunk, left_padding)`
or `causal_mask_function`, and the 2-D padding mask (`attention_mask`, 0 on left-padding tokens) that
`create_*_mask` would pass; `q_offset` = the first query's position, `kv_offset` = the cache's.
One change: `create_block_mask` runs without `_compile=True` (compiling the mask costs ~60 s per shape
on this CPU; the mask is the same). The kernel is `torch.nn.attention.flex_attention.flex_attention`
uncompiled and without dynamo (`_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG`: transformers'
`flex_attention_forward` always compiles, eager flex traces every new shape), with `enable_gqa=True`.
Explicit masks (the mask form) are not asked of it: KVC_ERR_UNSUPPORTED.
`--window-delta N` gives the mask function a window of W + N: the mutant that must FAIL.
"""
import argparse
import functools

from kvconform.zygote import hand_off

hand_off(("torch", "transformers.masking_utils"))  # KVC_ZYGOTE=1: a fork server's child
import torch  # noqa: E402
from torch.nn.attention import flex_attention as flex  # noqa: E402
from transformers import masking_utils  # noqa: E402

from kvconform import Unsupported  # noqa: E402
from kvconform.serve import serve_handler  # noqa: E402

_flags = argparse.ArgumentParser()
_flags.add_argument("--window-delta", type=int, default=0)
DELTA = _flags.parse_args().window_delta
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
# Eager flex_attention wraps its higher-order op in torch.compile(backend="eager") to trace the mask:
# seconds (a minute under load) for every new shape. This flag calls the same op, the same dense
# implementation, without dynamo (PyTorch's note that it breaks the backward pass does not apply here).
flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
torch._dynamo.config.disable = True  # create_block_mask traces its vmap too (8 slow recompiles, then eager)
# transformers asks for a compiled mask builder; the uncompiled one builds the same BlockMask.
masking_utils.create_block_mask = functools.partial(flex.create_block_mask, _compile=False)
torch.set_num_threads(1)


def attention(h, buffers):
    if h["form"] == "mask":
        raise Unsupported("checked with transformers' own mask functions only")
    dtype = DTYPES[h["dtype"]]

    def tensor(name):
        _, shape, data = buffers[name]
        return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)

    q, k, v = tensor("query"), tensor("key"), tensor("value")
    B, nq, kv = q.shape[0], q.shape[2], k.shape[2]
    padding = h["left_padding"]
    if h["layer_type"] == "sliding":
        mask_function = masking_utils.sliding_window_causal_mask_function(h["window"] + DELTA)
    elif h["layer_type"] == "chunked":
        lp = torch.tensor(padding or [0] * B)
        mask_function = masking_utils.chunked_causal_mask_function(h["window"], lp)
    else:
        mask_function = masking_utils.causal_mask_function
    attention_mask = None
    if padding:
        attention_mask = torch.arange(h["kv_offset"] + kv)[None, :] >= torch.tensor(padding)[:, None]
    block_mask = masking_utils.flex_attention_mask(
        batch_size=B, q_length=nq, kv_length=kv, q_offset=h["query_positions"][0], kv_offset=h["kv_offset"],
        mask_function=mask_function, attention_mask=attention_mask, device="cpu")
    out = flex.flex_attention(q, k, v, block_mask=block_mask, scale=h["scale"], enable_gqa=True)
    out = out.contiguous()
    return h["dtype"], tuple(out.shape), bytes(out.view(torch.uint8).reshape(-1).numpy())


def warm_up():
    """The first mask and kernel calls per dtype trace for seconds (tens under load): done before hello,
    which has the startup timeout, instead of inside the first case's per-call timeout."""
    for name, dtype in DTYPES.items():
        x = torch.zeros(1, 1, 2, 8, dtype=dtype)
        h = {"form": "window", "dtype": name, "layer_type": "sliding", "window": 1, "left_padding": [1],
             "query_positions": [0, 1], "kv_offset": 0, "scale": 1.0}
        attention(h, {n: (name, tuple(x.shape), bytes(x.view(torch.uint8).reshape(-1).numpy())) for n in ("query", "key", "value")})


if __name__ == "__main__":
    import transformers
    warm_up()
    serve_handler("flex_attention" + (f"_window_plus_{DELTA}" if DELTA else ""),
          f"torch {torch.__version__} flex_attention (eager) with transformers {transformers.__version__}'s flex block mask",
          attention)
