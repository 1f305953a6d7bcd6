#!/usr/bin/env python3
"""Golden fixture dumper: runs kvconform scenarios through the REAL transformers cache layers,
mask functions and attention functions, and writes what they observably do.

    python golden/dump.py --cases cases/ [more files or dirs] --out golden/fixtures/<transformers version>
    python golden/dump.py --serve      # one case JSON per stdin line -> one fixture JSON per stdout line

Run it with the interpreter of golden/.venv-<version> (see golden/setup_env.sh). The fixture format is
described in golden/README.md. At start the dumper measures the installed release's behaviours
(detect_behaviours(), recorded as `behaviours` in every fixture and the manifest; definitions in
golden/behaviours.md) and branches on them only, never on version numbers. The layers come from a
real StaticCache / DynamicCache built from a config with the case's layer_types (so 4.56's
SlidingWindowLayer / ChunkedSlidingLayer, 4.57+'s StaticSlidingWindowLayer). Per step and per layer
the dumper does what a transformers model does for that layer:

  1. get_mask_sizes BEFORE update (cache_api "cache_position": the positions tensor; "query_length":
     the query length),
  2. builds the masks with sdpa_mask / eager_mask and the layer's mask_function, mirroring
     create_causal_mask / create_sliding_window_causal_mask / create_chunked_causal_mask of the
     installed release (allow_is_causal_skip from the measured `sdpa_skip`; crosscheck_masks.py
     proves the result equals the real builders),
  3. update ("cache_position": cache_kwargs={"cache_position": ...}; "query_length": update(k, v)),
  4. eager_attention_forward (modeling_llama) and sdpa_attention_forward (integrations) on the
     returned K/V.

Before any layer of a step is updated, the release's own builders are called as a model calls them
(builder_masks: create_causal_mask / create_sliding_window_causal_mask / create_chunked_causal_mask on
the real cache, no layer_idx) under sdpa, eager and flex_attention; the flex mask is the release's
flex_attention_mask with torch's create_mask in place of create_block_mask, i.e. its mask function
with its padding and q/kv offsets evaluated on the step's index grid. They are recorded as
`mask_builders` at the first layer of each type, with the layers each builder asked for its sizes
(`sized_from`) and its query offset (`query_offset_from`).

A second copy of every layer, in float64 with B=H=D=1 and value token_index+1, is fed the same steps
to tell which absolute token each returned/stored row holds (0 = unwritten row -> null).

A call step ({"call": "crop", "argument": -2}, cases/README.md) calls that method of every layer (and
of its row tracker) instead of an update, as a caller does: getattr(layer, method)(argument), so a
method the release's class lacks raises its AttributeError. It records each layer's sequence length
before and after, its stored rows and the attributes a caller reads (is_croppable, the maximum
length, is_compileable), and what the call raised (the layer goes on).

Torch runs with one thread under the CPU kernel pin (cpu_pin.py, set before torch is imported), so
the attention outputs are the same bits on every x86-64 CPU; every fixture records it (`cpu_kernels`).

Exit status: 0 on success, 2 on a bad case (one line `file: /pointer: message` per problem) or bad
usage; nothing is written to --out unless every case was dumped.
"""
import argparse
import contextlib
import hashlib
import inspect
import json
import os
import platform
import shutil
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cpu_pin  # noqa: E402

cpu_pin.apply()  # before torch: the CPU kernel pin (cpu_pin.py, golden/README.md "CPU kernel pin")

import kvc_inputs  # noqa: E402
import validate_cases  # noqa: E402

# KVC_ZYGOTE=1 (scripts/test.sh): run in a fork server's child that imported torch and transformers
# once (python/kvconform/zygote.py, after the pin above: the server starts with this environment).
# A copy of golden/ without the checkout's python/ folder runs itself.
_PACKAGE = os.path.join(HERE, os.pardir, "python")
if os.path.isfile(os.path.join(_PACKAGE, "kvconform", "zygote.py")):
    sys.path.append(_PACKAGE)
    from kvconform.zygote import hand_off  # noqa: E402

    hand_off(("torch", "transformers", "transformers.cache_utils", "transformers.masking_utils",
              "transformers.integrations.sdpa_attention", "transformers.models.llama.modeling_llama"))

DUMPER_VERSION = "1.4.0"
FIXTURE_FORMAT = "kvconform-fixture-v1"
MAX_MESSAGE = 600

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import cache_utils, masking_utils  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: E402

try:
    transformers.utils.logging.set_verbosity_error()
except Exception:  # pragma: no cover
    pass

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


# --------------------------------------------------------------------------------------------
# API and behaviour detection
# --------------------------------------------------------------------------------------------
# The call API (which arguments a function takes) is read from signatures; every behaviour is
# found by calling the installed package on a tiny probe, never by reading its source.
BEHAVIOUR_KEYS = ("cache_api", "sliding_layer", "sdpa_skip", "sdpa_skip_empty_cache", "static_seq_length")

Config = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig


def params(fn):
    return list(inspect.signature(fn).parameters)


class Api:
    def __init__(self):
        self.transformers_version = transformers.__version__
        self.torch_version = torch.__version__
        self.cpu_kernels = cpu_pin.record()
        # 4.56/4.57: sdpa_mask(batch_size, cache_position, kv_length, ...); 5.x: sdpa_mask(batch_size, q_length, kv_length, q_offset, ...)
        self.mask_takes_q_offset = "q_offset" in params(masking_utils.sdpa_mask)
        self.get_mask_sizes_arg = params(cache_utils.StaticLayer.get_mask_sizes)[1]  # "cache_position" or "query_length"
        self.update_takes_cache_kwargs = "cache_kwargs" in params(cache_utils.StaticLayer.update)
        self.behaviours = detect_behaviours(self)

    def describe(self):
        b = self.behaviours
        return {
            "get_mask_sizes_argument": self.get_mask_sizes_arg,
            "update_cache_kwargs": self.update_takes_cache_kwargs,
            "mask_query_positions": "q_offset" if self.mask_takes_q_offset else "cache_position",
            "allow_is_causal_skip_rule": (
                "not (is_compileable and q_length == 1)" if b["sdpa_skip"] == "not_compileable_decode" else "not is_compileable"
            ),
            "eager_attention": "transformers.models.llama.modeling_llama.eager_attention_forward",
            "sdpa_attention": "transformers.integrations.sdpa_attention.sdpa_attention_forward",
        }


