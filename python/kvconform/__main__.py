"""python -m kvconform serve SPEC            serve one kernel to `kvconform run --backend-cmd` (the worker)
python -m kvconform serve-engine SPEC     serve one engine to `kvconform engine --engine-cmd` (the worker)
python -m kvconform run SPEC [ARGS]       run kvconform on a kernel: `kvconform run --backend-cmd '...' ARGS`
python -m kvconform engine SPEC [ARGS]    run kvconform on an engine: `kvconform engine --engine-cmd '...' ARGS`
                                          (the wheel's kvconform, or from a checkout: it needs engines/models/)
python -m kvconform site REPORT_DIR...    the results of report folders as a static site (`kvconform site`)
python -m kvconform bin                   print the kvconform binary that `run`, `engine` and the pytest plugin use

SPEC: package.module:NAME or path/to/file.py:NAME: a function decorated with @kvconform.kernel, or a
subclass of kvconform.Engine."""
from __future__ import annotations

import os
import shlex
import sys
from typing import List, Optional, Sequence

from ._load import split_spec


def serve_main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit("usage: python -m kvconform serve SPEC")
    from .protocol import protocol_stdout
    from .serve import load, serve
    from .zygote import hand_off
    hand_off(("torch",))  # KVC_ZYGOTE=1: a fork server's child serves
    with protocol_stdout() as stream:  # from before the kernel's module is imported
        serve(load(args[0]), stdout=stream)


def worker_command(spec: str, python: Optional[str] = None, serve: str = "serve") -> str:
    """The --backend-cmd (serve) or --engine-cmd (serve-engine) that serves SPEC, with absolute paths
    so that it runs from anywhere."""
    target, attr = split_spec(spec)
    if target.endswith(".py") or "/" in target:
        target = os.path.abspath(target)
    spec = f"{target}:{attr}" if attr else target
    return f"{shlex.quote(python or sys.executable)} -m kvconform {serve} {shlex.quote(spec)}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = args[0], args[1:]
    if command == "serve":
        serve_main(rest)
        return 0
    if command == "serve-engine":
        from .engine import serve_main as serve_engine_main
        from .zygote import hand_off
        hand_off(("torch", "transformers", "transformers.modeling_utils"))
        serve_engine_main(rest)
        return 0
    if command == "site":
        from .site import main as site_main
        return site_main(rest)
    from .binary import NotFound, find
    try:
        binary = find()
    except NotFound as e:
        sys.exit(f"kvconform: {e}")
    if command == "bin":
        print(binary)
        return 0
    if command == "run" and rest:
        os.execv(binary, [binary, "run", "--backend-cmd", worker_command(rest[0])] + rest[1:])
    if command == "engine" and rest:
        os.execv(binary, [binary, "engine", "--engine-cmd", worker_command(rest[0], serve="serve-engine")] + rest[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
