#!/usr/bin/env python3
"""Which local-attention families of a transformers release the model oracle's registry reads.

    python3 engines/models/coverage.py [--release X] [--reports REPORT_DIR ...]   (default: the newest pinned release)

Lists every model folder of the release whose configuration speaks of `sliding_attention` or
`chunked_attention`, or whose modeling file has attention sinks, beside the `model_type`s the
registry in harness/src/engine/model.cpp reads (its kRegistry table), as a Markdown table. The
release is the newest of golden/requirements-*.txt unless --release names another; its own source is
read from golden/.venv-<release>. Standard library only. `kvconform site`
shows the same table (rows()). With engine report folders (--reports; by default the family matrix's,
scripts/family_matrix.sh) a fourth column says which engines ran each folder's models and how each fared.
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Why a folder of the newest release is not read (its decoder's model_type is not in kRegistry),
# from its own modeling file. A folder missing here prints "not read yet".
MULTIMODAL = "multimodal (vision or audio tower): its text decoder is not a registry family"
# What an encoder's model level lacks, precisely, and what its mask level has. The whole-sequence encoder forward
# exists (SequenceOracle::encode): a folder is read once its family's reader and checkpoints agree with transformers'
# own forward of its class (engines/transformers/encoder_agreement.py), as modernbert's, ultrabert's, embedding_gemma2's,
# openai_privacy_filter's and neomme's do, and the encoder-decoders t5gemma's and t5gemma2's (the decoder's logits against
# a source). Each of those families is drawn too (families.ENCODER_FAMILIES, make_models.py --set drawn-encoders): its
# draws agree with the same forward, and sensitivity.py requires each draw's reach and family constants to act.
MODEL_LEVEL = ("Model level: the oracle's forwards are a causal decoder's (SequenceOracle::extend) and an encoder's "
               "whole sequence (encode); this one is neither")
# Families whose masks are not recorded by golden/encoder_masks.py, with what they are.
UNRECORDED_MASKS = (". Mask level: not recorded yet (golden/encoder_masks.py records the encoders' masks only: modernbert, "
                    "ultrabert, embedding_gemma2, openai_privacy_filter, neomme, and t5gemma's and t5gemma2's encoders)")
REASONS = {
    "deepseek_v4": "not multi-head latent attention (no kv_lora_rank): one shared K=V head, and rules the registry "
    "lacks (5.13.1, 5.24.0 and 5.25.0 give the same float64 logits from one checkpoint). Every layer slides "
    "(create_sliding_window_causal_mask); compressed_sparse_attention and heavily_compressed_attention layers (the "
    "default layer_types has no other) append compressed entries to the window's keys: softmax-gated sums over "
    "windows of compress_rates tokens plus a position bias, RMS-normed and roped at the window's start "
    "(compress_rope_theta), entry w seen from position t when w < (t + 1) // rate; the CSA entries overlap two "
    "windows and a Lightning Indexer keeps index_topk of them per query, state carried across calls in the cache: no "
    "per-position rule of the registry. A sliding_attention-only config with only moe mlp_layer_types avoids the "
    "compressors and hash_moe's tid2eid[input_id] routing but still needs: hc_mult residual streams (mHC: pre, "
    "post and comb from a weightless RMS norm of the flattened streams times fn, comb projected by "
    "hc_sinkhorn_iters Sinkhorn-Knopp steps, hc_head's collapse before the final norm); q through q_a_proj, "
    "q_a_norm, q_b_proj and a weightless RMS norm per head; kv_proj and kv_norm as one head that is both key and "
    "value; interleaved rope on each head's trailing qk_rope_head_dim entries, the attention output's rope slice "
    "rotated back by its position; a grouped low-rank output projection (o_a_proj over o_groups, o_b_proj); "
    "sqrt(softplus) router scores, always renormalised; SwiGLU clamps (swiglu_limit) on the routed and shared "
    "experts; sinks and the selection bias are the registry's",
    "hy_v4": "no local attention: every layer is indexed_attention under create_causal_mask (listed for its sinks). "
    "Its rules, none the registry's: multi-head latent attention (q_a_proj, q_a_layernorm, q_b_proj; "
    "kv_a_proj_with_mqa's latent, kv_a_layernorm and kv_b_proj to qk_nope_head_dim keys and v_head_dim values per "
    "head, beside one shared rope key), a DSA indexer on the full indexer_types layers (each query's index_topk "
    "keys; shared layers reuse the last full layer's choice), a sigmoid gate per value entry, iHC (hc_mult "
    "channels, pre and post gates without comb, post times hc_magnitude) and a clamped-SwiGLU MoE. Its rope differs "
    "by release (hy_v4_vl's decoder alike): 5.24.0 rotates the rope slice's halves, 5.25.0 interleaved pairs (one "
    "tiny checkpoint's float64 logits differ by 0.16; 5.25.0 with 5.24.0's rotation put back matches it exactly). "
    "swiglu_limit <= 0 is documented to disable the clamp but zeroes the experts at 0 "
    "(engines/transformers/repro/hy_v4_swiglu_limit_zero_clamps.py)",
    "inkling2": "a hybrid: each hybrid_sliding / hybrid layer is sliding or full attention beside a linear-attention "
    "branch (dynamic short convolutions, a relative position bias, L2 clips) with block attention residuals and a MoE: "
    "not registry rules. Its own forward slides hybrid_sliding layers in 5.24.0 and 5.25.0 alike; "
    "create_masks_for_generate gave them a causal mask in 5.24.0, a windowed one from 5.25.0",
    "inkling2_loop": "inkling2's hybrid layers (see inkling2) run in a loop with message gates and message attention "
    "residuals: not registry rules",
    "qwen3_omni_moe": "multimodal; its text decoder (the thinker's qwen3_omni_moe_text, a MoE) does not slide: "
    "Qwen3OmniMoeThinkerTextAttention sets sliding_window None whatever the config says. Its local attention is in "
    "the talker's code predictor (qwen3-like layers over codec-code embeddings and the talker's hidden states, an embedding "
    "table and an lm_head per codebook chosen by the generation step; max_window_layers) and in Code2Wav (every layer sliding, window 72, codec codes to a "
    "waveform): neither is a token-to-logits text decoder",
    # Multimodal folders whose text decoder is read and found to need rules the registry lacks (5.24.0, 5.25.0).
    "deepseek_ocr2": "multimodal: the sliding_attention it names is its vision encoder's (DeepseekOcr2VisionEncoder: "
    "qwen2's layer_types and sliding_window, over the image patches and learned queries, its mask create_causal_mask "
    "with the patches one bidirectional block), which a text-only forward never runs; its text decoder (llama "
    "attention, deepseek_v2's MoE) has full causal attention only (create_causal_mask): no local attention of a "
    "decoder to read",
    "unlimited_ocr": "multimodal: its text decoder's reference_sliding_attention layers see every prefill key (the "
    "prompt and image tokens) and the last sliding_window of the tokens decoded after it "
    "(create_reference_sliding_window_causal_mask; a forward without a cache has no prefill boundary and sees every "
    "key): a rule that depends on where the prompt ended, not the registry's per-position full, sliding or chunked rule "
    "(SequenceOracle has no prefill length); its decoder is deepseek_ocr2's (llama attention, deepseek_v2's MoE), no "
    "registry family",
    "dots3_note": "multimodal (vision and audio towers): its text decoder is deepseek_v32's: multi-head latent attention "
    "(q and kv LoRA, the normed latents times sqrt(hidden / rank)), indexed_attention layers whose DSA indexer picks "
    "each query's top-k keys, sliding layers (by default full on layers 0, 1 and i % 4 == 1, window 512) and a MoE: "
    "none of it a registry rule",
    "hy_v4_vl": "multimodal: its text decoder is hy_v4's (multi-head latent attention with a DSA indexer, learned "
    "sinks, iHC hidden-state channels, a clamped-SwiGLU MoE; see hy_v4) with M-RoPE on its rope head dims",
    "diffusion_gemma": "block diffusion: a canvas attends bidirectionally within itself over a causal sliding cache "
    "(create_diffusion_decoder_attention_mask); no canvas mask or denoising loop in the registry. " + MODEL_LEVEL
    + UNRECORDED_MASKS,
    "muse_glimmer_assistant": "a block-diffusion drafter: noise embeddings of a block attend bidirectionally (sliding on "
    "its sliding layers) over the target model's projected hidden states; its input is another model's hidden "
    "states, not tokens. " + MODEL_LEVEL + UNRECORDED_MASKS,
    "kolibri1_1": "kolibri1's layers (read: kolibri1) with sparse attention the registry has not: on index_layers a "
    "weightless indexer picks each query's index_topk keys (with the first index_num_sink_tokens and the last "
    "index_num_local_tokens) from NVFP4-rounded compressed key summaries, and those layers attend NVFP4-rounded keys "
    "and values; KV sharing by kv_source_layers; a dense MLP of its own size on mlp_only_layers",
}


def newest_release():
    """The newest pinned transformers release (golden/requirements-X.txt, by version)."""
    found = [os.path.basename(p)[len("requirements-"):-len(".txt")]
             for p in glob.glob(os.path.join(ROOT, "golden", "requirements-*.txt"))]
    if not found:
        sys.exit("coverage: no golden/requirements-*.txt")
    return max(found, key=lambda v: tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.]", v)))


def registry():
    src = open(os.path.join(ROOT, "harness/src/engine/model.cpp")).read()
    m = re.search(r"kRegistry\b[^{]*\{(.*?)\n\};", src, re.S)
    if not m:
        sys.exit("coverage: no kRegistry table in harness/src/engine/model.cpp")
    types = set(re.findall(r'"([a-z0-9_-]+)"', m.group(1)))
    # The wrappers the registry reads (kWrappers: a multimodal class around a family's decoder): each row's first
    # string is the wrapper's model_type.
    w = re.search(r"kWrappers\b[^{]*\{(.*?)\n\};", src, re.S)
    return types | (set(re.findall(r'\{"([a-z0-9_]+)"', w.group(1))) if w else set())


def spelled(model_type):
    """A model_type as its folder spells it: modernbert_decoder's type is modernbert-decoder."""
    return model_type.replace("-", "_")


