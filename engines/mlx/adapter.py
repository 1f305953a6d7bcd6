#!/usr/bin/env python3
"""kvconform engine worker for MLX / mlx-lm (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(engines/setup_env.sh mlx) engines/mlx/adapter.py`.

The engine under test is mlx-lm itself, used as its generate() uses it:
  * the model: mlx_lm.utils.load_model(dir) (no tokenizer), the checkpoint's config.json read by
    mlx-lm's own ModelArgs (model_type -> mlx_lm.models.<file> through MODEL_REMAPPING, so
    mistral runs mlx_lm/models/llama.py); weights stay in the checkpoint's float32 (load_model
    never casts unquantized weights; load() checks every parameter is float32);
  * the cache: mlx_lm.models.cache.make_prompt_cache(model), i.e. model.make_cache() where the
    family defines it (RotatingKVCache(max_size=sliding_window) on the layers mlx-lm considers
    sliding, KVCache on the others), else a KVCache per layer; one cache list per sequence;
  * extend: model(tokens[None], cache=cache), in chunks of `prefill_step` tokens when set (as
    generate_step's prefill_step_size does), float32 logits of every new position;
  * rollback: can_trim_prompt_cache / trim_prompt_cache (RotatingKVCache only trims while
    offset < max_size; a refusal is Unsupported, the plan SKIPs);
  * reload: save_prompt_cache to a temporary .safetensors, drop the cache, load_prompt_cache.

A Llama4ForCausalLM checkpoint (model_type llama4_text) is given to mlx-lm in the Llama 4
releases' layout (llama4_layout below), so that mlx-lm runs its chunked-attention model.

Options (any other key is refused by name):
  prefill_step   int >= 1: feed each extend in chunks of this many tokens (default: one call).

Mutants rewrite the config before the model is built (load_model's model_config override):
window_off_by_one+1 / window_off_by_one-1 change config.sliding_window (on Llama 4, attention_chunk_size); full sets layer_types to all full_attention
(read by llama.py) and sliding_window to a window longer than any plan (for the families that
derive the sliding layers from a pattern and only read sliding_window).
"""
import json
import os
import sys
import tempfile
from pathlib import Path

import contextlib

from kvconform import Engine, Unsupported, mutated_window, serve_engine

with contextlib.redirect_stdout(sys.stderr):  # stdout belongs to the protocol, even while importing
    import mlx.core as mx
    import mlx_lm
    import numpy as np
    from mlx.utils import tree_flatten
    from mlx_lm.models.cache import (can_trim_prompt_cache, load_prompt_cache, make_prompt_cache,
                                     save_prompt_cache, trim_prompt_cache)
    from mlx_lm.utils import load_config, load_model

OPTIONS = ("prefill_step",)
FULL_WINDOW = 1 << 24  # full_attention_on_sliding mutant: a window no plan reaches


def mutant_config(config, mutant, max_tokens):
    """The config overrides that make mutant (passed to load_model as model_config)."""
    if mutant == "none":
        return {}
    if isinstance(config.get("attention_chunk_size"), int) and not isinstance(config.get("sliding_window"), int):
        # Llama 4: the mutant moves the chunk (full: one chunk longer than any plan)
        c = mutated_window(config["attention_chunk_size"], mutant)
        return {"attention_chunk_size": c if c is not None else max(FULL_WINDOW, int(max_tokens) + 1)}
    window = config.get("sliding_window")
    if not isinstance(window, int):
        raise Unsupported(f"mutant {mutant}: the config has no integer sliding_window ({window!r})")
    w = mutated_window(window, mutant)
    if w is not None:
        return {"sliding_window": w}
    over = {"sliding_window": max(FULL_WINDOW, int(max_tokens) + 1)}
    if isinstance(config.get("layer_types"), list):
        over["layer_types"] = ["full_attention"] * len(config["layer_types"])
    return over


def llama4_layout(src, config, out):
    """A Llama4ForCausalLM checkpoint (model_type llama4_text) in the layout of the Llama 4 releases
    (Llama4ForConditionalGeneration: the text config under text_config, weights under
    language_model.), which mlx-lm reads with its chunked-attention model, models/llama4.py. Its
    llama4_text.py, which the text-only layout selects, has neither chunked attention nor the MoE
    block, and refuses the checkpoint's expert weights."""
    weights = mx.load(str(src / "model.safetensors"))
    mx.save_safetensors(str(out / "model.safetensors"), {f"language_model.{k}": v for k, v in weights.items()})
    with open(out / "config.json", "w") as f:
        json.dump({"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": config}, f)
    return out


