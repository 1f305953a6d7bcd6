// A tiny Hugging Face checkpoint (config.json + model.safetensors) and the model-level oracle: the
// float64 forward of the whole model with each layer's window rule applied explicitly, no cache.
// It is the model-level sibling of oracle.h and shares nothing with transformers' cache or mask
// code: every position attends every earlier position its layer's rule allows, computed from the
// K/V of all positions so far (kept, never evicted). No LibTorch here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/engine/kv_blocks.h"

namespace kvc::engine {

// The families the oracle models. Each is one entry of the registry in model.cpp: its model_type
// and a reader that turns the family's config.json into the description below (which the one
// forward applies); a family adds no code to the forward.
enum class Family {
  Gemma2,
  Gemma3,
  Mistral,
  Llama4Text,
  Qwen2,
  Qwen3,
  GptOss,
  SmolLM3,
  Cohere2,
  Ministral,
  Phi3,
  Gemma4Text,
  Olmo3,
  Exaone4,
  VaultGemma,
  Cwm,
  GraniteSwa,
  Qwen2Moe,
  Dots1,
  GraniteMoeSwa,
  ExaoneMoe,
  Lfm3,
  Mellum,
  Flint,
  Cohere2Moe,
  Afmoe,
  CohereCompassText,  // the text decoder of cohere_compass (CohereCompassForCausalLM alone)
  MuseGlimmerText,    // the text decoder of muse_glimmer
  MuseSparkText,      // the text decoder of muse_spark
  Kolibri1,
  Laguna,
  Beam,
  MimoV2Flash,
  Qwen2Vl,
  Qwen25Vl,  // multimodal: the text decoder of the model's text_config
  ModernBertDecoder,
  ModernBert,           // an encoder (bidirectional): SequenceOracle::encode
  Ultrabert,            // an encoder
  EmbeddingGemma2Text,  // an encoder whose output is the projected final hidden states (ModelConfig::outputs)
  OpenAIPrivacyFilter,  // an encoder whose output is num_labels scores per position (a token classifier)
  Gemma3nText,          // gemma3n's text decoder (Gemma3nForCausalLM)
  RecurrentGemma,       // RG-LRU recurrent blocks beside sliding attention
  Step3p7,              // multimodal: the text decoder (step3p5) of its text_config
  Ergo,
  Dory,      // nGPT on the unit sphere with a looped section of layers
  T5Gemma,   // an encoder-decoder: the decoder's description, its encoder in ModelConfig::encoder
  LaraMini,  // gated DeltaNet layers beside sliding and NoPE full attention, a MoE
  T5Gemma2,  // an encoder-decoder whose decoder attends its own keys and the source's in one softmax
  NeoMME,    // an encoder (NeoMMEForMaskedLM, text only)
};
// config.model_type: "gemma2", "gemma3_text", "mistral", "llama4_text", "qwen2", "qwen3", "gpt_oss", "smollm3",
// "cohere2", "ministral", "phi3", "gemma4_text", "olmo3", "exaone4", "vaultgemma", "cwm", "granite_swa",
// "qwen2_moe", "dots1", "granitemoe_swa", "exaone_moe", "lfm3", "mellum", "flint", "cohere2_moe", "afmoe", "qwen2_vl",
// "qwen2_5_vl", "modernbert-decoder", "modernbert", "ultrabert", "cohere_compass_text",
// "muse_glimmer_text", "kolibri1", "laguna", "embedding_gemma2_text", "openai_privacy_filter", "gemma3n_text",
// "recurrent_gemma", "muse_spark_text", "step3p7", "ergo", "beam", "mimo_v2_flash", "dory", "t5gemma", "lara_mini",
// "neomme"
const char* to_string(Family f);

// A layer's attention rule, as the visible-key predicate of a query at position pos over keys j:
// Full: j <= pos; Sliding (window W): pos - W < j <= pos; Chunked (chunk C): j <= pos && j / C == pos / C.
enum class Attention { Full, Sliding, Chunked };
const char* to_string(Attention a);  // "full", "sliding", "chunked"

// Where a decoder layer's norms sit. Pre: x += attn(norm x); x += mlp(norm' x) (llama). Sandwich (gemma
// 2-4): x += norm(attn(norm x)); x += norm(mlp(norm x)). Post (olmo2, olmo3, exaone4): x += norm(attn x);
// x += norm(mlp x), no input norms.
enum class NormPlacement { Pre, Sandwich, Post };

// What stands between the final norm and lm_head: nothing; ModernBERT's head.norm(act(head.dense h)) (act the MLP's,
// head.norm a LayerNorm like the model's); UltraBERT's gelu_tanh(head.linear2 gelu_tanh(head.linear1 h)) (linear1
// [ModelConfig::head_size, H], no biases).
enum class PredictionHead { None, ModernBert, Ultrabert };

// A tiny mixture of experts. Llama4 and GptOss are those families' own routings; TopK is every other
// family's, its variants configuration (the fields below), not a code path per family.
//   Llama4: the router's top-k logits, through a sigmoid, scale the input of their expert; an expert
//     is a SwiGLU (gate and up the halves of gate_up_proj); a shared SwiGLU expert is added.
//   GptOss: the router (with a bias) softmaxes its top-k logits, which weight their expert's output;
//     an expert has biases and the clamped SwiGLU: gate, up = the even and odd columns of gate_up,
//     gate <= limit, -limit <= up <= limit, out = (up + 1) * gate * sigmoid(alpha * gate).
//   TopK: scores = score(router logits) over every expert (Softmax, Sigmoid) or the logits themselves
//     (TopKSoftmax); the experts chosen are the top_k of scores (the logits where select_logits) +
//     selection bias (e_score_correction_bias, where selection_bias), within the topk_groups best of
//     `groups` equal groups (a group's score: the sum of its two best); their weights are the chosen
//     scores (TopKSoftmax: the softmax of the chosen logits), divided by their sum where renormalize,
//     times routed_scale; each weights its SwiGLU expert's output. A shared SwiGLU expert
//     (shared_intermediate > 0) is added, times sigmoid(shared_gate . x) where shared_gate; the sum
//     times combined_scale.
enum class MoeRouting { Llama4, GptOss, TopK };
enum class MoeScore { Softmax, Sigmoid, TopKSoftmax };
struct MoeConfig {
  int64_t experts = 0;  // 0: no MoE anywhere
  int64_t top_k = 1;
  int64_t intermediate = 0;         // each expert's intermediate size
  int64_t shared_intermediate = 0;  // the shared expert's (llama4: intermediate); 0: none
  std::vector<bool> layers;         // per layer: the feed-forward is the MoE (else the dense MLP)
  MoeRouting routing = MoeRouting::Llama4;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;  // GptOss
  // TopK (above):
  MoeScore score = MoeScore::Softmax;
  bool selection_bias = false, renormalize = false, shared_gate = false;
  bool select_logits = false;  // the experts are chosen by the router's logits (+ selection bias), not the scores (kolibri1)
  int64_t groups = 1, topk_groups = 1;
  double routed_scale = 1;
  double combined_scale = 1;  // the routed plus the shared expert's output times this (cohere2_moe's "average": 0.5)
  double router_softcap = 0;  // the router's logits soft-capped, tanh(logit / c) * c, before anything reads them (laguna)
  // The checkpoint's names under the layer's feed-forward prefix (mlp_prefix): the router's weight
  // (and selection bias beside it), the shared expert's module. TopK experts are modules
  // experts.<e>.{gate,up,down}_proj (the Hub's layout, which every release loads) or, where
  // stacked_experts, experts.gate_up_proj [E, 2I, H] and experts.down_proj [E, H, I] (nn.Linear's layout
  // per expert, granitemoe_swa's own); load_model turns either into experts.gate_up_proj [E, H, 2I] and
  // experts.down_proj [E, I, H] as llama4 stores them. fused_shared names a layer-level shared expert
  // stored as input_linear [2S, H] (gate the first half) and output_linear (granitemoe_swa shared_mlp.),
  // which load_model splits into the shared module's gate_proj, up_proj and down_proj.
  std::string router = "router.", shared = "shared_expert.", fused_shared;
  bool stacked_experts = false;
  // GptOss: gate and up are the halves of gate_up_proj's 2I columns (openai_privacy_filter's "concatenated layout"), not
  // its even and odd columns. (Its router's weights divided by top_k and the MLP's output times num_experts_per_tok
  // cancel: no rule.)
  bool gate_up_halves = false;
  // muse_spark's routed experts (TopK):
  double router_scale = 1;     // the router's logits times this before anything reads them (output_multiplier)
  double renormalize_eps = 0;  // renormalize: the chosen weights divided by their sum plus this (norm_topk_prob_eps 1e-15)
  // > 0: the routed experts run at this width (moe_hidden_size): their input is pre_expert_norm(pre_expert_proj h)
  // (pre_expert_proj [pooled, H]; the norm an RMS norm with weight 1 + w, eps), their weighted sum goes back through
  // post_expert_proj [H, pooled]; 0: the experts read h and write the hidden size.
  int64_t pooled = 0;
  bool expert_out_norm = false;  // each expert's output is RMS-normed after its weight scales it as x * (1 + w)
                                 // (experts.post_expert_norm, one for every expert; post_eps), before its routing weight
  // Per layer, the routed experts' SwiGLU bound c after the activation: silu(gate) <= c, -c <= up <= c (step3p7's
  // swiglu_limits); 0: none. Empty: none anywhere.
  std::vector<double> expert_limits;
  // ergo: each routed expert's output RMS-normed by its own row of experts.post_expert_norm.weight [E, H] before its
  // routing weight (expert_norms), the shared expert's by shared_experts.norm.weight (shared_norm).
  bool expert_norms = false, shared_norm = false;
};

// What the forward needs from config.json, read per family the way transformers reads it: the
// family's description. Per-layer vectors left empty mean their default (no chunked layer, rope on
// every layer), so a description built by hand needs only the fields its family uses.
struct ModelConfig {
  std::string name;  // the checkpoint's folder name
  Family family = Family::Mistral;
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  double eps = 1e-6;
  double rope_theta = 10000;         // full layers (and every layer without a local base)
  double rope_local_theta = 0;       // sliding layers' base where the family has one (gemma3); 0: none
  int64_t rotary_dim = 0;            // rope on the first rotary_dim entries of a head (partial_rotary_factor); 0: all
  std::vector<int64_t> rotary_dims;  // per layer, in place of rotary_dim (laguna's factor per layer type); empty: none
  bool fused_projections = false;    // the checkpoint stores qkv_proj and gate_up_proj (phi3); load_model splits them
  bool rope_interleaved = false;     // rope rotates pairs (2i, 2i+1) (llama4's complex form, cohere2); else halves (i, i + d/2)
  // YaRN (rope_type "yarn"): inv_freq blends base ** (-2i/d) and that / factor over a linear ramp
  // between the correction dims of beta_fast and beta_slow; cos and sin are scaled by the attention factor.
  struct Yarn {
    double factor = 0;  // 0: default rope
    double beta_fast = 32, beta_slow = 1, original_max_position = 4096, attention_factor = 1;
    bool truncate = true;
  } yarn;
  double query_scale = 0;    // the scores' factor: query_pre_attn_scalar ** -0.5 or head_dim ** -0.5
  double attn_softcap = 0;   // tanh soft-capping of the scores; 0: none
  double final_softcap = 0;  // of the logits; 0: none
  double embed_scale = 1;    // gemma: sqrt(hidden)
  bool tied = false;         // lm_head is the embedding
  bool gemma_norm = false;   // RMSNorm weight w applied as (1 + w)
  NormPlacement norm_placement = NormPlacement::Pre;
  std::string pre_ff_norm = "post_attention_layernorm.";  // Pre: the MLP's input norm (vaultgemma: pre_feedforward_layernorm.)
  bool layer_norm = false;           // every norm is a LayerNorm without bias (mean subtracted; cohere2), not an RMSNorm
  bool parallel_block = false;       // x + attn(norm x) + mlp(norm x), one norm per layer (cohere2)
  double residual_scale = 1;         // each block's output times this before its residual add (granite residual_multiplier)
  double logit_scale = 1;            // the logits' factor (cohere2 logit_scale)
  bool qk_norm = false;              // per-head RMSNorm (weighted, the model's norm style) of q and k before rope (gemma3, qwen3)
  bool qk_norm_whole = false;        // the q/k norm spans every head's projection at once (olmo2, olmo3), not one head
  bool qk_norm_weightless = false;   // the q/k norms have no weight (muse_glimmer)
  bool embed_rms_norm = false;       // a weightless RMS norm of each embedding row (muse_glimmer)
  double post_eps = 0;               // Sandwich: the post-attention and post-MLP norms' epsilon; 0: eps (muse_glimmer)
  bool final_norm_plain = false;     // the final norm's weight w is applied as w though gemma_norm (muse_glimmer)
  std::vector<int64_t> zero_tokens;  // ids embedded as id 0 (muse_glimmer's image and video placeholder ids)
  bool v_norm = false;               // a weightless RMS norm of each value head (gemma4)
  bool layer_scalar = false;         // each layer's output times its model.layers.<l>.layer_scalar (gemma4)
  bool qk_l2_norm = false;  // per-head weightless RMS ("L2") norm of q and k after rope, on rope layers (llama4 use_qk_norm)
  bool qkv_bias = false;    // q/k/v projections have a bias (qwen2; qwen3, gpt_oss, smollm3, cohere2 attention_bias)
  bool o_bias = false;      // o projection has a bias (qwen3, gpt_oss, smollm3, cohere2 attention_bias)
  bool sinks = false;       // a learned per-head logit joins each softmax's denominator (gpt_oss self_attn.sinks)
  bool gelu = false;        // gelu (tanh approximation) MLP; otherwise SiLU
  bool gelu_exact = false;  // with gelu: the exact (erf) form, transformers' "gelu" (modernbert)
  // ModernBERT's layout (modernbert-decoder): the LayerNorms (layer_norm) have a bias beside each weight where
  // norm_bias; embed_norm: a LayerNorm of the embeddings (model.embed_norm.) whose output is layer 0's attention
  // input (that layer has no input norm); mlp_bias: the MLP's three projections have biases; prediction_head: the
  // head before lm_head (head.dense.bias where head_dense_bias), lm_head.bias where lm_head_bias.
  bool norm_bias = false, embed_norm = false, mlp_bias = false;
  PredictionHead prediction_head = PredictionHead::None;
  int64_t head_size = 0;  // PredictionHead::Ultrabert's inner width (prediction_head_size)
  bool head_dense_bias = false, lm_head_bias = false;
  bool fused_mlp = false;  // the checkpoint stores the MLP as gate_up_proj only (rows [gate; up]); load_model splits it
  // An encoder: every position attends every real key of the whole sequence, a sliding layer (windows[l] > 0, which is
  // reach_before[l] + 1) only the keys from reach_before[l] positions before it to reach_after[l] after it: the rule of
  // bidirectional_masks.h, as each family's configuration gives it (encoder_mask_rule). SequenceOracle::encode runs it.
  bool bidirectional = false;
  std::vector<int64_t> reach_before, reach_after;
  // A multimodal checkpoint's text decoder tensors are under this prefix ("model.language_model."), its
  // head at lm_head; the loader reads them as the decoder's own (model.*) and ignores the towers.
  std::string text_prefix;
  std::string head_prefix;          // ... and its head at head_prefix + "lm_head." (qwen2_audio's "language_model.")
  std::string mlp_prefix = "mlp.";  // the feed-forward's tensor prefix in a layer ("feed_forward." in llama4)
  int64_t sliding_window = 0;       // config.sliding_window
  std::vector<int64_t> windows;     // per layer: W on a sliding layer, 0 on any other
  int64_t chunk_size = 0;           // config.attention_chunk_size where the family has chunked layers
  std::vector<int64_t> chunks;      // per layer: C on a chunked layer, 0 on any other; empty: none
  std::vector<bool> rope_layers;    // per layer: rope applied; false is a NoPE layer; empty: rope everywhere
  // Per layer, each empty for the model-wide value (gemma4's full layers differ from its sliding ones):
  std::vector<double> rope_thetas;   // the rope base; empty: rope_local_theta on sliding layers where set, else rope_theta
  std::vector<int64_t> rope_angles;  // proportional rope: the first n of a head's head_dim / 2 frequencies rotate (the
                                     // exponent's denominator stays head_dim), the others are 0; 0: all
  std::vector<int64_t> head_dims;    // a layer's head size (gemma4 global_head_dim on full layers)
  std::vector<int64_t> layer_kv_heads;
  std::vector<bool> k_eq_v;        // the layer has no v_proj: its values are the raw key projection (gemma4 attention_k_eq_v)
  std::vector<int64_t> kv_source;  // the layer whose keys and values it attends: itself, or an earlier layer of its
                                   // type whose cache it shares (gemma4 num_kv_shared_layers)
  // Attention temperature tuning (llama4) on the NoPE layers: q *= 1 + attn_scale * log(floor((pos + 1) / floor_scale) + 1).
  double temperature_floor_scale = 0;  // 0: none
  double temperature_attn_scale = 0;
  MoeConfig moe;
  // Hybrid layers (lfm3): per layer, a short-convolution block (LFM2's ShortConv) in place of the
  // attention; empty: none. in_proj [3H, H] gives B, C and x (its row thirds); y = out_proj(C * conv(B * x)),
  // conv a causal depthwise convolution of conv_kernel taps over positions p - conv_kernel + 1 .. p
  // (zeros before position 0), weight conv.weight [H, 1, conv_kernel]; conv_bias: all three have a bias.
  // Its state is the last conv_kernel - 1 rows of B * x, kept in T (float64 in the oracle).
  std::vector<bool> conv_layers;
  int64_t conv_kernel = 0;
  bool conv_bias = false;
  bool attn_gate = false;              // each head's output times sigmoid(self_attn.g_proj h) [heads, H] before o_proj (lfm3)
  bool attn_gate_elementwise = false;  // the gate is one per output element: g_proj [heads * head_dim, H] (afmoe)
  bool attn_gate_softplus = false;     // the gate is softplus(g_proj h), not its sigmoid (laguna)
  // Checkpoint names the loader reads under the names the forward uses: (from, to) pairs, each a prefix
  // of a layer's relative name (model.layers.<l>.<from>...) or, beginning "model.", of a whole name; a name
  // outside model.* (a head's) by the first pair whose `from` begins it.
  std::vector<std::pair<std::string, std::string>> tensor_names;
  // An encoder's output other than the vocabulary's logits: each position's lm_head(final norm h) is this many values,
  // with no logit scale or soft-cap (embedding_gemma2's embedding_projection to embedding_dim); 0: vocab.
  int64_t outputs = 0;
  // gemma3n's decoder (Gemma3nTextModel), the rules below, each 0 or empty where a family has none. Its
  // scales are the values of transformers' float32 buffers (torch.tensor(...) upcast by .to(float64)).
  // Per-layer input embeddings (hidden_size_per_layer_input P; gemma3n, embedding_gemma2): each token's input
  // to layer l is
  //   pli[l] = (RMSNorm(per_layer_model_projection(e)[l] * per_layer_projection_scale) +
  //             embed_tokens_per_layer[id][l] * per_layer_embed_scale) * per_layer_input_scale,
  // e the scaled embedding, an id at or past per_layer_vocab reading row 0 (per_layer_vocab 0: no per-layer
  // table, embedding_gemma2's projection-only inputs). After the layer's MLP residual (before layer_scalar)
  // RMSNorm(per_layer_projection(act(per_layer_input_gate(s)) * pli[l])) is added to the hidden state; under
  // AltUp, after its correction, to the streams 1.. (s: the active stream, times altup.correct_output_scale
  // where altup_correct_scale). The norms are the model's. per_layer_tensors: where the tensors sit, the
  // model's prefix and a layer's ("model." and "" in gemma3n, "model.ple." and "ple_block." in embedding_gemma2).
  int64_t per_layer_input = 0;
  int64_t per_layer_vocab = 0;
  double per_layer_embed_scale = 1, per_layer_projection_scale = 1, per_layer_input_scale = 1;
  std::pair<std::string, std::string> per_layer_tensors{"model.", ""};
  // AltUp (altup_num_inputs A > 0): A streams, stream 0 the embedding and stream i its altup_projections[i-1]
  // rescaled to its RMS. Each layer runs on the active stream of the prediction
  //   pred_q = s_q + sum_p c[q * A + p] s_p,  c = prediction_coefs(tanh(modality_router(RMSNorm_w(s_active) *
  //   altup_router_scale))),
  // and its output y corrects every stream: s_i = (y - pred_active) * (correction_coefs(tanh(router(y)))_i + 1) +
  // pred_i. The final norm reads the mean of stream 0 and the altup_unembed_projections of the others (each
  // rescaled to stream 0's RMS).
  int64_t altup_inputs = 0, altup_active = 0;
  bool altup_correct_scale = false;
  double altup_router_scale = 1;
  // LAuReL (laurel_rank R > 0): the attention's residual sum becomes (x + attn + laurel) / sqrt(2), laurel =
  // h + RMSNorm_w(linear_right(linear_left(h))), h the attention's (normed) input.
  int64_t laurel_rank = 0;
  // Activation sparsity, per layer (empty: none): on a layer with a target p > 0 the MLP's gate projection g
  // becomes relu(g - (mean(g) + std(g) * z)), std the population one and z the float32 standard normal quantile of
  // p as torch computes it (sparsity_quantile).
  std::vector<double> activation_sparsity;
  // RG-LRU recurrent blocks (recurrent_gemma's RecurrentGemmaRecurrentBlock): per layer, in place of the attention;
  // empty: none. From the normed row h: y = act(linear_y h), x = linear_x h (each [lru_width, H] with a bias); c = the
  // causal depthwise convolution of x over conv_kernel taps as conv_layers' (temporal_block.conv_1d, with its bias);
  // then the RG-LRU of c, per block of lru_width / lru_blocks channels (rg_lru.*_gate_weight [blocks, w, w], read
  // c @ W, with their biases): i = sigmoid(c Wi + bi), r = sigmoid(c Wa + ba), log a = -lru_decay_scale * r *
  // softplus(rg_lru.recurrent_param), state = a * state + sqrt(1 - a^2) * i * c, and at position 0 (the reset) state
  // = i * c; the block's output is linear_out(state * y). The state is kept per position in T (float64 in the
  // oracle, where transformers accumulates in float32: exact64 keeps it float64), so truncate drops rows of it.
  std::vector<bool> recurrent_layers;
  int64_t lru_width = 0, lru_blocks = 0;
  double lru_decay_scale = 8;  // RecurrentGemmaRglru's -8.0 (Griffin's c); 0 is the decay-off mutant
  // muse_spark's layer (its Sandwich norms around gemma2's layout): a weightless RMS norm (eps) of each head's
  // attention output before the gate (o_norm); a post-attention norm without weight; a post-MLP norm that scales its
  // input by (1 + w) before it normalises (input-scaled); and learned residual gates: where residual_gate_temperature
  // > 0, each of the layer's two residual adds is alpha * x + beta * block per hidden dimension, beta = sigmoid(g / T),
  // alpha = sqrt(max(sigmoid(-g / T) * (1 + beta), 1e-3)), g the layer's post_attention_residual_gate.gate or
  // post_feedforward_residual_gate.gate [H]; 0: x + block.
  bool attn_out_norm = false;
  bool post_attn_norm_weightless = false;
  bool post_ff_norm_input_scaled = false;
  double residual_gate_temperature = 0;
  // Per layer, the number of query heads where layers differ (step3p7's num_sliding_attention_heads on its sliding
  // layers); empty: heads on every layer.
  std::vector<int64_t> layer_heads;
  // Per layer, the dense MLP's (or a MoE layer's shared expert's) SwiGLU bound c after the activation: silu(gate) <= c,
  // -c <= up <= c (step3p7's swiglu_limits_shared, which its dense layers read too); 0: none. Empty: none anywhere.
  std::vector<double> mlp_limits;
  // ergo: the dense MLP, the shared expert and the routed experts are down(act(up h)), no gate projection
  // (mlp_ungated; routed experts stored experts.up_proj [E, H, I] and experts.down_proj [E, I, H], x @ W); the
  // activation relu(x)^2 (relu2).
  bool mlp_ungated = false, relu2 = false;
  // ergo: after each sandwich post norm, the residual add is gated per hidden dimension: x = sigmoid(w) * branch +
  // sqrt(1 + sigmoid(w)) * exp(-softplus(w) / 2) * x, w the layer's attention_residual_gate.weight or
  // feedforward_residual_gate.weight.
  bool residual_gates = false;
  // beam's layer rules. The gate's input plus a bias per head (self_attn.gate_bias [heads], broadcast over the head's
  // elements) before its activation. A depth-scaled residual: each block's output times 1/sqrt(k) plus the residual
  // times sqrt((k - 1)/k), k = 2(l + 1) after layer l's attention and 2(l + 1) + 1 after its MLP, in place of x += out.
  // On the NoPE layers (rope_layers false) the queries times (1 + (pos + 1) / nope_query_length) ** nope_query_power
  // (beam: 2048, 0.1; 0: none).
  bool attn_gate_bias = false;
  bool depth_scaled_residual = false;
  double nope_query_length = 0, nope_query_power = 0;
  // mimo_v2_flash's: value heads of v_head_dim entries beside the query/key head size (0: the same), sinks on the
  // layers sink_layers marks only (empty: every layer where sinks), values times value_scale (attention_value_scale).
  int64_t v_head_dim = 0;
  std::vector<bool> sink_layers;
  double value_scale = 1;
  // nGPT on the unit sphere (dory), each 0 / false / empty where a family has none:
  // The norm kind: every norm (the layers', the q/k norms, the sub-norms, the final one) weightless and L2, x *
  // rsqrt(sum x^2 + eps): the sum where RMS takes the mean.
  bool l2_norm = false;
  // Sub-norms (the model's norm, weightless): of every head's attention output at once, after the gate and before
  // o_proj (attn_sub_norm); of act(gate) * up before down_proj (mlp_sub_norm).
  bool attn_sub_norm = false, mlp_sub_norm = false;
  // The residual kind: where > 0, each of a Sandwich layer's residual adds is an interpolation per channel, x = h + |lambda
  // * this| * (block - h), h the block's normed input, lambda the layer's lambda_1 (attention) or lambda_2 (MLP) [H]
  // (dory: ngpt_alpha_init / initializer_range); 0: x + block.
  double residual_interpolation = 0;
  // Learned scales per channel, each tensor times a constant then squared or not as the rule says; 0: none.
  // query_channel_scale: after rope, each query times (self_attn.sqk * this)^2 per (head, channel) (sqrt(head_dim) /
  // initializer_range); attn_gate_scale: the element-wise gate's logit times (self_attn.s_gate * this)^2
  // (hidden^0.25 / initializer_range); mlp_channel_scale: gate and up projections times mlp.suv_gate * this and
  // mlp.suv_up * this (sqrt(hidden)); logit_channel_scale: each logit times lm_head.logit_scale[r] * this (1 /
  // initializer_range).
  double query_channel_scale = 0, attn_gate_scale = 0, mlp_channel_scale = 0, logit_channel_scale = 0;
  // A looped section, unrolled: per layer of the forward, the checkpoint layer whose tensors it runs (load_model copies
  // them to the forward's layer; a pass of the loop is a layer per looped layer, weights shared, K/V its own); empty:
  // each its own. loop_entries: per layer, a pass of the loop begins there: x = norm(x) + e, e the final norm of x at
  // the first entry (the looped section's input); empty: none.
  std::vector<int64_t> layer_weights;
  std::vector<bool> loop_entries;
  // An encoder-decoder (t5gemma): this description is the decoder's, `encoder` the encoder stack's (bidirectional, its
  // output the final-normed hidden states: hidden_output), read from the same checkpoint (Model::encoder). Each decoder
  // layer cross-attends the encoder's output after its self-attention's residual add: x += post_cross_attn_layernorm(
  // cross_attn(pre_cross_attn_layernorm x)), queries from the decoder (heads, head_dim, kv_heads as its self-attention,
  // q/k/v/o biases where qkv_bias, o_bias), keys and values projected from the encoder's rows (cross_width wide), no
  // rope and no window: every real source position (the source's attention_mask), the same query_scale and
  // attn_softcap. cross_width 0: no cross-attention.
  std::shared_ptr<const ModelConfig> encoder;
  int64_t cross_width = 0;
  bool hidden_output = false;  // the stack's output rows are its final-normed hidden states (no head): an encoder's
  // Gated DeltaNet layers (lara_mini's linear_attention; qwen3_next's and qwen3_5's GatedDeltaNet): per layer, in place
  // of the attention; empty: none. From the normed row h: qkv = linear_attn.in_proj_qkv h [2 Kd + Vd] (Kd =
  // delta_k_heads * delta_k_dim, Vd = delta_v_heads * delta_v_dim), z = in_proj_z h [Vd], b = in_proj_b h and a =
  // in_proj_a h [delta_v_heads]; c = silu(the causal depthwise convolution of qkv over conv_kernel taps, conv1d.weight
  // [2 Kd + Vd, 1, taps], no bias, zeros before position 0); q, k, v its thirds, each key head's q and k L2-normed (x *
  // rsqrt(sum x^2 + 1e-6)) and q times delta_k_dim ** -0.5. Value head j reads key head j / (delta_v_heads /
  // delta_k_heads); with beta = sigmoid(b_j) and g = -delta_decay_scale * exp(A_log_j) * softplus(a_j + dt_bias_j) its
  // state S [delta_k_dim, delta_v_dim] (zeros before position 0) becomes S = exp(g) S, then S += k (beta (v - S^T k))^T
  // (the delta rule), and the head's output is S^T q, RMS-normed (linear_attn.norm.weight [delta_v_dim], eps) and, where
  // delta_norm_gated, times silu(z) of the head; linear_attn.out_proj [H, Vd] stands where o_proj does. The conv input
  // rows and S after each position are kept in T (float64 in the oracle, where transformers runs the rule in float32:
  // exact64 keeps it float64), so truncate drops rows of them. delta_decay_scale 0 and delta_norm_gated false are the
  // decay-off and gate-dropped mutants.
  std::vector<bool> delta_layers;
  int64_t delta_k_heads = 0, delta_v_heads = 0, delta_k_dim = 0, delta_v_dim = 0;
  double delta_decay_scale = 1;
  bool delta_norm_gated = true;
  // Merged cross-attention (t5gemma2's T5Gemma2MergedAttention; with cross_width > 0): the decoder layer has no
  // cross_attn of its own; its self-attention's k_proj and v_proj (their biases, k_norm, no rope) project each encoder
  // row into a key and a value, and each query attends its own visible keys (causal, windowed on sliding layers) and
  // every real source position's key in ONE softmax, self keys first, then the source's (no window on the source).
  bool merged_cross_attention = false;
  // The checkpoint's name of the embedding an encoder-decoder's decoder shares with its encoder (a tied t5gemma2 keeps
  // one table, the encoder's; load_model reads it as the decoder's too); empty: the decoder's own.
  std::string shared_embedding;
  // neomme's rules, each 0 / false / empty where a family has none.
  // Factorized embeddings (embedding_rank R > 0): model.embed_tokens.weight is [vocab, R] and a token's embedding is
  // model.embed_tokens.embedding_projection.weight [H, R] times its row; the head reads the final-normed h as r =
  // U^T h (U unembedding_projection.weight [H, R]; tied: the embedding's projection), then lm_head [out, R] (tied: the
  // table) of r.
  int64_t embedding_rank = 0;
  // The layers' input and post-attention norms and the final norm have no weight (neomme's with_scale=False):
  // load_model gives each a weight of ones (x * 1 is exact), refusing a checkpoint that has one.
  bool norms_weightless = false;
  // Initial-state mixing: a layer's attention reads its input norm of lambdas[0] * x + lambdas[1] * x0
  // (model.layers.<l>.lambdas [2]), x0 the first layer's input (the normed embedding); the residual adds to x.
  bool initial_mix = false;
  // Value embeddings: per layer, its values plus the token's row of model.value_embeddings.weight [vocab, kv_heads *
  // head_dim] (neomme: the first and the last full layer); empty: none.
  std::vector<bool> value_embed_layers;
  // Exclusive self-attention: each head's output a becomes a - tanh(alpha) (a . u) u, u the query position's own
  // value of the head's K/V head over its L2 norm (at least 1e-12: F.normalize), alpha the head's entry of
  // self_attn.exclusive_self_attention.alpha [heads]; before the attention gate.
  bool exclusive_attention = false;

