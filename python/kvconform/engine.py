"""`kvconform.engine`: an inference engine behind kvconform's engine protocol (docs/engines.md).

Subclass `Engine`, implement `load` and `extend` (and `reset`; `rollback`, `reload` and the serving
operations `fork`, `chunked`, `spec`, `batch`, `shift`, `preempt` when the engine has them, listed in `operations`), and
serve it:

    class MyEngine(kvconform.Engine):
        name = "my-engine"
        operations = ("rollback",)

        def load(self, model_dir, options, mutant, max_tokens, sequences):
            ...                                    # build the engine on the checkpoint in model_dir
            return vocab_size                      # or Loaded(vocab_size, precision={"kv": "float16"})

        def extend(self, seq, tokens):
            ...                                    # feed tokens to sequence seq
            return logits_float32_bytes            # len(tokens) * vocab little-endian float32, row-major
                                                   # or Rows([len(tokens) - 1], last_row_bytes): a subset

    if __name__ == "__main__":
        kvconform.serve_engine(MyEngine())

`kvconform engine --engine-cmd 'python my_adapter.py'` checks it, `pytest --kvconform-engine
my_adapter.py:MyEngine` gives one test per case. Raise `Unsupported` for what the engine refuses (the
case, or for an optional operation the whole plan, is a SKIP with the message); any other exception
fails the case with its message; the worker lives on either way.
"""
from __future__ import annotations

import contextlib
import fcntl
import operator
import os
import sys
import warnings
from typing import IO, Any, Callable, ClassVar, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ._load import load_object
from .protocol import Buffer, Header, OutBuffer, Unsupported, protocol_stdout, serve_requests

__all__ = [
    "MUTANTS",
    "MUTANT_OPERATION",
    "OPERATIONS",
    "OPERATION_MUTANTS",
    "PRECISION",
    "PROMPT_MUTANTS",
    "RENAMED_MUTANTS",
    "WINDOW_MUTANTS",
    "Engine",
    "Loaded",
    "LogProbs",
    "PromptEngine",
    "Rows",
    "Unsupported",
    "cache_lock",
    "canonical_mutant",
    "load_engine",
    "mutate_hf_config",
    "mutated_window",
    "serve",
]

WINDOW_MUTANTS = ("none", "window_off_by_one+1", "window_off_by_one-1", "full_attention_on_sliding")
"""The window mutants: the engine is told W + 1, W - 1, or runs sliding layers as full attention."""
MUTANT_OPERATION: Mapping[str, str] = {
    "fork_shared": "fork", "fork_off_by_one": "fork", "window_restarts_per_chunk": "chunked", "spec_rollback_off_by_one": "spec",
    "batch_offset": "batch", "shift_not_rerotated": "shift", "shift_discard_off_by_one": "shift", "preempt_short": "preempt",
    "turn_past": "turn"}
"""The operation each serving-operation mutant does wrong (engines/protocol.json, the step table's)."""
OPERATION_MUTANTS = tuple(MUTANT_OPERATION)
"""The serving-operation mutants: a fork that shares the state it should copy / starts one token
short, a chunked extend whose window restarts at each chunk, a spec cycle that rolls back one token
too many, a batch that computes a sequence at another's offset, a shift that moves keys without
rotating them to their new positions, a shift that discards one token more than asked, a recompute after a
preemption that leaves out the sequence's last token, a turn that continues one token past its kept
prefix. An adapter implements those of its
operations and refuses the others (raise Unsupported); the window stays right."""
MODEL_MUTANTS = ("sinks_dropped", "nope_inverted", "rope_all_rotary", "shared_kv_full", "window_on_every_layer",
                 "layer_types_swapped")