class MlxEngine(Engine):
    name = "mlx-lm"
    version = f"{mlx_lm.__version__} (mlx {mx.__version__})"
    description = ("mlx-lm's model classes (utils.load_model, float32) and its prompt caches "
                   "(make_prompt_cache: RotatingKVCache on sliding layers), on the mlx CPU backend")
    operations = ("rollback", "reload", "sequences")

    def __init__(self):
        self.model = None
        self.caches = {}

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (mlx-lm options: {', '.join(OPTIONS)})")
        step = options.get("prefill_step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 1):
            raise ValueError(f"prefill_step must be an integer >= 1, got {step!r}")
        self.prefill_step = step
        self.model = None
        self.caches = {}
        path = Path(model_dir)
        self.layout_dir = None
        config = load_config(path)
        if config.get("model_type") == "llama4_text":
            top_k = config.get("num_experts_per_tok", 1)
            if top_k != 1:  # models/llama4.py asserts it: an engine limit, not a wrong answer
                raise Unsupported(f"mlx-lm's Llama 4 MoE routes one expert per token; the config asks {top_k}")
            self.layout_dir = tempfile.TemporaryDirectory(prefix="kvc-mlx-llama4-")
            path = llama4_layout(path, config, Path(self.layout_dir.name))
            config = load_config(path)
        text = config.get("text_config", config)  # a mutant rewrites the text model's config
        over = mutant_config(text, mutant, max_tokens)
        if over and text is not config:
            over = {"text_config": {**text, **over}}
        try:
            model, config = load_model(path, model_config=over)
        except ValueError as e:  # mlx-lm has no module for this model_type: an engine limit, not a wrong answer
            if "not supported" in str(e) and str(e).startswith("Model type"):
                raise Unsupported(f"mlx-lm: {e}") from e
            raise
        config = config.get("text_config", config)
        bad = {k: str(v.dtype) for k, v in tree_flatten(model.parameters()) if v.dtype != mx.float32}
        if bad:
            raise RuntimeError(f"mlx-lm loaded non-float32 parameters: {bad}")
        self.model = model
        self.vocab = int(config["vocab_size"])
        return self.vocab

    def _cache(self, seq):
        if seq not in self.caches:
            self.caches[seq] = make_prompt_cache(self.model)
        return self.caches[seq]

    def extend(self, seq, tokens):
        cache = self._cache(seq)
        step = self.prefill_step or max(len(tokens), 1)
        out = []
        for i in range(0, len(tokens), step):
            chunk = mx.array([tokens[i:i + step]], dtype=mx.int32)
            logits = self.model(chunk, cache=cache)
            mx.eval(logits)
            if logits.dtype != mx.float32:
                raise RuntimeError(f"mlx-lm returned {logits.dtype} logits")
            out.append(np.array(logits[0], dtype=np.float32))
        data = np.concatenate(out, axis=0) if out else np.zeros((0, self.vocab), np.float32)
        if data.shape != (len(tokens), self.vocab):
            raise RuntimeError(f"logits of shape {data.shape}, expected {(len(tokens), self.vocab)}")
        return np.ascontiguousarray(data, dtype="<f4").tobytes()

    def rollback(self, seq, n):
        cache = self._cache(seq)
        if not can_trim_prompt_cache(cache):
            kinds = sorted({f"{type(c).__name__}(offset={c.offset}, max_size={getattr(c, 'max_size', None)})"
                            for c in cache if not c.is_trimmable()})
            raise Unsupported(f"mlx-lm refuses to trim: can_trim_prompt_cache is False ({'; '.join(kinds)})")
        trimmed = trim_prompt_cache(cache, n)
        if trimmed != n:
            raise RuntimeError(f"trim_prompt_cache trimmed {trimmed} of {n} tokens")

    def reload(self, seq):
        cache = self._cache(seq)
        with tempfile.TemporaryDirectory(prefix="kvc-mlx-") as d:
            f = os.path.join(d, "cache.safetensors")
            save_prompt_cache(f, cache)
            del cache
            self.caches.pop(seq)
            self.caches[seq] = load_prompt_cache(f)

    def reset(self):
        self.caches = {}


if __name__ == "__main__":
    serve_engine(MlxEngine())