API = None


def api():
    global API
    if API is None:
        API = Api()
    return API


def make_config(layer_types, window, impl=None):
    """A model config as far as the caches and mask builders read it."""
    cfg = Config()
    cfg.layer_types = list(layer_types)
    cfg.num_hidden_layers = len(layer_types)
    cfg.sliding_window = window
    cfg.attention_chunk_size = window
    if impl is not None:
        cfg._attn_implementation = impl
    return cfg


def make_cache(kind, layer_types, window, max_cache_len=None):
    """A real StaticCache / DynamicCache built from a config, the way a model builds it."""
    cfg = make_config(layer_types, window)
    if kind == "static":
        return cache_utils.StaticCache(config=cfg, max_cache_len=max_cache_len)
    return cache_utils.DynamicCache(config=cfg)


def layer_update(A, layer, k, v, positions):
    if A.update_takes_cache_kwargs:
        return layer.update(k, v, cache_kwargs={"cache_position": positions})
    return layer.update(k, v)


def layer_mask_sizes(A, layer, positions, q_len):
    if A.get_mask_sizes_arg == "cache_position":
        return layer.get_mask_sizes(positions)
    return layer.get_mask_sizes(q_len)


def create_mask(fn, cfg, embeds, attention_mask, positions, cache, layer_idx=None, extra=None):
    """Calls a create_*_mask builder with the argument names of the installed release. `extra`: the
    case's further builder arguments (position_ids, and_mask_function, or_mask_function), each
    passed only where the release takes it (builder_call_arguments checks that first)."""
    names = params(fn)
    kw = {"config": cfg, "attention_mask": attention_mask}
    kw["inputs_embeds" if "inputs_embeds" in names else "input_embeds"] = embeds
    kw["cache" if "cache" in names else "past_key_values"] = cache
    if "cache_position" in names:
        kw["cache_position"] = positions
    if layer_idx is not None and "layer_idx" in names:
        kw["layer_idx"] = layer_idx
    kw.update(extra or {})
    return fn(**kw)


def detect_behaviours(A):
    """Each behaviour of the fixture's `behaviours` record, measured on tiny probes (see golden/behaviours.md)."""
    b = {}
    b["cache_api"] = "cache_position" if A.get_mask_sizes_arg == "cache_position" else "query_length"
    if (A.get_mask_sizes_arg == "cache_position") != A.update_takes_cache_kwargs or (
        A.get_mask_sizes_arg == "cache_position"
    ) == A.mask_takes_q_offset:
        raise RuntimeError(
            f"unknown call API: get_mask_sizes({A.get_mask_sizes_arg}), update cache_kwargs={A.update_takes_cache_kwargs}, "
            f"sdpa_mask q_offset={A.mask_takes_q_offset}"
        )

    # sliding_layer: which classes a StaticCache gives sliding and chunked layers
    sc = make_cache("static", ["sliding_attention", "chunked_attention"], 2, 4)
    b["sliding_layer"] = "merged" if type(sc.layers[0]) is type(sc.layers[1]) else "pre_merge"

    # sdpa_skip: create_causal_mask on a static (compileable) cache, sdpa, no padding, full layer of 4 rows:
    # a 4-token prefill (kv_length == q_length, skippable) and a 1-token step after 3 tokens.
    def skipped(cache, q, start):
        cfg = make_config(["full_attention"], None, "sdpa")
        embeds = torch.zeros(1, q, 1)
        pos = torch.arange(start, start + q)
        return create_mask(masking_utils.create_causal_mask, cfg, embeds, None, pos, cache) is None

    def filled(kind, n):
        cache = make_cache(kind, ["full_attention"], None, 4)
        k = torch.ones(1, 1, n, 1)
        layer_update(A, cache.layers[0], k, k.clone(), torch.arange(n))
        return cache

    static_prefill = skipped(make_cache("static", ["full_attention"], None, 4), 4, 0)
    static_decode = skipped(filled("static", 3), 1, 3)
    dynamic = (skipped(make_cache("dynamic", ["full_attention"], None), 4, 0), skipped(filled("dynamic", 3), 1, 3))
    if dynamic != (True, True):
        raise RuntimeError(f"create_causal_mask does not skip on a dynamic cache: {dynamic}")
    if not static_prefill and not static_decode:
        b["sdpa_skip"] = "not_compileable"
    elif static_prefill and not static_decode:
        b["sdpa_skip"] = "not_compileable_decode"
    else:
        raise RuntimeError(f"unknown allow_is_causal_skip rule: static prefill skipped {static_prefill}, decode {static_decode}")

    # sdpa_skip_empty_cache: sdpa_mask for 2 queries at positions 0, 1 over 4 key rows whose last two are the
    # unwritten tail (2D mask of the 2 seen tokens, or none at all)
    def empty_cache_skip(am):
        kw = dict(batch_size=1, kv_length=4, kv_offset=0, mask_function=masking_utils.causal_mask_function,
                  attention_mask=am, allow_is_causal_skip=True)
        if A.mask_takes_q_offset:
            kw.update(q_length=2, q_offset=0)
        else:
            kw.update(cache_position=torch.arange(2))
        return masking_utils.sdpa_mask(**kw) is None

    with_mask, without = empty_cache_skip(torch.ones(1, 2, dtype=torch.bool)), empty_cache_skip(None)
    if with_mask != without:
        raise RuntimeError(f"sdpa_mask empty-cache skip differs with ({with_mask}) and without ({without}) a 2D mask")
    b["sdpa_skip_empty_cache"] = with_mask

    # static_seq_length: a full static layer fed one non-zero and one all-zero row
    layer = make_cache("static", ["full_attention"], None, 4).layers[0]
    k = torch.tensor([1.0, 0.0]).reshape(1, 1, 2, 1)
    layer_update(A, layer, k, k.clone(), torch.arange(2))
    n = as_int(layer.get_seq_length())
    if n not in (1, 2):
        raise RuntimeError(f"StaticLayer.get_seq_length after 2 rows (one zero) = {n}")
    b["static_seq_length"] = "nonzero_rows" if n == 1 else "cumulative"
    assert tuple(b) == BEHAVIOUR_KEYS
    return b


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def tensor_bytes(t):
    assert sys.byteorder == "little"
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def exc_record(phase, e):
    msg = str(e)
    if len(msg) > MAX_MESSAGE:
        msg = msg[:MAX_MESSAGE] + "..."
    return {"phase": phase, "type": type(e).__name__, "message": msg}


