"""`kvconform.protocol`: the framing of kvconform's subprocess protocols, both sides.

Kernels (docs/plugins.md, "Kernels in another process") and engines (docs/engines.md, "The engine
protocol") speak the same frames on the worker's stdin/stdout: a 4-byte little-endian header length,
the header (UTF-8 JSON), then the header's `buffers` (`{"name", "dtype", "shape", "nbytes"}`) back
to back, raw little-endian, contiguous row-major.

The worker side: `receive` and `send` one message, `serve_requests` answers the host until it closes
stdin (`Unsupported` from a handler is an "unsupported" reply, the case a SKIP; any other exception
an "error" reply naming where it was raised, the case a FAIL; the worker lives on either way). The
host side: `Client` starts a worker command and exchanges requests with it. Standard library only.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import struct
import subprocess
import sys
import traceback
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["Buffer", "Client", "Closed", "Header", "OutBuffer", "Unsupported", "WorkerError", "error_reply",
           "protocol_stdout", "receive", "send", "serve_requests"]

Header = Dict[str, Any]
"""A message's JSON header."""
Buffer = Tuple[str, Tuple[int, ...], bytes]
"""A received buffer: (dtype, shape, raw bytes)."""
OutBuffer = Tuple[str, str, Sequence[int], bytes]
"""A buffer to send: (name, dtype, shape, raw bytes)."""
Handler = Callable[[Header, Dict[str, Buffer]], Tuple[Header, Sequence[OutBuffer]]]


class Unsupported(Exception):
    """Raise it for what the kernel or engine does not implement: the case is a SKIP, with the message
    (for an optional engine operation, the whole plan)."""


class Closed(Exception):
    """The other side closed the stream: the host is done with this worker (or the worker died)."""


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks: List[bytes] = []
    left = n
    while left:
        data = stream.read(left)
        if not data:
            raise Closed()
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


def receive(stream: IO[bytes]) -> Tuple[Header, Dict[str, Buffer]]:
    """One message: (header, {name: (dtype, shape, bytes)}). Raises Closed at the end of the stream."""
    (length,) = struct.unpack("<I", _read_exact(stream, 4))
    header = json.loads(_read_exact(stream, length))
    if not isinstance(header, dict):
        raise ValueError(f"protocol: a header must be a JSON object, got {type(header).__name__}")
    buffers: Dict[str, Buffer] = {}
    for b in header.get("buffers", []):
        buffers[b["name"]] = (b["dtype"], tuple(b["shape"]), _read_exact(stream, b["nbytes"]))
    return header, buffers


def send(stream: IO[bytes], header: Mapping[str, Any], buffers: Sequence[OutBuffer] = ()) -> None:
    """One message: the header, with `buffers` described in it and their bytes sent after it."""
    out = dict(header)
    if buffers:
        out["buffers"] = [{"name": n, "dtype": d, "shape": list(s), "nbytes": len(b)} for n, d, s, b in buffers]
    data = json.dumps(out).encode()
    stream.write(struct.pack("<I", len(data)) + data + b"".join(b for _, _, _, b in buffers))
    stream.flush()


def error_reply(e: BaseException) -> Header:
    """The "error" reply for an exception: its type, message and where it was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" ({os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    return {"status": "error", "error": f"{type(e).__name__}: {e}{where}"}


@contextlib.contextmanager
def protocol_stdout() -> Iterator[IO[bytes]]:
    """The protocol's stream, guarded at the file-descriptor level: the stream is a duplicate of file
    descriptor 1, and meanwhile descriptor 1 itself points at stderr (and sys.stdout is sys.stderr),
    so that nothing else written to "stdout" reaches the frames: a library's print(), a native
    library's printf or log (C stdio, Rust, a subprocess inheriting descriptor 1) all go to the
    worker's stderr, which the host keeps as its log. Enter it before importing what prints.
    Where descriptor 1 cannot be duplicated (no such descriptor), only sys.stdout is redirected."""
    sys.stdout.flush()
    try:
        saved_fd = os.dup(1)
    except OSError:
        saved_fd = -1
    if saved_fd < 0:
        stream = sys.stdout.buffer
        saved, sys.stdout = sys.stdout, sys.stderr
        try:
            yield stream
        finally:
            sys.stdout = saved
        return
    sys.stderr.flush()
    os.dup2(2, 1)
    stream = os.fdopen(saved_fd, "wb", closefd=False)
    saved, sys.stdout = sys.stdout, sys.stderr
    try:
        yield stream
    finally:
        stream.flush()
        sys.stdout = saved
        os.dup2(saved_fd, 1)
        os.close(saved_fd)


def serve_requests(hello: Callable[[], Header], handle: Handler, stdin: Optional[IO[bytes]] = None,
                   stdout: Optional[IO[bytes]] = None) -> None:
    """Answers the host until it closes stdin: `hello()` to the hello, `handle(header, buffers)` ->
    (reply header, buffers) to every other request; a reply header without "status" gets "ok".
    Without stdout, sys.stdout's stream is used and print() goes to stderr meanwhile."""
    if stdout is None:
        with protocol_stdout() as stream:
            return serve_requests(hello, handle, stdin, stream)
    stream_in = stdin if stdin is not None else sys.stdin.buffer
    while True:
        try:
            header, buffers = receive(stream_in)
        except Closed:
            return
        out: Sequence[OutBuffer] = ()
        try:
            if header.get("op") == "hello":
                reply = dict(hello())
            else:
                answer, out = handle(header, buffers)
                reply = dict(answer)
            reply.setdefault("status", "ok")
        except Unsupported as e:
            reply, out = {"status": "unsupported", "error": str(e)}, ()
        except Exception as e:  # the case FAILs with the message; the worker lives on
            reply, out = error_reply(e), ()
        send(stdout, reply, out)


class WorkerError(Exception):
    """A worker answered "error" or "unsupported" (`status`, the message), or broke off."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


class Client:
    """The host side: starts `command` (a shell command line or an argv list), then `request` sends
    one message and returns the reply. A worker that exits raises WorkerError; with check (the
    default) so does an "error" reply, and an "unsupported" one raises Unsupported. The worker's
    stderr is inherited unless `stderr` is given."""

    def __init__(self, command: Union[str, Sequence[str]], env: Optional[Mapping[str, str]] = None,
                 stderr: Optional[IO[bytes]] = None) -> None:
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        self.command = command if isinstance(command, str) else " ".join(shlex.quote(a) for a in command)
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                        env=None if env is None else dict(env))
        self.hello: Header = {}

    def request(self, header: Mapping[str, Any], buffers: Sequence[OutBuffer] = (),
                check: bool = True) -> Tuple[Header, Dict[str, Buffer]]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            send(stdin, header, buffers)
            reply, out = receive(stdout)
        except (Closed, BrokenPipeError) as e:
            code = self.process.wait()
            raise WorkerError("exited", f"`{self.command}` exited with status {code} ({type(e).__name__})") from e
        status = reply.get("status")
        if header.get("op") == "hello" and status == "ok":
            self.hello = reply
        if not check:
            return reply, out
        if status == "unsupported":
            raise Unsupported(reply.get("error", "(no message)"))
        if status != "ok":
            raise WorkerError(str(status), reply.get("error", "(no message)"))
        return reply, out

    def close(self) -> None:
        """Closes the worker's stdin (its signal to exit) and waits for it."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
