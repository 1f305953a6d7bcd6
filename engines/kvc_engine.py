"""Deprecated for one release, then removed: the engine side is the `kvconform` package (python/),
`from kvconform import Engine, Unsupported, serve_engine` (python/README.md, "Engines")."""
import warnings

from kvconform.engine import MUTANTS, Engine, Loaded, Unsupported, mutate_hf_config, mutated_window, serve  # noqa: F401

warnings.warn("engines/kvc_engine.py is deprecated and goes away in the next release: use "
              "`from kvconform import Engine, Unsupported, serve_engine` (python/README.md)", DeprecationWarning, stacklevel=2)
