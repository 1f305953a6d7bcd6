#!/usr/bin/env python3
"""The masks an encoder's own forward hands its attention layers, recorded from the installed
transformers release, for the C++ reference's bidirectional masks (harness/include/kvconform/
bidirectional_masks.h) to be judged against: golden/encoder_masks/<release>.json.

    golden/.venv-X/bin/python golden/encoder_masks.py [--out FILE] [--check FILE]

For every encoder family of the release (modernbert, ultrabert, embedding_gemma2, openai_privacy_filter,
t5gemma's encoder, t5gemma2's text encoder, neomme's text model, where the release has the folder), a tiny randomly initialised model of that family
runs one whole-sequence forward per drawn case (sequence length, window, 2D attention_mask with left or
right padding or none) under sdpa and eager, and a forward pre-hook on each self-attention module
records the mask the module was given: that is the mask the model really uses, whichever builder made
it (4.x ModernBERT's own _update_attention_mask, 4.x T5Gemma's or_mask_function over the causal
sliding builder, 5.x masking_utils.create_bidirectional_sliding_window_mask, neomme's per layer from its per_layer_config; its
layers' records keep that window as config_sliding_window). Beside each layer's mask
the record keeps the module's own `sliding_window` attribute, which reaches only the flash-attention
kernels (window_size = (sliding_window - 1, sliding_window - 1)), so the reach flash attention would
use is on record next to the reach of the sdpa and eager masks.

Cases are drawn from a fixed seed: the same release gives the same bytes. --check FILE recomputes and
exits 1 naming the first difference (a stale or hand-edited file). Needs torch and transformers only.
"""
import argparse
import json
import os
import random
import sys

import torch

SEED = 52
CASES = 10  # per family and attention implementation
FAMILIES = ("modernbert", "ultrabert", "embedding_gemma2", "openai_privacy_filter", "t5gemma", "t5gemma2", "neomme")


def tiny(family, window, n_layers):
    """(model, {layer index: layer type}, config window) of a tiny randomly initialised encoder; None where
    the release lacks the family."""
    import transformers
    small = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=n_layers, num_attention_heads=2,
                 pad_token_id=0)
    if family == "modernbert":
        if not hasattr(transformers, "ModernBertConfig"):
            return None
        # local_attention is the whole window: keys within local_attention // 2 of the query
        cfg = transformers.ModernBertConfig(**small, local_attention=2 * window, global_attn_every_n_layers=2,
                                            max_position_embeddings=64)
        model = transformers.ModernBertModel(cfg)
    elif family == "ultrabert":
        if not hasattr(transformers, "UltrabertConfig"):
            return None
        cfg = transformers.UltrabertConfig(**small, sliding_window=window, max_position_embeddings=64,
                                           layer_types=["sliding_attention", "full_attention", "sliding_attention"][:n_layers])
        model = transformers.UltrabertModel(cfg)
    elif family == "embedding_gemma2":
        Config = getattr(transformers, "EmbeddingGemma2TextConfig", None)
        if Config is None:
            return None
        cfg = Config(**small, num_key_value_heads=1, head_dim=8, sliding_window=window, max_position_embeddings=64,
                     layer_types=["sliding_attention", "sliding_attention", "full_attention"][:n_layers])
        model = transformers.EmbeddingGemma2TextModel(cfg)
    elif family == "openai_privacy_filter":
        if not hasattr(transformers, "OpenAIPrivacyFilterConfig"):
            return None
        cfg = transformers.OpenAIPrivacyFilterConfig(**small, num_key_value_heads=1, head_dim=8, sliding_window=window,
                                                     num_local_experts=2, num_experts_per_tok=1,
                                                     max_position_embeddings=64)
        model = transformers.OpenAIPrivacyFilterModel(cfg)
    elif family == "t5gemma":
        from transformers.models.t5gemma import modeling_t5gemma, configuration_t5gemma
        cfg = configuration_t5gemma.T5GemmaModuleConfig(**small, num_key_value_heads=1, head_dim=8, sliding_window=window,
                                                        max_position_embeddings=64,
                                                        layer_types=["sliding_attention", "full_attention",
                                                                     "sliding_attention"][:n_layers])
        cfg.is_decoder = False
        cfg.dropout_rate = 0.0  # T5GemmaConfig sets it on its encoder; the encoder alone reads it
        cfg.attn_logit_softcapping = None  # sdpa refuses a soft cap; the masks do not depend on it
        model = modeling_t5gemma.T5GemmaEncoder(cfg)
    elif family == "t5gemma2":
        try:
            from transformers.models.t5gemma2 import modeling_t5gemma2, configuration_t5gemma2
        except ImportError:
            return None
        cfg = configuration_t5gemma2.T5Gemma2TextConfig(**small, num_key_value_heads=1, head_dim=8, sliding_window=window,
                                                        max_position_embeddings=64,
                                                        layer_types=["sliding_attention", "full_attention",
                                                                     "sliding_attention"][:n_layers])
        cfg.dropout_rate = 0.0
        # the text encoder alone (its vision tower and image tokens play no part in a text-only mask)
        model = modeling_t5gemma2.T5Gemma2TextEncoder(cfg, eoi_token_index=63)
    elif family == "neomme":
        if not hasattr(transformers, "NeoMMEConfig"):
            return None
        # Each sliding layer its own window (per_layer_config): the case's on layer 0, another on layer 2, so that a
        # reference reading the model's sliding_window for every layer is caught.
        windows = {0: window, 1: None, 2: window + 1 if window < 3 else window - 2}
        cfg = transformers.NeoMMEConfig(**small, num_key_value_heads=1, head_dim=16, embedding_rank=8, sliding_window=window,
                                        max_position_embeddings=64,
                                        layer_types=["sliding_attention", "full_attention", "sliding_attention"][:n_layers],
                                        per_layer_config={i: {"sliding_window": windows[i]} for i in range(n_layers)})
        model = transformers.NeoMMEModel(cfg)
    else:
        raise ValueError(f"encoder_masks: unknown family {family!r}")
    model.eval()
    types = layer_types(family, cfg, n_layers)
    return model, types, cfg


