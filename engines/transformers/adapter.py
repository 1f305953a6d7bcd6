#!/usr/bin/env python3
"""kvconform engine worker for Hugging Face transformers (docs/engines.md, "The engine protocol").

    golden/.venv-5.24.0/bin/python engines/transformers/adapter.py      # speaks the protocol on stdin/stdout

It drives transformers the way `generate` does: one forward per extend,
model(input_ids, attention_mask, position_ids, cache_position (on releases whose forward takes it),
past_key_values / cache (whichever name the release's forward takes), use_cache=True), with the
cache object built as generate builds it (DynamicCache(config=...), StaticCache(config=...,
max_cache_len=...)), and answers the float32 logits of the new positions.

Options (an unknown key is an error naming it):
  cache         "dynamic" (default) | "static" | "hybrid" (HybridCache: only releases that have it,
                else unsupported)
  attention     "eager" (default) | "sdpa" | "flex" (attn_implementation "flex_attention")
  dtype         "float32" (default) | "float64"
  left_padding  P >= 0 (default 0). P > 0: every forward of a sequence is a batch of two rows, as
                generate runs two prompts of different lengths: row 0 is the sequence left-padded
                with P pad tokens (attention_mask 0), row 1 the longer prompt that forces the padding
                (P filler tokens, then the sequence's tokens, all attended). Row 0's logits are the
                answer. The same tokens also run unpadded (batch of one, a cache of their own) in the
                same extend, and the extend is an error when row 0 differs from them by more than 1e-4.
                (Row 1 cannot be "the same tokens unpadded" in the same call: a batch's rows have one
                width, so the unpadded row of a left-padded batch is always a longer prompt.)
  record_past   false (default) | true: call cache.activate_past_recording() on each new cache, as
                5.x generate does before it may need to crop (releases without it: unsupported)
  crop          "checked" (default) | "unchecked": on releases whose caches have is_croppable (5.24),
                generate crops only when cache.is_croppable is true; "checked" answers unsupported
                otherwise, "unchecked" calls crop anyway (to show what crop then does)

Operations: rollback crops each cache with the release's Cache.crop (4.x/5.13: crop(new length);
5.24: crop(-n)) after checking cache.is_croppable where the release has it (as generate does); a
cache that is not croppable, or an exception from crop, is answered unsupported with transformers'
message.
reload pickles the cache to an in-memory buffer with torch.save, drops it and torch.load's it back.
reset builds new caches.
fork deep-copies the source's cache (transformers' own prefix-reuse recipe: copy.deepcopy of a
prompt cache) and crops the copy to the prefix (unsupported where crop is). chunked runs one
generate-style forward per chunk on the sequence's cache. spec is an extend then a rollback. With
left_padding > 0 these three are unsupported. preempt gives back the sequence's cache and
recomputes it from the tokens the adapter keeps, one prefill into a fresh cache (unsupported with
left_padding). No batch: the adapter keeps one cache per sequence.
Mutants (kvconform mutants window_off_by_one+1, window_off_by_one-1, full) change the config before the model is built:
sliding_window = W +- 1, or every layer full attention (layer_types all "full_attention" where the
config has layer_types, else sliding_window = None). The operation mutants: fork_shared (the fork
uses the source's cache object itself), fork_off_by_one (the copy is cropped one token short),
window_restarts_per_chunk (every chunk after the first starts on a new, empty cache), spec_rollback_off_by_one (a cycle
crops one token more than it rejected), preempt_short (the recompute leaves the last token out);
batch_offset is refused (kvconform.Engine: no batch here).
The model mutants: those a config can say through kvconform.mutate_hf_config (nope_inverted,
rope_all_rotary, window_on_every_layer, layer_types_swapped), and sinks_dropped by setting every
attention sink parameter to -inf after loading (exp(-inf) = 0: no sink in the softmax);
shared_kv_full is refused.
"""
import copy
import inspect
import io
import os

from kvconform.zygote import hand_off

hand_off(("torch", "transformers", "transformers.modeling_utils"))  # KVC_ZYGOTE=1: a fork server's child
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig  # noqa: E402
from transformers import cache_utils  # noqa: E402

