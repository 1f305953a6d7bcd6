#!/usr/bin/env python3
"""kvconform engine worker for ONNX Runtime GenAI (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(bash engines/setup_env.sh ort_genai) engines/ort_genai/adapter.py`.

The engine under test is onnxruntime-genai as a user runs it on a Hugging Face checkpoint:
  * build: its model builder, `python -m onnxruntime_genai.models.builder -i CHECKPOINT -o OUT
    -p fp32|fp16 -e cpu [--extra_options windowed_kv_cache=false]`, run once per (checkpoint,
    options, mutant) into ${KVC_CACHE:-~/.cache/kvconform}/ort_genai-models/<key>. The builder
    insists on a tokenizer (it loads one with AutoTokenizer even with -i); the zoo ships none, so
    the staged checkpoint gets a 256-token WordLevel tokenizer.json when it has no tokenizer of
    its own (the tokens are never used: the adapter appends ids). A builder that fails is a
    refusal (unsupported, with the builder's last lines): the plan SKIPs and the message is kept.
  * load: og.Model(OUT), the window the builder wrote into genai_config.json and the graph
    (GroupQueryAttention local_window_size, sliding_window_cache) is checked against the
    config's layer_types and reported on stderr (and refused if a sliding layer lost its window,
    unless option check_graph is false);
  * one og.Generator per sequence (batch 1), search max_length = max_tokens (at least 16);
  * extend: generator.append_tokens(ids); generator.get_output("logits") -> [1, n, vocab] float32,
    the logits of every new position (fp16 models: cast to float32);
  * rollback: generator.rewind_to(length - n) (an exception is unsupported with its message);
  * reload: onnxruntime-genai has no state save/load API (Generator.snapshot_state returns None):
    unsupported; reset: new generators.

Options (any other key is refused by name):
  precision          "fp32" (default) | "fp16" (the builder's precision, execution provider cpu)
  windowed_kv_cache  true (default, the builder's default: window-sized ring caches on sliding
                     layers, GroupQueryAttention sliding_window_cache=1) | false (every layer a
                     max_length cache, the window only as local_window_size)
  cache_slack        int >= 0 (default: the builder's 0): written into genai_config.json's
                     model.decoder.sliding_window.cache_slack (positions the ring keeps beyond the
                     window; rewind_to refuses to go back past what the ring still holds)
  check_graph        false (default: the graph's windows are only reported on stderr, the logits
                     judge) | true: refuse (SKIP) a graph whose sliding layers lack the window

Mutants rewrite the staged config.json before the builder runs: window_off_by_one+1 / window_off_by_one-1 change
sliding_window; full sets layer_types to all full_attention where the config has it, else
sliding_window = max_tokens + 1 (no plan reaches it).
"""
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from kvconform import Engine, Unsupported, cache_lock, mutated_window, serve_engine

with contextlib.redirect_stdout(sys.stderr):
    import numpy as np
    import onnx
    import onnxruntime
    import onnxruntime_genai as og

OPTIONS = {"precision": ("fp32", "fp16"), "windowed_kv_cache": (True, False), "check_graph": (True, False),
           "cache_slack": None}
DEFAULTS = {"precision": "fp32", "windowed_kv_cache": True, "check_graph": False, "cache_slack": None}
ATTN_OPS = ("GroupQueryAttention", "PagedAttention", "Attention", "MultiHeadAttention")


def log(*a):
    print("[ort_genai]", *a, file=sys.stderr, flush=True)


def cache_root():
    return os.path.join(os.environ.get("KVC_CACHE") or os.path.expanduser("~/.cache/kvconform"), "ort_genai-models")


def tokenizer_files(vocab):
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(vocab)}, "unk_token": "t0"}}
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0", "pad_token": "t0",
           "bos_token": "t1", "eos_token": "t2", "model_max_length": 1 << 20}
    return {"tokenizer.json": tok, "tokenizer_config.json": cfg}


