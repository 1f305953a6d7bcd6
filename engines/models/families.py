"""The families set: one or more tiny checkpoints per family of the model oracle's registry beyond
the engine zoo (docs/engines.md, "The family registry"), written by make_models.py --set families.

These are not engine CI models: they exist so engines/transformers/oracle_agreement.py can hold the
oracle's description of each family to transformers' own float64 forward. Same widths and weight
stream as the zoo (make_models.py); each entry names what its config encodes, in the keys real
checkpoints of the family use:

  llama4-c4        llama4_text, 4 layers, attention_chunk_size 4, no layer_types (rope layers chunked,
                   the NoPE layer 3 full, from the default no_rope_layer_interval), use_qk_norm,
                   attention temperature tuning (floor_scale 4), MoE on layers 1 and 3 (4 experts, top 2,
                   shared expert), dense MLP of intermediate_size_mlp on layers 0 and 2
  llama4-explicit  llama4_text, explicit no_rope_layers [0, 1, 1] and layer_types, chunk 3, one MoE layer
  llama4-top1      llama4_text as Llama 4 Scout encodes it: 4 layers, chunk 4, a MoE on every layer
                   (interleave_moe_layer_step 1) routing each token to one expert
  qwen2-mwl2       qwen2, 4 layers, use_sliding_window, window 4, max_window_layers 2 (layers 2, 3 slide)
  qwen2-nosw       qwen2, sliding_window 4 but use_sliding_window false: every layer full
  qwen3-w3         qwen3, 3 layers, window 3, explicit layer_types [S, F, S], q/k RMS norms, attention_bias
  gptoss-w4        gpt_oss, 4 layers, no layer_types (alternating: even layers slide), window 4, sinks,
                   YaRN rope (factor 8, truncate false: a fractional ramp over head_dim 16), a MoE on every
                   layer (4 experts, top 2, router and expert biases, clamped SwiGLU)
  smollm3-nope     smollm3, 4 layers, default no_rope_layers (layer 3 NoPE), use_sliding_window with
                   window 3 and no layer_types (the NoPE layer slides), attention_bias
  cohere2-w3       cohere2, 4 layers, sliding_window_pattern 4 and no layer_types (layer 3 full, without
                   rope), window 3, LayerNorm, the parallel block, logit_scale 0.5, tied
  ministral-w4     ministral, 3 layers, window 4 and no layer_types: every layer slides (4.56.2 has no
                   ministral: its row is ABSENT)
  phi3-w4          phi3, 3 layers, window 4 on every layer, partial_rotary_factor 0.5, fused qkv_proj and
                   gate_up_proj
  gemma4-shared    gemma4_text, 4 layers, layer_types [S, F, S, S] (the last forced full), window 3, full layers
                   with global_head_dim 32 (sliding 16) and proportional rope (partial_rotary_factor 0.25: 4 of
                   16 frequencies, base 1e6; sliding base 1e4), num_kv_shared_layers 2 (layer 2 reads layer 0's
                   K/V, layer 3 layer 1's), v_norm, layer_scalar, final soft-cap, no per-layer input embeddings
  gemma4-keqv      gemma4_text, 3 layers, no layer_types (5 : 1 with the last full: S, S, F), window 4,
                   attention_k_eq_v with num_global_key_value_heads 1 on the full layer, partial 0.5, untied
  gemma3n-w3       gemma3n_text, 5 layers, no layer_types (4 sliding : 1 full), window 3, intermediate_size listed per
                   layer, per-layer input embeddings of 16, AltUp of 4
                   streams, LAuReL rank 8, activation sparsity [0.95, 0.6, 0, 0.3, 0], the default final soft-cap 30,
                   no KV sharing (4.56.2 and 4.57.6 share K/V only through a cache), tied
  gemma3n-explicit gemma3n_text, 3 layers, layer_types [S, F, S], window 2, per-layer inputs of 8, AltUp of 3 streams on
                   altup_active_idx 1 without altup_correct_scale, LAuReL rank 4, sparsity [0, 0.95, 0.5], soft-cap 8,
                   full base 5e5, untied
  olmo3-w3         olmo3, 4 layers, no layer_types (3 sliding : 1 full), window 3, olmo2's post-norms, q/k norms
                   over the whole projection
  olmo3-bias       olmo3, 3 layers, explicit irregular layer_types [F, S, S], window 2, attention_bias, tied
  exaone4-w3       exaone4, 4 layers, sliding_window_pattern 4 and no layer_types (layer 3 full without rope),
                   window 3, post-norms, q/k norms per head
  exaone4-nowindow exaone4, 2 layers, sliding_window null with layer_types all full: rope on every layer
  vaultgemma-w4    vaultgemma, 3 layers, no layer_types (alternating), window 4, soft-caps, pre-norms only
  cwm-w3           cwm, 5 layers, no layer_types (layer i full iff i % 4 == 0: F, S, S, S, F), window 3, untied
  graniteswa-w4    granite_swa, 4 layers, no layer_types (F, S, S, S), window 4, sinks, layer_rope_theta with a
                   NoPE layer and two bases, embedding / attention / residual multipliers, logits_scaling,
                   attention_bias
  vaultgemma-allfull vaultgemma, 3 layers, window 4 but layer_types all full (the released checkpoint's
                   config): every layer full
  qwen2moe-w3      qwen2_moe, 3 layers, use_sliding_window with every layer sliding (window 3), a MoE on layers 0
                   and 2 (decoder_sparse_step 1, mlp_only_layers [1]): softmax over 4 experts, top 2, not
                   renormalised, a shared expert gated by sigmoid(shared_expert_gate x)
  qwen2moe-norm    qwen2_moe, 2 layers, no sliding, decoder_sparse_step 2 (layer 1 the MoE), norm_topk_prob, top 3 of 6
  dots1-w3         dots1, 4 layers, window 3, max_window_layers 1 (layers 1-3 slide), first_k_dense_replace 1, sigmoid
                   routing over 8 experts in 2 groups (topk_group 1), top 2 by score + e_score_correction_bias,
                   renormalised, routed_scaling_factor 2.5, one shared expert, q/k norms, attention_bias
  dots1-nonorm     dots1, 3 layers, explicit layer_types [S, F, S], window 2, no groups, top 1 of 4, not renormalised
  granitemoeswa-w3 granitemoe_swa (5.24.0 only), 4 layers, no layer_types (F, S, S, S), window 3, sinks, granite's
                   multipliers, a MoE on every layer: top 2 of 4 logits softmaxed among themselves, a shared expert
  granitemoeswa-noshared granitemoe_swa, 2 layers, explicit layer_types [S, S], window 2, top 1 of 3, no shared expert
  exaonemoe-w3     exaone_moe (5.13.1 on), 4 layers, sliding_window_pattern 2 and no layer_types (S, F, S, F; rope on
                   the sliding layers only), window 3, first_k_dense_replace 1, sigmoid routing over 8 experts in 4
                   groups (topk_group 2) by score + e_score_correction_bias, top 3, renormalised, times 2.5, two shared
                   experts
  mellum-w3        mellum (5.13.1 on), 4 layers, layer_types [S, S, F, S], window 3, one rope base per layer type (full
                   5e5, sliding 1e4), mlp_layer_types [dense, sparse, sparse, sparse], softmax over 6 experts, top 2,
                   renormalised, no shared expert, per-head q/k norms, attention_bias
  mellum-defaults  mellum, 3 layers, every default: no layer_types (every layer full), no rope_parameters (full 5e5),
                   no mlp_layer_types (every layer sparse), top 3 of 4, not renormalised, tied
  flint-w3         flint (5.24.0 on), 6 layers, no layer_types (F, F, S, S, S, F: full on 0, 1, i % 4 == 1 and the last; rope on
                   the sliding layers only), window 3, sinks, no mlp_only_layers (layers 0, 1 dense), sigmoid over 4
                   experts, top 2, renormalised, an ungated shared expert, per-head q/k norms, attention_bias
  flint-explicit   flint, 3 layers, layer_types [S, F, S], window 2, mlp_only_layers [] (every layer a MoE), top 1 of 3,
                   not renormalised, tied
  cohere2moe-average cohere2_moe (5.13.1 on), 5 layers, first_k_dense_replace 1 and no layer_types (F, S, S, S, F: the dense
                   first layer full and rotated, its prefix pattern 1; then sliding_window_pattern 4), window 3, LayerNorm,
                   the parallel block, softmax of the top 2 of 4 experts' logits, one shared expert averaged with the
                   routed output (the default strategy), a dense MLP of prefix_dense_intermediate_size, attention_bias,
                   logit_scale 0.5, tied
  cohere2moe-sigmoid cohere2_moe, 3 layers, layer_types [S, F, S] and mlp_layer_types [sparse, dense, sparse],
                   prefix_dense_sliding_window_pattern 2 (the dense full layer without rope), window 2, RMSNorm
                   (rms_norm_eps set), sigmoid of the top 2 of 6, renormalised, two shared experts summed, untied
  afmoe-w3         afmoe (5.13.1 on), 5 layers, no layer_types (S, S, S, F, S: global_attn_every_n_layers 4; rope on the
                   sliding layers only), window 3, per-head q/k norms, each attention output element gated by its own
                   sigmoid(gate_proj h), sandwich norms, num_dense_layers 1, sigmoid over 4 experts by score +
                   expert_bias, top 2, renormalised, times route_scale 1.5, one shared expert, mup_enabled
  afmoe-explicit   afmoe, 3 layers, layer_types [F, S, S], window 2, num_dense_layers 0, top 1 of 3, two shared experts,
                   tied
  kolibri1-w3      kolibri1 (5.24.0 on), 5 layers, no layer_types (S, S, S, S, F: every fifth layer full; rope on the
                   sliding layers only), window 3, per-head q/k norms, sandwich norms under its own names, every layer a
                   MoE: the top 2 of 4 experts by router logit + e_score_correction_bias, weighted by their logits'
                   sigmoids, not renormalised (the default), an ungated shared expert, untied
  kolibri1-explicit kolibri1, 3 layers, layer_types [S, F, S], window 2, top 2 of 6, renormalised, tied
  laguna-w3        laguna (5.13.1 on), 4 layers, layer_types [S, F, S, S], window 3, no rope_parameters (full: base 5e5,
                   half of each head rotated; sliding: base 1e4, all of it), per-head q/k norms, each head's output times
                   softplus(g_proj h), no mlp_layer_types (the first layer dense), sigmoid over 4 experts by score +
                   e_score_correction_bias after a router logit soft-cap of 1, top 2, renormalised, an ungated shared
                   expert, untied
  laguna-explicit  laguna, 3 layers, layer_types [F, S, F], window 2, rope_parameters per layer type (full: base 1e6,
                   factor 0.25; sliding: base 1e4, factor 0.5), gating "per-element", mlp_layer_types [sparse, dense,
                   sparse], top 1 of 3, moe_routed_scaling_factor 2, attention_bias, tied
  exaonemoe-mlptypes exaone_moe, 3 layers, explicit layer_types [F, S, S] and mlp_layer_types [sparse, dense, sparse],
                   window 2, top 1 of 4, not renormalised, routed_scaling_factor 1
  lfm3-w3          lfm3 (5.24.0 on), 5 layers, no layer_types (conv, conv, full, conv, sliding), window 3, short
                   convolutions of conv_L_cache 3, the per-head attention gate, sandwich norms, proportional rope 0.5
                   (base 1e6) on the full layer and base 1e4 on the sliding one, tied
  lfm3-explicit    lfm3, 4 layers, explicit layer_types [S, conv, S, F], window 2, conv_L_cache 4 with conv_bias, no
                   attention gate, no sandwich norms, default rope on every attention layer, untied
  recurrentgemma-w3 recurrent_gemma, 4 layers, no block_types (recurrent, recurrent, attention, recurrent), window 3,
                   RG-LRU blocks over lru_width 64 (hidden_size) after conv1d_width 4 taps, rope on half of each head,
                   the default logits_soft_cap 30, tied
  recurrentgemma-explicit recurrent_gemma, 3 layers, block_types [attention, recurrent] (A, R, A), window 2, conv1d_width
                   2, lru_width 48 (12 per gate block), one KV head, attention_bias, logits_soft_cap 8, rope base 5e5, untied
  lara-w3          lara_mini (5.24.0 on), 5 layers, no layer_types (linear, sliding, linear, full, sliding), window 3,
                   gated DeltaNet blocks of 2 q/k heads of 16 and 4 value heads of 8 after a 4-tap SiLU convolution, rope
                   on the sliding layers only (the full layer NoPE), per-head q/k norms, a softmax over 4 experts, top 2,
                   renormalised, an ungated shared expert on every layer, tied
  lara-explicit    lara_mini, 4 layers, layer_types [S, linear, F, linear], window 2, 2 taps, one q/k head of 8 for 3
                   value heads of 16, attention_bias, top 1 of 3 not renormalised, rope base 5e5, untied
  modernbertdec-w3 modernbert-decoder, 4 layers, no layer_types (F, S, F, S: global_attn_every_n_layers 2), local_attention
                   6 (window 3), ModernBERT's layout (embedding LayerNorm, no norm before layer 0's attention, Wi's
                   GeGLU with the exact gelu, the dense + gelu + LayerNorm prediction head before the decoder) with every
                   bias (norm_bias, attention_bias, mlp_bias, classifier_bias, decoder_bias), tied
  modernbertdec-explicit modernbert-decoder, 3 layers, layer_types [S, S, F], local_attention 5 (window 2), no biases at
                   all, gelu_pytorch_tanh, rope bases 160000, untied
  beam-w3          beam (5.24.0 on), 5 layers, no layer_types (S, S, S, S, F: every sixth layer and the last full), window 3,
                   no rope_parameters (sliding: base 1e4; full: NoPE, its queries times (1 + (pos + 1)/2048) ** 0.1),
                   per-head q/k norms, each attention output element times sigmoid(gate_proj h + gate_bias[head]),
                   sandwich norms with weight w and the depth-scaled residual, no mlp_layer_types (layers 0-2 dense),
                   sigmoid over 8 experts in 4 groups (topk_group 2) by score + e_score_correction_bias, top 3,
                   renormalised, times 2.5 (the defaults), no shared expert, final soft-cap 30, attention_bias, untied
  beam-explicit    beam, 3 layers, layer_types [S, F, S], window 2, rope_parameters {sliding: null (NoPE, scaled
                   queries), full: base 5e5}, mlp_layer_types [sparse, dense, sparse], n_group 1, top 1 of 4, not
                   renormalised, routed_scaling_factor 1, final_logit_softcapping null, tied
  mimo-w3          mimo_v2_flash (5.13.1 on), 4 layers, no layer_types (F, S, S, S), window 3, head_dim 24 and v_head_dim 16,
                   twice the KV heads and sinks on the sliding layers, attention_value_scale 0.707, rope factor 0.334 per
                   layer type, layer 0 dense, sigmoid over 8 experts in 2 groups, top 2, no shared expert, attention_bias
  mimo-explicit    mimo_v2_flash, 3 layers, layer_types [S, F, S], window 2, rope per layer type (full 1e6 factor 0.5, sliding
                   1e4 factor 1), mlp_layer_types [sparse, dense, sparse], top 1 of 4, not renormalised, scale 2, value scale
                   null, tied
  coherecompass-text-nope  cohere_compass_text (5.24.0 on; CohereCompassForCausalLM), 4 layers, layer_types [S, F, S, S],
                   window 3, rope_parameters {sliding: base 1e4 with M-RoPE sections, full: null (NoPE)}, cohere2's
                   LayerNorm and parallel block, rope rotating halves, logit_scale 0.5, tied
  coherecompass-text-full  cohere_compass_text, 3 layers, no layer_types (every layer full), rope_parameters {full: base
                   5e5}, no logit_scale (1), untied
  dory-w3          dory (5.24.0 on), 5 layers, no layer_types (S, S, S, F, S), window 3, n_input_layers 1 and
                   n_output_layers 1 (layers 1-3 looped, the default 2 passes: 8 layers unrolled), default rope (sliding
                   1e4, full 1e7), initializer_range 0.02, untied
  dory-saved       dory as transformers saves it: layer_types in (attention, "mlp") block pairs and every layer count
                   doubled (4 layers [S, F, S, S], n_input_layers 0, layers 0-1 looped 3 times, 2 output layers),
                   window 2, rope_parameters per type (sliding 1e4, full 5e5), attention_bias, mlp_bias,
                   gelu_pytorch_tanh, initializer_range 0.05, ngpt_alpha_init 0.1, tied
"""

