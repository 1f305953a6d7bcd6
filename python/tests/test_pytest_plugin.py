"""`pytest --kvconform` in a subprocess, as a kernel repository runs it: the 14-line example passes,
its mutants fail with the case's message and a runnable reproduce line, SKIPs are skips, a run that
checked nothing fails, and a missing binary is a clear failure.

Needs the kvconform binary ($KVCONFORM_BIN, PATH or this checkout's build/). To stay fast the cases
are float32 without the golden step sequences or the random campaign, except in the example's run.
"""
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from kvconform.binary import NotFound, find

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "sdpa_kernel.py")
MUTANTS = os.path.join(HERE, "mutants")
FAST = "--plugin-iterations 0 --cases " + os.path.join(HERE, "mutants")  # no case files there: built-in patterns only


@pytest.fixture(scope="session")
def binary():
    try:
        return find()
    except NotFound as e:
        pytest.fail(str(e))


def _entry_point_installed():
    eps = importlib.metadata.entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    return any(ep.value == "kvconform.pytest_plugin" for ep in group)


def pytester(tmp_path, binary, *args, env=None):
    """Runs pytest in tmp_path; returns (exit code, output, {name: (outcome, text)})."""
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", f"--junitxml={junit}"]
    if not _entry_point_installed():
        assert not os.environ.get("KVC_EXPECT_INSTALLED"), "the pytest11 entry point of the installed package is missing"
        command += ["-p", "kvconform.pytest_plugin"]
    environment = dict(os.environ, KVCONFORM_BIN=binary)
    environment.update(env or {})
    done = subprocess.run(command + list(args), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=environment, timeout=600)
    results = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome, text = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome, text = child.tag, (child.get("message") or "") + "\n" + (child.text or "")
            results[case.get("name")] = (outcome, text)
    return done.returncode, done.stdout, results


def count(results, outcome):
    return sum(1 for o, _ in results.values() if o == outcome)


def test_example_passes_every_declared_case(tmp_path, binary):
    """The whole check (golden cases' step sequences and a short random campaign included)."""
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", EXAMPLE + ":sdpa_flash",
                                  "--kvconform-args", "--plugin-iterations 5 --cases "
                                  + os.path.join(HERE, "..", "..", "cases"))
    assert code == 0, out
    assert count(results, "failure") == 0 and count(results, "error") == 0, out
    for name in ("kernel/decode_across_window/static/float32", "kernel/prefill_longer_than_window/dynamic/bfloat16",
                 "kernel/sliding_left_padding_batch/static/float16", "campaign/kernel/mixed"):
        assert results[name][0] == "passed", (name, out)
    assert any(n.startswith("golden-kernel/") and o == "passed" for n, (o, _) in results.items()), out
    # chunked layers are not declared: SKIP with the reason, never a pass
    skipped = [t for o, t in results.values() if o == "skipped"]
    assert skipped and all("does not declare chunked layers" in t for t in skipped), out
    assert all(o == "skipped" for n, (o, _) in results.items() if n.startswith("kernel/chunked_")), out
    assert re.search(r"kvconform .*sdpa_flash: \d+ passed, 0 failed, \d+ skipped", out), out