def layer_types(family, cfg, n):
    if getattr(cfg, "layer_types", None):
        return list(cfg.layer_types)[:n]
    if family == "openai_privacy_filter":
        return ["sliding_attention"] * n  # one bidirectional sliding mask for every layer
    # 4.x ModernBERT: every global_attn_every_n_layers-th layer (from layer 0) is global
    return ["full_attention" if i % cfg.global_attn_every_n_layers == 0 else "sliding_attention" for i in range(n)]


def self_attention_modules(model):
    """The self-attention modules in layer order (the encoder's layers' attention children)."""
    layers = getattr(model, "layers", None)
    if layers is None:
        raise RuntimeError(f"{type(model).__name__} has no .layers")
    out = []
    for layer in layers:
        att = [m for name, m in layer.named_children() if name in ("attn", "self_attn")]
        if len(att) != 1:
            raise RuntimeError(f"{type(layer).__name__}: expected one attn/self_attn child, found "
                               f"{[n for n, _ in layer.named_children()]}")
        out.append(att[0])
    return out


def allowed_of(mask, layer_type, module):
    """(allowed rows as strings per batch row, masked value or None, skipped) from the mask a module got."""
    if mask is None:
        return None, None, True
    if mask.dtype == torch.bool:
        allowed, masked = mask, None
    else:
        allowed = mask == 0
        values = mask[~allowed].unique().tolist()
        if len(values) > 1:
            raise RuntimeError(f"an additive mask with several masked values {values}")
        masked = values[0] if values else None
    if allowed.dim() != 4 or allowed.shape[1] != 1:
        raise RuntimeError(f"mask of shape {tuple(allowed.shape)}, expected [batch, 1, q, kv]")
    rows = [["".join("1" if x else "0" for x in row) for row in allowed[b, 0].tolist()] for b in range(allowed.shape[0])]
    return rows, masked, False