S, F, C = "sliding_attention", "full_attention", "chunked_attention"
# An override value that removes a common key from the config: a gemma4 config with "rope_scaling": null
# loads in 5.24.0 with rope_parameters None and fails (TypeError in Gemma4TextRotaryEmbedding).
ABSENT = "<absent>"


def _rope(theta):
    return {"rope_theta": theta, "rope_parameters": {"rope_type": "default", "rope_theta": theta}}


LLAMA4 = {
    "architectures": ["Llama4ForCausalLM"],
    "model_type": "llama4_text",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "intermediate_size": 32,
    "intermediate_size_mlp": 128,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "use_qk_norm": True,
    "attn_temperature_tuning": True,
    "floor_scale": 4,
    "attn_scale": 0.1,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}

YARN = {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 4096}

GEMMA4 = {
    "architectures": ["Gemma4ForCausalLM"],
    "model_type": "gemma4_text",
    "rope_scaling": ABSENT,
    "hidden_activation": "gelu_pytorch_tanh",
    "global_head_dim": 32,
    "hidden_size_per_layer_input": 0,
    "vocab_size_per_layer_input": 256,
    "attention_k_eq_v": False,
    "num_kv_shared_layers": 0,
    "enable_moe_block": False,
    "use_double_wide_mlp": False,
    "final_logit_softcapping": None,
    "tie_word_embeddings": True,
    "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                        F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}},
}

GEMMA3N = {  # Gemma3nTextConfig's keys; rope bases in both the 4.x keys and 5.x's rope_parameters
    "architectures": ["Gemma3nForCausalLM"],
    "model_type": "gemma3n_text",
    "hidden_activation": "gelu_pytorch_tanh",
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0},
                        S: {"rope_type": "default", "rope_theta": 10000.0}},
    "num_kv_shared_layers": 0,
    "altup_coef_clip": 120.0,
    "tie_word_embeddings": True,
}

MODELS_GRANITE_SWA = {  # granite_swa's encoding (graniteswa-w4 below), which granitemoe_swa shares
    "architectures": ["GraniteSWAForCausalLM"],
    "model_type": "granite_swa",
    "num_hidden_layers": 4,
    "hidden_act": "silu",
    "sliding_window": 4,
    "layer_rope_theta": [10000.0, 0, 10000.0, 500000.0],
    "embedding_multiplier": 1.5,
    "attention_multiplier": 0.3,
    "residual_multiplier": 0.8,
    "logits_scaling": 2.0,
    "attention_bias": True,
    "tie_word_embeddings": True,
    **_rope(10000.0),
}

QWEN2_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "model_type": "qwen2_moe",
    "hidden_act": "silu",
    "qkv_bias": True,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}

DOTS1 = {
    "architectures": ["Dots1ForCausalLM"],
    "model_type": "dots1",
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "n_shared_experts": 1,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}

GRANITEMOE_SWA = {
    **{k: v for k, v in MODELS_GRANITE_SWA.items() if k not in ("num_hidden_layers", "architectures", "model_type")},
    "architectures": ["GraniteMoeSWAForCausalLM"],
    "model_type": "granitemoe_swa",
    "intermediate_size": 32,
}

EXAONE_MOE = {
    "architectures": ["ExaoneMoeForCausalLM"],
    "model_type": "exaone_moe",
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}

MELLUM = {
    "architectures": ["MellumForCausalLM"],
    "model_type": "mellum",
    "rope_scaling": ABSENT,  # "rope_scaling": null (the zoo's common keys) loads as rope_parameters None, a TypeError
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
}


FLINT = {
    "architectures": ["FlintForCausalLM"],
    "model_type": "flint",
    "rope_scaling": ABSENT,  # as mellum's: a null rope_scaling would load as rope_parameters None
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}


COHERE2_MOE = {
    "architectures": ["Cohere2MoeForCausalLM"],
    "model_type": "cohere2_moe",
    "hidden_act": "silu",
    "intermediate_size": 32,  # each expert's (and, times num_shared_experts, the shared experts')
    "prefix_dense_intermediate_size": 96,
    "layer_norm_eps": 1e-5,
    "rms_norm_eps": None,  # None: LayerNorms; set: RMSNorms
    "logit_scale": 0.5,
    "tie_word_embeddings": True,
    **_rope(10000.0),
}


AFMOE = {
    "architectures": ["AfmoeForCausalLM"],
    "model_type": "afmoe",
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}


# ModernBERT's decoder: its own norm_eps, and the head size is hidden_size / num_attention_heads (no head_dim,
# no KV heads of its own); 4.x rotates every layer by global_rope_theta, 5.x sliding ones by local_rope_theta: both
# written, equal (read_modernbert_decoder refuses them unequal).
MODERNBERT_DECODER = {
    "architectures": ["ModernBertDecoderForCausalLM"],
    "model_type": "modernbert-decoder",
    "num_key_value_heads": ABSENT,
    "head_dim": ABSENT,
    "rms_norm_eps": ABSENT,
    "norm_eps": 1e-5,
    "cls_token_id": 1,  # within the vocabulary (the class defaults, 50281 and 50282, are warned about)
    "sep_token_id": 2,
    "hidden_activation": "gelu",
    "classifier_activation": "gelu",
    "global_rope_theta": 10000.0,
    "local_rope_theta": 10000.0,
    "tie_word_embeddings": True,
}


# ---- Encoders: checkpoints of the families whose attention is bidirectional (make_models.py --set encoders), held to
# transformers' own float64 forward of their masked-LM class by engines/transformers/encoder_agreement.py, with and
# without padding (never run by the causal checks: the oracle's encode is one whole-sequence forward).
#   modernbert-w3    modernbert, 4 layers, global_attn_every_n_layers 2 (F, S, F, S), local_attention 6 (each local
#                    layer sees 3 keys on each side), rope 160000 on the global layers and 10000 on the local ones,
#                    every bias (norm_bias, attention_bias, mlp_bias, classifier_bias, decoder_bias), the exact gelu, tied
#   modernbert-r1    modernbert, 3 layers, the default pattern (F, S, S), local_attention 3 (one key each side), no
#                    bias, gelu_pytorch_tanh, untied
#   ultrabert-w3     ultrabert (5.24.0 on), 4 layers, no layer_types (S, S, F, S: (i + 1) % 3), sliding_window 3 (3 keys
#                    each side), rope 2560000 on full and 10000 on sliding layers, GQA (2 KV heads), attention_bias and
#                    mlp_bias, a prediction head of 48, untied
#   ultrabert-r1     ultrabert, 3 layers, layer_types [F, S, S], sliding_window 1, no bias, gelu MLP, tied
#   embgemma2-w3     embedding_gemma2_text (5.24.0 on; EmbeddingGemma2TextModel, its output the projected hidden
#                    states), 4 layers, no layer_types, sliding_window_pattern 3 (S, S, F, and the last forced full),
#                    sliding_window 3 (3 keys each side), full layers of global_head_dim 32 and one KV head (sliding:
#                    16, two), per-layer inputs of 8, embedding_dim 24, gelu_pytorch_tanh
#   embgemma2-r1     embedding_gemma2_text, 3 layers, layer_types [F, S, S] (the last forced full: F, S, F),
#                    sliding_window 1, per_layer_config (the full layers 32 wide with two KV heads) as transformers
#                    saves it, rope bases 2e5 / 5e4, per-layer inputs of 4, embedding_dim 16, the exact gelu
#   privacy-w3       openai_privacy_filter (5.13.1 on; OpenAIPrivacyFilterForTokenClassification, num_labels scores per
#                    position), 3 layers, every one sliding 3 keys each side, sinks, q/k/v/o biases, no rope_parameters
#                    (the class's YaRN: factor 32, truncate false, base 150000), a MoE on every layer (4 experts, top 2,
#                    gate and up the halves of gate_up_proj), 5 labels (id2label)
#   privacy-r1       openai_privacy_filter, 2 layers, sliding_window 1, one KV head, no attention bias, the default rope
#                    at base 10000, 3 experts, top 2, no id2label or num_labels (the 33 privacy labels)
#   neomme-w3        neomme (5.24.0 on; NeoMMEForMaskedLM, text only), 4 layers [S, F, S, F], per_layer_config windows
#                    3 and 2 (abs(i - j) <= window each side), factorized embeddings of rank 24, value embeddings on
#                    layers 1 and 3 (the first and last full), exclusive self-attention, the sigmoid output gate, rope
#                    1e6 rotating a quarter of each head on full layers and 1e4 on all of it on sliding ones,
#                    attention_bias, the default residual_multiplier (1 / sqrt(8)), tied (both factors)
#   neomme-r1        neomme, 3 layers by default (S, S, F: its one full layer takes the value embeddings), no
#                    per_layer_config (the sliding layers alternate sliding_window 1 and the class's 1024), the
#                    default rope_parameters, residual_multiplier 0.7, no bias, embedding_rank 64 (= hidden_size),
#                    untied (lm_head and unembedding_projection of their own)
# And the encoder-decoders (T5GemmaForConditionalGeneration, every pinned release): the decoder's logits of target
# tokens, each cross-attending the encoder's output over a source (encoder_agreement.py's SEQ2SEQ).
#   t5gemma-w3       t5gemma, encoder 4 layers (S, F, S, F by default) reaching 3 keys each side (4.x: 2), decoder 3 layers
#                    layer_types [S, S, F] with window 3, GQA, query_pre_attn_scalar 24, attention soft-cap 5 (the
#                    encoder's) and 4 (the decoder's), logits soft-capped at 6, rope 1e4, tied
#   t5gemma-r1       t5gemma, encoder 3 layers layer_types [S, S, F] reaching 2 keys each side (4.x: 1), decoder 2 layers (S, F)
#                    with window 2, q/k/v/o biases (attention_bias, the cross-attention's too), one KV head in the
#                    decoder, the exact gelu, rope 5e4, no soft-caps, untied (lm_head.out_proj; the stacks' configs untied
#                    too: 4.57.6 ties the head to the encoder's embedding where the decoder's says tie)
#   t5gemma2-w3      t5gemma2 (5.13.1 on; T5Gemma2ForConditionalGeneration, text-only: a one-layer siglip tower that no
#                    source runs), encoder 4 layers [S, F, S, F] with window 4 (1 key before, 2 after), decoder 3 layers
#                    [S, S, F] with window 3 attending its own keys and the source's in one softmax, GQA, q/k norms,
#                    query_pre_attn_scalar 24, logits soft-capped at 6, rope bases 2e4 (sliding) and 5e5 (full), tied (the
#                    decoder's embedding and the head the encoder's)
#   t5gemma2-r1      t5gemma2, encoder 3 layers [S, S, F] with window 5 (2 keys before, 2 after), decoder 2 layers [S, F]
#                    with window 2 and one KV head, q/k/v/o biases, the exact gelu, no soft-cap, untied (each stack its
#                    own embedding, lm_head.out_proj)
MODERNBERT = {
    **{k: v for k, v in MODERNBERT_DECODER.items() if k not in ("local_rope_theta",)},
    "architectures": ["ModernBertForMaskedLM"],
    "model_type": "modernbert",
    "global_rope_theta": 160000.0,
    "local_rope_theta": 10000.0,
    "reference_compile": False,  # 4.x would otherwise torch.compile the MLP and head where it can
}
ULTRABERT = {
    "architectures": ["UltrabertForMaskedLM"],
    "model_type": "ultrabert",
    "hidden_act": "silu",
    "prediction_head_size": 48,
    "rope_parameters": {F: {"rope_type": "default", "rope_theta": 2560000.0}, S: {"rope_type": "default", "rope_theta": 10000.0}},
    "tie_word_embeddings": False,
}
EMBEDDING_GEMMA2 = {  # EmbeddingGemma2TextConfig's keys: rope keyed by layer type (no rope_scaling key)
    "architectures": ["EmbeddingGemma2TextModel"],
    "model_type": "embedding_gemma2_text",
    "rope_scaling": ABSENT,
    "attention_bias": ABSENT,
    "hidden_activation": "gelu_pytorch_tanh",
    "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0}, S: {"rope_type": "default", "rope_theta": 10000.0}},
}
OPENAI_PRIVACY_FILTER = {  # OpenAIPrivacyFilterConfig's keys (no rope_scaling key: its rope is rope_parameters)
    "architectures": ["OpenAIPrivacyFilterForTokenClassification"],
    "model_type": "openai_privacy_filter",
    "rope_scaling": ABSENT,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "intermediate_size": 32,
    "attention_bias": True,
    "tie_word_embeddings": False,
}
NEOMME = {  # NeoMMEConfig's keys (norm_eps, rope keyed by layer type; no rope_scaling or rms_norm_eps key)
    "architectures": ["NeoMMEForMaskedLM"],
    "model_type": "neomme",
    "rope_scaling": ABSENT,
    "rms_norm_eps": ABSENT,
    "norm_eps": 1e-6,
    "hidden_act": "relu2",
    "embedding_rank": 24,
    "patch_size": 2,  # the patch stem's tensors (3 * 2 * 2 wide) are the class's; text-only inputs never read them
}
T5GEMMA_STACK = {  # T5GemmaModuleConfig's keys (rope_theta read by 4.x and turned into rope_parameters by 5.x)
    "model_type": "t5_gemma_module",
    "rope_scaling": ABSENT,
    "rope_theta": 10000.0,
    "hidden_activation": "gelu_pytorch_tanh",
    "intermediate_size": 96,
}
T5GEMMA2_STACK = {  # T5Gemma2TextConfig's and T5Gemma2DecoderConfig's keys
    "rope_scaling": ABSENT,
    "hidden_activation": "gelu_pytorch_tanh",
    "intermediate_size": 96,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
}
T5GEMMA2_VISION = {  # the smallest siglip tower T5Gemma2MultiModalProjector accepts: 2 x 2 patches pooled to 4 tokens
    "model_type": "siglip_vision_model", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 1, "image_size": 2, "patch_size": 1, "num_channels": 3, "vision_use_head": False,
}


