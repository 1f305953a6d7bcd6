#!/usr/bin/env python3
"""kvconform engine worker for OpenVINO (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(bash engines/setup_env.sh openvino) engines/openvino/adapter.py`.

The engine under test is OpenVINO's CPU plugin running a stateful LLM graph, the form OpenVINO GenAI's
LLMPipeline runs (its KV cache lives in the model's variables):
  * export: the HF checkpoint (transformers, eager attention) is traced by openvino.convert_model
    (TorchScript, example of 7 cached + 3 new tokens) through a wrapper whose inputs are input_ids,
    position_ids and every layer's past key/value and whose outputs are the logits and every layer's
    present key/value; openvino._offline_transformations.apply_make_stateful_transformation then
    turns each past/present pair into a variable. The window is whatever the traced graph computes:
    transformers' sliding-window mask, traced over a cache that keeps every position. Saved once
    per (checkpoint, mutant) as IR under ${KVC_CACHE:-~/.cache/kvconform}/openvino-models/<key>.
    optimum-intel is not used: its 2.2.0 needs transformers<5.6 and torchvision.
  * load: ov.Core().compile_model(IR, "CPU", INFERENCE_PRECISION_HINT f32); one infer request per
    sequence (its variables are that sequence's cache).
  * extend: request.infer(input_ids, position_ids) -> logits [1, n, vocab]: every new position.
    OpenVINO GenAI's LLMPipeline is not the entry point: generate() returns tokens and scores,
    not the logits of every new position.
  * rollback: each variable's state read, cut to length - n along the sequence axis, set back (what
    GenAI's trim of the KV cache does); reload: the states copied out, the request reset, copied back;
    fork: the source's states cut to the prefix, copied into the new sequence's request (prefix reuse);
    spec: extend, then rollback of the rejected tokens.
Options: none (any key is refused by name). Mutants reach the transformers config before the export
through kvconform.mutate_hf_config (window_off_by_one+1 / window_off_by_one-1 / full, and the model mutants a config can say);
fork_off_by_one forks one token short, spec_rollback_off_by_one drops one token more than a cycle rejected; fork_shared,
window_restarts_per_chunk and batch_offset are refused (set_state copies; no chunked or batch operation).
"""
import contextlib
import hashlib
import json
import os
import shutil
import sys
import time

from kvconform import Engine, cache_lock, mutate_hf_config, serve_engine

with contextlib.redirect_stdout(sys.stderr):
    import numpy as np
    import openvino as ov
    import openvino_genai
    import torch
    import transformers
    from openvino._offline_transformations import apply_make_stateful_transformation
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache


def log(*a):
    print("[openvino]", *a, file=sys.stderr, flush=True)


# Part of the exported IR's cache key: a new kv.json layout or wrapper exports again.
EXPORT_FORMAT = 3


def cache_root():
    return os.path.join(os.environ.get("KVC_CACHE") or os.path.expanduser("~/.cache/kvconform"), "openvino-models")


class KVWrap(torch.nn.Module):
    """input_ids, position_ids, past k0, v0, k1, ... -> logits, present k0, v0, ..."""

    def __init__(self, model, layers):
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, input_ids, position_ids, *kv):
        cache = DynamicCache()
        for i in range(self.layers):
            # DynamicLayer's lazy init concatenates onto torch.tensor([]), a 1-D empty tensor that
            # OpenVINO's Concat refuses; initialise from an empty slice, then hold the past as is.
            cache.update(kv[2 * i][:, :, :0], kv[2 * i + 1][:, :, :0], i)
            cache.layers[i].keys, cache.layers[i].values = kv[2 * i], kv[2 * i + 1]
        o = self.model(input_ids=input_ids, position_ids=position_ids, cache_position=position_ids[0],
                       past_key_values=cache, use_cache=True)
        out = [o.logits]
        for layer in o.past_key_values.layers[: self.layers]:
            out += [layer.keys, layer.values]
        return tuple(out)


