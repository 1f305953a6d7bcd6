#!/usr/bin/env python3
"""ctest ci_slices_run_each_sliced_test_once: CI's N slices (scripts/ci_slice.py) run every sliced test
(mutant and heavy) in exactly one slice and every other test in all of them, as ctest itself selects them;
every name .ci/sliced-tests.txt lists is a test of the build, and the slices' listed seconds are balanced.

    python3 scripts/test_ci_slice.py BUILD_DIR

Judged on the build's own test list through `ctest -N -E` (so the expression's quoting is CMake's), and
shown able to fail: the same judge rejects two planted slicers, one that leaves nothing out and one that
leaves a sliced test out of every slice; the balance judge rejects slicing by sha1 alone and the slicer
before the mutant tests were listed (the heavy tests balanced, the mutant tests by sha1).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ci_slice  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "testing"))
import gtest_batch  # noqa: E402

N = 6  # as .ci/run


def run_by_ctest(build, regex):
    """The tests ctest runs with -E regex."""
    out = subprocess.run(["ctest", "-N"] + (["-E", regex] if regex else []), cwd=build, capture_output=True,
                         text=True, check=True).stdout
    return {line.split(": ", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("Test") and ": " in line}


def problems(names, runs):
    """What is wrong with slices whose run sets are runs[0..N-1]: a sliced test not in exactly one slice, or
    another test missing from one."""
    bad = []
    for t in names:
        count = sum(t in r for r in runs)
        if ci_slice.is_sliced(t) and count != 1:
            bad.append(f"sliced test {t} runs in {count} of {len(runs)} slices")
        elif not ci_slice.is_sliced(t) and count != len(runs):
            bad.append(f"{t} runs in {count} of {len(runs)} slices, not every one")
    return bad


def main():
    build = sys.argv[1]
    names = ci_slice.ctest_names(build)
    mutants = [t for t in names if ci_slice.is_mutant_test(t)]
    if len(mutants) < 20 or len(mutants) == len(names):
        print(f"FAIL: {len(mutants)} mutant tests of {len(names)}: the name rule finds none or everything")
        return 1
    stale = sorted(set(ci_slice.listed_seconds()) - {ci_slice.test_name(t) for t in names})
    if stale:
        print(f"FAIL: .ci/sliced-tests.txt lists {len(stale)} names that are no test of the build: {stale[:5]} "
              "(python3 scripts/ci_slice.py --seconds-from JUNIT rewrites it)")
        return 1
    heavy = [t for t in names if ci_slice.is_sliced(t) and not ci_slice.is_mutant_test(t)]
    sliced = [t for t in names if ci_slice.is_sliced(t)]
    runs = [run_by_ctest(build, ci_slice.ctest_regex(ci_slice.left_out(names, k, N))) for k in range(1, N + 1)]
    bad = problems(names, runs)
    for b in bad[:20]:
        print("FAIL:", b)
    if bad:
        return 1
    sizes = [sum(t in r for t in sliced) for r in runs]
    print(f"{len(names)} tests, {len(sliced)} sliced ({len(heavy)} heavy); slices of {N} run {sizes} of them, each once")
    # The judge fails on planted slicers.
    everything = [set(names)] * N
    once_dropped = [r - {sliced[0]} for r in runs]
    for label, planted in (("leaves nothing out", everything), ("drops a sliced test from every slice", once_dropped)):
        if not problems(names, planted):
            print(f"FAIL: the judge passes a slicer that {label}")
            return 1
    print("the judge rejects a slicer that leaves nothing out and one that drops a sliced test")
    # The listed seconds (heavy and mutant tests) are balanced (ci_slice.listed_slices): longest first into
    # the lightest slice, so that no two slices differ by more than the longest listed test. Neither sha1
    # alone nor the heavy tests balanced with the mutant tests by sha1 is.
    listed = {t: s for t, s in ci_slice.listed_seconds().items() if t not in ci_slice.ALWAYS}
    longest = max(listed.values(), default=0.0)
    heavy_only = ci_slice.balance({t: s for t, s in listed.items() if not ci_slice.is_mutant_test(t)}, N)
    slicers = (("this slicer", lambda t: ci_slice.slice_of(t, N)),
               ("sha1 alone", lambda t: ci_slice.sha1_slice(t, N)),
               ("the heavy tests balanced, the mutant tests by sha1",
                lambda t: heavy_only.get(t) or ci_slice.sha1_slice(t, N)))
    spreads = [(label, spread(listed, slice_of)) for label, slice_of in slicers]
    print("the slices' listed seconds: " + "; ".join(f"{label} {lo:.0f} to {hi:.0f} s" for label, (lo, hi) in spreads))
    for i, (label, (lo, hi)) in enumerate(spreads):
        if (hi - lo > longest) != (i > 0):
            print(f"FAIL: the balance judge {'fails' if i == 0 else 'passes'} {label}: its slices' listed seconds differ "
                  f"by {hi - lo:.1f} s, the longest listed test is {longest:.1f} s")
            return 1
    # A batched gtest binary runs its tests in one process (gtest_batch.py): under a slice it must leave
    # out exactly the tests whose ctest entries the slice leaves out (more would run them alone, fewer
    # would spend the time the slice saves).
    shown = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True,
                                      check=True).stdout)
    binaries = [t["command"][-1] for t in shown["tests"] if t["name"].startswith("gtest_batch/")]
    for k in range(1, N + 1):
        expected = set(ci_slice.left_out(names, k, N))
        os.environ["KVC_CI_SLICE"] = f"{k}/{N}"
        for binary in binaries:
            target = os.path.basename(binary)
            ctest_of = {c for c in names if gtest_batch_target(shown, c) == target}
            batch = set(gtest_batch.ctest_names_left_out(binary))
            if batch != expected & ctest_of:
                print(f"FAIL: slice {k}/{N}: the batch of {target} leaves out {sorted(batch ^ (expected & ctest_of))[:5]} "
                      "unlike ctest")
                return 1
    print(f"the {len(binaries)} batched gtest binaries leave out what ctest does in every slice")
    return 0


def spread(seconds, slice_of):
    """The least and the most listed seconds of a slice, where slice_of(name) gives each listed test's slice."""
    load = [0.0] * N
    for t, s in seconds.items():
        load[slice_of(t) - 1] += s
    return min(load), max(load)


def gtest_batch_target(shown, name):
    """The batched binary a ctest entry reads its verdict from (python3 -S gtest_batch.py test RESULTS
    BINARY ...), by name; None for any other test."""
    if not hasattr(gtest_batch_target, "cache"):
        gtest_batch_target.cache = {t["name"]: os.path.basename(t["command"][5]) for t in shown["tests"]
                                    if len(t.get("command", [])) > 5 and t["command"][2].endswith("gtest_batch.py")
                                    and t["command"][3] == "test"}
    return gtest_batch_target.cache.get(name)


if __name__ == "__main__":
    sys.exit(main())