def mutate_config(config, mutant, max_tokens):
    if mutant == "none":
        return config
    config = dict(config)
    w = mutated_window(config.get("sliding_window"), mutant) if isinstance(config.get("sliding_window"), int) else None
    if mutant != "full_attention_on_sliding":
        if w is None:
            raise Unsupported(f"mutant {mutant}: the config has no integer sliding_window")
        config["sliding_window"] = w
    elif isinstance(config.get("layer_types"), list):
        config["layer_types"] = ["full_attention"] * len(config["layer_types"])
    else:
        config["sliding_window"] = int(max_tokens) + 1
    return config


def graph_windows(onnx_path):
    """[(node name, op, local_window_size, sliding_window_cache)] of the attention nodes, in order."""
    m = onnx.load(onnx_path, load_external_data=False)
    out = []
    for n in m.graph.node:
        if n.op_type in ATTN_OPS:
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            out.append((n.name, n.op_type, a.get("local_window_size"), a.get("sliding_window_cache")))
    return out


class OrtGenaiEngine(Engine):
    name = "onnxruntime-genai"
    version = f"{og.__version__} (onnxruntime {onnxruntime.__version__})"
    description = ("onnxruntime-genai: models built by its model builder from the HF checkpoint (CPU EP), "
                   "og.Generator append_tokens / get_output('logits') per step, rewind_to for rollback; "
                   "options precision=fp32|fp16, windowed_kv_cache=true|false, check_graph=true|false")
    operations = ("rollback", "sequences")

    def __init__(self):
        self.model = None
        self.gens = {}

    # ---- build -----------------------------------------------------------------------------------
    def build(self, model_dir, o, mutant, max_tokens):
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        config = mutate_config(config, mutant, max_tokens)
        h = hashlib.sha256()
        h.update(json.dumps(config, sort_keys=True).encode())
        with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
        h.update(json.dumps({"o": {k: o[k] for k in ("precision", "windowed_kv_cache", "cache_slack")}, "og": og.__version__, "ort": onnxruntime.__version__}, sort_keys=True).encode())
        key = f"{os.path.basename(os.path.normpath(model_dir))}-{o['precision']}-{h.hexdigest()[:16]}"
        out = os.path.join(cache_root(), key)
        with cache_lock(out):
            if os.path.exists(os.path.join(out, ".kvc-built")):
                return out, config
            fail = os.path.join(cache_root(), key + ".failed")
            if os.path.exists(fail):
                with open(fail) as f:
                    raise Unsupported(f.read())
            stage = out + ".stage"
            shutil.rmtree(stage, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(stage)
            for name in os.listdir(model_dir):
                if name != "config.json":
                    os.symlink(os.path.join(os.path.abspath(model_dir), name), os.path.join(stage, name))
            with open(os.path.join(stage, "config.json"), "w") as f:
                json.dump(config, f, indent=1)
            if not any(os.path.exists(os.path.join(stage, n)) for n in ("tokenizer.json", "tokenizer.model")):
                for name, content in tokenizer_files(int(config["vocab_size"])).items():
                    with open(os.path.join(stage, name), "w") as f:
                        json.dump(content, f)
            cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", stage, "-o", out,
                   "-p", o["precision"], "-e", "cpu", "-c", stage + "-hfcache"]
            if not o["windowed_kv_cache"]:
                cmd += ["--extra_options", "windowed_kv_cache=false"]
            t0 = time.time()
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=stage)
            log(f"builder ({time.time() - t0:.1f} s, rc {r.returncode}): {' '.join(cmd)}")
            if r.returncode != 0:
                lines = [l for l in r.stdout.splitlines() if l.strip()]
                msg = (f"onnxruntime-genai {og.__version__} model builder failed (rc {r.returncode}) on "
                       f"{config.get('architectures')} -p {o['precision']} -e cpu: " + " | ".join(lines[-3:]))
                with open(fail, "w") as f:
                    f.write(msg)
                shutil.rmtree(stage + "-hfcache", ignore_errors=True)
                raise Unsupported(msg)
            shutil.rmtree(stage + "-hfcache", ignore_errors=True)
            if o["cache_slack"] is not None:
                # written here, under the lock and before .kvc-built (cache_slack is part of the key):
                # rewriting it at each load raced with another worker reading it (an empty file)
                gpath = os.path.join(out, "genai_config.json")
                with open(gpath) as f:
                    gcfg = json.load(f)
                sw = gcfg["model"]["decoder"].get("sliding_window")
                if sw is None:
                    msg = "cache_slack: the builder wrote no model.decoder.sliding_window to genai_config.json"
                    with open(fail, "w") as f:
                        f.write(msg)
                    raise Unsupported(msg)
                sw["cache_slack"] = o["cache_slack"]
                with open(gpath, "w") as f:
                    json.dump(gcfg, f, indent=4)
            with open(os.path.join(out, ".kvc-built"), "w") as f:
                f.write(" ".join(cmd) + "\n")
            return out, config

    def check_graph(self, out, config):
        with open(os.path.join(out, "genai_config.json")) as f:
            gcfg = json.load(f)
        sw = gcfg["model"]["decoder"].get("sliding_window")
        nodes = graph_windows(os.path.join(out, gcfg["model"]["decoder"]["filename"]))
        window = config.get("sliding_window")
        types = config.get("layer_types") or (["sliding_attention"] * len(nodes) if window else ["full_attention"] * len(nodes))
        log(f"genai_config sliding_window: {sw}")
        bad = []
        for i, (name, op, lws, swc) in enumerate(nodes):
            want = window if i < len(types) and types[i] == "sliding_attention" else -1
            log(f"  layer {i}: {op} local_window_size={lws} sliding_window_cache={swc} (config: {types[i] if i < len(types) else '?'})")
            if lws != want:
                bad.append(f"layer {i} local_window_size={lws}, config wants {want}")
        return bad

    # ---- protocol ----------------------------------------------------------------------------------
    def load(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (ort_genai options: {', '.join(OPTIONS)})")
        o = dict(DEFAULTS)
        o.update(options)
        for k, allowed in OPTIONS.items():
            if allowed is not None and o[k] not in allowed:
                raise ValueError(f"option {k}={o[k]!r}: expected one of {allowed}")
        slack = o["cache_slack"]
        if slack is not None and (not isinstance(slack, int) or isinstance(slack, bool) or slack < 0):
            raise ValueError(f"option cache_slack={slack!r}: expected an integer >= 0")
        self.model, self.gens = None, {}
        out, config = self.build(model_dir, o, mutant, max_tokens)
        bad = self.check_graph(out, config)
        if bad and o["check_graph"]:
            raise Unsupported("the exported graph does not carry the config's window: " + "; ".join(bad))
        self.model = og.Model(out)
        self.vocab = int(config["vocab_size"])
        self.max_length = max(int(max_tokens or 0), 16)
        return self.vocab

    def _gen(self, seq):
        if seq not in self.gens:
            p = og.GeneratorParams(self.model)
            p.set_search_options(max_length=self.max_length)
            self.gens[seq] = [og.Generator(self.model, p), 0]
        return self.gens[seq]

    def extend(self, seq, tokens):
        g = self._gen(seq)
        g[0].append_tokens(np.array([tokens], dtype=np.int32))
        g[1] += len(tokens)
        logits = np.asarray(g[0].get_output("logits"))
        if logits.shape != (1, len(tokens), self.vocab):
            raise RuntimeError(f"get_output('logits') has shape {logits.shape}, expected {(1, len(tokens), self.vocab)}")
        return np.ascontiguousarray(logits[0], dtype="<f4").tobytes()

    def rollback(self, seq, n):
        g = self._gen(seq)
        if not 0 <= n <= g[1]:
            raise ValueError(f"rollback of {n} tokens from a sequence of {g[1]}")
        try:
            g[0].rewind_to(g[1] - n)
        except Exception as e:
            raise Unsupported(f"onnxruntime-genai {og.__version__} Generator.rewind_to({g[1] - n}): {type(e).__name__}: {e}") from e
        g[1] -= n

    def reload(self, seq):
        raise Unsupported(f"onnxruntime-genai {og.__version__} has no generator state save/load API "
                          "(Generator.snapshot_state() returns None)")

    def reset(self):
        self.gens = {}


if __name__ == "__main__":
    serve_engine(OrtGenaiEngine())