def record_case(family, impl, length, window, padding, n_layers):
    built = tiny(family, window, n_layers)
    if built is None:
        return None
    model, types, cfg = built
    model.config._attn_implementation = impl
    for m in model.modules():  # sub-configs (t5gemma) read their own
        if hasattr(m, "config"):
            m.config._attn_implementation = impl
    seen = []

    def hook(module, args, kwargs):
        mask = kwargs.get("attention_mask")
        if family == "modernbert" and "sliding_window_mask" in kwargs:
            # 4.x: the attention function picks the window mask on local layers (local_attention != (-1, -1))
            mask = kwargs["sliding_window_mask"] if tuple(module.local_attention) != (-1, -1) else mask
        seen.append((mask, getattr(module, "sliding_window", None)))
    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in self_attention_modules(model)]
    g = torch.Generator().manual_seed(length * 1000 + window)
    ids = torch.randint(1, 64, (len(padding), length), generator=g)
    am = torch.tensor([[0] * lp + [1] * (length - lp - rp) + [0] * rp for lp, rp in padding], dtype=torch.long)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=am)
    for h in handles:
        h.remove()
    if len(seen) != n_layers:
        raise RuntimeError(f"{len(seen)} self-attention calls for {n_layers} layers")
    layers = []
    for li, ((mask, module_window), lt) in enumerate(zip(seen, types)):
        rows, masked, skipped = allowed_of(mask, lt, None)
        layers.append({"layer_type": lt, "module_sliding_window": module_window, "skipped": skipped,
                       "masked_value": masked, "allowed": rows})
        if family == "neomme":  # its layer's own window (per_layer_config), which its mask builder reads
            layers[-1]["config_sliding_window"] = cfg.per_layer_config[li].sliding_window
    return {"family": family, "attn_implementation": impl, "length": length,
            # neomme's is per layer (each layer's record keeps its own): the case's is its layer 0's
            "config_sliding_window": (cfg.local_attention // 2 if family == "modernbert" else window if family == "neomme"
                                      else cfg.sliding_window),
            "config_local_attention": getattr(cfg, "local_attention", None),
            "padding": [list(p) for p in padding], "dtype": "float32", "layers": layers}


def draw_cases():
    """The drawn cases, the same for every release: (length, window, [(left, right) padding per row])."""
    rng = random.Random(SEED)
    out = []
    for i in range(CASES):
        length = rng.randint(1, 12)
        window = rng.randint(1, 6)
        kind = ("none", "left", "right", "both")[i % 4]
        rows = []
        for _ in range(2):
            lp = rng.randint(0, length - 1) if kind in ("left", "both") and length > 1 else 0
            rp = rng.randint(0, length - 1 - lp) if kind in ("right", "both") and length - lp > 1 else 0
            rows.append((lp, rp))
        out.append((length, window, rows))
    # A window wider than the sequence (the sdpa skip rule) and a window of one
    out += [(5, 8, [(0, 0), (0, 0)]), (7, 1, [(0, 0), (2, 0)])]
    return out


def dump():
    from importlib.metadata import version
    torch.manual_seed(0)
    torch.set_num_threads(1)
    records = []
    for family in FAMILIES:
        for impl in ("sdpa", "eager"):
            for length, window, padding in draw_cases():
                try:
                    rec = record_case(family, impl, length, window, padding, 3)
                except Exception as e:  # this case's failure, named, not the run's
                    rec = {"family": family, "attn_implementation": impl, "length": length,
                           "config_sliding_window": window, "padding": [list(p) for p in padding],
                           "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
                if rec is None:
                    break  # the release lacks the family
                records.append(rec)
    return {"format": "kvconform-encoder-masks 1", "transformers": version("transformers"), "seed": SEED,
            "cases": records}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write here (default: stdout)")
    ap.add_argument("--check", help="recompute and compare with this file; exit 1 where it differs")
    a = ap.parse_args(argv)
    text = json.dumps(dump(), indent=1, sort_keys=True) + "\n"
    if a.check:
        with open(a.check) as f:
            old = f.read()
        if old != text:
            for i, (x, y) in enumerate(zip(old.splitlines(), text.splitlines())):
                if x != y:
                    print(f"encoder_masks: {a.check} line {i + 1} differs from the installed release's masks:\n"
                          f"  file: {x.strip()}\n  now:  {y.strip()}", file=sys.stderr)
                    break
            else:
                print(f"encoder_masks: {a.check} differs in length from the installed release's masks", file=sys.stderr)
            return 1
        print(f"encoder_masks: {a.check} agrees with the installed release")
        return 0
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".tmp", "w") as f:
            f.write(text)
        os.replace(a.out + ".tmp", a.out)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