def as_int(x):
    if isinstance(x, torch.Tensor):
        return int(x.item())
    return int(x)


class DummyAttention(torch.nn.Module):
    """What eager/sdpa attention functions read from the attention module."""

    def __init__(self, groups):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True
        self.training = False


def layer_attributes(layer):
    """What a caller reads of a layer: is_croppable (None where the release has no such attribute),
    get_max_length() (get_max_cache_shape() before it existed), is_compileable."""
    if hasattr(layer, "get_max_length"):
        max_length = layer.get_max_length()
    else:
        max_length = layer.get_max_cache_shape()
    croppable = getattr(layer, "is_croppable", None)
    return {
        "is_croppable": None if croppable is None else bool(croppable),
        "max_length": as_int(max_length),
        "is_compileable": bool(getattr(layer, "is_compileable", False)),
    }


def call_method(layer, step):
    fn = getattr(layer, step["call"])  # AttributeError where the release's class has no such method
    return fn(step["argument"]) if "argument" in step else fn()


def positions_after_call(step, seen):
    """The positions a case counts after a call step (scenario.h, LayerMethod::positions_after)."""
    if step["call"] == "reset":
        return 0
    if step["call"] == "crop":
        n = step["argument"]
        return max(seen + n, 0) if n < 0 else seen if n == 0 else min(seen, n)
    return seen


def dump_call_step(layer, tracker, step):
    rec = {"cumulative_length_before": seq_length(layer)}
    errors = []
    try:
        call_method(layer, step)
    except Exception as e:
        errors.append(exc_record(step["call"], e))
    try:
        call_method(tracker, step)
    except Exception:  # raises as the layer does; its rows are read as they are
        pass
    rec["cumulative_length_after"] = seq_length(layer)
    if layer.keys is None:
        rec["stored"] = None
    else:
        sk, sv = layer.keys, layer.values
        rows = rows_of(tracker.keys) if tracker.keys is not None and tracker.keys.shape[-2] == sk.shape[-2] else None
        rec["stored"] = {"shape": list(sk.shape), "rows": rows, "k_sha256": sha256_bytes(tensor_bytes(sk)),
                         "v_sha256": sha256_bytes(tensor_bytes(sv))}
    rec["attributes"] = layer_attributes(layer)
    rec["errors"] = errors
    return rec


def make_case_cache(case):
    """A real StaticCache / DynamicCache built from the case's layer_types."""
    cache = make_cache(case["cache"], case["layer_types"], case.get("window"), case.get("max_cache_len"))
    if len(cache.layers) != len(case["layer_types"]):
        raise RuntimeError(f"{type(cache).__name__} built {len(cache.layers)} layers for {len(case['layer_types'])} layer types")
    return cache


def make_layers(case):
    """The case's layers, taken from a real StaticCache / DynamicCache built from its layer_types."""
    return list(make_case_cache(case).layers)


def seq_length(layer):
    return as_int(layer.get_seq_length())


def rows_of(t):
    """Tracker tensor [1,1,n,1] of token_index+1 (0 = never written) -> list of token index or None."""
    out = []
    for x in t.reshape(-1).tolist():
        out.append(None if x == 0 else int(round(x)) - 1)
    return out


def mask_strings(m):
    """Bool mask [B,1,q,kv] -> per batch row, one '1'/'0' string per query."""
    m = m.to(torch.bool)
    out = []
    for b in range(m.shape[0]):
        rows = []
        for qi in range(m.shape[2]):
            rows.append("".join("1" if x else "0" for x in m[b, 0, qi].tolist()))
        out.append(rows)
    return out


def tensor_summary(t, rows):
    return {"shape": list(t.shape), "rows": rows}


def out_record(t):
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "hex": tensor_bytes(t).hex()}


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------
def build_inputs(case, layer, step_index, seen, tokens):
    """Returns float64 tensors q [B,H,q,D], k, v [B,KV,q,D] for one layer and step."""
    B, H, KV, D = case["batch"], case["heads"], case["kv_heads"], case["head_dim"]
    inp = case["inputs"]
    ex = inp.get("explicit")

    def gen(tensor, seed, heads):
        vals = kvc_inputs.step_block(seed, tensor, layer, B, heads, seen, tokens, D)
        return torch.tensor(vals, dtype=torch.float64).reshape(B, heads, tokens, D)

    def explicit(tensor, heads):
        return torch.tensor(ex[tensor][step_index], dtype=torch.float64).reshape(B, heads, tokens, D)

    if ex is None:
        seed = inp["seed"]
        return gen("q", seed, H), gen("k", seed, KV), gen("v", seed, KV)
    q = explicit("q", H) if "q" in ex else gen("q", 0, H)
    return q, explicit("k", KV), explicit("v", KV)


