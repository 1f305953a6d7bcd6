"""Runs one kvconform command and checks what it printed (the adapter tests in plugins/CMakeLists.txt).

    check_run.py --exit 1 --expect REGEX [--expect REGEX ...] [--absent REGEX ...] -- kvconform run ...

The command gets KVC_FAULT_DIR, a fresh empty folder (tests/faulty_adapter.py notes there that it
has already failed once).

Every --expect must match some output line, in the order given (so "a crash, then a case that
passes" can be asserted); no --absent may match any line. Prints the output on failure.
"""
import re
import subprocess
import os
import sys
import tempfile
import time


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1:]
    want_exit, expect, absent = None, [], []
    i = 0
    while i < len(opts):
        flag, value = opts[i], opts[i + 1]
        if flag == "--exit":
            want_exit = int(value)
        elif flag == "--expect":
            expect.append(re.compile(value))
        elif flag == "--absent":
            absent.append(re.compile(value))
        else:
            sys.exit(f"check_run: unknown option {flag}")
        i += 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as fault_dir:
        env = dict(os.environ, KVC_FAULT_DIR=fault_dir)
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = run.stdout.splitlines()
    problems = []
    if want_exit is not None and run.returncode != want_exit:
        problems.append(f"exit code {run.returncode}, expected {want_exit}")
    at = 0
    for pattern in expect:
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        if at == len(lines):
            problems.append(f"no line matches {pattern.pattern!r} (after the previous expectations)")
            break
        at += 1
    for pattern in absent:
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            problems.append(f"{len(hits)} line(s) match {pattern.pattern!r}, e.g. {hits[0]!r}")
    print(f"check_run: {' '.join(command)}: exit {run.returncode} in {time.monotonic() - started:.1f} s")
    if problems:
        print(run.stdout)
        for p in problems:
            print("check_run: " + p)
        sys.exit(1)
    print("\n".join(lines[-3:]))


if __name__ == "__main__":
    main()
