"""python -m kvconform serve SPEC     serve one kernel to `kvconform run --backend-cmd` (the worker)
python -m kvconform run SPEC [ARGS]  run kvconform against it: `kvconform run --backend-cmd '...' ARGS`
python -m kvconform bin              print the kvconform binary that `run` and the pytest plugin use

SPEC: package.module:function or path/to/file.py:function (the function decorated with @kvconform.kernel)."""
import os
import shlex
import sys


def serve_main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.exit("usage: python -m kvconform serve SPEC")
    from .serve import load, serve
    protocol = sys.stdout.buffer
    sys.stdout = sys.stderr  # the protocol owns stdout, from before the kernel's module is imported
    serve(load(argv[0]), stdout=protocol)


def worker_command(spec, python=None):
    """The --backend-cmd that serves SPEC, with absolute paths so that it runs from anywhere."""
    target, sep, attr = spec.rpartition(":")
    if not sep or "/" in attr:
        target, attr = spec, ""
    if target.endswith(".py") or "/" in target:
        target = os.path.abspath(target)
    spec = f"{target}:{attr}" if attr else target
    return f"{shlex.quote(python or sys.executable)} -m kvconform serve {shlex.quote(spec)}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "serve":
        return serve_main(rest)
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
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