def own_types(folder, types):
    """The types of `types` that are the folder's own: its name, or its name and a suffix (gemma3's
    gemma3_text), not a family its name extends (mistral3's mistral)."""
    return [t for t in types if spelled(t) == folder or spelled(t).startswith(folder + "_")]


class NotInstalled(Exception):
    """The release's own source is not installed here."""


def rows(release):
    """(folder, local attention kinds, what the registry reads) for every folder of the release that
    has local attention or a registry family; raises NotInstalled without golden/.venv-RELEASE."""
    models = glob.glob(os.path.join(ROOT, f"golden/.venv-{release}/lib/python3*/site-packages/transformers/models"))
    if not models:
        raise NotInstalled(f"golden/.venv-{release} is not installed (bash golden/setup_env.sh {release})")
    covered = registry()
    out = []
    for folder in sorted(os.listdir(models[0])):
        path = os.path.join(models[0], folder)
        text = lambda pattern: "".join(open(f, errors="replace").read() for f in sorted(glob.glob(os.path.join(path, pattern))))
        config, modeling = text("configuration_*.py"), text("modeling_*.py")
        kinds = [k for k, hit in (("sliding", "sliding_attention" in config), ("chunked", "chunked_attention" in config),
                                  ("sinks", re.search(r"\bsinks\b", modeling) is not None)) if hit]
        types = set(re.findall(r'model_type\s*=\s*"([a-z0-9_-]+)"', config))
        # A folder's own model types (a multimodal folder's text config may name another family's).
        related = sorted(t for t in types & covered if spelled(t).startswith(folder) or folder.startswith(spelled(t)))
        # Read only where the registry reads the folder's own type (gemma3's gemma3_text, qwen2_vl): a
        # folder whose configuration merely names a registry family as its decoder's (mistral3's mistral,
        # qwen2_audio's qwen2) is not, since the registry refuses its config.json.
        mine = own_types(folder, related)
        decoder = [t for t in related if t not in mine]
        if kinds or related:
            why = REASONS.get(folder) or (f"a wrapper whose config.json the registry refuses; its decoder's family "
                                          f"{', '.join(decoder)} is read" if decoder else "not read yet")
            out.append((folder, ", ".join(kinds) or "through its decoder's config", ", ".join(mine) or "not read: " + why))
    return out