"""The model mutants: the engine reads one feature of the family's config wrong, the window right:
attention sinks dropped, NoPE and rope layers swapped, partial (proportional) rope rotating every
frequency, KV-shared sliding layers attending every key of the layer they share, the config's window
on every layer (a window with all-full layer_types), the sliding and the full layers swapped
(max_window_layers read inverted). An adapter implements those its engine can express and refuses
the others (raise Unsupported), as on a model without the feature."""
MUTANTS = WINDOW_MUTANTS + OPERATION_MUTANTS + MODEL_MUTANTS
"""The adapter mutants `load` gets."""
RENAMED_MUTANTS: Mapping[str, str] = {
    "window+1": "window_off_by_one+1", "window-1": "window_off_by_one-1", "full": "full_attention_on_sliding",
    "fork-shared": "fork_shared", "fork-prefix": "fork_off_by_one", "chunked-restart": "window_restarts_per_chunk",
    "spec-rollback": "spec_rollback_off_by_one", "batch-offset": "batch_offset", "shift-no-rerotate": "shift_not_rerotated",
    "shift-discard+1": "shift_discard_off_by_one", "preempt-short": "preempt_short", "turn-past": "turn_past",
    "sinks-dropped": "sinks_dropped", "nope-inverted": "nope_inverted",
    "rope-all-rotary": "rope_all_rotary", "shared-kv-full": "shared_kv_full", "window-everywhere": "window_on_every_layer",
    "layers-swapped": "layer_types_swapped", "chunk-shift": "chunk_boundaries_shifted",
    "chunked-as-sliding": "chunked_as_sliding", "softcap-dropped": "softcap_dropped", "kv-bf16": "kv_rounded",
    "eviction-once": "eviction_off_by_one", "full-capped": "full_attention_capped", "glitch": "position_glitch"}
"""The spellings the adapter mutants had before a mistake got one name (engines/protocol.json "replaces"),
accepted for one release by `canonical_mutant`, `mutated_window` and `mutate_hf_config`."""


def canonical_mutant(mutant: str) -> str:
    """The mutant's name: itself, or the new name of an old spelling (a DeprecationWarning says it)."""
    new = RENAMED_MUTANTS.get(mutant)
    if new is None:
        return mutant
    warnings.warn(f"mutant {mutant!r} is deprecated (accepted for one release): it is now {new!r}", DeprecationWarning,
                  stacklevel=3)
    return new
OPERATIONS = ("rollback", "reload", "sequences", "fork", "chunked", "spec", "batch", "shift", "preempt", "turn")
"""The optional operations an engine may list in `Engine.operations`."""
PRECISION = {"kv": "K and V stored or read as float16", "q": "queries read as float16 (or converted to q8_0 blocks)",
             "gelu": "GELU read from a float16 table (ggml's CPU GELU)",
             "k": "K stored in q8_0 or q4_0 blocks (a quantized cache)", "v": "V stored in q8_0 or q4_0 blocks"}
"""The keys of a load answer's `precision`, each "float16" or "float32" (the default); "k" and "v" name
a block format instead ("q8_0", "q4_0": llama.cpp's quantized cache, over "kv" on that side), and "q"
may be "q8_0" (a kernel that converts the queries to a quantized K's dot type)."""
BLOCKS = {"k": ("q8_0", "q4_0"), "v": ("q8_0", "q4_0"), "q": ("float16", "float32", "q8_0")}


class Loaded(NamedTuple):
    """What `Engine.load` may return instead of the vocabulary size: the vocabulary size and, for this
    load, where the engine computes below float32 (overrides `Engine.precision`)."""
    vocab: int
    precision: Optional[Mapping[str, str]] = None


class Rows(NamedTuple):
    """What a step with new positions may return instead of all their logits: the logits of only the
    rows named (increasing indices into the step's new positions, e.g. `[n - 1]` for the last one, as
    a server answers), float32 bytes of len(rows) * vocab. The judge checks those; a run that answered
    none is not a pass."""
    rows: Sequence[int]
    logits: bytes


class LogProbs(NamedTuple):
    """What a step with new positions may return when the engine gives log-probabilities rather than
    logits (a server's `n_probs` over the whole vocabulary): float32 bytes of log-probabilities,
    len(rows) * vocab, for the rows named (None: every new position). The judge compares them with
    the oracle's log-softmax, under a bound from the same-dtype reference's log-softmax."""
    rows: Optional[Sequence[int]]
    logprobs: bytes


Logits = Union[bytes, Rows, LogProbs]