  Attention attention(int64_t layer) const;  // the layer's rule, from windows and chunks
  // The span the plans aim their edges at: the sliding window, or the chunk of a model whose local
  // layers are all chunked (llama4); 0 for a model with full attention only.
  int64_t local_span() const { return sliding_window > 0 ? sliding_window : chunk_size; }
  bool rope(int64_t layer) const { return rope_layers.empty() || rope_layers[static_cast<size_t>(layer)]; }
  int64_t dim(int64_t layer) const { return head_dims.empty() ? head_dim : head_dims[static_cast<size_t>(layer)]; }
  int64_t rotary(int64_t layer) const {  // how many entries of the layer's heads rope rotates
    return !rotary_dims.empty() ? rotary_dims[static_cast<size_t>(layer)] : rotary_dim > 0 ? rotary_dim : dim(layer);
  }
  int64_t q_heads(int64_t layer) const { return layer_heads.empty() ? heads : layer_heads[static_cast<size_t>(layer)]; }
  int64_t vdim(int64_t layer) const { return v_head_dim > 0 ? v_head_dim : dim(layer); }  // a value head's size
  bool sink(int64_t layer) const { return sinks && (sink_layers.empty() || sink_layers[static_cast<size_t>(layer)]); }
  int64_t kv(int64_t layer) const { return layer_kv_heads.empty() ? kv_heads : layer_kv_heads[static_cast<size_t>(layer)]; }
  int64_t source(int64_t layer) const { return kv_source.empty() ? layer : kv_source[static_cast<size_t>(layer)]; }
  bool shares_kv(int64_t layer) const { return source(layer) != layer; }
  bool conv(int64_t layer) const { return !conv_layers.empty() && conv_layers[static_cast<size_t>(layer)]; }
  int64_t out_width() const {
    return hidden_output ? hidden : outputs > 0 ? outputs : vocab;
  }  // the values of each position's output row
  bool recurrent(int64_t layer) const { return !recurrent_layers.empty() && recurrent_layers[static_cast<size_t>(layer)]; }
  bool delta(int64_t layer) const { return !delta_layers.empty() && delta_layers[static_cast<size_t>(layer)]; }
  int64_t delta_conv_width() const { return 2 * delta_k_heads * delta_k_dim + delta_v_heads * delta_v_dim; }  // qkv's
  int64_t expert_width() const { return moe.pooled > 0 ? moe.pooled : hidden; }         // the routed experts' in and out width
  int64_t embed_width() const { return embedding_rank > 0 ? embedding_rank : hidden; }  // the embedding table's rows
  bool value_embed(int64_t layer) const { return !value_embed_layers.empty() && value_embed_layers[static_cast<size_t>(layer)]; }
};

// The cut of gemma3n's activation sparsity for a target p: torch.distributions.Normal(0, 1).icdf of p as a float32
// tensor, computed as torch's CPU kernel does (float32 arithmetic, its erfinv: a rational guess and two Newton
// steps), widened to double as transformers' _gaussian_topk does.
double sparsity_quantile(double p);

// Throws std::invalid_argument naming `file` and the field.
ModelConfig parse_config(const nlohmann::json& config, const std::string& file);

struct Model {
  ModelConfig config;
  std::map<std::string, std::vector<double>> tensors;  // by safetensors name, row-major
  std::string digest;  // of the folder's name and files as read: the oracle's rows are kept under it (check.cpp)
  const std::vector<double>& at(const std::string& name) const;  // throws naming the missing tensor
  // An encoder-decoder's encoder (ModelConfig::encoder): its own description and tensors, named as a model's own
  // (model.layers.<l>..., model.norm.); null for every other model.
  std::shared_ptr<const Model> encoder;
};

// 32 hex digits naming the parts' bytes (length-prefixed, so that no two splits of one text collide):
// FNV-1a and libstdc++'s std::hash side by side. A key for what this process keeps, never written out.
std::string content_digest(std::initializer_list<std::string_view> parts);

// Reads DIR/config.json and DIR/model.safetensors (F32, F64, F16 or BF16 tensors). Throws
// std::runtime_error naming the file and what is wrong; every tensor the family needs must be there
// with its shape.
Model load_model(const std::string& dir);

// How an oracle run departs from the model's own rule: the diagnoses re-run it this way.
struct OracleOptions {
  std::vector<int64_t> windows;  // per layer; empty: the config's
  std::vector<int64_t> chunks;   // per layer, the chunked layers' equivalent of windows; empty: the config's
  bool kv_half = false;          // K and V rounded to float16 as they are stored (an f16 KV cache)
  bool q_half = false;           // queries rounded to float16 before the scores (a kernel that reads Q as f16)
  bool gelu_half = false;        // gelu(x) read from a float16 table: half(gelu(half(x))), as ggml's CPU GELU
  // A quantized K or V cache (llama.cpp's cache_type_k / cache_type_v q8_0, q4_0): each stored row
  // (a token's K or V over its K/V heads) rounded through the block format as ggml writes and reads
  // it (kv_blocks.h), in place of kv_half on that side; q_block: queries converted to K's dot type
  // per head (ggml converts Q to q8_0 for a q8_0 or q4_0 K), in place of q_half.
  KvBlock k_block = KvBlock::None, v_block = KvBlock::None, q_block = KvBlock::None;
  // The departures of the diagnoses (check.cpp) that no config describes. A hypothesis that the config
  // was read another way (sinks or a soft-cap left out, other rope layers or bases) is no option: it is
  // the oracle of the same weights under another ModelConfig (the constructor below).
  bool kv_bf16 = false;     // K and V rounded to bfloat16 as they are stored
  int64_t chunk_shift = 0;  // chunk boundaries at k*C + chunk_shift instead of k*C
  int64_t reach_delta = 0;  // an encoder's sliding layers reach this many keys further on each side
  bool causal = false;      // an encoder's queries see no later key (an encoder read as a decoder)
  // An encoder-decoder's cross-attention on the decoder's sliding layers sees only the last sliding_window source
  // positions, as a sliding cache of the encoder's output would keep them (the cross_window mutant).
  bool cross_window = false;
  // Merged cross-attention (ModelConfig::merged_cross_attention) with the source's keys in a softmax of their own, its
  // output added to the self-attention's (t5gemma's two attentions, sharing o_proj: the cross_softmax_apart mutant).
  bool cross_softmax_apart = false;
  // One eviction off by one: the query at this position alone sees window + window_delta keys on
  // the sliding layers (-1: no such position).
  int64_t window_delta_position = -1, window_delta = 0;
};

// How far a one-token window bug moves this model, against how far float32 rounding does: over
// 2 * span + 2 tokens (span + 2 past a span of 64), the largest |logit| change when every sliding
// window and chunk is one token larger, and the largest |float32 forward - float64 forward| (the
// same-dtype reference error an engine check's bound is made of). engines/models/sensitivity.py's
// measure, in process; nullopt for a model with no sliding or chunked layer. A model whose window is
// to be judged needs `moved` far above the bound its float32 error gives.
struct WindowSensitivity {
  double moved = 0, float32_error = 0;
};
std::optional<WindowSensitivity> window_sensitivity(const Model& model);
constexpr double kMinWindowSensitivity = 1e-2;  // a hundred times the engine checks' floor

// The first key the query at `pos` sees on `layer` (it sees keys first..pos): the layer's rule as
// `options` tell it, after `forgotten` (the keys a cache lost, on sliding and chunked layers).
int64_t first_visible_key(const ModelConfig& config, const OracleOptions& options, int64_t layer, int64_t pos,
                          int64_t forgotten = 0);
// The last key it sees in a sequence of `length` tokens: itself (causal), or an encoder's reach after it.
int64_t last_visible_key(const ModelConfig& config, const OracleOptions& options, int64_t layer, int64_t pos, int64_t length);

// One sequence's forward, position by position. Position p's logits depend only on tokens
// 0..p, computed with the same arithmetic however the tokens arrive, so extend() in pieces equals
// one forward over the whole prefix bit for bit, and truncate(n) is the forward of the shorter prefix.
template <class T>
class SequenceOracle {
 public:
  SequenceOracle(const Model& model, OracleOptions options = {}) : SequenceOracle(model, model.config, std::move(options)) {}
  // The weights of `model` read as `config` describes them (a config read another way: the diagnoses'
  // hypotheses, an engine mutant); the tensors it names must be in `model`.
  SequenceOracle(const Model& model, const ModelConfig& config, OracleOptions options = {});
  // The logits of the new positions, row-major [tokens.size(), vocab]. A causal model only (std::invalid_argument
  // for an encoder).
  std::vector<double> extend(const std::vector<int32_t>& tokens);
  // An encoder's whole-sequence forward (ModelConfig::bidirectional), once, from an empty oracle: the logits of every
  // position, each from all the tokens. real: the 2D attention_mask (true = a token, false = padding: no query sees
  // it; a padding position's own row is computed like any other, at its position); empty = no padding. Throws
  // std::invalid_argument where a query would see no real key (transformers' eager forward then averages every value).
  std::vector<double> encode(const std::vector<int32_t>& tokens, const std::vector<bool>& real = {});
  // An encoder-decoder's source (ModelConfig::encoder), once, before the first extend: its encoder's forward over
  // `tokens` (real: the source's attention_mask, as encode's), each decoder layer's cross keys and values projected from
  // its output. extend then decodes target tokens against it, causally.
  void set_source(const std::vector<int32_t>& tokens, const std::vector<bool>& real = {});
  // Drops the last n positions. A hybrid's convolution state is the rows of its input kept per
  // position (like the K/V), so dropping them is the forward of the shorter prefix re-run from the
  // prompt, bit for bit.
  void truncate(int64_t n);
  // llama.cpp's context shift: drops positions [keep, keep + discard) and moves the later ones down
  // by `discard`, on the cached K/V as computed (not a fresh forward of the kept tokens): each moved
  // key is rotated by -discard * inv_freq on the rope layers (llama.cpp's K-shift on already-rotated
  // keys), the NoPE layers' keys and every value unchanged. `rerotate` false keeps the moved keys at
  // their old rotation (the shift_not_rerotated mutant and its hypothesis).
  // A model with convolution layers refuses it (std::invalid_argument): a recurrent state has no
  // position to move.
  void shift(int64_t keep, int64_t discard, bool rerotate = true);
  // Models keys a cache lost: from now on, sliding and chunked layers see no key at a position < p.
  void forget_before(int64_t p) { forgotten_ = std::max(forgotten_, p); }
  int64_t length() const { return length_; }

