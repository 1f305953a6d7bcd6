"""The framing of kvconform's subprocess protocol (docs/plugins.md, "Kernels in another process"):
every message is a 4-byte little-endian header length, the header (UTF-8 JSON), then the header's
`buffers` back to back, raw little-endian, contiguous row-major."""
import json
import struct


class Closed(Exception):
    """The host closed the worker's stdin: it is done with this worker."""


def _read_exact(stream, n):
    chunks, left = [], n
    while left:
        data = stream.read(left)
        if not data:
            raise Closed()
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


def receive(stream):
    """(header, {name: (dtype, shape, bytes)})"""
    header = json.loads(_read_exact(stream, struct.unpack("<I", _read_exact(stream, 4))[0]))
    buffers = {}
    for b in header.get("buffers", []):
        buffers[b["name"]] = (b["dtype"], tuple(b["shape"]), _read_exact(stream, b["nbytes"]))
    return header, buffers


def send(stream, header, buffers=()):
    """buffers: (name, dtype, shape, bytes) tuples, described in the header and sent after it."""
    header = dict(header)
    if buffers:
        header["buffers"] = [{"name": n, "dtype": d, "shape": list(s), "nbytes": len(b)} for n, d, s, b in buffers]
    data = json.dumps(header).encode()
    stream.write(struct.pack("<I", len(data)) + data + b"".join(b for _, _, _, b in buffers))
    stream.flush()
