#!/usr/bin/env python3
"""Writes kvconform's tiny sliding-window model zoo as Hugging Face checkpoints.

    python3 engines/models/make_models.py OUT_DIR [--set zoo|families|encoders|drawn|drawn-encoders|vllm|wide]
                                          [--only NAME] [--list]
    python3 engines/models/make_models.py --draw FAMILY:SEED:INDEX      # one drawn model's recipe, as JSON
    python3 engines/models/make_models.py OUT_DIR --recipe FILE|-        # write the checkpoint of a recipe
    python3 engines/models/make_models.py --serve                        # draws and writes on request (below)

For each model, OUT_DIR/<name>/config.json, OUT_DIR/<name>/model.safetensors (float32 weights) and a
tokenizer over the model's vocabulary that common engines load (tokenizer.json, tokenizer_config.json:
below). Standard library only, and deterministic: every weight comes from a SHA-256 counter
stream keyed by the model's name and the tensor's name, so every machine, Python version and run
writes the same bytes (no dependence on random's algorithms or on dict order).

--set zoo (the default) is the engine zoo below, the models every engine check runs; --set families
is the family registry's checkpoints and --set drawn two models per family drawn from its config
space (engines/models/families.py), both for the oracle's agreement with transformers only; --set vllm
draws two models per family with head_dim 32 or 64, the sizes vLLM's CPU attention takes; --set
wide one model per family at real window sizes (128 to 4096), head_dim 16 to 256 and one of three
weight distributions (families.draw_wide), each checked with the model oracle (--oracle) and redrawn
where a window one token wider does not move its logits (engines/models/sensitivity.py). --set encoders is
the encoders' and encoder-decoders' checkpoints and --set drawn-encoders two draws per encoder family
(families.ENCODER_FAMILIES), both for encoder_agreement.py and sensitivity.py only: no engine runs an encoder.

A recipe is what a checkpoint is written from: {"name": ..., "layout": ..., "config": {...}}, the
name keying the weight streams, the layout naming the tensor set (the family's), the config the whole
config.json. `kvconform engine --plans models` draws recipes, shrinks their configs and writes each
recipe's checkpoint; a shrunk (model, plan) pair keeps its recipe, so it replays anywhere. It asks one
--serve process for all of them (a model campaign draws and writes hundreds, and each start of this
script is about 0.15 s of CPU): requests in the engine protocol's framing (a u32 little-endian length,
then a JSON header), answered as --draw and --recipe would answer them:
  {"op": "hello"}                                          -> {"status": "ok"}
  {"op": "draw", "spec": "F:SEED:I", "head_dims": "8,16"}  -> {"status": "ok", "recipe": {...}}
  {"op": "write", "dir": OUT_DIR, "recipe": TEXT}          -> {"status": "ok", "line": "NAME\tDIR\tsha256(...)=..."}
A request that fails is answered {"status": "error", "error": the one-shot command's message}, and the
server goes on; it ends at the end of its input.

The zoo (docs/engines.md, "The tiny models"):
  gemma2-w4            gemma2, layers sliding/full/sliding/full, window 4, soft-capping, query_pre_attn_scalar != head_dim, tied
  gemma3-w3            gemma3_text, 6 layers (5 sliding : 1 full, the default pattern), window 3, rope 1e6 / local 1e4, q/k norms
  gemma3-irregular-w4  gemma3_text, layers sliding/full/full/sliding, window 4
  mistral-w5           mistral, 3 layers all sliding, window 5, untied lm_head

Weight scale (why these numbers). The conformance checks need two things from random weights:
  * logits with a spread of several units, so a wrong cache shows as a large logit error rather
    than a near-uniform distribution: the final hidden state is RMS-normalised (RMS ~1), so a logit
    is a dot product of 64 terms; embedding/lm_head entries uniform in +-EMBED (std EMBED/sqrt(3))
    give logit std ~ sqrt(64) * EMBED / sqrt(3); EMBED = 0.8 gives std ~3.7 (several units, and
    in gemma2 large enough for final_logit_softcapping = 8 to bend them measurably).
  * peaked attention, so one token more or less in a window moves the output far more than float32
    rounding: with uniform +-PROJ projection entries on RMS-normalised inputs, q and k entries have
    std ~ sqrt(64) * PROJ / sqrt(3) = 2.3 (PROJ = 0.5) and a raw score over head_dim 16 has std
    ~ 4 * 2.3^2 = 21, times the 1/sqrt(16) (or 1/sqrt(query_pre_attn_scalar)) scaling ~5: softmax
    weights far from uniform. Gemma3 normalises q and k (q_norm/k_norm), which would bring the score
    std back to ~1; its q_norm/k_norm weights are set around +1.0 (Gemma's norm multiplies by
    1 + weight, so ~2x) for scores of std ~4. attn_logit_softcapping = 10 in gemma2 bends those.
  * a residual stream that does not blow up: o_proj/down_proj use the smaller +-OUT = 0.15, and
    the other norm weights are near their identity (Gemma: 0 +- 0.2, Mistral: 1 +- 0.2).
engines/models/check_models.py (or the check in the report) measures the window sensitivity: the
logits at position 20 with sliding_window W and W+1 differ by much more than 1e-3.
"""
import argparse
import fcntl
import hashlib
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 256, 64, 4, 2, 16, 128
EMBED, PROJ, OUT, NORM = 0.8, 0.5, 0.15, 0.2
BIAS = 0.3  # q/k/v/o biases where the family has them: shifts of the order of a projection's entries

COMMON = {
    "vocab_size": VOCAB,
    "hidden_size": HIDDEN,
    "intermediate_size": INTER,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "head_dim": HEAD_DIM,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 4096,
    "torch_dtype": "float32",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "rope_scaling": None,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "initializer_range": 0.02,
    "use_cache": True,
}

S, F = "sliding_attention", "full_attention"

# (name, family, config overrides). rope: transformers 4.x reads rope_theta (and Gemma3's
# rope_local_base_freq); 5.x reads rope_parameters, and converts the flat keys when rope_parameters
# is absent. Both are written, consistent, so each release reads the same frequencies.
MODELS = {
    "gemma2-w4": ("gemma2", {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "num_hidden_layers": 4,
        "layer_types": [S, F, S, F],
        "sliding_window": 4,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_act": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 32,
        "attn_logit_softcapping": 10.0,
        "final_logit_softcapping": 8.0,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": True,
    }),
    # The smallest window a sliding layer has (a query and one earlier key), on two layers.
    "gemma2-w2": ("gemma2", {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "num_hidden_layers": 2,
        "layer_types": [S, F],
        "sliding_window": 2,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_act": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 32,
        "attn_logit_softcapping": 10.0,
        "final_logit_softcapping": 8.0,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": True,
    }),
    "gemma3-w3": ("gemma3", {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "layer_types": [S, S, S, S, S, F],
        "sliding_window_pattern": 6,
        "sliding_window": 3,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": HEAD_DIM,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "tie_word_embeddings": True,
    }),
    "gemma3-irregular-w4": ("gemma3", {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "num_hidden_layers": 4,
        "layer_types": [S, F, F, S],
        "sliding_window_pattern": 6,
        "sliding_window": 4,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": HEAD_DIM,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "tie_word_embeddings": True,
    }),
    "mistral-w5": ("mistral", {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "num_hidden_layers": 3,
        "sliding_window": 5,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": False,
    }),
}


def stream(model, tensor, n, lo, hi):
    """n float32-representable values uniform in [lo, hi), from SHA-256(model/tensor/counter)."""
    out = []
    key = f"kvconform/{model}/{tensor}/".encode()
    counter = 0
    while len(out) < n:
        block = hashlib.sha256(key + str(counter).encode()).digest()
        counter += 1
        for (u,) in struct.iter_unpack("<I", block):
            out.append(lo + (hi - lo) * (u / 4294967296.0))
    return out[:n]


def normal_stream(model, tensor, n, std):
    """n values normal(0, std) from the same SHA-256 stream (Box-Muller on pairs of uniforms)."""
    import math
    u = stream(model, tensor, 2 * n, 0.0, 1.0)
    return [std * math.sqrt(-2 * math.log(1 - u[2 * i])) * math.cos(2 * math.pi * u[2 * i + 1]) for i in range(n)]


