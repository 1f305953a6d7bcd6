#!/usr/bin/env python3
"""timeline.py --releases X --write: one release merged into behaviours.json and behaviours.md
without the full sweep (standard library only; the releases' probe dumps are stand-ins), and the
steps of add_release.py that need no environment.

    python3 golden/test_timeline.py
"""
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import timeline as tl  # noqa: E402

PROBE = tl.PROBES[0]
OLD = {"cache_api": "query_length", "sliding_layer": "merged", "sdpa_skip": "not_compileable_decode",
       "sdpa_skip_empty_cache": True, "static_seq_length": "cumulative"}


def record(behaviours, rows):
    """A measured release: its behaviours and one probe fixture whose returned rows are `rows`."""
    return dict(behaviours), {PROBE: {"behaviours": behaviours, "steps": [{"returned_rows": rows}]}}


class Merge(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kvc-timeline-test-")
        self.json = os.path.join(self.dir, "behaviours.json")
        self.md = os.path.join(self.dir, "behaviours.md")
        self.measured = {"1.0.0": record(OLD, 3), "1.1.0": record(OLD, 3), "1.2.0": record(OLD, 4)}
        # the timeline a sweep of 1.0.0, 1.1.0, 1.2.0 writes: one field change at 1.2.0
        tl.write_outputs({v: r[0] for v, r in self.measured.items()},
                         [("1.2.0", "1.1.0", {}, {"/steps/*/returned_rows": [PROBE]})], self.json, self.md)
        self.calls = []

    def tearDown(self):
        shutil.rmtree(self.dir)

    def measure(self, v):
        self.calls.append(v)
        return self.measured[v]

    def merge(self, *releases):
        return tl.merge(list(releases), self.measure, self.json, self.md)

    def test_committed_timeline_reads_back_byte_for_byte(self):
        results, changes = tl.read_outputs()
        tl.write_outputs(results, changes, self.json, self.md)
        for mine, committed in ((self.json, tl.BEHAVIOURS_JSON), (self.md, tl.BEHAVIOURS_MD)):
            with open(mine) as a, open(committed) as b:
                self.assertEqual(a.read(), b.read(), committed)

    def test_newest_release_with_the_same_behaviours_is_added_without_a_change_entry(self):
        self.measured["1.3.0"] = record(OLD, 4)
        changed = self.merge("1.3.0")
        self.assertEqual(changed, [("1.3.0", "1.2.0", {}, {})])
        self.assertEqual(sorted(self.calls), ["1.2.0", "1.3.0"])  # X and its predecessor, nothing else
        with open(self.json) as f:
            table = json.load(f)
        self.assertEqual(list(table), ["1.0.0", "1.1.0", "1.2.0", "1.3.0"])
        self.assertEqual(table["1.3.0"], OLD)
        results, changes = tl.read_outputs(self.json, self.md)
        self.assertEqual([(v, p) for v, p, _, _ in changes], [("1.2.0", "1.1.0")])
        with open(self.md) as f:
            text = f.read()
        self.assertIn("| 1.0.0 .. 1.3.0 |", text)
        self.assertIn("4 releases", text)

    def test_a_behaviour_change_is_recorded_and_returned(self):
        new = dict(OLD, sdpa_skip="always")
        self.measured["1.3.0"] = record(new, 4)
        changed = self.merge("1.3.0")
        self.assertEqual(changed, [("1.3.0", "1.2.0", {"sdpa_skip": ("not_compileable_decode", "always")}, {})])
        _, changes = tl.read_outputs(self.json, self.md)
        self.assertEqual(changes[-1], ("1.3.0", "1.2.0", {"sdpa_skip": ("not_compileable_decode", "always")}, {}))
        with open(self.md) as f:
            self.assertIn("| 1.3.0 |", f.read())

    def test_a_release_between_two_replaces_their_change_by_the_two_through_it(self):
        self.measured["1.1.5"] = record(OLD, 4)  # the field changed at 1.1.5, not at 1.2.0
        self.merge("1.1.5")
        _, changes = tl.read_outputs(self.json, self.md)
        self.assertEqual([(v, p) for v, p, _, _ in changes], [("1.1.5", "1.1.0")])
        self.assertEqual(changes[0][3], {"/steps/*/returned_rows": [PROBE]})

    def test_remerging_a_release_is_idempotent(self):
        self.measured["1.3.0"] = record(OLD, 5)
        self.merge("1.3.0")
        with open(self.md) as f:
            once = f.read()
        self.merge("1.3.0")
        with open(self.md) as f:
            self.assertEqual(f.read(), once)

    def test_a_failed_measurement_writes_nothing(self):
        with open(self.json) as f:
            before = f.read()

        def fail(v):
            raise RuntimeError(f"{v}: dump failed")

        with self.assertRaises(RuntimeError):
            tl.merge(["1.3.0"], fail, self.json, self.md)
        with open(self.json) as f:
            self.assertEqual(f.read(), before)

    def test_a_hand_edited_change_line_is_refused(self):
        with open(self.md) as f:
            text = f.read()
        with open(self.md, "w") as f:
            f.write(text.replace("- field `/steps/*/returned_rows` (1 probes)", "- field `/steps/*/returned_rows` (2 probes)"))
        with self.assertRaises(SystemExit) as e:
            tl.read_outputs(self.json, self.md)
        self.assertIn("2 probes announced, 1 listed", str(e.exception))


class AddRelease(unittest.TestCase):
    """golden/add_release.py's steps that need no environment: engines.json, and the stop on a behaviour change."""

    def setUp(self):
        import add_release
        self.ar = add_release
        self.dir = tempfile.mkdtemp(prefix="kvc-add-release-test-")
        self.engines = os.path.join(self.dir, "engines.json")
        entry = lambda v, cfg, ci: {"name": f"transformers-{v}/{cfg}", "command": f"golden/.venv-{v}/bin/python a.py",
                                    "needs": f"test -x golden/.venv-{v}/bin/python", "setup": f"bash golden/setup_env.sh {v}",
                                    "ci": ci}
        with open(self.engines, "w") as f:
            json.dump({"engines": [{"name": "oracle", "ci": True}, entry("1.2.0", "static", True), entry("1.2.0", "dynamic", False),
                                   entry("1.0.0", "static", False)]}, f)
        self.saved = add_release.ENGINES
        add_release.ENGINES = self.engines

    def tearDown(self):
        self.ar.ENGINES = self.saved
        shutil.rmtree(self.dir)

    def names(self):
        with open(self.engines) as f:
            return [(e["name"], e.get("ci")) for e in json.load(f)["engines"]]

    def test_the_newest_release_gets_the_newest_configurations_and_the_ci_marks(self):
        self.ar.engines("1.3.0")
        self.assertEqual(self.names(), [("oracle", True), ("transformers-1.3.0/static", True), ("transformers-1.3.0/dynamic", False),
                                        ("transformers-1.2.0/static", False), ("transformers-1.2.0/dynamic", False),
                                        ("transformers-1.0.0/static", False)])
        with open(self.engines) as f:
            e = json.load(f)["engines"][1]
        self.assertEqual((e["command"], e["needs"], e["setup"]), ("golden/.venv-1.3.0/bin/python a.py",
                                                                  "test -x golden/.venv-1.3.0/bin/python", "bash golden/setup_env.sh 1.3.0"))
        before = self.names()
        self.ar.engines("1.3.0")  # again: kept
        self.assertEqual(self.names(), before)

    def test_an_older_release_joins_without_ci(self):
        self.ar.engines("1.1.0")
        self.assertIn(("transformers-1.1.0/static", False), self.names())
        self.assertIn(("transformers-1.2.0/static", True), self.names())

    def test_a_behaviour_change_stops_the_command_naming_the_cpp_table(self):
        from unittest import mock
        with mock.patch.object(self.ar.subprocess, "run", return_value=mock.Mock(returncode=3)):
            with self.assertRaises(self.ar.StepFailed) as e:
                self.ar.behaviours("9.9.9")
        self.assertIn("changes a behaviour", str(e.exception))
        self.assertIn("harness/src/core/behaviours.cpp", str(e.exception))


if __name__ == "__main__":
    unittest.main()
