#!/usr/bin/env python3
"""The mutation campaign against transformers (golden/mutate_transformers.py) on a small fixed sample:
two cases and three mutants of the release's own source, in seconds.

  - a mutant golden replay kills (DynamicSlidingWindowLayer.get_mask_sizes with `>=` turned into `>`:
    the layer reports itself not full when it holds exactly a window) is reported killed by "golden",
    naming the case and the first fixture field that differs;
  - a mutant of the release's own mask builder (create_sliding_window_causal_mask returning its 2D mask
    unless it may exit early) is reported killed, by golden replay (the fixtures record the builders'
    masks from dumper 1.4.0) or by the crosscheck;
  - a mutant of a line no case executes (the sliding builder's or_mask_function branch) survives and is
    classified a `gap` without a run;
  - the results file makes a rerun run nothing, and the report (kill rate, table, survivor with its
    diff) is the same bytes;
  - --sample draws the same mutants for the same seed;
  - the upstream part (--upstream-tests) with golden/mutation/upstream_selftest/, two tests written for
    this check in the place of transformers' own: both pass on the unmutated release; the unreached
    builder mutant is killed by upstream only (test_or_mask_function_widens_the_sliding_mask), the
    get_mask_sizes mutant by kvconform only (the one test reaching its line passes), and the report says
    so side by side. Needs pytest: in the release's venv, or the cache ctest py_package_install fills
    (python/tests/ctest_env.sh); without either that part is skipped and says so.

Exit 77 (skip) without golden/.venv-RELEASE.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RELEASE = sys.argv[1] if len(sys.argv) > 1 else "5.25.0"
SCRIPT = os.path.join(HERE, "mutate_transformers.py")
CASES = [os.path.join(ROOT, "cases", c) for c in ("dynamic_sliding_prefill_w.json", "static_sliding_prefill_w.json")]
UPSTREAM = os.path.join(HERE, "mutation", "upstream_selftest")


def run(args, env=None):
    p = subprocess.run([sys.executable, SCRIPT, "--release", RELEASE, "--cases", *CASES, *args],
                       capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def pytest_env():
    """An environment whose PYTHONPATH finds pytest for the release's venv, or None."""
    py = os.path.join(HERE, f".venv-{RELEASE}", "bin", "python")
    if subprocess.run([py, "-c", "import pytest"], capture_output=True).returncode == 0:
        return dict(os.environ)
    import hashlib
    with open(os.path.join(ROOT, "python", "requirements-test.txt"), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:12]
    cache = os.environ.get("KVC_PYTEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kvconform", f"pytest-{h}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (cache, os.environ.get("PYTHONPATH")) if x))
    if subprocess.run([py, "-c", "import pytest"], capture_output=True, env=env).returncode == 0:
        return env
    return None


def find(listing, function, op, text):
    """The id of the listed mutant of `function` with operator `op` whose diff contains `text`."""
    for block in listing.split("\n" + function.split(":")[0] + ":")[1:]:
        mid = function.split(":")[0] + ":" + block.split("\n", 1)[0]
        if mid.startswith(function + ":") and mid.rstrip("0123456789").endswith(":" + op) and text in block:
            return mid
    raise SystemExit(f"FAIL: no {op} mutant of {function} with '{text}' in --list")


def main():
    if not os.path.isfile(os.path.join(HERE, f".venv-{RELEASE}", "bin", "python")):
        print(f"SKIP: no golden/.venv-{RELEASE} (bash golden/setup_env.sh {RELEASE})")
        return 77
    rc, listing, err = run(["--list", "--only", "get_mask_sizes|create_sliding_window_causal_mask"])
    if rc != 0:
        print(err)
        raise SystemExit(f"FAIL: --list exited {rc}")
    killable = find(listing, "cache_utils:DynamicSlidingWindowLayer.get_mask_sizes", "rel",
                    "+    is_full = self.cumulative_length > self.sliding_window")
    crosscheck = find(listing, "masking_utils:create_sliding_window_causal_mask", "neg", "+    if not early_exit:")
    unreached = find(listing, "masking_utils:create_sliding_window_causal_mask", "drop",
                     "-        mask_factory_function = or_masks(mask_factory_function, or_mask_function)\n  +        pass")
    with tempfile.TemporaryDirectory() as tmp:
        results, doc, js = (os.path.join(tmp, n) for n in ("r.jsonl", "doc.md", "r.json"))
        args = ["--results", results, "--doc", doc, "--json", js, "--jobs", "2",
                "--mutant", killable, "--mutant", crosscheck, "--mutant", unreached]
        rc, out, err = run(args)
        if rc != 0:
            print(out, err)
            raise SystemExit(f"FAIL: the campaign exited {rc}")
        with open(js) as f:
            got = {r["id"]: r for r in json.load(f)}
        k = got[killable]["kvconform"]
        if k["status"] != "killed" or k["killed_by"] != "golden" or not k.get("case") or not k.get("where"):
            raise SystemExit(f"FAIL: {killable} should be killed by golden replay, naming case and field: {k}")
        c = got[crosscheck]["kvconform"]
        if c["status"] != "killed" or c["killed_by"] not in ("golden", "crosscheck"):
            raise SystemExit(f"FAIL: {crosscheck} should be killed (the fixtures' builder masks or the crosscheck): {c}")
        u = got[unreached]
        if u["kvconform"]["status"] != "survived" or u["class"] != "gap" or u["kvconform"]["ran"] != 0:
            raise SystemExit(f"FAIL: {unreached} should survive unrun as a gap: {u}")
        if "kill rate of non-equivalent 66.7 %" not in out:
            raise SystemExit(f"FAIL: the closing line should give 2 of 3 killed: {out}")
        with open(doc) as f:
            first = f.read()
        if f"`{unreached}`" not in first or "| **total** | 3 | 2 |" not in first or "```diff" not in first:
            raise SystemExit(f"FAIL: the report lacks the survivor, its diff or the totals:\n{first}")
        rc, out2, err2 = run(args)
        with open(doc) as f:
            second = f.read()
        if rc != 0 or "0 runs to do, 3 kept" not in err2 or second != first:
            raise SystemExit(f"FAIL: a rerun should run nothing and write the same report: {err2}")
        env = pytest_env()
        if env is None:
            upstream = "the upstream part SKIPPED: no pytest for the release's venv (ctest -R py_package_install)"
        else:
            up_args = ["--results", results, "--doc", doc, "--json", js, "--jobs", "2", "--upstream-tests", UPSTREAM,
                       "--mutant", killable, "--mutant", unreached]
            rc, out3, err3 = run(up_args, env)
            if rc != 0 or "upstream baseline: 2 passed, 0 failed, 0 skipped" not in err3 \
                    or "2 runs to do, 2 kept" not in err3:
                raise SystemExit(f"FAIL: the upstream part should run the two mutants' upstream part only, "
                                 f"both self-test tests passing unmutated: {out3} {err3}")
            with open(js) as f:
                got = {r["id"]: r for r in json.load(f)}
            uu, uk = got[unreached]["upstream"], got[killable]["upstream"]
            if uu["status"] != "killed" or uu["killed_by"] != "upstream" or \
                    not uu["case"].endswith("test_or_mask_function_widens_the_sliding_mask"):
                raise SystemExit(f"FAIL: {unreached} should be killed by the or-mask self-test: {uu}")
            if uk["status"] != "survived" or uk["ran"] != 1:
                raise SystemExit(f"FAIL: {killable} should survive the one self-test reaching its line: {uk}")
            with open(doc) as f:
                third = f.read()
            if "killed by kvconform only **1**, by upstream only **1**, by both 0, by neither 0" not in third \
                    or "| killed by upstream |" not in third:
                raise SystemExit(f"FAIL: the report should give the two parts side by side:\n{third}")
            rc, _, err4 = run(up_args, env)
            if rc != 0 or "0 runs to do" not in err4:
                raise SystemExit(f"FAIL: a rerun of the upstream part should run nothing: {err4}")
            upstream = f"upstream killed {unreached} ({uu['case'].split('::')[-1]}), not {killable}"
    rc, a, _ = run(["--list", "--sample", "4", "--seed", "7"])
    rc2, b, _ = run(["--list", "--sample", "4", "--seed", "7"])
    rc3, other, _ = run(["--list", "--sample", "4", "--seed", "8"])
    if rc or rc2 or rc3 or a != b or a == other or a.count("\ncache_utils:") + a.count("\nmasking_utils:") + 1 != 4:
        raise SystemExit("FAIL: --sample 4 --seed 7 should draw the same 4 mutants twice, and seed 8 others")
    print(f"OK: {killable} killed by golden replay ({k['case']}: {k['where']}), {crosscheck} by {c['killed_by']}, "
          f"{unreached} a gap; a rerun ran nothing; the sample is the seed's; {upstream}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