def tensors(name, family, cfg):
    """{tensor name: (shape, [values])} for the model. cfg["_weights"] (drawn models) picks the
    distribution: "zoo" (the default, above), "hf-init" (transformers' own initialisation: normal(0,
    initializer_range) for projections and embeddings, norms, scalars and biases at identity or zero)
    or "norms-away" (the zoo's, with every norm weight three times as far from identity)."""
    if family in families.MULTIMODAL_TEXT_LAYOUT:
        # The text decoder's tensors, under the multimodal class's prefix (the towers are not written).
        # The head's tie as the class reads it: the outer config's where it says one (step3p7 reads no other).
        text = {**cfg["text_config"], "tie_word_embeddings": cfg.get("tie_word_embeddings",
                                                                     cfg["text_config"].get("tie_word_embeddings"))}
        text = tensors(name, families.MULTIMODAL_TEXT_LAYOUT[family], text)
        return {(k if k.startswith("lm_head.") else "model.language_model." + k[len("model."):]): v for k, v in text.items()}
    if family in families.WRAPPERS:
        # A wrapper's decoder tensors under the class's prefixes (the towers are not written).
        _, layout, _, (prefix, head) = families.WRAPPERS[family]
        text = tensors(name, families.DECODER_LAYOUT.get(layout, layout), cfg["text_config"])
        return {(head + k if k.startswith("lm_head.") else prefix + k[len("model."):]): v for k, v in text.items()}
    t = {}
    style = cfg.get("_weights", "zoo")
    gemma = family in ("gemma2", "gemma3", "vaultgemma", "muse_glimmer_text", "muse_spark_text", "recurrent_gemma",
                       "step3p5", "t5gemma", "t5gemma2")  # norm weight as 1 + w

    def put(key, shape, lo, hi):
        n = 1
        for d in shape:
            n *= d
        norm = "norm" in key or key.endswith("layer_scalar")
        if style == "hf-init":
            if norm:
                identity = 0.0 if gemma and not key.endswith("layer_scalar") else 1.0  # gemma's 1 + w norms sit at w = 0
                t[key] = (list(shape), [identity] * n)
            elif key.endswith("bias") or key.endswith("sinks"):
                t[key] = (list(shape), [0.0] * n)
            else:
                t[key] = (list(shape), normal_stream(name, key, n, cfg.get("initializer_range", 0.02)))
            return
        if style == "norms-away" and norm:
            mid = (lo + hi) / 2
            lo, hi = mid - 3 * (mid - lo), mid + 3 * (hi - mid)
        t[key] = (list(shape), stream(name, key, n, lo, hi))

    def mlp(prefix, inter):
        put(prefix + "gate_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
        put(prefix + "up_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
        put(prefix + "down_proj.weight", (HIDDEN, inter), -OUT, OUT)

    norm_lo, norm_hi = (-NORM, NORM) if gemma else (1 - NORM, 1 + NORM)
    if family in ("modernbert_decoder", "modernbert"):
        modernbert(put, cfg, family == "modernbert")
        return t
    if family == "ultrabert":
        ultrabert(put, cfg)
        return t
    if family == "embedding_gemma2_text":
        embedding_gemma2(put, cfg)
        return t
    if family == "openai_privacy_filter":
        openai_privacy_filter(put, cfg)
        return t
    if family == "neomme":
        neomme(put, cfg)
        return t
    if family == "t5gemma":
        t5gemma(put, cfg)
        return t
    if family == "t5gemma2":
        t5gemma2(put, cfg)
        return t
    if family == "step3p5":
        step3p5(put, mlp, cfg, norm_lo, norm_hi)
        return t
    if family == "ergo":
        ergo(put, cfg)
        return t
    if family == "dory":
        dory(put, cfg)
        return t
    post_norm = family in ("olmo3", "exaone4")  # olmo2's block: norms on the outputs only
    if family == "gemma4_text":  # the layer types after Gemma4TextConfig's defaults and its forced full last layer
        types = list(cfg.get("layer_types") or [S if (i + 1) % 6 else F for i in range(cfg["num_hidden_layers"])])
        types[-1] = F
        first_shared = cfg["num_hidden_layers"] - cfg.get("num_kv_shared_layers", 0)
    layers = cfg["num_hidden_layers"]
    # The widths the config says (a drawn model varies heads, KV heads and head_dim; the zoo's are the constants).
    HEADS, KV_HEADS, HEAD_DIM = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    if family == "llama4_text":
        step = cfg.get("interleave_moe_layer_step", 1)
        moe = set(cfg["moe_layers"] if cfg.get("moe_layers") is not None else range(step - 1, layers, step))
    if family == "qwen2_moe":  # read_qwen2_moe's rule
        step, dense = cfg.get("decoder_sparse_step", 1), set(cfg.get("mlp_only_layers") or [])
        moe = {i for i in range(layers) if i not in dense and cfg.get("num_experts", 60) > 0 and (i + 1) % step == 0}
    if family == "dots1":
        moe = set(range(cfg.get("first_k_dense_replace") or 0, layers))
    if family == "exaone_moe":  # read_exaone_moe's rule
        kinds = cfg.get("mlp_layer_types")
        first = cfg.get("first_k_dense_replace", 1)
        moe = {i for i in range(layers) if (kinds[i] == "sparse" if kinds else i >= first)}
    if family == "flint":  # read_flint's rule
        step = cfg.get("decoder_sparse_step", 1)
        dense = set(cfg["mlp_only_layers"] if cfg.get("mlp_only_layers") is not None else [0, 1])
        moe = {i for i in range(layers) if i not in dense and (i + 1) % step == 0}
    if family == "cohere2_moe":  # read_cohere2_moe's rule
        kinds = cfg.get("mlp_layer_types")
        first = cfg.get("first_k_dense_replace", 0)
        moe = {i for i in range(layers) if (kinds[i] == "sparse" if kinds else i >= first)}
    if family == "afmoe":  # read_afmoe's rule
        moe = set(range(cfg.get("num_dense_layers", 1), layers))
    if family == "kolibri1":  # every layer
        moe = set(range(layers))
    if family == "laguna":  # read_laguna's rule
        kinds = cfg.get("mlp_layer_types")
        moe = {i for i in range(layers) if (kinds[i] == "sparse" if kinds else i > 0)}
    if family == "muse_spark_text":  # read_muse_spark_text's rule: every layer sparse by default
        kinds = cfg.get("mlp_layer_types")
        moe = {i for i in range(layers) if not kinds or kinds[i] == "sparse"}
    if family == "beam":  # read_beam's rule
        kinds = cfg.get("mlp_layer_types")
        moe = {i for i in range(layers) if (kinds[i] == "sparse" if kinds else i >= min(3, layers))}
    if family == "mellum":  # read_mellum's rule
        kinds = cfg.get("mlp_layer_types")
        moe = {i for i in range(layers) if not kinds or kinds[i] == "sparse"}
    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    head_dim, kv_heads = HEAD_DIM, KV_HEADS
    for i in range(layers):
        p = f"model.layers.{i}."
        if family == "lfm3":
            lfm3_layer(put, p, i, cfg, norm_lo, norm_hi)
            continue
        if family == "recurrent_gemma":
            recurrent_gemma_layer(put, p, i, cfg, norm_lo, norm_hi)
            continue
        if family == "mimo_v2_flash":
            mimo_layer(put, mlp, p, i, cfg, norm_lo, norm_hi)
            continue
        if family == "lara_mini":
            lara_mini_layer(put, mlp, p, i, cfg, norm_lo, norm_hi)
            continue
        own_kv, own_v = True, True
        if family == "gemma4_text":
            # Full layers: global_head_dim and (attention_k_eq_v) the global KV heads, no v_proj; the last
            # num_kv_shared_layers layers have no K/V projections or k_norm of their own.
            full = types[i] == F
            HEAD_DIM = cfg["global_head_dim"] if full else head_dim
            KV_HEADS = cfg["num_global_key_value_heads"] if full and cfg.get("attention_k_eq_v") else kv_heads
            own_kv = i < first_shared
            own_v = own_kv and not (full and cfg.get("attention_k_eq_v"))
            put(p + "layer_scalar", (1,), 0.7, 1.3)
            if cfg.get("hidden_size_per_layer_input"):
                per_layer_input_layer(put, p, cfg["hidden_size_per_layer_input"])
        if family == "gemma3n_text":
            gemma3n_layer(put, p, cfg)
        if family == "phi3":  # fused: rows [q; k; v]
            put(p + "self_attn.qkv_proj.weight", ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), -PROJ, PROJ)
        else:
            put(p + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
            if own_kv:
                put(p + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
            if own_v:
                put(p + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM), -OUT, OUT)
        if family in ("qwen2", "qwen2_moe") or (family in ("qwen3", "gpt_oss", "smollm3", "olmo3", "granite_swa", "dots1",
                                                              "granitemoe_swa", "mellum", "flint", "cohere2_moe", "afmoe",
                                                              "laguna", "beam") and cfg.get("attention_bias")):
            put(p + "self_attn.q_proj.bias", (HEADS * HEAD_DIM,), -BIAS, BIAS)
            put(p + "self_attn.k_proj.bias", (KV_HEADS * HEAD_DIM,), -BIAS, BIAS)
            put(p + "self_attn.v_proj.bias", (KV_HEADS * HEAD_DIM,), -BIAS, BIAS)
        if family in ("qwen3", "gpt_oss", "smollm3", "olmo3", "granite_swa", "dots1", "granitemoe_swa", "mellum", "flint",
                      "cohere2_moe", "afmoe", "laguna", "beam") and cfg.get("attention_bias"):
            put(p + "self_attn.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
        if family in ("gpt_oss", "granite_swa", "granitemoe_swa", "flint"):
            # Sinks around the scores' scale (std ~5), so some heads give a sink real weight.
            put(p + "self_attn.sinks", (HEADS,), -1.0, 3.0)
        if family == "llama4_text":
            f = p + "feed_forward."
            if i in moe:
                e, inter = cfg["num_local_experts"], cfg["intermediate_size"]
                put(f + "router.weight", (e, HIDDEN), -PROJ, PROJ)
                put(f + "experts.gate_up_proj", (e, HIDDEN, 2 * inter), -PROJ, PROJ)
                put(f + "experts.down_proj", (e, inter, HIDDEN), -OUT, OUT)
                mlp(f + "shared_expert.", inter)
            else:
                mlp(f, cfg["intermediate_size_mlp"])
        elif family in ("qwen2_moe", "dots1", "exaone_moe", "mellum", "flint") and i in moe:
            # The Hub's layout, which every release loads (5.x joins the experts' modules as it loads them).
            f, e, inter = p + "mlp.", cfg.get("num_experts", cfg.get("n_routed_experts", cfg.get("num_local_experts"))), cfg["moe_intermediate_size"]
            put(f + "gate.weight", (e, HIDDEN), -PROJ, PROJ)
            for x in range(e):
                mlp(f"{f}experts.{x}.", inter)
            if family == "mellum":
                pass  # no shared expert
            elif family == "flint":  # ungated
                mlp(f + "shared_expert.", cfg["shared_expert_intermediate_size"])
            elif family == "qwen2_moe":
                mlp(f + "shared_expert.", cfg["shared_expert_intermediate_size"])
                put(f + "shared_expert_gate.weight", (1, HIDDEN), -PROJ, PROJ)
            else:
                # Biases >= 0 keep every score + bias positive: 4.56.2 masks the groups not chosen with 0 (read_dots1).
                put(f + "gate.e_score_correction_bias", (e,), 0.0, BIAS)
                mlp(f + "shared_experts.", inter * cfg.get("n_shared_experts", cfg.get("num_shared_experts", 1)))
        elif family == "afmoe":  # its own names: router.gate, expert_bias, stacked experts, shared_experts
            f, e, inter = p + "mlp.", cfg["num_experts"], cfg["moe_intermediate_size"]
            if i in moe:
                # A quarter of the projections' range: sigmoid scores away from 1, so that the renormalisation (always
                # on in afmoe) acts on the weights (sensitivity.py), which saturated scores would hide.
                put(f + "router.gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)
                put(f + "expert_bias", (e,), -BIAS, BIAS)
                stacked_experts(put, mlp, f, e, inter, inter * cfg.get("num_shared_experts", 0))
            else:
                mlp(f, cfg["intermediate_size"])
        elif family == "laguna":  # kolibri1's layout on its sparse layers, the dense MLP on the others
            f, e, inter = p + "mlp.", cfg["num_experts"], cfg["moe_intermediate_size"]
            if i in moe:
                put(f + "gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)  # afmoe's quarter range (kolibri1 below)
                put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
                stacked_experts(put, mlp, f, e, inter, cfg["shared_expert_intermediate_size"])
            else:
                mlp(f, cfg["intermediate_size"])
        elif family == "muse_spark_text":  # stacked experts at moe_hidden_size between its projections; no shared expert
            f, e, inter, pooled = p + "mlp.", cfg["num_local_experts"], cfg["moe_intermediate_size"], cfg["moe_hidden_size"]
            if i in moe:
                put(f + "gate.weight", (e, HIDDEN), -PROJ, PROJ)
                put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
                put(f + "pre_expert_proj.weight", (pooled, HIDDEN), -PROJ, PROJ)
                put(f + "pre_expert_norm.weight", (pooled,), norm_lo, norm_hi)
                stacked_experts(put, mlp, f, e, inter, width=pooled)
                put(f + "experts.post_expert_norm.weight", (pooled,), norm_lo, norm_hi)
                put(f + "post_expert_proj.weight", (HIDDEN, pooled), -OUT, OUT)
            else:
                mlp(f, cfg["intermediate_size"])
            # The residual gates g (beta = sigmoid(g / T)): betas from about 0.2 to 0.8 at T = 0.3.
            put(p + "post_attention_residual_gate.gate", (HIDDEN,), -0.4, 0.4)
            put(p + "post_feedforward_residual_gate.gate", (HIDDEN,), -0.4, 0.4)
        elif family == "beam":  # laguna's layout without the shared expert
            f, e, inter = p + "mlp.", cfg["num_experts"], cfg["moe_intermediate_size"]
            if i in moe:
                put(f + "gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)  # afmoe's quarter range: the renormalisation acts
                put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
                stacked_experts(put, mlp, f, e, inter)
            else:
                mlp(f, cfg["intermediate_size"])
        elif family == "kolibri1":  # stacked experts, the router's selection bias, an ungated shared expert
            f, e, inter = p + "mlp.", cfg["num_local_experts"], cfg["moe_intermediate_size"]
            # afmoe's quarter range: sigmoid weights away from 1, so that the renormalisation acts (sensitivity.py);
            # logits of the selection bias's order, so that choosing by logit + bias differs from score + bias.
            put(f + "gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)
            put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
            stacked_experts(put, mlp, f, e, inter, cfg["shared_expert_intermediate_size"])
        elif family == "cohere2_moe":  # its own module layout: stacked experts; dense layers of their own size
            f, e, inter = p + "mlp.", cfg["num_experts"], cfg["intermediate_size"]
            if i in moe:
                put(f + "gate.weight", (e, HIDDEN), -PROJ, PROJ)
                stacked_experts(put, mlp, f, e, inter, inter * cfg.get("num_shared_experts", 0))
            else:
                mlp(f, cfg.get("prefix_dense_intermediate_size") or inter)
        elif family == "granitemoe_swa":  # its own module layout: stacked experts, a fused shared expert
            f, e, inter = p + "block_sparse_moe.", cfg["num_local_experts"], cfg["intermediate_size"]
            put(f + "router.weight", (e, HIDDEN), -PROJ, PROJ)
            stacked_experts(put, mlp, f, e, inter)
            if cfg.get("shared_intermediate_size"):
                put(p + "shared_mlp.input_linear.weight", (2 * cfg["shared_intermediate_size"], HIDDEN), -PROJ, PROJ)
                put(p + "shared_mlp.output_linear.weight", (HIDDEN, cfg["shared_intermediate_size"]), -OUT, OUT)
        elif family == "phi3":  # fused: rows [gate; up]
            inter = cfg.get("intermediate_size", INTER)
            put(p + "mlp.gate_up_proj.weight", (2 * inter, HIDDEN), -PROJ, PROJ)
            put(p + "mlp.down_proj.weight", (HIDDEN, inter), -OUT, OUT)
        elif family == "gpt_oss":
            f, e, inter = p + "mlp.", cfg["num_local_experts"], cfg["intermediate_size"]
            put(f + "router.weight", (e, HIDDEN), -PROJ, PROJ)
            put(f + "router.bias", (e,), -BIAS, BIAS)
            put(f + "experts.gate_up_proj", (e, HIDDEN, 2 * inter), -PROJ, PROJ)
            put(f + "experts.gate_up_proj_bias", (e, 2 * inter), -BIAS, BIAS)
            put(f + "experts.down_proj", (e, inter, HIDDEN), -OUT, OUT)
            put(f + "experts.down_proj_bias", (e, HIDDEN), -BIAS, BIAS)
        else:
            inter = cfg.get("intermediate_size", INTER)
            mlp(p + "mlp.", inter[i] if isinstance(inter, list) else inter)
        if not post_norm:
            put(p + "input_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        # cohere2's (and cohere2_moe's) parallel block has one norm per layer; vaultgemma none after attention
        if family not in ("cohere2", "cohere2_moe", "vaultgemma", "muse_spark_text"):  # muse_spark's is weightless
            put(p + "post_attention_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        if family in ("gemma2", "gemma3", "gemma4_text", "vaultgemma", "muse_glimmer_text", "gemma3n_text", "muse_spark_text", "beam"):
            put(p + "pre_feedforward_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        if family in ("gemma2", "gemma3", "gemma4_text", "muse_glimmer_text", "gemma3n_text", "muse_spark_text", "beam") or post_norm:
            put(p + "post_feedforward_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        if family in ("muse_glimmer_text", "muse_spark_text"):  # afmoe's gate of every attention output element
            put(p + "self_attn.gate_proj.weight", (HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
        if family == "laguna":  # the softplus gate: one per head, or one per output element unless gating is per head
            per_head = cfg.get("gating", True) in (True, "per-head")
            put(p + "self_attn.g_proj.weight", ((HEADS if per_head else HEADS * HEAD_DIM), HIDDEN), -PROJ, PROJ)
        if family == "beam":  # the gate of every attention output element, plus a bias per head (a logit shift)
            put(p + "self_attn.gate_proj.weight", (HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
            put(p + "self_attn.gate_bias", (HEADS,), -1.0, 1.0)
        if family == "kolibri1":  # its sandwich's own names (post_attention_layernorm, above, is the MLP's input norm)
            put(p + "post_self_attn_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
            put(p + "post_mlp_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        if family == "afmoe":  # its sandwich's own names, and the gate of every attention output element
            put(p + "pre_mlp_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
            put(p + "post_mlp_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
            put(p + "self_attn.gate_proj.weight", (HEADS * HEAD_DIM, HIDDEN), -PROJ, PROJ)
        if family in ("gemma3", "qwen3", "gemma4_text", "dots1", "exaone_moe", "mellum", "flint", "afmoe", "kolibri1", "laguna",
                      "gemma3n_text", "beam"):
            put(p + "self_attn.q_norm.weight", (HEAD_DIM,), 1.0 - NORM, 1.0 + NORM)
            if own_kv:
                put(p + "self_attn.k_norm.weight", (HEAD_DIM,), 1.0 - NORM, 1.0 + NORM)
        if post_norm:
            # Scores of normed q and k scaled by head_dim^-0.5 have std ~ w^2: weights around 2 keep the
            # attention peaked (olmo3 norms the whole projection, exaone4 each head).
            whole = family == "olmo3"
            put(p + "self_attn.q_norm.weight", ((HEADS if whole else 1) * HEAD_DIM,), 2.0 - 2 * NORM, 2.0 + 2 * NORM)
            put(p + "self_attn.k_norm.weight", ((KV_HEADS if whole else 1) * HEAD_DIM,), 2.0 - 2 * NORM, 2.0 + 2 * NORM)
    if family == "gemma3n_text":
        gemma3n_model(put, cfg)
    if family == "gemma4_text" and cfg.get("hidden_size_per_layer_input"):
        per_layer_input_model(put, cfg)
    if family in ("muse_glimmer_text", "muse_spark_text"):  # its final norm's weight is w, not 1 + w
        norm_lo, norm_hi = 1 - NORM, 1 + NORM
    final_norm = {"lfm3": "model.embedding_norm.weight", "recurrent_gemma": "model.final_norm.weight"}.get(family, "model.norm.weight")
    put(final_norm, (HIDDEN,), norm_lo, norm_hi)
    if not cfg["tie_word_embeddings"]:
        put("lm_head.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    return t


def gemma3n_layer(put, p, cfg):
    """A gemma3n layer's AltUp, LAuReL and per-layer input tensors (its attention and MLP are gemma's). The modality
    router reads RMSNorm(x) / hidden_size: its range of 8 gives modalities tanh(~0.6), so that AltUp's coefficients
    vary with the token (sensitivity.py); the other norms and the output scale sit around 1."""
    a, r, pl = cfg.get("altup_num_inputs", 4), cfg.get("laurel_rank", 64), cfg.get("hidden_size_per_layer_input", 256)
    put(p + "altup.correct_output_scale", (HIDDEN,), 1.0 - NORM, 1.0 + NORM)
    put(p + "altup.correction_coefs.weight", (a, a), -PROJ, PROJ)
    put(p + "altup.prediction_coefs.weight", (a * a, a), -PROJ, PROJ)
    put(p + "altup.modality_router.weight", (a, HIDDEN), -8.0, 8.0)
    put(p + "altup.router_norm.weight", (HIDDEN,), 1.0 - NORM, 1.0 + NORM)
    put(p + "laurel.linear_left.weight", (r, HIDDEN), -PROJ, PROJ)
    put(p + "laurel.linear_right.weight", (HIDDEN, r), -PROJ, PROJ)
    put(p + "laurel.post_laurel_norm.weight", (HIDDEN,), 1.0 - NORM, 1.0 + NORM)
    per_layer_input_layer(put, p, pl)


def per_layer_input_layer(put, p, pl):
    """A layer's per-layer input branch (gemma3n, gemma4): its gate, projection and norm."""
    put(p + "per_layer_input_gate.weight", (pl, HIDDEN), -PROJ, PROJ)
    put(p + "per_layer_projection.weight", (HIDDEN, pl), -PROJ, PROJ)
    put(p + "post_per_layer_input_norm.weight", (HIDDEN,), 1.0 - NORM, 1.0 + NORM)


def per_layer_input_model(put, cfg):
    """The model's per-layer input tensors (gemma3n, gemma4): the per-layer embedding table, its projection and norm."""
    layers, pl = cfg["num_hidden_layers"], cfg.get("hidden_size_per_layer_input", 256)
    put("model.embed_tokens_per_layer.weight", (cfg.get("vocab_size_per_layer_input", 262144), layers * pl), -EMBED, EMBED)
    put("model.per_layer_model_projection.weight", (layers * pl, HIDDEN), -PROJ, PROJ)
    put("model.per_layer_projection_norm.weight", (pl,), 1.0 - NORM, 1.0 + NORM)


def gemma3n_model(put, cfg):
    """gemma3n's model-level tensors: the per-layer input tensors and AltUp's projections."""
    per_layer_input_model(put, cfg)
    for i in range(cfg.get("altup_num_inputs", 4) - 1):
        put(f"model.altup_projections.{i}.weight", (HIDDEN, HIDDEN), -PROJ, PROJ)
        put(f"model.altup_unembed_projections.{i}.weight", (HIDDEN, HIDDEN), -PROJ, PROJ)


def stacked_experts(put, mlp, f, e, inter, shared=0, width=HIDDEN):
    """Stacked experts as the classes hold them: experts.gate_up_proj [E, 2I, W] (rows [gate; up]) and experts.down_proj
    [E, W, I] over the width W (the hidden size; muse_spark's pooled width), then the shared experts as one MLP of
    `shared` under shared_experts. (0: none)."""
    put(f + "experts.gate_up_proj", (e, 2 * inter, width), -PROJ, PROJ)
    put(f + "experts.down_proj", (e, width, inter), -OUT, OUT)
    if shared:
        mlp(f + "shared_experts.", shared)


def mimo_layer(put, mlp, p, i, cfg, norm_lo, norm_hi):
    """A mimo_v2_flash layer (read_mimo_v2_flash's rules): query/key heads of head_dim, value heads of v_head_dim, twice
    the KV heads and sinks on sliding layers, q/k/v biases where attention_bias (none on o_proj), stacked experts."""
    n = cfg["num_hidden_layers"]
    kinds = cfg.get("layer_types") or [F if j == 0 or (j + 1) % 6 == 0 else S for j in range(n)]
    mlps = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    heads, d, dv = cfg["num_attention_heads"], cfg["head_dim"], cfg["v_head_dim"]
    kv = cfg["num_key_value_heads"] * (2 if kinds[i] == S else 1)
    put(p + "self_attn.q_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
    put(p + "self_attn.k_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
    put(p + "self_attn.v_proj.weight", (kv * dv, HIDDEN), -PROJ, PROJ)
    put(p + "self_attn.o_proj.weight", (HIDDEN, heads * dv), -OUT, OUT)
    if cfg.get("attention_bias"):
        for name, rows in (("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * dv)):
            put(p + f"self_attn.{name}.bias", (rows,), -BIAS, BIAS)
    if kinds[i] == S:
        put(p + "self_attn.sinks", (heads,), -1.0, 3.0)
    f, e, inter = p + "mlp.", cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    if mlps[i] == "sparse":
        put(f + "gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)
        put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
        stacked_experts(put, mlp, f, e, inter)
    else:
        mlp(f, cfg["intermediate_size"])
    put(p + "input_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
    put(p + "post_attention_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)


def lfm3_layer(put, p, i, cfg, norm_lo, norm_hi):
    """An lfm3 layer's tensors under its own names: a short-convolution block (conv layers) or attention with
    q/k norms and the per-head gate g_proj, SwiGLU feed_forward.w1/w3/w2, operator and ffn norms (and, with
    use_sandwich_norm, their post norms)."""
    kinds = cfg.get("layer_types") or ["full_attention" if j % 4 == 2 else S if j % 4 == 0 and j > 0 else "conv"
                                       for j in range(cfg["num_hidden_layers"])]
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    if kinds[i] == "conv":
        taps = cfg.get("conv_L_cache", 7)
        put(p + "conv.in_proj.weight", (3 * HIDDEN, HIDDEN), -PROJ, PROJ)
        put(p + "conv.conv.weight", (HIDDEN, 1, taps), -PROJ, PROJ)
        put(p + "conv.out_proj.weight", (HIDDEN, HIDDEN), -OUT, OUT)
        if cfg.get("conv_bias"):
            for name, n in (("in_proj", 3 * HIDDEN), ("conv", HIDDEN), ("out_proj", HIDDEN)):
                put(p + f"conv.{name}.bias", (n,), -BIAS, BIAS)
    else:
        put(p + "self_attn.q_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.k_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.v_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        put(p + "self_attn.q_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
        put(p + "self_attn.k_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
        if cfg.get("use_attention_gate", True):
            put(p + "self_attn.g_proj.weight", (heads, HIDDEN), -PROJ, PROJ)
    inter = cfg.get("intermediate_size", INTER)
    put(p + "feed_forward.w1.weight", (inter, HIDDEN), -PROJ, PROJ)
    put(p + "feed_forward.w3.weight", (inter, HIDDEN), -PROJ, PROJ)
    put(p + "feed_forward.w2.weight", (HIDDEN, inter), -OUT, OUT)
    norms = ["operator_norm", "ffn_norm"] + (["post_operator_norm", "post_ffn_norm"] if cfg.get("use_sandwich_norm", True) else [])
    for name in norms:
        put(p + name + ".weight", (HIDDEN,), norm_lo, norm_hi)


def recurrent_gemma_layer(put, p, i, cfg, norm_lo, norm_hi):
    """A recurrent_gemma layer's tensors under its own names: temporal_pre_norm, the temporal block (an RG-LRU block:
    linear_x, linear_y, conv_1d, rg_lru and linear_out, each with a bias; or attention: q/k/v (biases where
    attention_bias) and o_proj with its bias), channel_pre_norm and the biased MLP mlp_block of intermediate_size / 2.
    recurrent_param in [-3, 0): softplus 0.05 to 0.69, a decay a = exp(-8 r softplus) of about 0.06 to 0.8 at r = 1/2,
    so that a state carries over a few positions, as the window does."""
    blocks = cfg.get("block_types") or ["recurrent", "recurrent", "attention"]
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], HIDDEN // cfg["num_attention_heads"]
    if blocks[i % len(blocks)] == "recurrent":
        lru = cfg.get("lru_width") or HIDDEN
        block, taps = lru // heads, cfg.get("conv1d_width", 4)
        for name in ("linear_x", "linear_y"):
            put(p + f"temporal_block.{name}.weight", (lru, HIDDEN), -PROJ, PROJ)
            put(p + f"temporal_block.{name}.bias", (lru,), -BIAS, BIAS)
        put(p + "temporal_block.conv_1d.weight", (lru, 1, taps), -PROJ, PROJ)
        put(p + "temporal_block.conv_1d.bias", (lru,), -BIAS, BIAS)
        put(p + "temporal_block.rg_lru.recurrent_param", (lru,), -3.0, 0.0)
        for gate in ("input_gate", "recurrent_gate"):
            put(p + f"temporal_block.rg_lru.{gate}_weight", (heads, block, block), -PROJ, PROJ)
            put(p + f"temporal_block.rg_lru.{gate}_bias", (heads, block), -BIAS, BIAS)
        put(p + "temporal_block.linear_out.weight", (HIDDEN, lru), -OUT, OUT)
        put(p + "temporal_block.linear_out.bias", (HIDDEN,), -BIAS, BIAS)
    else:
        for name, rows in (("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)):
            put(p + f"temporal_block.{name}.weight", (rows, HIDDEN), -PROJ, PROJ)
            if cfg.get("attention_bias"):
                put(p + f"temporal_block.{name}.bias", (rows,), -BIAS, BIAS)
        put(p + "temporal_block.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        put(p + "temporal_block.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
    inter = cfg.get("intermediate_size", INTER) // 2
    for name, shape, lo, hi in (("gate_proj", (inter, HIDDEN), -PROJ, PROJ), ("up_proj", (inter, HIDDEN), -PROJ, PROJ),
                                ("down_proj", (HIDDEN, inter), -OUT, OUT)):
        put(p + f"mlp_block.{name}.weight", shape, lo, hi)
        put(p + f"mlp_block.{name}.bias", shape[:1], -BIAS, BIAS)
    for name in ("temporal_pre_norm", "channel_pre_norm"):
        put(p + name + ".weight", (HIDDEN,), norm_lo, norm_hi)


def lara_mini_layer(put, mlp, p, i, cfg, norm_lo, norm_hi):
    """A lara_mini layer's tensors under the checkpoint's names: a gated DeltaNet block (linear_attn.in_proj fused as
    rows [qkv | z | b | a], conv1d without bias, A_log, dt_bias, out_norm, out_proj) or qwen3's attention (q/k norms,
    biases where attention_bias), then the MoE on every layer: router gate, stacked experts, an ungated shared expert.
    A_log in [-3, 0) (exp(A_log) 0.05 to 1) and dt_bias in [-1, 1): decays exp(g) from near 1 to a few hundredths over
    the drawn a, so that a state carries over a few positions, as the window does."""
    kinds = cfg.get("layer_types") or [["linear_attention", S, "linear_attention", F, S][j % 5]
                                       for j in range(cfg["num_hidden_layers"])]
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    if kinds[i] == "linear_attention":
        hk, hv = cfg.get("linear_num_key_heads", 8), cfg.get("linear_num_value_heads", 16)
        kd, vd = hk * cfg.get("linear_key_head_dim", 128), hv * cfg.get("linear_value_head_dim", 128)
        put(p + "linear_attn.in_proj.weight", (2 * kd + 2 * vd + 2 * hv, HIDDEN), -PROJ, PROJ)
        put(p + "linear_attn.conv1d.weight", (2 * kd + vd, 1, cfg.get("linear_conv_kernel_dim", 4)), -PROJ, PROJ)
        put(p + "linear_attn.A_log", (hv,), -3.0, 0.0)
        put(p + "linear_attn.dt_bias", (hv,), -1.0, 1.0)
        put(p + "linear_attn.out_norm.weight", (cfg.get("linear_value_head_dim", 128),), 1.0 - NORM, 1.0 + NORM)
        put(p + "linear_attn.out_proj.weight", (HIDDEN, vd), -OUT, OUT)
    else:
        for name, rows in (("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)):
            put(p + f"self_attn.{name}.weight", (rows, HIDDEN), -PROJ, PROJ)
            if cfg.get("attention_bias"):
                put(p + f"self_attn.{name}.bias", (rows,), -BIAS, BIAS)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        if cfg.get("attention_bias"):
            put(p + "self_attn.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
        put(p + "self_attn.q_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
        put(p + "self_attn.k_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
    f, e, inter = p + "mlp.", cfg["num_experts"], cfg["moe_intermediate_size"]
    put(f + "gate.weight", (e, HIDDEN), -PROJ, PROJ)
    stacked_experts(put, mlp, f, e, inter)
    mlp(f + "shared_expert.", cfg["shared_expert_intermediate_size"])
    for name in ("input_layernorm", "post_attention_layernorm"):
        put(p + name + ".weight", (HIDDEN,), norm_lo, norm_hi)


def modernbert(put, cfg, encoder):
    """ModernBertDecoderForCausalLM's tensors under its own names: embeddings and their LayerNorm, per layer attn_norm
    (none on layer 0: an Identity), attn.{q,k,v}_proj and attn.Wo, mlp_norm, mlp.Wi [2I, H] (the activated half
    first) and mlp.Wo; final_norm, the prediction head lm_head.dense and lm_head.norm, and decoder (its weight only
    where untied; its bias where decoder_bias). Biases where the config's norm_bias, attention_bias, mlp_bias,
    classifier_bias say. The encoder's (ModernBertForMaskedLM, `encoder`): one attn.Wqkv [3H, H] (rows [q; k; v])
    for the three projections, and its head named head.dense, head.norm."""
    heads, inter = cfg["num_attention_heads"], cfg.get("intermediate_size", INTER)

    def linear(key, rows, cols, lo, hi, bias):
        put(key + ".weight", (rows, cols), lo, hi)
        if bias:
            put(key + ".bias", (rows,), -BIAS, BIAS)

    def norm(key):
        put(key + ".weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        if cfg.get("norm_bias"):
            put(key + ".bias", (HIDDEN,), -BIAS, BIAS)

    put("model.embeddings.tok_embeddings.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    norm("model.embeddings.norm")
    qkv_bias = cfg.get("attention_bias", False)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if i:
            norm(p + "attn_norm")
        if encoder:
            linear(p + "attn.Wqkv", 3 * HIDDEN, HIDDEN, -PROJ, PROJ, qkv_bias)
        else:
            for x in "qkv":
                linear(p + f"attn.{x}_proj", HIDDEN, HIDDEN, -PROJ, PROJ, qkv_bias)
        assert HIDDEN % heads == 0
        linear(p + "attn.Wo", HIDDEN, HIDDEN, -OUT, OUT, qkv_bias)
        norm(p + "mlp_norm")
        linear(p + "mlp.Wi", 2 * inter, HIDDEN, -PROJ, PROJ, cfg.get("mlp_bias"))
        linear(p + "mlp.Wo", HIDDEN, inter, -OUT, OUT, cfg.get("mlp_bias"))
    norm("model.final_norm")
    head = "head." if encoder else "lm_head."
    linear(head + "dense", HIDDEN, HIDDEN, -PROJ, PROJ, cfg.get("classifier_bias"))
    norm(head + "norm")
    if not cfg.get("tie_word_embeddings", True):
        put("decoder.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    if cfg.get("decoder_bias", True):
        put("decoder.bias", (VOCAB,), -BIAS, BIAS)


def step3p5_heads(cfg):
    """Each layer's query heads as Step3p7TextConfig gives them: num_sliding_attention_heads (or the legacy
    attention_other_setting's) on the sliding layers, num_attention_heads on the others (read_step3p7's rule)."""
    heads, layers = cfg["num_attention_heads"], cfg["num_hidden_layers"]
    legacy = (cfg.get("attention_other_setting") or {}).get("num_attention_heads", heads)
    sliding = cfg.get("num_sliding_attention_heads") or legacy
    types = (cfg.get("layer_types") or [F] * layers)[:layers]
    return [sliding if t == S else heads for t in types]


def step3p5_sparse(cfg):
    """The MoE layers: mlp_layer_types, else the legacy moe_layers_enum, else every layer from the fourth."""
    layers = cfg["num_hidden_layers"]
    if cfg.get("mlp_layer_types"):
        return {i for i, k in enumerate(cfg["mlp_layer_types"][:layers]) if k == "sparse"}
    enum = cfg.get("moe_layers_enum")
    if enum is not None:
        return {int(i) for i in (enum.split(",") if isinstance(enum, str) else enum) if str(i).strip()}
    return set(range(3, layers))


def step3p5(put, mlp, cfg, norm_lo, norm_hi):
    """Step3p7TextModel's tensors (under model.*; the multimodal class's prefix is added by tensors()): per layer
    q/k/v/o (biases where attention_bias) with the layer's own query head count, gemma's (1 + w) q/k norms, g_proj
    [heads, H] (one sigmoid gate per head), the pre-norm block's two norms, and on a sparse layer the router gate
    (and its e_score_correction_bias), stacked experts [E, 2I, H] / [E, H, I] and shared_experts of share_expert_dim,
    on a dense one the MLP of intermediate_size."""
    kv, d = cfg.get("num_key_value_heads") or cfg.get("num_attention_groups"), cfg["head_dim"]
    e = cfg.get("n_routed_experts") or cfg.get("moe_num_experts")
    inter = cfg["moe_intermediate_size"]
    sparse = step3p5_sparse(cfg)
    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i, heads in enumerate(step3p5_heads(cfg)):
        p = f"model.layers.{i}."
        for x, rows in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
            put(p + f"self_attn.{x}_proj.weight", (rows, HIDDEN), -PROJ, PROJ)
            if cfg.get("attention_bias"):
                put(p + f"self_attn.{x}_proj.bias", (rows,), -BIAS, BIAS)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        if cfg.get("attention_bias"):
            put(p + "self_attn.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
        put(p + "self_attn.q_norm.weight", (d,), norm_lo, norm_hi)
        put(p + "self_attn.k_norm.weight", (d,), norm_lo, norm_hi)
        put(p + "self_attn.g_proj.weight", (heads, HIDDEN), -PROJ, PROJ)
        f = p + "mlp."
        if i in sparse:
            # afmoe's quarter range: sigmoid scores away from 1, so that the renormalisation acts (sensitivity.py).
            put(f + "gate.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)
            put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
            stacked_experts(put, mlp, f, e, inter, cfg["share_expert_dim"])
        else:
            mlp(f, cfg["intermediate_size"])
        put(p + "input_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
        put(p + "post_attention_layernorm.weight", (HIDDEN,), norm_lo, norm_hi)
    put("model.norm.weight", (HIDDEN,), norm_lo, norm_hi)
    if not cfg.get("tie_word_embeddings"):
        put("lm_head.weight", (VOCAB, HIDDEN), -EMBED, EMBED)


def ergo(put, cfg):
    """ErgoForCausalLM's tensors: per layer a fused qkv_proj (rows [q; k; v]), o_proj, q/k norms, the four sandwich
    norms and the two residual gates (weights in [-2, 2]: gates away from one half); a dense layer's up_proj and
    down_proj (no gate), a sparse layer's router gate.linear (and its e_score_correction_bias), experts.up_proj [E, H, I]
    and experts.down_proj [E, I, H] (x @ W), experts.post_expert_norm [E, H], and the shared expert's up, down and
    norm; model.norm and an untied lm_head."""
    heads, kv, layers = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    d = HIDDEN // heads
    kinds = cfg.get("mlp_layer_types") or ["dense" if i < cfg.get("num_dense_blocks", 1) else "sparse" for i in range(layers)]
    e, inter, shared = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["shared_intermediate_size"]
    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i in range(layers):
        p = f"model.layers.{i}."
        put(p + "self_attn.qkv_proj.weight", ((heads + 2 * kv) * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        put(p + "self_attn.q_norm.weight", (d,), 1 - NORM, 1 + NORM)
        put(p + "self_attn.k_norm.weight", (d,), 1 - NORM, 1 + NORM)
        f = p + "mlp."
        if kinds[i] == "dense":
            put(f + "up_proj.weight", (cfg["first_dense_intermediate_size"], HIDDEN), -PROJ, PROJ)
            put(f + "down_proj.weight", (HIDDEN, cfg["first_dense_intermediate_size"]), -OUT, OUT)
        else:
            put(f + "gate.linear.weight", (e, HIDDEN), -PROJ / 4, PROJ / 4)  # afmoe's quarter range (sensitivity.py)
            put(f + "gate.e_score_correction_bias", (e,), -BIAS, BIAS)
            put(f + "experts.up_proj", (e, HIDDEN, inter), -PROJ, PROJ)
            put(f + "experts.down_proj", (e, inter, HIDDEN), -OUT, OUT)
            put(f + "experts.post_expert_norm.weight", (e, HIDDEN), 1 - NORM, 1 + NORM)
            put(f + "shared_experts.up_proj.weight", (shared, HIDDEN), -PROJ, PROJ)
            put(f + "shared_experts.down_proj.weight", (HIDDEN, shared), -OUT, OUT)
            put(f + "shared_experts.norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            put(p + n + ".weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        put(p + "attention_residual_gate.weight", (HIDDEN,), -2.0, 2.0)
        put(p + "feedforward_residual_gate.weight", (HIDDEN,), -2.0, 2.0)
    put("model.norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("lm_head.weight", (VOCAB, HIDDEN), -EMBED, EMBED)


def dory(put, cfg):
    """DoryForCausalLM's tensors (its norms are weightless): per checkpoint layer (num_hidden_layers, halved where the
    config lists (attention, mlp) block pairs as saved) q/k/v/o projections (biases where attention_bias), the
    element-wise gate's gate_proj, sqk and s_gate [heads * head_dim], the MLP's gate/up/down (biases where mlp_bias)
    with suv_gate and suv_up, lambda_1 and lambda_2 [H]; lm_head (untied) and its logit_scale [V]. The nGPT scales are
    drawn around their initial value, initializer_range (sqk, s_gate, logit_scale: the identity of their rule) or 1
    (suv), so that each acts: lambda in +-12 initializer_range (an interpolation rate up to 12 ngpt_alpha_init, either
    sign: the rule takes |lambda|), logit_scale 4 to 12 times initializer_range (logits of a spread of units from a
    hidden state of norm 1)."""
    heads, kv, d, layers = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["num_hidden_layers"]
    if "mlp" in (cfg.get("layer_types") or []):
        layers //= 2
    init, inter = cfg.get("initializer_range", 0.0177), cfg["intermediate_size"]
    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i in range(layers):
        p = f"model.layers.{i}."
        put(p + "self_attn.q_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.k_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.v_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        if cfg.get("attention_bias"):
            for n, rows in (("q", heads * d), ("k", kv * d), ("v", kv * d), ("o", HIDDEN)):
                put(p + f"self_attn.{n}_proj.bias", (rows,), -BIAS, BIAS)
        put(p + "self_attn.gate_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.sqk", (heads * d,), 0.5 * init, 1.5 * init)
        put(p + "self_attn.s_gate", (heads * d,), 0.5 * init, 1.5 * init)
        put(p + "mlp.gate_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
        put(p + "mlp.up_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
        put(p + "mlp.down_proj.weight", (HIDDEN, inter), -OUT, OUT)
        if cfg.get("mlp_bias"):
            put(p + "mlp.gate_proj.bias", (inter,), -BIAS, BIAS)
            put(p + "mlp.up_proj.bias", (inter,), -BIAS, BIAS)
            put(p + "mlp.down_proj.bias", (HIDDEN,), -BIAS, BIAS)
        put(p + "mlp.suv_gate", (inter,), 0.5, 1.5)
        put(p + "mlp.suv_up", (inter,), 0.5, 1.5)
        put(p + "lambda_1", (HIDDEN,), -12 * init, 12 * init)
        put(p + "lambda_2", (HIDDEN,), -12 * init, 12 * init)
    if not cfg.get("tie_word_embeddings"):
        put("lm_head.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    put("lm_head.logit_scale", (VOCAB,), 4 * init, 12 * init)


def ultrabert(put, cfg):
    """UltrabertForMaskedLM's tensors: llama's layers (biases where attention_bias, mlp_bias), model.norm, and the
    head: head.linear1 [P, H], head.linear2 [H, P] (P = prediction_head_size) and head.decoder (its weight where
    untied)."""
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter, p_size = cfg.get("intermediate_size", INTER), cfg["prediction_head_size"]

    def linear(key, rows, cols, lo, hi, bias):
        put(key + ".weight", (rows, cols), lo, hi)
        if bias:
            put(key + ".bias", (rows,), -BIAS, BIAS)

    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        ab, mb = cfg.get("attention_bias"), cfg.get("mlp_bias")
        linear(p + "self_attn.q_proj", heads * d, HIDDEN, -PROJ, PROJ, ab)
        linear(p + "self_attn.k_proj", kv * d, HIDDEN, -PROJ, PROJ, ab)
        linear(p + "self_attn.v_proj", kv * d, HIDDEN, -PROJ, PROJ, ab)
        linear(p + "self_attn.o_proj", HIDDEN, heads * d, -OUT, OUT, ab)
        linear(p + "mlp.gate_proj", inter, HIDDEN, -PROJ, PROJ, mb)
        linear(p + "mlp.up_proj", inter, HIDDEN, -PROJ, PROJ, mb)
        linear(p + "mlp.down_proj", HIDDEN, inter, -OUT, OUT, mb)
        put(p + "input_layernorm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        put(p + "post_attention_layernorm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("model.norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("head.linear1.weight", (p_size, HIDDEN), -PROJ, PROJ)
    put("head.linear2.weight", (HIDDEN, p_size), -PROJ, PROJ)
    if not cfg.get("tie_word_embeddings"):
        put("head.decoder.weight", (VOCAB, HIDDEN), -EMBED, EMBED)


def embedding_gemma2(put, cfg):
    """EmbeddingGemma2TextModel's tensors under its own names (no model. prefix, as it saves them): gemma4_text's
    layers (q/k norms, layer_scalar; each layer's head size and KV heads as its config resolves them: per_layer_config,
    else global_head_dim and num_global_key_value_heads on the full layers, the last layer forced full), each layer's
    ple_block (per_layer_input_gate [P, H], per_layer_projection [H, P], post_per_layer_input_norm), ple's
    per_layer_model_projection [L * P, H] and per_layer_projection_norm [P], norm, and embedding_projection [E, H].
    Norm weights are w (not 1 + w), around 1."""
    layers, heads, P = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size_per_layer_input"]
    pattern = cfg.get("sliding_window_pattern", 6)
    types = list(cfg.get("layer_types") or [S if (i + 1) % pattern else F for i in range(layers)])
    types[-1] = F
    plc = cfg.get("per_layer_config")
    put("embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i in range(layers):
        p = f"layers.{i}."
        if plc is not None:
            entry = plc.get(str(i), {})
            d, kv = entry.get("head_dim", cfg["head_dim"]), entry.get("num_key_value_heads", cfg["num_key_value_heads"])
        elif types[i] == F:
            d, kv = cfg["global_head_dim"], cfg["num_global_key_value_heads"]
        else:
            d, kv = cfg["head_dim"], cfg["num_key_value_heads"]
        put(p + "self_attn.q_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.k_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.v_proj.weight", (kv * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        put(p + "self_attn.q_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
        put(p + "self_attn.k_norm.weight", (d,), 1.0 - NORM, 1.0 + NORM)
        put(p + "mlp.gate_proj.weight", (cfg["intermediate_size"], HIDDEN), -PROJ, PROJ)
        put(p + "mlp.up_proj.weight", (cfg["intermediate_size"], HIDDEN), -PROJ, PROJ)
        put(p + "mlp.down_proj.weight", (HIDDEN, cfg["intermediate_size"]), -OUT, OUT)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            put(p + norm + ".weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        put(p + "layer_scalar", (1,), 0.7, 1.3)
        put(p + "ple_block.per_layer_input_gate.weight", (P, HIDDEN), -PROJ, PROJ)
        put(p + "ple_block.per_layer_projection.weight", (HIDDEN, P), -PROJ, PROJ)
        put(p + "ple_block.post_per_layer_input_norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("ple.per_layer_model_projection.weight", (layers * P, HIDDEN), -PROJ, PROJ)
    put("ple.per_layer_projection_norm.weight", (P,), 1 - NORM, 1 + NORM)
    put("norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("embedding_projection.weight", (cfg["embedding_dim"], HIDDEN), -EMBED, EMBED)


def neomme(put, cfg):
    """NeoMMEForMaskedLM's tensors: the factorized embedding (embed_tokens.word_embeddings [V, R] and
    embedding_projection [H, R]), the patch stem (its LayerNorm, up_proj [2H, 3p^2], down_proj with its bias: the
    class's, never read by a text-only input), value_embeddings [V, kv * d], and per layer lambdas [2] (both drawn off
    the class's [1, 0], so the initial-state mix acts), q/k/v (biases where attention_bias), the exclusive
    self-attention's alpha [heads], the output gate's gate_proj [heads * d, H] and o_proj (its bias where
    attention_bias), and the ungated MLP's up_proj and down_proj. No norm has a weight. Untied: lm_head [V, R] and
    unembedding_projection [H, R] of their own."""
    heads, kv, d, rank = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["embedding_rank"]
    inter, ab, patch = cfg.get("intermediate_size", INTER), cfg.get("attention_bias"), 3 * cfg["patch_size"] ** 2
    put("model.embed_tokens.word_embeddings.weight", (VOCAB, rank), -EMBED, EMBED)
    put("model.embed_tokens.embedding_projection.weight", (HIDDEN, rank), -PROJ, PROJ)
    put("model.patch_embeddings.norm.weight", (patch,), 1 - NORM, 1 + NORM)
    put("model.patch_embeddings.norm.bias", (patch,), -BIAS, BIAS)
    put("model.patch_embeddings.up_proj.weight", (2 * HIDDEN, patch), -PROJ, PROJ)
    put("model.patch_embeddings.down_proj.weight", (HIDDEN, 2 * HIDDEN), -PROJ, PROJ)
    put("model.patch_embeddings.down_proj.bias", (HIDDEN,), -BIAS, BIAS)
    put("model.value_embeddings.weight", (VOCAB, kv * d), -EMBED, EMBED)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        put(p + "lambdas", (2,), 0.3, 1.2)
        for x, rows in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
            put(p + f"self_attn.{x}_proj.weight", (rows, HIDDEN), -PROJ, PROJ)
            if ab:
                put(p + f"self_attn.{x}_proj.bias", (rows,), -BIAS, BIAS)
        put(p + "self_attn.exclusive_self_attention.alpha", (heads,), -1.5, 1.5)
        put(p + "self_attn.output_projection.gate_proj.weight", (heads * d, HIDDEN), -PROJ, PROJ)
        put(p + "self_attn.output_projection.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        if ab:
            put(p + "self_attn.output_projection.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
        put(p + "mlp.up_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
        put(p + "mlp.down_proj.weight", (HIDDEN, inter), -OUT, OUT)
    if not cfg.get("tie_word_embeddings", True):
        put("unembedding_projection.weight", (HIDDEN, rank), -PROJ, PROJ)
        put("lm_head.weight", (VOCAB, rank), -EMBED, EMBED)


def attention_tensors(put, a, heads, kv, d, bias):
    """One attention module's q/k/v/o projections under prefix `a` (t5gemma's self- and cross-attention, t5gemma2's),
    with their biases where attention_bias."""
    for x, rows in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
        put(a + f"{x}_proj.weight", (rows, HIDDEN), -PROJ, PROJ)
        if bias:
            put(a + f"{x}_proj.bias", (rows,), -BIAS, BIAS)
    put(a + "o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
    if bias:
        put(a + "o_proj.bias", (HIDDEN,), -BIAS, BIAS)


def t5gemma(put, cfg):
    """T5GemmaForConditionalGeneration's tensors: each stack (model.encoder., model.decoder.) gemma2's layout, its
    norms (weight 1 + w, around 0) named pre_self_attn_layernorm and post_self_attn_layernorm, q/k/v/o biases where
    attention_bias; each decoder layer's cross_attn (k and v read the encoder's hidden size) and its
    pre_cross_attn_layernorm and post_cross_attn_layernorm; lm_head.out_proj untied."""
    for stack in ("encoder", "decoder"):
        c = cfg[stack]
        heads, kv, d, inter = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["intermediate_size"]
        bias = c.get("attention_bias")
        s = f"model.{stack}."
        put(s + "embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)

        for i in range(c["num_hidden_layers"]):
            p = f"{s}layers.{i}."
            attention_tensors(put, p + "self_attn.", heads, kv, d, bias)
            norms = ["pre_self_attn", "post_self_attn", "pre_feedforward", "post_feedforward"]
            if stack == "decoder":
                attention_tensors(put, p + "cross_attn.", heads, kv, d, bias)
                norms += ["pre_cross_attn", "post_cross_attn"]
            for n in norms:
                put(p + n + "_layernorm.weight", (HIDDEN,), -NORM, NORM)
            put(p + "mlp.gate_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
            put(p + "mlp.up_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
            put(p + "mlp.down_proj.weight", (HIDDEN, inter), -OUT, OUT)
        put(s + "norm.weight", (HIDDEN,), -NORM, NORM)
    if not cfg.get("tie_word_embeddings", True):
        put("lm_head.out_proj.weight", (VOCAB, HIDDEN), -EMBED, EMBED)


def t5gemma2(put, cfg):
    """T5Gemma2ForConditionalGeneration's tensors as transformers saves them: each stack (model.encoder., model.decoder.)
    gemma3's layout (q_norm, k_norm [head_dim]; q/k/v/o biases where attention_bias) with t5gemma's norm names, no
    cross_attn (the decoder's self_attn projects the source too); its embedding's eoi_embedding row; the encoder's
    siglip tower and multi_modal_projector (loaded by the class, run by no text-only source). Tied (the outer
    tie_word_embeddings), the decoder's embedding and the head are the encoder's and not written; untied, the decoder's
    own and lm_head.out_proj."""
    tied = cfg.get("tie_word_embeddings", True)
    for stack in ("encoder", "decoder"):
        c = cfg[stack].get("text_config", cfg[stack])
        heads, kv, d, inter = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["intermediate_size"]
        bias = c.get("attention_bias")
        s = f"model.{stack}."
        if stack == "encoder" or not tied:
            put(s + "embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
            put(s + "embed_tokens.eoi_embedding", (HIDDEN,), -EMBED, EMBED)
        for i in range(c["num_hidden_layers"]):
            p = f"{s}layers.{i}."
            attention_tensors(put, p + "self_attn.", heads, kv, d, bias)
            put(p + "self_attn.q_norm.weight", (d,), -NORM, NORM)
            put(p + "self_attn.k_norm.weight", (d,), -NORM, NORM)
            for n in ("pre_self_attn", "post_self_attn", "pre_feedforward", "post_feedforward"):
                put(p + n + "_layernorm.weight", (HIDDEN,), -NORM, NORM)
            put(p + "mlp.gate_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
            put(p + "mlp.up_proj.weight", (inter, HIDDEN), -PROJ, PROJ)
            put(p + "mlp.down_proj.weight", (HIDDEN, inter), -OUT, OUT)
        put(s + "norm.weight", (HIDDEN,), -NORM, NORM)
    v = cfg["encoder"]["vision_config"]
    vh, vi, side = v["hidden_size"], v["intermediate_size"], v["image_size"] // v["patch_size"]
    tower = "model.encoder.vision_tower."
    put(tower + "embeddings.patch_embedding.weight", (vh, v["num_channels"], v["patch_size"], v["patch_size"]), -PROJ, PROJ)
    put(tower + "embeddings.patch_embedding.bias", (vh,), -BIAS, BIAS)
    put(tower + "embeddings.position_embedding.weight", (side * side, vh), -EMBED, EMBED)
    for i in range(v["num_hidden_layers"]):
        p = f"{tower}encoder.layers.{i}."
        for x in ("q", "k", "v", "out"):
            put(p + f"self_attn.{x}_proj.weight", (vh, vh), -PROJ, PROJ)
            put(p + f"self_attn.{x}_proj.bias", (vh,), -BIAS, BIAS)
        for n in ("layer_norm1", "layer_norm2"):
            put(p + n + ".weight", (vh,), 1 - NORM, 1 + NORM)
            put(p + n + ".bias", (vh,), -BIAS, BIAS)
        put(p + "mlp.fc1.weight", (vi, vh), -PROJ, PROJ)
        put(p + "mlp.fc1.bias", (vi,), -BIAS, BIAS)
        put(p + "mlp.fc2.weight", (vh, vi), -OUT, OUT)
        put(p + "mlp.fc2.bias", (vh,), -BIAS, BIAS)
    put(tower + "post_layernorm.weight", (vh,), 1 - NORM, 1 + NORM)
    put(tower + "post_layernorm.bias", (vh,), -BIAS, BIAS)
    put("model.encoder.multi_modal_projector.mm_input_projection_weight", (vh, HIDDEN), -PROJ, PROJ)
    put("model.encoder.multi_modal_projector.mm_soft_emb_norm.weight", (vh,), -NORM, NORM)
    if not tied:
        put("lm_head.out_proj.weight", (VOCAB, HIDDEN), -EMBED, EMBED)


def openai_privacy_filter(put, cfg):
    """OpenAIPrivacyFilterForTokenClassification's tensors: gpt_oss's layout (q/k/v/o, their biases where
    attention_bias, sinks, the router with its bias, stacked experts gate_up_proj [E, H, 2I] (gate the first I columns)
    and down_proj [E, I, H] with biases, input and post-attention norms), model.norm, and the head score [num_labels, H]
    with its bias."""
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    e, inter = cfg["num_local_experts"], cfg["intermediate_size"]
    labels = len(cfg["id2label"]) if cfg.get("id2label") else cfg.get("num_labels", 33)
    put("model.embed_tokens.weight", (VOCAB, HIDDEN), -EMBED, EMBED)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for x, rows in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
            put(p + f"self_attn.{x}_proj.weight", (rows, HIDDEN), -PROJ, PROJ)
            if cfg.get("attention_bias", True):
                put(p + f"self_attn.{x}_proj.bias", (rows,), -BIAS, BIAS)
        put(p + "self_attn.o_proj.weight", (HIDDEN, heads * d), -OUT, OUT)
        if cfg.get("attention_bias", True):
            put(p + "self_attn.o_proj.bias", (HIDDEN,), -BIAS, BIAS)
        put(p + "self_attn.sinks", (heads,), -1.0, 3.0)  # around the scores' scale, as gpt_oss's
        f = p + "mlp."
        put(f + "router.weight", (e, HIDDEN), -PROJ, PROJ)
        put(f + "router.bias", (e,), -BIAS, BIAS)
        put(f + "experts.gate_up_proj", (e, HIDDEN, 2 * inter), -PROJ, PROJ)
        put(f + "experts.gate_up_proj_bias", (e, 2 * inter), -BIAS, BIAS)
        put(f + "experts.down_proj", (e, inter, HIDDEN), -OUT, OUT)
        put(f + "experts.down_proj_bias", (e, HIDDEN), -BIAS, BIAS)
        put(p + "input_layernorm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
        put(p + "post_attention_layernorm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("model.norm.weight", (HIDDEN,), 1 - NORM, 1 + NORM)
    put("score.weight", (labels, HIDDEN), -EMBED, EMBED)
    put("score.bias", (labels,), -BIAS, BIAS)


def safetensors_bytes(t):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    blobs = []
    for key in sorted(t):
        shape, values = t[key]
        blob = struct.pack(f"<{len(values)}f", *values)
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # pad so the data starts 8-byte aligned (as the safetensors writer does)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


SETS = {"zoo": MODELS, "families": families.MODELS, "encoders": families.ENCODERS, "drawn": families.drawn(), "vllm": families.drawn_vllm(),
        "drawn-encoders": families.drawn(families=families.ENCODER_FAMILIES),
        "wide": families.wide()}


def config(name, entry=None):
    """(tensor layout family, full config) of a named model of a set, or of the (family, overrides) entry given."""
    if entry is None:
        for models in SETS.values():
            if name in models:
                entry = models[name]
    family, over = entry
    if "encoder" in over:  # an encoder-decoder: COMMON describes each stack
        cfg = dict(over)
        for stack in ("encoder", "decoder"):
            if "text_config" in over[stack]:  # t5gemma2: the encoder's text stack, beside its vision tower
                text = {k: v for k, v in {**COMMON, **over[stack]["text_config"]}.items() if v != families.ABSENT}
                cfg[stack] = {**over[stack], "text_config": text}
            else:
                cfg[stack] = {k: v for k, v in {**COMMON, **over[stack]}.items() if v != families.ABSENT}
        return family, cfg
    if "text_config" in over:  # a multimodal model: COMMON describes its text decoder
        cfg = dict(over)
        cfg["text_config"] = {k: v for k, v in {**COMMON, **over["text_config"]}.items() if v != families.ABSENT}
        return family, cfg
    cfg = dict(COMMON)
    cfg.update(over)
    return family, {k: v for k, v in cfg.items() if v != families.ABSENT}


def config_json(cfg):
    """What config.json says: the config without the generator's private keys (_weights)."""
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def put(path, data):
    """Writes data to path unless it already holds exactly that, through a rename: engine runs read
    the zoo while another run (a parallel ctest) writes the same bytes, and must never see half a file."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


TOKEN = "<{}>"
"""The text of token id i in the tokenizer: "<i>", so that the prompt of ids [5, 17] is "<5> <17>". The
brackets keep one token's text out of every other's: transformers matches bos, eos and unk as added
tokens inside words, and "t1" would split "t116" into "t1" and "16"."""


def tokenizer_files(cfg):
    """The tokenizer every checkpoint ships, as {file name: bytes}: engines that load a model only
    with its tokenizer (CTranslate2's converter, mistral.rs, onnxruntime-genai's builder) get one,
    while the suite feeds token ids. A `tokenizers` WordLevel model with exactly one token per id of
    the model's vocabulary (vocab_size, no added tokens, so no engine grows the vocabulary), split on
    whitespace (ids -> text -> ids is the identity: " ".join(TOKEN.format(i) for i in ids)); a
    ByteLevel decoder (the decoder type the engines know); bos, eos and unk named in
    tokenizer_config.json (<1>, <2>, <0>: a null bos or eos is a type error in some loaders), nothing
    added around a prompt (no post-processor), and a chat template that is the messages' text as it
    is (a chat endpoint then sees exactly the prompt's tokens)."""
    vocab = int(cfg.get("text_config", cfg)["vocab_size"])
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
           "model": {"type": "WordLevel", "vocab": {TOKEN.format(i): i for i in range(vocab)},
                     "unk_token": TOKEN.format(0)}}
    special = {"unk_token": TOKEN.format(0), "bos_token": TOKEN.format(1), "eos_token": TOKEN.format(2)}
    conf = {"tokenizer_class": "PreTrainedTokenizerFast", **special, "pad_token": TOKEN.format(0),
            "add_bos_token": False, "add_eos_token": False, "model_max_length": 1 << 20, "clean_up_tokenization_spaces": False,
            "chat_template": "{% for message in messages %}{{ message['content'] }}{% endfor %}"}
    return {"tokenizer.json": (json.dumps(tok, sort_keys=True, separators=(",", ":")) + "\n").encode(),
            "tokenizer_config.json": (json.dumps(conf, indent=2, sort_keys=True) + "\n").encode()}


def write(out_dir, name, entry=None, folder=None, whole=False):
    """Writes model `name` into out_dir/folder (default: out_dir/name); its weights are keyed by the name.
    whole: entry's config is the whole config.json (a recipe's), not overrides of COMMON: a key the
    draw removed stays removed."""
    family, cfg = entry if whole else config(name, entry)
    d = os.path.join(out_dir, folder or name)
    os.makedirs(d, exist_ok=True)
    put(os.path.join(d, "config.json"), (json.dumps(config_json(cfg), indent=2, sort_keys=True) + "\n").encode())
    data = safetensors_bytes(tensors(name, family, cfg))
    put(os.path.join(d, "model.safetensors"), data)
    for file, content in tokenizer_files(cfg).items():
        put(os.path.join(d, file), content)
    return d, hashlib.sha256(data).hexdigest()


def recipe(family, seed, index, head_dims=None):
    """The recipe of drawn model (family, seed, index): families.draw's config over the common one.
    head_dims narrows the head sizes drawn (an engine whose kernel takes only some); the name says so,
    since the weights are keyed by it."""
    if head_dims:
        layout, cfg = config(None, families.draw(family, seed, index, tuple(head_dims)))
        suffix = "-hd" + "x".join(str(h) for h in head_dims)
    else:
        layout, cfg = config(None, families.draw(family, seed, index))
        suffix = ""
    name = f"draw-{family.replace('_text', '').replace('_', '')}-{seed}-{index}{suffix}"
    return {"name": name, "folder": name, "layout": layout, "config": cfg}


def read_recipe(text, where):
    """A recipe from JSON text; SystemExit naming `where` and the field when it is not one."""
    try:
        r = json.loads(text)
    except ValueError as e:
        sys.exit(f"{where}: not JSON: {e}")
    if not isinstance(r, dict):
        sys.exit(f"{where}: expected an object {{\"name\", \"layout\", \"config\"}}")
    for key, kind in (("name", str), ("layout", str), ("config", dict)):
        if not isinstance(r.get(key), kind):
            sys.exit(f"{where}: /{key}: expected a {kind.__name__}")
    r.setdefault("folder", r["name"])
    for key in ("name", "folder"):
        if not r[key] or not all(ch.isalnum() or ch in "._-" for ch in r[key]) or r[key].startswith("."):
            sys.exit(f"{where}: /{key}: {r[key]!r} is not a folder name (letters, digits, '.', '_', '-')")
    return r


def draw_recipe(spec, head_dims_text=None):
    """--draw SPEC [--head-dims TEXT]: the recipe; ValueError naming the argument when it is not one."""
    parts = spec.split(":")
    drawable = families.DRAWN_FAMILIES + families.HYBRID_FAMILIES + families.DRAWN_ONLY_FAMILIES + families.ENCODER_FAMILIES
    if len(parts) != 3 or parts[0] not in drawable or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"--draw {spec}: expected FAMILY:SEED:INDEX, FAMILY one of {', '.join(drawable)}")
    head_dims = None
    if head_dims_text:
        try:
            head_dims = [int(h) for h in head_dims_text.split(",")]
        except ValueError:
            head_dims = None
        if not head_dims or any(h < 2 or h % 2 for h in head_dims):
            raise ValueError(f"--head-dims {head_dims_text}: expected even sizes of at least 2, separated by commas")
    return recipe(parts[0], int(parts[1]), int(parts[2]), head_dims)


def write_recipe(out_dir, text, where):
    """--recipe: writes the checkpoint of the recipe in `text`; its line (folder, path, digest)."""
    r = read_recipe(text, where)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        d, digest = write(out_dir, r["name"], (r["layout"], r["config"]), r["folder"], whole=True)
    return f"{r['folder']}\t{d}\tsha256(model.safetensors)={digest}"


def serve():
    """--serve (the module docstring): one request at a time from stdin, one reply each to stdout, in
    the protocol's frames (kvconform.protocol, the package's one implementation)."""
    protocol = _protocol()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not break the framing

    def reply(header):
        protocol.send(out, header)

    while True:
        try:
            request, _ = protocol.receive(inp)
        except protocol.Closed:
            return 0
        except ValueError as e:  # a header that is not a JSON object: the frame is read, the next one follows
            reply({"status": "error", "error": str(e)})
            continue
        try:
            op = request.get("op")
            if op == "hello":
                reply({"status": "ok", "name": "make_models"})
            elif op == "draw":
                reply({"status": "ok", "recipe": draw_recipe(request["spec"], request.get("head_dims"))})
            elif op == "write":
                reply({"status": "ok", "line": write_recipe(request["dir"], request["recipe"], "the write request's recipe")})
            else:
                reply({"status": "error", "error": f"unknown op {op!r} (hello, draw, write)"})
        except SystemExit as e:  # read_recipe's refusal, as --recipe prints it
            reply({"status": "error", "error": str(e.code)})
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
            reply({"status": "error", "error": f"{type(e).__name__}: {e}" if isinstance(e, KeyError) else str(e)})


def _protocol():
    """kvconform.protocol: the installed package's, else the checkout's (python/ beside engines/); the
    one-shot commands need neither."""
    try:
        from kvconform import protocol
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        from kvconform import protocol
    return protocol


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--draw", metavar="FAMILY:SEED:INDEX",
                    help="print the recipe of one drawn model (families.draw) and exit; --draw list prints the families")
    ap.add_argument("--head-dims", metavar="N,N,...",
                    help="--draw: draw head_dim from these sizes (default 8,16), for an engine that takes only some")
    ap.add_argument("--recipe", metavar="FILE", help="write the checkpoint of this recipe (a file, or - for standard input)")
    ap.add_argument("--serve", action="store_true", help="draw and write on request (the module docstring)")
    ap.add_argument("--set", default="zoo", choices=sorted(SETS), help="which models (default: the engine zoo)")
    ap.add_argument("--only", action="append", help="write only this model of the set (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the set's model names and exit")
    ap.add_argument("--oracle", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                                     "build/harness/kvc-model-oracle"),
                    help="--set wide: the model oracle that checks each draw's window sensitivity")
    a = ap.parse_args(argv)
    if a.serve:
        return serve()
    if a.draw == "list":
        print("\n".join(families.DRAWN_FAMILIES))
        return 0
    if a.draw:
        try:
            print(json.dumps(draw_recipe(a.draw, a.head_dims), sort_keys=True))
        except ValueError as e:
            ap.error(str(e))
        return 0
    models = SETS[a.set]
    if a.recipe:
        if not a.out_dir:
            ap.error("OUT_DIR is required")
        text = sys.stdin.read() if a.recipe == "-" else open(a.recipe).read()
        print(write_recipe(a.out_dir, text, "standard input" if a.recipe == "-" else a.recipe))
        return 0
    for name in a.only or []:
        if name not in models:
            ap.error(f"--only {name}: not a model of --set {a.set} ({', '.join(models)})")
    if a.list:
        print("\n".join(models))
        return 0
    if not a.out_dir:
        ap.error("OUT_DIR is required")
    os.makedirs(a.out_dir, exist_ok=True)
    if a.set == "wide":
        # Each draw is checked for window sensitivity and redrawn where a window one token wider
        # does not move its logits (sensitivity.py): a model that cannot tell windows apart never
        # judges one.
        import sensitivity
        only = [f for f in families.DRAWN_FAMILIES if sensitivity.wide_name(f, 0, 0) in a.only] if a.only else None
        with open(os.path.join(a.out_dir, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                failed = sensitivity.write_wide(a.out_dir, a.oracle, only=only, log=lambda line: print(line, flush=True))
            except RuntimeError as e:
                sys.exit(f"--set wide: {e}")
        return 1 if failed else 0
    # Concurrent writers of one folder take turns, so the second finds every file already right.
    with open(os.path.join(a.out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in a.only or models:
            d, digest = write(a.out_dir, name, models[name])
            print(f"{name}\t{d}\tsha256(model.safetensors)={digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
