#!/usr/bin/env python3
"""Checks the tiny zoo against the running transformers release (run it with each golden venv's python):

    golden/.venv-5.24.0/bin/python engines/models/check_models.py MODELS_DIR [--only NAME]

Per model, one JSON line: whether from_pretrained loaded every weight (missing / unexpected /
mismatched keys, and any "newly initialized" warning), the layer_types, sliding_window and rope
frequencies the release read, the logit spread, and how much the logits at position 20 move when the
window is one larger (sliding_window W+1: must be >= 1e-3) and when the Gemma2 soft-capping is off.
Exit status 1 when a check fails.
"""
import argparse
import io
import json
import logging
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

TOKENS = [(7 * i * i + 3 * i + 5) % 253 + 3 for i in range(24)]  # fixed, no special tokens
POS = 20


def logits(model_dir, **overrides):
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", **overrides).to(torch.float64).eval()
    with torch.no_grad():
        return model(torch.tensor([TOKENS]), use_cache=False).logits[0]


def rope_of(cfg):
    out = {}
    for k in ("rope_theta", "rope_local_base_freq", "rope_parameters", "rope_scaling"):
        if hasattr(cfg, k):
            out[k] = getattr(cfg, k)
    return out


def check(model_dir):
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    tlog = logging.getLogger("transformers")
    tlog.addHandler(handler)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(model_dir, output_loading_info=True, attn_implementation="eager")
    finally:
        tlog.removeHandler(handler)
    cfg = model.config
    warn = log.getvalue()
    r = {
        "model": os.path.basename(model_dir.rstrip("/")),
        "transformers": transformers.__version__,
        "class": type(model).__name__,
        "loading_info": {k: sorted(map(str, v)) for k, v in info.items() if v},
        "newly_initialized_warning": "newly initialized" in warn or "not initialized" in warn,
        "layer_types": getattr(cfg, "layer_types", None),
        "sliding_window": cfg.sliding_window,
        "rope": rope_of(cfg),
        "tied": model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
    }
    base = logits(model_dir)
    r["logit_std_at_20"] = round(float(base[POS].std()), 3)
    r["logit_range_at_20"] = [round(float(base[POS].min()), 3), round(float(base[POS].max()), 3)]
    w = cfg.sliding_window
    r["window_plus_1_diff_at_20"] = float((logits(model_dir, sliding_window=w + 1)[POS] - base[POS]).abs().max())
    r["window_minus_1_diff_at_20"] = float((logits(model_dir, sliding_window=w - 1)[POS] - base[POS]).abs().max())
    if getattr(cfg, "attn_logit_softcapping", None):
        r["attn_softcap_off_diff"] = float((logits(model_dir, attn_logit_softcapping=None) - base).abs().max())
    if getattr(cfg, "final_logit_softcapping", None):
        r["final_softcap_off_diff"] = float((logits(model_dir, final_logit_softcapping=None) - base).abs().max())
    ok = (not r["loading_info"] and not r["newly_initialized_warning"]
          and r["window_plus_1_diff_at_20"] >= 1e-3 and r["window_minus_1_diff_at_20"] >= 1e-3)
    r["ok"] = ok
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--only", action="append")
    a = ap.parse_args()
    torch.set_num_threads(1)
    bad = 0
    for name in sorted(os.listdir(a.models_dir)):
        if a.only and name not in a.only:
            continue
        r = check(os.path.join(a.models_dir, name))
        bad += not r["ok"]
        print(json.dumps(r), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
