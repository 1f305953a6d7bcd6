"""Fault injection for the llama-server adapter's server lifecycle (adapter.py's Server), against a
stand-in server on 127.0.0.1 that misbehaves one way each: exits while starting, never becomes
healthy, dies (an abort) inside a request, hangs inside a request, finds its port taken (once: it must
start on another; always: an error after the adapter's attempts). Each failure must become an error
that says which of these it was and carries the server's log tail, leave no server process behind,
and (for the adapter) make the next step say the server is gone rather than talk to a dead port.
Standard library only; exit 0 when every case holds, 1 naming the ones that do not."""
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
sys.path.insert(0, str(HERE))
import adapter  # noqa: E402

STAND_IN = r'''
import http.server, json, os, sys, time
mode = sys.argv[1]
port = int(sys.argv[sys.argv.index("--port") + 1])
print("stand-in llama-server, mode", mode, flush=True)
if mode == "exit-at-start":
    print("error: model file not found", flush=True)
    sys.exit(7)
if mode.startswith("port-taken"):  # llama-server's own words when its port is not free
    import socket
    try:
        socket.socket().bind(("127.0.0.1", port))
    except OSError:
        print("E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port:", port, flush=True)
        sys.exit(1)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        ok = mode != "never-healthy"
        self.send_response(200 if ok else 503)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}' if ok else b'{"status":"loading model"}')
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if mode == "die":
            print("GGML_ASSERT(token < n_vocab) failed", flush=True)
            os._exit(134)
        if mode == "hang":
            print("stuck in decode", flush=True)
            time.sleep(3600)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({"completion_probabilities": []}).encode())
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def gone(pid):
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as f:  # a zombie is gone too: it only waits to be reaped
            if f.read().split(") ")[-1].startswith("Z"):
                return True
        time.sleep(0.05)
    return False


def main():
    problems = []
    with tempfile.TemporaryDirectory() as d:
        # The adapter's server logs go to this check's own folder: a llama-server of another test
        # running beside it (CI runs two at a time) writes its log to the shared temporary folder.
        tempfile.tempdir = d
        script = os.path.join(d, "stand_in.py")
        Path(script).write_text(STAND_IN)
        # (mode, timeout, where it fails, the words its error must have)
        cases = [("exit-at-start", 10, "start", ["exited with status 7 while starting", "model file not found"]),
                 ("never-healthy", 1.5, "start", ["did not become healthy in 1.5 s", "mode never-healthy"]),
                 ("die", 10, "request", ["exited with status 134", "GGML_ASSERT"]),
                 # the server must get healthy within the timeout first: a loaded machine starts Python slowly
                 ("hang", 6, "request", ["did not answer in 6 s", "stuck in decode"])]
        # A port held by this check: free_port() hands it out first ("once") or every time ("always").
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        held.listen()
        real_free_port = adapter.free_port
        cases += [("port-taken-once", 10, None, ["no error"]),
                  ("port-taken-always", 10, "start", ["exited with status 1 while starting", "couldn't bind HTTP server socket"])]
        for mode, timeout, where, words in cases:
            server, error, pid = None, "", None
            logs_before = set(server_logs())
            ports = iter([held.getsockname()[1]] * (adapter.Server.PORT_ATTEMPTS if mode == "port-taken-always" else 1))
            adapter.free_port = (lambda: next(ports, None) or real_free_port()) if mode.startswith("port-taken") else real_free_port
            try:
                server = adapter.Server([sys.executable, script, mode], timeout)
                pid = server.proc.pid
                server.post("/completion", {"prompt": [1, 2]})
                error = "no error"
                if where is None:
                    server.stop()
            except RuntimeError as e:
                error = str(e)
            missing = [w for w in words if w not in error]
            if missing:
                problems.append(f"{mode}: the error {error!r} does not say {missing}")
            if where == "request" and server is not None:
                if server.alive() or not gone(pid):
                    problems.append(f"{mode}: the server process {pid} is still running after the failed request")
                engine = adapter.LlamaServer.__new__(adapter.LlamaServer)
                engine.server, engine.tokens, engine.vocab, engine.cache_prompt = server, [[1]], 3, True
                try:
                    engine.ask(0)
                    problems.append(f"{mode}: the next step talked to the dead server")
                except RuntimeError as e:
                    if "not running" not in str(e):
                        problems.append(f"{mode}: the next step's error {str(e)!r} does not say the server is not running")
            left = set(server_logs()) - logs_before
            if left:
                problems.append(f"{mode}: the server's log {sorted(left)} was left behind")
            print(f"{mode}: {error[:160]}")
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and stand_in_running(p)]
    if leftovers:
        problems.append(f"stand-in servers still running: {leftovers}")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print("OK: every fault is an error naming it with the server's log, and no server outlives it")
    return 0


def server_logs():
    return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("kvc-llama-server-") and n.endswith(".log")]


def stand_in_running(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().split(") ")[-1].startswith("Z")
    except OSError:
        return False
    return "stand_in.py" in cmd and not zombie


if __name__ == "__main__":
    sys.exit(main())