def t5gemma2(tie, encoder, decoder):
    """A T5Gemma2ForConditionalGeneration config: its encoder's text stack under encoder.text_config beside the tower,
    the decoder's stack under decoder (eoi_token_index left at 256000, outside the vocabulary)."""
    return {
        "architectures": ["T5Gemma2ForConditionalGeneration"],
        "model_type": "t5gemma2",
        "vocab_size": 256,
        "is_encoder_decoder": True,
        "tie_word_embeddings": tie,
        "encoder": {"model_type": "t5gemma2_encoder", "mm_tokens_per_image": 4, "tie_word_embeddings": tie,
                    "text_config": {**T5GEMMA2_STACK, "model_type": "t5gemma2_text", "tie_word_embeddings": tie, **encoder},
                    "vision_config": T5GEMMA2_VISION},
        "decoder": {**T5GEMMA2_STACK, "model_type": "t5gemma2_decoder", "tie_word_embeddings": tie, **decoder},
    }


def _rope_by_type(sliding, full):
    return {"rope_parameters": {S: {"rope_type": "default", "rope_theta": sliding}, F: {"rope_type": "default", "rope_theta": full}}}


ENCODERS = {
    "t5gemma2-w3": ("t5gemma2", t5gemma2(
        True,
        {"num_hidden_layers": 4, "layer_types": [S, F, S, F], "sliding_window": 4, "query_pre_attn_scalar": 24,
         **_rope_by_type(20000.0, 500000.0)},
        {"num_hidden_layers": 3, "layer_types": [S, S, F], "sliding_window": 3, "query_pre_attn_scalar": 24,
         "final_logit_softcapping": 6.0, **_rope_by_type(20000.0, 500000.0)})),
    "t5gemma2-r1": ("t5gemma2", t5gemma2(
        False,
        {"num_hidden_layers": 3, "layer_types": [S, S, F], "sliding_window": 5, "query_pre_attn_scalar": 16,
         "attention_bias": True, "hidden_activation": "gelu", **_rope_by_type(10000.0, 1000000.0)},
        {"num_hidden_layers": 2, "layer_types": [S, F], "sliding_window": 2, "num_key_value_heads": 1,
         "query_pre_attn_scalar": 16, "attention_bias": True, "hidden_activation": "gelu", **_rope_by_type(10000.0, 1000000.0)})),
    "t5gemma-w3": ("t5gemma", {
        "architectures": ["T5GemmaForConditionalGeneration"],
        "model_type": "t5gemma",
        "vocab_size": 256,
        "is_encoder_decoder": True,
        "tie_word_embeddings": True,
        "encoder": {**T5GEMMA_STACK, "num_hidden_layers": 4, "sliding_window": 3, "query_pre_attn_scalar": 24,
                    "attn_logit_softcapping": 5.0, "final_logit_softcapping": None},
        "decoder": {**T5GEMMA_STACK, "num_hidden_layers": 3, "layer_types": [S, S, F], "sliding_window": 3,
                    "query_pre_attn_scalar": 24, "attn_logit_softcapping": 4.0, "final_logit_softcapping": 6.0},
    }),
    "t5gemma-r1": ("t5gemma", {
        "architectures": ["T5GemmaForConditionalGeneration"],
        "model_type": "t5gemma",
        "vocab_size": 256,
        "is_encoder_decoder": True,
        "tie_word_embeddings": False,
        "encoder": {**T5GEMMA_STACK, "num_hidden_layers": 3, "layer_types": [S, S, F], "sliding_window": 2,
                    "query_pre_attn_scalar": 16, "attn_logit_softcapping": None, "final_logit_softcapping": None,
                    "attention_bias": True, "hidden_activation": "gelu", "rope_theta": 50000.0, "tie_word_embeddings": False},
        "decoder": {**T5GEMMA_STACK, "num_hidden_layers": 2, "sliding_window": 2, "num_key_value_heads": 1,
                    "query_pre_attn_scalar": 16, "attn_logit_softcapping": None, "final_logit_softcapping": None,
                    "attention_bias": True, "hidden_activation": "gelu", "rope_theta": 50000.0, "tie_word_embeddings": False},
    }),
    "modernbert-w3": ("modernbert", {
        **MODERNBERT,
        "num_hidden_layers": 4,
        "global_attn_every_n_layers": 2,
        "local_attention": 6,
        "norm_bias": True,
        "attention_bias": True,
        "mlp_bias": True,
        "classifier_bias": True,
    }),
    "ultrabert-w3": ("ultrabert", {
        **ULTRABERT,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "attention_bias": True,
        "mlp_bias": True,
    }),
    "ultrabert-r1": ("ultrabert", {
        **ULTRABERT,
        "num_hidden_layers": 3,
        "layer_types": [F, S, S],
        "sliding_window": 1,
        "hidden_act": "gelu",
        "prediction_head_size": 32,
        "tie_word_embeddings": True,
    }),
    "embgemma2-w3": ("embedding_gemma2_text", {
        **EMBEDDING_GEMMA2,
        "num_hidden_layers": 4,
        "sliding_window_pattern": 3,
        "sliding_window": 3,
        "global_head_dim": 32,
        "num_global_key_value_heads": 1,
        "hidden_size_per_layer_input": 8,
        "embedding_dim": 24,
    }),
    "embgemma2-r1": ("embedding_gemma2_text", {
        **EMBEDDING_GEMMA2,
        "num_hidden_layers": 3,
        "layer_types": [F, S, S],
        "sliding_window": 1,
        "per_layer_config": {"0": {"head_dim": 32, "num_key_value_heads": 2}, "2": {"head_dim": 32, "num_key_value_heads": 2}},
        "rope_parameters": {F: {"rope_type": "default", "rope_theta": 200000.0}, S: {"rope_type": "default", "rope_theta": 50000.0}},
        "hidden_size_per_layer_input": 4,
        "embedding_dim": 16,
        "hidden_activation": "gelu",
    }),
    "privacy-w3": ("openai_privacy_filter", {
        **OPENAI_PRIVACY_FILTER,
        "num_hidden_layers": 3,
        "sliding_window": 3,
        "id2label": {str(i): label for i, label in enumerate(("O", "B-secret", "I-secret", "E-secret", "S-secret"))},
        "label2id": {label: i for i, label in enumerate(("O", "B-secret", "I-secret", "E-secret", "S-secret"))},
    }),
    "privacy-r1": ("openai_privacy_filter", {
        **OPENAI_PRIVACY_FILTER,
        "num_hidden_layers": 2,
        "sliding_window": 1,
        "num_key_value_heads": 1,
        "attention_bias": False,
        "num_local_experts": 3,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }),
    "neomme-w3": ("neomme", {
        **NEOMME,
        "num_hidden_layers": 4,
        "layer_types": [S, F, S, F],
        "sliding_window": 3,
        "per_layer_config": {"0": {"sliding_window": 3}, "1": {"sliding_window": None}, "2": {"sliding_window": 2},
                             "3": {"sliding_window": None}},
        "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
                            S: {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}},
        "attention_bias": True,
        "tie_word_embeddings": True,
    }),
    "neomme-r1": ("neomme", {
        **NEOMME,
        "num_hidden_layers": 3,
        "sliding_window": 1,
        "residual_multiplier": 0.7,
        "embedding_rank": 64,  # hidden_size: the unembedding_transposed mutant's square
        "tie_word_embeddings": False,
    }),
    "modernbert-r1": ("modernbert", {
        **MODERNBERT,
        "num_hidden_layers": 3,
        "local_attention": 3,
        "decoder_bias": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "classifier_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": False,
    }),
}


LAGUNA = {
    "architectures": ["LagunaForCausalLM"],
    "model_type": "laguna",
    "rope_scaling": ABSENT,  # as flint's: a null rope_scaling would load as rope_parameters None
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
}


BEAM = {
    "architectures": ["BeamForCausalLM"],
    "model_type": "beam",
    "rope_scaling": ABSENT,  # the reader refuses it: rope_parameters keys the rope by layer type
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
}


MIMO = {
    "architectures": ["MiMoV2FlashForCausalLM"],
    "model_type": "mimo_v2_flash",
    "rope_scaling": ABSENT,  # the reader refuses it: rope_parameters keys the rope by layer type
    "hidden_act": "silu",
    "head_dim": 24,  # int(24 * 0.334) = 8 rotary entries
    "v_head_dim": 16,
    "moe_intermediate_size": 32,
    "intermediate_size": 96,
    "tie_word_embeddings": False,
}


def _laguna_rope(full, full_factor, sliding, sliding_factor):  # keyed by layer type, a partial factor each
    return {"rope_parameters": {F: {"rope_type": "default", "rope_theta": full, "partial_rotary_factor": full_factor},
                                S: {"rope_type": "default", "rope_theta": sliding, "partial_rotary_factor": sliding_factor}}}


KOLIBRI1 = {  # no intermediate_size: every layer is a MoE
    "architectures": ["Kolibri1ForCausalLM"],
    "model_type": "kolibri1",
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "tie_word_embeddings": False,
    **_rope(10000.0),
}


ERGO = {  # no intermediate_size (the dense MLP is first_dense_intermediate_size), head_dim hidden / heads
    "architectures": ["ErgoForCausalLM"],
    "model_type": "ergo",
    "intermediate_size": ABSENT,
    "first_dense_intermediate_size": 96,
    "moe_intermediate_size": 32,
    "shared_intermediate_size": 48,
    "tie_word_embeddings": False,
}


DORY = {  # nGPT: weightless L2 norms (no rms_norm_eps is read), a looped section of layers
    "architectures": ["DoryForCausalLM"],
    "model_type": "dory",
    "recurrent_kv_cache_mode": "per_loop",
    "rope_scaling": ABSENT,
}


def _dory_saved(c):
    """A dory config as DoryConfig.to_dict writes it: each layer an (attention, "mlp") block pair, every count doubled."""
    out = dict(c)
    out["layer_types"] = [b for t in c["layer_types"] for b in (t, "mlp")]
    for key in ("num_hidden_layers", "n_input_layers", "n_recurrent_layers", "n_output_layers"):
        if c.get(key) is not None:
            out[key] = 2 * c[key]
    return out


LARA_MINI = {  # LaraMiniConfig's keys: no intermediate_size (every layer a MoE), rope in rope_parameters only
    "architectures": ["LaraMiniForCausalLM"],
    "model_type": "lara_mini",
    "intermediate_size": ABSENT,
    "rope_scaling": ABSENT,
    "hidden_act": "silu",
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "tie_word_embeddings": True,
}


def _mellum_rope(full, sliding):  # mellum keys its rope by layer type and converts no flat rope_theta
    return {F: {"rope_type": "default", "rope_theta": full}, S: {"rope_type": "default", "rope_theta": sliding}}


VAULTGEMMA = {
    "architectures": ["VaultGemmaForCausalLM"],
    "model_type": "vaultgemma",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_act": "gelu_pytorch_tanh",
    "query_pre_attn_scalar": 16,
    "tie_word_embeddings": True,
    **_rope(10000.0),
}

LFM3 = {
    "architectures": ["Lfm3ForCausalLM"],
    "model_type": "lfm3",
    "rms_norm_eps": ABSENT,  # Lfm3Config reads norm_eps (rms_norm_eps is its alias: one key, not two)
    "rope_scaling": ABSENT,
    "norm_eps": 1e-5,
    "head_dim": 16,
    "use_attention_gate": True,
    "use_sandwich_norm": True,
    "conv_bias": False,
    "conv_L_cache": 3,
    "tie_word_embeddings": True,
    "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                        F: {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1000000.0}},
}

RECURRENT_GEMMA = {  # RecurrentGemmaConfig's keys: rope top-level (4.x) and in rope_parameters (5.x)
    "architectures": ["RecurrentGemmaForCausalLM"],
    "model_type": "recurrent_gemma",
    "rope_scaling": ABSENT,
    "hidden_activation": "gelu_pytorch_tanh",
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "tie_word_embeddings": True,
}

COHERE_COMPASS_TEXT = {  # CohereCompassTextConfig's keys: rope_parameters keyed by layer type (null: NoPE)
    "architectures": ["CohereCompassForCausalLM"],
    "model_type": "cohere_compass_text",
    "rope_scaling": ABSENT,  # 5.x sets rope_parameters from it, and null leaves the rotary module none to read
    "hidden_act": "silu",
    "layer_norm_eps": 1e-5,
}