# --------------------------------------------------------------------------------------------
# the release's own mask builders
# --------------------------------------------------------------------------------------------
# What a model of the release does for its masks: create_causal_mask / create_sliding_window_causal_mask
# / create_chunked_causal_mask, called as a model calls them (no layer_idx: the builder picks the
# layer it sizes the mask from), once per layer type and step, before any layer is updated, under
# each attention implementation's config. The flex path is the release's flex_attention_mask (its
# padding and its q/kv offsets) with torch's create_block_mask replaced by torch's own create_mask
# (flex_attention.py): the same mask_mod evaluated on the step's whole index grid, no kernel and no
# compile. The layer each builder sizes from and the one its query offset comes from are measured by
# watching which layers it asks, not assumed.
BUILDERS = {
    "full_attention": "create_causal_mask",
    "sliding_attention": "create_sliding_window_causal_mask",
    "chunked_attention": "create_chunked_causal_mask",
}


@contextlib.contextmanager
def flex_on_the_index_grid():
    from torch.nn.attention import flex_attention

    def grid(mask_mod, B, H, Q_LEN, KV_LEN, device=None, **kwargs):
        return flex_attention.create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cpu")

    saved = masking_utils.create_block_mask
    masking_utils.create_block_mask = grid
    try:
        yield
    finally:
        masking_utils.create_block_mask = saved


@contextlib.contextmanager
def asked_layers(cache):
    """Which layers a builder asks, outermost calls only (a layer's get_mask_sizes asks its own
    get_seq_length): {"get_mask_sizes": [layer, ...], "get_seq_length": [layer, ...]}."""
    asked = {"get_mask_sizes": [], "get_seq_length": []}
    depth = [0]
    for i, layer in enumerate(cache.layers):
        for name in asked:
            def watched(*args, _method=getattr(layer, name), _i=i, _name=name, **kwargs):
                if depth[0] == 0:
                    asked[_name].append(_i)
                depth[0] += 1
                try:
                    return _method(*args, **kwargs)
                finally:
                    depth[0] -= 1
            setattr(layer, name, watched)  # an instance attribute shadows the method
    try:
        yield asked
    finally:
        for layer in cache.layers:
            for name in asked:
                layer.__dict__.pop(name, None)


# The case's `mask_builder_call` (cases/README.md): the builder arguments a model passes beyond the
# 2D mask and the cache, from a small named vocabulary, so that the builders' other branches run:
# no cache (a forward without past_key_values), packed position_ids (the packed-sequence overlay),
# an explicit layer_idx, an and/or mask function (the vmap expansion), a 4D mask passed through.
def document_of(x, lengths):
    """The document of position x when documents of `lengths` tokens follow each other (positions
    past the last one belong to a last document): index arithmetic only, so vmap and flex's
    create_mask can trace it."""
    d, end = x * 0, 0
    for n in lengths:
        end += n
        d = d + (x >= end).to(x.dtype)
    return d


def named_mask_function(spec, positions):
    """and_mask / or_mask of mask_builder_call -> a masking_utils mask function; `positions`: more
    than any position a builder evaluates it on (a per_element table's size)."""
    if spec["kind"] == "not_a_function":  # what the builders refuse (and_masks / or_masks check callable)
        return 1
    if spec["kind"] == "prefix":  # a bidirectional prefix (prefix-LM, image tokens): every query sees keys < length
        n = spec["length"]
        fn = lambda batch_idx, head_idx, q_idx, kv_idx: kv_idx < n  # noqa: E731
    else:
        lengths = spec["lengths"]  # "same_document": a query sees the keys of its own document only
        fn = lambda batch_idx, head_idx, q_idx, kv_idx: document_of(q_idx, lengths) == document_of(kv_idx, lengths)  # noqa: E731
    if not spec.get("per_element"):
        return fn
    # Written for one (query, key) at a time, as a caller may: table[q_idx][kv_idx] reads a row, then
    # an element. The vmap expansion (and flex's create_mask) evaluates it; broadcast index tensors
    # would index the row's first dimension with kv_idx, so only a builder that takes the vmap path
    # for custom mask functions gets the mask.
    grid = torch.arange(positions)
    table = fn(None, None, grid[:, None], grid[None, :]).expand(positions, positions).contiguous()
    return lambda batch_idx, head_idx, q_idx, kv_idx: table[q_idx][kv_idx]


def packed_position_ids(lengths, first, q_len):
    """position_ids [1, q] (unsqueezed, not expanded, as a model passes them) of tokens first ..
    first + q - 1 when the sequence packs documents of `lengths` tokens: each restarts at 0."""
    out, bounds = [], [0]
    for n in lengths:
        bounds.append(bounds[-1] + n)
    for t in range(first, first + q_len):
        out.append(t - max(b for b in bounds if b <= t))
    return torch.tensor([out], dtype=torch.long)


