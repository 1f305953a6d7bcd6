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
  - --sample draws the same mutants for the same seed.

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


def run(args):
    p = subprocess.run([sys.executable, SCRIPT, "--release", RELEASE, "--cases", *CASES, *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


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
    rc, a, _ = run(["--list", "--sample", "4", "--seed", "7"])
    rc2, b, _ = run(["--list", "--sample", "4", "--seed", "7"])
    rc3, other, _ = run(["--list", "--sample", "4", "--seed", "8"])
    if rc or rc2 or rc3 or a != b or a == other or a.count("\ncache_utils:") + a.count("\nmasking_utils:") + 1 != 4:
        raise SystemExit("FAIL: --sample 4 --seed 7 should draw the same 4 mutants twice, and seed 8 others")
    print(f"OK: {killable} killed by golden replay ({k['case']}: {k['where']}), {crosscheck} by {c['killed_by']}, "
          f"{unreached} a gap; a rerun ran nothing; the sample is the seed's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