MODELS = {
    "llama4-c4": ("llama4_text", {
        **LLAMA4,
        "num_hidden_layers": 4,
        "attention_chunk_size": 4,
        "interleave_moe_layer_step": 2,
    }),
    "llama4-top1": ("llama4_text", {
        **LLAMA4,
        "num_hidden_layers": 4,
        "attention_chunk_size": 4,
        "interleave_moe_layer_step": 1,
        "num_experts_per_tok": 1,
    }),
    "llama4-explicit": ("llama4_text", {
        **LLAMA4,
        "num_hidden_layers": 3,
        "attention_chunk_size": 3,
        "no_rope_layers": [0, 1, 1],
        "layer_types": [F, C, C],
        "moe_layers": [2],
        "floor_scale": 8,
    }),
    "qwen2-mwl2": ("qwen2", {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "use_sliding_window": True,
        "sliding_window": 4,
        "max_window_layers": 2,
        "tie_word_embeddings": False,
        **_rope(10000.0),
    }),
    "qwen2-nosw": ("qwen2", {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "hidden_act": "silu",
        "use_sliding_window": False,
        "sliding_window": 4,
        "max_window_layers": 0,
        "tie_word_embeddings": True,
        **_rope(10000.0),
    }),
    "qwen3-w3": ("qwen3", {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": 3,
        "hidden_act": "silu",
        "use_sliding_window": True,
        "sliding_window": 3,
        "max_window_layers": 3,
        "layer_types": [S, F, S],
        "attention_bias": True,
        "tie_word_embeddings": False,
        **_rope(1000000.0),
    }),
    "gptoss-w4": ("gpt_oss", {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "sliding_window": 4,
        "intermediate_size": 32,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "attention_bias": True,
        "tie_word_embeddings": False,
        "rope_theta": 150000.0,
        "rope_scaling": dict(YARN),
        "rope_parameters": {**YARN, "rope_theta": 150000.0},
    }),
    "smollm3-nope": ("smollm3", {
        "architectures": ["SmolLM3ForCausalLM"],
        "model_type": "smollm3",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "use_sliding_window": True,
        "sliding_window": 3,
        "attention_bias": True,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        **_rope(10000.0),
    }),
    "cohere2-w3": ("cohere2", {
        "architectures": ["Cohere2ForCausalLM"],
        "model_type": "cohere2",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "layer_norm_eps": 1e-5,
        "sliding_window": 3,
        "sliding_window_pattern": 4,
        "logit_scale": 0.5,
        "tie_word_embeddings": True,
        **_rope(10000.0),
    }),
    "ministral-w4": ("ministral", {
        "architectures": ["MinistralForCausalLM"],
        "model_type": "ministral",
        "num_hidden_layers": 3,
        "hidden_act": "silu",
        "sliding_window": 4,
        "tie_word_embeddings": False,
        **_rope(10000.0),
    }),
    "phi3-w4": ("phi3", {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "num_hidden_layers": 3,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "sliding_window": 4,
        "partial_rotary_factor": 0.5,
        "original_max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    }),
    "gemma4-shared": ("gemma4_text", {
        **GEMMA4,
        "num_hidden_layers": 4,
        "layer_types": [S, F, S, S],
        "sliding_window": 3,
        "num_kv_shared_layers": 2,
        "final_logit_softcapping": 8.0,
    }),
    "gemma4-keqv": ("gemma4_text", {
        **GEMMA4,
        "num_hidden_layers": 3,
        "sliding_window": 4,
        "attention_k_eq_v": True,
        "num_global_key_value_heads": 1,
        "tie_word_embeddings": False,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                            F: {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1000000.0}},
    }),
    "gemma3n-w3": ("gemma3n_text", {
        **GEMMA3N,
        "num_hidden_layers": 5,
        "sliding_window": 3,
        "intermediate_size": [128] * 5,
        "hidden_size_per_layer_input": 16,
        "vocab_size_per_layer_input": 256,  # the vocabulary: 4.56.2 to 5.13.1 raise IndexError on an id past the table
        "altup_num_inputs": 4,
        "laurel_rank": 8,
        "activation_sparsity_pattern": [0.95, 0.6, 0.0, 0.3, 0.0],
    }),
    "gemma3n-explicit": ("gemma3n_text", {
        **GEMMA3N,
        "num_hidden_layers": 3,
        "layer_types": [S, F, S],
        "sliding_window": 2,
        "hidden_size_per_layer_input": 8,
        "vocab_size_per_layer_input": 256,
        "altup_num_inputs": 3,
        "altup_active_idx": 1,
        "altup_correct_scale": False,
        "laurel_rank": 4,
        "activation_sparsity_pattern": [0.0, 0.95, 0.5],
        "final_logit_softcapping": 8.0,  # 5.25.0's strict config takes no null
        "rope_theta": 500000.0,
        "rope_parameters": {F: {"rope_type": "default", "rope_theta": 500000.0},
                            S: {"rope_type": "default", "rope_theta": 10000.0}},
        "tie_word_embeddings": False,
    }),
    "olmo3-w3": ("olmo3", {
        "architectures": ["Olmo3ForCausalLM"],
        "model_type": "olmo3",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "sliding_window": 3,
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0}, F: {"rope_type": "default", "rope_theta": 10000.0}},
    }),
    "olmo3-bias": ("olmo3", {
        "architectures": ["Olmo3ForCausalLM"],
        "model_type": "olmo3",
        "num_hidden_layers": 3,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "sliding_window": 2,
        "layer_types": [F, S, S],
        "attention_bias": True,
        "tie_word_embeddings": True,
        "rope_theta": 10000.0,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0}, F: {"rope_type": "default", "rope_theta": 10000.0}},
    }),
    "exaone4-w3": ("exaone4", {
        "architectures": ["Exaone4ForCausalLM"],
        "model_type": "exaone4",
        "num_hidden_layers": 4,
        "hidden_act": "silu",
        "sliding_window": 3,
        "sliding_window_pattern": 4,
        "tie_word_embeddings": False,
        **_rope(10000.0),
    }),
    "exaone4-nowindow": ("exaone4", {
        "architectures": ["Exaone4ForCausalLM"],
        "model_type": "exaone4",
        "num_hidden_layers": 2,
        "hidden_act": "silu",
        "sliding_window": None,
        "layer_types": [F, F],
        "tie_word_embeddings": True,
        **_rope(10000.0),
    }),
    "vaultgemma-w4": ("vaultgemma", {
        **VAULTGEMMA,
        "num_hidden_layers": 3,
        "sliding_window": 4,
        "attn_logit_softcapping": 10.0,
        "final_logit_softcapping": 8.0,
    }),
    "cwm-w3": ("cwm", {
        "architectures": ["CwmForCausalLM"],
        "model_type": "cwm",
        "num_hidden_layers": 5,
        "hidden_act": "silu",
        "sliding_window": 3,
        "tie_word_embeddings": False,
        **_rope(10000.0),
    }),
    "graniteswa-w4": ("granite_swa", dict(MODELS_GRANITE_SWA)),
    "qwen2moe-w3": ("qwen2_moe", {
        **QWEN2_MOE,
        "num_hidden_layers": 3,
        "use_sliding_window": True,
        "sliding_window": 3,
        "layer_types": [S, S, S],
        "max_window_layers": 3,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [1],
        "norm_topk_prob": False,
    }),
    "qwen2moe-norm": ("qwen2_moe", {
        **QWEN2_MOE,
        "num_hidden_layers": 2,
        "use_sliding_window": False,
        "sliding_window": 4,
        "num_experts": 6,
        "num_experts_per_tok": 3,
        "decoder_sparse_step": 2,
        "norm_topk_prob": True,
        "tie_word_embeddings": True,
    }),
    "dots1-w3": ("dots1", {
        **DOTS1,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "max_window_layers": 1,
        "first_k_dense_replace": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.5,
        "attention_bias": True,
    }),
    "dots1-nonorm": ("dots1", {
        **DOTS1,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        "first_k_dense_replace": 0,
        "n_routed_experts": 4,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "tie_word_embeddings": True,
    }),
    "granitemoeswa-w3": ("granitemoe_swa", {
        **GRANITEMOE_SWA,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "shared_intermediate_size": 48,
        "attention_bias": True,
    }),
    "granitemoeswa-noshared": ("granitemoe_swa", {
        **GRANITEMOE_SWA,
        "num_hidden_layers": 2,
        "sliding_window": 2,
        "layer_types": [S, S],
        "num_local_experts": 3,
        "num_experts_per_tok": 1,
        "shared_intermediate_size": 0,
        "layer_rope_theta": None,
        "tie_word_embeddings": False,
    }),
    "exaonemoe-w3": ("exaone_moe", {
        **EXAONE_MOE,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "sliding_window_pattern": 2,
        "first_k_dense_replace": 1,
        "num_experts": 8,
        "num_experts_per_tok": 3,
        "n_group": 4,
        "topk_group": 2,
        "num_shared_experts": 2,
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.5,
    }),
    "exaonemoe-mlptypes": ("exaone_moe", {
        **EXAONE_MOE,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [F, S, S],
        "mlp_layer_types": ["sparse", "dense", "sparse"],
        "num_experts": 4,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "num_shared_experts": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "tie_word_embeddings": True,
    }),
    "lfm3-w3": ("lfm3", {**LFM3, "num_hidden_layers": 5, "sliding_window": 3}),
    "lfm3-explicit": ("lfm3", {
        **LFM3,
        "num_hidden_layers": 4,
        "sliding_window": 2,
        "layer_types": [S, "conv", S, F],
        "conv_L_cache": 4,
        "conv_bias": True,
        "use_attention_gate": False,
        "use_sandwich_norm": False,
        "tie_word_embeddings": False,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                            F: {"rope_type": "default", "rope_theta": 500000.0}},
    }),
    "recurrentgemma-w3": ("recurrent_gemma", {**RECURRENT_GEMMA, "num_hidden_layers": 4, "attention_window_size": 3}),
    "recurrentgemma-explicit": ("recurrent_gemma", {
        **RECURRENT_GEMMA,
        "num_hidden_layers": 3,
        "block_types": ["attention", "recurrent"],
        "attention_window_size": 2,
        "conv1d_width": 2,
        "lru_width": 48,
        "num_key_value_heads": 1,
        "attention_bias": True,
        "logits_soft_cap": 8.0,
        "rope_theta": 500000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
        "tie_word_embeddings": False,
    }),
    "lara-w3": ("lara_mini", {**LARA_MINI, "num_hidden_layers": 5, "sliding_window": 3, "linear_conv_kernel_dim": 4,
                              "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_num_value_heads": 4,
                              "linear_value_head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2}),
    "lara-explicit": ("lara_mini", {
        **LARA_MINI,
        "num_hidden_layers": 4,
        "layer_types": [S, "linear_attention", F, "linear_attention"],
        "sliding_window": 2,
        "linear_conv_kernel_dim": 2,
        "linear_num_key_heads": 1,
        "linear_key_head_dim": 8,
        "linear_num_value_heads": 3,
        "linear_value_head_dim": 16,
        "num_experts": 3,
        "num_experts_per_tok": 1,
        "norm_topk_prob": False,
        "attention_bias": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "tie_word_embeddings": False,
    }),
    "mellum-w3": ("mellum", {
        **MELLUM,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "layer_types": [S, S, F, S],
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
        "num_local_experts": 6,
        "num_experts_per_tok": 2,
        "norm_topk_prob": True,
        "attention_bias": True,
        "rope_parameters": _mellum_rope(500000.0, 10000.0),
    }),
    "mellum-defaults": ("mellum", {
        **MELLUM,
        "num_hidden_layers": 3,
        "sliding_window": 3,
        "num_local_experts": 4,
        "num_experts_per_tok": 3,
        "norm_topk_prob": False,
        "tie_word_embeddings": True,
    }),
    "flint-w3": ("flint", {
        **FLINT,
        "num_hidden_layers": 6,
        "sliding_window": 3,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "attention_bias": True,
    }),
    "flint-explicit": ("flint", {
        **FLINT,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        "mlp_only_layers": [],
        "num_experts": 3,
        "num_experts_per_tok": 1,
        "norm_topk_prob": False,
        "tie_word_embeddings": True,
    }),
    "cohere2moe-average": ("cohere2_moe", {
        **COHERE2_MOE,
        "num_hidden_layers": 5,
        "sliding_window": 3,
        "first_k_dense_replace": 1,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "attention_bias": True,
    }),
    "cohere2moe-sigmoid": ("cohere2_moe", {
        **COHERE2_MOE,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        "mlp_layer_types": ["sparse", "dense", "sparse"],
        "prefix_dense_sliding_window_pattern": 2,
        "rms_norm_eps": 1e-6,
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "expert_selection_fn": "sigmoid",
        "norm_topk_prob": True,
        "num_shared_experts": 2,
        "shared_expert_combination_strategy": "sum",
        "tie_word_embeddings": False,
    }),
    "afmoe-w3": ("afmoe", {
        **AFMOE,
        "num_hidden_layers": 5,
        "sliding_window": 3,
        "num_dense_layers": 1,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "route_scale": 1.5,
        "mup_enabled": True,
    }),
    "afmoe-explicit": ("afmoe", {
        **AFMOE,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [F, S, S],
        "num_dense_layers": 0,
        "num_experts": 3,
        "num_experts_per_tok": 1,
        "num_shared_experts": 2,
        "tie_word_embeddings": True,
    }),
    "modernbertdec-w3": ("modernbert_decoder", {
        **MODERNBERT_DECODER,
        "num_hidden_layers": 4,
        "global_attn_every_n_layers": 2,
        "local_attention": 6,
        "norm_bias": True,
        "attention_bias": True,
        "mlp_bias": True,
        "classifier_bias": True,
    }),
    "modernbertdec-explicit": ("modernbert_decoder", {
        **MODERNBERT_DECODER,
        "num_hidden_layers": 3,
        "layer_types": [S, S, F],
        "local_attention": 5,
        "decoder_bias": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "classifier_activation": "gelu_pytorch_tanh",
        "global_rope_theta": 160000.0,
        "local_rope_theta": 160000.0,
        "tie_word_embeddings": False,
    }),
    "kolibri1-w3": ("kolibri1", {
        **KOLIBRI1,
        "num_hidden_layers": 5,
        "sliding_window": 3,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    }),
    "laguna-w3": ("laguna", {
        **LAGUNA,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "layer_types": [S, F, S, S],
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_router_logit_softcapping": 1.0,
    }),
    "laguna-explicit": ("laguna", {
        **LAGUNA,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [F, S, F],
        **_laguna_rope(1000000.0, 0.25, 10000.0, 0.5),
        "gating": "per-element",
        "mlp_layer_types": ["sparse", "dense", "sparse"],
        "num_experts": 3,
        "num_experts_per_tok": 1,
        "moe_routed_scaling_factor": 2.0,
        "attention_bias": True,
        "tie_word_embeddings": True,
    }),
    # ergo (5.25.0 on): 4 layers, no layer_types (S, S, S, F: global_attention_every_n_layers 4; the full layer NoPE),
    # window 3, a flat rope_parameters (the sliding layers'), num_dense_blocks 1, sigmoid over 4 relu2 experts by score +
    # e_score_correction_bias, top 2, renormalised, times the default sqrt(8), each expert's output normed by its own
    # post_expert_norm row, the shared expert by its own norm, residual gates after each sandwich post norm
    "ergo-w3": ("ergo", {**ERGO, "num_hidden_layers": 4, "sliding_window": 3, "num_experts": 4, "num_experts_per_tok": 2,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
    # ergo: layer_types [S, F, S], local_attention_window 2, rope_parameters keyed by type (sliding 1e4, full 5e5: the
    # full layer rotates), mlp_layer_types [sparse, dense, sparse], top 1 of 3, moe_routed_scaling_factor 1.5
    "ergo-explicit": ("ergo", {**ERGO, "num_hidden_layers": 3, "layer_types": [S, F, S], "local_attention_window": 2,
                               "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                                                   F: {"rope_type": "default", "rope_theta": 500000.0}},
                               "mlp_layer_types": ["sparse", "dense", "sparse"], "num_experts": 3,
                               "num_experts_per_tok": 1, "moe_routed_scaling_factor": 1.5}),
    # dory (5.24.0 on): 5 layers, no layer_types (S, S, S, F, S), window 3, layers 1-3 looped twice (the default), default
    # rope (sliding 1e4, full 1e7), untied
    "dory-w3": ("dory", {**DORY, "num_hidden_layers": 5, "sliding_window": 3, "n_input_layers": 1, "n_output_layers": 1,
                         "initializer_range": 0.02, "hidden_act": "silu", "tie_word_embeddings": False}),
    # dory as saved: (attention, "mlp") pairs of [S, F, S, S], counts doubled; no input layers (the first pass enters
    # from the embeddings), layers 0-1 looped 3 times, window 2, rope per type, both biases, gelu_pytorch_tanh, tied
    "dory-saved": ("dory", _dory_saved({
        **DORY, "num_hidden_layers": 4, "layer_types": [S, F, S, S], "sliding_window": 2, "n_input_layers": 0,
        "n_recurrent_layers": 2, "n_output_layers": 2, "n_recurrent_loops": 3,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0}, F: {"rope_type": "default", "rope_theta": 500000.0}},
        "attention_bias": True, "mlp_bias": True, "hidden_act": "gelu_pytorch_tanh", "initializer_range": 0.05,
        "ngpt_alpha_init": 0.1, "tie_word_embeddings": True})),
    "kolibri1-explicit": ("kolibri1", {
        **KOLIBRI1,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        "num_local_experts": 6,
        "num_experts_per_tok": 2,
        "norm_topk_prob": True,
        "tie_word_embeddings": True,
    }),
    "beam-w3": ("beam", {
        **BEAM,
        "num_hidden_layers": 5,
        "sliding_window": 3,
        "num_experts": 8,
        "num_experts_per_tok": 3,
        "n_group": 4,
        "topk_group": 2,
        "attention_bias": True,
    }),
    "beam-explicit": ("beam", {
        **BEAM,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        "rope_parameters": {S: None, F: {"rope_type": "default", "rope_theta": 500000.0}},
        "mlp_layer_types": ["sparse", "dense", "sparse"],
        "num_experts": 4,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "final_logit_softcapping": None,
        "tie_word_embeddings": True,
    }),
    "mimo-w3": ("mimo_v2_flash", {
        **MIMO,
        "num_hidden_layers": 4,
        "sliding_window": 3,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "attention_bias": True,
    }),
    "mimo-explicit": ("mimo_v2_flash", {
        **MIMO,
        "num_hidden_layers": 3,
        "sliding_window": 2,
        "layer_types": [S, F, S],
        **_laguna_rope(1000000.0, 0.5, 10000.0, 1.0),
        "mlp_layer_types": ["sparse", "dense", "sparse"],
        "n_routed_experts": 4,
        "num_experts_per_tok": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 2.0,
        "attention_value_scale": None,
        "tie_word_embeddings": True,
    }),
    "vaultgemma-allfull": ("vaultgemma", {
        **VAULTGEMMA,
        "num_hidden_layers": 3,
        "sliding_window": 4,
        "layer_types": [F, F, F],
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
    }),
    "coherecompass-text-nope": ("cohere2", {
        **COHERE_COMPASS_TEXT, "num_hidden_layers": 4, "layer_types": [S, F, S, S], "sliding_window": 3, "logit_scale": 0.5,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}, F: None},
        "tie_word_embeddings": True}),
    "coherecompass-text-full": ("cohere2", {
        **COHERE_COMPASS_TEXT, "num_hidden_layers": 3, "sliding_window": 3,
        "rope_parameters": {F: {"rope_type": "default", "rope_theta": 500000.0}}, "tie_word_embeddings": False}),
}