 private:
  // One residual add, the rule of every family made per layer at load: x = keep (.) x + branch (.) block per hidden
  // dimension, or, where from_input (dory's interpolation), x = h + branch (.) (block - h), h the block's normed input.
  // Every add of the residual stream goes through it, after the attention (whatever the norm placement, the parallel
  // block's too) and after the MLP. keep and branch: 1 and residual_scale (the plain add; 1 after a sandwich, post-norm
  // or parallel attention), sqrt((d - 1) / d) and 1 / sqrt(d)
  // (beam's depth-scaled add, d = 2(l + 1) after the attention, 2(l + 1) + 1 after the MLP), ergo's residual gates
  // (sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2), sigmoid(w)), muse_spark's (alpha, beta), dory's rates |lambda * s|.
  struct Residual {
    bool from_input = false;
    std::vector<T> keep, branch;
  };
  struct Layer {
    std::vector<T> q, k, v, o, gate, up, down, in_norm, post_attn_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm;
    std::vector<T> in_norm_bias, post_attn_norm_bias, gate_bias, up_bias, down_bias;  // norm_bias, mlp_bias
    T scalar = 1;                                                                     // gemma4 layer_scalar
    std::vector<T> q_bias, k_bias, v_bias, o_bias;
    std::vector<T> router, experts_gate_up, experts_down;                          // [E, H], [E, H, 2I], [E, I, H] (x @ W layout)
    std::vector<T> selection_bias, shared_gate;                                    // TopK: [E], [H]
    std::vector<T> router_bias, experts_gate_up_bias, experts_down_bias, sinks;    // [E], [E, 2I], [E, H], [heads]
    std::vector<T> keys, values;                                                   // [position][kv_heads * head_dim]
    std::vector<T> gate_proj, in_proj, in_bias, conv, conv_b, out_proj, out_bias;  // attn_gate; a conv layer
    std::vector<T> conv_in;  // a conv layer's B * x, [position][hidden]: its state, kept whole
    // A recurrent layer (ModelConfig::recurrent_layers): linear_x, linear_y and their biases, the RG-LRU's
    // recurrent_param and its two gates' [blocks, w, w] weights and biases; lru_state its state after each position
    // ([position][lru_width], kept whole like conv_in, which holds its linear_x rows).
    std::vector<T> lru_x, lru_x_bias, lru_y, lru_y_bias, lru_param, lru_input_gate, lru_input_bias, lru_gate, lru_gate_bias;
    std::vector<T> lru_state;
    std::vector<T> attn_gate_bias;  // [heads] (ModelConfig::attn_gate_bias)
    // A gated DeltaNet layer (ModelConfig::delta_layers): in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, A_log,
    // dt_bias, the gated norm's weight (its out_proj is o); conv_in holds its qkv rows, delta_state S after each position
    // ([position][delta_v_heads][delta_k_dim][delta_v_dim]).
    std::vector<T> delta_qkv, delta_z, delta_b, delta_a, delta_a_log, delta_dt_bias, delta_norm, delta_state;
    std::vector<T> inv_freq;
    // gemma3n (ModelConfig's AltUp, LAuReL and per-layer input rules)
    std::vector<T> altup_scale, altup_correct, altup_predict, altup_router, altup_router_norm;
    std::vector<T> laurel_left, laurel_right, laurel_norm, per_layer_gate, per_layer_proj, per_layer_norm;
    T sparsity_cut = 0;  // sparsity_quantile of the layer's target; used where activation_sparsity[l] > 0
    // The residual adds after a sandwich attention and after the MLP; MoeConfig::pooled's projections and norms.
    Residual attn_residual, ff_residual;
    std::vector<T> pre_expert_proj, pre_expert_norm, post_expert_norm, post_expert_proj;
    std::vector<T> expert_norms, shared_norm;  // ergo: [E, H], [H]
    // dory's scales per channel (ModelConfig::query_channel_scale, attn_gate_scale, mlp_channel_scale).
    std::vector<T> q_scale, gate_scale, suv_gate, suv_up;
    // An encoder-decoder's cross-attention (ModelConfig::cross_width): its projections, biases and norms; the source's
    // keys and values [source position][kv_heads * head_dim].
    std::vector<T> cross_q, cross_k, cross_v, cross_o, cross_q_bias, cross_k_bias, cross_v_bias, cross_o_bias;
    std::vector<T> cross_pre_norm, cross_post_norm, cross_keys, cross_values;
    // neomme: the initial-state mix's lambdas [2] (ModelConfig::initial_mix); tanh(alpha) per head (exclusive_attention).
    std::vector<T> lambdas, exclusive_scale;
  };
  // The logits of n tokens at positions pos0, pos0 + 1, ... ([n, vocab]), their K/V appended.
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, double* logits);

