#!/usr/bin/env python3
"""validate_cases.py agrees with the C++ loader (harness/src/cases/cases_test.cpp) on hostile cases: the
same pointer and message for each size cap and out-of-range number, and each cap can be raised.

    python3 golden/test_validate_cases.py      (needs jsonschema: any golden venv has it)
"""
import glob
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import jsonschema  # noqa: F401
except ImportError:  # ctest runs python3: move to a golden venv, which has it, or skip (exit 77)
    for py in sorted(glob.glob(os.path.join(HERE, ".venv-*", "bin", "python"))):
        os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
    print("SKIP: no Python with jsonschema (scripts/setup.sh with KVC_WITH_GOLDEN=1 builds the golden venvs)")
    sys.exit(77)
sys.path.insert(0, HERE)
import validate_cases as vc  # noqa: E402


def doc(fields="", steps='[{"tokens": 2}, {"tokens": 1}]'):
    base = {"name": "x", "description": "d", "cache": "dynamic", "layer_types": ["sliding_attention"], "window": 2,
            "batch": 1, "heads": 2, "kv_heads": 1, "head_dim": 4, "dtype": "float32", "left_padding": None,
            "inputs": {"generator": "kvc-mix64-v1", "seed": 3}}
    text = json.dumps(base)[:-1] + ', "steps": ' + steps + (", " + fields if fields else "") + "}"
    return text


def errors(text, allow_large=False):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.json")
        with open(path, "w") as f:
            f.write(text)
        _, _, errs = vc.load_case_file(path, allow_large=allow_large)
    return [f"cases/x.json: {p}: {m}" for p, m in errs]