class Engine:
    """The engine side of the protocol. Class attributes (answered to the host's hello):

    name: the engine's name in the case ids (`engine/<name>/<model>/<plan>`) unless the host names it.
    version, description: shown in the reports.
    operations: the optional operations implemented: "rollback", "reload", "sequences" (more than
        one sequence interleaved; without it, plans with two sequences are not sent), and the serving
        operations "fork", "chunked", "spec", "batch", "shift", "preempt", "turn" (docs/engines.md, "Serving
        operations").
    precision: where the engine computes below float32 on every load, e.g. {"kv": "float16"}: the
        same-dtype reference rounds there too (docs/engines.md, "Judging"). A load whose precision
        depends on its options returns `Loaded(vocab, precision)` instead, which overrides it.
    """

    name: ClassVar[str] = "engine"
    version: ClassVar[str] = ""
    description: ClassVar[str] = ""
    operations: ClassVar[Sequence[str]] = ()
    precision: ClassVar[Mapping[str, str]] = {}

    def load(self, model_dir: str, options: Mapping[str, Any], mutant: str, max_tokens: int,
             sequences: int) -> Union[int, Loaded]:
        """Loads the Hugging Face checkpoint in model_dir (config.json, model.safetensors, float32) with
        the configuration's options (refuse unknown keys by name), telling the engine the window that
        `mutated_window(W, mutant)` gives; max_tokens: the longest any sequence grows; sequences: how
        many sequences (ids 0 .. sequences - 1). Every sequence starts empty. Returns the vocabulary
        size, or `Loaded(vocab, precision)`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load")

    def extend(self, seq: int, tokens: List[int]) -> Logits:
        """Feeds tokens to sequence seq; returns the logits of each new position in order: float32
        little-endian, len(tokens) * vocab values, row-major (numpy: `logits.astype("<f4").tobytes()`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement extend")

    def rollback(self, seq: int, n: int) -> None:
        """Drops the last n tokens of sequence seq (operation "rollback")."""
        raise Unsupported("rollback is not supported")

    def reload(self, seq: int) -> None:
        """Saves sequence seq's state with the engine's state API, drops it and loads it back
        (operation "reload")."""
        raise Unsupported("reload is not supported")

    def reset(self) -> None:
        """Empties every sequence."""
        raise NotImplementedError(f"{type(self).__name__} does not implement reset")

    def fork(self, seq: int, source: int, length: int) -> None:
        """Sequence seq (its old contents dropped) starts from the first `length` tokens of sequence
        `source`, sharing or copying the engine's state for them (prefix caching); `source` goes on
        unchanged (operation "fork")."""
        raise Unsupported("fork is not supported")

    def chunked(self, seq: int, tokens: List[int], chunk: int) -> Logits:
        """Feeds tokens to sequence seq in chunks of `chunk` tokens through the engine's own chunking
        (a micro-batch size, repeated forward calls), the last chunk possibly shorter; returns the
        logits of every new position as `extend` does (operation "chunked")."""
        raise Unsupported("chunked is not supported")

    def spec(self, seq: int, tokens: List[int], n: int) -> Logits:
        """One speculative-decoding cycle: feeds the draft `tokens` to sequence seq, returns their
        logits as `extend` does, then drops the last n (the rejected draft tokens; operation "spec").
        The default is `extend` then `rollback`; an engine with its own verify step overrides it."""
        logits = self.extend(seq, tokens)
        if n:
            self.rollback(seq, n)
        return logits

    def batch(self, items: List[Tuple[int, List[int]]]) -> Logits:
        """Advances several sequences in one engine call: items are (seq, tokens), each seq once;
        returns the logits of every new position, item after item (operation "batch")."""
        raise Unsupported("batch is not supported")

    def shift(self, seq: int, keep: int, discard: int) -> None:
        """A context shift of sequence seq: positions keep .. keep + discard - 1 are dropped and the
        later ones move down by discard, their keys re-rotated to the new positions (llama.cpp's
        `llama_memory_seq_rm` then `llama_memory_seq_add`; operation "shift")."""
        raise Unsupported("shift is not supported")

    def preempt(self, seq: int) -> None:
        """A preemption of sequence seq: the engine gives back its cache (every block, the sliding
        layers' wrapped ones too) and recomputes it from the sequence's tokens, as a scheduler does
        under memory pressure; nothing the sequence holds changes (operation "preempt"). An adapter
        keeps the sequence's tokens for it (the engine's own recompute path where it has one)."""
        raise Unsupported("preempt is not supported")

    def turn(self, seq: int, keep: int, tokens: List[int]) -> Logits:
        """A multi-turn request: sequence seq keeps its first `keep` tokens and goes on with `tokens`
        in one request (a chat's next turn); returns the new positions' logits as `extend` does
        (operation "turn"). An engine with a rollback may do it as `rollback` then `extend`."""
        raise Unsupported("turn is not supported")


PROMPT_MUTANTS = ("fork_off_by_one", "spec_rollback_off_by_one", "preempt_short", "turn_past")
"""The operation mutants `PromptEngine` implements itself: a fork one token short of the prefix, a
speculative cycle that drops one token more than it rejected, a recompute after a preemption that
leaves out the last token, a turn that continues one token past its kept prefix."""


class PromptEngine(Engine):
    """An engine without a cache handle: a prompt in, the scores of some of its positions out (an
    offline generator's forward, a server's completion with log-probabilities). Subclass it and
    implement `open` (load the model, return the vocabulary size or `Loaded`) and `score`; the class
    keeps each sequence as its prompt of token ids and does the protocol's operations on prompts:

    * extend: the tokens are appended and `score(prompt, rows)` is asked for the new positions
      (`rows`: indices into the prompt; all of them, or the last only where `answers = "last"`);
    * rollback: the prompt loses its last n tokens; fork: sequence seq's prompt is the first
      `length` tokens of `source`'s; reload: the prompt is the whole state, so it is given back as
      it was (`reload_prompt` may send it through the engine's own save/restore); spec: extend,
      then rollback; batch: each item as an extend, rows item after item; reset: every prompt empty;
      preempt: a prompt engine recomputes the whole prompt on every call, so the prompt stays; turn:
      the prompt cut back to `keep` tokens, then an extend.

    `score` returns the rows asked for as float32 bytes, a numpy array `[len(rows), vocab]`, or a
    list of `{token id: score}` mappings (a server's top log-probabilities over the whole
    vocabulary), which are assembled into rows and refused when a row misses a token. `kind` says
    what the scores are: "logits" or "logprobs" (the judge compares log-probabilities with the
    oracle's log-softmax). The operation mutants fork_off_by_one, spec_rollback_off_by_one,
    preempt_short and turn_past are done here, so that `--mutant` catches them for every prompt
    engine."""

    kind: str = "logits"
    answers: str = "every"
    operations: ClassVar[Sequence[str]] = ("rollback", "reload", "sequences", "fork", "spec", "batch", "preempt", "turn")

    def open(self, model_dir: str, options: Mapping[str, Any], mutant: str, max_tokens: int,
             sequences: int) -> Union[int, Loaded]:
        """Loads the model as `Engine.load` does (the window mutants are the subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement open")

    def score(self, prompt: List[int], rows: List[int]) -> Any:
        """The scores of prompt positions `rows` (position i: the distribution of the token after
        prompt[: i + 1]), in order: bytes, an array [len(rows), vocab], or one {id: score} per row."""
        raise NotImplementedError(f"{type(self).__name__} does not implement score")

    def reload_prompt(self, seq: int, prompt: List[int]) -> List[int]:
        """The prompt of sequence seq after a save and a load; an engine with a state API overrides it."""
        return list(prompt)

    # ---- the protocol, on prompts ------------------------------------------------------------------
    def load(self, model_dir: str, options: Mapping[str, Any], mutant: str, max_tokens: int,
             sequences: int) -> Union[int, Loaded]:
        if self.kind not in ("logits", "logprobs") or self.answers not in ("every", "last"):
            raise ValueError(f"{type(self).__name__}: kind {self.kind!r} (logits, logprobs), "
                             f"answers {self.answers!r} (every, last)")
        if mutant in OPERATION_MUTANTS and mutant not in PROMPT_MUTANTS:
            raise Unsupported(f"mutant {mutant}: a prompt engine implements only {', '.join(PROMPT_MUTANTS)} "
                              "of the operation mutants (it has no cache to share, chunk, batch or shift)")
        self.prompts: Dict[int, List[int]] = {}
        self.mutant = mutant
        self.vocab = 0
        loaded = self.open(model_dir, options, mutant, max_tokens, sequences)
        self.vocab = loaded.vocab if isinstance(loaded, Loaded) else int(loaded)
        return loaded

    def _prompt(self, seq: int) -> List[int]:
        return self.prompts.setdefault(seq, [])

    def _rows(self, seq: int, tokens: List[int]) -> Tuple[List[int], List[int]]:
        prompt = self._prompt(seq)
        start = len(prompt)
        prompt.extend(tokens)
        new = list(range(len(tokens)))
        wanted = new[-1:] if self.answers == "last" else new
        return wanted, [start + i for i in wanted]

    def _assemble(self, scores: Any, count: int, where: str) -> bytes:
        if isinstance(scores, (bytes, bytearray, memoryview)):
            return bytes(scores)
        if isinstance(scores, (list, tuple)) and all(isinstance(r, Mapping) for r in scores):
            if len(scores) != count:
                raise RuntimeError(f"{where} gave {len(scores)} rows of scores, {count} were asked for")
            import array

            out = array.array("f")
            for i, row in enumerate(scores):
                missing = [t for t in range(self.vocab) if t not in row]
                if missing:
                    raise RuntimeError(f"{where}: row {i} has scores of {len(row)} tokens, not the whole vocabulary of "
                                       f"{self.vocab} (token {missing[0]} missing): ask for every token's score")
                out.extend(float(row[t]) for t in range(self.vocab))
            if sys.byteorder != "little":
                out.byteswap()
            return out.tobytes()
        import numpy as np

        a = np.asarray(scores, dtype="<f4")
        if a.shape != (count, self.vocab):
            raise RuntimeError(f"{where} gave scores of shape {a.shape}, expected {(count, self.vocab)}")
        return bytes(np.ascontiguousarray(a).tobytes())

    def _answer(self, wanted: List[int], data: bytes, total: int) -> Logits:
        every = len(wanted) == total
        if self.kind == "logprobs":
            return LogProbs(None if every else wanted, data)
        return data if every else Rows(wanted, data)

    def extend(self, seq: int, tokens: List[int]) -> Logits:
        wanted, positions = self._rows(seq, tokens)
        data = self._assemble(self.score(list(self._prompt(seq)), positions), len(positions), f"{type(self).__name__}.score")
        return self._answer(wanted, data, len(tokens))

    def batch(self, items: List[Tuple[int, List[int]]]) -> Logits:
        wanted, chunks, offset = [], [], 0
        for seq, tokens in items:
            rows, positions = self._rows(seq, tokens)
            chunks.append(self._assemble(self.score(list(self._prompt(seq)), positions), len(positions),
                                         f"{type(self).__name__}.score"))
            wanted += [offset + r for r in rows]
            offset += len(tokens)
        return self._answer(wanted, b"".join(chunks), offset)

    def rollback(self, seq: int, n: int) -> None:
        prompt = self._prompt(seq)
        if not 0 <= n <= len(prompt):
            raise ValueError(f"rollback of {n} tokens from sequence {seq} of {len(prompt)}")
        del prompt[len(prompt) - n:]

    def spec(self, seq: int, tokens: List[int], n: int) -> Logits:
        answer = self.extend(seq, tokens)
        drop = n + 1 if self.mutant == "spec_rollback_off_by_one" and n < len(self._prompt(seq)) else n
        self.rollback(seq, drop)
        return answer

    def fork(self, seq: int, source: int, length: int) -> None:
        prompt = self._prompt(source)
        if not 0 <= length <= len(prompt):
            raise ValueError(f"fork of {length} tokens from sequence {source} of {len(prompt)}")
        if self.mutant == "fork_off_by_one" and length:
            length -= 1
        self.prompts[seq] = list(prompt[:length])

    def reload(self, seq: int) -> None:
        self.prompts[seq] = list(self.reload_prompt(seq, list(self._prompt(seq))))

    def preempt(self, seq: int) -> None:
        prompt = self._prompt(seq)
        if self.mutant == "preempt_short" and prompt:
            del prompt[-1:]

    def turn(self, seq: int, keep: int, tokens: List[int]) -> Logits:
        prompt = self._prompt(seq)
        if not 0 <= keep <= len(prompt):
            raise ValueError(f"turn keeping {keep} tokens of sequence {seq} of {len(prompt)}")
        if self.mutant == "turn_past" and keep < len(prompt):
            keep += 1
        del prompt[keep:]
        return self.extend(seq, tokens)

    def reset(self) -> None:
        self.prompts = {}


@contextlib.contextmanager
def cache_lock(path: str) -> Iterator[None]:
    """Holds an exclusive lock on PATH + ".lock" for the block: an adapter that converts a checkpoint
    into a cache folder (check, build, mark done) wraps all three in it, so that two engine runs at
    once (a parallel ctest, two CI jobs on one cache) build a folder once and never read one half
    built or removed under them."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def mutated_window(window: int, mutant: str) -> Optional[int]:
    """The window an adapter mutant tells the engine (None: sliding layers run as full attention)."""
    mutant = canonical_mutant(mutant)
    if mutant not in MUTANTS:
        raise ValueError(f"unknown mutant {mutant!r} (expected one of {', '.join(MUTANTS)})")
    if mutant in OPERATION_MUTANTS or mutant in MODEL_MUTANTS:
        return window  # the operation or the model feature is done wrong, the window is right
    return {"none": window, "window_off_by_one+1": window + 1, "window_off_by_one-1": window - 1,
            "full_attention_on_sliding": None}[mutant]


def mutate_hf_config(cfg: Any, mutant: str) -> Any:
    """Tells a transformers config (a PretrainedConfig), or config.json's contents as a dict (no
    transformers needed: an engine that converts the checkpoint writes the dict back), the adapter
    mutant's window, in place, and returns it: sliding_window W+-1, or every layer full attention (layer_types all full where the
    config has them, else no sliding_window); on a chunked model without a window (llama4),
    attention_chunk_size C+-1, or no chunking. A model mutant (MODEL_MUTANTS) changes what the
    config can express of it, and raises Unsupported where it cannot (sinks_dropped and
    shared_kv_full are weights and cache sharing, not config: the adapter's own business)."""
    mutant = canonical_mutant(mutant)
    if isinstance(cfg, dict):
        return _mutate_config_dict(cfg, mutant)
    if mutant == "none" or mutant in OPERATION_MUTANTS:
        return cfg
    if mutant in MODEL_MUTANTS:
        return _mutate_model_config(cfg, mutant)
    chunk = getattr(cfg, "attention_chunk_size", None)
    if chunk and not getattr(cfg, "sliding_window", None):
        # A chunked model (llama4): the mutants tell it a wrong chunk, or no chunking.
        cfg.attention_chunk_size = mutated_window(chunk, mutant) or 1 << 30
        return cfg
    sliding = getattr(cfg, "sliding_window", None)
    window = mutated_window(sliding, mutant) if sliding else None
    if window is not None:
        cfg.sliding_window = window
    elif getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = ["full_attention"] * cfg.num_hidden_layers
    else:
        cfg.sliding_window = None
    return cfg


def _mutate_config_dict(cfg: Dict[str, Any], mutant: str) -> Dict[str, Any]:
    """mutate_hf_config on config.json's dict: the same rules, through an attribute view of it."""
    import types

    if mutated_window(1 << 20, mutant) is None and not isinstance(cfg.get("num_hidden_layers"), int):
        raise ValueError("mutate_hf_config: config.json has no integer num_hidden_layers")
    view = types.SimpleNamespace(**cfg)
    mutate_hf_config(view, mutant)
    cfg.clear()
    cfg.update(vars(view))
    return cfg


def _mutate_model_config(cfg: Any, mutant: str) -> Any:
    from .protocol import Unsupported

    n = getattr(cfg, "num_hidden_layers", 0)
    types = list(getattr(cfg, "layer_types", None) or [])
    if mutant in ("window_on_every_layer", "layer_types_swapped"):
        if getattr(cfg, "model_type", "") == "gemma4_text":
            raise Unsupported(
                f"mutant {mutant}: gemma4's per-layer head sizes are fixed from layer_types when the config is built"
            )
        if not types or not getattr(cfg, "sliding_window", None):
            raise Unsupported(f"mutant {mutant}: the config has no layer_types with a sliding_window")
        swap = {"sliding_attention": "full_attention", "full_attention": "sliding_attention"}
        new = ["sliding_attention"] * n if mutant == "window_on_every_layer" else [swap.get(t, t) for t in types]
        if new == types:
            raise Unsupported(f"mutant {mutant}: changes nothing on layer_types {types}")
        cfg.layer_types = new
    elif mutant == "nope_inverted":
        if getattr(cfg, "no_rope_layers", None):  # llama4, smollm3: 1 = rope, 0 = NoPE
            cfg.no_rope_layers = [1 - int(v) for v in cfg.no_rope_layers]
        elif getattr(cfg, "layer_rope_theta", None):  # granite_swa: 0 = NoPE
            rp = getattr(cfg, "rope_parameters", None) or {}
            base = rp.get("rope_theta") or getattr(cfg, "rope_theta", None) or 10000.0
            cfg.layer_rope_theta = [0 if t else base for t in cfg.layer_rope_theta]
        else:
            raise Unsupported("mutant nope_inverted: the config names no NoPE layers (no_rope_layers, layer_rope_theta)")
    elif mutant == "rope_all_rotary":
        hit = False
        rp = getattr(cfg, "rope_parameters", None)
        for p in ([rp] + list(rp.values())) if isinstance(rp, dict) else []:
            if isinstance(p, dict) and p.get("partial_rotary_factor", 1.0) != 1.0:
                p["partial_rotary_factor"], hit = 1.0, True
        if getattr(cfg, "partial_rotary_factor", 1.0) not in (None, 1.0):  # phi3 in 4.x
            cfg.partial_rotary_factor, hit = 1.0, True
        if not hit:
            raise Unsupported("mutant rope_all_rotary: the config has no partial_rotary_factor below 1")
    else:
        raise Unsupported(f"mutant {mutant}: not a config change (the adapter's weights or cache)")
    return cfg


def _precision(value: Mapping[str, str], where: str) -> Dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: precision must be a mapping like {{'kv': 'float16'}}, got {type(value).__name__}")
    out = {}
    for key, dtype in value.items():
        if key not in PRECISION:
            raise ValueError(f"{where}: precision key {key!r}: known are {', '.join(PRECISION)}")
        allowed = BLOCKS.get(key, ("float16", "float32"))
        if dtype not in allowed:
            raise ValueError(f"{where}: precision {key}={dtype!r}: expected " + " or ".join(repr(a) for a in allowed))
        if dtype != "float32":
            out[key] = dtype
    return out


class _Step(NamedTuple):
    """How a worker serves one op of the step table (engines/protocol.json): the Engine method it calls
    with the request's fields, and how many logit rows it answers (None: an answer without logits)."""
    serve: Callable[[Engine, Header], Any]
    rows: Optional[Callable[[Header], int]]


def _batch_items(h: Header) -> List[Tuple[int, List[int]]]:
    return [(int(item["seq"]), list(item["tokens"])) for item in h["items"]]


_STEPS: Dict[str, _Step] = {
    "extend": _Step(lambda e, h: e.extend(h["seq"], list(h["tokens"])), lambda h: len(h["tokens"])),
    "rollback": _Step(lambda e, h: e.rollback(h["seq"], h["n"]), None),
    "reload": _Step(lambda e, h: e.reload(h["seq"]), None),
    "reset": _Step(lambda e, h: e.reset(), None),
    "fork": _Step(lambda e, h: e.fork(h["seq"], h["from"], h["length"]), None),
    "chunked": _Step(lambda e, h: e.chunked(h["seq"], list(h["tokens"]), h["chunk"]), lambda h: len(h["tokens"])),
    "spec": _Step(lambda e, h: e.spec(h["seq"], list(h["tokens"]), h["n"]), lambda h: len(h["tokens"])),
    "batch": _Step(lambda e, h: e.batch(_batch_items(h)), lambda h: sum(len(t) for _, t in _batch_items(h))),
    "shift": _Step(lambda e, h: e.shift(h["seq"], h["keep"], h["discard"]), None),
    "preempt": _Step(lambda e, h: e.preempt(h["seq"]), None),
    "turn": _Step(lambda e, h: e.turn(h["seq"], h["keep"], list(h["tokens"])), lambda h: len(h["tokens"])),
}
"""Every plan step's op, served: adding an operation is a row here (and in the step table) and an Engine method."""


class _Session:
    """One worker's state between requests: the vocabulary of the last load."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.vocab = engine, 0
        bad = [op for op in engine.operations if op not in OPERATIONS]
        if bad:
            raise ValueError(f"{type(engine).__name__}.operations {bad}: known are {', '.join(OPERATIONS)}")
        _precision(engine.precision, f"{type(engine).__name__}.precision")

    def hello(self) -> Header:
        e = self.engine
        return {"status": "ok", "name": e.name, "version": e.version, "description": e.description,
                "operations": list(e.operations)}

    def handle(self, h: Header, buffers: Dict[str, Buffer]) -> Tuple[Header, Sequence[OutBuffer]]:
        e, op = self.engine, h.get("op")
        if op == "load":
            self.vocab = 0
            mutant = canonical_mutant(h.get("mutant", "none"))
            needs = MUTANT_OPERATION.get(mutant)
            if needs is not None and needs not in e.operations:
                raise Unsupported(f"mutant {mutant}: {type(e).__name__} has no {needs} operation")
            loaded = e.load(h["model"], h.get("options", {}), mutant, h.get("max_tokens", 0),
                            h.get("sequences", 1))
            where = f"{type(e).__name__}.load"
            if isinstance(loaded, Loaded):
                vocab, precision = loaded.vocab, loaded.precision if loaded.precision is not None else e.precision
            else:
                vocab, precision = loaded, e.precision
            if isinstance(vocab, bool) or not hasattr(vocab, "__index__") or operator.index(vocab) <= 0:
                raise TypeError(f"{where} returned {vocab!r}: expected the vocabulary size (an int > 0) "
                                "or Loaded(vocab, precision)")
            vocab = operator.index(vocab)  # numpy's integers too
            reply: Header = {"vocab": vocab}
            rounded = _precision(precision, where)
            if rounded:
                reply["precision"] = rounded
            self.vocab = vocab
            return reply, ()
        step = _STEPS.get(op) if isinstance(op, str) else None
        if step is None:
            raise ValueError(f"unknown op {op!r}")
        answer = step.serve(e, h)
        if step.rows is None:
            return {}, ()
        return self._logits(answer, step.rows(h), f"{type(e).__name__}.{op}")

    def _logits(self, answer: Logits, rows: int, where: str) -> Tuple[Header, Sequence[OutBuffer]]:
        named, kind = None, "logits"
        if isinstance(answer, LogProbs):
            kind = "logprobs"
            named = None if answer.rows is None else list(answer.rows)
            answer = answer.logprobs
        elif isinstance(answer, Rows):
            named = list(answer.rows)
            answer = answer.logits
        if named is not None:
            named = [operator.index(r) for r in named]
            if any(r < 0 or r >= rows for r in named) or any(b <= a for a, b in zip(named, named[1:])):
                raise ValueError(f"{where} returned {'LogProbs' if kind == 'logprobs' else 'Rows'}({named}, ...): "
                                 f"rows must be increasing indices in [0, {rows})")
        data = bytes(answer)
        count = rows if named is None else len(named)
        want = 4 * count * self.vocab
        if len(data) != want:
            raise RuntimeError(f"{where} returned {len(data)} bytes of {kind}, expected {want} "
                               f"({count} positions x vocab {self.vocab} float32)")
        header: Header = {} if named is None else {"rows": named}
        return header, [(kind, "float32", [count, self.vocab], data)]


def serve(engine: Engine, stdin: Optional[IO[bytes]] = None, stdout: Optional[IO[bytes]] = None) -> None:
    """Answers the host (`kvconform engine`) on stdin/stdout until it closes stdin. The protocol owns
    stdout: print() goes to stderr meanwhile."""
    if not isinstance(engine, Engine):
        raise TypeError(f"kvconform.engine.serve: {engine!r} is not an instance of a kvconform.Engine subclass")
    session = _Session(engine)
    serve_requests(session.hello, session.handle, stdin, stdout)


def load_engine(spec: str) -> Engine:
    """The Engine that SPEC (path/adapter.py:Class or module:Class) names: a subclass, instantiated
    without arguments, or an instance; the attribute may be omitted when the module defines exactly
    one Engine subclass."""
    found = load_object(spec, "a kvconform.Engine subclass or instance", _is_engine)
    engine = found() if isinstance(found, type) else found
    assert isinstance(engine, Engine)
    return engine


def _is_engine(obj: object) -> bool:
    return isinstance(obj, Engine) or (isinstance(obj, type) and issubclass(obj, Engine) and obj is not Engine)


def serve_main(argv: Optional[Sequence[str]] = None) -> None:
    """python -m kvconform serve-engine SPEC: the worker `kvconform engine --engine-cmd` starts."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit("usage: python -m kvconform serve-engine SPEC   (path/adapter.py:EngineClass or module:EngineClass)")
    with protocol_stdout() as stream:  # from before the adapter's module is imported
        serve(load_engine(args[0]), stdout=stream)