# ---- Engines per folder: which engines read a folder's models and how each fares there. ----
# From engine report folders (`kvconform engine ... --report-dir`, scripts/family_matrix.sh writes
# reports/family-matrix*): each engine case's model has a model_type (its config.json), which names a
# folder. An engine reads a folder where it answered at least one case of it; a folder whose every case
# it SKIPped is refused with the engine's own message (its support list speaks through its refusals).
DEFAULT_REPORTS = ("reports/family-matrix", "reports/family-matrix-vllm")


def folder_of(model_type, folders):
    """The release folder of a model_type: its own name, else the longest folder it extends with "_"
    (gemma3_text: gemma3, qwen2_vl_text: qwen2_vl)."""
    if model_type in folders:
        return model_type
    longer = [f for f in folders if model_type.startswith(f + "_")]
    return max(longer, key=len) if longer else None


def engine_results(results, folders):
    """{folder: {engine: {"OK": n, "FAIL": n, "DEVIATION": n, "expected": n, "SKIP": n, "refusal": first SKIP
    message}}} from (engine, model_type, status, message, expected) tuples; model types of no folder are left out."""
    table = {}
    for engine, model_type, status, message, expected in results:
        folder = folder_of(model_type, folders)
        if folder is None:
            continue
        cell = table.setdefault(folder, {}).setdefault(engine, {"OK": 0, "FAIL": 0, "DEVIATION": 0, "expected": 0, "SKIP": 0})
        cell[status] = cell.get(status, 0) + 1
        cell["expected"] += 1 if expected else 0
        if status == "SKIP":
            cell.setdefault("refusal", message)
    return table


