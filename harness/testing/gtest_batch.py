#!/usr/bin/env python3
"""One process for all the gtests of a LibTorch binary, each still its own ctest test.

A LibTorch process spends about 0.2 s in LibTorch's static initialisers before its first test, more
than most of these tests take; kvc_batched_gtests() (CMakeLists.txt) runs the binary once and each
test's ctest entry reads its verdict from that run:

    gtest_batch.py run RESULTS BINARY      the batch (a ctest fixture): every test, into RESULTS (JSON);
                                           fails only where no RESULTS came out (a crash: each test then
                                           runs on its own)
    gtest_batch.py test RESULTS BINARY ARGS...
                                           a test's entry (the binary's launcher, CROSSCOMPILING_EMULATOR): its verdict, its
                                           failure messages and its skip line from RESULTS; the binary
                                           itself where RESULTS is missing or older than the binary, or
                                           for anything but one test (--gtest_list_tests)
"""
import json
import os
import re
import subprocess
import sys


def left_out(binary):
    """The gtests of `binary` that CI's slice KVC_CI_SLICE=K/N leaves to the other slices
    (scripts/ci_slice.py, as scripts/test.sh sets it): ctest leaves their entries out, so the
    batch need not run them."""
    spec = os.environ.get("KVC_CI_SLICE", "")
    if not spec:
        return []
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    import ci_slice
    k, n = (int(x) for x in spec.split("/"))
    listing = subprocess.run([binary, "--gtest_list_tests"], capture_output=True, text=True, check=True).stdout
    # gtest name -> ctest name as gtest_discover_tests makes it: a parameterised test's index becomes its
    # value ("/0" -> "/kernel_f16_accumulation/..."); a test named by a generator keeps the value as a comment.
    ctest_names, suite = {}, ""
    for line in listing.splitlines():
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
            continue
        test, _, comment = line.strip().partition("  # GetParam() = ")
        name = suite + test
        if comment and re.search(r"/\d+$", test):
            ctest_names[name] = suite + re.sub(r"/\d+$", "/" + comment, test)
        else:
            ctest_names[name] = name + ("  # GetParam() = " + comment if comment else "")
    dropped = set(ci_slice.left_out(ctest_names.values(), k, n))
    return sorted((g, c) for g, c in ctest_names.items() if c in dropped)


def ctest_names_left_out(binary):
    return [c for _, c in left_out(binary)]


def run(results, binary):
    tmp = f"{results}.{os.getpid()}.tmp"
    if os.path.exists(results):
        os.remove(results)
    skip = [g for g, _ in left_out(binary)]
    done = subprocess.run([binary, f"--gtest_output=json:{tmp}", "--gtest_brief=1"]
                          + ([f"--gtest_filter=-{':'.join(skip)}"] if skip else []))
    if not os.path.exists(tmp):
        print(f"gtest_batch: {binary} wrote no results (exit {done.returncode}): each test runs on its own")
        return 1
    os.replace(tmp, results)
    print(f"gtest_batch: {os.path.basename(binary)} ran once (exit {done.returncode}); each test's verdict is its own ctest test")
    return 0


def test(results, binary, args):
    name = next((a.split("=", 1)[1] for a in args if a.startswith("--gtest_filter=")), None)
    fresh = os.path.exists(results) and os.path.getmtime(results) >= os.path.getmtime(binary)
    if name is None or not fresh or any(c in name for c in "*?:-"):
        os.execv(binary, [binary] + args)
    with open(results) as f:
        data = json.load(f)
    for suite in data.get("testsuites", []):
        for case in suite.get("testsuite", []):
            if f"{suite['name']}.{case['name']}" != name:
                continue
            print(f"[ RUN      ] {name}  (from the batch run of {os.path.basename(binary)}, {case.get('time', '?')})")
            for failure in case.get("failures", []):
                print(failure.get("failure", ""))
            if case.get("result") == "SKIPPED":
                print(f"[  SKIPPED ] {name}")
                return 0
            if case.get("failures"):
                print(f"[  FAILED  ] {name}")
                return 1
            print(f"[       OK ] {name}")
            return 0
    os.execv(binary, [binary] + args)  # not in the batch (a test added since): on its own


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3]))
    if len(sys.argv) >= 4 and sys.argv[1] == "test":
        sys.exit(test(sys.argv[2], sys.argv[3], sys.argv[4:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
