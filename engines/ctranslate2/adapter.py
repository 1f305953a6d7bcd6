#!/usr/bin/env python3
"""kvconform engine worker for CTranslate2 (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(bash engines/setup_env.sh ctranslate2) engines/ctranslate2/adapter.py`.

The engine under test is CTranslate2 as a user runs a transformers checkpoint with it:
  * convert: `ctranslate2.converters.TransformersConverter(checkpoint).convert(out)` (what
    `ct2-transformers-converter --model DIR` runs), once per (checkpoint, mutant, versions) into
    ${KVC_CACHE:-~/.cache/kvconform}/ctranslate2-models/<key>; the checkpoint's own tokenizer
    (engines/models/make_models.py ships one) gives the vocabulary. A converter that refuses the
    model (no loader for its config class, a missing key) is a refusal: the plan SKIPs with its message.
  * load: `ctranslate2.Generator(out, device="cpu", compute_type="float32")`.
  * CTranslate2 has no cache handle to keep between calls: `Generator.generate_batch` runs a whole
    prompt and gives the logits over the vocabulary of the token it generates
    (`return_logits_vocab=True`, `max_length=1`, greedy). The adapter is a `kvconform.PromptEngine`:
    each sequence is its prompt, and the logits of a position are those of one generate_batch on the
    prompt up to it (rollback, fork, reload and speculative cycles are prompts too).
    (`Generator.forward_batch`, the one call that returns every position's logits, raises
    "buffer to copy is of size N but current storage size is W" on a prompt longer than the window
    of a model with one: engines/ctranslate2/NOTES.md.)

Options (any other key is refused by name):
  prompt   "prefill" (default): include_prompt_in_result=False, the prompt is forwarded at once to
           fill the cache (CTranslate2's prefill), then one step gives the last position's logits:
           one generate_batch per judged position | "decode": include_prompt_in_result=True, the
           prompt is forced through the decoding loop one token at a time, each step reading and
           writing the cache, and its per-step logits are every position's: one call per step
  rows     "every" (default: each new position, one generate_batch per position) | "last" (the
           last new position of each step only, as a server answers)

Mutants rewrite the staged config.json before conversion (kvconform.mutate_hf_config on the JSON):
window_off_by_one+1 / window_off_by_one-1 change sliding_window; full sets layer_types all full_attention where the config
has them, else drops the window; fork_off_by_one and spec_rollback_off_by_one are PromptEngine's.
"""
import contextlib
import hashlib
import json
import os
import shutil
import sys
import time

from kvconform import PromptEngine, Unsupported, cache_lock, mutate_hf_config, serve_engine
from kvconform.engine import MODEL_MUTANTS

with contextlib.redirect_stdout(sys.stderr):
    import ctranslate2
    import numpy as np

OPTIONS = {"prompt": ("prefill", "decode"), "rows": ("every", "last")}
DEFAULTS = {"prompt": "prefill", "rows": "every"}
TOKEN = "<{}>"  # the zoo tokenizer's text of an id (engines/models/make_models.py tokenizer_files)


def log(*a):
    print("[ctranslate2]", *a, file=sys.stderr, flush=True)


def cache_root():
    return os.path.join(os.environ.get("KVC_CACHE") or os.path.expanduser("~/.cache/kvconform"), "ctranslate2-models")


def digest(model_dir, config):
    h = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for name in sorted(os.listdir(model_dir)):
        if name != "config.json" and os.path.isfile(os.path.join(model_dir, name)):
            with open(os.path.join(model_dir, name), "rb") as f:
                h.update(name.encode() + hashlib.sha256(f.read()).digest())
    h.update(f"ctranslate2 {ctranslate2.__version__}".encode())
    return h.hexdigest()[:16]


