"""`kvconform.kernel`: an attention kernel as a decorated function.

The decorator records what the function takes (the window convention, the layouts, dtypes, layer
types, tensor library and axis order); `Kernel.handle` turns one attention call of kvconform's
subprocess protocol (docs/plugins.md, "Kernels in another process") into a call of the function in
those terms, and its result back into the protocol's `out`.
"""
from __future__ import annotations

import functools
import inspect
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union, overload

from .protocol import Buffer, Header, Unsupported

__all__ = ["CONVENTIONS", "DTYPES", "LAYER_TYPES", "LAYOUTS", "Kernel", "Unsupported", "kernel"]

# convention: (keyword the function gets, value for a sliding window of W, value for no window)
CONVENTIONS: Dict[str, Tuple[str, Callable[[int], Any], Any]] = {
    # transformers' config.sliding_window: a query sees W keys, counting itself
    "transformers": ("sliding_window", lambda w: w, None),
    # FlashAttention's flash_attn_func(window_size=(left, right)): keys i - left .. i + right; causal
    "flash": ("window_size", lambda w: (w - 1, 0), (-1, 0)),
    # FlashInfer's window_left: keys i - window_left .. i; -1 = no window
    "flashinfer": ("window_left", lambda w: w - 1, -1),
}
# layout: (the protocol's form, the keywords the function must take for it)
LAYOUTS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "window": ("window", ()),
    "mask": ("mask", ("attn_mask",)),
    "key_padding_mask": ("key_padding", ("key_padding_mask",)),
    "varlen": ("varlen", ("cu_seqlens_q", "cu_seqlens_k")),
    # not a form of its own: the window form with a float32 [H] buffer of per-head sink logits
    # (gpt-oss), which join each row's softmax without a value
    "sinks": ("window", ("sinks",)),
}
OPTIONAL_LAYOUTS = ("key_padding_mask", "varlen", "sinks")  # declared in the hello; the host sends them only then
DTYPES = ("float32", "float16", "bfloat16", "float64")
LAYER_TYPES = ("sliding", "full", "chunked")
SCALE_NAMES = ("scale", "softmax_scale", "sm_scale")  # SDPA, FlashAttention, FlashInfer


Result = Tuple[str, Tuple[int, ...], bytes]


@overload
def kernel(fn: Callable[..., Any], *, window: str = ..., layouts: Union[str, Iterable[str]] = ...,
           dtypes: Iterable[str] = ..., layer_types: Iterable[str] = ..., qkv: str = ..., gqa: bool = ...,
           tensors: str = ..., device: str = ..., name: Optional[str] = ..., description: Optional[str] = ...) -> Kernel: ...
@overload
def kernel(fn: None = ..., *, window: str = ..., layouts: Union[str, Iterable[str]] = ...,
           dtypes: Iterable[str] = ..., layer_types: Iterable[str] = ..., qkv: str = ..., gqa: bool = ...,
           tensors: str = ..., device: str = ..., name: Optional[str] = ...,
           description: Optional[str] = ...) -> Callable[[Callable[..., Any]], Kernel]: ...
def kernel(fn: Optional[Callable[..., Any]] = None, *, window: str = "transformers",
           layouts: Union[str, Iterable[str]] = ("window",), dtypes: Iterable[str] = DTYPES,
           layer_types: Iterable[str] = ("sliding", "full"), qkv: str = "bhsd", gqa: bool = True,
           tensors: str = "torch", device: str = "cpu", name: Optional[str] = None,
           description: Optional[str] = None) -> Union[Kernel, Callable[[Callable[..., Any]], Kernel]]:
    """Declare an attention kernel for kvconform.

    window: the convention of the window keyword the function gets: "transformers"
        (sliding_window=W, None without a window), "flash" (window_size=(W - 1, 0), (-1, 0)),
        "flashinfer" (window_left=W - 1, -1).
    layouts: what the function can be called with: "window" (the window keyword), "mask" (also
        attn_mask, bool [B, 1, q, kv], True = attend), "key_padding_mask" (also key_padding_mask,
        bool [B, kv], True = a real key), "varlen" (FlashAttention's packed layout: q [total_q, H, D],
        k, v [total_k, Hkv, D], cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), "sinks"
        (also sinks, float32 [H]: per-head logits that join each row's softmax without a value, as
        gpt-oss's attention sinks; sent with the window form).
    dtypes, layer_types: the others are answered unsupported (SKIP). A "chunked" kernel gets
        chunk_size=C and the no-window value of its convention.
    qkv: "bhsd" ([batch, heads, seq, head_dim], SDPA's) or "bshd" (FlashAttention's).
    gqa: False: k and v are repeated to the query's head count before the call.
    tensors: "torch" or "numpy"; device: where torch tensors are put ("cuda", ...).
    """
    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, window=window, layouts=layouts, dtypes=dtypes, layer_types=layer_types, qkv=qkv,
                      gqa=gqa, tensors=tensors, device=device, name=name, description=description)
    return wrap(fn) if fn is not None else wrap


