#!/usr/bin/env python3
"""The golden checks can fail: each is run on a deliberately broken copy and must say so.

    python3 golden/selftest.py [VERSION]      # VERSION: a pinned release with golden/.venv-VERSION

1. timeline.py --check-fixtures: a fixture whose `behaviours` differs from golden/behaviours.json, and
   a fixture folder of a release behaviours.json does not know, must each exit 1 naming the file.
2. crosscheck_masks.py: a fixture whose SDPA skip decision or mask row was flipped must exit 1 with
   one line per flipped layer-step.
Prints `selftest: N passed, M failed`; exit 1 if any failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    return p.returncode, p.stdout + p.stderr


def main(argv):
    versions = sorted((f[len("requirements-"):-4] for f in os.listdir(HERE) if f.startswith("requirements-")),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    version = argv[0] if argv else versions[-1]
    results = []

    def expect(name, ok, detail):
        results.append(ok)
        print(f"{'ok' if ok else 'FAIL'}: {name}" + ("" if ok else f"\n{detail}"))

    tmp = tempfile.mkdtemp(prefix="kvc-selftest-")
    try:
        case = "tf_hybrid_cache"
        src = os.path.join(HERE, "fixtures", version, case + ".json")
        with open(src) as f:
            fx = json.load(f)

        # 1a. behaviours differ from behaviours.json
        d = os.path.join(tmp, "behaviours", version)
        os.makedirs(d)
        bad = dict(fx, behaviours=dict(fx["behaviours"], sdpa_skip_empty_cache=not fx["behaviours"]["sdpa_skip_empty_cache"]))
        with open(os.path.join(d, case + ".json"), "w") as f:
            json.dump(bad, f)
        rc, out = run([sys.executable, os.path.join(HERE, "timeline.py"), "--check-fixtures", os.path.dirname(d)])
        expect("check-fixtures catches a wrong behaviours record", rc == 1 and f"{case}.json: /behaviours" in out, out)

        # 1b. a release behaviours.json does not list
        d = os.path.join(tmp, "unknown", "4.0.0")
        os.makedirs(d)
        with open(os.path.join(d, case + ".json"), "w") as f:
            json.dump(dict(fx, transformers_version="4.0.0"), f)
        rc, out = run([sys.executable, os.path.join(HERE, "timeline.py"), "--check-fixtures", os.path.dirname(d)])
        expect("check-fixtures catches a release missing from behaviours.json", rc == 1 and "4.0.0 is not in" in out, out)

        # 1c. the committed fixtures pass
        rc, out = run([sys.executable, os.path.join(HERE, "timeline.py"), "--check-fixtures", os.path.join(HERE, "fixtures")])
        expect("check-fixtures passes the committed fixtures", rc == 0, out)

        # 2. crosscheck on flipped masks
        py = os.path.join(HERE, f".venv-{version}", "bin", "python")
        flipped = 0
        for st in fx["steps"]:
            for r in st["layers"]:
                if flipped == 0 and r.get("sdpa_mask_skipped") is not None:
                    # flip the skip decision: None <-> the materialised mask
                    skipped = r["sdpa_mask_skipped"]
                    r["sdpa_mask_skipped"] = not skipped
                    r["sdpa_mask"] = r["bool_mask"] if skipped else None
                    flipped += 1
                elif flipped == 1 and r.get("sdpa_mask"):
                    row = r["sdpa_mask"][0][0]
                    r["sdpa_mask"][0][0] = ("0" if row[0] == "1" else "1") + row[1:]
                    flipped += 1
        d = os.path.join(tmp, "crosscheck")
        os.makedirs(d)
        with open(os.path.join(d, case + ".json"), "w") as f:
            json.dump(fx, f)
        rc, out = run([py, os.path.join(HERE, "crosscheck_masks.py"), "--fixtures", d,
                       os.path.join(ROOT, "cases", case + ".json")])
        lines = [l for l in out.splitlines() if l.startswith(f"cases/{case}.json: step")]
        expect(f"crosscheck {version} catches a flipped skip decision and a flipped mask bit",
               flipped == 2 and rc == 1 and len(lines) == 2 and "2 mismatches" in out, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    passed = sum(results)
    print(f"selftest: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
