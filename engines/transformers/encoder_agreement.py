#!/usr/bin/env python3
"""The model oracle's encoder forward (kvc-model-oracle on a bidirectional model: SequenceOracle::encode) against
transformers' own float64 forward of the encoder's class (its masked-LM class, or OUTPUTS below), for every checkpoint of the encoders set
(engines/models/families.py ENCODERS, make_models.py --set encoders: the encoder-decoders too, SEQ2SEQ) and every
pinned release that has its model_type.

    python3 engines/transformers/encoder_agreement.py [--oracle build/harness/kvc-model-oracle] [--models DIR]
                                                      [--set encoders|drawn-encoders] [--oracle-args ARGS]
                                                      [--only REGEX] [--release X ...]

--set drawn-encoders holds the drawn encoders instead (families.ENCODER_FAMILIES, two draws each of seed 0: make_models.py
--set drawn-encoders); CI runs a sample of it (cli/CMakeLists.txt), the whole of it on every pinned release is
`encoder_agreement.py --set drawn-encoders --models build/agreement-drawn-encoders` (docs/families.md).

oracle_agreement.py's sibling for the encoders: its forward is AutoModelForCausalLM's, causal and incremental, and an
encoder's position sees later tokens. Each model runs twice per release: without padding, and with an attention_mask
that pads the first and the last position (so every layer's window meets padding keys at both ends, and a padding
position's own row is compared too). Two numbers per row: the max |logit difference| against transformers with its
float32 islands patched to float64 (exact64.py: must be <= 1e-10, else exit 1) and as shipped (reported). A release
without the model_type is ABSENT, never a pass; a checkpoint that leaves a tensor of the class unloaded (or one of its
own unread) FAILs, since transformers would initialise it at random. Exit 77 where no release's environment exists. Standard library only;
each release runs in its own golden/.venv-<version>, eager attention.
"""
import argparse
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUND = 1e-10
# What each family's output is, where it is not the masked-LM class's logits: (auto class, output field). The oracle's
# output row is the same head (ModelConfig::outputs).
OUTPUTS = {
    "embedding_gemma2_text": ("AutoModel", "last_hidden_state"),  # embedding_projection of the final hidden states
    "openai_privacy_filter": ("AutoModelForTokenClassification", "logits"),  # num_labels scores per position
}
# The encoder-decoders: the decoder's logits of TARGET tokens (no padding: decoder_attention_mask all ones, no cache),
# each cross-attending the encoder's output over the row's tokens as the source (its attention_mask the row's mask;
# the oracle's --source and --source-real).
SEQ2SEQ = {"t5gemma": "AutoModelForSeq2SeqLM", "t5gemma2": "AutoModelForSeq2SeqLM"}
# A release's own rule where it departs from the newest one, as the oracle's arguments: T5Gemma's 4.x encoder reached
# sliding_window - 1 keys on each side (its own mask overlay), 5.x's builders sliding_window (finding 54).
RELEASE_ARGS = {"t5gemma": lambda v: ["--encoder-reach-delta", "-1"] if v.startswith("4.") else []}
RUN_RELEASE = """
import json, os, sys
tokens, target, masks, tmp, v, outputs, seq2seq, *models = sys.argv[1:]
target = [int(t) for t in target.split(",")]
seq2seq = json.loads(seq2seq)
import torch, transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
import exact64  # engines/transformers is on PYTHONPATH
tokens = [int(t) for t in tokens.split(",")]
masks = json.loads(masks)
status = {}
for mode in ("plain", "exact"):
    for m in models:
        name = os.path.basename(m)
        model_type = json.load(open(os.path.join(m, "config.json")))["model_type"]
        if model_type not in CONFIG_MAPPING:
            status[name] = {"absent": model_type}
            continue
        try:
            auto, field = json.loads(outputs).get(model_type, (seq2seq.get(model_type, "AutoModelForMaskedLM"), "logits"))
            model, info = getattr(transformers, auto).from_pretrained(m, attn_implementation="eager", output_loading_info=True)
            left = {k: sorted(x) for k, x in info.items() if k in ("missing_keys", "unexpected_keys") and x}
            if left:
                raise RuntimeError(f"{auto} of {name} left tensors unloaded or unread: {left}")
            model = model.to(torch.float64).eval()
            if mode == "exact":
                exact64.patch(model)
            for i, mask in enumerate(masks):
                with torch.no_grad():
                    extra = {}
                    if model_type in seq2seq:
                        extra = {"decoder_input_ids": torch.tensor([target]),
                                 "decoder_attention_mask": torch.ones(1, len(target), dtype=torch.long), "use_cache": False}
                    logits = getattr(model(torch.tensor([tokens]), attention_mask=torch.tensor([mask]), **extra), field)[0]
                open(os.path.join(tmp, f"{v}.{name}.{i}.{mode}"), "wb").write(
                    logits.to(torch.float64).contiguous().numpy().astype("<f8").tobytes())
        except Exception as e:
            status.setdefault(name, {})[mode] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
json.dump(status, open(os.path.join(tmp, f"{v}.status.json"), "w"))
"""