# ---- Multimodal models: the text decoder of a vision-language checkpoint, text-only inputs. ----
# The whole config.json of the multimodal class (its text decoder in text_config, over make_models.py's
# COMMON; a tiny vision tower the text-only forward never runs, its weights left to transformers'
# initialisation), loaded by oracle_agreement.py through the class config.architectures names. The
# decoder's tensors are under model.language_model. (what every pinned release's class saves and loads).
#   qwen2vl-mwl2     qwen2_vl, 4 layers, use_sliding_window, window 3, max_window_layers 1 (layers 1-3 slide),
#                    M-RoPE sections [2, 3, 3] (4.x rope_scaling {"type": "mrope"}), head_dim from the heads
#   qwen25vl-types   qwen2_5_vl, explicit layer_types [S, F, S], window 2, M-RoPE [4, 2, 2], tied head
MULTIMODAL_VISION = {
    "qwen2_vl": {"depth": 1, "embed_dim": 16, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2, "patch_size": 2,
                 "temporal_patch_size": 1, "spatial_merge_size": 1, "in_channels": 3},
    "qwen2_5_vl": {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 64,
                   "patch_size": 2, "temporal_patch_size": 1, "spatial_merge_size": 1, "window_size": 4,
                   "fullatt_block_indexes": [0], "in_channels": 3},
}
# The special tokens' ids inside the tiny vocabulary (the defaults are past it); text-only prompts avoid them.
QWEN_VL_TOKENS = {"image_token_id": 253, "video_token_id": 254, "vision_start_token_id": 251, "vision_end_token_id": 252}


def _qwen_vl(model_type, arch, tie, text):
    return {"architectures": [arch], "model_type": model_type, "tie_word_embeddings": tie, **QWEN_VL_TOKENS,
            "vision_config": MULTIMODAL_VISION[model_type],
            "text_config": {"model_type": model_type + "_text", "hidden_act": "silu", "tie_word_embeddings": tie,
                            "rope_theta": 10000.0, **text}}


# step3p7 (5.24.0 on): Step3p7ForConditionalGeneration around its text decoder (model_type step3p5, Step3p7TextModel,
# no causal LM of its own): a tiny vision tower; the head tied by the outer config's tie_word_embeddings only.
#   step3p7-w3       4 layers, layer_types [S, F, S, S], window 3, num_sliding_attention_heads 2 (4 on the full layer,
#                    2 KV heads), rope_theta and partial_rotary_factors per layer (sliding 1e4 whole heads, full 5e5 half
#                    of each), query_pre_attn_scalar 32, mlp_layer_types [dense, sparse, sparse, sparse], sigmoid over 4
#                    experts by score + e_score_correction_bias, top 2, renormalised, times 2, a shared expert,
#                    swiglu_limits [0, 2, null, 1] on the routed experts and swiglu_limits_shared [3, 0, 1.5, null] on
#                    the dense MLP and the shared expert, untied
#   step3p7-explicit 3 layers and num_nextn_predict_layers 1 (every per-layer list one entry longer, cut by the
#                    config), layer_types [F, S, F], window 2, the legacy attention_other_setting (8 query heads on the
#                    sliding layer, 4 on the full ones), num_attention_groups 1 (one KV head), rope_parameters keyed by
#                    layer type (full 1e6 rotating a quarter of a head, sliding 1e4), the legacy moe_layers_enum
#                    "1,2", moe_num_experts 3, moe_top_k 1, swiglu_limits_shared [2.5, 2, 0], attention_bias, gating
#                    "per-head", tied
STEP3P7_VISION = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "image_size": 8, "patch_size": 2}
STEP3P7_TEXT = {"model_type": "step3p5", "hidden_act": "silu", "rms_norm_eps": 1e-5, "intermediate_size": 96,
                "moe_intermediate_size": 32, "share_expert_dim": 48}


def _step3p7(tie, text):
    return {"architectures": ["Step3p7ForConditionalGeneration"], "model_type": "step3p7", "tie_word_embeddings": tie,
            "vision_config": STEP3P7_VISION, "text_config": {**STEP3P7_TEXT, **text}}


MULTIMODAL = {
    "step3p7-w3": ("step3p7", _step3p7(False, {
        "num_hidden_layers": 4, "layer_types": [S, F, S, S], "sliding_window": 3, "num_sliding_attention_heads": 2,
        "rope_theta": [10000.0, 500000.0, 10000.0, 10000.0], "partial_rotary_factors": [1.0, 0.5, 1.0, 1.0],
        "query_pre_attn_scalar": 32, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "n_routed_experts": 4,
        "num_experts_per_tok": 2, "moe_router_scaling_factor": 2.0, "swiglu_limits": [0, 2.0, None, 1.0],
        "swiglu_limits_shared": [3.0, 0, 1.5, None]})),
    "step3p7-explicit": ("step3p7", _step3p7(True, {
        "num_hidden_layers": 3, "num_nextn_predict_layers": 1, "layer_types": [F, S, F, S], "sliding_window": 2,
        "attention_other_setting": {"num_attention_heads": 8}, "num_key_value_heads": ABSENT, "num_attention_groups": 1,
        "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
                            S: {"rope_type": "default", "rope_theta": 10000.0}},
        "moe_layers_enum": "1,2", "moe_num_experts": 3, "moe_top_k": 1, "swiglu_limits_shared": [2.5, 2.0, 0, 9.0],
        "attention_bias": True, "gating": "per-head"})),
    "qwen2vl-mwl2": ("qwen2_vl", _qwen_vl("qwen2_vl", "Qwen2VLForConditionalGeneration", False, {
        "num_hidden_layers": 4, "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}})),
    "qwen25vl-types": ("qwen2_5_vl", _qwen_vl("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", True, {
        "num_hidden_layers": 3, "use_sliding_window": True, "sliding_window": 2, "layer_types": [S, F, S],
        "rope_scaling": {"type": "mrope", "mrope_section": [4, 2, 2]}})),
}
# The multimodal family: the registry family whose tensor layout its text decoder has.
MULTIMODAL_TEXT_LAYOUT = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2", "step3p7": "step3p5"}
MODELS.update(MULTIMODAL)

# ---- Wrappers: a multimodal class around a registry family's decoder (AutoModel of its text_config). ----
# Text-only inputs reach the decoder's embeddings and layers unchanged, and the class's own lm_head gives the
# logits (cohere2_vision's without cohere2's logit_scale): the checkpoint is the decoder's, under the class's
# prefix, beside a tiny tower the text-only forward never runs (its weights left to transformers' initialisation).
# model_type: (architecture, decoder family (its model_type and tensor layout), tower and token ids over the
# class defaults, (the prefix of the decoder's model.* tensors, the prefix of its lm_head) in the checkpoint every
# pinned release loads)
WRAPPERS = {
    "mistral3": ("Mistral3ForConditionalGeneration", "mistral", {
        "vision_config": {"model_type": "pixtral", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                          "num_attention_heads": 2, "head_dim": 8, "patch_size": 2, "image_size": 8},
        "image_token_index": 250, "spatial_merge_size": 1}, ("model.language_model.", "")),
    "cohere2_vision": ("Cohere2VisionForConditionalGeneration", "cohere2", {
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16, "intermediate_size": 32,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "patch_size": 2, "image_size": 8},
        "downsample_factor": 2, "alignment_intermediate_size": 32, "image_token_id": 250}, ("model.language_model.", "")),
    "exaone4_5": ("Exaone4_5_ForConditionalGeneration", "exaone4", {
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "num_key_value_heads": 2,
                          "out_hidden_size": 64, "patch_size": 2, "temporal_patch_size": 1, "spatial_merge_size": 1,
                          "window_size": 4},
        "image_token_id": 250, "video_token_id": 251}, ("model.language_model.", "")),
    "lfm3_vl": ("Lfm3VlForConditionalGeneration", "lfm3", {
        "vision_config": {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "num_key_value_heads": 2, "patch_size": 2, "temporal_patch_size": 1, "spatial_merge_size": 1},
        "projector_hidden_size": 32, "image_token_id": 250, "video_token_id": 251, "vision_start_token_id": 252,
        "vision_end_token_id": 253}, ("model.language_model.", "")),
    # 4.x's Qwen2AudioForConditionalGeneration holds a whole Qwen2ForCausalLM (language_model.model.*,
    # language_model.lm_head); 5.x's conversion mapping loads that layout into model.language_model / lm_head.
    "qwen2_audio": ("Qwen2AudioForConditionalGeneration", "qwen2", {
        "audio_config": {"model_type": "qwen2_audio_encoder", "d_model": 16, "encoder_layers": 1,
                         "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "num_mel_bins": 8, "max_source_positions": 8},
        "audio_token_index": 250}, ("language_model.model.", "language_model.")),
    "qwen3_asr": ("Qwen3ASRForConditionalGeneration", "qwen3", {
        "audio_config": {"model_type": "qwen3_asr_encoder", "d_model": 16, "encoder_layers": 1, "encoder_attention_heads": 2,
                         "encoder_ffn_dim": 32, "num_mel_bins": 8, "output_dim": 64, "downsample_hidden_size": 8,
                         "n_window": 4, "n_window_infer": 8},
        "audio_token_id": 250, "timestamp_token_id": 251, "pad_token_id": 0, "eos_token_id": 2}, ("model.language_model.", "")),
    # 4.x and 5.13.1's thinker holds the decoder as model.*; 5.24 on load that layout into model.language_model.
    "qwen2_5_omni_thinker": ("Qwen2_5OmniThinkerForConditionalGeneration", "qwen2", {
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 64,
                          "patch_size": 2, "temporal_patch_size": 1, "spatial_merge_size": 1, "window_size": 4,
                          "fullatt_block_indexes": [0], "in_channels": 3},
        "audio_config": {"d_model": 16, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 32,
                         "num_mel_bins": 8, "max_source_positions": 8, "output_dim": 64, "n_window": 4},
        "audio_token_index": 250, "image_token_index": 251, "video_token_index": 252, "audio_start_token_id": 253,
        "audio_end_token_id": 254, "user_token_id": 255}, ("model.", "")),
    # Encoder-free: no vision or audio config by default, so no tower at all.
    "gemma4_unified": ("Gemma4UnifiedForConditionalGeneration", "gemma4_text", {}, ("model.language_model.", "")),
    # Qwen3-VL's class (DeepStack, M-RoPE) around cohere_compass_text; its decoder's layout is cohere2's.
    "cohere_compass": ("CohereCompassForConditionalGeneration", "cohere_compass_text", {
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 64,
                          "patch_size": 2, "temporal_patch_size": 1, "spatial_merge_size": 1, "num_position_embeddings": 16,
                          "deepstack_visual_indexes": [0]},
        "image_token_id": 250, "video_token_id": 251, "vision_start_token_id": 252, "vision_end_token_id": 253},
        ("model.language_model.", "")),
    # gemma2's layout with afmoe's gated attention and weightless q/k norms (make_models.py's muse_glimmer_text).
    "muse_glimmer": ("MuseGlimmerForConditionalGeneration", "muse_glimmer_text", {
        "vision_config": {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "patch_size": 2, "pos_emb_height": 4, "pos_emb_width": 4, "merge_size": 1},
        "out_hidden_size": 16, "projector_hidden_size": 32, "image_token_id": 250, "video_token_id": 251},
        ("model.language_model.", "")),
    # muse_glimmer's class with an audio tower (its out_hidden_size must be the decoder's hidden size, 64 here) around
    # muse_spark_text (make_models.py's muse_spark_text: muse_glimmer_text's layout, residual gates, a pooled MoE).
    "muse_spark": ("MuseSparkForConditionalGeneration", "muse_spark_text", {
        "vision_config": {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "patch_size": 2, "pos_emb_height": 4, "pos_emb_width": 4, "merge_size": 1},
        "audio_config": {"patch_sizes": [2], "hidden_sizes": [8], "depths": [1], "num_hidden_layers": 1,
                         "conv_kernel_size": 3, "out_hidden_size": 64},
        "out_hidden_size": 16, "projector_hidden_size": 32, "image_token_id": 250, "video_token_id": 251,
        "audio_token_id": 252}, ("model.language_model.", "")),
}


# A wrapper's decoder family whose tensors are another family's layout (make_models.py writes that one).
DECODER_LAYOUT = {"cohere_compass_text": "cohere2"}


MUSE_GLIMMER_TEXT = {  # MuseGlimmerTextConfig's keys
    "model_type": "muse_glimmer_text",
    "rope_scaling": ABSENT,  # 5.x sets rope_parameters from it, and null leaves none to read
    "rms_norm_eps": 1e-5,
    **_rope(10000.0),
}


MUSE_SPARK_TEXT = {  # MuseSparkTextConfig's keys (hidden_act, not muse_glimmer's hidden_activation)
    "model_type": "muse_spark_text",
    "rope_scaling": ABSENT,  # 5.x sets rope_parameters from it, and null leaves none to read
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 24,
    "moe_hidden_size": 32,
    **_rope(10000.0),
}


