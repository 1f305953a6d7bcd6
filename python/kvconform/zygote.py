"""A fork server for Python workers, on with KVC_ZYGOTE=1 (scripts/test.sh sets it).

A worker that calls `hand_off(preload)` before its heavy imports hands its run to a server that has
imported `preload` once: the server forks, and the child runs the worker's program as a fresh
interpreter would (the same `python SCRIPT` or `python -m MODULE`, argv, working directory,
environment, sys.path, umask and standard streams, passed as file descriptors), while the worker
waits and exits with the child's status, or dies of the child's signal. A test run starts the same
torch and transformers workers hundreds of times; each import costs 1 to 3.5 s of CPU.

One server per interpreter, preload list, sys.path and environment (all of it, but for variables
that change per test: _volatile()), so that whatever the imports read from the environment is what a
fresh start reads. The server refuses a request (the worker then runs itself) once any file it has
imported changed since, and exits after IDLE_S without a worker. When the waiting worker dies (a
timeout's SIGKILL), the server kills its child. Anything unusual (no socket, a server that does not
start, an interpreter started with flags or -c) and the worker simply runs itself: the server only
ever saves time.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

IDLE_S = 30.0
START_TIMEOUT_S = 180.0
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST", "_", "OLDPWD", "PWD", "SHLVL"})
_child = False  # True in a server's child: hand_off() returns and the worker runs here


def _main_spec() -> Optional[Tuple[str, str]]:
    """How this interpreter was started: ("path", SCRIPT) or ("module", NAME); None for anything the
    child could not repeat exactly (interpreter flags, -c, stdin)."""
    orig = getattr(sys, "orig_argv", None)
    if not orig or len(orig) < 2:
        return None
    if orig[1] == "-m" and len(orig) >= 3:
        return ("module", orig[2])
    if orig[1].startswith("-"):
        return None
    return ("path", orig[1])


def _folder() -> Optional[str]:
    base = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(
        os.environ.get("KVC_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kvconform"))
    folder = os.path.join(base, "zygote")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.stat(folder)
    except OSError:
        return None
    # Anyone who can connect runs code as us: only a folder of ours that no one else can enter.
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return None
    return folder


def _volatile(name: str) -> bool:
    """Left out of a server's key, as cli/zygote.cpp does: variables that change per test, and
    kvconform's own KVC_* (tests set them per run; the third-party modules a server preloads never
    read them). The child still gets the worker's values."""
    return name in _VOLATILE or name.startswith("KVC_")


def _key(preload: Sequence[str]) -> str:
    env = sorted((k, v) for k, v in os.environ.items() if not _volatile(k))
    with open(__file__, "rb") as f:
        own = hashlib.sha256(f.read()).hexdigest()
    text = json.dumps([sys.executable, sys.version, list(preload), sys.path[1:], env, own, os.getuid()])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _send(sock: socket.socket, obj: object, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    msg = struct.pack("<I", len(data)) + data
    if fds:
        socket.send_fds(sock, [msg], list(fds))
    else:
        sock.sendall(msg)


def _receive(sock: socket.socket) -> Tuple[Dict[str, Any], List[int]]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
    if len(data) < 4:
        raise ConnectionError("short request")
    n = struct.unpack("<I", data[:4])[0]
    while len(data) < 4 + n:
        more = sock.recv(4 + n - len(data))
        if not more:
            raise ConnectionError("short request")
        data += more
    return json.loads(data[4:4 + n]), list(fds)


def _read_line(sock: socket.socket) -> str:
    line = b""
    while not line.endswith(b"\n"):
        c = sock.recv(1)
        if not c:
            return ""
        line += c
    return line.decode().strip()


def _connect(path: str) -> Optional[socket.socket]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def _start_server(path: str, preload: Sequence[str]) -> bool:
    """Starts a server for `path` in its own session, its streams on /dev/null (a test's output pipe
    stays with the test), and waits until it listens."""
    import subprocess
    r, w = os.pipe()
    try:
        # This package's folder first: a worker may have found it on sys.path, not on PYTHONPATH.
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        serve = f"import sys; sys.path.insert(0, {package!r}); from kvconform.zygote import _serve_main; _serve_main()"
        subprocess.Popen([sys.executable, "-c", serve, path, str(w), *preload],
                         pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, cwd="/")
    except OSError:
        os.close(r)
        os.close(w)
        return False
    os.close(w)
    try:
        sel = selectors.DefaultSelector()
        sel.register(r, selectors.EVENT_READ)
        return bool(sel.select(START_TIMEOUT_S)) and os.read(r, 1) == b"1"
    finally:
        os.close(r)


def hand_off(preload: Sequence[str] = ("torch",)) -> None:
    """Runs this worker in a fork server's child when KVC_ZYGOTE=1 and returns only where the
    worker is to run itself: in the child, or where no server can take it."""
    if _child or os.environ.get("KVC_ZYGOTE") != "1":
        return
    main = _main_spec()
    folder = _folder()
    if main is None or folder is None:
        return
    path = os.path.join(folder, _key(preload))
    if len(path.encode()) > 100:  # sockaddr_un's path limit
        return
    sock = _connect(path)
    if sock is None:
        import fcntl
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one server per key: the others wait for it
            sock = _connect(path)
            if sock is None and _start_server(path, preload):
                sock = _connect(path)
    if sock is None:
        return
    umask = os.umask(0o022)
    os.umask(umask)
    request = {"main": list(main), "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "env": dict(os.environ),
               "umask": umask}
    try:
        _send(sock, request, [0, 1, 2])
        started = _read_line(sock)
    except OSError:
        started = ""
    if not started.startswith("started "):
        sock.close()
        return  # refused (a changed file) or a server that went away: run here
    # The child owns stdin and stdout now: the host sees their ends close when the child's do.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    status = _read_line(sock)
    kind, _, value = status.partition(" ")
    if kind == "exit":
        os._exit(int(value))
    if kind == "signal":
        sig = int(value)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
    os.write(2, f"kvconform.zygote: the fork server lost the worker ({status or 'connection closed'})\n".encode())
    os._exit(1)


# The server.

def _module_files() -> Dict[str, Tuple[int, int]]:
    files: Dict[str, Tuple[int, int]] = {}
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str) and f not in files:
            try:
                st = os.stat(f)
                files[f] = (st.st_mtime_ns, st.st_size)
            except OSError:
                pass
    return files