def read_f64(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack(f"<{len(data) // 8}d", data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle", default=os.path.join(ROOT, "build/harness/kvc-model-oracle"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build/engine-models-encoders"), help="the set's folder")
    ap.add_argument("--set", default="encoders", choices=("encoders", "drawn-encoders"),
                    help="the encoders' checkpoints (default) or their draws (make_models.py --set)")
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--oracle-args", default="", help="more arguments for kvc-model-oracle (the mutants: '--causal')")
    ap.add_argument("--only", help="only the models whose folder name this regular expression finds")
    ap.add_argument("--release", action="append", default=[], help="only this pinned release (repeatable)")
    a = ap.parse_args()
    make = [sys.executable, os.path.join(ROOT, "engines/models/make_models.py")]
    names = [n for n in subprocess.run(make + ["--set", a.set, "--list"], check=True, capture_output=True,
                                       text=True).stdout.split() if not a.only or re.search(a.only, n)]
    if not names:
        ap.error(f"--only {a.only}: matches no model")
    subprocess.run(make + [a.models, "--set", a.set] + [x for n in names for x in ("--only", n)], check=True,
                   stdout=subprocess.DEVNULL)
    models = sorted(os.path.join(a.models, n) for n in names)
    tokens = ",".join(str(1 + (37 * i + 11) % 255) for i in range(a.tokens))
    target = ",".join(str(1 + (53 * i + 7) % 255) for i in range(a.tokens // 2 + 3))  # an encoder-decoder's
    masks = [[1] * a.tokens, [0] + [1] * (a.tokens - 2) + [0]]
    releases = sorted(p.split("requirements-")[1][:-4] for p in glob.glob(os.path.join(ROOT, "golden/requirements-*.txt")))
    releases = [v for v in releases if not a.release or v in a.release]
    rows, passed, failed, absent, checked = [], 0, 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        status = {}
        for v in releases:
            py = os.path.join(ROOT, f"golden/.venv-{v}/bin/python")
            if not os.path.exists(py):
                continue
            subprocess.run([py, "-c", RUN_RELEASE, tokens, target, json.dumps(masks), tmp, v, json.dumps(OUTPUTS),
                            json.dumps(SEQ2SEQ)] + models, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "engines", "transformers")))
            with open(os.path.join(tmp, f"{v}.status.json")) as f:
                status[v] = json.load(f)
        for mdir in models:
            model = os.path.basename(mdir)
            with open(os.path.join(mdir, "config.json")) as f:
                model_type = json.load(f)["model_type"]
            for i, mask in enumerate(masks):
                runs = {}  # the oracle's output per argument list (a release's own rule: RELEASE_ARGS)

                def oracle(v):
                    extra = RELEASE_ARGS[model_type](v) if model_type in RELEASE_ARGS else []
                    if tuple(extra) not in runs:
                        out = os.path.join(tmp, f"oracle.{i}.{len(runs)}")
                        inputs = ([target, out, "--source", tokens, "--source-real"] if model_type in SEQ2SEQ
                                  else [tokens, out, "--real"])
                        r = subprocess.run([a.oracle, mdir] + inputs + [",".join(map(str, mask))] + extra + a.oracle_args.split(),
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        runs[tuple(extra)] = (read_f64(out) if r.returncode == 0 else None, r)
                    return runs[tuple(extra)]
                for v in releases:
                    if v not in status:
                        continue
                    ours, r = oracle(v)
                    row = {"model": model, "padding": "first and last" if i else "none", "release": v}
                    st = status[v].get(model, {})
                    if "absent" in st:
                        row["absent"] = f"transformers {v} has no model_type {st['absent']}"
                        absent += 1
                        rows.append(row)
                        continue
                    checked += 1
                    if ours is None:
                        row["fail"] = "kvc-model-oracle: " + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
                    elif "exact" in st:
                        row["fail"] = "transformers --exact: " + st["exact"]
                    else:
                        for mode in ("exact", "plain"):
                            path = os.path.join(tmp, f"{v}.{model}.{i}.{mode}")
                            theirs = read_f64(path) if os.path.exists(path) else None
                            row[mode] = (max(abs(x - y) for x, y in zip(ours, theirs))
                                         if theirs is not None and len(theirs) == len(ours) else None)
                        row["ok"] = row["exact"] is not None and row["exact"] <= BOUND
                    passed += 1 if row.get("ok") else 0
                    failed += 0 if row.get("ok") else 1
                    rows.append(row)
    print(f"{'model':16} {'padding':15} {'release':8} {'vs exact float64':>17} {'vs as shipped':>14}")
    for r in rows:
        head = f"{r['model']:16} {r['padding']:15} {r['release']:8}"
        if "absent" in r:
            print(f"{head} ABSENT {r['absent']}")
        elif "fail" in r:
            print(f"{head} FAIL {r['fail']}")
        else:
            plain = f"{r['plain']:14.3e}" if r["plain"] is not None else f"{'n/a':>14}"
            exact = f"{r['exact']:17.3e}" if r["exact"] is not None else f"{'n/a':>17}"
            print(f"{head} {exact} {plain}{'' if r['ok'] else '  > 1e-10: FAIL'}")
    print(f"{passed} passed, {failed} failed, {absent} absent (a release without the family)")
    if not checked:
        print("no pinned transformers environment (bash golden/setup_env.sh VERSION): nothing checked", file=sys.stderr)
        return 77
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
