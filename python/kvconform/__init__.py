"""kvconform's Python entry point: attention kernels and inference engines checked by kvconform.

Kernels (docs/plugins.md, "From zero to a CI job with pytest"): a decorated function, checked by
`pytest --kvconform`:

    @kvconform.kernel(window="flash", layouts=["window", "key_padding_mask"])
    def attention(q, k, v, *, window_size, scale, key_padding_mask=None):
        ...

Engines (docs/engines.md, "The engine protocol"): a subclass of `kvconform.Engine`, served by
`kvconform.serve_engine` and checked by `kvconform engine` or `pytest --kvconform-engine`:

    class MyEngine(kvconform.Engine):
        def load(self, model_dir, options, mutant, max_tokens, sequences): ...   # -> vocab size
        def extend(self, seq, tokens): ...                                       # -> float32 logits bytes

The framing both use is `kvconform.protocol`.
"""
from pathlib import Path

from .binary import NotFound
from .binary import find as find_binary
from .engine import MUTANTS, Engine, Loaded, LogProbs, PromptEngine, Rows, cache_lock, mutate_hf_config, mutated_window
from .engine import serve as serve_engine
from .kernel import CONVENTIONS, LAYOUTS, Kernel, kernel
from .protocol import Unsupported

__all__ = ["CONVENTIONS", "LAYOUTS", "MUTANTS", "Engine", "Kernel", "Loaded", "LogProbs", "NotFound", "PromptEngine", "Rows",
           "Unsupported",
           "cache_lock", "find_binary", "kernel", "mutate_hf_config", "mutated_window", "serve_engine"]
# The repository's one version number (VERSION; the package's own VERSION links to it): the binary's
# `kvconform --version` says the same.
__version__ = (Path(__file__).with_name("VERSION")).read_text(encoding="utf-8").strip()
