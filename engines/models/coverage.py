#!/usr/bin/env python3
"""Which local-attention families of a transformers release the model oracle's registry reads.

    python3 engines/models/coverage.py [--release 5.24.0]

Lists every model folder of the release whose configuration speaks of `sliding_attention` or
`chunked_attention`, or whose modeling file has attention sinks, beside the `model_type`s the
registry in harness/src/engine/model.cpp reads (its kRegistry table), as a Markdown table. The
release's own source is read from golden/.venv-<release>. Standard library only. `kvconform site`
shows the same table (rows()).
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Why a folder of the newest release is not read (its decoder's model_type is not in kRegistry),
# from its own modeling file. A folder missing here prints "not read yet".
MOE = "a MoE decoder: its routing or expert layout is not in the registry's MoE configuration yet"
HYBRID = "a hybrid with linear-attention or recurrent layers: no such layer rule in the registry"
MULTIMODAL = "multimodal (vision or audio tower): its text decoder is not a registry family"
ENCODER = "an encoder, seq2seq or bidirectional model: not a causal decoder"
REASONS = {
    "afmoe": MOE, "beam": MOE, "cohere2_moe": MOE, "exaone_moe": MOE, "flint": MOE + " (with sinks)",
    "kolibri1": MOE, "laguna": MOE, "mellum": MOE, "mimo_v2_flash": MOE + " (with sinks)",
    "deepseek_v4": "multi-head latent attention (kv_lora_rank) and a MoE", "hy_v4": "multi-head latent attention and a MoE",
    "lara_mini": HYBRID, "lfm3": HYBRID, "recurrent_gemma": HYBRID, "dory": HYBRID, "inkling2": HYBRID,
    "inkling2_loop": HYBRID,
    "cohere_compass": MULTIMODAL, "deepseek_ocr2": MULTIMODAL, "dots3_note": MULTIMODAL, "gemma3n": MULTIMODAL
    + " (and per-layer input embeddings, AltUp, KV sharing)", "gemma4_unified": MULTIMODAL, "hy_v4_vl": MULTIMODAL,
    "muse_glimmer": MULTIMODAL, "muse_spark": MULTIMODAL, "qwen2_5_omni": MULTIMODAL, "qwen2_5_vl": MULTIMODAL,
    "qwen2_vl": MULTIMODAL, "qwen3_omni_moe": MULTIMODAL, "step3p7": MULTIMODAL, "unlimited_ocr": MULTIMODAL,
    "neomme": MULTIMODAL,
    "embedding_gemma2": ENCODER, "modernbert": ENCODER, "ultrabert": ENCODER, "t5gemma": ENCODER, "t5gemma2": ENCODER,
    "openai_privacy_filter": ENCODER + " (token classification)", "diffusion_gemma": ENCODER + " (diffusion)",
    "muse_glimmer_assistant": ENCODER,
    "modernbert_decoder": "a causal decoder with its own tensor layout (fused Wqkv, GeGLU Wi, biased LayerNorms) the loader does not map",
}


def registry():
    src = open(os.path.join(ROOT, "harness/src/engine/model.cpp")).read()
    m = re.search(r"kRegistry\b[^{]*\{(.*?)\n\};", src, re.S)
    if not m:
        sys.exit("coverage: no kRegistry table in harness/src/engine/model.cpp")
    return set(re.findall(r'"([a-z0-9_]+)"', m.group(1)))


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
        types = set(re.findall(r'model_type\s*=\s*"([a-z0-9_]+)"', config))
        # A folder's own model types (a multimodal folder's text config may name another family's).
        mine = sorted(t for t in types & covered if t.startswith(folder) or folder.startswith(t))
        if kinds or mine:
            out.append((folder, ", ".join(kinds) or "through its decoder's config",
                        ", ".join(mine) or "not read: " + REASONS.get(folder, "not read yet")))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="5.24.0")
    a = ap.parse_args()
    try:
        found = rows(a.release)
    except NotInstalled as e:
        sys.exit(f"coverage: {e}")
    print(f"| transformers {a.release} folder | local attention | registry reads |")
    print("| --- | --- | --- |")
    for folder, kinds, mine in found:
        print(f"| `{folder}` | {kinds} | {mine} |")
    print(f"\n{sum(1 for r in found if not r[2].startswith('not read'))} of {len(found)} folders read by the registry.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
