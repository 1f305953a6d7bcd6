"""The worker loop: serves one `kvconform.kernel` on stdin/stdout for `kvconform run --backend-cmd`."""
import importlib
import importlib.util
import os
import sys
import traceback

from . import _wire
from .kernel import Kernel, Unsupported


def load(spec):
    """'package.module:attr' or 'path/to/file.py:attr' -> the Kernel (attr may be omitted when the
    module holds exactly one)."""
    target, sep, attr = spec.rpartition(":")
    if not sep or "/" in attr:
        target, attr = spec, ""
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise SystemExit(f"kvconform: no such file: {target} (from {spec!r})")
        sys.path.insert(0, os.path.dirname(path))
        name = os.path.splitext(os.path.basename(path))[0]
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules.setdefault(name, module)
        module_spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(target)
    if attr:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part, None)
        if not isinstance(obj, Kernel):
            raise SystemExit(f"kvconform: {spec}: {attr} is not a function decorated with @kvconform.kernel")
        return obj
    found = [v for v in vars(module).values() if isinstance(v, Kernel)]
    if len(found) != 1:
        raise SystemExit(f"kvconform: {spec}: {len(found)} @kvconform.kernel functions; name one as {target}:NAME")
    return found[0]


def serve(kern, stdin=None, stdout=None):
    """Answer the host until it closes stdin. The protocol owns stdout: print() goes to stderr."""
    stream_in = stdin or sys.stdin.buffer
    stream_out = stdout or sys.stdout.buffer
    if stdout is None:
        sys.stdout = sys.stderr
    while True:
        try:
            header, buffers = _wire.receive(stream_in)
        except _wire.Closed:
            return
        if header.get("op") == "hello":
            _wire.send(stream_out, kern.hello())
            continue
        try:
            dtype, shape, data = kern.handle(header, buffers)
        except Unsupported as e:
            _wire.send(stream_out, {"status": "unsupported", "error": str(e)})
            continue
        except Exception as e:  # the case FAILs with the message; the worker lives on
            where = traceback.extract_tb(e.__traceback__)[-1]
            _wire.send(stream_out, {"status": "error",
                                    "error": f"{type(e).__name__}: {e} ({os.path.basename(where.filename)}:"
                                             f"{where.lineno} in {where.name})"})
            continue
        _wire.send(stream_out, {"status": "ok"}, [("out", dtype, shape, data)])
