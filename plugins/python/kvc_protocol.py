"""The worker side of kvconform's subprocess protocol (docs/plugins.md, "Kernels in another process"),
shared by the adapters that need more than the minimal one: framing, buffers as raw bytes, replies.

A handler gets (header, buffers) with buffers[name] = (dtype, shape, bytes) and returns
(dtype, shape, bytes) for "out"; it raises Unsupported for a configuration it does not cover (the
case is a SKIP); any other exception becomes an error reply (the case FAILs with the message).
"""
import importlib.util
import json
import os
import struct
import sys
import traceback


class Unsupported(Exception):
    pass


# The framing is the Python package's (python/kvconform/_wire.py, standard library only), loaded by
# path so that these adapters need neither the package installed nor its kernel-side imports.
_spec = importlib.util.spec_from_file_location(
    "kvconform_wire", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "kvconform", "_wire.py"))
_wire = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_wire)


def _receive(stream):
    try:
        return _wire.receive(stream)
    except _wire.Closed:
        sys.exit(0)  # EOF: the host is done with this worker


def _send(stream, header, payload=b""):
    data = json.dumps(header).encode()
    stream.write(struct.pack("<I", len(data)) + data + payload)
    stream.flush()


def serve(name, description, handle):
    # The protocol owns stdout: anything a library prints there would corrupt the stream.
    stream_in, stream_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    while True:
        header, buffers = _receive(stream_in)
        if header["op"] == "hello":
            _send(stream_out, {"status": "ok", "name": name, "description": description})
            continue
        try:
            dtype, shape, data = handle(header, buffers)
        except Unsupported as e:
            _send(stream_out, {"status": "unsupported", "error": str(e)})
            continue
        except Exception as e:  # the case fails with this message; the worker lives on
            where = traceback.extract_tb(e.__traceback__)[-1]
            _send(stream_out, {"status": "error", "error": f"{type(e).__name__}: {e} ({where.name}:{where.lineno})"})
            continue
        _send(stream_out, {"status": "ok", "buffers": [
            {"name": "out", "dtype": dtype, "shape": list(shape), "nbytes": len(data)}]}, data)


def arg(name, default, convert=int):
    """--name VALUE from the command line."""
    flag = "--" + name
    return convert(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else default
