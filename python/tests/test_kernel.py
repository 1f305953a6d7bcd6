"""The decorator and the worker loop, without the kvconform binary: what the decorated function is
called with for each convention and layout, what is answered unsupported, and the protocol's bytes."""
import ctypes
import io
import os
import struct
import json
import subprocess
import sys

import pytest
import torch

import kvconform
from kvconform import protocol
from kvconform.kernel import Unsupported

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "sdpa_kernel.py")


def buffers(**tensors):
    out = {}
    for name, t in tensors.items():
        t = t.contiguous()
        out[name] = (str(t.dtype)[6:], tuple(t.shape), ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    return out


def header(layer_type="sliding", window=3, positions=(4,), kv_offset=2, left_padding=None, form="window",
           dtype="float32", **more):
    h = {"op": "attention", "form": form, "dtype": dtype, "layer_type": layer_type, "window": window,
         "window_left": window - 1 if layer_type == "sliding" else -1, "query_positions": list(positions),
         "kv_offset": kv_offset, "left_padding": left_padding, "scale": 0.5, "case": "plugin/x/kernel/t/float32",
         "step": 0, "layer": 0}
    h.update(more)
    return h


def qkv(batch=1, heads=2, kv_heads=1, q=1, kv=4, dim=4, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(batch, heads, q, dim, generator=g, dtype=dtype),
            torch.randn(batch, kv_heads, kv, dim, generator=g, dtype=dtype),
            torch.randn(batch, kv_heads, kv, dim, generator=g, dtype=dtype))


def recorder(**decl):
    calls = []

    def fn(q, k, v, **kw):
        calls.append(dict(kw, q=q, k=k, v=v))
        return torch.zeros_like(q)
    params = decl.pop("params")
    ns = {}
    exec(f"def f(q, k, v, *, {', '.join(params)}):\n    kw = dict(locals())\n"
         "    return fn(kw.pop('q'), kw.pop('k'), kw.pop('v'), **kw)", {"fn": fn}, ns)
    return kvconform.kernel(ns["f"], **decl), calls


@pytest.mark.parametrize("convention,keyword,sliding,full", [
    ("transformers", "sliding_window", 3, None),
    ("flash", "window_size", (2, 0), (-1, 0)),
    ("flashinfer", "window_left", 2, -1),
])
def test_conventions(convention, keyword, sliding, full):
    k, calls = recorder(window=convention, params=[keyword, "scale"])
    q, key, v = qkv()
    k.handle(header(), buffers(query=q, key=key, value=v))
    k.handle(header(layer_type="full", window=0), buffers(query=q, key=key, value=v))
    assert calls[0][keyword] == sliding and calls[1][keyword] == full
    assert calls[0]["scale"] == 0.5


def test_scale_names_and_chunk_size():
    k, calls = recorder(window="flash", layer_types=["chunked"], params=["window_size", "softmax_scale", "chunk_size"])
    q, key, v = qkv()
    k.handle(header(layer_type="chunked", window=2), buffers(query=q, key=key, value=v))
    assert calls[0]["softmax_scale"] == 0.5 and calls[0]["chunk_size"] == 2 and calls[0]["window_size"] == (-1, 0)


def test_keys_after_the_last_query_are_dropped():
    # a static layer's buffer: kv_offset 0, 6 rows, the query at position 2 -> keys 0..2
    k, calls = recorder(window="flash", params=["window_size"])
    q, key, v = qkv(kv=6)
    k.handle(header(positions=[2], kv_offset=0), buffers(query=q, key=key, value=v))
    assert calls[0]["k"].shape[2] == 3 and torch.equal(calls[0]["k"], key[:, :, :3])


def test_query_positions_taken_means_no_trimming():
    k, calls = recorder(window="transformers", params=["sliding_window", "query_positions", "kv_offset"])
    q, key, v = qkv(kv=6)
    k.handle(header(positions=[2], kv_offset=0), buffers(query=q, key=key, value=v))
    assert calls[0]["k"].shape[2] == 6 and calls[0]["query_positions"].tolist() == [2] and calls[0]["kv_offset"] == 0


def test_undeclared_layout_dtype_layer_type_are_unsupported():
    k, _ = recorder(window="flash", dtypes=["float32"], params=["window_size"])
    q, key, v = qkv()
    b = buffers(query=q, key=key, value=v, mask=torch.ones(1, 1, 4, dtype=torch.uint8))
    for h, words in ((header(form="mask"), "mask layout"), (header(dtype="float16"), "dtype float16"),
                     (header(layer_type="chunked"), "chunked layers")):
        with pytest.raises(Unsupported, match=words):
            k.handle(h, b)


def test_left_padding_becomes_a_key_padding_mask_or_unsupported():
    k, calls = recorder(window="flash", params=["window_size", "key_padding_mask=None"])
    q, key, v = qkv(batch=2, q=3, kv=3)
    k.handle(header(positions=[0, 1, 2], kv_offset=0, left_padding=[0, 1]), buffers(query=q, key=key, value=v))
    assert calls[0]["key_padding_mask"].tolist() == [[True, True, True], [False, True, True]]
    bare, _ = recorder(window="flash", params=["window_size"])
    with pytest.raises(Unsupported, match="left-padded"):
        bare.handle(header(positions=[0, 1, 2], kv_offset=0, left_padding=[0, 1]), buffers(query=q, key=key, value=v))


def test_declaring_a_layout_needs_its_keyword():
    with pytest.raises(TypeError, match="attn_mask"):
        kvconform.kernel(lambda q, k, v, *, window_size: q, window="flash", layouts=["window", "mask"])
    with pytest.raises(TypeError, match="window_left"):
        kvconform.kernel(lambda q, k, v, *, window_size: q, window="flashinfer")
    with pytest.raises(ValueError, match="window="):
        kvconform.kernel(lambda q, k, v, *, window_size: q, window="W-1")


def test_sinks_are_passed_where_declared_and_unsupported_elsewhere():
    k, calls = recorder(window="flash", layouts=["window", "sinks"], params=["window_size", "sinks"])
    assert k.hello()["layouts"] == ["sinks"]
    q, key, v = qkv()
    sinks = torch.tensor([0.25, -1.5])
    k.handle(header(sinks=True), buffers(query=q, key=key, value=v, sinks=sinks))
    assert torch.equal(calls[0]["sinks"], sinks) and calls[0]["window_size"] == (2, 0)
    with pytest.raises(TypeError, match="sinks"):
        kvconform.kernel(lambda q, k, v, *, window_size: q, window="flash", layouts=["window", "sinks"])
    bare, _ = recorder(window="flash", params=["window_size"])
    assert "layouts" not in bare.hello()
    with pytest.raises(Unsupported, match="sinks layout"):
        bare.handle(header(sinks=True), buffers(query=q, key=key, value=v, sinks=sinks))


def test_bshd_and_no_gqa():
    k, calls = recorder(window="flash", qkv="bshd", gqa=False, params=["window_size"])
    q, key, v = qkv(heads=4, kv_heads=2, q=2, kv=5)
    k.handle(header(positions=[3, 4], kv_offset=0), buffers(query=q, key=key, value=v))
    got = calls[0]
    assert got["q"].shape == (1, 2, 4, 4) and got["k"].shape == (1, 5, 4, 4)
    assert torch.equal(got["k"][0, :, 1], key[0, 0]) and torch.equal(got["k"][0, :, 2], key[0, 1])


def reference(h, q, k, v, key_padding=None):
    """float64 loops: what a query may see (docs/plugins.md, "(a) The attention kernel")."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    group = q.shape[1] // k.shape[1]
    for b in range(q.shape[0]):
        for hh in range(q.shape[1]):
            for i, p in enumerate(h["query_positions"]):
                keys = []
                for j in range(k.shape[2]):
                    t = h["kv_offset"] + j
                    ok = t <= p and (not h["left_padding"] or t >= h["left_padding"][b])
                    ok = ok and (h["layer_type"] != "sliding" or t > p - h["window"])
                    ok = ok and (key_padding is None or bool(key_padding[b, j]))
                    if ok:
                        keys.append(j)
                if keys:
                    s = torch.stack([(q[b, hh, i].double() @ k[b, hh // group, j].double()) * h["scale"] for j in keys])
                    w = torch.softmax(s, 0)
                    out[b, hh, i] = sum(w[n] * v[b, hh // group, j].double() for n, j in enumerate(keys))
    return out


def load_example():
    from kvconform.serve import load
    return load(EXAMPLE + ":sdpa_flash")


@pytest.mark.parametrize("h,shape", [
    (header(positions=[5], kv_offset=2, window=3), dict(kv=4)),                     # decode, window full
    (header(positions=[0, 1, 2, 3, 4, 5], kv_offset=0, window=3), dict(q=6, kv=6)),  # prefill > window
    (header(positions=[2], kv_offset=0, window=4), dict(kv=4)),                      # static buffer not full
    (header(positions=[0, 1, 2], kv_offset=0, window=2, left_padding=[0, 2]), dict(batch=2, q=3, kv=3)),
    (header(layer_type="full", window=0, positions=[3, 4], kv_offset=0), dict(q=2, kv=5)),
])
def test_example_matches_a_float64_reference(h, shape):
    kern = load_example()
    q, k, v = qkv(**shape)
    dtype, out_shape, data = kern.handle(h, buffers(query=q, key=k, value=v))
    got = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(out_shape)
    assert dtype == "float32" and torch.allclose(got.double(), reference(h, q, k, v), atol=1e-5)


def test_serve_speaks_the_protocol():
    kern = load_example()
    q, k, v = qkv()
    requests = io.BytesIO()
    protocol.send(requests, {"op": "hello", "protocol": 1})
    b = buffers(query=q, key=k, value=v)
    protocol.send(requests, dict(header(), buffers=[]), [(n, d, s, x) for n, (d, s, x) in b.items()])
    protocol.send(requests, dict(header(dtype="float32", layer_type="chunked")), [(n, d, s, x) for n, (d, s, x) in b.items()])
    requests.seek(0)
    replies = io.BytesIO()
    from kvconform.serve import serve
    serve(kern, stdin=requests, stdout=replies)
    replies.seek(0)
    hello, _ = protocol.receive(replies)
    assert hello == {"status": "ok", "name": "sdpa_flash", "layouts": ["key_padding_mask"],
                     "description": "PyTorch SDPA behind FlashAttention's window convention: a kvconform kernel (python/README.md)."}
    ok, out = protocol.receive(replies)
    assert ok["status"] == "ok" and out["out"][1] == (1, 2, 1, 4)
    skip, _ = protocol.receive(replies)
    assert skip["status"] == "unsupported" and "chunked" in skip["error"]


def test_worker_process_answers_hello(tmp_path):
    """`python -m kvconform serve FILE:NAME` as kvconform starts it; a print at import goes to stderr."""
    chatty = tmp_path / "chatty.py"
    chatty.write_text("print('Loading weights')\n" + open(EXAMPLE).read())
    request = io.BytesIO()
    protocol.send(request, {"op": "hello", "protocol": 1})
    done = subprocess.run([sys.executable, "-m", "kvconform", "serve", f"{chatty}:sdpa_flash"],
                          input=request.getvalue(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr
    size = struct.unpack("<I", done.stdout[:4])[0]
    assert json.loads(done.stdout[4:4 + size])["name"] == "sdpa_flash"
    assert b"Loading weights" in done.stderr


def test_binary_lookup_order(tmp_path, monkeypatch):
    from kvconform.binary import NotFound, find
    fake = tmp_path / "kvconform"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find(str(fake)) == str(fake)
    monkeypatch.setenv("KVCONFORM_BIN", str(fake))
    assert find() == str(fake)
    monkeypatch.setenv("KVCONFORM_BIN", str(tmp_path / "missing"))
    with pytest.raises(NotFound, match="KVCONFORM_BIN"):
        find()
    monkeypatch.delenv("KVCONFORM_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find() == str(fake)
    monkeypatch.setenv("PATH", "/nonexistent")
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    # an old checkout's build (the CLI under harness/cli) is still found; the current layout first
    for parts in (("build", "harness", "cli"), ("build", "cli")):
        (checkout / os.path.join(*parts)).mkdir(parents=True)
        built = checkout / os.path.join(*parts) / "kvconform"
        built.write_text("#!/bin/sh\n")
        built.chmod(0o755)
        assert find(start=str(checkout / "src")) == str(built)
    monkeypatch.setattr("kvconform.binary.__file__", str(tmp_path / "elsewhere" / "binary.py"))
    with pytest.raises(NotFound, match="no kvconform binary: looked at"):
        find(start=str(tmp_path / "elsewhere"))


def test_numpy_tensors():
    np = pytest.importorskip("numpy")
    seen = {}

    @kvconform.kernel(window="flashinfer", tensors="numpy")
    def numpy_kernel(q, k, v, *, window_left, scale):
        seen["types"] = (type(q), window_left)
        return np.zeros_like(q)

    q, key, v = qkv()
    dtype, shape, data = numpy_kernel.handle(header(), buffers(query=q, key=key, value=v))
    assert seen["types"] == (np.ndarray, 2) and dtype == "float32" and shape == (1, 2, 1, 4)
    with pytest.raises(Unsupported, match="bfloat16"):
        numpy_kernel.handle(header(dtype="bfloat16"), buffers(query=q.bfloat16(), key=key.bfloat16(), value=v.bfloat16()))


def test_package_version_is_the_binarys():
    """One version number: the installed package says what `kvconform --version` says (both read VERSION)."""
    import kvconform
    from kvconform.binary import find
    first = subprocess.run([find(), "--version"], stdout=subprocess.PIPE, text=True, timeout=60, check=True).stdout
    assert first.splitlines()[0] == f"kvconform {kvconform.__version__}"
