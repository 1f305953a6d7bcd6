"""The `kvconform` command of the wheel: runs the binary inside this package (kvconform/bin/kvconform).

The binary loads LibTorch from the installed torch wheel through its run path, site-packages/torch/lib
beside this package. Where torch sits in another site-packages (a --user install beside a system
torch, a --target folder), that run path finds nothing, and this launcher puts that torch's lib/ on
LD_LIBRARY_PATH instead (found without importing torch, which costs a second).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import List, Optional, Sequence

from .binary import PACKAGED, packaged


def torch_lib() -> Optional[str]:
    """The lib/ folder of the torch the interpreter would import, or None without torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "lib")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    if not packaged():
        sys.exit(f"kvconform: no binary at {PACKAGED}: this `kvconform` command belongs to the wheel "
                 "(bash scripts/wheel.sh, docs/install.md); a checkout's binary is build/cli/kvconform")
    beside = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(PACKAGED))), "torch", "lib")
    if not os.path.isdir(beside):
        lib = torch_lib()
        if lib and os.path.isdir(lib):
            os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, os.environ.get("LD_LIBRARY_PATH")) if p)
    os.execv(PACKAGED, [PACKAGED, *args])
    return 1  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
