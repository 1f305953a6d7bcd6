"""The engine protocol is one table (harness/include/kvconform/engine/steps.h), exported as
engines/protocol.json by `kvconform engine --protocol`: Python's ops, operations and mutants, and the
docs' protocol table, are held to it here, so that a drift fails a test."""
import json
import os
import re
import subprocess

import pytest

from kvconform import engine as kvc_engine

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def protocol():
    with open(os.path.join(ROOT, "engines", "protocol.json"), encoding="utf-8") as f:
        return json.load(f)


def test_the_file_is_what_the_binary_prints():
    binary = os.environ.get("KVCONFORM_BIN")
    if not binary:
        pytest.skip("KVCONFORM_BIN is not set (ctest sets it)")
    out = subprocess.run([binary, "engine", "--protocol"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == protocol(), "engines/protocol.json is stale: kvconform engine --protocol > engines/protocol.json"


def test_python_serves_every_op_of_the_table():
    assert list(kvc_engine._STEPS) == [s["op"] for s in protocol()["steps"]]
    for s in protocol()["steps"]:
        assert (kvc_engine._STEPS[s["op"]].rows is not None) == s["logits"], s["op"]


def test_python_operations_and_mutants_are_the_tables():
    p = protocol()
    assert kvc_engine.OPERATIONS == tuple(o["name"] for o in p["operations"])
    by_kind = {}
    for m in p["mutants"]:
        by_kind.setdefault(m["kind"], []).append(m["name"])
    assert dict(kvc_engine.MUTANT_OPERATION) == {m["name"]: m["operation"] for m in p["mutants"] if m["kind"] == "operation"}
    assert kvc_engine.WINDOW_MUTANTS == ("none", *by_kind["window"])
    assert kvc_engine.MODEL_MUTANTS == tuple(by_kind["model"])
    for o in p["operations"]:
        assert [m["name"] for m in o["mutants"]] == [m["name"] for m in p["mutants"] if m.get("operation") == o["name"]]


def test_the_docs_protocol_table_is_the_tables():
    with open(os.path.join(ROOT, "docs", "engines.md"), encoding="utf-8") as f:
        docs = f.read()
    # The per-step rows of the protocol table: | | `{"op": "fork", "case", "step", "seq", "from", "length"}` | ... |
    rows = re.findall(r'^\|[^|]*\| `\{"op": "([a-z_]+)", "case", "step"([^`]*)\}` \|', docs, re.M)
    # The fields of the request itself (an item's own fields inside its brackets are not the step's).
    documented = {op: sorted(set(re.findall(r'"([a-z_]+)"', re.sub(r"\[[^\]]*\]", "", fields)))) for op, fields in rows}
    assert documented == {s["op"]: sorted(s["fields"]) for s in protocol()["steps"]}
    for m in protocol()["mutants"]:
        assert f"`{m['name']}`" in docs, f"docs/engines.md does not name the mutant {m['name']}"


def test_the_llama_cpp_worker_serves_the_table():
    # A worker of its own CMake project (built against each llama.cpp): its hello and its dispatch are
    # read from its source.
    with open(os.path.join(ROOT, "engines", "llama_cpp", "worker.cpp"), encoding="utf-8") as f:
        src = f.read()
    listed = re.search(r'\{"operations",\s*\{([^}]*)\}\}', src)
    assert listed, "the llama.cpp worker's hello lists no operations"
    assert re.findall(r'"([a-z_]+)"', listed.group(1)) == [o["name"] for o in protocol()["operations"]]
    served = set(re.findall(r'op == "([a-z_]+)"', src))
    assert {s["op"] for s in protocol()["steps"]} <= served


def mutant_tests():
    with open(os.path.join(ROOT, "engines", "mutant_tests.json"), encoding="utf-8") as f:
        return json.load(f)["tests"]


def diagnosis_kinds():
    with open(os.path.join(ROOT, "docs", "expectations.schema.json"), encoding="utf-8") as f:
        text = f.read()
    return set(json.loads(re.search(r'"enum": (\["window_off_by_one"[^\]]*\])', text).group(1)))


def test_a_mistake_has_one_name():
    # A mutant the judge names is named by its diagnosis kind (with its sign); the old spelling of
    # each is the one Python accepts for one release.
    kinds = diagnosis_kinds()
    for m in protocol()["mutants"]:
        bare = re.sub(r"[+-]1$", "", m["name"])
        assert re.fullmatch(r"[a-z0-9_]+([+-]1)?", m["name"]), f"{m['name']}: a mutant's name is snake_case (a sign at the end)"
        assert m.get("diagnosis", bare) == bare, m
        assert ("diagnosis" in m) == (bare in kinds), f"{m['name']}: a diagnosis kind of that name exists: name it"
    assert dict(kvc_engine.RENAMED_MUTANTS) == {m["replaces"]: m["name"] for m in protocol()["mutants"] if "replaces" in m}
    with pytest.warns(DeprecationWarning, match="it is now 'window_off_by_one\\+1'"):
        assert kvc_engine.mutated_window(4, "window+1") == 5


def test_every_mutant_has_its_ctests_in_the_table():
    names = {m["name"] for m in protocol()["mutants"]}
    rows = mutant_tests()
    kinds = diagnosis_kinds()
    for i, r in enumerate(rows):
        assert r["mutant"] in names, f"engines/mutant_tests.json: /tests/{i}: {r['mutant']} is no mutant of engines/protocol.json"
        if "diagnosis" in r:
            assert r["diagnosis"] in kinds, f"engines/mutant_tests.json: /tests/{i}: {r['diagnosis']} is no diagnosis kind"
    untested = names - {r["mutant"] for r in rows}
    assert not untested, f"mutants no ctest shows caught (engines/mutant_tests.json): {sorted(untested)}"


def test_the_docs_mutant_table_is_the_tables():
    out = subprocess.run(["python3", os.path.join(ROOT, "scripts", "mutant_table.py"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
