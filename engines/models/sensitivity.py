#!/usr/bin/env python3
"""Does moving a model's window by one token move its logits far above the engine checks' bound?

    python3 engines/models/sensitivity.py [--oracle build/harness/kvc-model-oracle] [--min 0.01] MODEL_DIR...
    python3 engines/models/sensitivity.py --draw OUT_DIR [--family F ...] [--seed S] [--tries 4]

A drawn model judges windows only if a window one token larger changes its logits: for each model,
the model oracle (float64) runs 2W + 2 tokens with its own windows (or chunks) and with each one a
token larger, and the largest |logit difference| must reach --min (default 1e-2: a hundred times the
engine checks' 1e-4 floor) and ten times the bound the model's own float32 error gives (the same
tokens in float32: bound = max(1e-4, 10 x that error), the engine checks' rule). One line per model: OK, INSENSITIVE (such a model must not judge a
window: redraw it) or NO-WINDOW (no sliding or chunked layer: nothing to judge). Exit 1 if any model is
INSENSITIVE, 2 on bad input. Standard library only.

A model with MoE layers must also make its expert constants act over the same tokens: routing each
token to one expert more (and one fewer, where it takes more than one), dropping the renormalisation
of the chosen weights (where the model renormalises), dropping the shared expert (where it has one) and
dropping step3p7's SwiGLU bounds (where it has them) must each move the logits by the same amount as the window must; a constant that does not is named
(INERT: the draw cannot tell that rule apart, redraw it). A hybrid with convolution layers (lfm3) must
likewise make its convolution's oldest tap act (each conv kernel one tap shorter, the state a row short)
and its attention gate (where it has one: the gate left out); a gemma3n model its per-layer inputs, LAuReL branch,
activation sparsity (where a layer has it) and AltUp's active stream (each left out, or another stream active); one with RG-LRU blocks (recurrent_gemma) its
convolution's oldest tap and the recurrence's decay (lru_decay_scale 0); an nGPT model (dory) its L2 norms, residual
interpolations, learned scales, sub-norms and its looped section's entries (ngpt_mutants).

--draw writes the wide draws (families.draw_wide) into OUT_DIR and redraws each INSENSITIVE one: index
0, 1, ... of the seed until a draw is OK or NO-WINDOW (at most --tries), printing which index each
family keeps and removing the insensitive draws' folders; a family with no sensitive draw in --tries
is reported and exits 1. make_models.py --set wide writes the set the same way.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(oracle, model, tokens, out, delta, extra=()):
    r = subprocess.run([oracle, model, ",".join(map(str, tokens)), out] + (["--span-delta", str(delta)] if delta else [])
                       + list(extra), capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or f"exit {r.returncode}")
    with open(out, "rb") as f:
        data = f.read()
    return json.loads(r.stdout), struct.unpack(f"<{len(data) // 8}d", data)


# The engine checks' same-dtype-reference rule (harness/include/kvconform/engine/check.h kEngineRule,
# docs/engines.md): bound = max(floor, factor x the float32 forward's error against float64).
RULE_FACTOR, RULE_FLOOR = 10, 1e-4


def check(oracle, model, out, need):
    """("OK" | "INSENSITIVE" | "INERT" | "NO-WINDOW", the line to print). The window's move must reach
    `need` and ten times the bound the model's own float32 error gives (a model that float32 rounding
    already moves by whole units judges no window); so must each expert constant's of a MoE model
    (INERT where one does not), over the same tokens (2 * 8 + 2 where the model has no window)."""
    name = os.path.basename(os.path.normpath(model))
    with open(os.path.join(model, "config.json")) as f:
        seq2seq = bool(json.load(f).get("is_encoder_decoder"))  # the oracle decodes it against a source (--source)
    info, _ = run(oracle, model, [1], out, 0, ["--source", "1"] if seq2seq else [])
    constants = moe_mutants(info) if info.get("moe_layers") else []
    constants += hybrid_mutants(info) + gemma3n_mutants(info) + ngpt_mutants(info) + encoder_mutants(info)
    if not info["local_layers"] and not constants:
        return "NO-WINDOW", f"{name}: NO-WINDOW (no sliding or chunked layer)"
    # An encoder-decoder decodes the tokens against the same tokens as its source: the longer of its spans sizes them.
    span = max(info["span"], info.get("encoder_span", 0)) or 8
    tokens = [1 + (37 * i + 11) % 255 for i in range(2 * span + 2)]
    source = ["--source", ",".join(map(str, tokens))] if seq2seq else []
    _, base = run(oracle, model, tokens, out, 0, source)
    _, single = run(oracle, model, tokens, out, 0, source + ["--float32"])
    error = max(abs(x - y) for x, y in zip(base, single))
    needed = max(need, 10 * max(RULE_FLOOR, RULE_FACTOR * error))
    wider = "a reach one key wider on each side" if info.get("bidirectional") else "a window of W+1"
    if info["local_layers"]:
        _, moved = run(oracle, model, tokens, out, 1, source)
        diff = max(abs(x - y) for x, y in zip(base, moved))
        verdict = "OK" if diff >= needed else "INSENSITIVE"
        line = (f"{name}: {verdict} (W={span}, {len(tokens)} tokens: {wider} moves the logits by {diff:.3g}, "
                f"float32 by {error:.3g}, needed {needed:.3g})")
    else:
        verdict = "NO-WINDOW"
        line = f"{name}: NO-WINDOW (no sliding or chunked layer; {len(tokens)} tokens, float32 by {error:.3g}, needed {needed:.3g})"
    if constants:
        inert, moves = [], []
        for label, args in constants:
            _, other = run(oracle, model, tokens, out, 0, source + args)
            d = max(abs(x - y) for x, y in zip(base, other))
            moves.append(f"{label} moves them by {d:.3g}")
            if d < needed:
                inert.append(label)
        experts = f"experts ({info['top_k']} of {info['experts']})" if info.get("moe_layers") else ""
        what = (f"encoder-decoder ({info['encoder_local_layers']} local encoder layers reaching {info['encoder_span']}, "
                f"{info['local_layers']} local decoder layers)" if info.get("seq2seq")
                else f"encoder ({info['local_layers']} local layers{', ' + experts if experts else ''})" if info.get("bidirectional")
                else f"hybrid ({info['delta_layers']} gated DeltaNet layers of {info['conv_kernel']} taps) and experts "
                f"({info['top_k']} of {info['experts']})" if info.get("delta_layers")
                else f"experts ({info['top_k']} of {info['experts']})" if info.get("moe_layers")
                else f"hybrid ({info['conv_layers'] or info.get('recurrent_layers', 0)} "
                     f"{'conv' if info['conv_layers'] else 'RG-LRU'} layers of {info['conv_kernel']} taps)"
                if info.get("conv_layers") or info.get("recurrent_layers")
                else f"nGPT ({info['loop_passes']} passes of its looped section)" if info.get("ngpt")
                else f"gemma3n ({info['altup_inputs']} AltUp streams, {info['sparse_layers']} sparse layers)")
        line += f"; {what}: {', '.join(moves)}"
        if inert:
            line = line.replace(f"{name}: {verdict} ", f"{name}: INERT ", 1) + f"; inert: {', '.join(inert)}"
            verdict = "INERT"
    return verdict, line


def moe_mutants(info):
    """The expert constants a MoE model must make act: (label, kvc-model-oracle arguments)."""
    out = [("top_k+1", ["--top-k-delta", "1"])] if info["top_k"] < info["top_k_max"] else []
    if info["top_k"] > 1:
        out.append(("top_k-1", ["--top-k-delta", "-1"]))
    if info.get("renormalize"):
        out.append(("renormalisation dropped", ["--no-renormalize"]))
    if info.get("shared_expert"):
        out.append(("shared expert dropped", ["--no-shared-expert"]))
    if info.get("expert_limits"):
        out.append(("expert SwiGLU bounds dropped", ["--no-expert-limits"]))
    return out


def hybrid_mutants(info):
    """The layer constants beside the experts a model must make act (a hybrid's convolution and attention gate,
    step3p7's SwiGLU bound on the dense MLP and shared expert): (label, kvc-model-oracle arguments)."""
    out = []
    if (info.get("conv_layers") or info.get("recurrent_layers") or info.get("delta_layers")) and info.get("conv_kernel", 0) > 1:
        out.append(("oldest conv tap dropped", ["--conv-taps-dropped", "1"]))
    if info.get("recurrent_layers"):
        out.append(("RG-LRU decay off", ["--lru-decay-off"]))
    if info.get("delta_layers"):  # lara_mini's gated DeltaNet blocks: the delta rule's decay and the output norm's gate
        out.extend([("delta rule decay off", ["--delta-decay-off"]), ("delta output gate dropped", ["--no-delta-gate"])])
    if info.get("conv_layers") and info.get("attention_gate"):
        out.append(("attention gate dropped", ["--no-attention-gate"]))
    if info.get("mlp_limits"):  # step3p7's bound on the dense MLP and shared expert
        out.append(("MLP SwiGLU bounds dropped", ["--no-mlp-limits"]))
    return out


def gemma3n_mutants(info):
    """gemma3n's constants a model must make act: its per-layer inputs, LAuReL branch, activation sparsity (where a
    layer has it) and AltUp's active stream (another stream in its place)."""
    out = []
    if info.get("per_layer_input"):
        out.append(("per-layer inputs dropped", ["--no-per-layer-input"]))
    if info.get("laurel_rank"):
        out.append(("LAuReL dropped", ["--no-laurel"]))
    if info.get("sparse_layers"):
        out.append(("activation sparsity dropped", ["--no-activation-sparsity"]))
    if info.get("altup_inputs", 0) > 1:
        out.append(("another active AltUp stream", ["--altup-active", str(1 if info.get("altup_active", 0) == 0 else 0)]))
    return out


def ngpt_mutants(info):
    """dory's nGPT constants a model must make act: each learned scale (sqk, s_gate, suv, logit_scale) left out, the L2
    norms read as RMS norms, each residual interpolation an add, each sub-norm left out, and the looped section's entry
    (norm(x) + its input) left out. A sub-norm's scale passes through its linear layer into the post norm, which erases
    it: it acts by the layer's bias (and its epsilon) only, so it is asked of a model with that bias. Likewise the first
    pass's entry, 2 norm(x), is erased by its first layer's input norm: the entries are asked of two passes or more."""
    if not info.get("ngpt"):
        return []
    out = [(label, [flag]) for label, flag in (
        ("L2 norms as RMS", "--rms-norms"), ("residual interpolation as an add", "--residual-add"),
        ("query scale dropped", "--no-query-scale"), ("gate scale dropped", "--no-gate-scale"),
        ("MLP scales dropped", "--no-mlp-scale"), ("logit scales dropped", "--no-logit-scale"))]
    if info.get("o_bias"):
        out.append(("attention sub-norm dropped", ["--no-attention-sub-norm"]))
    if info.get("mlp_bias"):
        out.append(("MLP sub-norm dropped", ["--no-mlp-sub-norm"]))
    if info.get("loop_passes", 0) > 1:
        out.append(("loop entries dropped", ["--no-loop-entries"]))
    return out


def encoder_mutants(info):
    """An encoder's and an encoder-decoder's constants a model must make act: its bidirectionality (the encoder read
    causally), an encoder-decoder's encoder reach (one key wider on each side: its window is the decoder's, moved by
    --span-delta with it), its cross-attention's reach over the whole source (windowed to the decoder's sliding_window
    on its sliding layers: the oracle's --cross-window edits t5gemma's cross_attn, which t5gemma2's merged attention
    has not) and t5gemma2's merged cross-attention (the source's keys in a softmax apart); neomme's value embeddings,
    exclusive self-attention, initial-state mix and output gate, each left out."""
    seq2seq, merged = info.get("seq2seq"), info.get("merged_cross_attention")
    encoder = info.get("bidirectional") or seq2seq
    asked = (
        (encoder, "encoder read causally", ["--causal"]),
        (seq2seq and info.get("encoder_local_layers"), "encoder reach one key wider", ["--encoder-reach-delta", "1"]),
        (seq2seq and info["local_layers"] and not merged, "cross-attention windowed", ["--cross-window"]),
        (merged, "merged cross-attention's softmax apart", ["--cross-softmax-apart"]),
        (info.get("value_embed_layers"), "value embeddings dropped", ["--no-value-embeddings"]),
        (info.get("exclusive_attention"), "exclusive attention dropped", ["--no-exclusive-attention"]),
        (info.get("initial_mix"), "initial mix dropped", ["--no-initial-mix"]),
        (info.get("bidirectional") and info.get("attention_gate"), "output gate dropped", ["--no-attention-gate"]))
    return [(label, args) for has, label, args in asked if has]


def wide_name(family, seed, index):
    return f"wide-{family.replace('_text', '').replace('_', '')}-{seed}-{index}"


def write_wide(out_dir, oracle, seed=0, tries=4, need=1e-2, only=None, log=print):
    """Writes the wide set into out_dir, each family's draw 0, 1, ... of the seed until one is OK or
    NO-WINDOW (at most `tries`); an INSENSITIVE draw's folder is removed, so the folder holds only
    models that may judge a window. Returns the families with no sensitive draw. The one writer of
    the wide set (make_models.py --set wide and --draw below)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import shutil
    import families
    import make_models
    if not os.access(oracle, os.X_OK):
        raise RuntimeError(f"the wide set checks every draw with the model oracle, and {oracle} is not built "
                           "(cmake --build build, or give --oracle)")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in only or families.DRAWN_FAMILIES:
            for index in range(tries):
                name = wide_name(family, seed, index)
                d, _ = make_models.write(out_dir, name, families.draw_wide(family, seed, index))
                verdict, line = check(oracle, d, os.path.join(tmp, "logits"), need)
                log(line)
                if verdict not in ("INSENSITIVE", "INERT"):
                    log(f"{family}: keeps draw {index}")
                    break
                shutil.rmtree(d)
            else:
                log(f"{family}: no sensitive draw in {tries} tries")
                failed.append(family)
    return failed


def redraw(a):
    return 1 if write_wide(a.draw, a.oracle, a.seed, a.tries, a.min, a.family, lambda line: print(line, flush=True)) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--oracle", default=os.path.join(ROOT, "build/harness/kvc-model-oracle"))
    ap.add_argument("--min", type=float, default=1e-2)
    ap.add_argument("--draw", help="write the wide draws into this folder, redrawing insensitive ones")
    ap.add_argument("--family", action="append", help="with --draw: only this family (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tries", type=int, default=4)
    a = ap.parse_args()
    if not a.models and not a.draw:
        ap.error("give MODEL_DIRs or --draw OUT_DIR")
    insensitive = 0
    with tempfile.TemporaryDirectory() as tmp:
        if a.draw:
            try:
                return redraw(a)
            except (RuntimeError, ValueError, KeyError) as e:
                print(f"ERROR {e}", file=sys.stderr)
                return 2
        out = os.path.join(tmp, "logits")
        for model in a.models:
            try:
                verdict, line = check(a.oracle, model, out, a.min)
            except (RuntimeError, ValueError, KeyError) as e:
                print(f"{os.path.basename(os.path.normpath(model))}: ERROR {e}", file=sys.stderr)
                return 2
            insensitive += verdict in ("INSENSITIVE", "INERT")
            print(line, flush=True)
    return 1 if insensitive else 0


if __name__ == "__main__":
    sys.exit(main())
