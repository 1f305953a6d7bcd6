#!/usr/bin/env python3
"""Which sliced tests a CI run leaves to the other slices: a ctest -E regular expression.

    python3 scripts/ci_slice.py K/N [--build build]      # K in 1..N, or auto/N (from the commit)
    python3 scripts/ci_slice.py --seconds-from JUNIT     # rewrite .ci/sliced-tests.txt from a full run

CI runs the sliced tests in N slices, one slice a commit, so that every sliced test runs once every N
commits (scripts/test.sh --slice, .ci/run), and every other test on every commit. Two kinds are sliced:
- the mutant tests (a planted mistake a check must catch, docs/mutants.md): a mutant test proves the
  check can fail, and a check only stops being able to fail when the check itself changes. A test is a
  mutant test where its name says so (`mutant`, any case, or `mutate`), except the tests in ALWAYS,
  which use a mutant to show something else than a check's reach;
- the heavy tests: the end-to-end matrices (the engines' CI configurations, the wheel's pytest plugin,
  the browser, long campaigns) whose cheaper neighbours (unit, golden replay, properties, the oracle
  engine's plans) run on every commit: the tests .ci/sliced-tests.txt lists that are not mutant tests.
.ci/sliced-tests.txt lists, with its measured seconds, every heavy test (HEAVY_SECONDS or more in a
full run, less the tests in ALWAYS and the fixture setups other tests need, which ctest would run
anyway) and every mutant test of MUTANT_SECONDS or more; `--seconds-from` rewrites it. The listed
tests are balanced by their seconds: longest first, each into the slice with the fewest listed seconds
so far (the heavy tests balanced and the mutant tests by sha1 put 367 to 523 listed seconds into the
slices of six). A test the list does not name (a new mutant test, a mutant test under MUTANT_SECONDS)
goes to slice sha1(name) mod N. Only a change of the list moves a listed test; a new test moves none.
A parameterised gtest's ctest name ends in its parameter ("  # GetParam() = ..."): the name is taken
without it, so that a batch run of the binary (harness/testing/gtest_batch.py, which reads the slice
from KVC_CI_SLICE=K/N as scripts/test.sh sets it) leaves out exactly the tests ctest does.

`auto/N` takes the slice from the commit: its number in the history (git rev-list --count HEAD), so
N consecutive commits run every slice; in a shallow clone, where that count is not the history's,
from the commit id. Prints the regular expression (one line; empty where the slice leaves nothing
out); exit 2 on bad usage.
"""
import argparse
import functools
import hashlib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Tests that run on every commit though their name says "mutant" (they prove a behaviour of the run,
# not the reach of a check) or they are heavy (the checks of the layer and the model oracle themselves).
ALWAYS = {
    "Cli.MutantFailsEverySuiteAndTheRunGoesOn",   # a failure inside one case is that case's FAIL; the run goes on
    "MutantFailure.NamesTheRaiseNotLibTorchsStackTrace",  # a raising case's FAIL names the raise
    "gtest_batch/kvc_golden_test",  # golden replay: the reference against every pinned release
    "gtest_batch/kvc_property_test",  # the property campaigns
    "gtest_batch/kvc_model_reference_test",  # the oracle's fast forward against its plain reference
    "engine_oracle_agrees_with_transformers",  # the float64 proof of the registry
}
MUTANT = re.compile(r"[Mm]utant|MUTANT|mutate")
SLICED_FILE = os.path.join(ROOT, ".ci", "sliced-tests.txt")
HEAVY_SECONDS = 15.0
# A mutant test under this goes by sha1: a few of them in one slice weigh less than the spread the
# balance leaves (the batched gtests' entries read their verdict from the batch, near 0 s each).
MUTANT_SECONDS = 1.0


@functools.lru_cache(maxsize=None)
def listed_seconds():
    """name -> measured seconds, as .ci/sliced-tests.txt lists them (a name, a tab and its seconds a line;
    # comments)."""
    if not os.path.exists(SLICED_FILE):
        return {}
    with open(SLICED_FILE) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
    return {r[0]: float(r[1]) if len(r) > 1 else 0.0 for r in rows}


def heavy_tests():
    """The heavy tests: the names .ci/sliced-tests.txt lists that are not mutant tests."""
    return frozenset(t for t in listed_seconds() if not is_mutant_test(t))


def balance(seconds, n):
    """name -> slice (1..n) for these measured seconds: longest first (ties by name), each into the slice
    with the fewest seconds so far (the lowest on a tie); no two slices then differ by more than the
    longest test."""
    load, out = [0.0] * n, {}
    for name, s in sorted(seconds.items(), key=lambda r: (-r[1], r[0])):
        k = min(range(n), key=lambda i: (load[i], i))
        out[name] = k + 1
        load[k] += s
    return out


@functools.lru_cache(maxsize=None)
def listed_slices(n):
    """Each listed sliced test's slice (1..n), heavy and mutant tests balanced together by their seconds."""
    return balance({t: s for t, s in listed_seconds().items() if t not in ALWAYS}, n)


def test_name(name):
    """A ctest name without a parameterised gtest's parameter comment: the gtest's own name."""
    return name.split("  # GetParam()", 1)[0]


def is_mutant_test(name):
    name = test_name(name)
    return name not in ALWAYS and MUTANT.search(name) is not None


def is_sliced(name, heavy=None):
    """A mutant test, or a heavy one (`heavy`: the listed names, read from .ci/sliced-tests.txt if None)."""
    heavy = heavy_tests() if heavy is None else heavy
    return is_mutant_test(name) or (test_name(name) in heavy and test_name(name) not in ALWAYS)


def sha1_slice(name, n):
    """The slice (1..n) of a sliced test the list does not name: sha1 of its name mod n."""
    return int(hashlib.sha1(test_name(name).encode()).hexdigest()[:8], 16) % n + 1


def slice_of(name, n):
    """The slice (1..n) a sliced test runs in: a listed test's balanced one, another's by sha1."""
    return listed_slices(n).get(test_name(name)) or sha1_slice(name, n)


def left_out(names, k, n):
    """The sliced tests of `names` that slice k of n does not run, sorted."""
    heavy = heavy_tests()
    return sorted(t for t in names if is_sliced(t, heavy) and slice_of(t, n) != k)


def write_listed(junit, build):
    """Rewrite .ci/sliced-tests.txt from a full run's JUnit file (ctest --output-junit): the tests that
    took HEAVY_SECONDS or more, less ALWAYS and fixture setups, and the mutant tests that took
    MUTANT_SECONDS or more. A JUnit file that lacks a listed test of the build (a slice's run, a -R run)
    is refused: its rewrite would drop that test to sha1."""
    import xml.etree.ElementTree as ET
    shown = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True,
                                      check=True).stdout)
    setups = {t["name"] for t in shown["tests"]
              if any(p["name"] == "FIXTURES_SETUP" for p in t.get("properties", []))}
    times = {tc.get("name"): float(tc.get("time", 0)) for tc in ET.parse(junit).getroot().iter("testcase")}
    missing = sorted({test_name(t["name"]) for t in shown["tests"]} & set(listed_seconds())
                     - {test_name(t) for t in times})
    if missing:
        sys.exit(f"ci_slice: {junit} is not a full run: it lacks {len(missing)} listed tests of the build "
                 f"({', '.join(missing[:3])}); a full run: KVC_CI_FULL=1 bash .ci/run, or scripts/test.sh "
                 "--output-junit FILE without --slice")
    rows = sorted(((s, t) for t, s in times.items()), key=lambda r: (-r[0], r[1]))
    keep = [(s, t) for s, t in rows if test_name(t) not in ALWAYS and t not in setups
            and s >= (MUTANT_SECONDS if is_mutant_test(t) else HEAVY_SECONDS)]
    os.makedirs(os.path.dirname(SLICED_FILE), exist_ok=True)
    with open(SLICED_FILE + ".tmp", "w") as f:
        f.write(f"# The sliced tests CI balances (scripts/ci_slice.py), measured in a full run ({os.path.basename(junit)}):\n"
                f"# the tests of {HEAVY_SECONDS:g} s or more (heavy), less ALWAYS and fixture setups, and the mutant tests\n"
                f"# of {MUTANT_SECONDS:g} s or more. Name, tab, seconds.\n")
        for s, t in keep:
            f.write(f"{test_name(t)}\t{s:.1f}\n")
    os.replace(SLICED_FILE + ".tmp", SLICED_FILE)
    return keep


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
    ap.add_argument("slice", nargs="?", help="K/N (1 <= K <= N) or auto/N")
    ap.add_argument("--seconds-from", metavar="JUNIT", help="rewrite .ci/sliced-tests.txt from a full run's JUnit file")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the ctest build folder (default: build/)")
    ap.add_argument("--which", action="store_true", help="print 'K/N' (auto resolved) instead of the expression")
    args = ap.parse_args()
    if args.seconds_from:
        keep = write_listed(args.seconds_from, args.build)
        mutants = [s for s, t in keep if is_mutant_test(t)]
        print(f"ci_slice: {len(keep) - len(mutants)} heavy tests ({sum(s for s, _ in keep) - sum(mutants):.0f} s) and "
              f"{len(mutants)} mutant tests ({sum(mutants):.0f} s) into {SLICED_FILE}")
        return 0
    if not args.slice:
        ap.error("give K/N, auto/N or --seconds-from")
    try:
        k, n = parse(args.slice)
    except (ValueError, subprocess.CalledProcessError) as e:
        print(f"ci_slice: {e}", file=sys.stderr)
        return 2
    if args.which:
        print(f"{k}/{n}")
        return 0
    print(ctest_regex(left_out(ctest_names(args.build), k, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
