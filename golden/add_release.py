#!/usr/bin/env python3
"""Adds transformers release X to kvconform end to end (docs/architecture.md, "To add a release X").

    python3 golden/add_release.py X [--fuzz-iterations N] [--no-oracle]

Steps, each printed before it runs; the first that fails stops the run with its reason (exit 1),
and a rerun redoes only what is not done (each step is idempotent):

  1. requirements: golden/requirements-X.txt, resolved in a clean venv (scripts/venv.sh make_venv:
     torch==2.13.0 transformers==X jsonschema; `pip freeze`, and the setuptools pin of the newest
     pinned release);
     kept when it exists.
  2. environment: bash golden/setup_env.sh X (golden/.venv-X).
  3. behaviours: golden/timeline.py --releases X --write measures X alone (its probe cases) and
     merges it into golden/behaviours.json and golden/behaviours.md. A behaviour that X changes
     stops here: the C++ reference models behaviours by release (harness/src/core/behaviours.cpp),
     and a row for X (or a new behaviour) must be written first.
  4. fixtures: kvconform golden --release X dumps every case into golden/fixtures/X/; then
     timeline.py --check-fixtures.
  5. golden replay: kvconform run --golden-only of X's fixtures through the C++ reference (a FAIL is
     a behaviour of X the C++ does not model).
  6. mask crosscheck: X's own create_*_mask builders against the fixtures.
  7. differential fuzz: kvconform fuzz --differential --release X (random cases against X live).
  8. encoder masks: golden/encoder_masks.py records the masks X's encoders hand their attention
     layers into golden/encoder_masks/X.json, and kvc_encoder_masks_test judges them against the C++
     bidirectional masks (an encoder mask X changes stops here).
  9. engines: the transformers engine at X in engines/engines.json, the configurations of the newest
     pinned release copied with X's environment; when X is the newest, the "ci" marks move to it.
  10. oracle agreement: engines/transformers/oracle_agreement.py --release X (the model oracle
     against X's float64 forward, every model of the zoo, families and drawn sets, within 1e-10).

Needs the build (build/cli/kvconform, build/harness/kvc-model-oracle, build/harness/kvc_encoder_masks_test:
bash scripts/setup.sh).
Exit 0: X is pinned and every check passed; 1: a step failed (named); 2: bad usage.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KVCONFORM = os.path.join(ROOT, "build", "cli", "kvconform")
ORACLE = os.path.join(ROOT, "build", "harness", "kvc-model-oracle")
ENGINES = os.path.join(ROOT, "engines", "engines.json")


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def pinned():
    return sorted((f[len("requirements-"):-4] for f in os.listdir(HERE)
                   if f.startswith("requirements-") and f.endswith(".txt")), key=vkey)


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class StepFailed(Exception):
    pass


def run(cmd, what, **kw):
    print("+ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT, **kw).returncode
    if rc != 0:
        raise StepFailed(f"{what} (exit {rc}: {' '.join(cmd)})")
    return rc


def requirements(v):
    path = os.path.join(HERE, f"requirements-{v}.txt")
    if os.path.exists(path):
        print(f"add-release: {os.path.relpath(path, ROOT)} exists: kept")
        return
    newest = pinned()[-1]
    setuptools = [l for l in open(os.path.join(HERE, f"requirements-{newest}.txt")) if l.lower().startswith("setuptools==")]
    with tempfile.TemporaryDirectory(prefix="kvc-add-release-") as d:
        venv = os.path.join(d, "venv")
        py = os.path.join(venv, "bin", "python")
        # make_venv (scripts/venv.sh): the project's installer (uv, else pip), resolving this time
        run(["bash", "-c", 'source scripts/venv.sh && make_venv "$1" "$2" --quiet torch==2.13.0 "transformers==$3" jsonschema',
             "make_venv", sys.executable, venv, v], f"transformers {v} does not install beside torch 2.13.0")
        run([py, "-m", "pip", "check"], f"pip check of transformers {v} with torch 2.13.0")
        freeze = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True).stdout
    # the installers are not pins (setuptools: the newest pinned release's line, as every file has it)
    lines = [l for l in freeze.splitlines() if l and not re.match(r"(pip|setuptools|wheel)\s*(==|@)", l, re.I)]
    unpinned = [l for l in lines if "==" not in l]
    if unpinned:
        raise StepFailed(f"pip freeze gave lines that pin no release: {unpinned}")
    pins = {norm(l.split("==")[0]): l.split("==")[1] for l in lines}
    if pins.get("torch", "").split("+")[0] != "2.13.0":
        raise StepFailed(f"pip resolved torch {pins.get('torch')!r} for transformers {v}, not 2.13.0")
    if pins.get("transformers") != v:
        raise StepFailed(f"pip resolved transformers {pins.get('transformers')!r}, not {v}")
    lines = [re.sub(r"^torch==2\.13\.0\+cpu$", "torch==2.13.0", l) for l in lines]
    text = (f"# Pinned environment for golden fixtures from transformers {v} (pip freeze of a clean venv, Python "
            f"{sys.version_info[0]}.{sys.version_info[1]}).\n"
            "# torch 2.13.0 resolves to the local CPU wheel (2.13.0+cpu) through pip's find-links.\n"
            + "\n".join(sorted(lines, key=lambda l: l.split("==")[0].lower())) + "\n" + "".join(setuptools))  # pip freeze's order
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    old = set(norm(l.split("==")[0]) for l in open(os.path.join(HERE, f"requirements-{newest}.txt")) if "==" in l)
    new = sorted(set(pins) - old)
    print(f"add-release: wrote {os.path.relpath(path, ROOT)} ({len(lines)} pins"
          + (f"; new beside {newest}: {', '.join(new)}" if new else "") + ")")


def behaviours(v):
    cmd = [sys.executable, os.path.join(HERE, "timeline.py"), "--releases", v, "--write"]
    print("+ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc == 3:
        raise StepFailed(f"transformers {v} changes a behaviour (above) that the C++ reference does not model yet: "
                         "golden/behaviours.json records it; add the row (or the behaviour) to "
                         "harness/src/core/behaviours.cpp as docs/architecture.md says, then run this again")
    if rc != 0:
        raise StepFailed(f"the behaviour probe of {v} (exit {rc})")


def engines(v):
    with open(ENGINES) as f:
        doc = json.load(f)
    tf = re.compile(r"^transformers-(\d+\.\d+\.\d+)/")
    versions = sorted({m.group(1) for e in doc["engines"] if (m := tf.match(e["name"]))}, key=vkey)
    if v in versions:
        print(f"add-release: engines.json has the transformers engine at {v}: kept")
        return
    older = [x for x in versions if vkey(x) < vkey(v)]
    if not older:
        raise StepFailed(f"engines.json has no transformers release older than {v} to copy configurations from")
    model = older[-1]
    newest = vkey(v) > vkey(versions[-1])
    mine = []
    first = None
    for i, e in enumerate(doc["engines"]):
        if not e["name"].startswith(f"transformers-{model}/"):
            continue
        first = i if first is None else first
        text = json.dumps(e).replace(f"transformers-{model}/", f"transformers-{v}/").replace(
            f".venv-{model}/", f".venv-{v}/").replace(f"setup_env.sh {model}", f"setup_env.sh {v}")
        c = json.loads(text)
        if newest:
            e["ci"] = False
        else:
            c["ci"] = False
        mine.append(c)
    at = first if newest else max(i for i, e in enumerate(doc["engines"]) if e["name"].startswith(f"transformers-{model}/")) + 1
    doc["engines"][at:at] = mine
    with open(ENGINES + ".tmp", "w") as f:
        f.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    os.replace(ENGINES + ".tmp", ENGINES)
    print(f"add-release: engines.json: {len(mine)} configurations of transformers-{v} (those of {model})"
          + ("; its CI configurations are X's now" if newest else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description="add a transformers release end to end")
    ap.add_argument("release", help="the transformers release, e.g. 5.25.0")
    ap.add_argument("--fuzz-iterations", type=int, default=200, help="differential fuzz cases (default 200)")
    ap.add_argument("--no-oracle", action="store_true", help="leave out the oracle agreement (step 9)")
    a = ap.parse_args(argv)
    v = a.release
    if not re.fullmatch(r"\d+\.\d+\.\d+", v):
        ap.error(f"{v!r} is not a release number like 5.25.0")
    for path, what in ((KVCONFORM, "kvconform"), (ORACLE, "kvc-model-oracle")):
        if not os.access(path, os.X_OK):
            ap.error(f"{os.path.relpath(path, ROOT)} is missing ({what}): build first (bash scripts/setup.sh)")
    kvc = os.path.relpath(KVCONFORM, ROOT)
    venv_py = f"golden/.venv-{v}/bin/python"
    steps = [
        ("requirements", lambda: requirements(v)),
        ("environment", lambda: run(["bash", "golden/setup_env.sh", v], f"golden/setup_env.sh {v}")),
        ("behaviours", lambda: behaviours(v)),
        ("fixtures", lambda: (run([kvc, "golden", "--release", v], f"the dump of {v}'s fixtures"),
                              run([sys.executable, "golden/timeline.py", "--check-fixtures", "golden/fixtures"],
                                  "the fixtures' behaviours against golden/behaviours.json"))),
        ("golden replay", lambda: run([kvc, "run", "--golden-only", "--case", f"^{re.escape(v)}/", "--no-report",
                                       "--no-regressions"],
                                      f"{v}'s fixtures do not replay through the C++ reference: {v} changes a "
                                      "behaviour the C++ does not model (the FAIL lines above name case, step and field)")),
        ("mask crosscheck", lambda: run([venv_py, "golden/crosscheck_masks.py"], f"{v}'s own mask builders against its fixtures")),
        ("differential fuzz", lambda: run([kvc, "fuzz", "--differential", "--release", v, "--iterations",
                                           str(a.fuzz_iterations), "--no-write"],
                                          f"random cases through {v} live against the C++ reference")),
        ("encoder masks", lambda: (run([venv_py, "golden/encoder_masks.py", "--out", f"golden/encoder_masks/{v}.json"],
                                       f"the masks {v}'s encoders hand their layers"),
                                   run([os.path.join(ROOT, "build", "harness", "kvc_encoder_masks_test")],
                                       f"{v}'s encoder masks against the C++ bidirectional masks: {v} changes an encoder "
                                       "mask the C++ does not model (the failures above name release, family and layer)"))),
        ("engines", lambda: engines(v)),
    ]
    if not a.no_oracle:
        steps.append(("oracle agreement", lambda: run([sys.executable, "engines/transformers/oracle_agreement.py",
                                                        "--oracle", os.path.relpath(ORACLE, ROOT), "--release", v],
                                                       f"the model oracle against transformers {v}'s float64 forward")))
    t0 = time.time()
    for n, (name, fn) in enumerate(steps, 1):
        t = time.time()
        print(f"add-release {v}: step {n}/{len(steps)}: {name}", flush=True)
        try:
            fn()
        except StepFailed as e:
            print(f"add-release {v}: FAILED at step {n} ({name}): {e}", file=sys.stderr)
            return 1
        print(f"add-release {v}: step {n} ({name}) done in {time.time() - t:.0f} s", flush=True)
    print(f"add-release {v}: done in {time.time() - t0:.0f} s. Commit golden/requirements-{v}.txt, golden/fixtures/{v}/, "
          "golden/behaviours.json, golden/behaviours.md and engines/engines.json.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