from kvconform import Engine, Unsupported, mutate_hf_config, serve_engine
from nocache_forward import _model_class  # noqa: E402  (a sibling: the script's folder is on sys.path)

OPTIONS = {"cache": ("dynamic", "static", "hybrid"), "attention": ("eager", "sdpa", "flex"),
           "dtype": ("float32", "float64"), "left_padding": None, "record_past": (False, True),
           "crop": ("checked", "unchecked")}
ATTN = {"eager": "eager", "sdpa": "sdpa", "flex": "flex_attention"}
PAD_CHECK_ATOL = 1e-4


def filler(n):
    return [3 + (5 * i) % 250 for i in range(n)]


class _Seq:
    """One sequence: its cache (batch of 1, or of 2 with left padding), the unpadded reference cache
    (left padding only), how many of its own tokens the cache holds, and those tokens (a preemption
    recomputes the cache from them)."""

    def __init__(self, cache, ref_cache):
        self.cache, self.ref_cache, self.n, self.padded = cache, ref_cache, 0, False
        self.tokens = []


def _forward_args():
    """How this release's causal-LM forward is called (for the description)."""
    from transformers import MistralForCausalLM
    params = inspect.signature(MistralForCausalLM.forward).parameters
    args = ["input_ids", "attention_mask", "position_ids"]
    if "cache_position" in params:
        args.append("cache_position")
    args.append("cache" if "cache" in params else "past_key_values")
    return ", ".join(args)