class Caps(unittest.TestCase):
    def setUp(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KVC_MAX_") and k != "KVC_ALLOW_LARGE"}
        patcher = mock.patch.dict(os.environ, env, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_valid_case_loads(self):
        self.assertEqual(errors(doc()), [])

    def test_call_steps(self):  # the same pointers and messages as CaseFiles.CallStepsLoadAndTheirArgumentIsChecked
        self.assertEqual(errors(doc("", '[{"tokens": 3}, {"call": "crop", "argument": -2}, {"tokens": 1}, '
                                        '{"call": "activate_past_recording"}, {"call": "reset"}, {"tokens": 1}]')), [])
        self.assertEqual(errors(doc("", '[{"tokens": 2}, {"call": "crop"}]')),
                         ['cases/x.json: /steps/1: crop needs an "argument"'])
        self.assertEqual(errors(doc("", '[{"tokens": 2}, {"call": "reset", "argument": 1}]')),
                         ["cases/x.json: /steps/1/argument: reset takes no argument"])
        self.assertEqual(errors(doc("", '[{"tokens": 2, "argument": 1}]')),
                         ["cases/x.json: /steps/0/argument: only a call step takes an argument"])
        self.assertEqual(errors(doc("", '[{"tokens": 2}, {"call": "crop", "argument": -1, "judged": false}]')),
                         ["cases/x.json: /steps/1/judged: a call step takes no judged"])
        self.assertTrue(errors(doc("", '[{"tokens": 2}, {"call": "truncate", "argument": -1}]')))
        self.assertTrue(errors(doc("", '[{"tokens": 2, "call": "reset"}]')))  # one or the other

    def test_huge_token_count(self):
        self.assertEqual(errors(doc("", '[{"tokens": 1}, {"tokens": 2}, {"tokens": 3}, {"tokens": 2000000000}]')),
                         ["cases/x.json: /steps/3/tokens: 2000000000 exceeds the cap of 65536 tokens per case "
                          "(raise with --allow-large or KVC_MAX_TOKENS)"])
        self.assertEqual(errors(doc("", "[" + ",".join(['{"tokens": 100}'] * 656) + "]")),
                         ["cases/x.json: /steps/655/tokens: the case's 65600 tokens so far exceeds the cap of 65536 "
                          "tokens per case (raise with --allow-large or KVC_MAX_TOKENS)"])

    def test_each_size_field(self):
        for field, ptr, env in (('"batch": 100000000', "/batch", "KVC_MAX_BATCH"),
                                ('"heads": 100000000, "kv_heads": 1', "/heads", "KVC_MAX_HEADS"),
                                ('"head_dim": 100000000', "/head_dim", "KVC_MAX_HEAD_DIM"),
                                ('"window": 100000000', "/window", "KVC_MAX_WINDOW")):
            text = doc()[:-1] + ", " + field + "}"
            (e,) = errors(text)
            self.assertIn(f"cases/x.json: {ptr}: 100000000 exceeds the cap of ", e)
            self.assertIn(env, e)
        self.assertEqual(errors(doc("", "[" + ",".join(['{"tokens": 1}'] * 4097) + "]")),
                         ["cases/x.json: /steps: 4097 steps exceeds the cap of 4096 steps per case (raise with "
                          "--allow-large or KVC_MAX_STEPS)"])

    def test_memory_products(self):
        self.assertEqual(errors(doc('"batch": 256, "heads": 256, "kv_heads": 256, "head_dim": 1024', '[{"tokens": 1}]')),
                         ["cases/x.json: /steps/0/tokens: batch*heads*tokens*head_dim = 67108864 exceeds the cap of "
                          "16777216 elements per tensor (raise with --allow-large or KVC_MAX_ELEMENTS)"])
        self.assertEqual(errors(doc('"heads": 1, "head_dim": 1', '[{"tokens": 60000}]')),
                         ["cases/x.json: /steps/0/tokens: batch*heads*step tokens*key rows = 3600000000 exceeds the "
                          "cap of 67108864 attention scores per step (raise with --allow-large or KVC_MAX_SCORES)"])

    def test_raised_and_lifted(self):
        text = doc("", '[{"tokens": 2000000000}]')
        self.assertEqual(errors(text, allow_large=True), [])
        with mock.patch.dict(os.environ, {"KVC_ALLOW_LARGE": "1"}):
            self.assertEqual(errors(text), [])
        with mock.patch.dict(os.environ, {"KVC_MAX_TOKENS": "2"}):
            self.assertIn("the case's 3 tokens so far exceeds the cap of 2 tokens", errors(doc())[0])
        with mock.patch.dict(os.environ, {"KVC_MAX_TOKENS": "x"}):
            self.assertRaises(ValueError, vc.limits)

    def test_numbers_out_of_range(self):
        self.assertEqual(errors('{"name": "x", "inputs": {"generator": "kvc-mix64-v1", "seed": 1e400}}'),
                         ["cases/x.json: /inputs/seed: number overflow parsing '1e400'"])
        self.assertEqual(errors(doc("", '[{"tokens": 1}, {"tokens": 1180591620717411303424}]')),
                         ["cases/x.json: /steps/1/tokens: 1180591620717411303424 is out of the 64-bit integer range"])
        self.assertEqual(errors(doc('"batch": 18446744073709551615')),
                         ["cases/x.json: /batch: 18446744073709551615 is out of the 64-bit integer range"])
        for bad in ('"batch": -1', '"batch": 2.5'):
            (e,) = errors(doc(bad))
            self.assertTrue(e.startswith("cases/x.json: /batch: "), e)
        self.assertIn("/steps/0/cache_position/0: position 9223372036854775807 exceeds the cap of 65535",
                      errors(doc("", '[{"tokens": 1, "cache_position": [9223372036854775807]}]'))[0])
        self.assertEqual(errors('{"name": NaN}'), ["cases/x.json: /name: invalid JSON: NaN is not a JSON value"])

    def test_long_pattern_strings_and_deep_nesting(self):
        self.assertEqual(errors(doc('"name": "' + "a" * 1000000 + '"')),
                         ["cases/x.json: /name: a string of 1000000 characters, longer than 128"])
        self.assertEqual(errors(doc('"profiles": ["5.24.0", "' + "1" * 100000 + '"]')),
                         ["cases/x.json: /profiles/1: a string of 100000 characters, longer than 32"])
        self.assertEqual(errors("[" * 100000 + "]" * 100000),
                         ["cases/x.json: /: invalid JSON: nested too deeply for Python's parser"])

    def test_profiles_is_an_alias_of_releases(self):
        # the C++ loader's Cases.ProfilesIsADeprecatedAliasOfReleases: same verdicts and message
        self.assertEqual(errors(doc('"releases": ["5.24.0"]')), [])
        self.assertEqual(errors(doc('"profiles": ["5.24.0"]')), [])
        self.assertEqual(vc.releases_of(json.loads(doc('"profiles": ["5.24.0"]'))), ["5.24.0"])
        self.assertEqual(vc.releases_of(json.loads(doc())), None)
        self.assertEqual(errors(doc('"releases": ["5.24.0", "' + "1" * 100 + '"]')),
                         ["cases/x.json: /releases/1: a string of 100 characters, longer than 32"])
        self.assertEqual(errors(doc('"releases": ["5.24.0"], "profiles": ["5.24.0"]')),
                         ["cases/x.json: /profiles: 'profiles' is the deprecated name of 'releases'; give only 'releases'"])

    def test_fill_steps_and_distributions(self):
        # A numerics case: a fill step and normal inputs load; a case of fill steps only judges nothing.
        fill = '[{"tokens": 2, "judged": false}, {"tokens": 1}]'
        self.assertEqual(errors(doc("", fill).replace('"seed": 3', '"seed": 3, "distribution": "normal"')), [])
        self.assertEqual(errors(doc("", '[{"tokens": 2, "judged": false}]')),
                         ['cases/x.json: /steps: every step is a fill step ("judged": false): the case would judge nothing'])
        self.assertEqual(len(errors(doc().replace('"seed": 3', '"seed": 3, "distribution": "uniform"'))), 1)

    def test_committed_cases_within_caps(self):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        files = vc.expand_paths([os.path.join(root, "cases"), os.path.join(root, "cases", "generated")])
        self.assertGreaterEqual(len(files), 300)
        for f in files:
            self.assertEqual(vc.load_case_file(f)[2], [], f)


if __name__ == "__main__":
    unittest.main()