@pytest.mark.parametrize("mutant,case,words", [
    ("sdpa_window_plus_one", "kernel/prefill_longer_than_window/static/float32", "attention (window) max error"),
    ("sdpa_ignores_convention", "kernel/decode_across_window/static/float32", "attention (window) max error"),
])
def test_mutants_fail_with_a_reproduce_line(tmp_path, binary, mutant, case, words):
    spec = os.path.join(MUTANTS, {"sdpa_window_plus_one": "sdpa_window_plus_one.py",
                                  "sdpa_ignores_convention": "sdpa_ignores_convention.py"}[mutant]) + ":" + mutant
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", spec,
                                  "--kvconform-dtype", "float32", "--kvconform-args", FAST,
                                  "--kvconform-filter", "^kernel/(prefill_longer_than_window|decode_across_window)/")
    assert code == 1, out
    outcome, text = results[case]
    assert outcome == "failure", out
    assert f"plugin/{mutant}/{case}(" in text and words in text, text
    assert re.search(r"measured: error [0-9.e+-]+, bound [0-9.e+-]+, margin -[0-9.e+-]+", text), text
    reproduce = re.search(r"reproduce: (.*)", text).group(1)
    assert f"--filter '^plugin/{mutant}/{case}$'" in reproduce, reproduce
    assert "rerun under pytest: pytest --kvconform --kvconform-filter" in text, text
    # the reproduce line runs as printed, from another directory, and fails that one case again
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(reproduce, shell=True, cwd=elsewhere, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
    assert again.returncode == 1 and re.search(rf"{re.escape(case)}\(.*\): FAIL", again.stdout), again.stdout
    assert re.search(r"^0 passed, 1 failed", again.stdout, re.M), again.stdout


def test_expectations_are_xfail_xpass_and_strict_failures(tmp_path, binary):
    """--kvconform-expectations (docs/expectations.md): the mutant's failing case that the file expects
    is an xfail; the same entry on the passing example is an XPASS, and a failure under
    --kvconform-strict-expectations; a malformed file fails at collection naming file and line."""
    case = "kernel/prefill_longer_than_window/static/float32"
    def expecting(kernel):
        f = tmp_path / f"{kernel}.jsonc"
        f.write_text(textwrap.dedent(f"""\
            // {kernel}'s known failures
            {{
              "expectations": [
                {{
                  "case": "^plugin/{kernel}/{re.escape(case)}$",
                  "outcome": "fail",
                  "reason": "told W+1",
                  "link": "https://example.org/1"
                }}
              ]
            }}
            """))
        return str(f)
    select = ["--kvconform-dtype", "float32", "--kvconform-args", FAST, "--kvconform-filter", "^" + re.escape(case) + "$"]
    mutant = os.path.join(MUTANTS, "sdpa_window_plus_one.py") + ":sdpa_window_plus_one"
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", mutant,
                                  "--kvconform-expectations", expecting("sdpa_window_plus_one"), *select)
    assert code == 0, out
    outcome, text = results[case]
    assert outcome == "skipped" and "expected failure (" in text and "told W+1" in text, (text, out)
    assert "1 xfailed" in out and "0 passed, 0 failed, 0 skipped (1 expected failures)" in out, out
    # without the file the same case fails: the entry is what made it an xfail
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", mutant, *select)
    assert code == 1 and results[case][0] == "failure", out
    flash = EXAMPLE + ":sdpa_flash"
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", flash,
                                  "--kvconform-expectations", expecting("sdpa_flash"), *select)
    assert code == 0 and results[case][0] == "passed" and "1 xpassed" in out, out
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", flash,
                                  "--kvconform-expectations", expecting("sdpa_flash"), "--kvconform-strict-expectations", *select)
    assert code == 1, out
    outcome, text = results[case]
    assert outcome == "failure" and "unexpected pass (--strict-expectations)" in text, (text, out)
    bad = tmp_path / "bad.jsonc"
    bad.write_text('{"expectations": [\n  {"case": "x", "outcome": "fial", "reason": "r"}\n]}\n')
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", flash,
                                  "--kvconform-expectations", str(bad), *select)
    assert code == 1 and 'bad.jsonc:2: /expectations/0/outcome: must be one of "fail", "skip", got "fial"' in out, out


