"""kvconform.zygote: a worker served by the fork server is the same run as the worker run by itself
(argv, working directory, environment, stdin, stdout, stderr, exit status, signal), a killed worker
takes its child with it, and a changed environment or module file gets a fresh interpreter."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import kvconform

PACKAGE = str(Path(kvconform.__file__).resolve().parents[1])  # the kvconform under test

WORKER = '''
from kvconform.zygote import hand_off
hand_off(("zyg_mod",))
import os, sys, time
import zyg_mod
line = sys.stdin.readline().strip()
print(f"argv={sys.argv[1:]} cwd={os.getcwd()} X={os.environ.get('X')} V={os.environ.get('PYTEST_CURRENT_TEST')} "
      f"K={os.environ.get('KVC_FAULT_DIR')} "
      f"stdin={line} value={zyg_mod.VALUE} ppid={os.getppid()} main={__name__}", flush=True)
print("to stderr", file=sys.stderr)
what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "sleep":
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(60)
if what == "close":  # the host reads stdout to its end while the worker goes on
    sys.stdout.flush()
    os.close(1)
    time.sleep(1.5)
if what == "segv":
    os.kill(os.getpid(), 11)
if what == "raise":
    raise ValueError("boom")
if what == "message":
    sys.exit("a message")
sys.exit(int(what) if what.isdigit() else 0)
'''


@pytest.fixture()
def zyg(tmp_path: Path) -> Iterator[Dict[str, object]]:
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "zyg_mod.py").write_text("VALUE = 1\n")
    (tmp_path / "run").mkdir()
    cache = tempfile.mkdtemp(prefix="kz", dir="/tmp")  # a socket path stays under sockaddr_un's limit
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "PYTEST_CURRENT_TEST")}
    env.update(KVC_ZYGOTE="1", KVC_CACHE=cache, PYTHONPATH=os.pathsep.join([PACKAGE, str(tmp_path)]), X="1")
    yield {"dir": tmp_path, "env": env}
    shutil.rmtree(cache, ignore_errors=True)


def run(zyg: Dict[str, object], *args: str, env: Optional[Dict[str, str]] = None, stdin: str = "hello\n",
        module: bool = False) -> subprocess.CompletedProcess[str]:
    base = dict(zyg["env"])  # type: ignore[call-overload]
    base.update(env or {})
    target: List[str] = ["-m", "worker"] if module else [str(zyg["dir"]) + "/worker.py"]
    return subprocess.run([sys.executable, *target, *args], input=stdin, capture_output=True, text=True,
                          cwd=str(zyg["dir"]) + "/run", env=base, timeout=120)


def fields(out: str) -> Dict[str, str]:
    first = out.splitlines()[0]
    return dict(part.split("=", 1) for part in first.replace("argv=[", "argv=").split(" ") if "=" in part)


def test_a_served_worker_is_the_run_it_would_be_alone(zyg: Dict[str, object]) -> None:
    alone = run(zyg, "3", env={"KVC_ZYGOTE": "0"})
    first, second = run(zyg, "3"), run(zyg, "3")
    for r in (alone, first, second):
        assert r.returncode == 3, r.stderr
        assert r.stderr == "to stderr\n"
    a, f, s = fields(alone.stdout), fields(first.stdout), fields(second.stdout)
    assert f["ppid"] == s["ppid"] != str(os.getpid())  # both children of one server
    assert a["ppid"] == str(os.getpid())  # off: the worker is the process the host started
    for k in ("argv", "cwd", "X", "stdin", "value", "main"):
        assert a[k] == f[k] == s[k], k
    assert f["cwd"] == str(zyg["dir"]) + "/run" and f["stdin"] == "hello" and f["main"] == "__main__"
    m = run(zyg, "5", module=True)  # python -m worker
    assert m.returncode == 5 and fields(m.stdout)["main"] == "__main__" and fields(m.stdout)["ppid"] == f["ppid"]


def test_a_variable_that_changes_per_test_reaches_the_child_of_the_same_server(zyg: Dict[str, object]) -> None:
    a = fields(run(zyg, env={"PYTEST_CURRENT_TEST": "one", "KVC_FAULT_DIR": "/a"}).stdout)
    b = fields(run(zyg, env={"PYTEST_CURRENT_TEST": "two", "KVC_FAULT_DIR": "/b"}).stdout)
    assert (a["V"], b["V"], a["K"], b["K"]) == ("one", "two", "/a", "/b") and a["ppid"] == b["ppid"]


def test_exceptions_messages_and_signals_end_the_worker_as_they_end_python(zyg: Dict[str, object]) -> None:
    raised = run(zyg, "raise")
    assert raised.returncode == 1 and "ValueError: boom" in raised.stderr
    message = run(zyg, "message")
    assert message.returncode == 1 and message.stderr.endswith("a message\n")
    assert run(zyg, "segv").returncode == -signal.SIGSEGV
    assert run(zyg, "segv", env={"KVC_ZYGOTE": "0"}).returncode == -signal.SIGSEGV


def test_the_host_sees_stdout_end_when_the_child_closes_it(zyg: Dict[str, object]) -> None:
    base = dict(zyg["env"])  # type: ignore[call-overload]
    worker = subprocess.Popen([sys.executable, str(zyg["dir"]) + "/worker.py", "close"], env=base, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert worker.stdin and worker.stdout
    worker.stdin.write("hi\n")
    worker.stdin.close()
    assert "stdin=hi" in worker.stdout.read()  # to the end: no other process holds stdout open
    assert worker.poll() is None
    assert worker.wait(timeout=60) == 0


def test_a_killed_worker_takes_its_child_with_it(zyg: Dict[str, object]) -> None:
    pid_file = Path(str(zyg["dir"])) / "child.pid"
    base = dict(zyg["env"])  # type: ignore[call-overload]
    worker = subprocess.Popen([sys.executable, str(zyg["dir"]) + "/worker.py", "sleep", str(pid_file)], env=base,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert child != worker.pid
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the served child outlived its killed worker")


def test_a_changed_environment_or_module_file_gets_a_fresh_interpreter(zyg: Dict[str, object]) -> None:
    first = fields(run(zyg).stdout)
    other = fields(run(zyg, env={"X": "2"}).stdout)
    assert other["X"] == "2" and other["ppid"] != first["ppid"]
    module = Path(str(zyg["dir"])) / "zyg_mod.py"
    module.write_text("VALUE = 22\n")  # another size: the server's imported copy is stale
    after = [fields(run(zyg).stdout) for _ in range(2)]
    assert [a["value"] for a in after] == ["22", "22"]
    assert after[1]["ppid"] not in (first["ppid"], str(os.getpid()))  # a new server, with the file as it is