def convert(model_dir, mutant):
    """The converted model's folder (cached), from the checkpoint with the mutant's config."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    if mutant in MODEL_MUTANTS:
        raise Unsupported(f"mutant {mutant}: not implemented by the CTranslate2 adapter")
    config = mutate_hf_config(config, mutant)
    if not os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
        raise Unsupported(f"{model_dir} has no tokenizer.json: CTranslate2's converter reads the vocabulary from it "
                          "(engines/models/make_models.py writes one with every model)")
    key = f"{os.path.basename(os.path.normpath(model_dir))}-{digest(model_dir, config)}"
    out = os.path.join(cache_root(), key)
    with cache_lock(out):
        if os.path.exists(os.path.join(out, ".kvc-converted")):
            return out, config
        fail = out + ".failed"
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
        t0 = time.time()
        try:
            from ctranslate2.converters import TransformersConverter

            with contextlib.redirect_stdout(sys.stderr):
                TransformersConverter(stage).convert(out, force=True)
        except Exception as e:  # the converter's refusal of this model: the plan SKIPs with it
            msg = (f"ctranslate2 {ctranslate2.__version__} TransformersConverter failed on "
                   f"{config.get('architectures')}: {type(e).__name__}: {e}")
            with open(fail, "w") as f:
                f.write(msg)
            shutil.rmtree(out, ignore_errors=True)
            raise Unsupported(msg) from e
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        log(f"converted {model_dir} (mutant {mutant}) in {time.time() - t0:.1f} s -> {out}")
        with open(os.path.join(out, ".kvc-converted"), "w") as f:
            f.write(json.dumps(config, sort_keys=True) + "\n")
        return out, config


class CTranslate2Engine(PromptEngine):
    name = "ctranslate2"
    version = ctranslate2.__version__
    description = ("CTranslate2: checkpoints converted by TransformersConverter, Generator(cpu, float32), "
                   "one generate_batch(max_length=1, return_logits_vocab=True) per judged position; "
                   "options prompt=prefill|decode, rows=every|last")

    def open(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (ctranslate2 options: {', '.join(OPTIONS)})")
        o = dict(DEFAULTS)
        o.update(options)
        for k, allowed in OPTIONS.items():
            if o[k] not in allowed:
                raise ValueError(f"option {k}={o[k]!r}: expected one of {allowed}")
        self.answers = o["rows"]
        self.decode = o["prompt"] == "decode"
        self.generator = None
        out, config = convert(model_dir, mutant)
        self.generator = ctranslate2.Generator(out, device="cpu", compute_type="float32", inter_threads=1, intra_threads=1)
        return int(config["vocab_size"])

    def score(self, prompt, rows):
        out = np.empty((len(rows), self.vocab), dtype=np.float32)
        if self.decode:
            # One call forces the whole prompt through the decoding loop: its logits, one per step,
            # are those of every prompt position in order (step k: after prompt[: k + 1]), then of
            # the generated token.
            tokens = [TOKEN.format(t) for t in prompt]
            steps = self._generate(tokens, max_length=len(tokens), include_prompt_in_result=True)
            if len(steps) < len(tokens):
                raise RuntimeError(f"generate_batch forced a prompt of {len(tokens)} tokens and returned {len(steps)} logits")
            for i, r in enumerate(rows):
                out[i] = self._row(steps[r])
            return out
        for i, r in enumerate(rows):
            steps = self._generate([TOKEN.format(t) for t in prompt[: r + 1]], max_length=1, include_prompt_in_result=False)
            out[i] = self._row(steps[0])
        return out

    def _generate(self, tokens, **kw):
        result = self.generator.generate_batch([tokens], return_logits_vocab=True, sampling_topk=1, beam_size=1, **kw)[0]
        if not result.logits or not result.logits[0]:
            raise RuntimeError(f"generate_batch on a prompt of {len(tokens)} tokens returned no logits")
        return result.logits[0]

    def _row(self, logits):
        row = np.asarray(logits, dtype=np.float32).reshape(-1)
        if row.shape != (self.vocab,):
            raise RuntimeError(f"generate_batch's logits have shape {row.shape}, expected ({self.vocab},)")
        return row

if __name__ == "__main__":
    serve_engine(CTranslate2Engine())
