#!/usr/bin/env python3
"""kvconform engine worker for mistral.rs (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(bash engines/setup_env.sh mistralrs) engines/mistralrs/adapter.py`.

The engine under test is mistral.rs's Python package (`mistralrs`, the Rust engine in one CPU
wheel) as a user runs a Hugging Face checkpoint with it:
  * load: `mistralrs.Runner(which=Which.Plain(model_id=DIR, dtype=ModelDType.F32),
    token_source="none", prefix_cache_n=N)` on the checkpoint, staged with the mutant's config.json
    into ${KVC_CACHE:-~/.cache/kvconform}/mistralrs-models/<key> (the other files linked). mistral.rs
    tokenizes with the checkpoint's tokenizer.json and renders its chat template: the zoo's
    (engines/models/make_models.py tokenizer_files) is a word per id ("<5> <17>") and a template
    that is the message's text as it is, so the prompt the engine runs is exactly the plan's ids
    (the usage's prompt_tokens is checked). A model class mistral.rs has no loader for is a
    refusal (the plan SKIPs with its message).
  * mistral.rs gives log-probabilities, not logits, and has no cache handle: one
    `send_chat_completion_request` with `max_tokens=1`, `temperature=0`, `logprobs=True` and
    `top_logprobs` = the vocabulary size returns the log-softmax over the whole vocabulary after the
    prompt (docs/engines.md, "Log-probabilities instead of logits"). The adapter is a
    `kvconform.PromptEngine` of kind "logprobs": each sequence is its prompt, each judged position one
    request on the prompt up to it, and rollback, fork, reload and speculative cycles are prompts. The
    requests of a plan share prefixes, which mistral.rs's prefix cache (prefix_cache_n, default 16)
    serves from the KV cache of an earlier request: that cache's sliding-window layers are under test.

Options (any other key is refused by name):
  rows            "last" (default: the last new position of each step, one request per step, as
                  a server is asked) | "every" (each new position, one request each)
  prefix_cache_n  int >= 0 (default 16, mistral.rs's): sequences whose KV cache is kept for prefix
                  reuse; 0 turns the prefix cache off (every request is a fresh prefill)

Mutants rewrite the staged config.json (kvconform.mutate_hf_config on the JSON): window_off_by_one+1 /
window_off_by_one-1 change sliding_window; full sets layer_types all full_attention where the config has them,
else drops the window; fork_off_by_one and spec_rollback_off_by_one are PromptEngine's.
"""
import hashlib
import json
import math
import os
import shutil
import sys

from kvconform import PromptEngine, Unsupported, cache_lock, mutate_hf_config, serve_engine
from kvconform.engine import MODEL_MUTANTS

import mistralrs

OPTIONS = ("rows", "prefix_cache_n")
DEFAULTS = {"rows": "last", "prefix_cache_n": 16}
TOKEN = "<{}>"  # the zoo tokenizer's text of an id (engines/models/make_models.py tokenizer_files)


def log(*a):
    print("[mistralrs]", *a, file=sys.stderr, flush=True)


def version():
    try:
        from importlib.metadata import version as v

        return v("mistralrs")
    except Exception:
        return "unknown"


def cache_root():
    return os.path.join(os.environ.get("KVC_CACHE") or os.path.expanduser("~/.cache/kvconform"), "mistralrs-models")


def stage(model_dir, mutant):
    """A folder with the checkpoint's files and the mutant's config.json (cached by content)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    if mutant in MODEL_MUTANTS:
        raise Unsupported(f"mutant {mutant}: not implemented by the mistral.rs adapter")
    config = mutate_hf_config(config, mutant)
    if not os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
        raise Unsupported(f"{model_dir} has no tokenizer.json: mistral.rs tokenizes every prompt with it "
                          "(engines/models/make_models.py writes one with every model)")
    text = json.dumps(config, indent=1, sort_keys=True)
    key = hashlib.sha256((os.path.abspath(model_dir) + "\n" + text).encode()).hexdigest()[:16]
    out = os.path.join(cache_root(), f"{os.path.basename(os.path.normpath(model_dir))}-{key}")
    with cache_lock(out):
        if not os.path.exists(os.path.join(out, ".kvc-staged")):
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            for name in os.listdir(model_dir):
                if name != "config.json":
                    os.symlink(os.path.join(os.path.abspath(model_dir), name), os.path.join(out, name))
            with open(os.path.join(out, "config.json"), "w") as f:
                f.write(text)
            open(os.path.join(out, ".kvc-staged"), "w").close()
    return out, config


class MistralRsEngine(PromptEngine):
    name = "mistralrs"
    version = version()
    description = ("mistral.rs: Runner(Which.Plain, F32, CPU) on the checkpoint, one chat completion "
                   "(max_tokens 1, top_logprobs = vocab) per judged position: log-probabilities; "
                   "options rows=last|every, prefix_cache_n")
    kind = "logprobs"
    # Asked for F32, mistral.rs 0.9.5 on CPU rounds K and V to float16 (position 0, whose attention
    # is its own V, matches transformers float64 with K and V rounded to float16 to 7e-6, and float32
    # K and V to 4e-3 only): the same-dtype reference rounds them too (NOTES.md).
    precision = {"kv": "float16"}

    def open(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (mistralrs options: {', '.join(OPTIONS)})")
        o = dict(DEFAULTS)
        o.update(options)
        if o["rows"] not in ("last", "every"):
            raise ValueError(f"option rows={o['rows']!r}: expected 'last' or 'every'")
        n = o["prefix_cache_n"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"option prefix_cache_n={n!r}: expected an integer >= 0")
        self.answers = o["rows"]
        self.runner = None
        out, config = stage(model_dir, mutant)
        try:
            self.runner = mistralrs.Runner(which=mistralrs.Which.Plain(model_id=out, dtype=mistralrs.ModelDType.F32),
                                           token_source="none", prefix_cache_n=n)
        except (ValueError, RuntimeError) as e:  # no loader for the model class: a refusal
            raise Unsupported(f"mistral.rs {self.version} cannot load {config.get('architectures')}: {e}") from e
        except BaseException as e:  # a Rust panic surfaces as pyo3's PanicException (a BaseException)
            if type(e).__name__ != "PanicException":
                raise
            raise RuntimeError(f"mistral.rs {self.version} panicked loading {config.get('architectures')}: {e}") from None
        return int(config["vocab_size"])

    def score(self, prompt, rows):
        out = []
        for r in rows:
            text = " ".join(TOKEN.format(t) for t in prompt[: r + 1])
            request = mistralrs.ChatCompletionRequest(
                messages=[{"role": "user", "content": text}], model="default", logprobs=True,
                top_logprobs=self.vocab, max_tokens=1, temperature=0.0)
            try:
                response = self.runner.send_chat_completion_request(request)
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                raise RuntimeError(f"send_chat_completion_request on a prompt of {r + 1} tokens: {type(e).__name__}: {e}") from None
            used = getattr(response.usage, "prompt_tokens", None)
            if used is not None and used != r + 1:
                raise RuntimeError(f"mistral.rs ran a prompt of {used} tokens for the plan's {r + 1}: the chat template "
                                   "or the tokenizer changed it")
            content = response.choices[0].logprobs.content
            if not content:
                raise RuntimeError("the completion has no log-probabilities")
            row = {}
            for top in content[0].top_logprobs:
                lp = float(top.logprob)
                row[int(top.token)] = lp if math.isfinite(lp) else -math.inf
            out.append(row)
        return out


if __name__ == "__main__":
    serve_engine(MistralRsEngine())