def builder_call_arguments(case, fn, seen, q_len, am):
    """(use the cache?, attention_mask, layer_idx, extra keyword arguments) for one builder call
    under the case's mask_builder_call; raises ValueError where the release's builder lacks one."""
    call = case.get("mask_builder_call") or {}
    names = params(fn)
    extra = {}
    if "packed_documents" in call:
        extra["position_ids"] = packed_position_ids(call["packed_documents"], seen, q_len)
    positions = sum(st.get("tokens", 0) for st in case["steps"]) + (case.get("max_cache_len") or 0) + 1
    for key, arg in (("and_mask", "and_mask_function"), ("or_mask", "or_mask_function")):
        if key in call:
            extra[arg] = named_mask_function(call[key], positions)
    for key in ("layer_idx", "block_sequence_ids"):
        if key in call and key not in names:
            raise ValueError(f"{fn.__name__} of this release takes no {key} (mask_builder_call.{key})")
    if "block_sequence_ids" in call:
        extra["block_sequence_ids"] = torch.tensor(call["block_sequence_ids"], dtype=torch.long)
    if call.get("attention_mask_4d") and am is not None:
        # a prepared 4D mask: the 2D mask's keys for every query, passed through as it is
        am = am.to(torch.bool)[:, None, None, :].expand(am.shape[0], 1, q_len, am.shape[1])
    return call.get("cache", True), am, call.get("layer_idx"), extra


def builder_error(e):
    """A builder's raise: its phase and type (its message may name a function's address)."""
    return {"phase": "mask_builder", "type": type(e).__name__}


def builder_masks(A, case, cache, dtype, positions, am, dead, seen=0):
    """({layer: record} for the first layer of each type: what the release's own builder returns for
    that type's layers at this step, under sdpa, eager and flex_attention (see BUILDERS) and, with
    mask_builder_call.flash, flash_attention_2; {layer type: record} for the builders of the
    mask_builder_call's absent_layer_types, which the cache holds no layer of)."""
    absent = (case.get("mask_builder_call") or {}).get("absent_layer_types", [])
    out, out_absent = {}, {}
    for lt, name in BUILDERS.items():
        if lt in case["layer_types"]:
            li = case["layer_types"].index(lt)
            if dead[li] is None:
                out[li] = builder_record(A, case, cache, dtype, positions, am, dead, seen, name)
        elif lt in absent:
            out_absent[lt] = builder_record(A, case, cache, dtype, positions, am, dead, seen, name)
    return out, out_absent


def builder_record(A, case, cache, dtype, positions, am, dead, seen, name):
    B, q_len = case["batch"], len(positions)
    embeds = torch.zeros(B, q_len, 1, dtype=dtype)
    fn = getattr(masking_utils, name)
    use_cache, mask_arg, layer_idx, extra = builder_call_arguments(case, fn, seen, q_len, am)
    impls = ["sdpa", "eager", "flex_attention"]
    if (case.get("mask_builder_call") or {}).get("flash"):
        impls.append("flash_attention_2")
    rec = {"builder": name}
    got = {}
    for impl in impls:
        cfg = make_config(case["layer_types"], case.get("window"), impl)
        with asked_layers(cache) as asked, flex_on_the_index_grid():
            try:
                got[impl] = create_mask(fn, cfg, embeds, mask_arg, torch.tensor(positions, dtype=torch.long),
                                        cache if use_cache else None, layer_idx, extra)
            except Exception as e:
                got[impl] = e
        sized = sorted(set(asked["get_mask_sizes"]))
        offset = sorted(set(asked["get_seq_length"]))
        if len(sized) > 1 or len(offset) > 1 or (not sized and use_cache and mask_arg is am and not isinstance(got[impl], Exception)):
            raise RuntimeError(f"{name} under {impl} asked layers {asked}: expected one layer's mask sizes")
        # none asked: called without the cache, a 4D mask returned before the cache is asked, or a raise before it
        where = {"sized_from": sized[0] if sized else None, "query_offset_from": offset[0] if offset else None}
        if "sized_from" in rec and {k: rec[k] for k in where} != where:
            raise RuntimeError(f"{name} asked other layers under {impl} ({where}) than before ({rec})")
        rec.update(where)
    failed = [dead[j] for j in (rec["sized_from"], rec["query_offset_from"]) if j is not None and dead[j] is not None]
    if failed:
        rec["skipped"] = f"the layer it sizes from failed at step {min(failed)}"
        return rec
    if (case.get("mask_builder_call") or {}).get("unregistered_attention"):
        rec["unregistered"] = unregistered_record(fn, case, embeds, mask_arg, positions, cache if use_cache else None,
                                                  layer_idx, extra)
    for impl, m in got.items():
        key = {"flex_attention": "flex", "flash_attention_2": "flash"}.get(impl, impl)
        if isinstance(m, Exception):
            rec[key] = {"error": builder_error(m)}
        elif impl == "sdpa":
            rec[key] = {"skipped": m is None, "rows": None if m is None else mask_strings(m)}
        elif impl == "flash_attention_2":  # flash_attention_mask: the 2D mask cut to the keys, or none
            rec[key] = {"mask": None if m is None else ["".join(str(int(x)) for x in row) for row in m.tolist()]}
        elif impl == "eager" and m.dtype == torch.bool:  # a 4D mask passed through: its own bytes
            rec[key] = {"shape": list(m.shape), "sha256": sha256_bytes(tensor_bytes(m)), "dtype": "bool"}
        elif impl == "eager":
            rec[key] = {"shape": list(m.shape), "sha256": sha256_bytes(tensor_bytes(m))}
        else:
            rec[key] = {"shape": list(m.shape), "rows": mask_strings(m)}
    return rec


# An attention implementation registered with AttentionInterface but not with the mask interface, as a
# custom kernel or a serving backend (TGI, vLLM) registers its own: the builders make no mask for it.
UNREGISTERED_ATTENTION = "kvc_unregistered_attention"


