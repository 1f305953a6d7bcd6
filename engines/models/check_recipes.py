#!/usr/bin/env python3
"""A drawn model's recipe writes the same checkpoint as the drawn set: for every drawn family,
`make_models.py --draw F:0:I` then `--recipe` gives config.json and model.safetensors byte for byte
equal to `--set drawn --only draw-F-0-I`, so the model campaign judges the models the oracle agreement
table measured. A recipe that is not one is refused naming its field, and writes nothing. `--serve`
(what `kvconform engine --plans models` asks) answers each draw with the one-shot --draw's recipe and
writes each recipe's bytes, refuses what the one-shot commands refuse with their messages, and goes on
after a refusal.
Exit 0 when all hold, 1 naming each difference."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "make_models.py")
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "..", "python"))
import families  # noqa: E402
from kvconform import protocol  # noqa: E402  (the frames, the package's one implementation)


def make(*args, stdin=None):
    return subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True, text=True)


class Served:
    """make_models.py --serve, spoken to as the engine command does (u32 length, JSON header)."""

    def __init__(self):
        self.p = subprocess.Popen([sys.executable, SCRIPT, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, request):
        try:
            protocol.send(self.p.stdin, request)
            return protocol.receive(self.p.stdout)[0]
        except (BrokenPipeError, protocol.Closed):
            return {"status": "error", "error": f"the server ended (exit {self.p.wait()})"}

    def close(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        return self.p.wait(timeout=60)


def check_served(tmp, drawn, problems):
    """drawn: {spec: one-shot --draw stdout}; the server's draws and writes against the one-shot ones."""
    server = Served()
    if server.ask({"op": "hello"}).get("status") != "ok":
        problems.append("--serve did not answer hello")
    served_dir = os.path.join(tmp, "served")
    for spec, text in drawn.items():
        reply = server.ask({"op": "draw", "spec": spec, "head_dims": None})
        if reply.get("recipe") != json.loads(text):
            problems.append(f"--serve draw {spec}: {json.dumps(reply)[:200]} is not --draw's recipe")
            continue
        wrote = server.ask({"op": "write", "dir": served_dir, "recipe": json.dumps(reply["recipe"])})
        if wrote.get("status") != "ok":
            problems.append(f"--serve write {spec}: {wrote}")
            continue
        name = reply["recipe"]["name"]
        for f in ("config.json", "model.safetensors"):
            a, b = os.path.join(served_dir, name, f), os.path.join(tmp, "recipes", name, f)
            if not (os.path.exists(a) and os.path.exists(b)) or open(a, "rb").read() != open(b, "rb").read():
                problems.append(f"--serve write {name}/{f}: differs from --recipe's")
    narrowed = make("--draw", "gemma2:3:1", "--head-dims", "32,64")
    reply = server.ask({"op": "draw", "spec": "gemma2:3:1", "head_dims": "32,64"})
    if narrowed.returncode or reply.get("recipe") != json.loads(narrowed.stdout):
        problems.append(f"--serve draw gemma2:3:1 with head_dims 32,64 is not --draw's: {json.dumps(reply)[:200]}")
    # Refusals carry the one-shot message, write nothing, and the server goes on.
    for request, words in (({"op": "draw", "spec": "nosuchfamily:0:0"}, "expected FAMILY:SEED:INDEX"),
                           ({"op": "draw", "spec": "gemma2:0:0", "head_dims": "3"}, "expected even sizes"),
                           ({"op": "write", "dir": os.path.join(tmp, "bad-served"),
                             "recipe": json.dumps({"name": "x", "folder": "../escape", "layout": "mistral", "config": {}})}, "/folder"),
                           ({"op": "nosuchop"}, "unknown op")):
        reply = server.ask(request)
        if reply.get("status") != "error" or words not in reply.get("error", ""):
            problems.append(f"--serve {json.dumps(request)[:80]}: not refused with '{words}': {reply}")
    if os.path.exists(os.path.join(tmp, "escape")):
        problems.append("a recipe refused by --serve wrote a folder")
    again = server.ask({"op": "draw", "spec": next(iter(drawn)), "head_dims": None})
    if again.get("recipe") != json.loads(drawn[next(iter(drawn))]):
        problems.append(f"--serve after its refusals: {json.dumps(again)[:200]}")
    code = server.close()
    if code != 0:
        problems.append(f"--serve exited {code} at the end of its input")
    print(f"--serve: {len(drawn)} draws and writes as the one-shot commands'")


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        from_recipes, from_set = os.path.join(tmp, "recipes"), os.path.join(tmp, "set")
        names = []
        drawn_texts = {}
        for family in families.DRAWN_FAMILIES:
            for index in (0, 1):
                drawn = make("--draw", f"{family}:0:{index}")
                if drawn.returncode:
                    problems.append(f"--draw {family}:0:{index}: {drawn.stderr.strip()}")
                    continue
                drawn_texts[f"{family}:0:{index}"] = drawn.stdout
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
        check_served(tmp, drawn_texts, problems)
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