def fares(cell):
    """One engine's cell: "12 OK, 2 DEVIATION (2 expected), 1 FAIL", or "refused: MESSAGE" where it answered none."""
    if not any(cell[s] for s in ("OK", "FAIL", "DEVIATION")):
        return "refused: " + " ".join(cell.get("refusal", "").split())[:120]
    parts = [f"{cell[s]} {s}" for s in ("OK", "DEVIATION", "FAIL", "SKIP") if cell[s]]
    if cell["expected"]:
        parts[[p.split()[1] for p in parts].index("DEVIATION") if cell["DEVIATION"] else -1] += f" ({cell['expected']} expected)"
    return ", ".join(parts)


def engines_cell(table, folder, registry_reads):
    """The engines column of a folder: each engine that ran it and how it fares, "-" where none did."""
    cells = table.get(folder, {})
    text = "; ".join(f"{engine}: {fares(cells[engine])}" for engine in sorted(cells))
    if not cells and registry_reads:
        return "not run (no report of its models)"
    return text or "-"


def read_results(dirs):
    """(engine, model_type, status, message, expected) of every engine case of the report folders, read by
    python/kvconform/site.py (standard library only, loaded by path)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("kvconform_site", os.path.join(ROOT, "python", "kvconform", "site.py"))
    site = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = site  # its dataclasses look their module up there
    spec.loader.exec_module(site)
    families = site.Families([os.path.join(ROOT, "build", d) for d in ("engine-models-families", "engine-models-vllm",
                                                                        "engine-models-drawn", "engine-models")])
    out = []
    for i, d in enumerate(dirs):
        for c in site.read_report(d, i)[1]:
            site.classify(c, families)
            if c.suite == "engine" and c.family:
                out.append((c.backend, c.family, c.status, c.message, bool(c.expectation)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default=None, help="a pinned release (default: the newest of golden/requirements-*.txt)")
    ap.add_argument("--reports", action="append", default=None,
                    help="an engine report folder (repeatable; default: " + ", ".join(DEFAULT_REPORTS) + " where they exist)")
    a = ap.parse_args()
    a.release = a.release or newest_release()
    try:
        found = rows(a.release)
    except NotInstalled as e:
        sys.exit(f"coverage: {e}")
    dirs = a.reports if a.reports is not None else [d for d in (os.path.join(ROOT, r) for r in DEFAULT_REPORTS)
                                                      if os.path.isfile(os.path.join(d, "summary.json"))]
    try:
        table = engine_results(read_results(dirs), [r[0] for r in found]) if dirs else {}
    except Exception as e:  # site.SiteError: a folder that is not a report
        sys.exit(f"coverage: {e}")
    print(f"| transformers {a.release} folder | local attention | registry reads | engines ({', '.join(dirs) or 'no reports'}) |")
    print("| --- | --- | --- | --- |")
    for folder, kinds, mine in found:
        print(f"| `{folder}` | {kinds} | {mine} | {engines_cell(table, folder, not mine.startswith('not read'))} |")
    print(f"\n{sum(1 for r in found if not r[2].startswith('not read'))} of {len(found)} folders read by the registry.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
