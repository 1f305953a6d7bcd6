#!/usr/bin/env python3
"""A drawn model's recipe writes the same checkpoint as the drawn set: for every drawn family,
`make_models.py --draw F:0:I` then `--recipe` gives config.json and model.safetensors byte for byte
equal to `--set drawn --only draw-F-0-I`, so the model campaign judges the models the oracle agreement
table measured. A recipe that is not one is refused naming its field, and writes nothing.
Exit 0 when all hold, 1 naming each difference."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "make_models.py")
sys.path.insert(0, HERE)
import families  # noqa: E402


def make(*args, stdin=None):
    return subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True, text=True)


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        from_recipes, from_set = os.path.join(tmp, "recipes"), os.path.join(tmp, "set")
        names = []
        for family in families.DRAWN_FAMILIES:
            for index in (0, 1):
                drawn = make("--draw", f"{family}:0:{index}")
                if drawn.returncode:
                    problems.append(f"--draw {family}:0:{index}: {drawn.stderr.strip()}")
                    continue
                recipe = json.loads(drawn.stdout)
                names.append(recipe["name"])
                wrote = make(from_recipes, "--recipe", "-", stdin=drawn.stdout)
                if wrote.returncode:
                    problems.append(f"--recipe {recipe['name']}: {wrote.stderr.strip()}")
        only = [arg for name in names for arg in ("--only", name)]
        wrote = make(from_set, "--set", "drawn", *only)
        if wrote.returncode:
            problems.append(f"--set drawn: {wrote.stderr.strip()}")
        for name in names:
            for f in ("config.json", "model.safetensors"):
                a, b = os.path.join(from_recipes, name, f), os.path.join(from_set, name, f)
                if not (os.path.exists(a) and os.path.exists(b)) or open(a, "rb").read() != open(b, "rb").read():
                    problems.append(f"{name}/{f}: the recipe's differs from the drawn set's")
        # A bad recipe names its field and leaves no folder behind.
        bad = json.dumps({"name": "x", "folder": "../escape", "layout": "mistral", "config": {}})
        refused = make(os.path.join(tmp, "bad"), "--recipe", "-", stdin=bad)
        if refused.returncode == 0 or "/folder" not in refused.stderr:
            problems.append(f"a recipe with folder ../escape was not refused naming /folder: {refused.stderr.strip()}")
        if os.path.exists(os.path.join(tmp, "escape")):
            problems.append("a refused recipe wrote a folder")
        print(f"{len(names)} drawn models written from their recipes")
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