class Kernel:
    """A function declared with @kvconform.kernel: callable as the function, served by `handle`."""

    def __init__(self, fn: Callable[..., Any], *, window: str, layouts: Union[str, Iterable[str]],
                 dtypes: Iterable[str], layer_types: Iterable[str], qkv: str, gqa: bool, tensors: str, device: str,
                 name: Optional[str], description: Optional[str]) -> None:
        if window not in CONVENTIONS:
            raise ValueError(f"kvconform.kernel: window={window!r}: one of {', '.join(CONVENTIONS)}")
        layouts = (layouts,) if isinstance(layouts, str) else tuple(layouts)
        dtypes, layer_types = tuple(dtypes), tuple(layer_types)
        checks: Sequence[Tuple[str, Sequence[str], Iterable[str]]] = (("layouts", layouts, LAYOUTS), ("dtypes", dtypes, DTYPES),
                                    ("layer_types", layer_types, LAYER_TYPES), ("qkv", (qkv,), ("bhsd", "bshd")),
                                    ("tensors", (tensors,), ("torch", "numpy")))
        for what, values, known in checks:
            known = tuple(known)
            bad = [v for v in values if v not in known]
            if bad:
                raise ValueError(f"kvconform.kernel: {what} {bad}: known are {', '.join(known)}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.layouts: Tuple[str, ...]
        self.window = window
        self.layouts = layouts
        self.dtypes = tuple(dtypes)
        self.layer_types = tuple(layer_types)
        self.qkv, self.gqa, self.tensors, self.device = qkv, gqa, tensors, device
        self.name = name or fn.__name__
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        doc = (fn.__doc__ or getattr(module, "__doc__", None) or "").strip().splitlines()
        self.description = description or (doc[0] if doc else f"{fn.__module__}.{fn.__qualname__}")
        params = inspect.signature(fn).parameters
        self.accepts = {n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        self.window_keyword = CONVENTIONS[window][0]
        missing: List[str] = [] if self.window_keyword in self.accepts else [self.window_keyword]
        for layout in layouts:
            missing += [k for k in LAYOUTS[layout][1] if k not in self.accepts]
        if "chunked" in self.layer_types and "chunk_size" not in self.accepts and "left_padding" not in self.accepts:
            missing.append("chunk_size")
        if missing:
            raise TypeError(f"kvconform.kernel: {fn.__qualname__} must take the keyword(s) {', '.join(missing)} "
                            f"(window={window!r}, layouts={list(layouts)}, layer_types={list(self.layer_types)})")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<kvconform.kernel {self.name} window={self.window!r} layouts={list(self.layouts)}>"

    def hello(self) -> Header:
        """The worker's answer to the host's hello."""
        optional = [lay for lay in self.layouts if lay in OPTIONAL_LAYOUTS]
        reply: Header = {"status": "ok", "name": self.name, "description": self.description}
        if optional:
            reply["layouts"] = optional
        return reply

    # --- one attention call
    def handle(self, header: Header, buffers: Dict[str, Buffer]) -> Result:
        """(header, {name: (dtype, shape, bytes)}) -> (dtype, shape, bytes) of out; raises Unsupported."""
        h = header
        form = h.get("form", "window")
        layout = next((lay for lay, (f, _) in LAYOUTS.items() if f == form), form)
        if layout not in self.layouts:
            raise Unsupported(f"{self.name} does not declare the {layout} layout")
        if h["dtype"] not in self.dtypes:
            raise Unsupported(f"{self.name} does not declare dtype {h['dtype']}")
        if h["layer_type"] not in self.layer_types:
            raise Unsupported(f"{self.name} does not declare {h['layer_type']} layers")
        lib: Any = _Torch(self.device) if self.tensors == "torch" else _Numpy()
        t = {n: lib.tensor(*b) for n, b in buffers.items()}
        q, k, v = t["query"], t["key"], t["value"]
        kw: Dict[str, Any] = {}
        self._window_arguments(h, kw, masked=form == "mask")
        if "sinks" in t:
            if "sinks" not in self.layouts:
                raise Unsupported(f"{self.name} does not declare the sinks layout")
            kw["sinks"] = t["sinks"]
        scale = next((n for n in SCALE_NAMES if n in self.accepts), None)
        if scale:
            kw[scale] = h["scale"]
        if form == "varlen":
            return self._varlen(h, lib, q, k, v, kw)

        positions, offset, left = h["query_positions"], h["kv_offset"], h.get("left_padding")
        batch, kv = q.shape[0], k.shape[2]
        if "query_positions" in self.accepts:  # the function aligns queries and keys itself
            keep = kv
            kw["query_positions"] = lib.ints(positions)
            if "kv_offset" in self.accepts:
                kw["kv_offset"] = offset
        else:
            # bottom-right causal alignment (FlashAttention's, SDPA's is_causal for q == kv): keys
            # after the last query are never seen (causal), so they are dropped; then query i is key
            # kv - q + i, which needs consecutive query positions
            if any(p != positions[0] + i for i, p in enumerate(positions)):
                raise Unsupported(f"{self.name} takes no query_positions and the queries are not consecutive")
            keep = max(0, min(kv, positions[-1] - offset + 1))
            k, v = k[:, :, :keep], v[:, :, :keep]
        padding = None  # [B, keep] bool, True = a real key
        if form == "key_padding":
            padding = t["key_padding_mask"][:, :keep] != 0
            kw["key_padding_mask"] = padding
        elif left and any(left):
            if "left_padding" in self.accepts:
                kw["left_padding"] = lib.ints(left)
            elif "key_padding_mask" in self.accepts and h["layer_type"] != "chunked":
                padding = lib.from_list([[offset + j >= left[b] for j in range(keep)] for b in range(batch)])
                kw["key_padding_mask"] = padding
            else:
                raise Unsupported(f"{self.name} takes neither left_padding nor key_padding_mask, and the batch is "
                                  "left-padded" + (" (chunked: chunks start at the padding)"
                                                   if h["layer_type"] == "chunked" else ""))
        mask = None
        if form == "mask":
            mask = t["mask"][:, :, :keep] != 0
            kw["attn_mask"] = mask[:, None]
        for extra, value in (("case", h.get("case")), ("step", h.get("step"))):
            if extra in self.accepts:
                kw[extra] = value
        sees_nothing = self._rows_without_keys(h, keep, mask, padding, lib)
        if keep == 0:
            out = lib.zeros_like(q)
        else:
            if not self.gqa:
                k, v = lib.repeat_heads(k, q.shape[1]), lib.repeat_heads(v, q.shape[1])
            if self.qkv == "bshd":
                q, k, v = (lib.swap12(x) for x in (q, k, v))
            out = self.fn(q, k, v, **kw)
            _check_output(self.name, out, q)
            if self.qkv == "bshd":
                out = lib.swap12(out)
        result: Result = lib.out(out, sees_nothing)
        return result

    def _window_arguments(self, h: Header, kw: Dict[str, Any], masked: bool) -> None:
        keyword, convert, none = CONVENTIONS[self.window]
        if h["layer_type"] == "sliding" and not masked:
            kw[keyword] = convert(h["window"])
        else:
            kw[keyword] = none
        if h["layer_type"] == "chunked" and "chunk_size" in self.accepts:
            kw["chunk_size"] = None if masked else h["window"]

    def _varlen(self, h: Header, lib: Any, q: Any, k: Any, v: Any, kw: Dict[str, Any]) -> Result:
        kw["cu_seqlens_q"], kw["cu_seqlens_k"] = lib.ints(h["cu_seqlens_q"], 32), lib.ints(h["cu_seqlens_k"], 32)
        for name in ("max_seqlen_q", "max_seqlen_k"):
            if name in self.accepts:
                kw[name] = h[name]
        if not self.gqa:
            k, v = lib.repeat_heads(k, q.shape[1], axis=1), lib.repeat_heads(v, q.shape[1], axis=1)
        out = self.fn(q, k, v, **kw)
        _check_output(self.name, out, q)
        result: Result = lib.out(out, [])
        return result

    @staticmethod
    def _rows_without_keys(h: Header, keep: int, mask: Any, padding: Any, lib: Any) -> List[Tuple[Any, int]]:
        """(b, i) of the queries that see no key: their rows are zeroed, as FlashAttention returns them."""
        if mask is not None:
            sees = lib.tolist(mask.any(-1))
            return [(b, i) for b, row in enumerate(sees) for i, s in enumerate(row) if not s]
        positions, offset, left = h["query_positions"], h["kv_offset"], h.get("left_padding")
        real = lib.tolist(padding) if padding is not None else None
        rows: List[Tuple[Any, int]] = []
        for b in range(len(real) if real is not None else (len(left) if left else 1)):
            for i, p in enumerate(positions):
                lo, hi = offset, min(p, offset + keep - 1)
                if left:
                    lo = max(lo, left[b])
                if h["layer_type"] == "sliding":
                    lo = max(lo, p - h["window"] + 1)
                elif h["layer_type"] == "chunked":
                    lp = left[b] if left else 0
                    lo = max(lo, lp + (p - lp) // h["window"] * h["window"])
                seen = [j for j in range(lo, hi + 1) if real is None or real[b][j - offset]]
                if not seen:
                    rows.append((b, i))
        if left is None and real is None and rows:  # one batch row computed: the same for all
            return [("all", i) for _, i in rows]
        return rows


def _check_output(name: str, out: Any, q: Any) -> None:
    if not hasattr(out, "shape") or tuple(out.shape) != tuple(q.shape):
        shape = tuple(out.shape) if hasattr(out, "shape") else type(out).__name__
        raise ValueError(f"{name} returned {shape}, expected the query's shape {tuple(q.shape)}")


class _Torch:
    def __init__(self, device: str) -> None:
        import torch
        self.torch: Any = torch
        self.device = device
        self.dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                       "float64": torch.float64, "uint8": torch.uint8}

    def tensor(self, dtype: str, shape: Sequence[int], data: bytes) -> Any:
        d = self.dtypes[dtype]
        flat = self.torch.frombuffer(bytearray(data) or bytearray(1), dtype=d)[: len(data) // d.itemsize]
        return flat.reshape(shape).to(self.device)

    def ints(self, values: Sequence[int], bits: int = 64) -> Any:
        return self.torch.tensor(values, dtype=self.torch.int32 if bits == 32 else self.torch.int64, device=self.device)

    def from_list(self, rows: List[List[bool]]) -> Any:
        return self.torch.tensor(rows, dtype=self.torch.bool, device=self.device)

    def zeros_like(self, x: Any) -> Any:
        return self.torch.zeros_like(x)

    def repeat_heads(self, x: Any, heads: int, axis: int = 1) -> Any:
        return x.repeat_interleave(heads // x.shape[axis], dim=axis)

    def swap12(self, x: Any) -> Any:
        return x.transpose(1, 2).contiguous()

    def tolist(self, x: Any) -> Any:
        return x.tolist()

    def out(self, out: Any, rows_without_keys: List[Tuple[Any, int]]) -> Result:
        import ctypes
        out = out.detach().to("cpu").contiguous().clone()
        for b, i in rows_without_keys:
            out[(slice(None) if b == "all" else b), :, i, :] = 0
        data = ctypes.string_at(out.data_ptr(), out.numel() * out.element_size())
        return str(out.dtype).replace("torch.", ""), tuple(out.shape), data


class _Numpy:
    def __init__(self) -> None:
        import numpy
        self.np: Any = numpy

    def tensor(self, dtype: str, shape: Sequence[int], data: bytes) -> Any:
        if dtype == "bfloat16":
            raise Unsupported("numpy has no bfloat16")
        return self.np.frombuffer(data, dtype=dtype).reshape(shape).copy()

    def ints(self, values: Sequence[int], bits: int = 64) -> Any:
        return self.np.asarray(values, dtype=self.np.int32 if bits == 32 else self.np.int64)

    def from_list(self, rows: List[List[bool]]) -> Any:
        return self.np.asarray(rows, dtype=bool)

    def zeros_like(self, x: Any) -> Any:
        return self.np.zeros_like(x)

    def repeat_heads(self, x: Any, heads: int, axis: int = 1) -> Any:
        return self.np.repeat(x, heads // x.shape[axis], axis=axis)

    def swap12(self, x: Any) -> Any:
        return self.np.ascontiguousarray(x.transpose(0, 2, 1, 3))

    def tolist(self, x: Any) -> Any:
        return x.tolist()

    def out(self, out: Any, rows_without_keys: List[Tuple[Any, int]]) -> Result:
        out = self.np.array(out, copy=True, order="C")
        for b, i in rows_without_keys:
            out[(slice(None) if b == "all" else b), :, i, :] = 0
        return out.dtype.name, out.shape, out.tobytes()