  ModelConfig config_;
  OracleOptions options_;
  std::vector<T> embed_, final_norm_, lm_head_;
  std::vector<T> final_norm_bias_, embed_norm_, embed_norm_bias_, head_dense_, head_dense_bias_, head_norm_, head_norm_bias_,
      lm_head_bias_;  // ModernBERT's layout (ModelConfig::embed_norm, prediction_head)
  std::vector<Layer> layers_;
  // gemma3n: the per-layer embedding table, its projection and norm; AltUp's stream projections (A - 1 of [H, H]).
  std::vector<T> per_layer_embed_, per_layer_model_proj_, per_layer_proj_norm_;
  std::vector<std::vector<T>> altup_proj_, altup_unembed_;
  std::vector<T> logit_scales_;  // dory: lm_head.logit_scale[r] * ModelConfig::logit_channel_scale
  // neomme (ModelConfig::embedding_rank, value_embed_layers): the embedding's projection [H, R], the head's [H, R] (tied:
  // the embedding's), the value embeddings [vocab, kv_heads * head_dim].
  std::vector<T> embed_proj_, unembed_proj_, value_embed_;
  int64_t length_ = 0;
  int64_t forgotten_ = 0;
  std::vector<bool> real_;                // encode's attention_mask (empty: every key real)
  std::shared_ptr<const Model> encoder_;  // an encoder-decoder's encoder (Model::encoder)
  std::vector<bool> source_real_;         // set_source's attention_mask (empty: every source position real)
  int64_t source_length_ = -1;            // -1: no source set
};

extern template class SequenceOracle<double>;
extern template class SequenceOracle<float>;

}  // namespace kvc::engine
