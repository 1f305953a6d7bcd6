#!/usr/bin/env python3
"""transformers' own no-cache forward of a model, in float64, as a reference for the engine checks.

    PY=golden/.venv-5.24.0/bin/python
    $PY engines/transformers/nocache_forward.py MODEL_DIR --tokens 3,1,4,1,5 --out FILE [--exact] [--audit]

Loads MODEL_DIR with attn_implementation="eager" (and experts_implementation="eager" where the
release has it: 5.x runs MoE experts through grouped_mm by default, which has no float64 kernel),
moves it to float64, runs one forward over the
whole token list with use_cache=False, and writes the logits [n, vocab] to FILE as raw little-endian
float64, row-major. Prints one JSON line: {"n", "vocab", "transformers", "exact", ...}.

Without --exact it is transformers as shipped, float32 islands included (RMSNorm, rotary cos/sin,
eager softmax: see exact64.py). With --exact those are patched at runtime to float64, so the forward
is float64 arithmetic throughout. --audit adds to the JSON the aten ops that produced float32
tensors during the forward (what is left of the islands).
"""
import argparse
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

import exact64  # a sibling: the script's folder is on sys.path


def _model_class(model_dir):
    """AutoModelForCausalLM, or for a multimodal model (no causal-LM class for its model_type) the class its
    config.architectures names: transformers' own multimodal class, run on text-only inputs."""
    config = transformers.AutoConfig.from_pretrained(model_dir)
    if type(config) in AutoModelForCausalLM._model_mapping:
        return AutoModelForCausalLM
    with open(os.path.join(model_dir, "config.json")) as f:  # as written: 4.57.6's composite config drops it
        arch = (json.load(f).get("architectures") or [None])[0]
    if not arch or not hasattr(transformers, arch):
        raise ValueError(f"{model_dir}: model_type {config.model_type!r} has no causal-LM class and config.architectures "
                         f"names no class of transformers {transformers.__version__} ({arch!r})")
    return getattr(transformers, arch)


def load_float64(model_dir, exact, **overrides):
    if hasattr(transformers.PreTrainedModel, "_check_and_adjust_experts_implementation"):
        overrides.setdefault("experts_implementation", "eager")
    model = _model_class(model_dir).from_pretrained(model_dir, attn_implementation="eager", **overrides)
    model = model.to(torch.float64).eval()
    summary = exact64.patch(model) if exact else None
    return model, summary


def forward(model, tokens, decode_from=0):
    """The logits of every position: one no-cache forward; or, decode_from > 0, a cached prefill of the first
    decode_from tokens and then one cached step per token (a recurrent layer's decode form: lara_mini's
    torch_recurrent_gated_delta_rule after its chunked prefill)."""
    if decode_from > 0:
        import inspect
        name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        rows = []
        with torch.no_grad():
            out = model(torch.tensor([tokens[:decode_from]], dtype=torch.long), use_cache=True)
            rows.append(out.logits[0])
            for t in tokens[decode_from:]:
                past = getattr(out, "cache", None) or out.past_key_values
                out = model(torch.tensor([[t]], dtype=torch.long), use_cache=True, **{name: past})
                rows.append(out.logits[0])
        return torch.cat(rows).to(torch.float64)
    extra = {}
    cfg = model.config
    if (getattr(cfg, "model_type", "") == "gemma4_text" and getattr(cfg, "num_kv_shared_layers", 0)
            and not getattr(cfg, "hidden_size_per_layer_input", 0)):
        # transformers 5.24.0's Gemma4TextModel._maybe_slice_kv_shared_inputs slices per_layer_inputs even when
        # the model has none (hidden_size_per_layer_input 0): a TypeError on every multi-token forward with KV
        # sharing. Asking for the hidden states turns that optimisation off; the logits are the same.
        extra["output_hidden_states"] = True
    with torch.no_grad():
        out = model(torch.tensor([tokens], dtype=torch.long), use_cache=False, **extra)
    return out.logits[0].to(torch.float64)


def run(model_dir, tokens, exact=False, audit=False, decode_from=0):
    model, summary = load_float64(model_dir, exact)
    if audit:
        logits, f32 = exact64.audit(lambda: forward(model, tokens, decode_from))
    else:
        logits, f32 = forward(model, tokens, decode_from), None
    return logits, summary, f32


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="file for the float64 logits (raw little-endian, [n, vocab])")
    ap.add_argument("--exact", action="store_true", help="patch transformers' float32 islands to float64")
    ap.add_argument("--audit", action="store_true", help="report aten ops that produced float32 tensors")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
    if not tokens:
        ap.error("--tokens is empty")
    logits, summary, f32 = run(a.model_dir, tokens, a.exact, a.audit)
    data = logits.contiguous().numpy().astype("<f8").tobytes()
    with open(a.out, "wb") as f:
        f.write(data)
    r = {"n": logits.shape[0], "vocab": logits.shape[1], "transformers": transformers.__version__,
         "exact": a.exact}
    if summary:
        r["patched"] = summary
    if f32 is not None:
        r["float32_ops"] = f32
    print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