class TransformersEngine(Engine):
    name = "transformers"
    version = transformers.__version__
    description = (f"transformers {transformers.__version__} (torch {torch.__version__}): "
                   f"generate-style model({_forward_args()}, use_cache=True) forwards; "
                   "options cache=dynamic|static|hybrid, attention=eager|sdpa|flex, dtype=float32|float64, "
                   "left_padding=P, record_past=false|true, crop=checked|unchecked")
    operations = ("rollback", "reload", "sequences", "fork", "chunked", "spec", "preempt")

    def __init__(self):
        self.model = None
        self._loaded = {}  # (model_dir, mutant, attention, dtype) -> model: each case loads again, the weights do not change
        torch.set_num_threads(1)  # tiny models: threads only contend on a shared machine

    # ---- load ---------------------------------------------------------------------------------
    def load(self, model_dir, options, mutant, max_tokens, sequences):
        for k in options:
            if k not in OPTIONS:
                raise ValueError(f"unknown option {k!r} (transformers adapter options: {', '.join(OPTIONS)})")
        o = {"cache": "dynamic", "attention": "eager", "dtype": "float32", "left_padding": 0, "record_past": False,
             "crop": "checked"}
        o.update(options)
        for k, allowed in OPTIONS.items():
            if allowed is not None and o[k] not in allowed:
                raise ValueError(f"option {k}={o[k]!r}: expected one of {allowed}")
        P = o["left_padding"]
        if not isinstance(P, int) or isinstance(P, bool) or P < 0:
            raise ValueError(f"option left_padding={P!r}: expected an integer >= 0")
        if o["cache"] == "hybrid" and not hasattr(cache_utils, "HybridCache"):
            raise Unsupported(f"transformers {transformers.__version__} has no HybridCache")
        if o["record_past"] and not hasattr(cache_utils.Cache, "activate_past_recording"):
            raise Unsupported(f"transformers {transformers.__version__} has no Cache.activate_past_recording")

        cfg = AutoConfig.from_pretrained(model_dir)
        # The decoder's config: a multimodal model's text_config (get_text_config() is the config itself elsewhere).
        mutate_hf_config(cfg.get_text_config(), "none" if mutant == "sinks_dropped" else mutant)
        self.mutant = mutant
        self.model = None
        key = (os.path.realpath(model_dir), os.path.getmtime(os.path.join(model_dir, "model.safetensors")), mutant,
               o["attention"], o["dtype"])
        if key not in self._loaded:
            try:
                # A multimodal model: the class its config.architectures names, on text-only inputs (nocache_forward).
                model = _model_class(model_dir).from_pretrained(model_dir, config=cfg, attn_implementation=ATTN[o["attention"]])
            except ValueError as e:  # the release refuses this attention implementation for this model
                if "does not support" in str(e):
                    raise Unsupported(f"transformers {transformers.__version__}: {e}") from e
                raise
            if mutant == "sinks_dropped":
                sinks = [m.sinks for m in model.modules() if isinstance(getattr(m, "sinks", None), torch.nn.Parameter)]
                if not sinks:
                    raise Unsupported("mutant sinks_dropped: the model has no attention sinks")
                with torch.no_grad():
                    for p in sinks:
                        p.fill_(float("-inf"))
            self._loaded = {key: model.to(getattr(torch, o["dtype"])).eval()}
        self.model = self._loaded[key]
        params = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.takes_cache_position = "cache_position" in params
        crop_params = list(inspect.signature(cache_utils.Cache.crop).parameters)
        self.crop_relative = crop_params[1] == "tokens_to_remove"
        self.o, self.P = o, P
        self.max_cache_len = max(int(max_tokens or 0), 1) + P
        self.n_seq = max(int(sequences or 1), 1)
        text = cfg.get_text_config()
        self.pad_id = text.pad_token_id if getattr(text, "pad_token_id", None) is not None else 0
        self.reset()
        return self.model.config.get_text_config().vocab_size

    def _new_cache(self):
        cfg = self.model.config
        kind = self.o["cache"]
        if kind == "dynamic":
            cache = cache_utils.DynamicCache(config=cfg)
        elif kind == "static":
            cache = cache_utils.StaticCache(config=cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg,
                                            max_cache_len=self.max_cache_len)
        else:
            cache = cache_utils.HybridCache(config=cfg, max_cache_len=self.max_cache_len)
        if self.o["record_past"]:
            cache.activate_past_recording()
        return cache

    def reset(self):
        self.seqs = [_Seq(self._new_cache(), self._new_cache() if self.P else None) for _ in range(self.n_seq)]

    def _seq(self, seq):
        if not 0 <= seq < len(self.seqs):
            raise ValueError(f"sequence {seq} out of range (the case has {len(self.seqs)})")
        return self.seqs[seq]

    # ---- forwards -------------------------------------------------------------------------------
    def _forward(self, cache, rows, mask, cache_start):
        """One generate-style forward: rows [b, new] new token ids, mask [b, cache_start + new]."""
        new = len(rows[0])
        ids = torch.tensor(rows, dtype=torch.long)
        mask = torch.tensor(mask, dtype=torch.long)
        position_ids = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)[:, -new:]
        kw = {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids,
              self.cache_arg: cache, "use_cache": True}
        if self.takes_cache_position:
            kw["cache_position"] = torch.arange(cache_start, cache_start + new, dtype=torch.long)
        with torch.no_grad():
            return self.model(**kw).logits

    def extend(self, seq, tokens):
        s = self._seq(seq)
        if not tokens:
            raise ValueError("extend with no tokens")
        new = len(tokens)
        s.tokens += tokens
        if not self.P:
            logits = self._forward(s.cache, [tokens], [[1] * (s.n + new)], s.n)[0]
        else:
            P = self.P
            lead0, lead1 = ([self.pad_id] * P, filler(P)) if not s.padded else ([], [])
            row0, row1 = lead0 + tokens, lead1 + tokens
            mask0 = [0] * P + [1] * (s.n + new)
            mask1 = [1] * (P + s.n + new)
            start = P + s.n if s.padded else 0
            both = self._forward(s.cache, [row0, row1], [mask0, mask1], start)
            logits = both[0, -new:]
            ref = self._forward(s.ref_cache, [tokens], [[1] * (s.n + new)], s.n)[0]
            s.padded = True
            err = float((logits.double() - ref.double()).abs().max())
            if err > PAD_CHECK_ATOL:
                s.n += new
                raise RuntimeError(f"left padding {P} changed the logits: max |padded row 0 - unpadded| = {err:.3g} "
                                   f"(> {PAD_CHECK_ATOL}) at sequence length {s.n}")
        s.n += new
        return logits.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()

    # ---- optional operations ----------------------------------------------------------------------
    def _crop(self, cache, n, new_len):
        where = f"transformers {transformers.__version__} {type(cache).__name__}.crop"
        if self.o["crop"] == "checked" and getattr(cache, "is_croppable", True) is False:
            bad = [f"{i}:{type(l).__name__}" for i, l in enumerate(getattr(cache, "layers", []))
                   if getattr(l, "is_croppable", True) is False]
            raise Unsupported(f"{where}: the cache says it is not croppable (is_croppable is False; layers {', '.join(bad)})")
        try:
            if self.crop_relative:
                cache.crop(-n)
            else:
                cache.crop(new_len)
        except Exception as e:
            raise Unsupported(f"{where}: {type(e).__name__}: {e}") from e

    def rollback(self, seq, n):
        s = self._seq(seq)
        if not 0 <= n <= s.n:
            raise ValueError(f"rollback of {n} tokens from a sequence of {s.n}")
        pad = self.P if s.padded else 0
        self._crop(s.cache, n, pad + s.n - n)
        if s.ref_cache is not None:
            self._crop(s.ref_cache, n, s.n - n)
        s.n -= n
        del s.tokens[s.n:]

    def reload(self, seq):
        s = self._seq(seq)

        def roundtrip(cache):
            buf = io.BytesIO()
            try:
                torch.save(cache, buf)
            except Exception as e:
                raise Unsupported(f"transformers {transformers.__version__}: torch.save({type(cache).__name__}): "
                                  f"{type(e).__name__}: {e}") from e
            data = buf.getvalue()
            return torch.load(io.BytesIO(data), weights_only=False)

        cache, s.cache = s.cache, None
        s.cache = roundtrip(cache)
        if s.ref_cache is not None:
            cache, s.ref_cache = s.ref_cache, None
            s.ref_cache = roundtrip(cache)

    # ---- serving operations -------------------------------------------------------------------------
    def _unpadded(self, op):
        if self.P:
            raise Unsupported(f"{op} with left_padding is not supported by this adapter")

    def fork(self, seq, source, length):
        self._unpadded("fork")
        src, dst = self._seq(source), self._seq(seq)
        if not 0 <= length <= src.n:
            raise ValueError(f"fork of {length} tokens from a sequence of {src.n}")
        cache = src.cache if self.mutant == "fork_shared" else copy.deepcopy(src.cache)
        keep = max(length - 1, 0) if self.mutant == "fork_off_by_one" else length
        if keep < src.n:
            self._crop(cache, src.n - keep, keep)
        dst.cache, dst.ref_cache, dst.n, dst.padded = cache, None, keep, False
        dst.tokens = src.tokens[:keep] if cache is not src.cache else src.tokens

    def chunked(self, seq, tokens, chunk):
        self._unpadded("chunked")
        if chunk <= 0:
            raise ValueError(f"chunk {chunk} is not positive")
        parts = []
        for at in range(0, len(tokens), chunk):
            if at and self.mutant == "window_restarts_per_chunk":
                s = self._seq(seq)
                s.cache, s.n, s.tokens = self._new_cache(), 0, []
            parts.append(self.extend(seq, tokens[at:at + chunk]))
        return b"".join(parts)

    def spec(self, seq, tokens, n):
        self._unpadded("spec")
        logits = self.extend(seq, tokens)
        n = min(n + 1, self._seq(seq).n) if self.mutant == "spec_rollback_off_by_one" else n
        if n:
            self.rollback(seq, n)
        return logits

    def preempt(self, seq):
        """The sequence's cache given back and recomputed from its tokens: one prefill into a fresh
        cache (a static cache's sliding layers wrap as they did); preempt_short leaves the last out."""
        self._unpadded("preempt")
        s = self._seq(seq)
        tokens = s.tokens[:-1] if self.mutant == "preempt_short" else list(s.tokens)
        s.cache, s.n, s.tokens = self._new_cache(), 0, []
        if tokens:
            self.extend(seq, tokens)


if __name__ == "__main__":
    serve_engine(TransformersEngine())
