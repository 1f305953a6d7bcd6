"""kvconform kernel adapter: ONNX Runtime's com.microsoft GroupQueryAttention (CPU), the kernel behind
ONNX Runtime GenAI's sliding-window models, as a one-node graph (docs/plugins.md, docs/conformance.md).

    kvconform run --backend-cmd 'plugins/python/.venv-ort/bin/python plugins/python/ort_gqa_adapter.py'

Mapping of one kvconform step onto GQA (batch rows one by one, past/present in BNSH):
- the keys before the first query are `past_key`/`past_value`, the queries' own rows are `key`/`value`;
  `seqlens_k = past + new - 1`, `total_sequence_length = past + new` (no shared buffer, no rotary);
- GQA counts positions from row 0 of its past, kvconform from `kv_offset`: only differences of
  positions matter for a causal window, so the shift is exact;
- left padding: the row's sequence starts at its first real token (keys before it are not passed),
  as a GenAI sequence holds no pad tokens; queries inside the padding see no key and get zeros;
- `local_window_size = W + --lws-offset`, default 0: measured, GQA's CPU kernel lets a query see
  `local_window_size` keys counting itself, transformers' `sliding_window` (docs/conformance.md), as
  GenAI's model builder passes it; `--lws-offset -1` (FlashAttention's `W - 1`, which the attribute's
  description "left_window_size" suggests) is the mutant that must FAIL;
- head_size must be a multiple of 8 on CPU: Q, K and V are padded with zero columns up to it (dot
  products unchanged, the scale stays `head_dim ** -0.5`) and the padding is cut from the output;
- chunked attention, explicit masks and float64 are not in the operator: KVC_ERR_UNSUPPORTED (SKIP).
"""
import argparse

from kvconform.zygote import hand_off

hand_off(("numpy", "onnx", "onnxruntime"))  # KVC_ZYGOTE=1: a fork server's child
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from kvconform import Unsupported  # noqa: E402
from kvconform.serve import serve_handler  # noqa: E402

_flags = argparse.ArgumentParser()
_flags.add_argument("--lws-offset", type=int, default=0)
LWS_OFFSET = _flags.parse_args().lws_offset
try:
    import ml_dtypes
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None
NP = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}
ONNX = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
_sessions = {}


def session(dtype, heads, kv_heads, head_dim, local_window_size, scale):
    key = (dtype, heads, kv_heads, head_dim, local_window_size, scale)
    if key not in _sessions:
        t = ONNX[dtype]
        inputs = [helper.make_tensor_value_info("query", t, [1, "S", heads * head_dim]),
                  helper.make_tensor_value_info("key", t, [1, "S", kv_heads * head_dim]),
                  helper.make_tensor_value_info("value", t, [1, "S", kv_heads * head_dim]),
                  helper.make_tensor_value_info("past_key", t, [1, kv_heads, "P", head_dim]),
                  helper.make_tensor_value_info("past_value", t, [1, kv_heads, "P", head_dim]),
                  helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
                  helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
        outputs = [helper.make_tensor_value_info("output", t, [1, "S", heads * head_dim]),
                   helper.make_tensor_value_info("present_key", t, [1, kv_heads, "T", head_dim]),
                   helper.make_tensor_value_info("present_value", t, [1, kv_heads, "T", head_dim])]
        node = helper.make_node("GroupQueryAttention", [i.name for i in inputs], [o.name for o in outputs],
                                domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads,
                                local_window_size=local_window_size, scale=float(scale))
        graph = helper.make_graph([node], "gqa", inputs, outputs)
        model = helper.make_model(graph, ir_version=10,  # onnx 1.23.2 writes IR 14; onnxruntime 1.31.1 reads up to 13
                                  opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # deterministic and polite on a shared machine
        options.log_severity_level = 3
        try:
            _sessions[key] = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # e.g. NOT_IMPLEMENTED: no CPU kernel for this type
            raise Unsupported(f"onnxruntime {ort.__version__} cannot build GroupQueryAttention in {dtype}: {str(e)[-300:]}")
    return _sessions[key]


def attention(h, buffers):
    dtype = h["dtype"]
    if h["form"] == "mask":
        raise Unsupported("GroupQueryAttention takes a window, not an explicit mask")
    if h["layer_type"] == "chunked":
        raise Unsupported("GroupQueryAttention has no chunked attention")
    if NP.get(dtype) is None:
        raise Unsupported(f"GroupQueryAttention takes float16, bfloat16 and float32, not {dtype}")
    def tensor(name):
        _, shape, data = buffers[name]
        return np.frombuffer(data, dtype=NP[dtype]).reshape(shape)
    q, k, v = tensor("query"), tensor("key"), tensor("value")
    B, H, nq, D = q.shape
    pad = [(0, 0)] * 3 + [(0, -D % 8)]
    q, k, v = np.pad(q, pad), np.pad(k, pad), np.pad(v, pad)
    Dp = q.shape[3]
    Hkv, kv = k.shape[1], k.shape[2]
    positions, offset = h["query_positions"], h["kv_offset"]
    first = positions[0]
    if positions != list(range(first, first + nq)) or first < offset or first + nq > offset + kv:
        raise ValueError(f"queries {positions} are not the newest rows of keys [{offset}, {offset + kv})")
    lws = h["window"] + LWS_OFFSET if h["layer_type"] == "sliding" else -1
    sess = session(dtype, H, Hkv, Dp, lws, h["scale"])
    out = np.zeros((B, H, nq, D), dtype=q.dtype)
    for b in range(B):
        start = max(offset, (h["left_padding"] or [0] * B)[b])  # the row's first real token
        active = max(first, start)  # queries before it see no key: zeros
        if active >= first + nq:
            continue
        past = slice(start - offset, active - offset)
        new = slice(active - offset, first + nq - offset)
        n_past, n_new = past.stop - past.start, new.stop - new.start
        feeds = {
            "query": np.ascontiguousarray(q[b, :, active - first:].transpose(1, 0, 2).reshape(1, n_new, H * Dp)),
            "key": np.ascontiguousarray(k[b, :, new].transpose(1, 0, 2).reshape(1, n_new, Hkv * Dp)),
            "value": np.ascontiguousarray(v[b, :, new].transpose(1, 0, 2).reshape(1, n_new, Hkv * Dp)),
            "past_key": np.ascontiguousarray(k[b:b + 1, :, past]),
            "past_value": np.ascontiguousarray(v[b:b + 1, :, past]),
            "seqlens_k": np.array([n_past + n_new - 1], dtype=np.int32),
            "total_sequence_length": np.array(n_past + n_new, dtype=np.int32),
        }
        o = sess.run(["output"], feeds)[0]
        out[b, :, active - first:] = o.reshape(n_new, H, Dp).transpose(1, 0, 2)[..., :D]
    return dtype, out.shape, out.tobytes()


if __name__ == "__main__":
    serve_handler("onnxruntime_gqa" + (f"_lws_offset_{LWS_OFFSET}" if LWS_OFFSET else ""),
          f"onnxruntime {ort.__version__} com.microsoft.GroupQueryAttention, local_window_size = W{LWS_OFFSET:+d}",
          attention)
