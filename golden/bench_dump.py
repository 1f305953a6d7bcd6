#!/usr/bin/env python3
"""The Python side of `kvconform bench --vs-python`: golden/dump.py's per-case work through the real
transformers, timed per case and nothing else (not the interpreter start, the imports, reading
stdin or writing the fixtures).

    golden/.venv-<version>/bin/python golden/bench_dump.py < cases.jsonl

One case JSON per input line -> one fixture JSON per output line (dump.py's format, so that the C++
side can replay the very same fixtures), then a last line
{"bench": {"traces": n, "seconds": wall, "cpu_seconds": cpu}} (CPU time: on a shared machine it is
the figure that does not depend on the other jobs; dump_case pins torch to one thread).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dump  # noqa: E402


def main():
    dump.api()  # the API probe is start-up work, done once
    total = cpu = 0.0
    traces = 0
    for line in sys.stdin:
        raw = line.rstrip("\r\n")
        if not raw.strip():
            continue
        case = json.loads(raw)
        start, start_cpu = time.perf_counter(), time.process_time()
        fixture = dump.dump_case(case, raw.encode("utf-8"))
        total += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        traces += 1
        sys.stdout.write(dump.dumps_fixture(fixture, pretty=False) + "\n")
    sys.stdout.write(json.dumps({"bench": {"traces": traces, "seconds": total, "cpu_seconds": cpu}}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
