#!/usr/bin/env python3
"""The Python side of `kvconform bench --vs-python`: golden/dump.py's per-case work through the real
transformers, timed per case and nothing else (not the interpreter start, the imports, reading
stdin or writing the fixtures).

    golden/.venv-<version>/bin/python golden/bench_dump.py [--repeat N] < cases.jsonl

One case JSON per input line -> one fixture JSON per output line (dump.py's format, so that the C++
side can replay the very same fixtures), then a last line
{"bench": {"traces": n, "seconds": wall, "cpu_seconds": cpu}} (CPU time: on a shared machine it is
the figure that does not depend on the other jobs; dump_case pins torch to one thread).
--repeat N times every case N times over (default 1), for a steadier figure; the fixtures are
written once, and each repeat must dump the same fixture (the dumper is deterministic).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dump  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="time every case this many times (default 1)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    dump.api()  # the API probe is start-up work, done once
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    lines = [raw for raw in lines if raw.strip()]
    total = cpu = 0.0
    traces = 0
    first = []
    for r in range(args.repeat):
        for i, raw in enumerate(lines):
            case = json.loads(raw)
            start, start_cpu = time.perf_counter(), time.process_time()
            fixture = dump.dump_case(case, raw.encode("utf-8"))
            total += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            traces += 1
            text = dump.dumps_fixture(fixture, pretty=False)
            if r == 0:
                first.append(text)
                sys.stdout.write(text + "\n")
            elif text != first[i]:
                sys.stderr.write(f"bench_dump: case {i} dumped differently on repeat {r + 1}\n")
                return 1
    sys.stdout.write(json.dumps({"bench": {"traces": traces, "seconds": total, "cpu_seconds": cpu}}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
