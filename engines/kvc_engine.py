"""The worker side of kvconform's engine protocol (docs/engines.md, "The engine protocol").

An adapter subclasses Engine and calls serve(MyEngine()). The framing is the kernel protocol's
(plugins/python/kvc_protocol.py). Raise Unsupported for what the engine cannot do (the case is a
SKIP with that message); any other exception is an error reply (the case FAILs with the message);
the worker lives on either way.
"""
import os
import struct
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "python"))
from kvc_protocol import Unsupported, _receive, _send  # noqa: E402

MUTANTS = ("none", "window+1", "window-1", "full")


class Engine:
    name = "engine"
    version = ""
    description = ""
    operations = ()  # optional operations supported: "rollback", "reload", "sequences"

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        """Loads the model; returns the vocabulary size."""
        raise NotImplementedError

    def extend(self, seq, tokens):
        """Feeds tokens to sequence seq; returns float32 logits as bytes, len(tokens) * vocab values."""
        raise NotImplementedError

    def rollback(self, seq, n):
        raise Unsupported("rollback is not supported")

    def reload(self, seq):
        raise Unsupported("reload is not supported")

    def reset(self):
        raise NotImplementedError


def mutated_window(window, mutant):
    """The window an adapter mutant tells the engine (None: sliding layers run as full attention)."""
    if mutant not in MUTANTS:
        raise ValueError(f"unknown mutant {mutant!r} (expected one of {', '.join(MUTANTS)})")
    return {"none": window, "window+1": window + 1, "window-1": window - 1, "full": None}[mutant]


def mutate_hf_config(cfg, mutant):
    """Tells a transformers config the adapter mutant's window, in place: sliding_window W+-1, or every
    layer full attention (layer_types all full where the config has them, else no sliding_window)."""
    window = mutated_window(cfg.sliding_window, mutant)
    if mutant == "none":
        return cfg
    if window is not None:
        cfg.sliding_window = window
    elif getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = ["full_attention"] * cfg.num_hidden_layers
    else:
        cfg.sliding_window = None
    return cfg


def serve(engine):
    stream_in, stream_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a library's print must not corrupt the stream
    vocab = 0
    while True:
        h, _ = _receive(stream_in)
        op = h.get("op")
        try:
            if op == "hello":
                _send(stream_out, {"status": "ok", "name": engine.name, "version": engine.version,
                                   "description": engine.description, "operations": list(engine.operations)})
                continue
            if op == "load":
                vocab = engine.load(h["model"], h.get("options", {}), h.get("mutant", "none"),
                                    h.get("max_tokens", 0), h.get("sequences", 1))
                _send(stream_out, {"status": "ok", "vocab": vocab})
            elif op == "extend":
                data = engine.extend(h["seq"], list(h["tokens"]))
                n = len(h["tokens"])
                if len(data) != 4 * n * vocab:
                    raise RuntimeError(f"adapter returned {len(data)} bytes of logits, expected {4 * n * vocab}")
                _send(stream_out, {"status": "ok", "buffers": [
                    {"name": "logits", "dtype": "float32", "shape": [n, vocab], "nbytes": len(data)}]}, data)
            elif op == "rollback":
                engine.rollback(h["seq"], h["n"])
                _send(stream_out, {"status": "ok"})
            elif op == "reload":
                engine.reload(h["seq"])
                _send(stream_out, {"status": "ok"})
            elif op == "reset":
                engine.reset()
                _send(stream_out, {"status": "ok"})
            else:
                _send(stream_out, {"status": "error", "error": f"unknown op {op!r}"})
        except Unsupported as e:
            _send(stream_out, {"status": "unsupported", "error": str(e)})
        except Exception as e:  # the case fails with this message; the worker lives on
            where = traceback.extract_tb(e.__traceback__)[-1]
            _send(stream_out, {"status": "error", "error": f"{type(e).__name__}: {e} ({where.name}:{where.lineno})"})