def unregistered_record(fn, case, embeds, mask_arg, positions, cache, layer_idx, extra):
    """mask_builder_call.unregistered_attention: what the builder returns under UNREGISTERED_ATTENTION
    (a mask passed through: its own bytes, as eager's record of one; none: {"mask": null})."""
    from transformers import AttentionInterface
    AttentionInterface.register(UNREGISTERED_ATTENTION, lambda *args, **kwargs: None)
    cfg = make_config(case["layer_types"], case.get("window"), UNREGISTERED_ATTENTION)
    try:
        m = create_mask(fn, cfg, embeds, mask_arg, torch.tensor(positions, dtype=torch.long), cache, layer_idx, extra)
    except Exception as e:
        return {"error": builder_error(e)}
    if m is None:
        return {"mask": None}
    return {"shape": list(m.shape), "sha256": sha256_bytes(tensor_bytes(m)), "dtype": str(m.dtype).replace("torch.", "")}


# --------------------------------------------------------------------------------------------
# the dump of one case
# --------------------------------------------------------------------------------------------
def layer_mask_function(ltype, window, left_padding_tokens):
    if ltype == "full_attention":
        return masking_utils.causal_mask_function, None, {"kind": "causal"}
    if ltype == "sliding_attention":
        return masking_utils.sliding_window_causal_mask_function(window), window, {"kind": "sliding_window_causal", "window": window}
    return (
        masking_utils.chunked_causal_mask_function(window, left_padding_tokens),
        window,
        {"kind": "chunked_causal", "chunk_size": window, "left_padding_tokens": [int(x) for x in left_padding_tokens.tolist()]},
    )