def _unchanged(files: Dict[str, Tuple[int, int]]) -> bool:
    for f, (mtime, size) in files.items():
        try:
            st = os.stat(f)
        except OSError:
            return False
        if (st.st_mtime_ns, st.st_size) != (mtime, size):
            return False
    return True


def _reopen_std_streams() -> None:
    """New sys.stdin/stdout/stderr on fds 0-2, made as the interpreter makes them at start."""
    def text(fd: int, mode: str, old: Optional[TextIO], line: bool) -> TextIO:
        buffer = io.open(fd, mode + "b", closefd=False)
        return io.TextIOWrapper(buffer, encoding=old.encoding if old else None, errors=old.errors if old else None,
                                newline="\n", line_buffering=line)
    sys.stdin = sys.__stdin__ = text(0, "r", sys.__stdin__, False)  # type: ignore[misc,assignment]
    sys.stdout = sys.__stdout__ = text(1, "w", sys.__stdout__, os.isatty(1))  # type: ignore[misc,assignment]
    sys.stderr = sys.__stderr__ = text(2, "w", sys.__stderr__, True)  # type: ignore[misc,assignment]


def _run_child(request: Dict[str, Any]) -> int:
    """The worker's program, as `python SCRIPT` / `python -m MODULE` runs it, and its exit status."""
    import runpy
    import threading
    global _child
    _child = True
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request["path"]
    sys.argv[:] = request["argv"]
    _reopen_std_streams()
    kind, target = request["main"]
    code = 0
    try:
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except Exception:
        pass
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


def _serve_main() -> None:
    path, ready_fd, preload = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if sys.path and sys.path[0] == "":
        del sys.path[0]
    for name in preload:
        try:
            __import__(name)
        except Exception:
            pass  # the child imports it itself, and fails there as a fresh start would
    files = _module_files()
    try:
        os.unlink(path)  # a dead server's socket: its lock holder (our starter) waits for us
    except OSError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    inode = os.stat(path).st_ino
    os.write(ready_fd, b"1")
    os.close(ready_fd)

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    children: Dict[int, socket.socket] = {}
    last_busy = time.monotonic()
    listening = True

    def stop_listening() -> None:
        nonlocal listening
        if not listening:
            return
        listening = False
        sel.unregister(listener)
        listener.close()
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        except OSError:
            pass

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is None:
                continue
            line = f"signal {os.WTERMSIG(status)}\n" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}\n"
            try:
                conn.sendall(line.encode())
            except OSError:
                pass
            try:
                sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            conn.close()

    def accept() -> None:
        conn, _ = listener.accept()
        fds: List[int] = []
        try:
            conn.settimeout(10)
            request, fds = _receive(conn)
            if len(fds) != 3:
                raise ConnectionError("three descriptors expected")
            if not _unchanged(files):
                stop_listening()  # later workers start a server of the files as they are now
                conn.sendall(b"refused a module file changed\n")
                raise ConnectionError("stale")
        except (OSError, ValueError, ConnectionError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sel.close()
                for fd in (wake_r, wake_w):
                    os.close(fd)
                if listening:
                    listener.close()
                for other in children.values():
                    other.close()
                conn.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                for fd in fds:
                    if fd > 2:
                        os.close(fd)
                code = _run_child(request)
            except BaseException:
                traceback.print_exc()
            os._exit(code)
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        children[pid] = conn
        try:
            conn.sendall(f"started {pid}\n".encode())
        except OSError:
            pass
        sel.register(conn, selectors.EVENT_READ, pid)

    while True:
        for key, _ in sel.select(timeout=1.0):
            if key.data == "accept":
                accept()
            elif key.data == "wake":
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
            else:  # the waiting worker closed its end: it was killed, so is its child
                conn = key.fileobj
                try:
                    gone = not conn.recv(64)  # type: ignore[union-attr]
                except OSError:
                    gone = True
                if gone:
                    sel.unregister(conn)
                    try:
                        os.kill(key.data, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        reap()
        if children:
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy > IDLE_S or not listening:
            stop_listening()
            if os.path.exists(path + ".lock") and not os.path.exists(path):
                try:  # one file per environment ever seen would pile up; a starter racing this starts a second server
                    os.unlink(path + ".lock")
                except OSError:
                    pass
            return