def _mrope_text(text):
    """M-RoPE sections over the decoder's head (head_dim / 2 frequencies in three) in rope_parameters (5.x: 4.x has
    no thinker model_type): a text-only forward rotates every section by the text position."""
    half = text["head_dim"] // 2
    section = [half - 2 * (half // 3), half // 3, half // 3]
    theta = text.get("rope_theta", 10000.0)
    return {**text, "rope_parameters": {"rope_type": "default", "rope_theta": theta, "mrope_section": section}}


def _gemma4_unified_text(text):
    """gemma4_text's config without the fields Gemma4UnifiedTextConfig drops (per-layer inputs, the MoE block);
    use_bidirectional_attention left to its default, "vision"."""
    dropped = ("hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block", "num_experts",
               "top_k_experts", "moe_intermediate_size", "use_bidirectional_attention")
    return {k: v for k, v in text.items() if k not in dropped}


# A wrapper whose text_config is its own class (not the decoder family's): its model_type, and what it adds.
WRAPPER_TEXT = {"qwen2_5_omni_thinker": ("qwen2_5_omni_text", _mrope_text),
                "gemma4_unified": ("gemma4_unified_text", _gemma4_unified_text)}


def wrap(model_type, decoder):
    """A wrapper's whole config over a decoder's (family, overrides): its tie in both configs (the releases read one
    or the other), the decoder's model_type in text_config."""
    arch, family, tower, _ = WRAPPERS[model_type]
    text = {k: v for k, v in decoder.items() if k != "architectures"}
    text["model_type"] = family
    if model_type in WRAPPER_TEXT:
        text["model_type"] = WRAPPER_TEXT[model_type][0]
        text = WRAPPER_TEXT[model_type][1](text)
    tie = bool(text.get("tie_word_embeddings", False))
    text["tie_word_embeddings"] = tie
    return {"architectures": [arch], "model_type": model_type, "tie_word_embeddings": tie, **tower, "text_config": text}


#   mistral3-w3         mistral3 around a 3-layer mistral, window 3, untied
#   cohere2vision-w3    cohere2_vision around cohere2-w3 (logit_scale 0.5: the wrapper's lm_head leaves it out), tied
#   exaone45-w3         exaone4_5 around exaone4-w3 (sliding_window_pattern 4)
#   lfm3vl-explicit     lfm3_vl around lfm3-explicit (conv, sliding and full layers)
#   qwen2audio-mwl2     qwen2_audio around qwen2-mwl2 (max_window_layers 2), the 4.x tensor layout
#   qwen3asr-w3         qwen3_asr around qwen3-w3 (layer_types [S, F, S], attention_bias)
#   qwen25omni-mwl2     qwen2_5_omni_thinker around qwen2-mwl2, M-RoPE sections [4, 2, 2], the 4.x tensor layout
#   gemma4unified-shared  gemma4_unified around gemma4-shared (KV sharing, final soft cap), no tower
#   gemma4unified-keqv    gemma4_unified around gemma4-keqv (attention_k_eq_v, untied)
#   coherecompass-w3    cohere_compass around a 3-layer cohere_compass_text: layer_types [S, S, F], a rope base per
#                       layer type (sliding 1e4, full 1e6), no logit_scale, untied
#   museglimmer-w3      muse_glimmer around a 4-layer muse_glimmer_text of its defaults: layers 0-2 slide (window 3),
#                       layer 3 full and NoPE, qk_scale_factor 3.87, output_multiplier 0.196, soft-cap 20, untied
#   museglimmer-explicit  layer_types [S, F, S], window 2, layer_rope_theta [1e4, 0, 5e5] (the nonzero ones rotate
#                       with the global base), qk_scale_factor 2, output_multiplier 0.5, soft-cap 8, post_norm_eps 1e-6, tied
#   musespark-w3        muse_spark around a 4-layer muse_spark_text of its defaults (muse_glimmer-w3's pattern, residual
#                       gates at temperature 0.3) with a MoE on every layer: top 2 of 4 experts of width 32 (moe_hidden_size,
#                       pooled from 64), output_multiplier 0.177 on the logits and the router's logits, untied
#   musespark-explicit  layer_types [S, F, S], window 2, layer_rope_theta [1e4, 0, 5e5], mlp_layer_types [sparse, dense,
#                       sparse], top 3 of 6, routed_scaling_factor 2.5, residual_gate_temperature 1, output_multiplier 0.5,
#                       soft-cap 8, post_norm_eps 1e-6, untied (the class leaves a tied head newly initialised)
WRAPPED = {
    "mistral3-w3": ("mistral3", wrap("mistral3", {"model_type": "mistral", "num_hidden_layers": 3, "hidden_act": "silu",
                                                  "sliding_window": 3, "tie_word_embeddings": False, **_rope(10000.0)})),
    "cohere2vision-w3": ("cohere2_vision", wrap("cohere2_vision", MODELS["cohere2-w3"][1])),
    "exaone45-w3": ("exaone4_5", wrap("exaone4_5", MODELS["exaone4-w3"][1])),
    "lfm3vl-explicit": ("lfm3_vl", wrap("lfm3_vl", MODELS["lfm3-explicit"][1])),
    "qwen2audio-mwl2": ("qwen2_audio", wrap("qwen2_audio", MODELS["qwen2-mwl2"][1])),
    "qwen3asr-w3": ("qwen3_asr", wrap("qwen3_asr", MODELS["qwen3-w3"][1])),
    "qwen25omni-mwl2": ("qwen2_5_omni_thinker", wrap("qwen2_5_omni_thinker", {**MODELS["qwen2-mwl2"][1], "head_dim": 16})),
    "gemma4unified-shared": ("gemma4_unified", wrap("gemma4_unified", MODELS["gemma4-shared"][1])),
    "gemma4unified-keqv": ("gemma4_unified", wrap("gemma4_unified", MODELS["gemma4-keqv"][1])),
    "coherecompass-w3": ("cohere_compass", wrap("cohere_compass", {
        **COHERE_COMPASS_TEXT, "num_hidden_layers": 3, "layer_types": [S, S, F], "sliding_window": 3,
        "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0}, F: {"rope_type": "default", "rope_theta": 1e6}},
        "tie_word_embeddings": False})),
    "museglimmer-w3": ("muse_glimmer", wrap("muse_glimmer", {
        **MUSE_GLIMMER_TEXT, "num_hidden_layers": 4, "sliding_window": 3, "tie_word_embeddings": False})),
    "museglimmer-explicit": ("muse_glimmer", wrap("muse_glimmer", {
        **MUSE_GLIMMER_TEXT, "num_hidden_layers": 3, "layer_types": [S, F, S], "sliding_window": 2,
        "layer_rope_theta": [10000.0, 0, 500000.0], "qk_scale_factor": 2.0, "output_multiplier": 0.5,
        "final_logit_softcapping": 8.0, "post_norm_eps": 1e-6, "tie_word_embeddings": True})),
    "musespark-w3": ("muse_spark", wrap("muse_spark", {
        **MUSE_SPARK_TEXT, "num_hidden_layers": 4, "sliding_window": 3, "tie_word_embeddings": False})),
    "musespark-explicit": ("muse_spark", wrap("muse_spark", {
        **MUSE_SPARK_TEXT, "num_hidden_layers": 3, "layer_types": [S, F, S], "sliding_window": 2,
        "layer_rope_theta": [10000.0, 0, 500000.0], "mlp_layer_types": ["sparse", "dense", "sparse"],
        "qk_scale_factor": 2.0, "output_multiplier": 0.5, "final_logit_softcapping": 8.0, "post_norm_eps": 1e-6,
        "residual_gate_temperature": 1.0, "routed_scaling_factor": 2.5, "num_local_experts": 6, "num_experts_per_tok": 3,
        "tie_word_embeddings": False})),
}
MODELS.update(WRAPPED)

# ---- Drawn models: each family's config space, deterministic from (seed, index). ----

class _Draw:
    """A SHA-256 counter stream keyed by (family, seed, index): the same draw on every machine."""

    def __init__(self, family, seed, index):
        self.key, self.n = f"kvconform/draw/{family}/{seed}/{index}/", 0

    def int(self, lo, hi):  # uniform in [lo, hi]
        import hashlib
        self.n += 1
        u = int.from_bytes(hashlib.sha256((self.key + str(self.n)).encode()).digest()[:8], "little")
        return lo + u % (hi - lo + 1)

    def pick(self, options):
        return options[self.int(0, len(options) - 1)]

    def coin(self):
        return self.int(0, 1) == 1


def _widths(d, head_dims=(8, 16)):
    """Heads, GQA ratio and head_dim (the hidden size stays 64)."""
    heads = d.pick([2, 4, 8])
    return {"num_attention_heads": heads, "num_key_value_heads": heads // d.pick([g for g in (1, 2, 4) if heads % g == 0]),
            "head_dim": d.pick(list(head_dims)), "tie_word_embeddings": d.coin()}


def _types(d, layers, kinds=(S, F)):
    return [d.pick(list(kinds)) for _ in range(layers)]


def draw(family, seed, index, head_dims=(8, 16)):
    """One model of the family: (family, config overrides), in an encoding real checkpoints use;
    head_dim drawn from head_dims (families that derive it from the heads keep their rule)."""
    if family in WRAPPERS:  # its decoder family's draw (keyed by the wrapper), wrapped
        _, over = draw(WRAPPERS[family][1], f"{family}-{seed}", index, head_dims)
        if family in ("qwen2_audio", "muse_spark"):  # untied only: 5.x's class leaves a tied head newly initialised (refused)
            over["tie_word_embeddings"] = False
        if family == "qwen2_5_omni_thinker":  # its draws slide (qwen2's draw leaves it to a coin)
            over["use_sliding_window"] = True
        return family, wrap(family, over)
    d = _Draw(family, seed, index)
    layers = d.int(1, 5)
    w = d.int(2, 6)
    c = _widths(d, head_dims)
    c["num_hidden_layers"] = layers
    if family == "step3p7":
        return family, _draw_step3p7(d, c, layers, w)
    if family in ENCODER_FAMILIES:
        return family, _draw_encoder(family, d, c, layers, w)
    if family in ("gemma2", "gemma3_text"):
        c.update({"architectures": ["Gemma2ForCausalLM" if family == "gemma2" else "Gemma3ForCausalLM"], "model_type": family,
                  "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh", "sliding_window": w,
                  "query_pre_attn_scalar": d.pick([8, 16, 32, 64]),
                  "attn_logit_softcapping": d.pick([None, 10.0]) if family == "gemma2" else None,
                  "final_logit_softcapping": d.pick([None, 8.0]) if family == "gemma2" else None})
        if family == "gemma2":
            c.update(_rope(10000.0))
        else:
            c.update({"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                      "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0},
                                          S: {"rope_type": "default", "rope_theta": 10000.0}}})
        if d.coin():  # explicit layer_types; else the family's default pattern (gemma3: sliding_window_pattern)
            c["layer_types"] = _types(d, layers)
        elif family == "gemma3_text":
            c["sliding_window_pattern"] = d.int(2, 4)
    elif family in ("qwen2", "qwen3"):
        c.update({"architectures": ["Qwen2ForCausalLM" if family == "qwen2" else "Qwen3ForCausalLM"], "model_type": family,
                  "hidden_act": "silu", "use_sliding_window": d.coin(), "sliding_window": w,
                  "max_window_layers": d.int(0, layers), **_rope(10000.0)})
        if family == "qwen3":
            c["attention_bias"] = d.coin()
        if d.coin() and c["use_sliding_window"]:
            c["layer_types"] = _types(d, layers)
    elif family == "llama4_text":
        c.update({k: v for k, v in LLAMA4.items() if k != "tie_word_embeddings"})
        c.update({"attention_chunk_size": w, "num_experts_per_tok": d.int(1, 2), "use_qk_norm": d.coin(),
                  "attn_temperature_tuning": d.coin(), "floor_scale": d.pick([2, 4, 8]),
                  "interleave_moe_layer_step": d.int(1, 2)})
        if d.coin():
            c["no_rope_layers"] = [d.int(0, 1) for _ in range(layers)]
        else:
            c["no_rope_layer_interval"] = d.int(2, 4)
        if d.coin():
            c["layer_types"] = _types(d, layers, ("chunked_attention", F))
    elif family == "gpt_oss":
        c.update({k: v for k, v in MODELS["gptoss-w4"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c.update({"sliding_window": w, "num_experts_per_tok": d.int(1, 3)})
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "cohere2":
        c.update({k: v for k, v in MODELS["cohere2-w3"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c["head_dim"] = 64 // c["num_attention_heads"]  # cohere2 derives it so in every release
        c["sliding_window"] = w
        if d.coin():
            c["layer_types"] = _types(d, layers)
        else:
            c["sliding_window_pattern"] = d.int(2, 4)
    elif family == "smollm3":
        c.update({k: v for k, v in MODELS["smollm3-nope"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c.update({"use_sliding_window": d.coin(), "sliding_window": w, "attention_bias": d.coin()})
        if d.coin():
            c["no_rope_layers"] = [d.int(0, 1) for _ in range(layers)]
        else:
            c["no_rope_layer_interval"] = d.int(2, 4)
    elif family == "gemma4_text":
        c.update({k: v for k, v in GEMMA4.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "global_head_dim": 2 * c["head_dim"], "final_logit_softcapping": d.pick([None, 8.0]),
                  "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0},
                                      F: {"rope_type": "proportional", "partial_rotary_factor": d.pick([0.25, 0.5, 1.0]),
                                          "rope_theta": 1000000.0}}})
        if d.coin():
            c["layer_types"] = _types(d, layers)
        types = list(c.get("layer_types") or [S if (i + 1) % 6 else F for i in range(layers)])
        types[-1] = F
        if d.coin():
            c["attention_k_eq_v"], c["num_global_key_value_heads"] = True, d.pick([1, c["num_key_value_heads"]])
        # KV sharing over the last layers, as far as every shared layer's type has an earlier producer.
        shared = d.int(0, layers - 1)
        while shared and set(types[layers - shared:]) - set(types[:layers - shared]):
            shared -= 1
        c["num_kv_shared_layers"] = shared
        # Per-layer input embeddings (a table row and a projection per layer, added after each layer's MLP), or none.
        c["hidden_size_per_layer_input"] = d.pick([0, 4, 8])
    elif family == "olmo3":
        c.update({k: v for k, v in MODELS["olmo3-w3"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c.update({"sliding_window": w, "attention_bias": d.coin()})
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "exaone4":
        c.update({k: v for k, v in MODELS["exaone4-w3"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c["sliding_window"] = w
        encoding = d.pick(["layer_types", "pattern", "no window"])
        if encoding == "layer_types":
            c["layer_types"] = _types(d, layers)
        elif encoding == "pattern":
            c["sliding_window_pattern"] = d.int(2, 4)
        else:
            c["sliding_window"], c["layer_types"] = None, [F] * layers
    elif family == "vaultgemma":
        c.update({k: v for k, v in VAULTGEMMA.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "query_pre_attn_scalar": d.pick([8, 16, 32]),
                  "attn_logit_softcapping": d.pick([None, 10.0]), "final_logit_softcapping": d.pick([None, 8.0])})
        encoding = d.pick(["layer_types", "default", "all full"])
        if encoding == "layer_types":
            c["layer_types"] = _types(d, layers)
        elif encoding == "all full":
            c["layer_types"] = [F] * layers
    elif family == "cwm":
        c.update({k: v for k, v in MODELS["cwm-w3"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c["sliding_window"] = w
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "granite_swa":
        c.update({k: v for k, v in MODELS["graniteswa-w4"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c.update({"sliding_window": w, "attention_bias": d.coin(), "attention_multiplier": d.pick([0.125, 0.25, 0.5])})
        c["layer_rope_theta"] = [d.pick([0, 10000.0, 500000.0]) for _ in range(layers)] if d.coin() else None
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "phi3":
        factor = d.pick([0.25, 0.5, 1.0])
        c.update({k: v for k, v in MODELS["phi3-w4"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c.update({"sliding_window": d.pick([None, w]), "partial_rotary_factor": factor,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor}})
    elif family == "ministral":
        c.update({k: v for k, v in MODELS["ministral-w4"][1].items() if k not in ("num_hidden_layers", "tie_word_embeddings")})
        c["sliding_window"] = w
        if d.coin():  # else no layer_types: every layer slides
            c["layer_types"] = _types(d, layers)
    elif family == "qwen2_moe":
        # Every layer sliding or none: 4.56.2 and 4.57.6 slide every layer where use_sliding_window (read_qwen2_moe).
        experts = d.pick([4, 6, 8])
        c.update({k: v for k, v in QWEN2_MOE.items() if k != "tie_word_embeddings"})
        step = min(d.int(1, 2), layers)
        last_moe = max(i for i in range(layers) if (i + 1) % step == 0)  # kept a MoE layer: every draw has one
        c.update({"use_sliding_window": d.coin(), "sliding_window": w, "num_experts": experts,
                  "num_experts_per_tok": d.int(1, 3), "norm_topk_prob": d.coin(), "decoder_sparse_step": step,
                  "mlp_only_layers": [i for i in range(layers) if d.int(0, 3) == 0 and i != last_moe]})
        c["layer_types"] = [S if c["use_sliding_window"] else F] * layers
        c["head_dim"] = 64 // c["num_attention_heads"]  # 4.56.2 and 4.57.6 derive it so (and refuse another)
    elif family == "dots1":
        experts = d.pick([4, 8])
        groups = d.pick([g for g in (1, 2) if experts // g >= 2])
        topk_group = d.int(1, groups)
        c.update({k: v for k, v in DOTS1.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "n_routed_experts": experts, "n_group": groups, "topk_group": topk_group,
                  "num_experts_per_tok": d.int(1, min(3, topk_group * experts // groups)), "norm_topk_prob": d.coin(),
                  "routed_scaling_factor": d.pick([1.0, 2.5]), "first_k_dense_replace": d.int(0, min(1, layers - 1)),
                  "n_shared_experts": d.int(1, 2), "attention_bias": d.coin()})
        if d.coin():
            c["layer_types"] = _types(d, layers)
        else:
            c["max_window_layers"] = d.int(0, layers)
    elif family == "exaone_moe":
        experts = d.pick([4, 8])
        groups = d.pick([g for g in (1, 2, 4) if experts // g >= 2])
        topk_group = d.int(1, groups)
        c.update({k: v for k, v in EXAONE_MOE.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_experts": experts, "n_group": groups, "topk_group": topk_group,
                  "num_experts_per_tok": d.int(1, min(3, topk_group * experts // groups)), "norm_topk_prob": d.coin(),
                  "routed_scaling_factor": d.pick([1.0, 2.5]), "num_shared_experts": d.int(1, 2)})
        if d.coin():  # the last layer sparse: every draw has a MoE layer
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
        else:
            c["first_k_dense_replace"] = d.int(0, min(1, layers - 1))
        if d.coin():
            c["layer_types"] = _types(d, layers)
        else:
            c["sliding_window_pattern"] = d.int(2, 4)
    elif family == "mellum":
        experts = d.pick([4, 6, 8])
        c.update({k: v for k, v in MELLUM.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_local_experts": experts, "num_experts_per_tok": d.int(1, 3),
                  "norm_topk_prob": d.coin(), "attention_bias": d.coin()})
        if d.coin():  # else no layer_types: every layer full
            c["layer_types"] = _types(d, layers)
        if d.coin():  # the last layer sparse: every draw has a MoE layer; else every layer sparse
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
        if d.coin():  # else the config's own bases (full 5e5, sliding 1e4)
            c["rope_parameters"] = _mellum_rope(d.pick([500000.0, 1000000.0]), d.pick([10000.0, 100000.0]))
    elif family == "flint":
        c.update({k: v for k, v in FLINT.items() if k != "tie_word_embeddings"})
        step = min(d.int(1, 2), layers)
        last_moe = max(i for i in range(layers) if (i + 1) % step == 0)  # kept a MoE layer: every draw has one
        c.update({"sliding_window": w, "num_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "norm_topk_prob": d.coin(), "attention_bias": d.coin(), "decoder_sparse_step": step,
                  "shared_expert_intermediate_size": d.pick([32, 48])})
        if d.coin() or last_moe < 2:  # else the default mlp_only_layers [0, 1]
            c["mlp_only_layers"] = [i for i in range(layers) if d.int(0, 3) == 0 and i != last_moe]
        if d.coin() or layers < 3:  # else the default pattern (full on 0, 1, i % 4 == 1 and the last: none slides below 3)
            c["layer_types"] = _types(d, layers)
    elif family == "cohere2_moe":
        c.update({k: v for k, v in COHERE2_MOE.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "expert_selection_fn": d.pick(["softmax", "sigmoid"]), "norm_topk_prob": d.coin(),
                  "num_shared_experts": d.int(0, 2), "shared_expert_combination_strategy": d.pick(["average", "sum"]),
                  "rms_norm_eps": d.pick([None, 1e-6]), "attention_bias": d.coin(),
                  "prefix_dense_sliding_window_pattern": d.int(1, 2)})
        if d.coin():  # explicit types, the last layer sparse: every draw has a MoE layer
            c["layer_types"] = _types(d, layers)
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
        else:  # the config's own defaults from first_k_dense_replace (a key it pops) and sliding_window_pattern
            c.update({"first_k_dense_replace": d.int(0, layers - 1), "sliding_window_pattern": d.int(2, 4)})
    elif family == "afmoe":
        c.update({k: v for k, v in AFMOE.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  # A shared expert in every draw: the post-MLP norm erases any per-token scale of the routed output
                  # alone, so without one the renormalisation and route_scale could not act (sensitivity.py).
                  "num_shared_experts": d.int(1, 2), "route_scale": d.pick([1.0, 2.5]), "mup_enabled": d.coin(),
                  "attention_bias": d.coin(), "num_dense_layers": d.int(0, layers - 1)})  # every draw has a MoE layer
        if d.coin():  # else the default pattern: global_attn_every_n_layers (layer 0 slides)
            c["layer_types"] = _types(d, layers)
            c["layer_types"][0] = S  # every draw has a window to judge
        else:
            c["global_attn_every_n_layers"] = d.int(2, 4)
    elif family == "laguna":
        c.update({k: v for k, v in LAGUNA.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "gating": d.pick([True, "per-head", "per-element"]), "attention_bias": d.coin(),
                  "moe_router_logit_softcapping": d.pick([0.0, 1.0, 2.0]), "moe_routed_scaling_factor": d.pick([1.0, 2.5]),
                  "layer_types": _types(d, layers)})
        c["layer_types"][0] = S  # every draw has a window to judge (the default is every layer full)
        if d.coin():  # else the config's own rope: full base 5e5 rotating half of a head, sliding base 1e4 all of it
            c.update(_laguna_rope(d.pick([500000.0, 1000000.0]), d.pick([0.25, 0.5, 1.0]), 10000.0, d.pick([0.5, 1.0])))
        # The last layer sparse: every draw has a MoE layer; else (two layers or more) the default, the first dense.
        if d.coin() or layers == 1:
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
    elif family == "ergo":
        # head_dim is hidden / heads; the first layer slides; the full layers NoPE or rotated; a MoE layer in every draw.
        c.update({**ERGO, "head_dim": 64 // c["num_attention_heads"], "sliding_window": w,
                  "num_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "moe_routed_scaling_factor": d.pick([1.0, 8 ** 0.5])})
        if d.coin():
            c["layer_types"] = [S] + _types(d, layers - 1)
        else:
            c["global_attention_every_n_layers"] = d.int(2, 4)
        sliding = {"rope_type": "default", "rope_theta": d.pick([10000.0, 1000000.0])}
        c["rope_parameters"] = sliding if d.coin() else {S: sliding, F: d.pick([None, {"rope_type": "default", "rope_theta": 500000.0}])}
        if d.coin() or layers == 1:
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
        else:
            c["num_dense_blocks"] = d.int(0, layers - 1)
    elif family == "beam":
        experts = d.pick([4, 6, 8])
        groups = d.pick([g for g in (1, 2) if experts // g >= 2])
        c.update({k: v for k, v in BEAM.items() if k != "tie_word_embeddings"})
        # norm_topk_prob and routed_scaling_factor are not drawn: with no shared expert the post-MLP norm erases any
        # per-token scale of the routed output, so neither can act (sensitivity.py); the defaults are kept.
        c.update({"sliding_window": w, "num_experts": experts, "num_experts_per_tok": d.int(1, 3), "n_group": groups,
                  "topk_group": d.int(1, groups), "final_logit_softcapping": d.pick([None, 30.0]), "attention_bias": d.coin()})
        c["num_experts_per_tok"] = min(c["num_experts_per_tok"], c["topk_group"] * experts // groups)
        if d.coin() or layers == 1:  # else the default pattern: every sixth layer and the last full
            c["layer_types"] = _types(d, layers)
            c["layer_types"][0] = S  # every draw has a window to judge
        if d.coin():  # else the config's own: sliding base 1e4, full NoPE with scaled queries
            c["rope_parameters"] = {t: d.pick([None, {"rope_type": "default", "rope_theta": d.pick([10000.0, 500000.0])}])
                                    for t in (S, F)}
        # The last layer sparse: every draw has a MoE layer; else (four layers or more) the default, the first three dense.
        if d.coin() or layers < 4:
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
    elif family == "dory":
        # Input, looped and output sections of the drawn layers (at least one looped), 1 to 3 passes; the first layer
        # slides; the saved (attention, "mlp") layout or the plain one.
        looped = d.int(1, layers)
        inputs = d.int(0, layers - looped)
        c.update({**DORY, "sliding_window": w, "n_input_layers": inputs, "n_output_layers": layers - looped - inputs,
                  "n_recurrent_loops": d.int(1, 3), "initializer_range": d.pick([0.0177, 0.02, 0.05]),
                  "ngpt_alpha_init": d.pick([0.05, 0.1]), "attention_bias": d.coin(), "mlp_bias": d.coin(),
                  "hidden_act": d.pick(["silu", "gelu_pytorch_tanh"])})
        if d.coin():
            c["n_recurrent_layers"] = looped
        c["layer_types"] = [S] + _types(d, layers - 1)
        if d.coin():
            c["rope_parameters"] = {S: {"rope_type": "default", "rope_theta": d.pick([10000.0, 1000000.0])},
                                    F: {"rope_type": "default", "rope_theta": d.pick([500000.0, 10000000.0])}}
        if d.coin():
            c = _dory_saved(c)
    elif family == "kolibri1":
        c.update({k: v for k, v in KOLIBRI1.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "num_local_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "norm_topk_prob": d.coin(), "shared_expert_intermediate_size": d.pick([32, 48])})
        if d.coin():  # else the default pattern: every fifth layer full (layer 0 slides)
            c["layer_types"] = _types(d, layers)
            c["layer_types"][0] = S  # every draw has a window to judge
    elif family == "granitemoe_swa":
        c.update({k: v for k, v in GRANITEMOE_SWA.items() if k != "tie_word_embeddings"})
        c.update({"sliding_window": w, "attention_bias": d.coin(), "attention_multiplier": d.pick([0.125, 0.25, 0.5]),
                  "num_local_experts": d.pick([3, 4, 6]), "num_experts_per_tok": d.int(1, 3),
                  "shared_intermediate_size": d.pick([0, 48])})
        c["layer_rope_theta"] = [d.pick([0, 10000.0, 500000.0]) for _ in range(layers)] if d.coin() else None
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "lfm3":
        # Conv kernels of 2 to 5 taps (the released 7 is as long as a whole plan's window here); the first layer a
        # convolution, so that every draw has one; proportional or default rope on the full layers.
        c.update({k: v for k, v in LFM3.items() if k != "tie_word_embeddings"})
        full_rope = d.pick([{"rope_type": "proportional", "partial_rotary_factor": d.pick([0.25, 0.5, 1.0]), "rope_theta": 1000000.0},
                            {"rope_type": "default", "rope_theta": 500000.0}])
        c.update({"sliding_window": w, "conv_L_cache": d.int(2, 5), "conv_bias": d.coin(), "use_attention_gate": d.coin(),
                  "use_sandwich_norm": d.coin(), "rope_parameters": {S: {"rope_type": "default", "rope_theta": 10000.0}, F: full_rope}})
        if d.coin():
            c["layer_types"] = ["conv"] + [d.pick(["conv", S, F]) for _ in range(layers - 1)]
    elif family == "recurrent_gemma":
        # Two layers at least, a recurrent block and a local attention among them (block_types, or the default
        # recurrent, recurrent, attention from three layers); head_dim is hidden_size / heads in every release.
        layers = c["num_hidden_layers"] = max(layers, 2)
        heads = c["num_attention_heads"]
        c.update({k: v for k, v in RECURRENT_GEMMA.items() if k != "tie_word_embeddings"})
        c.update({"head_dim": 64 // heads, "attention_window_size": w, "conv1d_width": d.int(2, 5),
                  "lru_width": d.pick([x for x in (32, 64, 96) if x % heads == 0]), "attention_bias": d.coin(),
                  "logits_soft_cap": d.pick([8.0, 30.0])})
        if d.coin() or layers < 3:
            c["block_types"] = ["recurrent", "attention"] + [d.pick(["recurrent", "attention"]) for _ in range(d.int(0, 1))]
    elif family == "lara_mini":
        # A delta block and a sliding layer in every draw (the first two layers); the delta heads' counts and sizes,
        # the taps, the routing's constants.
        layers = c["num_hidden_layers"] = max(layers, 2)
        k_heads = d.pick([1, 2])
        c.update({**{k: v for k, v in LARA_MINI.items() if k != "tie_word_embeddings"}, "sliding_window": w,
                  "attention_bias": d.coin(), "linear_conv_kernel_dim": d.int(2, 5), "linear_num_key_heads": k_heads,
                  "linear_num_value_heads": k_heads * d.pick([1, 2, 3]), "linear_key_head_dim": d.pick([8, 16]),
                  "linear_value_head_dim": d.pick([8, 16]), "num_experts": d.pick([3, 4, 6]),
                  "num_experts_per_tok": d.int(1, 2), "norm_topk_prob": d.coin(),
                  "rope_parameters": {"rope_type": "default", "rope_theta": d.pick([10000.0, 1000000.0])}})
        if d.coin() or layers < 5:
            c["layer_types"] = ["linear_attention", S] + [d.pick(["linear_attention", S, F]) for _ in range(layers - 2)]
    elif family == "cohere_compass_text":
        # Each layer type's rope a base or NoPE (null); a logit_scale or none; the first layer slides.
        c.update({**COHERE_COMPASS_TEXT, "head_dim": 64 // c["num_attention_heads"], "sliding_window": w,
                  "logit_scale": d.pick([None, 0.5]), "layer_types": [S] + _types(d, layers - 1),
                  "rope_parameters": {t: d.pick([None, {"rope_type": "default", "rope_theta": d.pick([10000.0, 1e6])}])
                                      for t in (S, F)}})
    elif family == "muse_glimmer_text":
        # NoPE layers by layer_rope_theta or its default; the first layer slides.
        c.update({**MUSE_GLIMMER_TEXT, "sliding_window": w, "qk_scale_factor": d.pick([1.0, 3.87]),
                  "output_multiplier": d.pick([0.25, 1.0]), "final_logit_softcapping": d.pick([8.0, 20.0]),
                  "post_norm_eps": d.pick([1e-8, 1e-6]), "hidden_activation": d.pick(["silu", "gelu_pytorch_tanh"])})
        if d.coin():
            c["layer_types"] = [S] + _types(d, layers - 1)
            c["layer_rope_theta"] = [d.pick([0, 10000.0]) for _ in range(layers)]
    elif family == "gemma3n_text":
        # No KV sharing (4.56.2 and 4.57.6 share only through a cache) and a per-layer table the size of the
        # vocabulary (4.56.2 to 5.13.1 raise IndexError past it): each release's no-cache forward is then the rule.
        c.update({k: v for k, v in GEMMA3N.items() if k != "tie_word_embeddings"})
        a = d.int(2, 4)
        c.update({"sliding_window": w, "hidden_size_per_layer_input": d.pick([4, 8, 16]), "vocab_size_per_layer_input": 256,
                  "altup_num_inputs": a, "altup_active_idx": d.int(0, a - 1), "altup_correct_scale": d.coin(),
                  "laurel_rank": d.pick([2, 4, 8]), "final_logit_softcapping": d.pick([8.0, 30.0]),
                  "activation_sparsity_pattern": [d.pick([0.0, 0.6, 0.95]) for _ in range(layers)]})
        if d.coin():
            c["layer_types"] = _types(d, layers)
    elif family == "muse_spark_text":
        # muse_glimmer_text's draw (NoPE layers by layer_rope_theta or its default; the first layer slides), its MoE on
        # the last layer at least (every draw has one), the residual gates' temperature and the routing constants.
        c.update({**MUSE_SPARK_TEXT, "sliding_window": w, "qk_scale_factor": d.pick([1.0, 5.47]),
                  "output_multiplier": d.pick([0.25, 1.0]), "final_logit_softcapping": d.pick([8.0, 20.0]),
                  "post_norm_eps": d.pick([1e-8, 1e-6]), "residual_gate_temperature": d.pick([0.3, 1.0]),
                  "num_local_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                  "moe_hidden_size": d.pick([32, 48])})
        # Not drawn: routed_scaling_factor and the renormalisation scale each token's routed sum by one factor, which
        # the post-MLP norm erases (no shared expert joins the sum): they cannot act (sensitivity.py).
        if d.coin():
            c["layer_types"] = [S] + _types(d, layers - 1)
            c["layer_rope_theta"] = [d.pick([0, 10000.0]) for _ in range(layers)]
        if d.coin():
            c["mlp_layer_types"] = [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"]
    elif family == "mistral":
        c.update({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
                  "sliding_window": d.pick([None, w]), **_rope(10000.0)})
    else:
        raise ValueError(f"no drawer for {family}")
    return ("gemma3" if family == "gemma3_text" else DECODER_LAYOUT.get(family, family)), c  # make_models' tensor layout name


def _draw_step3p7(d, c, layers, w):
    """A step3p7 around a drawn text decoder: the sliding layers' own head count (a multiple of the KV heads), the
    rope by layer lists or keyed by type, a partial factor, dense and sparse layers (the last sparse), the routing's
    constants and a SwiGLU bound or none per layer on the routed experts and on the MLP and shared expert; the first
    layer slides."""
    kv = c["num_key_value_heads"]
    text = {**STEP3P7_TEXT, **{k: v for k, v in c.items() if k != "tie_word_embeddings"}}
    types = [S] + _types(d, layers - 1)
    text.update({"layer_types": types, "sliding_window": w,
                 "num_sliding_attention_heads": kv * d.pick([1, 2, c["num_attention_heads"] // kv]),
                 "query_pre_attn_scalar": d.pick([None, 32]), "attention_bias": d.coin(),
                 "n_routed_experts": d.pick([4, 6, 8]), "num_experts_per_tok": d.int(1, 3),
                 "moe_router_scaling_factor": d.pick([1.0, 2.5]),
                 "mlp_layer_types": [d.pick(["dense", "sparse"]) for _ in range(layers - 1)] + ["sparse"],
                 "swiglu_limits": [d.pick([0, None, 1.0, 2.0]) for _ in range(layers)],
                 "swiglu_limits_shared": [d.pick([0, None, 1.5, 3.0]) for _ in range(layers)]})
    full, sliding = d.pick([500000.0, 1000000.0]), 10000.0
    full_factor, sliding_factor = d.pick([0.5, 1.0]), d.pick([0.5, 1.0])
    if d.coin():
        text["rope_parameters"] = {F: {"rope_type": "default", "rope_theta": full, "partial_rotary_factor": full_factor},
                                   S: {"rope_type": "default", "rope_theta": sliding, "partial_rotary_factor": sliding_factor}}
    else:
        text["rope_theta"] = [full if t == F else sliding for t in types]
        text["partial_rotary_factors"] = [full_factor if t == F else sliding_factor for t in types]
    return _step3p7(c["tie_word_embeddings"], text)


def _draw_encoder(family, d, c, layers, w):
    """An encoder's (or an encoder-decoder's) config around the drawn widths: the layer count, its reach (the window, or
    ModernBERT's local_attention), the layer pattern (explicit layer_types or the family's default) with a local layer in
    every draw, and the family's own constants (biases, activations, rope bases; neomme's per-layer windows, embedding
    rank and residual multiplier, a full layer in every draw for its value embeddings; embedding_gemma2's per-layer input
    and output widths; openai_privacy_filter's experts; the encoder-decoders' decoder window and soft-caps). Two layers at
    least where the family's pattern makes layer 0 full or forces the last one full."""
    heads, kv, hd, tie = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["tie_word_embeddings"]
    widths = {"num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd}
    act = d.pick(["gelu", "gelu_pytorch_tanh"])
    if family == "modernbert":  # head_dim is hidden / heads, no KV heads; layer 0 is global
        return {**MODERNBERT, "num_hidden_layers": max(layers, 2), "num_attention_heads": heads,
                "global_attn_every_n_layers": d.int(2, 3), "local_attention": 2 * w - d.int(0, 1),
                "global_rope_theta": d.pick([10000.0, 160000.0]), "local_rope_theta": d.pick([10000.0, 50000.0]),
                "norm_bias": d.coin(), "attention_bias": d.coin(), "mlp_bias": d.coin(), "classifier_bias": d.coin(),
                "decoder_bias": d.coin(), "hidden_activation": act, "classifier_activation": act,  # one activation: the oracle's
                "tie_word_embeddings": tie}
    if family == "ultrabert":
        out = {**ULTRABERT, **widths, "num_hidden_layers": layers, "sliding_window": w, "attention_bias": d.coin(),
               "mlp_bias": d.coin(), "hidden_act": d.pick(["silu", "gelu"]), "prediction_head_size": d.pick([32, 48]),
               "tie_word_embeddings": tie,
               "rope_parameters": {F: {"rope_type": "default", "rope_theta": d.pick([160000.0, 2560000.0])},
                                   S: {"rope_type": "default", "rope_theta": 10000.0}}}
        if d.coin() or layers < 3:  # else the default pattern: (i + 1) % 3 full
            out["layer_types"] = [S] + _types(d, layers - 1)
        return out
    if family == "embedding_gemma2_text":  # the last layer is full whatever the pattern says
        layers = max(layers, 2)
        out = {**EMBEDDING_GEMMA2, **widths, "num_hidden_layers": layers, "sliding_window": w,
               "global_head_dim": d.pick([16, 32]), "num_global_key_value_heads": d.pick([1, kv]),
               "hidden_size_per_layer_input": d.pick([4, 8]), "embedding_dim": d.pick([16, 24]), "hidden_activation": act,
               "tie_word_embeddings": tie}
        if d.coin():
            out["layer_types"] = [S] + _types(d, layers - 2) + [F]
        else:
            out["sliding_window_pattern"] = d.int(2, 4)
        return out
    if family == "openai_privacy_filter":  # every layer slides; a token classifier (no head to tie)
        experts = d.pick([2, 3, 4])
        return {**OPENAI_PRIVACY_FILTER, **widths, "num_hidden_layers": layers, "sliding_window": w,
                "num_local_experts": experts, "num_experts_per_tok": d.int(1, min(2, experts)), "attention_bias": d.coin(),
                "rope_parameters": {"rope_type": "default", "rope_theta": d.pick([10000.0, 150000.0])}}
    if family == "neomme":  # a sliding layer first and a full layer last (its value embeddings), windows per layer
        layers = max(layers, 2)
        types = [S] + _types(d, layers - 2) + [F]
        out = {**NEOMME, **widths, "num_hidden_layers": layers, "layer_types": types, "sliding_window": w,
               "per_layer_config": {str(i): {"sliding_window": d.int(1, w) if t == S else None} for i, t in enumerate(types)},
               "rope_parameters": {F: {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": d.pick([0.25, 1.0])},
                                   S: {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": d.pick([0.5, 1.0])}},
               "embedding_rank": d.pick([16, 24, 64]), "attention_bias": d.coin(), "tie_word_embeddings": tie}
        if d.coin():  # else the class's 1 / sqrt(layers)
            out["residual_multiplier"] = d.pick([0.5, 0.7])
        return out
    # The encoder-decoders: an encoder of `layers` (a local layer first), a decoder of its own depth and window (a local
    # layer first), the decoder's KV heads of its own.
    dec_layers, dec_w = d.int(1, 3), d.int(2, 5)
    dec_kv = heads // d.pick([g for g in (1, 2, 4) if heads % g == 0])
    enc_types, dec_types = [S] + _types(d, layers - 1), [S] + _types(d, dec_layers - 1)
    scalar, bias = d.pick([8, 16, 24]), d.coin()
    stack = {**widths, "query_pre_attn_scalar": scalar, "attention_bias": bias, "hidden_activation": act}
    encoder = {**stack, "num_hidden_layers": layers, "layer_types": enc_types, "sliding_window": w}
    decoder = {**stack, "num_hidden_layers": dec_layers, "layer_types": dec_types, "sliding_window": dec_w,
               "num_key_value_heads": dec_kv, "final_logit_softcapping": d.pick([None, 6.0])}
    if family == "t5gemma2":
        # Its encoder reaches (W + 1) // 2 - 1 keys before a query: a window of 2 reaches none, and a padding position
        # beside the end then sees no real key (the oracle refuses it; transformers averages every value there).
        encoder["sliding_window"] = max(w, 3)
        rope = _rope_by_type(10000.0, d.pick([500000.0, 1000000.0]))
        return t5gemma2(tie, {**encoder, **rope}, {**decoder, **rope})
    theta, softcap = d.pick([10000.0, 50000.0]), d.pick([None, 5.0])
    untied = {} if tie else {"tie_word_embeddings": False}  # 4.57.6 ties the head to the encoder's where a stack says tie
    return {"architectures": ["T5GemmaForConditionalGeneration"], "model_type": "t5gemma", "vocab_size": 256,
            "is_encoder_decoder": True, "tie_word_embeddings": tie,
            "encoder": {**T5GEMMA_STACK, **encoder, "rope_theta": theta, "attn_logit_softcapping": softcap,
                        "final_logit_softcapping": None, **untied},
            "decoder": {**T5GEMMA_STACK, **decoder, "rope_theta": theta, "attn_logit_softcapping": softcap, **untied}}


DRAWN_FAMILIES = ("gemma2", "gemma3_text", "mistral", "qwen2", "qwen3", "llama4_text", "gpt_oss", "smollm3", "cohere2",
                  "gemma4_text", "olmo3", "exaone4", "vaultgemma", "cwm", "granite_swa", "phi3", "ministral", "qwen2_moe", "dots1",
                  "granitemoe_swa", "exaone_moe", "mellum", "flint", "cohere2_moe", "afmoe", "kolibri1", "laguna", "beam")
# Hybrid families: drawn into the drawn set (oracle_agreement.py), not into the model campaign's families
# (make_models.py --draw list) or the wide set, which the third-party engines run: their support for a
# convolution layer is not established, so none is asked yet.
HYBRID_FAMILIES = ("lfm3", "recurrent_gemma", "lara_mini")
# Families drawn into the drawn set only, like the hybrids: gemma3n's layers (AltUp, per-layer inputs) and dory's looped
# section and nGPT rules are not asked of the third-party engines yet; ergo's head size is hidden / heads, which the
# wide set's head_dim draw contradicts. (One definition: a second one once dropped gemma3n_text from every draw.)
DRAWN_ONLY_FAMILIES = ("gemma3n_text", "ergo", "dory")
# Wrappers (multimodal classes around a decoder family: WRAPPERS): drawn into the drawn set only, like the hybrids
# (the third-party engines' support for the multimodal classes is not established).
WRAPPER_FAMILIES = tuple(WRAPPERS)
# Multimodal classes read through a text decoder that is no registry family of its own: drawn into the drawn set only.
MULTIMODAL_FAMILIES = ("step3p7",)


# The encoders and encoder-decoders (ENCODERS' families): drawn into their own set (make_models.py --set drawn-encoders),
# held to transformers by encoder_agreement.py and judged by sensitivity.py through the oracle's encoder forward; no
# engine runs them (an engine check SKIPs an encoder: no_causal_plan_reason), so neither the model campaign nor the wide
# set draws them.
ENCODER_FAMILIES = ("modernbert", "ultrabert", "embedding_gemma2_text", "openai_privacy_filter", "neomme", "t5gemma", "t5gemma2")


# The families whose models the oracle's agreement with transformers checks in CI as a seeded sample,
# one model per family and run (engines/transformers/oracle_agreement.py; --all checks every one): CI's
# agreement test was over its budget before them.
SAMPLED = ("mellum", "flint", "cohere2_moe", "afmoe", "modernbert-decoder", "kolibri1", "laguna", "gemma3n_text", "step3p7",
           "ergo", "beam", "dory")


def drawn(seed=0, count=2, head_dims=(8, 16),
          families=DRAWN_FAMILIES + HYBRID_FAMILIES + WRAPPER_FAMILIES + MULTIMODAL_FAMILIES + DRAWN_ONLY_FAMILIES, prefix="draw"):
    """The drawn set: `count` models per family."""
    return {f"{prefix}-{f.replace('_text', '').replace('_', '')}-{seed}-{i}": draw(f, seed, i, head_dims)
            for f in families for i in range(count)}


# vLLM's CPU attention takes head_dim 32, 48, 64, 80, 96, 128, 256, 512 and refuses 4, 8, 16
# (plugins/vllm/NOTES.md), so its set draws head_dim 32 or 64, over the families whose head_dim
# is a free parameter (cohere2 derives it from the heads), without llama4: vLLM's CPU path runs chunked
# attention only in whole KV blocks (32 tokens there), far above this set's chunks of 2 to 6. The model
# campaign draws every family with these head sizes (engines/engines.json "head_dims").
VLLM_FAMILIES = ("gemma2", "gemma3_text", "mistral", "qwen2", "qwen3", "gpt_oss", "smollm3")


def drawn_vllm(seed=0, count=2):
    return drawn(seed, count, head_dims=(32, 64), families=VLLM_FAMILIES, prefix="vllm")


REAL_SPANS = (128, 512, 1024, 4096)
WEIGHTS = ("zoo", "hf-init", "norms-away")


def draw_wide(family, seed, index):
    """draw() at real sizes: the same config, then from a second stream a window or chunk of 128, 512,
    1024 or 4096, head_dim 16 to 256 (cohere2 derives its own) and the weight distribution
    (make_models.py: the zoo's scaled uniform, transformers' own initialisation, norms away from
    identity), kept in the private key "_weights" (never written to config.json)."""
    name, c = draw(family, seed, index)
    e = _Draw(family + "/wide", seed, index)
    span = e.pick(list(REAL_SPANS))
    if c.get("sliding_window") is not None:
        c["sliding_window"] = span
    if "attention_chunk_size" in c:
        c["attention_chunk_size"] = span
    if family not in ("cohere2", "qwen2_moe"):  # these derive head_dim from the heads (qwen2_moe in 4.x)
        c["head_dim"] = e.pick([16, 32, 64, 128, 256])
        if family == "gemma4_text":
            c["global_head_dim"] = 2 * c["head_dim"]
    c["max_position_embeddings"] = max(4096, 2 * span + 64)
    c["_weights"] = e.pick(list(WEIGHTS))
    return name, c


def wide(seed=0, count=1):
    """The wide set: `count` models per family at real window sizes (python3 engines/models/sensitivity.py
    checks that each one's window moves its logits before it judges a window)."""
    return {f"wide-{f.replace('_text', '').replace('_', '')}-{seed}-{i}": draw_wide(f, seed, i)
            for f in DRAWN_FAMILIES for i in range(count)}
