"""kvconform's Python entry point: write an attention kernel as a decorated function and check it
with `pytest --kvconform` (docs/plugins.md, "From zero to a CI job with pytest").

    import kvconform

    @kvconform.kernel(window="flash", layouts=["window", "key_padding_mask"])
    def attention(q, k, v, *, window_size, scale, key_padding_mask=None):
        ...
"""
from .kernel import CONVENTIONS, LAYOUTS, Kernel, Unsupported, kernel
from .binary import NotFound, find as find_binary

__all__ = ["kernel", "Kernel", "Unsupported", "CONVENTIONS", "LAYOUTS", "find_binary", "NotFound"]
__version__ = "0.1.0"
