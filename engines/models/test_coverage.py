#!/usr/bin/env python3
"""coverage.py's engines column, on a report folder written here: each folder's engines, and how each
fares, come from the engine cases of that folder's models (a model's config.json names its model_type).

    python3 engines/models/test_coverage.py [--mutant folder-prefix|expected-dropped|refusal-as-read]

Standard library only. A --mutant replaces one rule of coverage.py with a wrong one, and the test must
then fail (the ctest engine_coverage_engines_mutant_* expects that).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coverage  # noqa: E402  (a sibling)


def case(model, plan, engine, status, models, message="", expected=False):
    c = {"id": f"engine/{engine}/{model}/{plan}", "suite": "engine", "name": f"{model}/{plan}", "params": "",
         "backend": engine, "dtype": "", "status": status, "message": message, "detail": "", "title": "",
         "reproduce": f"build/cli/kvconform engine --models {models} --model '^{model}$'"}
    if expected:
        c["expectation"] = {"outcome": "fail", "source": "engines/x/expectations.jsonc:3"}
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutant", choices=("folder-prefix", "expected-dropped", "refusal-as-read", "wrapper-as-read",
                                         "hyphen-unread"))
    a = ap.parse_args()
    if a.mutant == "folder-prefix":  # a model_type matched to any folder it starts with (qwen2_vl_text -> qwen2)
        coverage.folder_of = lambda t, folders: min((f for f in folders if t.startswith(f)), key=len, default=None)
    elif a.mutant == "expected-dropped":  # expected failures counted as if no expectations file spoke
        real = coverage.engine_results
        coverage.engine_results = lambda results, folders: real([r[:4] + (False,) for r in results], folders)
    elif a.mutant == "wrapper-as-read":  # a wrapper folder counted as read through its decoder's family
        coverage.own_types = lambda folder, types: list(types)
    elif a.mutant == "hyphen-unread":  # a model_type with a hyphen (modernbert-decoder) never its folder's own
        coverage.spelled = lambda t: t
    elif a.mutant == "refusal-as-read":  # an engine that refused every case still "reads" the folder
        coverage.fares = lambda cell: ", ".join(f"{cell[s]} {s}" for s in ("OK", "DEVIATION", "FAIL", "SKIP") if cell[s])
    with tempfile.TemporaryDirectory() as tmp:
        models, report = os.path.join(tmp, "models"), os.path.join(tmp, "report")
        for name, model_type in (("qwen2vl-x", "qwen2_vl"), ("qwen2-x", "qwen2"), ("gemma3-x", "gemma3_text")):
            os.makedirs(os.path.join(models, name))
            with open(os.path.join(models, name, "config.json"), "w") as f:
                json.dump({"model_type": model_type}, f)
        cases = [case("qwen2vl-x", "prefill", "oracle", "OK", models), case("qwen2vl-x", "decode", "oracle", "OK", models),
                 case("qwen2vl-x", "prefill", "mlx-lm", "SKIP", models, "mlx-lm: no module for qwen2_vl"),
                 case("qwen2-x", "prefill", "oracle", "OK", models),
                 case("qwen2-x", "prefill", "mlx-lm", "DEVIATION", models, "window off by one", expected=True),
                 case("qwen2-x", "decode", "mlx-lm", "FAIL", models, "logits differ"),
                 case("gemma3-x", "prefill", "oracle", "OK", models)]
        os.makedirs(report)
        with open(os.path.join(report, "summary.json"), "w") as f:
            json.dump({"format": "kvconform-summary-v1", "cases": cases}, f)
        folders = ["gemma3", "qwen2", "qwen2_vl", "qwen2_moe"]
        table = coverage.engine_results(coverage.read_results([report]), folders)
        got = {f: coverage.engines_cell(table, f, True) for f in folders}  # every one a registry family
    want = {"gemma3": "oracle: 1 OK",
            "qwen2": "mlx-lm: 1 DEVIATION (1 expected), 1 FAIL; oracle: 1 OK",
            "qwen2_vl": "mlx-lm: refused: mlx-lm: no module for qwen2_vl; oracle: 2 OK",
            "qwen2_moe": "not run (no report of its models)"}
    bad = [f"{f}: got {got[f]!r}, expected {want[f]!r}" for f in folders if got[f] != want[f]]
    bad += read_rows()
    for line in bad:
        print("test_coverage: " + line, file=sys.stderr)
    print(f"test_coverage ({'mutant ' + a.mutant if a.mutant else 'coverage.py as is'}): {'FAILED' if bad else 'passed'}")
    return 1 if bad else 0


def read_rows():
    """rows() on a release tree written here: a folder is read where the registry reads its own type
    (gemma3's gemma3_text, mistral), not where its configuration only names a registry family as its
    decoder's (mistral3, a wrapper around mistral), and a folder whose type its name spells with "_" for "-"
    (modernbert_decoder's modernbert-decoder) is read; an encoder folder is read where the registry reads its type
    (modernbert: its model level agrees) and otherwise says why (diffusion_gemma). The failures, as lines."""
    with tempfile.TemporaryDirectory() as tmp:
        models = os.path.join(tmp, "golden", ".venv-9.9.9", "lib", "python3.11", "site-packages", "transformers", "models")
        for folder, text in (("mistral", 'model_type = "mistral"\n"sliding_attention"'),
                             ("mistral3", 'model_type = "mistral3"\ntext_config = dict(model_type = "mistral")'),
                             ("gemma3", 'model_type = "gemma3"\nmodel_type = "gemma3_text"\n"sliding_attention"'),
                             ("modernbert_decoder", 'model_type = "modernbert-decoder"\n"sliding_attention"'),
                             ("modernbert", 'model_type = "modernbert"\n"sliding_attention"'),
                             ("diffusion_gemma", 'model_type = "diffusion_gemma"\n"sliding_attention"')):
            os.makedirs(os.path.join(models, folder))
            with open(os.path.join(models, folder, f"configuration_{folder}.py"), "w") as f:
                f.write(text)
        root, registry = coverage.ROOT, coverage.registry
        coverage.ROOT, coverage.registry = tmp, lambda: {"mistral", "gemma3_text", "modernbert-decoder", "modernbert"}
        try:
            got = {r[0]: r[2] for r in coverage.rows("9.9.9")}
        finally:
            coverage.ROOT, coverage.registry = root, registry
    want = {"gemma3": "gemma3_text", "mistral": "mistral", "modernbert_decoder": "modernbert-decoder",
            "modernbert": "modernbert",
            "diffusion_gemma": "not read: " + coverage.REASONS["diffusion_gemma"],
            "mistral3": "not read: a wrapper whose config.json the registry refuses; its decoder's family mistral is read"}
    return [f"rows: {f}: got {got.get(f)!r}, expected {want[f]!r}" for f in want if got.get(f) != want[f]]


if __name__ == "__main__":
    sys.exit(main())
