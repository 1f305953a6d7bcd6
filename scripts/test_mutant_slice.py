#!/usr/bin/env python3
"""ctest ci_slices_run_each_planted_mistake_once: CI's N mutant slices (scripts/mutant_slice.py) run every
mutant test in exactly one slice and every other test in all of them, as ctest itself selects them.

    python3 scripts/test_mutant_slice.py BUILD_DIR

Judged on the build's own test list through `ctest -N -E` (so the expression's quoting is CMake's), and
shown able to fail: the same judge rejects two planted slicers, one that leaves nothing out and one that
leaves a mutant test out of every slice.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutant_slice  # noqa: E402

N = 4


def run_by_ctest(build, regex):
    """The tests ctest runs with -E regex."""
    out = subprocess.run(["ctest", "-N"] + (["-E", regex] if regex else []), cwd=build, capture_output=True,
                         text=True, check=True).stdout
    return {line.split(": ", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("Test") and ": " in line}


def problems(names, runs):
    """What is wrong with slices whose run sets are runs[0..N-1]: a mutant test not in exactly one slice, or
    another test missing from one."""
    bad = []
    for t in names:
        count = sum(t in r for r in runs)
        if mutant_slice.is_mutant_test(t) and count != 1:
            bad.append(f"mutant test {t} runs in {count} of {len(runs)} slices")
        elif not mutant_slice.is_mutant_test(t) and count != len(runs):
            bad.append(f"{t} runs in {count} of {len(runs)} slices, not every one")
    return bad


def main():
    build = sys.argv[1]
    names = mutant_slice.ctest_names(build)
    mutants = [t for t in names if mutant_slice.is_mutant_test(t)]
    if len(mutants) < 20 or len(mutants) == len(names):
        print(f"FAIL: {len(mutants)} mutant tests of {len(names)}: the name rule finds none or everything")
        return 1
    runs = [run_by_ctest(build, mutant_slice.ctest_regex(mutant_slice.left_out(names, k, N))) for k in range(1, N + 1)]
    bad = problems(names, runs)
    for b in bad[:20]:
        print("FAIL:", b)
    if bad:
        return 1
    sizes = [sum(t in r for t in mutants) for r in runs]
    print(f"{len(names)} tests, {len(mutants)} mutant tests; slices of {N} run {sizes} of them, each once")
    # The judge fails on planted slicers.
    everything = [set(names)] * N
    once_dropped = [r - {mutants[0]} for r in runs]
    for label, planted in (("leaves nothing out", everything), ("drops a mutant test from every slice", once_dropped)):
        if not problems(names, planted):
            print(f"FAIL: the judge passes a slicer that {label}")
            return 1
    print("the judge rejects a slicer that leaves nothing out and one that drops a mutant test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
