#!/usr/bin/env python3
"""An independent float64 forward of the tiny zoo (no transformers: config.json + model.safetensors
read by hand, torch only for the arithmetic), to check that nocache_forward.py --exact really is
transformers' model in exact float64 arithmetic.

    golden/.venv-5.24.0/bin/python engines/transformers/reference64.py MODELS_DIR [--n 100]

Per model, one JSON line: the max |logit| difference between this forward and nocache_forward
--exact (should be at float64 rounding, ~1e-12), and plain (the float32 islands).

Semantics written out (what the C++ oracle must also do): Gemma embeddings are scaled by
sqrt(hidden_size); Gemma RMSNorm multiplies by (1 + w), Mistral's by w; Gemma2/3 have the four
norms per layer (input, post-attention, pre- and post-feedforward) around each residual branch;
Gemma3 applies q_norm / k_norm per head before the rotary embedding; rotary is rotate-half with
inv_freq = base^(-2i/head_dim), base rope_local_base_freq on Gemma3 sliding layers and rope_theta
elsewhere; scores are scaled by query_pre_attn_scalar^-0.5 (Gemma) or head_dim^-0.5 (Mistral),
Gemma2 soft-caps them (cap * tanh(s / cap)) before the mask; a sliding layer lets query i see key j
when 0 <= i - j < sliding_window; GQA head h reads KV head h // (heads / kv_heads); Gemma's MLP is
gelu_tanh(gate) * up, Mistral's silu(gate) * up; Gemma2 soft-caps the final logits.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32"
        a, b = v["data_offsets"]
        vals = struct.unpack(f"<{(b - a) // 4}f", data[a:b])
        out[k] = torch.tensor(vals, dtype=torch.float64).reshape(v["shape"])
    return out


def forward(model_dir, tokens):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    mt = cfg["model_type"]
    gemma = mt in ("gemma2", "gemma3_text")
    H, KV, D, hid = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
    eps = cfg["rms_norm_eps"]
    L = cfg["num_hidden_layers"]
    layer_types = cfg.get("layer_types") or ["sliding_attention" if cfg.get("sliding_window") else "full_attention"] * L
    n = len(tokens)

    def norm(x, w):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return y * (1.0 + w) if gemma else w * y

    def rope(x, base):  # x [n, heads, D]
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], -1)[:, None, :]
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * emb.cos() + torch.cat([-x2, x1], -1) * emb.sin()

    x = W["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * math.sqrt(hid)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    for li in range(L):
        p = f"model.layers.{li}."
        sliding = layer_types[li] == "sliding_attention"
        h = norm(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(n, H, D)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(n, KV, D)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(n, KV, D)
        if mt == "gemma3_text":
            q = norm(q, W[p + "self_attn.q_norm.weight"])
            k = norm(k, W[p + "self_attn.k_norm.weight"])
        base = cfg["rope_local_base_freq"] if (mt == "gemma3_text" and sliding) else cfg["rope_theta"]
        q, k = rope(q, base), rope(k, base)
        scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else D ** -0.5
        allowed = (i - j >= 0)
        if sliding:
            allowed &= (i - j < cfg["sliding_window"])
        outs = []
        for hh in range(H):
            kv = hh // (H // KV)
            s = (q[:, hh] @ k[:, kv].T) * scale
            if cfg.get("attn_logit_softcapping"):
                c = cfg["attn_logit_softcapping"]
                s = torch.tanh(s / c) * c
            s = s.masked_fill(~allowed, float("-inf"))
            outs.append(torch.softmax(s, -1) @ v[:, kv])
        a = torch.cat(outs, -1) @ W[p + "self_attn.o_proj.weight"].T
        if gemma:
            x = x + norm(a, W[p + "post_attention_layernorm.weight"])
            h = norm(x, W[p + "pre_feedforward_layernorm.weight"])
        else:
            x = x + a
            h = norm(x, W[p + "post_attention_layernorm.weight"])
        g = h @ W[p + "mlp.gate_proj.weight"].T
        g = torch.nn.functional.gelu(g, approximate="tanh") if gemma else torch.nn.functional.silu(g)
        m = (g * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
        x = x + (norm(m, W[p + "post_feedforward_layernorm.weight"]) if gemma else m)
    x = norm(x, W["model.norm.weight"])
    logits = x @ W.get("lm_head.weight", W["model.embed_tokens.weight"]).T
    if cfg.get("final_logit_softcapping"):
        c = cfg["final_logit_softcapping"]
        logits = torch.tanh(logits / c) * c
    return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--n", type=int, default=100)
    a = ap.parse_args()
    import transformers
    import nocache_forward as nf  # a sibling: the script's folder is on sys.path
    toks = [(7 * i * i + 3 * i + 5) % 253 + 3 for i in range(a.n)]
    names = sorted(os.listdir(a.models_dir))
    plain = {m: nf.forward(nf.load_float64(os.path.join(a.models_dir, m), False)[0], toks) for m in names}
    for m in names:
        ref = forward(os.path.join(a.models_dir, m), toks)
        exact = nf.forward(nf.load_float64(os.path.join(a.models_dir, m), True)[0], toks)
        print(json.dumps({"model": m, "transformers": transformers.__version__, "n": a.n,
                          "max_abs_diff_vs_exact": float((ref - exact).abs().max()),
                          "max_abs_diff_vs_plain": float((ref - plain[m]).abs().max())}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