def dump_case(case, case_bytes):
    distribution = case["inputs"].get("distribution", "mix64")
    if distribution != "mix64":  # a kernel numerics case (cases/README.md): not a golden fixture
        raise ValueError(f"{case['name']}: inputs.distribution is {distribution!r}; the golden dumper generates "
                         "kvc-mix64-v1's mix64 inputs only (normal and large_logits cases are for the kernel checks)")
    A = api()
    torch.set_num_threads(1)
    dtype = DTYPES[case["dtype"]]
    B, H, KV, D = case["batch"], case["heads"], case["kv_heads"], case["head_dim"]
    steps = case["steps"]
    total = sum(s.get("tokens", 0) for s in steps)
    lp = case.get("left_padding")
    full_2d = None
    if lp is not None:
        full_2d = torch.tensor([[0] * min(n, total) + [1] * (total - min(n, total)) for n in lp], dtype=torch.long)
    module = DummyAttention(H // KV).eval()
    scaling = D ** -0.5

    cache = make_case_cache(case)  # the builders ask the cache, as a model's do
    layers, trackers = list(cache.layers), make_layers(case)
    dead = [None] * len(layers)
    layer_info = []
    for i, lt in enumerate(case["layer_types"]):
        layer = layers[i]
        info = {
            "index": i,
            "type": lt,
            "class": type(layer).__name__,
            "window": case.get("window") if lt != "full_attention" else None,
            "max_cache_len": case.get("max_cache_len"),
            "capacity": getattr(layer, "max_cache_len", None),
            "is_compileable": bool(getattr(layer, "is_compileable", False)),
        }
        layer_info.append(info)

    fixture = {
        "format": FIXTURE_FORMAT,
        "case": case["name"],
        "case_sha256": sha256_bytes(case_bytes),
        "transformers_version": A.transformers_version,
        "torch_version": A.torch_version,
        "cpu_kernels": A.cpu_kernels,
        "dumper_version": DUMPER_VERSION,
        "api": A.describe(),
        "behaviours": dict(A.behaviours),
        "dtype": case["dtype"],
        "scaling": repr(scaling),
        "layers": layer_info,
        "steps": [],
        "errors": [],
    }

    # seen: the positions so far (a crop counts back); fed: the tokens fed since the last reset, the
    # inputs' token index (a crop does not count back, so tokens fed after it have new values).
    seen = fed = 0
    for si, step in enumerate(steps):
        if "call" in step:
            step_rec = {
                "index": si,
                "call": {"method": step["call"], "argument": step.get("argument")},
                "tokens": 0,
                "token_range": [seen, seen],
                "cache_position": None,
                "attention_mask_2d": None,
                "layers": [],
            }
            for li in range(len(layers)):
                rec = {"layer": li}
                step_rec["layers"].append(rec)
                if dead[li] is not None:
                    rec["skipped"] = f"layer failed at step {dead[li]}"
                    continue
                rec.update(dump_call_step(layers[li], trackers[li], step))
                for e in rec["errors"]:
                    fixture["errors"].append(dict(step=si, layer=li, **e))
            fixture["steps"].append(step_rec)
            seen = positions_after_call(step, seen)
            fed = 0 if step["call"] == "reset" else fed
            continue
        q_len = step["tokens"]
        cp_list = step.get("cache_position")
        positions = cp_list if cp_list is not None else list(range(seen, seen + q_len))
        am = full_2d[:, : seen + q_len] if full_2d is not None else None
        am_bool = am.to(dtype=torch.bool) if am is not None else None
        if am_bool is not None:
            left_padding_tokens = (am_bool.cumsum(dim=-1) == torch.zeros_like(am_bool)).sum(dim=-1)
        else:
            left_padding_tokens = torch.zeros(B, dtype=torch.long)
        step_rec = {
            "index": si,
            "tokens": q_len,
            "token_range": [seen, seen + q_len],
            "cache_position": positions if A.behaviours["cache_api"] == "cache_position" else None,
            "attention_mask_2d": ["".join(str(int(x)) for x in row) for row in am.tolist()] if am is not None else None,
            "layers": [],
        }
        built, built_absent = builder_masks(A, case, cache, dtype, positions, am, dead, seen)
        for li, lt in enumerate(case["layer_types"]):
            rec = {"layer": li}
            step_rec["layers"].append(rec)
            if dead[li] is not None:
                rec["skipped"] = f"layer failed at step {dead[li]}"
                continue
            layer, tracker = layers[li], trackers[li]
            rec.update(dump_layer_step(
                A, case, layer, tracker, lt, li, si, seen, fed, q_len, positions, am_bool, left_padding_tokens,
                dtype, module, scaling, B, H, KV, D,
            ))
            if li in built:
                rec["mask_builders"] = built[li]
            if li == 0 and built_absent:
                rec["mask_builders_absent"] = built_absent
            errs = rec.get("errors") or []
            for e in errs:
                fixture["errors"].append(dict(step=si, layer=li, **e))
            if any(e["phase"] == "update" for e in errs):
                dead[li] = si
        fixture["steps"].append(step_rec)
        seen += q_len
        fed += q_len
    return fixture


def dump_layer_step(A, case, layer, tracker, lt, li, si, seen, fed, q_len, positions, am_bool, left_padding_tokens,
                    dtype, module, scaling, B, H, KV, D):
    rec = {}
    errors = []
    rec["cumulative_length_before"] = seq_length(layer)
    cp_tensor = torch.tensor(positions, dtype=torch.long)

    # ---- 1. mask sizes, before update
    kv_length = kv_offset = None
    q_offset = None
    try:
        kv_length, kv_offset = layer_mask_sizes(A, layer, cp_tensor, q_len)
        kv_length, kv_offset = as_int(kv_length), as_int(kv_offset)
        rec["mask_sizes"] = {"kv_length": kv_length, "kv_offset": kv_offset}
    except Exception as e:
        rec["mask_sizes"] = None
        errors.append(exc_record("get_mask_sizes", e))

    if A.behaviours["cache_api"] == "query_length":
        # what _preprocess_mask_arguments uses: cache.get_query_offset(layer_idx) == layer.get_seq_length()
        q_offset = layer.get_seq_length()
        q_offset = q_offset.clone() if isinstance(q_offset, torch.Tensor) else q_offset
        rec["q_positions"] = list(range(as_int(q_offset), as_int(q_offset) + q_len))
    else:
        rec["q_positions"] = list(positions)

    # ---- 2. masks
    is_compileable = bool(getattr(layer, "is_compileable", False))
    if A.behaviours["sdpa_skip"] == "not_compileable_decode":
        allow_skip = not (is_compileable and q_len == 1)
    else:
        allow_skip = not is_compileable
    rec["allow_is_causal_skip"] = allow_skip
    mask_fn, local_size, mf_desc = layer_mask_function(lt, case.get("window"), left_padding_tokens)
    rec["mask_function"] = mf_desc
    sdpa_m = bool_m = eager_m = None
    masks_ok = False
    if kv_length is not None:
        kw = dict(batch_size=B, kv_length=kv_length, kv_offset=kv_offset, mask_function=mask_fn, attention_mask=am_bool)
        if local_size is not None:
            kw["local_size"] = local_size
        if A.behaviours["cache_api"] == "query_length":
            kw.update(q_length=q_len, q_offset=q_offset, device="cpu")
        else:
            kw.update(cache_position=cp_tensor)
        try:
            sdpa_m = masking_utils.sdpa_mask(allow_is_causal_skip=allow_skip, **kw)
            bool_m = masking_utils.sdpa_mask(allow_is_causal_skip=False, **kw)
            eager_m = masking_utils.eager_mask(dtype=dtype, **kw)
            masks_ok = True
        except Exception as e:
            errors.append(exc_record("mask", e))
    rec["sdpa_mask_skipped"] = (sdpa_m is None) if masks_ok else None
    rec["sdpa_mask"] = mask_strings(sdpa_m) if sdpa_m is not None else None
    rec["bool_mask"] = mask_strings(bool_m) if bool_m is not None else None
    if eager_m is not None:
        rec["eager_mask"] = {
            "dtype": str(eager_m.dtype).replace("torch.", ""),
            "shape": list(eager_m.shape),
            "sha256": sha256_bytes(tensor_bytes(eager_m)),
            "masked_value": repr(float(torch.finfo(dtype).min)),
        }
    else:
        rec["eager_mask"] = None

    # ---- 3. update (real layer, then the row tracker)
    q64, k64, v64 = build_inputs(case, li, si, fed, q_len)
    q, k, v = q64.to(dtype), k64.to(dtype), v64.to(dtype)
    K = V = None
    try:
        K, V = layer_update(A, layer, k, v, cp_tensor)
        K, V = K.clone(), V.clone()  # static layers return their own buffers, mutated by later steps
    except Exception as e:
        errors.append(exc_record("update", e))
    tr_vals = torch.arange(seen + 1, seen + q_len + 1, dtype=torch.float64).reshape(1, 1, q_len, 1)
    tK = None
    try:
        tK, _ = layer_update(A, tracker, tr_vals, tr_vals.clone(), cp_tensor)
        tK = tK.clone()
    except Exception:
        tK = None
    rec["cumulative_length_after"] = seq_length(layer) if K is not None else None

    if K is not None:
        rec["returned"] = {
            "shape": list(K.shape),
            "rows": rows_of(tK) if tK is not None and tK.shape[-2] == K.shape[-2] else None,
            "k_sha256": sha256_bytes(tensor_bytes(K)),
            "v_sha256": sha256_bytes(tensor_bytes(V)),
        }
        sk, sv = layer.keys, layer.values
        st_rows = None
        if tracker.keys is not None and tracker.keys.shape[-2] == sk.shape[-2]:
            st_rows = rows_of(tracker.keys)
        rec["stored"] = {
            "shape": list(sk.shape),
            "rows": st_rows,
            "k_sha256": sha256_bytes(tensor_bytes(sk)),
            "v_sha256": sha256_bytes(tensor_bytes(sv)),
        }
    else:
        rec["returned"] = None
        rec["stored"] = None

    # ---- 4. attention with the returned K/V
    att = {"eager": None, "sdpa": None}
    if K is not None and masks_ok:
        try:
            out, _ = eager_attention_forward(module, q, K, V, eager_m, scaling=scaling, dropout=0.0)
            att["eager"] = out_record(out)
        except Exception as e:
            errors.append(exc_record("attention_eager", e))
            att["eager"] = {"error": exc_record("attention_eager", e)}
        try:
            out, _ = sdpa_attention_forward(module, q, K, V, sdpa_m, dropout=0.0, scaling=scaling)
            att["sdpa"] = out_record(out)
        except Exception as e:
            errors.append(exc_record("attention_sdpa", e))
            att["sdpa"] = {"error": exc_record("attention_sdpa", e)}
    rec["attention"] = att
    rec["errors"] = errors
    return rec


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def applies(case):
    releases = validate_cases.releases_of(case)
    return releases is None or api().transformers_version in releases


def dumps_fixture(fx, pretty):
    if pretty:
        return json.dumps(fx, indent=1, ensure_ascii=True) + "\n"
    return json.dumps(fx, separators=(",", ":"), ensure_ascii=True)


def run_batch(paths, out_dir):
    files = validate_cases.expand_paths(paths)
    if not files:
        print("dump: no case files given", file=sys.stderr)
        return 2
    loaded = []
    bad = False
    names = {}
    for p in files:
        try:
            case, raw, errs = validate_cases.load_case_file(p)
        except OSError as e:
            print(f"{p}: /: cannot read: {e.strerror}")
            bad = True
            continue
        if not errs and case["name"] in names:
            errs = [("/name", f"duplicate case name, also in {names[case['name']]}")]
        for ptr, msg in errs:
            print(f"{p}: {ptr}: {msg}")
        if errs:
            bad = True
            continue
        names[case["name"]] = p
        loaded.append((p, case, raw))
    if bad:
        return 2

    A = api()
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".dump-", dir=parent)
    try:
        manifest_cases = {}
        skipped = []
        for p, case, raw in loaded:
            if not applies(case):
                skipped.append(case["name"])
                continue
            fx = dump_case(case, raw)
            text = dumps_fixture(fx, pretty=True)
            with open(os.path.join(tmp, case["name"] + ".json"), "w", encoding="ascii") as f:
                f.write(text)
            manifest_cases[case["name"]] = {
                "case_file": os.path.relpath(os.path.abspath(p), os.path.dirname(HERE)),
                "case_sha256": sha256_bytes(raw),
                "fixture_sha256": sha256_bytes(text.encode("ascii")),
                "errors": len(fx["errors"]),
            }
        manifest = {
            "format": "kvconform-fixture-manifest-v1",
            "transformers_version": A.transformers_version,
            "torch_version": A.torch_version,
            "cpu_kernels": A.cpu_kernels,
            "python_version": platform.python_version(),
            "numpy_version": __import__("numpy").__version__,
            "dumper_version": DUMPER_VERSION,
            "fixture_format": FIXTURE_FORMAT,
            "torch_num_threads": 1,
            "api": A.describe(),
            "behaviours": dict(A.behaviours),
            "cases": dict(sorted(manifest_cases.items())),
            "skipped_by_profile": sorted(skipped),
        }
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="ascii") as f:
            f.write(json.dumps(manifest, indent=1) + "\n")
        os.chmod(tmp, 0o755)
        old = None
        if os.path.exists(out_dir):
            old = out_dir + ".old-" + os.path.basename(tmp)
            os.rename(out_dir, old)
        os.rename(tmp, out_dir)
        if old:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"dump: {len(manifest_cases)} fixtures ({len(skipped)} skipped by profile) -> {out_dir}", file=sys.stderr)
    return 0


