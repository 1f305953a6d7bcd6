"""The kernel worker: serves one `kvconform.kernel` on stdin/stdout for `kvconform run --backend-cmd`."""
from __future__ import annotations

from typing import IO, Callable, Dict, Optional, Sequence, Tuple

from ._load import load_object
from .kernel import Kernel
from .protocol import Buffer, Header, OutBuffer, serve_requests


def load(spec: str) -> Kernel:
    """'package.module:attr' or 'path/to/file.py:attr' -> the Kernel (attr may be omitted when the
    module holds exactly one)."""
    found = load_object(spec, "a function decorated with @kvconform.kernel", lambda v: isinstance(v, Kernel))
    assert isinstance(found, Kernel)
    return found


def serve(kern: Kernel, stdin: Optional[IO[bytes]] = None, stdout: Optional[IO[bytes]] = None) -> None:
    """Answer the host until it closes stdin. The protocol owns stdout: print() goes to stderr."""
    def handle(header: Header, buffers: Dict[str, Buffer]) -> Tuple[Header, Sequence[OutBuffer]]:
        dtype, shape, data = kern.handle(header, buffers)
        return {}, [("out", dtype, shape, data)]

    serve_requests(kern.hello, handle, stdin, stdout)


AttentionHandler = Callable[[Header, Dict[str, Buffer]], Tuple[str, Sequence[int], bytes]]


def serve_handler(name: str, description: str, attention: AttentionHandler, layouts: Sequence[str] = (),
                  stdin: Optional[IO[bytes]] = None, stdout: Optional[IO[bytes]] = None) -> None:
    """The kernel worker for an adapter that maps the protocol itself (docs/plugins.md, "Framing")
    rather than through @kvconform.kernel: attention(header, buffers) -> (dtype, shape, bytes) of
    `out`; layouts: the optional layouts it declares ("key_padding_mask", "varlen")."""
    def hello() -> Header:
        reply: Header = {"status": "ok", "name": name, "description": description}
        if layouts:
            reply["layouts"] = list(layouts)
        return reply

    def handle(header: Header, buffers: Dict[str, Buffer]) -> Tuple[Header, Sequence[OutBuffer]]:
        dtype, shape, data = attention(header, buffers)
        return {}, [("out", dtype, shape, data)]

    serve_requests(hello, handle, stdin, stdout)
