#!/usr/bin/env python3
"""Which mutant tests a CI run leaves to the other slices: a ctest -E regular expression.

    python3 scripts/mutant_slice.py K/N [--build build]     # K in 1..N, or auto/N (from the commit)

A check's own test runs on every commit: it is what finds a regression of the implementation. The
mutant test beside it (a planted mistake the check must catch, docs/mutants.md) proves the check can
fail, and a check only stops being able to fail when the check itself changes; so CI runs the mutant
tests in N slices, one slice a commit, and every mutant test runs once every N commits (scripts/test.sh
--mutant-slice, .ci/run). A test is a mutant test where its name says so (`mutant`, any case, or
`mutate`), except the tests in ALWAYS, which use a mutant to show something else than a check's reach.
A test's slice is sha1(name) mod N: adding or removing another test moves no test to another slice.
A parameterised gtest's ctest name ends in its parameter ("  # GetParam() = ..."): the name is taken
without it, so that a batch run of the binary (harness/testing/gtest_batch.py, which reads the slice
from KVC_MUTANT_SLICE=K/N as scripts/test.sh sets it) leaves out exactly the tests ctest does.

`auto/N` takes the slice from the commit: its number in the history (git rev-list --count HEAD), so
N consecutive commits run every slice; in a shallow clone, where that count is not the history's,
from the commit id. Prints the regular expression (one line; empty where the slice leaves nothing
out); exit 2 on bad usage.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Tests whose names say "mutant" but that prove a behaviour of the run, not the reach of a check: they
# run on every commit.
ALWAYS = {
    "Cli.MutantFailsEverySuiteAndTheRunGoesOn",   # a failure inside one case is that case's FAIL; the run goes on
    "MutantFailure.NamesTheRaiseNotLibTorchsStackTrace",  # a raising case's FAIL names the raise
}
MUTANT = re.compile(r"[Mm]utant|MUTANT|mutate")


def test_name(name):
    """A ctest name without a parameterised gtest's parameter comment: the gtest's own name."""
    return name.split("  # GetParam()", 1)[0]


def is_mutant_test(name):
    name = test_name(name)
    return name not in ALWAYS and MUTANT.search(name) is not None


def slice_of(name, n):
    """The slice (1..n) a mutant test runs in."""
    return int(hashlib.sha1(test_name(name).encode()).hexdigest()[:8], 16) % n + 1


def left_out(names, k, n):
    """The mutant tests of `names` that slice k of n does not run, sorted."""
    return sorted(t for t in names if is_mutant_test(t) and slice_of(t, n) != k)


def ctest_regex(names):
    """A ctest -E expression matching exactly these names (CMake's regular expressions: a backslash quotes
    the next character)."""
    return "|".join("^" + re.sub(r"([][^$.*+?|()\\{}])", r"\\\1", t) + "$" for t in names)


def ctest_names(build):
    """Every test name of the build, as ctest lists them."""
    out = subprocess.run(["ctest", "-N"], cwd=build, capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"^\s*Test\s+#\d+: (.+?)\s*$", out, re.M)]


def auto_slice(n):
    """This commit's slice: its number in the history mod n, or its id where the clone is shallow."""
    git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, check=True).stdout.strip()
    if git("rev-parse", "--is-shallow-repository") == "true":
        return int(git("rev-parse", "HEAD")[:8], 16) % n + 1
    return int(git("rev-list", "--count", "HEAD")) % n + 1


def parse(spec):
    """'K/N' or 'auto/N' -> (K, N); ValueError with the reason."""
    m = re.fullmatch(r"(auto|\d+)/(\d+)", spec)
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"'{spec}' is not K/N or auto/N with N >= 1")
    n = int(m.group(2))
    k = auto_slice(n) if m.group(1) == "auto" else int(m.group(1))
    if not 1 <= k <= n:
        raise ValueError(f"slice {k} of {n}: K must be 1 to {n}")
    return k, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slice", help="K/N (1 <= K <= N) or auto/N")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the ctest build folder (default: build/)")
    ap.add_argument("--which", action="store_true", help="print 'K/N' (auto resolved) instead of the expression")
    args = ap.parse_args()
    try:
        k, n = parse(args.slice)
    except (ValueError, subprocess.CalledProcessError) as e:
        print(f"mutant_slice: {e}", file=sys.stderr)
        return 2
    if args.which:
        print(f"{k}/{n}")
        return 0
    print(ctest_regex(left_out(ctest_names(args.build), k, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