def test_kernels_in_test_modules_and_conftest_are_collected(tmp_path, binary):
    """No --kvconform-adapter: an @kvconform.kernel in a test module is a collector of its cases (node
    ids FILE::FUNCTION::CASE), one in conftest.py is collected too; without --kvconform only the
    ordinary tests run."""
    shutil.copy(EXAMPLE, tmp_path / "test_attention.py")
    with open(tmp_path / "test_attention.py", "a") as f:
        f.write("\n\ndef test_ordinary():\n    assert sdpa_flash is not None\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""\
        import torch
        import kvconform

        @kvconform.kernel(window="transformers", dtypes=["float32"])
        def conftest_kernel(q, k, v, *, sliding_window, scale):
            i = torch.arange(q.shape[2])[:, None] + (k.shape[2] - q.shape[2])
            j = torch.arange(k.shape[2])
            mask = (j <= i) & ((j > i - sliding_window) if sliding_window else True)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
        """))
    code, out, results = pytester(tmp_path, binary)
    assert code == 0 and set(results) == {"test_ordinary"}, out
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-dtype", "float32",
                                  "--kvconform-args", FAST, "--collect-only")
    assert code == 0 and "test_attention.py::sdpa_flash::kernel/decode_across_window/static/float32" in out, out
    assert re.search(r"^conftest.py:conftest_kernel::kernel/decode_across_window/static/float32", out, re.M), out
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-dtype", "float32",
                                  "--kvconform-args", FAST,
                                  "test_attention.py::sdpa_flash::kernel/decode_across_window/static/float32")
    assert code == 0 and list(results) == ["kernel/decode_across_window/static/float32"], out
    assert results["kernel/decode_across_window/static/float32"][0] == "passed", out


def test_selection_runs_only_the_selected_cases(tmp_path, binary):
    """--kvconform-filter and -k select items; kvconform then runs only those (its report says so)."""
    reports = tmp_path / "reports"
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", EXAMPLE + ":sdpa_flash",
                                  "--kvconform-args", FAST, "--kvconform-filter", "^kernel/decode_across_window/",
                                  "-k", "float16 or bfloat16", "--kvconform-report-dir", str(reports))
    assert code == 0, out
    assert sorted(results) == ["kernel/decode_across_window/dynamic/bfloat16", "kernel/decode_across_window/dynamic/float16",
                               "kernel/decode_across_window/static/bfloat16", "kernel/decode_across_window/static/float16"], out
    summary = json.loads(next(reports.rglob("summary.json")).read_text())
    assert summary["totals"]["cases"] == 4 and summary["totals"]["passed"] == 4, summary["totals"]


def test_a_run_that_checked_nothing_fails(tmp_path, binary):
    (tmp_path / "float64_only.py").write_text(textwrap.dedent("""\
        import torch, kvconform

        @kvconform.kernel(window="flash", dtypes=["float64"])
        def float64_only(q, k, v, *, window_size, scale):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
        """))
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", "float64_only.py:float64_only",
                                  "--kvconform-dtype", "float32", "--kvconform-args", FAST)
    assert code == 1, out
    assert results and count(results, "skipped") == len(results), out
    assert "does not declare dtype float32" in out and "NOTHING WAS CHECKED" in out, out


def test_no_binary_is_a_failure_that_says_where_it_looked(tmp_path, binary):
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", EXAMPLE + ":sdpa_flash",
                                  env={"KVCONFORM_BIN": str(tmp_path / "no-such-kvconform")})
    assert code == 1 and results["kvconform"][0] == "failure", out
    assert "KVCONFORM_BIN" in results["kvconform"][1] and "not an executable file" in results["kvconform"][1], out
    code, out, results = pytester(tmp_path, binary, "--kvconform")
    assert code == 1 and "found no kernel" in results["kvconform"][1], out


def test_every_layout_and_declaration_end_to_end(tmp_path, binary):
    """transformers' convention, FlashAttention's axis order, no GQA, and all four layouts (varlen
    included) on the left-padded cases: kvconform judges every form and the kernel passes."""
    (tmp_path / "all_layouts.py").write_text(textwrap.dedent("""\
        import torch, kvconform

        def attend(q, k, v, allowed, scale):  # q [B, s, H, D] -> SDPA's [B, H, s, D] and back
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=allowed, scale=scale)
            return o.transpose(1, 2)

        def window(nq, nk, sliding_window):
            i = torch.arange(nq)[:, None] + (nk - nq)
            j = torch.arange(nk)
            return (j <= i) & ((j > i - sliding_window) if sliding_window else True)

        @kvconform.kernel(window="transformers", layouts=["window", "mask", "key_padding_mask", "varlen"],
                          qkv="bshd", gqa=False, dtypes=["float32"])
        def everything(q, k, v, *, sliding_window, scale, attn_mask=None, key_padding_mask=None,
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
            assert q.shape[-2] == k.shape[-2], "gqa=False: k and v have the query's heads"
            if cu_seqlens_q is not None:  # varlen: [total, H, D], one sequence at a time
                outs = []
                for b in range(len(cu_seqlens_q) - 1):
                    s = slice(cu_seqlens_q[b], cu_seqlens_q[b + 1])
                    t = slice(cu_seqlens_k[b], cu_seqlens_k[b + 1])
                    if s.stop - s.start == 0:
                        outs.append(q[s])
                        continue
                    outs.append(attend(q[None, s], k[None, t], v[None, t],
                                       window(s.stop - s.start, t.stop - t.start, sliding_window), scale)[0])
                return torch.cat(outs)
            allowed = window(q.shape[1], k.shape[1], sliding_window)
            if attn_mask is not None:
                allowed = allowed & attn_mask
            if key_padding_mask is not None:
                allowed = allowed & key_padding_mask[:, None, None, :]
            return attend(q, k, v, allowed, scale)
        """))
    reports = tmp_path / "reports"
    code, out, results = pytester(tmp_path, binary, "--kvconform", "--kvconform-adapter", "all_layouts.py:everything",
                                  "--kvconform-dtype", "float32", "--kvconform-args", FAST,
                                  "--kvconform-filter", "sliding_left_padding_batch|decode_across_window|full_",
                                  "--kvconform-report-dir", str(reports))
    assert code == 0 and count(results, "passed") >= 4 and count(results, "failure") == 0, out
    summary = json.loads(next(reports.rglob("summary.json")).read_text())
    assert all(re.search("sliding_left_padding_batch|decode_across_window|full_", c["id"]) for c in summary["cases"])
    padded = [c for c in summary["cases"] if "sliding_left_padding_batch" in c["id"]]
    assert padded and all(c["status"] == "OK" and not c["message"] for c in padded), padded  # plain OK: every form served
    # kvconform -v names the forms it judged: all four, at every step
    from kvconform.__main__ import worker_command
    verbose = subprocess.run([binary, "run", "-v", "--no-report", "--dtype", "float32", "--filter", "sliding_left_padding_batch"]
                             + FAST.split() + ["--backend-cmd", worker_command(str(tmp_path / "all_layouts.py") + ":everything")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert verbose.returncode == 0, verbose.stdout
    assert re.search(r"forms checked: window (\d+) of \1 steps, mask (\d+) of \2 steps, key padding mask (\d+) of \3 steps, "
                     r"varlen (\d+) of \4 steps", verbose.stdout), verbose.stdout


def test_module_entry_points(tmp_path, binary):
    """python -m kvconform bin | run SPEC [kvconform run args]: the binary the plugin uses, and a
    plain kvconform run on a kernel without pytest."""
    environment = dict(os.environ, KVCONFORM_BIN=binary)
    where = subprocess.run([sys.executable, "-m", "kvconform", "bin"], stdout=subprocess.PIPE, text=True, env=environment)
    assert where.returncode == 0 and where.stdout.strip() == binary
    listed = subprocess.run([sys.executable, "-m", "kvconform", "run", EXAMPLE + ":sdpa_flash", "--list", "--dtype", "float32"]
                            + FAST.split(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
                            cwd=tmp_path, timeout=300)
    assert listed.returncode == 0 and "plugin/sdpa_flash/kernel/decode_across_window/static/float32" in listed.stdout.split(), listed.stdout


# --- engines: pytest --kvconform-engine (the README's engine, python/examples/hf_engine.py)
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
HF_ENGINE = os.path.join(HERE, "..", "examples", "hf_engine.py")
TF_PYTHON = os.path.join(ROOT, "golden", ".venv-5.24.0", "bin", "python")  # golden/setup_env.sh 5.24.0
ENGINE_ARGS = ["--kvconform-engine-python", TF_PYTHON, "--kvconform-root", ROOT,
               "--kvconform-engine-args", "--model ^mistral-w5$", "--kvconform-filter", "prefill_gt_w|two_sequences|/rollback$"]


@pytest.fixture
def tf_python():
    if not os.access(TF_PYTHON, os.X_OK):
        pytest.skip(f"no transformers 5.24.0 environment ({TF_PYTHON}; bash golden/setup_env.sh 5.24.0)")
    return TF_PYTHON


def test_engine_cases_are_tests(tmp_path, binary, tf_python):
    """One test per engine case (model/plan), named by it; the README's engine passes, a plan needing
    an operation it does not list is a skip with kvconform's reason."""
    code, out, results = pytester(tmp_path, binary, "--kvconform-engine", HF_ENGINE + ":HFEngine", *ENGINE_ARGS)
    assert code == 0, out
    assert set(results) == {"mistral-w5/prefill_gt_w", "mistral-w5/two_sequences", "mistral-w5/rollback"}, out
    assert results["mistral-w5/prefill_gt_w"][0] == "passed" and results["mistral-w5/two_sequences"][0] == "passed", out
    assert results["mistral-w5/rollback"][0] == "skipped" and "does not support rollback" in results["mistral-w5/rollback"][1], out
    assert re.search(r"kvconform .*hf_engine.py:HFEngine: 2 passed, 0 failed, 1 skipped", out), out


def test_a_wrong_engine_fails_with_the_fail_line(tmp_path, binary, tf_python):
    """An Engine subclass that tells the model W + 1: its cases fail with kvconform's FAIL line, the
    diagnosis, a reproduce line and the pytest rerun line."""
    wrong = tmp_path / "wrong_engine.py"
    wrong.write_text(open(HF_ENGINE).read().replace('if __name__ == "__main__":', textwrap.dedent('''\
        class WindowPlusOne(HFEngine):
            name = "hf-window-plus-one"

            def load(self, model_dir, options, mutant, max_tokens, sequences):
                return super().load(model_dir, options, "window_off_by_one+1", max_tokens, sequences)


        if __name__ == "__main__":''')))
    code, out, results = pytester(tmp_path, binary, "--kvconform-engine", f"{wrong}:WindowPlusOne", *ENGINE_ARGS)
    assert code == 1, out
    outcome, text = results["mistral-w5/prefill_gt_w"]
    assert outcome == "failure", out
    assert "engine/hf-window-plus-one/mistral-w5/prefill_gt_w(W=5," in text and "): FAIL step" in text, text
    assert "consistent with a window of W+1" in text, text
    assert re.search(r"reproduce: /\S*kvconform\S* engine --engine-cmd .*serve-engine .*--filter '\^engine/hf-window-plus-one/mistral-w5/prefill_gt_w\$'", text), text
    assert "rerun under pytest: pytest --kvconform-engine" in text and "--kvconform-filter '^mistral\\-w5/prefill_gt_w$'" in text, text


def test_an_engine_without_a_checkout_is_a_clear_failure(tmp_path, binary):
    code, out, results = pytester(tmp_path, binary, "--kvconform-engine", HF_ENGINE + ":HFEngine",
                                  "--kvconform-root", str(tmp_path))
    assert code == 1 and results["kvconform"][0] == "failure", out
    assert "has no engines/models/make_models.py" in results["kvconform"][1], out