def serve():
    """One case JSON per input line -> one fixture JSON per output line. A bad line gets
    {"error": {"pointer":..., "message":...}} (all problems in "problems") instead of a fixture."""
    api()
    for line in sys.stdin:
        raw = line.rstrip("\r\n")
        if not raw.strip():
            continue
        try:
            case = json.loads(raw)
        except ValueError as e:
            resp = {"format": FIXTURE_FORMAT, "invalid_case": [{"pointer": "/", "message": f"invalid JSON: {e}"}]}
        else:
            errs = validate_cases.check_case_obj(case) if isinstance(case, dict) else [("/", "case must be a JSON object")]
            if errs:
                resp = {"format": FIXTURE_FORMAT, "case": case.get("name") if isinstance(case, dict) else None,
                        "invalid_case": [{"pointer": p, "message": m} for p, m in errs]}
            elif not applies(case):
                resp = {"format": FIXTURE_FORMAT, "case": case["name"], "skipped_by_profile": True,
                        "transformers_version": api().transformers_version}
            else:
                try:
                    resp = dump_case(case, raw.encode("utf-8"))
                except Exception as e:  # an internal dumper failure, not a transformers one
                    resp = {"format": FIXTURE_FORMAT, "case": case.get("name"),
                            "dumper_error": exc_record("dumper", e), "traceback": traceback.format_exc()}
        sys.stdout.write(dumps_fixture(resp, pretty=False) + "\n")
        sys.stdout.flush()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="kvconform golden fixture dumper")
    ap.add_argument("--cases", nargs="+", metavar="PATH", help="case files or directories")
    ap.add_argument("--out", help="output directory, replaced atomically (e.g. golden/fixtures/<version>)")
    ap.add_argument("--serve", action="store_true", help="read case JSON lines on stdin, write fixture lines")
    args = ap.parse_args(argv)
    if args.serve:
        if args.cases or args.out:
            ap.error("--serve takes no --cases/--out")
        return serve()
    if not args.cases or not args.out:
        ap.error("--cases and --out are required (or --serve)")
    return run_batch(args.cases, args.out)


if __name__ == "__main__":
    sys.exit(main())