def export(model_dir, config, out):
    # Eager attention, and for a MoE the batched_mm experts (each token's experts gathered by index):
    # transformers 5.24.0's default grouped_mm counts tokens per expert with torch.histc, which
    # OpenVINO's PyTorch frontend cannot convert (aten::histc), and the eager experts loop over the
    # experts the example input hits, which a trace would freeze.
    hf = AutoModelForCausalLM.from_pretrained(model_dir, config=config, attn_implementation="eager", dtype=torch.float32).eval()
    if hf._can_set_experts_implementation():
        hf.set_experts_implementation("batched_mm")
    c = hf.config
    # Each layer's KV shape comes from the model's own cache, not the config: a family may give
    # layer types their own head size and KV heads (Gemma 4's global_head_dim, where transformers
    # refuses a global config.head_dim) or cache fewer layers than it has.
    with torch.no_grad():
        probe = hf(input_ids=torch.zeros((1, 1), dtype=torch.long), use_cache=True).past_key_values
    # A KV-shared layer (Gemma 4's num_kv_shared_layers) reads an earlier layer's states and leaves
    # its own cache layer empty: only the layers that cache are carried.
    cached = [i for i, layer in enumerate(probe.layers) if layer.keys is not None and layer.keys.dim() == 4]
    if cached != list(range(len(cached))):
        raise RuntimeError(f"the layers that cache are {cached}, not the first {len(cached)}: the export carries a prefix")
    shapes = {f"past.{i}.{k}": [int(t.shape[1]), int(t.shape[3])]
              for i in cached for k, t in (("key", probe.layers[i].keys), ("value", probe.layers[i].values))}
    layers = len(cached)
    past, new = 7, 3
    ex = {"input_ids": torch.randint(0, c.vocab_size, (1, new)), "position_ids": torch.arange(past, past + new)[None]}
    for name, (heads, dim) in shapes.items():
        ex[name] = torch.randn(1, heads, past, dim)
    t0 = time.time()
    with torch.no_grad():
        # The model's own forward first: its failure is the model's (transformers' file and line), not
        # a conversion failure that only says the trace failed.
        wrap = KVWrap(hf, layers)
        wrap(*ex.values())
        om = ov.convert_model(wrap, example_input=tuple(ex.values()))
    if len(om.inputs) != len(ex) or len(om.outputs) != 1 + 2 * layers:
        raise RuntimeError(f"convert_model gave {len(om.inputs)} inputs / {len(om.outputs)} outputs, "
                           f"expected {len(ex)} / {1 + 2 * layers}")
    for port, name in zip(om.inputs, ex):
        port.get_tensor().set_names({name})
    om.outputs[0].get_tensor().set_names({"logits"})
    for i in range(layers):
        om.outputs[1 + 2 * i].get_tensor().set_names({f"present.{i}.key"})
        om.outputs[2 + 2 * i].get_tensor().set_names({f"present.{i}.value"})
    apply_make_stateful_transformation(om, {f"past.{i}.{k}": f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")})
    os.makedirs(out, exist_ok=True)
    ov.save_model(om, os.path.join(out, "model.xml"), compress_to_fp16=False)
    with open(os.path.join(out, "kv.json"), "w") as f:
        json.dump({"layers": layers, "shapes": shapes, "vocab": c.vocab_size}, f)
    log(f"exported {model_dir} in {time.time() - t0:.1f} s ({layers} layers) to {out}")


class OpenVINOEngine(Engine):
    name = "openvino"
    version = f"{ov.get_version()} (openvino-genai {openvino_genai.__version__}, export: transformers {transformers.__version__}, torch {torch.__version__})"
    description = ("OpenVINO CPU plugin: a stateful graph from openvino.convert_model of the HF model (eager attention) "
                   "+ apply_make_stateful_transformation; infer per step gives every new position's logits; "
                   "rollback trims the variables' states")
    operations = ("rollback", "reload", "sequences", "fork", "spec")

    def __init__(self):
        self.compiled = None
        self.reqs = {}

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        if options:
            raise ValueError(f"unknown option(s) {', '.join(sorted(options))} (the openvino adapter takes none)")
        if mutant in ("fork_shared", "window_restarts_per_chunk", "batch_offset"):
            raise Unsupported(f"mutant {mutant}: OpenVINO copies a state on set (nothing to share), and the "
                              "adapter has no chunked or batch operation")
        self.mutant = mutant
        config = mutate_hf_config(AutoConfig.from_pretrained(model_dir), mutant)
        h = hashlib.sha256(config.to_json_string(use_diff=False).encode())
        with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
        h.update(json.dumps([ov.get_version(), transformers.__version__, torch.__version__, EXPORT_FORMAT]).encode())
        out = os.path.join(cache_root(), f"{os.path.basename(os.path.normpath(model_dir))}-{h.hexdigest()[:16]}")
        with cache_lock(out):
            if not os.path.exists(os.path.join(out, "kv.json")):
                shutil.rmtree(out, ignore_errors=True)
                export(model_dir, config, out)
        with open(os.path.join(out, "kv.json")) as f:
            self.kv = json.load(f)
        self.compiled = ov.Core().compile_model(os.path.join(out, "model.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        self.reqs = {}
        return int(self.kv["vocab"])

    def _req(self, seq):
        if seq not in self.reqs:
            r = self.compiled.create_infer_request()
            for s in r.query_state():
                # make_stateful names a variable by its input's name and its output's: "past.0.keypresent.0.key"
                heads, dim = self.kv["shapes"][s.name.split("present.")[0]]
                s.state = ov.Tensor(np.zeros((1, heads, 0, dim), np.float32))
            self.reqs[seq] = [r, 0]
        return self.reqs[seq]

    def extend(self, seq, tokens):
        r = self._req(seq)
        n = len(tokens)
        res = r[0].infer({"input_ids": np.array([tokens], np.int64),
                          "position_ids": np.arange(r[1], r[1] + n, dtype=np.int64)[None]})
        r[1] += n
        logits = np.asarray(res["logits"])
        if logits.shape != (1, n, self.kv["vocab"]):
            raise RuntimeError(f"logits have shape {logits.shape}, expected {(1, n, self.kv['vocab'])}")
        return np.ascontiguousarray(logits[0], dtype="<f4").tobytes()

    def rollback(self, seq, n):
        r = self._req(seq)
        if not 0 <= n <= r[1]:
            raise ValueError(f"rollback of {n} tokens from a sequence of {r[1]}")
        for s in r[0].query_state():
            a = np.array(s.state.data)
            if a.shape[2] != r[1]:
                raise RuntimeError(f"state {s.name} holds {a.shape[2]} positions, the sequence has {r[1]}")
            s.state = ov.Tensor(np.ascontiguousarray(a[:, :, : r[1] - n]))
        r[1] -= n

    def spec(self, seq, tokens, n):
        logits = self.extend(seq, tokens)
        if self.mutant == "spec_rollback_off_by_one":
            n = min(n + 1, self.reqs[seq][1])  # the mutant: one token more than the cycle rejected
        if n:
            self.rollback(seq, n)
        return logits

    def fork(self, seq, source, length):
        src = self._req(source)
        if not 0 <= length <= src[1]:
            raise ValueError(f"fork of {length} tokens: sequence {source} has {src[1]}")
        if self.mutant == "fork_off_by_one":
            length = max(length - 1, 0)  # the mutant: one token short
        states = {s.name: np.ascontiguousarray(np.array(s.state.data)[:, :, :length]) for s in src[0].query_state()}
        self.reqs.pop(seq, None)
        dst = self._req(seq)
        for s in dst[0].query_state():
            s.state = ov.Tensor(states[s.name])
        dst[1] = length

    def reload(self, seq):
        r = self._req(seq)
        saved = {s.name: np.array(s.state.data) for s in r[0].query_state()}
        r[0].reset_state()
        for s in r[0].query_state():
            s.state = ov.Tensor(saved[s.name])

    def reset(self):
        self.reqs = {}


if __name__ == "__main__":
    serve_engine(OpenVINOEngine())
