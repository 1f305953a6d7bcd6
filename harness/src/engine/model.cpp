// The model-level oracle (engine/model.h): one plain-loop forward of every registered family, each
// family a description read from its config.json the way transformers' modeling files read it (the
// registry below), with each layer's attention rule (full, sliding, chunked) applied as an explicit
// predicate over absolute positions.
#include "kvconform/engine/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace kvc::engine {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& field, const std::string& why) {
  throw std::invalid_argument(file + ": " + field + ": " + why);
}

int64_t positive(const json& c, const std::string& key, const std::string& file) {
  if (!c.contains(key) || !c[key].is_number_integer() || c[key].get<int64_t>() <= 0)
    bad(file, "/" + key, "must be a positive integer");
  return c[key].get<int64_t>();
}

int64_t positive_or(const json& c, const std::string& key, int64_t fallback, const std::string& file) {
  return c.contains(key) && !c[key].is_null() ? positive(c, key, file) : fallback;
}

double number_or(const json& c, const std::string& key, double fallback, const std::string& file) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_number()) bad(file, "/" + key, "must be a number");
  return c[key].get<double>();
}

bool bool_or(const json& c, const std::string& key, bool fallback, const std::string& file) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_boolean()) bad(file, "/" + key, "must be true or false");
  return c[key].get<bool>();
}

// rope_theta as the release wrote it: top-level (4.x) or inside rope_parameters (5.x), which gemma3
// keys by layer type.
double rope_base(const json& c, const std::string& layer_type, const std::string& legacy_key, double fallback,
                 const std::string& file) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    const json& rp = c["rope_parameters"];
    if (rp.contains(layer_type) && rp[layer_type].is_object()) return number_or(rp[layer_type], "rope_theta", fallback, file);
    if (rp.contains("rope_theta")) return number_or(rp, "rope_theta", fallback, file);
  }
  return number_or(c, legacy_key, fallback, file);
}

// config.layer_types, when the config has it: one of `allowed` per layer.
bool layer_types(const json& c, int64_t layers, const std::vector<std::string>& allowed, std::vector<std::string>& out,
                 const std::string& file) {
  if (!c.contains("layer_types") || c["layer_types"].is_null()) return false;
  const json& t = c["layer_types"];
  if (!t.is_array() || static_cast<int64_t>(t.size()) != layers)
    bad(file, "/layer_types", "must list one type per layer (" + std::to_string(layers) + ")");
  std::string expected;
  for (const std::string& a : allowed) expected += (expected.empty() ? "" : " or ") + a;
  out.clear();
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string s = t[i].is_string() ? t[i].get<std::string>() : "";
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      bad(file, "/layer_types/" + std::to_string(i), "is \"" + s + "\" (expected " + expected + ")");
    out.push_back(s);
  }
  return true;
}

// Per layer: W on the sliding layers of `types`, 0 on the others.
std::vector<int64_t> windows_of(const std::vector<std::string>& types, int64_t window, const std::string& file) {
  std::vector<int64_t> w;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == "sliding_attention" && window <= 0)
      bad(file, "/layer_types/" + std::to_string(i), "is sliding_attention but the config has no sliding_window");
    w.push_back(types[i] == "sliding_attention" ? window : 0);
  }
  return w;
}

const std::vector<std::string> kSlidingOrFull = {"sliding_attention", "full_attention"};

// The gemma pattern when layer_types is absent: every pattern-th layer is full.
std::vector<int64_t> gemma_windows(const json& c, int64_t layers, int64_t window, int64_t default_pattern,
                                   const std::string& file) {
  std::vector<std::string> types;
  if (!layer_types(c, layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % default_pattern ? "sliding_attention" : "full_attention");
  return windows_of(types, window, file);
}

// ---- The registry: one reader per family, filling the description from the family's config. ----

void read_gemma(const json& c, const std::string& file, ModelConfig& m, bool g3) {
  m.gemma_norm = true;
  m.norm_placement = NormPlacement::Sandwich;
  m.gelu = true;
  m.qk_norm = g3;
  m.tied = c.value("tie_word_embeddings", true);
  m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
  m.query_scale = std::pow(number_or(c, "query_pre_attn_scalar", 256, file), -0.5);
  // Absent: the class default (gemma2: 50 and 30); null: None, no soft-capping.
  auto softcap = [&](const char* key, double absent) { return c.contains(key) ? number_or(c, key, 0, file) : absent; };
  // Gemma3's config stores attn_logit_softcapping but Gemma3Attention never hands it to the attention (every pinned
  // release; engines/transformers/repro/gemma3_attn_softcap_is_ignored.py): gemma3 reads as no soft-cap whatever it says.
  m.attn_softcap = g3 ? 0 : softcap("attn_logit_softcapping", 50);
  m.final_softcap = softcap("final_logit_softcapping", g3 ? 0 : 30);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", g3 ? 1e6 : 1e4, file);
  if (g3) m.rope_local_theta = rope_base(c, "sliding_attention", "rope_local_base_freq", 1e4, file);
  const int64_t pattern = g3 ? positive_or(c, "sliding_window_pattern", 6, file) : 2;
  m.windows = gemma_windows(c, m.layers, m.sliding_window, pattern, file);
}
void read_gemma2(const json& c, const std::string& file, ModelConfig& m) { read_gemma(c, file, m, false); }

// T5GemmaModuleConfig (t5gemma's encoder and decoder, every pinned release): gemma2's layers (sandwich norms of weight
// 1 + w, the scores times query_pre_attn_scalar ** -0.5 and soft-capped by attn_logit_softcapping, default 50, the
// embedding times sqrt(hidden)), layer types by default sliding on even layers, rope_theta 1e4 (4.x top-level, 5.x
// rope_parameters); hidden_activation gelu_pytorch_tanh by default or the exact gelu; attention_bias puts a bias on
// q, k, v and o (the cross-attention's too). Its norms are named pre_self_attn_layernorm and post_self_attn_layernorm.
// The head, its tie and the soft-capping of the logits are the outer config's (read_encoder_decoder).
// One stack of t5gemma (gemma2's layers) or t5gemma2 (gemma3's): the activation, attention_bias and norm names both share.
void read_t5gemma_stack(const json& c, const std::string& file, ModelConfig& m, bool g3) {
  read_gemma(c, file, m, g3);
  const std::string act = c.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu")
    bad(file, "/hidden_activation", "\"" + act + "\" is not modelled (gelu_pytorch_tanh and gelu are)");
  m.gelu_exact = act == "gelu";
  m.qkv_bias = m.o_bias = c.value("attention_bias", false);
  m.tensor_names = {{"pre_self_attn_layernorm.", "input_layernorm."}, {"post_self_attn_layernorm.", "post_attention_layernorm."}};
}
void read_t5gemma_module(const json& c, const std::string& file, ModelConfig& m) { read_t5gemma_stack(c, file, m, false); }
// T5Gemma2TextConfig / T5Gemma2DecoderConfig (t5gemma2's encoder text stack and decoder, 5.13.1 on): gemma3's layers
// (sandwich norms of 1 + w, q_norm and k_norm, rope bases per layer type, layer types by default every sliding_window_
// pattern-th full), the norm names and attention_bias of t5gemma's stacks. Its attention never passes
// attn_logit_softcapping on (T5Gemma2SelfAttention and T5Gemma2MergedAttention call the attention without softcap), so
// it reads as no soft-cap whatever the config says, as gemma3's (read_gemma). The embedding scale is a float32 buffer (sqrt(hidden) rounded).
// The merged cross-attention and the encoder's reach are the encoder-decoder's (kEncoderDecoders).
void read_t5gemma2_module(const json& c, const std::string& file, ModelConfig& m) {
  read_t5gemma_stack(c, file, m, true);
  m.embed_scale = static_cast<double>(static_cast<float>(std::sqrt(static_cast<double>(m.hidden))));
  if (bool_or(c, "use_bidirectional_attention", false, file))
    bad(file, "/use_bidirectional_attention", "true is not modelled (T5Gemma2's stacks do not read it)");
}
void read_gemma3(const json& c, const std::string& file, ModelConfig& m) { read_gemma(c, file, m, true); }

void read_mistral(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
  // MistralAttention passes config.sliding_window to every layer.
  m.windows.assign(static_cast<size_t>(m.layers), m.sliding_window);
}

// Qwen2 / Qwen3: sliding_window counts only with use_sliding_window; without layer_types, layer i
// slides iff i >= max_window_layers (the first max_window_layers layers are full).
void read_qwen(const json& c, const std::string& file, ModelConfig& m, bool qwen3, int64_t default_max_window_layers = 28) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
  if (!bool_or(c, "use_sliding_window", false, file)) m.sliding_window = 0;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t max_window_layers = c.contains("max_window_layers") && !c["max_window_layers"].is_null()
                                          ? c["max_window_layers"].get<int64_t>()
                                          : default_max_window_layers;
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(m.sliding_window > 0 && i >= max_window_layers ? "sliding_attention" : "full_attention");
  }
  m.windows = windows_of(types, m.sliding_window, file);
  if (qwen3) {
    m.qk_norm = true;
    m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  } else {
    m.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o without, whatever attention_bias says
  }
}
void read_qwen2(const json& c, const std::string& file, ModelConfig& m) { read_qwen(c, file, m, false); }
void read_qwen3(const json& c, const std::string& file, ModelConfig& m) { read_qwen(c, file, m, true); }

// no_rope_layers as llama4 and smollm3 write it: 1 = rope, 0 = NoPE; absent (or empty), every
// interval-th layer is NoPE.
std::vector<bool> rope_layers_of(const json& c, int64_t layers, const std::string& file) {
  std::vector<bool> rope;
  if (c.contains("no_rope_layers") && c["no_rope_layers"].is_array() && !c["no_rope_layers"].empty()) {
    if (static_cast<int64_t>(c["no_rope_layers"].size()) != layers)
      bad(file, "/no_rope_layers", "must list one 0/1 per layer (" + std::to_string(layers) + ")");
    for (const json& v : c["no_rope_layers"]) {
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1))
        bad(file, "/no_rope_layers", "entries must be 0 or 1");
      rope.push_back(v.get<int64_t>() == 1);
    }
  } else {
    const int64_t interval = positive_or(c, "no_rope_layer_interval", 4, file);
    for (int64_t i = 0; i < layers; ++i) rope.push_back((i + 1) % interval != 0);
  }
  return rope;
}

// Llama4TextConfig: no_rope_layers[i] is 1 on a rope layer, 0 on a NoPE layer (default: every
// no_rope_layer_interval-th layer is NoPE); without layer_types the rope layers are chunked and the
// NoPE layers full; use_qk_norm puts a weightless L2 norm after rope on the rope layers; the NoPE
// layers get attention temperature tuning; the feed-forward of the moe_layers is the MoE (default:
// every interleave_moe_layer_step-th layer), of the others a dense MLP of intermediate_size_mlp.
void read_llama4_text(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 500000, file);
  m.rope_interleaved = true;
  m.mlp_prefix = "feed_forward.";
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.sliding_window = 0;
  const std::vector<bool> rope = rope_layers_of(c, m.layers, file);
  m.rope_layers = rope;
  m.chunk_size = positive_or(c, "attention_chunk_size", 8192, file);
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, {"chunked_attention", "full_attention"}, types, file))
    for (bool r : rope) types.push_back(r ? "chunked_attention" : "full_attention");
  m.windows.assign(static_cast<size_t>(m.layers), 0);
  for (const std::string& t : types) m.chunks.push_back(t == "chunked_attention" ? m.chunk_size : 0);
  m.qk_l2_norm = bool_or(c, "use_qk_norm", true, file);
  if (bool_or(c, "attn_temperature_tuning", true, file)) {
    m.temperature_floor_scale = number_or(c, "floor_scale", 8192, file);
    m.temperature_attn_scale = number_or(c, "attn_scale", 0.1, file);
  }
  m.moe.experts = positive_or(c, "num_local_experts", 16, file);
  m.moe.top_k = positive_or(c, "num_experts_per_tok", 1, file);
  if (m.moe.top_k > m.moe.experts) bad(file, "/num_experts_per_tok", "exceeds num_local_experts");
  m.moe.intermediate = m.moe.shared_intermediate = m.intermediate;  // intermediate_size: the experts' and the shared expert's
  m.intermediate = positive_or(c, "intermediate_size_mlp", 16384, file);
  m.moe.layers.assign(static_cast<size_t>(m.layers), false);
  if (c.contains("moe_layers") && !c["moe_layers"].is_null()) {
    if (!c["moe_layers"].is_array()) bad(file, "/moe_layers", "must be a list of layer indices");
    for (const json& v : c["moe_layers"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.layers)
        bad(file, "/moe_layers", "entries must be layer indices");
      m.moe.layers[static_cast<size_t>(v.get<int64_t>())] = true;
    }
  } else {
    const int64_t step = positive_or(c, "interleave_moe_layer_step", 1, file);
    for (int64_t i = step - 1; i < m.layers; i += step) m.moe.layers[static_cast<size_t>(i)] = true;
  }
}

// GptOssConfig: layer_types default alternating (even layers sliding), attention_bias (q/k/v/o),
// sinks, a MoE on every layer (router with bias, clamped SwiGLU experts with biases), YaRN rope.
// swiglu_alpha / swiglu_limit are read as 5.24 reads them; 4.56 - 5.13 hard-code 1.702 / 7.0.
void read_gpt_oss(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 150000, file);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  if (!c.contains("sliding_window")) m.sliding_window = 128;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((i + 1) % 2 ? "sliding_attention" : "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", true, file);
  m.sinks = true;
  m.moe.routing = MoeRouting::GptOss;
  m.moe.experts = positive_or(c, "num_local_experts", 128, file);
  m.moe.top_k = positive_or(c, "num_experts_per_tok", 4, file);
  if (m.moe.top_k > m.moe.experts) bad(file, "/num_experts_per_tok", "exceeds num_local_experts");
  m.moe.intermediate = m.intermediate;
  m.moe.layers.assign(static_cast<size_t>(m.layers), true);
  m.moe.swiglu_alpha = number_or(c, "swiglu_alpha", 1.702, file);
  m.moe.swiglu_limit = number_or(c, "swiglu_limit", 7.0, file);
}

// SmolLM3Config: llama with NoPE layers (no_rope_layers) and attention_bias on q/k/v/o. Without
// layer_types the NoPE layers slide iff use_sliding_window and sliding_window is set; with
// layer_types the eager forward masks by layer_types and config.sliding_window (use_sliding_window
// only gates the flash-attention path).
void read_smollm3(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", true);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 2000000, file);
  if (bool_or(c, "mlp_bias", false, file)) bad(file, "/mlp_bias", "true is not modelled");
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.rope_layers = rope_layers_of(c, m.layers, file);
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const bool slide = bool_or(c, "use_sliding_window", false, file) && m.sliding_window > 0;
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(slide && !m.rope_layers[static_cast<size_t>(i)] ? "sliding_attention" : "full_attention");
  }
  m.windows = windows_of(types, m.sliding_window, file);
}

// Cohere2Config: layer_types default from sliding_window_pattern (4): every 4th layer full; rope on
// the sliding layers only; interleaved rope pairs; LayerNorm (no bias, layer_norm_eps); the parallel
// block; logits times logit_scale; head_dim is hidden_size / num_attention_heads whatever the config
// says (every release sets it so).
void read_cohere2(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", true);
  m.head_dim = m.hidden / m.heads;
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.rope_interleaved = true;
  m.eps = number_or(c, "layer_norm_eps", 1e-5, file);
  m.layer_norm = m.parallel_block = true;
  m.logit_scale = number_or(c, "logit_scale", 0.0625, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  m.windows = gemma_windows(c, m.layers, m.sliding_window, positive_or(c, "sliding_window_pattern", 4, file), file);
  for (int64_t w : m.windows) m.rope_layers.push_back(w > 0);
}

// MinistralConfig: mistral with layer_types; without them every layer slides when sliding_window
// is set (default 4096), else every layer is full.
void read_ministral(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    types.assign(static_cast<size_t>(m.layers), m.sliding_window > 0 ? "sliding_attention" : "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
}

// Phi3Config: sliding_window (None: full) on every layer; partial_rotary_factor top-level (4.x) or in
// rope_parameters (5.x); fused qkv_proj and gate_up_proj; longrope is not modelled.
void read_phi3(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.fused_projections = true;
  m.windows.assign(static_cast<size_t>(m.layers), m.sliding_window);
  double factor = number_or(c, "partial_rotary_factor", 1.0, file);
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object())
    factor = number_or(c["rope_parameters"], "partial_rotary_factor", factor, file);
  m.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * factor);
  if (m.rotary_dim <= 0 || m.rotary_dim > m.head_dim || m.rotary_dim % 2)
    bad(file, "/partial_rotary_factor", "must give an even rotary dimension in (0, head_dim]");
}

// The layer types of a family whose default is "every pattern-th layer full".
std::vector<std::string> patterned_types(const json& c, int64_t layers, int64_t pattern, const std::string& file) {
  std::vector<std::string> types;
  if (!layer_types(c, layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % pattern ? "sliding_attention" : "full_attention");
  return types;
}

// KV sharing (gemma4_text, gemma3n_text): the last `shared` layers have no K/V of their own; each attends the K/V of
// the last earlier unshared layer of its type. Per layer, the layer whose K/V it attends.
std::vector<int64_t> kv_sources(const std::vector<std::string>& types, int64_t shared, const std::string& file) {
  const int64_t layers = static_cast<int64_t>(types.size()), first_shared = layers - shared;
  std::vector<int64_t> sources;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string& type = types[static_cast<size_t>(l)];
    int64_t source = l;
    if (l >= first_shared) {
      source = -1;
      for (int64_t j = first_shared - 1; j >= 0 && source < 0; --j)
        if (types[static_cast<size_t>(j)] == type) source = j;
      if (source < 0)
        bad(file, "/num_kv_shared_layers",
            "layer " + std::to_string(l) + " (" + type + ") has no earlier layer of its type to share");
    }
    sources.push_back(source);
  }
  return sources;
}

// Gemma4TextConfig (5.13.1, 5.24.0; earlier releases have no gemma4). Layer types default 5 sliding :
// 1 full, and the last layer is forced full whatever layer_types says. Rope per layer type from
// rope_parameters (default: sliding "default" base 1e4; full "proportional", partial_rotary_factor 0.25,
// base 1e6): proportional rope rotates the first int(factor * D // 2) of a head's D / 2 frequencies, with
// exponents over D, and leaves the rest. Full layers have their own head size (global_head_dim, default
// 512) and, with attention_k_eq_v, num_global_key_value_heads KV heads and no v_proj (values are the
// raw key projection). q and k get weighted RMS norms (weight w, not 1 + w) before rope, values a
// weightless one; the scores are not scaled. The last num_kv_shared_layers layers have no K/V of their
// own: each attends the keys and values of the last earlier non-shared layer of its type (5.13.1
// spells it per layer, 5.24.0 as config.kv_sharing_modes; the same layers). Each layer's output is
// multiplied by its layer_scalar buffer. Per-layer input embeddings (hidden_size_per_layer_input, default 256; 0:
// none) are the unified rule's case without AltUp (ModelConfig::per_layer_input, as gemma3n's, the branch added after
// the MLP's residual, before layer_scalar): the table's scale is a float32 buffer (sqrt(P)), the projection's
// (hidden_size ** -0.5) and the input's (2 ** -0.5) Python floats; every id must have a row (vocab_size_per_layer_input
// below vocab_size is refused: the class's lookup raises IndexError past it). The MoE block, the double-wide MLP and
// bidirectional attention are not modelled.
void read_gemma4_text(const json& c, const std::string& file, ModelConfig& m) {
  m.norm_placement = NormPlacement::Sandwich;
  m.gelu = true;
  if (c.value("hidden_activation", std::string("gelu_pytorch_tanh")) != "gelu_pytorch_tanh")
    bad(file, "/hidden_activation", "only gelu_pytorch_tanh is modelled");
  m.qk_norm = m.v_norm = m.layer_scalar = true;
  m.tied = c.value("tie_word_embeddings", true);
  m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
  m.query_scale = 1.0;
  m.final_softcap = number_or(c, "final_logit_softcapping", 0, file);
  if (c.contains("use_bidirectional_attention") && !c["use_bidirectional_attention"].is_null())
    bad(file, "/use_bidirectional_attention", "bidirectional attention is not modelled");
  const double per_layer = number_or(c, "hidden_size_per_layer_input", 256, file);
  if (per_layer < 0 || per_layer != std::floor(per_layer))
    bad(file, "/hidden_size_per_layer_input", "must be a whole number >= 0 (0: no per-layer inputs)");
  if (per_layer > 0) {
    m.per_layer_input = static_cast<int64_t>(per_layer);
    m.per_layer_vocab = positive_or(c, "vocab_size_per_layer_input", 262144, file);
    if (m.per_layer_vocab < m.vocab)
      bad(file, "/vocab_size_per_layer_input", "below vocab_size: the class's per-layer lookup raises IndexError past it");
    m.per_layer_embed_scale = static_cast<double>(static_cast<float>(std::sqrt(per_layer)));  // a float32 buffer
    m.per_layer_projection_scale = std::pow(static_cast<double>(m.hidden), -0.5);             // Python floats
    m.per_layer_input_scale = std::pow(2.0, -0.5);
  }
  if (bool_or(c, "enable_moe_block", false, file)) bad(file, "/enable_moe_block", "the MoE block is not modelled");
  if (!c.contains("sliding_window")) m.sliding_window = 512;
  std::vector<std::string> types = patterned_types(c, m.layers, 6, file);
  types.back() = "full_attention";
  m.windows = windows_of(types, m.sliding_window, file);
  const int64_t global_dim = positive_or(c, "global_head_dim", 512, file);
  if (global_dim % 2) bad(file, "/global_head_dim", "must be even (rope rotates pairs)");
  const bool k_eq_v = bool_or(c, "attention_k_eq_v", false, file);
  const bool has_global_kv = c.contains("num_global_key_value_heads") && !c["num_global_key_value_heads"].is_null();
  const int64_t global_kv = has_global_kv ? positive(c, "num_global_key_value_heads", file) : m.kv_heads;
  if (k_eq_v && !has_global_kv) bad(file, "/num_global_key_value_heads", "attention_k_eq_v needs it");
  if (m.heads % global_kv) bad(file, "/num_global_key_value_heads", "must divide num_attention_heads");
  const json rp =
      c.contains("rope_parameters") && c["rope_parameters"].is_object()
          ? c["rope_parameters"]
          : json{{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                 {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}};
  const int64_t shared = c.contains("num_kv_shared_layers") && c["num_kv_shared_layers"].is_number_integer()
                             ? c["num_kv_shared_layers"].get<int64_t>()
                             : 0;
  if (shared < 0 || shared >= m.layers) bad(file, "/num_kv_shared_layers", "must be in [0, num_hidden_layers)");
  if (shared > 0 && bool_or(c, "use_double_wide_mlp", false, file)) bad(file, "/use_double_wide_mlp", "is not modelled");
  m.kv_source = kv_sources(types, shared, file);
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string& type = types[static_cast<size_t>(l)];
    const bool full = type == "full_attention";
    const int64_t d = full ? global_dim : m.head_dim;
    m.head_dims.push_back(d);
    m.layer_kv_heads.push_back(full && k_eq_v ? global_kv : m.kv_heads);
    m.k_eq_v.push_back(full && k_eq_v);
    if (!rp.contains(type) || !rp[type].is_object()) bad(file, "/rope_parameters/" + type, "is missing");
    const json& r = rp[type];
    const std::string rt = r.value("rope_type", std::string("default"));
    m.rope_thetas.push_back(number_or(r, "rope_theta", 10000, file));
    if (rt == "proportional") {
      if (number_or(r, "factor", 1.0, file) != 1.0) bad(file, "/rope_parameters/" + type + "/factor", "only 1 is modelled");
      m.rope_angles.push_back(
          static_cast<int64_t>(std::floor(number_or(r, "partial_rotary_factor", 1.0, file) * static_cast<double>(d) / 2)));
    } else if (rt == "default") {
      m.rope_angles.push_back(0);
    } else {
      bad(file, "/rope_parameters/" + type + "/rope_type", "\"" + rt + "\" is not modelled (default and proportional are)");
    }
  }
}

// gemma3n's text decoder: Gemma3nTextConfig and Gemma3nTextModel, every pinned release (4.56.2 on). gemma's sandwich
// norms with the weight applied as w (Gemma3nRMSNorm: x * pow(mean(x^2) + eps, -0.5) * w), q/k norms before rope, a
// weightless value norm, unscaled scores, the final soft-cap (30 by default), tied; layer types default 4 sliding : 1
// full; rope bases per layer type (4.x rope_theta and rope_local_base_freq, 5.x rope_parameters); gemma4's KV sharing
// (num_kv_shared_layers, default 15: the last n layers attend the last earlier unshared layer of their type's K/V;
// 4.56.2 and 4.57.6 share only through a cache, so their no-cache forward gives the shared layers K/V of their own:
// the oracle follows generation, as 5.13.1 on do in both); and the rules of ModelConfig's gemma3n block: per-layer
// input embeddings, AltUp, LAuReL and activation sparsity (default 0.95 on the first 10 layers of a model with more
// than 10). An id at or past vocab_size_per_layer_input reads the per-layer table's row 0, as 5.24.0 on do (4.56.2 to
// 5.13.1 raise IndexError there; the multimodal model maps those ids before). intermediate_size may list one size
// per layer: a list of one size is read. 4.x clamps AltUp's
// correction coefficients to altup_coef_clip at inference too (5.x only in training): the checkpoints keep theirs
// far inside it.
void read_gemma3n_text(const json& c, const std::string& file, ModelConfig& m) {
  m.norm_placement = NormPlacement::Sandwich;
  m.gelu = true;
  if (c.value("hidden_activation", std::string("gelu_pytorch_tanh")) != "gelu_pytorch_tanh")
    bad(file, "/hidden_activation", "only gelu_pytorch_tanh is modelled");
  m.qk_norm = m.v_norm = true;
  m.tied = c.value("tie_word_embeddings", true);
  const auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };  // a float32 buffer's value
  m.embed_scale = f32(std::sqrt(static_cast<double>(m.hidden)));
  m.query_scale = 1.0;
  m.final_softcap = c.contains("final_logit_softcapping") ? number_or(c, "final_logit_softcapping", 0, file) : 30;
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e6, file);
  m.rope_local_theta = rope_base(c, "sliding_attention", "rope_local_base_freq", 1e4, file);
  if (!c.contains("sliding_window")) m.sliding_window = 512;
  const std::vector<std::string> types = patterned_types(c, m.layers, 5, file);
  m.windows = windows_of(types, m.sliding_window, file);
  const int64_t shared =
      c.contains("num_kv_shared_layers") && !c["num_kv_shared_layers"].is_null() ? c["num_kv_shared_layers"].get<int64_t>() : 15;
  if (shared < 0 || shared >= m.layers) bad(file, "/num_kv_shared_layers", "must be in [0, num_hidden_layers)");
  m.kv_source = kv_sources(types, shared, file);
  m.per_layer_input = positive_or(c, "hidden_size_per_layer_input", 256, file);
  m.per_layer_vocab = positive_or(c, "vocab_size_per_layer_input", 262144, file);
  m.per_layer_embed_scale = f32(std::sqrt(static_cast<double>(m.per_layer_input)));
  m.per_layer_projection_scale = f32(std::pow(static_cast<double>(m.hidden), -0.5));
  m.per_layer_input_scale = f32(1 / std::sqrt(2.0));  // torch.rsqrt(torch.tensor(2.0))
  m.altup_inputs = positive_or(c, "altup_num_inputs", 4, file);
  m.altup_active = c.contains("altup_active_idx") && !c["altup_active_idx"].is_null() ? c["altup_active_idx"].get<int64_t>() : 0;
  if (m.altup_active < 0 || m.altup_active >= m.altup_inputs) bad(file, "/altup_active_idx", "must be in [0, altup_num_inputs)");
  m.altup_correct_scale = bool_or(c, "altup_correct_scale", true, file);
  m.altup_router_scale = f32(1.0 / static_cast<double>(m.hidden));
  m.laurel_rank = positive_or(c, "laurel_rank", 64, file);
  if (c.contains("activation_sparsity_pattern") && !c["activation_sparsity_pattern"].is_null()) {
    const json& a = c["activation_sparsity_pattern"];
    if (!a.is_array() || static_cast<int64_t>(a.size()) != m.layers)
      bad(file, "/activation_sparsity_pattern", "must list one sparsity per layer (" + std::to_string(m.layers) + ")");
    for (const json& v : a) {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() >= 1)
        bad(file, "/activation_sparsity_pattern", "entries must be numbers in [0, 1)");
      m.activation_sparsity.push_back(v.get<double>());
    }
  } else {
    for (int64_t l = 0; l < m.layers; ++l) m.activation_sparsity.push_back(m.layers > 10 && l < 10 ? 0.95 : 0.0);
  }
}

// Olmo3Config (4.57.6 on; 4.56.2 has no olmo3): layer types default 3 sliding : 1 full (every 4th full);
// olmo2's block: no input norms, RMSNorm of the attention's and the MLP's outputs before each residual
// add; q and k RMS-normed over the whole projection (all heads at once) before rope; rope base per
// layer type (5.x rope_parameters keyed by type; 4.57.6 one rope_theta, default 1e4 there, 5e5 in 5.x).
void read_olmo3(const json& c, const std::string& file, ModelConfig& m) {
  m.norm_placement = NormPlacement::Post;
  m.qk_norm = m.qk_norm_whole = true;
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  const std::vector<std::string> types = patterned_types(c, m.layers, 4, file);
  m.windows = windows_of(types, m.sliding_window, file);
  for (const std::string& t : types) m.rope_thetas.push_back(rope_base(c, t, "rope_theta", 500000, file));
}

// Exaone4Config (all four releases): layer types default from the integer sliding_window_pattern (4:
// every 4th layer full; a string such as "LLLG" fails in every release's own config); sliding_window
// null means no sliding layer (without layer_types every release then divides by zero: refused). With
// a window, rope only on the sliding layers; without one, on every layer. olmo2's post-norm block,
// q/k RMS norms per head before rope.
void read_exaone4(const json& c, const std::string& file, ModelConfig& m) {
  m.norm_placement = NormPlacement::Post;
  m.qk_norm = true;
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  if (c.contains("sliding_window_pattern") && !c["sliding_window_pattern"].is_null() &&
      !c["sliding_window_pattern"].is_number_integer())
    bad(file, "/sliding_window_pattern", "must be an integer (transformers' own config fails on a string)");
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    if (m.sliding_window == 0) bad(file, "/sliding_window", "null without layer_types: every release's config divides by zero");
    types = patterned_types(c, m.layers, positive_or(c, "sliding_window_pattern", 4, file), file);
  }
  m.windows = windows_of(types, m.sliding_window, file);
  for (int64_t w : m.windows) m.rope_layers.push_back(m.sliding_window == 0 || w > 0);
}

// VaultGemmaConfig (4.57.6 on): gemma2 without the post-attention and post-feed-forward norms (x +=
// attn(RMS₁₊w x); x += mlp(RMS₁₊w x), the second norm named pre_feedforward_layernorm); layer types
// default alternating (even layers slide). A window with all-full layer_types (the released
// checkpoint's config) leaves every layer full: the window applies only where layer_types says sliding.
void read_vaultgemma(const json& c, const std::string& file, ModelConfig& m) {
  m.gemma_norm = true;
  m.pre_ff_norm = "pre_feedforward_layernorm.";
  m.gelu = true;
  m.tied = c.value("tie_word_embeddings", true);
  m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
  m.query_scale = std::pow(number_or(c, "query_pre_attn_scalar", 256, file), -0.5);
  auto softcap = [&](const char* key, double absent) { return c.contains(key) ? number_or(c, key, 0, file) : absent; };
  m.attn_softcap = softcap("attn_logit_softcapping", 50);
  m.final_softcap = softcap("final_logit_softcapping", 30);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  m.windows = windows_of(patterned_types(c, m.layers, 2, file), m.sliding_window, file);
}

// CwmConfig (5.13.1, 5.24.0): llama with layer_types (default: layer i full iff i % 4 == 0, so the
// first layer is full), no attention biases. Without rope_parameters the config defaults to llama3
// rope, which is not modelled.
void read_cwm(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  if (bool_or(c, "mlp_bias", false, file)) bad(file, "/mlp_bias", "true is not modelled");
  if (!c.contains("rope_parameters") || !c["rope_parameters"].is_object())
    bad(file, "/rope_parameters", "absent: CwmConfig's default llama3 rope is not modelled");
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e6, file);
  if (!c.contains("sliding_window")) m.sliding_window = 8192;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back(i % 4 ? "sliding_attention" : "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
}

// GraniteSWAConfig (5.24.0 only): granite (embedding, attention and residual multipliers, logits
// divided by logits_scaling) with layer_types (default: layer i full iff i % 4 == 0), a learned sink
// per head (applied by transformers as the output times sigmoid(logsumexp(scores) - sink), the same
// as a sink logit in the denominator), and a rope base per layer (layer_rope_theta; 0 is a NoPE layer;
// default rope_theta on every layer).
void read_granite_swa(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", true);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.embed_scale = number_or(c, "embedding_multiplier", 1.0, file);
  m.query_scale = number_or(c, "attention_multiplier", 1.0, file);
  m.residual_scale = number_or(c, "residual_multiplier", 1.0, file);
  const double logits_scaling = number_or(c, "logits_scaling", 1.0, file);
  if (logits_scaling <= 0) bad(file, "/logits_scaling", "must be positive");
  m.logit_scale = 1.0 / logits_scaling;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (bool_or(c, "mlp_bias", false, file)) bad(file, "/mlp_bias", "true is not modelled");
  m.sinks = true;
  if (!c.contains("sliding_window")) m.sliding_window = 128;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back(i % 4 ? "sliding_attention" : "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  const double theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  if (c.contains("layer_rope_theta") && !c["layer_rope_theta"].is_null()) {
    const json& t = c["layer_rope_theta"];
    if (!t.is_array() || static_cast<int64_t>(t.size()) != m.layers)
      bad(file, "/layer_rope_theta", "must list one base per layer (" + std::to_string(m.layers) + "; 0: NoPE)");
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_number() || t[i].get<double>() < 0) bad(file, "/layer_rope_theta/" + std::to_string(i), "must be a base >= 0");
      m.rope_thetas.push_back(t[i].get<double>() > 0 ? t[i].get<double>() : theta);
      m.rope_layers.push_back(t[i].get<double>() > 0);
    }
  }
}

// The layers whose feed-forward is the MoE: every layer not in `dense` from `first` on whose index + 1 is a
// multiple of `step`.
std::vector<bool> moe_layers_of(const json& c, int64_t layers, int64_t first, int64_t step, const char* dense_key,
                                const std::string& file) {
  std::vector<bool> out(static_cast<size_t>(layers), false);
  for (int64_t i = first; i < layers; ++i) out[static_cast<size_t>(i)] = (i + 1) % step == 0;
  if (dense_key && c.contains(dense_key) && !c[dense_key].is_null()) {
    if (!c[dense_key].is_array()) bad(file, std::string("/") + dense_key, "must be a list of layer indices");
    for (const json& v : c[dense_key]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= layers)
        bad(file, std::string("/") + dense_key, "entries must be layer indices");
      out[static_cast<size_t>(v.get<int64_t>())] = false;
    }
  }
  return out;
}

// The TopK routing's counts, checked as the family's router needs them.
void check_topk(MoeConfig& moe, const std::string& file) {
  if (moe.top_k > moe.experts) bad(file, "/num_experts_per_tok", "exceeds the number of experts");
  if (moe.groups < 1 || moe.experts % moe.groups) bad(file, "/n_group", "must divide the number of experts");
  if (moe.groups > 1 && moe.experts / moe.groups < 2)
    bad(file, "/n_group", "each group needs two experts (its score sums its best two)");
  if (moe.topk_groups < 1 || moe.topk_groups > moe.groups) bad(file, "/topk_group", "must be in [1, n_group]");
  if (moe.top_k > moe.topk_groups * (moe.experts / moe.groups))
    bad(file, "/num_experts_per_tok", "exceeds the experts of topk_group groups");
}

std::vector<bool> mlp_layer_types_of(const json& c, int64_t layers, const std::string& file);

// The end of every TopK MoE reader whose config may name its MoE layers in mlp_layer_types (exaone_moe, mellum,
// laguna, step3p7, ergo, beam, mimo_v2_flash): TopK routing, the router under gate., the shared experts under `shared`
// (nullptr: the family has none), the experts stacked or one module each, the counts checked, and the MoE layers:
// mlp_layer_types where the config sets it, else the family's default, made only then (so the keys it reads are
// checked only then, as the family's config does).
template <class SparseDefault>
void read_topk_moe(const json& c, const std::string& file, ModelConfig& m, const char* shared, bool stacked,
                   SparseDefault sparse_default) {
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.router = "gate.";
  if (shared) moe.shared = shared;
  moe.stacked_experts = stacked;
  check_topk(moe, file);
  moe.layers =
      c.contains("mlp_layer_types") && !c["mlp_layer_types"].is_null() ? mlp_layer_types_of(c, m.layers, file) : sparse_default();
}

// Qwen2MoeConfig: qwen2's attention (q/k/v biases: qkv_bias, default true) and a MoE: softmax of the
// router's logits over every expert, the top num_experts_per_tok of them, renormalised where
// norm_topk_prob (default false), weighting their experts' outputs, plus a shared expert of
// shared_expert_intermediate_size gated by sigmoid(shared_expert_gate x). A layer's feed-forward is the
// MoE iff it is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0, else the dense MLP of
// intermediate_size. sliding_window counts only with use_sliding_window; without layer_types, 5.x
// slides layer i iff i is even and i < max_window_layers (its config's __post_init__). 4.56.2 and
// 4.57.6 have no layer_types: their eager mask slides every layer where use_sliding_window (the one mask
// of _update_causal_mask), so a checkpoint agrees across releases only with every layer sliding or none
// (families.py draws those). head_dim is the config's in 5.x; 4.x derives hidden_size / num_attention_heads
// (and refuses a config where they differ).
void read_qwen2_moe(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
  m.qkv_bias = bool_or(c, "qkv_bias", true, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  if (!bool_or(c, "use_sliding_window", false, file)) m.sliding_window = 0;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t max_window_layers = c.contains("max_window_layers") && c["max_window_layers"].is_number_integer()
                                          ? c["max_window_layers"].get<int64_t>()
                                          : 28;
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(m.sliding_window > 0 && (i + 1) % 2 && i < max_window_layers ? "sliding_attention" : "full_attention");
  }
  m.windows = windows_of(types, m.sliding_window, file);
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Softmax;
  moe.experts = c.contains("num_experts") && c["num_experts"].is_number_integer() && c["num_experts"].get<int64_t>() == 0
                    ? 0
                    : positive_or(c, "num_experts", 60, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 4, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 1408, file);
  moe.shared_intermediate = positive_or(c, "shared_expert_intermediate_size", 5632, file);
  moe.shared_gate = true;
  moe.renormalize = bool_or(c, "norm_topk_prob", false, file);
  moe.router = "gate.";
  moe.shared = "shared_expert.";
  if (moe.experts > 0) {
    check_topk(moe, file);
    moe.layers = moe_layers_of(c, m.layers, 0, positive_or(c, "decoder_sparse_step", 1, file), "mlp_only_layers", file);
  }
}

// Dots1Config: qwen3's attention (per-head q/k RMS norms, attention_bias on q/k/v/o), layer types default
// sliding on the layers from max_window_layers (default 62) on where sliding_window (default 4096) is set,
// and a MoE from layer first_k_dense_replace on (the first layers have the dense MLP of
// intermediate_size): sigmoid scores, the top num_experts_per_tok chosen by score + e_score_correction_bias
// among the topk_group best of n_group groups, weighted by their scores, renormalised where norm_topk_prob,
// times routed_scaling_factor; plus n_shared_experts shared experts as one SwiGLU of
// moe_intermediate_size * n_shared_experts, ungated. 4.56.2 masks the groups not chosen with 0 where 5.x
// uses -inf: the same choice while every score + bias is positive (families.py draws biases >= 0).
void read_dots1(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t max_window_layers = c.contains("max_window_layers") && c["max_window_layers"].is_number_integer()
                                          ? c["max_window_layers"].get<int64_t>()
                                          : 62;
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(m.sliding_window > 0 && i >= max_window_layers ? "sliding_attention" : "full_attention");
  }
  m.windows = windows_of(types, m.sliding_window, file);
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = true;
  moe.experts = positive(c, "n_routed_experts", file);
  moe.top_k = positive(c, "num_experts_per_tok", file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 1408, file);
  moe.shared_intermediate = moe.intermediate * positive(c, "n_shared_experts", file);
  moe.groups = positive_or(c, "n_group", 1, file);
  moe.topk_groups = positive_or(c, "topk_group", 1, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", false, file);
  moe.routed_scale = number_or(c, "routed_scaling_factor", 1.0, file);
  moe.router = "gate.";
  moe.shared = "shared_experts.";
  check_topk(moe, file);
  const int64_t first = c.contains("first_k_dense_replace") && c["first_k_dense_replace"].is_number_integer()
                            ? c["first_k_dense_replace"].get<int64_t>()
                            : 0;
  if (first < 0) bad(file, "/first_k_dense_replace", "must be >= 0");
  moe.layers = moe_layers_of(c, m.layers, first, 1, nullptr, file);
}

// ExaoneMoeConfig (5.13.1, 5.24.0): exaone4's layer types and rope (sliding_window_pattern, default 4:
// every 4th layer full; rope on the sliding layers only while there is a window; sliding_window null
// without layer_types divides by zero in its own config: refused) and per-head q/k RMS norms, but the
// llama block (input and post-attention norms, not exaone4's post-norms) and no biases. The feed-forward
// per mlp_layer_types ("dense" or "sparse"; default: dense before first_k_dense_replace, 1): dense the
// MLP of intermediate_size, sparse dots1's routing (sigmoid scores, top num_experts_per_tok of num_experts
// by score + e_score_correction_bias within the topk_group best of n_group groups, renormalised where
// norm_topk_prob (default true), times routed_scaling_factor (2.5)) plus num_shared_experts shared
// experts as one SwiGLU of moe_intermediate_size * num_shared_experts.
void read_exaone_moe(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.qk_norm = true;
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  if (c.contains("sliding_window_pattern") && !c["sliding_window_pattern"].is_null() &&
      !c["sliding_window_pattern"].is_number_integer())
    bad(file, "/sliding_window_pattern", "only an integer is modelled");
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    if (m.sliding_window == 0) bad(file, "/sliding_window", "null without layer_types: the release's own config divides by zero");
    types = patterned_types(c, m.layers, positive_or(c, "sliding_window_pattern", 4, file), file);
  }
  m.windows = windows_of(types, m.sliding_window, file);
  for (int64_t w : m.windows) m.rope_layers.push_back(m.sliding_window == 0 || w > 0);
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = true;
  moe.experts = positive_or(c, "num_experts", 64, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 1024, file);
  moe.shared_intermediate = moe.intermediate * positive_or(c, "num_shared_experts", 1, file);
  moe.groups = positive_or(c, "n_group", 1, file);
  moe.topk_groups = positive_or(c, "topk_group", 1, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  moe.routed_scale = number_or(c, "routed_scaling_factor", 2.5, file);
  read_topk_moe(c, file, m, "shared_experts.", false, [&] {
    const int64_t first = c.contains("first_k_dense_replace") && c["first_k_dense_replace"].is_number_integer()
                              ? c["first_k_dense_replace"].get<int64_t>()
                              : 1;
    return moe_layers_of(c, m.layers, std::max<int64_t>(0, first), 1, nullptr, file);
  });
}

// GraniteMoeSWAConfig (5.24.0 only): granite_swa's attention, multipliers and sinks (read_granite_swa),
// and a MoE on every layer: the top num_experts_per_tok of the router's logits, softmaxed among
// themselves, weighting their experts (intermediate_size each; experts stacked, block_sparse_moe.), plus
// a shared expert of shared_intermediate_size (shared_mlp., 0: none), ungated.
void read_granitemoe_swa(const json& c, const std::string& file, ModelConfig& m) {
  read_granite_swa(c, file, m);
  m.mlp_prefix = "block_sparse_moe.";
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::TopKSoftmax;
  moe.experts = positive_or(c, "num_local_experts", 8, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 2, file);
  moe.intermediate = m.intermediate;
  const int64_t shared = c.contains("shared_intermediate_size") && c["shared_intermediate_size"].is_number_integer()
                             ? c["shared_intermediate_size"].get<int64_t>()
                             : 0;
  if (shared < 0) bad(file, "/shared_intermediate_size", "must be >= 0");
  moe.shared_intermediate = shared;
  moe.router = "router.";
  moe.shared = "shared_mlp.";
  moe.fused_shared = "shared_mlp.";
  moe.stacked_experts = true;
  check_topk(moe, file);
  moe.layers.assign(static_cast<size_t>(m.layers), true);
}

// The families whose config gives head_dim (default 128) apart from hidden_size / heads, scaled by
// head_dim ** -0.5: lfm3, cohere2_moe, afmoe.
void read_head_dim_128(const json& c, const std::string& file, ModelConfig& m) {
  m.head_dim = positive_or(c, "head_dim", 128, file);
  if (m.head_dim % 2) bad(file, "/head_dim", "must be even (rope rotates pairs)");
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
}

// Lfm3Config (5.24.0 on; older releases have no lfm3): LFM2's hybrid with sliding layers. layer_types
// (default: layer i full iff i % 4 == 2, sliding iff i % 4 == 0 and i > 0, else "conv") are "conv",
// "sliding_attention" (window sliding_window, default 256) or "full_attention". A conv layer is the
// short-convolution block (ModelConfig::conv_layers; conv_L_cache taps, default 7; conv_bias on its
// in_proj, conv and out_proj); an attention layer has per-head q/k RMS norms (weight w) before rope and,
// with use_attention_gate (default true), each head's output times sigmoid(g_proj h). rope_parameters is
// keyed by layer type (default: sliding "default" base 1e4, full "proportional", partial_rotary_factor 0.5,
// base 1e6; proportional as gemma4's). use_sandwich_norm (default true) adds post_operator_norm and
// post_ffn_norm: gemma's sandwich with weight w. The final norm is model.embedding_norm; norm_eps default
// 1e-5; head_dim default 128; tied by default. 5.24.0 and 5.25.0 compute the same forward (5.25.0 moved
// the conv's cache handling into causal_conv1d_forward; without a cache it is the same convolution).
void read_lfm3(const json& c, const std::string& file, ModelConfig& m) {
  m.eps = number_or(c, "norm_eps", number_or(c, "rms_norm_eps", 1e-5, file), file);
  read_head_dim_128(c, file, m);
  m.tied = bool_or(c, "tie_word_embeddings", true, file);
  m.qk_norm = true;
  m.attn_gate = bool_or(c, "use_attention_gate", true, file);
  m.norm_placement = bool_or(c, "use_sandwich_norm", true, file) ? NormPlacement::Sandwich : NormPlacement::Pre;
  m.pre_ff_norm = "pre_feedforward_layernorm.";
  m.conv_kernel = positive_or(c, "conv_L_cache", 7, file);
  m.conv_bias = bool_or(c, "conv_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 256;
  m.tensor_names = {{"operator_norm.", "input_layernorm."},      {"post_operator_norm.", "post_attention_layernorm."},
                    {"ffn_norm.", "pre_feedforward_layernorm."}, {"post_ffn_norm.", "post_feedforward_layernorm."},
                    {"feed_forward.w1.", "mlp.gate_proj."},      {"feed_forward.w3.", "mlp.up_proj."},
                    {"feed_forward.w2.", "mlp.down_proj."},      {"model.embedding_norm.", "model.norm."}};
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, {"conv", "sliding_attention", "full_attention"}, types, file))
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(i % 4 == 2 ? "full_attention" : i % 4 == 0 && i > 0 ? "sliding_attention" : "conv");
  m.windows = windows_of(types, m.sliding_window, file);
  const json rp =
      c.contains("rope_parameters") && c["rope_parameters"].is_object()
          ? c["rope_parameters"]
          : json{{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                 {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.5}, {"rope_theta", 1e6}}}};
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string& type = types[static_cast<size_t>(l)];
    m.conv_layers.push_back(type == "conv");
    if (type == "conv") {
      m.rope_thetas.push_back(10000);  // no rope on a conv layer: a base only so that every layer has one
      m.rope_angles.push_back(0);
      continue;
    }
    if (!rp.contains(type) || !rp[type].is_object())
      bad(file, "/rope_parameters/" + type, "is missing (lfm3 keys it by layer type)");
    const json& r = rp[type];
    const std::string rt = r.value("rope_type", std::string("default"));
    m.rope_thetas.push_back(number_or(r, "rope_theta", 10000, file));
    if (rt == "proportional") {
      if (number_or(r, "factor", 1.0, file) != 1.0) bad(file, "/rope_parameters/" + type + "/factor", "only 1 is modelled");
      m.rope_angles.push_back(static_cast<int64_t>(
          std::floor(number_or(r, "partial_rotary_factor", 1.0, file) * static_cast<double>(m.head_dim) / 2)));
    } else if (rt == "default") {
      m.rope_angles.push_back(0);
    } else {
      bad(file, "/rope_parameters/" + type + "/rope_type", "\"" + rt + "\" is not modelled (default and proportional are)");
    }
  }
}

// RecurrentGemmaConfig (every pinned release): Griffin's residual blocks. Layer i's temporal block is
// block_types[i % len] (default recurrent, recurrent, attention): "recurrent" an RG-LRU block
// (ModelConfig::recurrent_layers; lru_width default hidden_size, its gates in num_attention_heads blocks,
// conv1d_width taps, default 4), "attention" local attention over attention_window_size keys (default 2048;
// config.sliding_window is its alias): the query at pos sees pos - W < j <= pos (5.x's
// create_sliding_window_causal_mask; 4.x's no-cache forward masks nothing but the future, its window lives only
// in its cache: oracle_agreement.py says how it is compared there). Pre-norm layers with gemma's (1 + w)
// RMSNorm (temporal_pre_norm, channel_pre_norm, final_norm); head_dim = hidden_size / num_attention_heads
// whatever head_dim says; q/k/v with a bias where attention_bias, o_proj always with one; rope on the first
// partial_rotary_factor (0.5; top-level in 4.x, in rope_parameters in 5.x) of a head: 4.x splits a head into
// 1 / factor chunks, so 0.5 is the only factor every release reads the same. The MLP (mlp_block) is
// intermediate_size / 2 wide with biases, hidden_activation gelu_pytorch_tanh for it and the y branch. The
// embeddings are scaled by sqrt(hidden_size) rounded to bfloat16 (the model's `normalizer` buffer is a
// bfloat16 tensor in every release), and the logits soft-capped by logits_soft_cap (default 30). Tied by default.
void read_recurrent_gemma(const json& c, const std::string& file, ModelConfig& m) {
  if (m.hidden % m.heads) bad(file, "/hidden_size", "must be a multiple of num_attention_heads");
  m.head_dim = m.hidden / m.heads;
  if (m.head_dim % 4) bad(file, "/hidden_size", "hidden_size / num_attention_heads must be a multiple of 4 (rope on half)");
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.tied = bool_or(c, "tie_word_embeddings", true, file);
  m.gemma_norm = true;
  m.qkv_bias = bool_or(c, "attention_bias", false, file);
  m.o_bias = true;
  m.mlp_bias = true;
  m.intermediate /= 2;
  if (m.intermediate < 1) bad(file, "/intermediate_size", "must be at least 2 (the MLP is intermediate_size / 2 wide)");
  if (c.value("hidden_activation", std::string("gelu_pytorch_tanh")) != "gelu_pytorch_tanh")
    bad(file, "/hidden_activation", "only gelu_pytorch_tanh is modelled");
  m.gelu = true;
  m.final_softcap = number_or(c, "logits_soft_cap", 30.0, file);
  if (m.final_softcap <= 0) bad(file, "/logits_soft_cap", "must be positive (transformers divides by it)");
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(m.hidden)));  // torch: the float, then bfloat16
  uint32_t u;
  std::memcpy(&u, &scale, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float rounded;
  std::memcpy(&rounded, &u, 4);
  m.embed_scale = rounded;
  m.rope_theta = rope_base(c, "", "rope_theta", 10000, file);
  const json* rp = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? &c["rope_parameters"] : nullptr;
  const double factor = rp && rp->contains("partial_rotary_factor") ? number_or(*rp, "partial_rotary_factor", 0.5, file)
                                                                    : number_or(c, "partial_rotary_factor", 0.5, file);
  if (factor != 0.5) bad(file, "/partial_rotary_factor", "only 0.5 is modelled (4.x chunks a head into 1 / factor parts)");
  m.rotary_dim = m.head_dim / 2;
  // attention_window_size, or its alias sliding_window (read by parse_config) where only that is given.
  m.sliding_window = positive_or(c, "attention_window_size", m.sliding_window > 0 ? m.sliding_window : 2048, file);
  m.lru_width = positive_or(c, "lru_width", m.hidden, file);
  m.lru_blocks = m.heads;
  if (m.lru_width % m.lru_blocks) bad(file, "/lru_width", "must be a multiple of num_attention_heads (the RG-LRU's gate blocks)");
  m.conv_kernel = positive_or(c, "conv1d_width", 4, file);
  std::vector<std::string> blocks = {"recurrent", "recurrent", "attention"};
  if (c.contains("block_types") && !c["block_types"].is_null()) {
    if (!c["block_types"].is_array() || c["block_types"].empty()) bad(file, "/block_types", "must be a non-empty list");
    blocks.clear();
    for (size_t i = 0; i < c["block_types"].size(); ++i) {
      const json& b = c["block_types"][i];
      if (!b.is_string() || (b != "recurrent" && b != "attention"))
        bad(file, "/block_types/" + std::to_string(i), "must be \"recurrent\" or \"attention\"");
      blocks.push_back(b.get<std::string>());
    }
  }
  for (int64_t l = 0; l < m.layers; ++l) {
    const bool recurrent = blocks[static_cast<size_t>(l) % blocks.size()] == "recurrent";
    m.recurrent_layers.push_back(recurrent);
    m.windows.push_back(recurrent ? 0 : m.sliding_window);
  }
  m.mlp_prefix = "mlp_block.";
  m.tensor_names = {{"temporal_pre_norm.", "input_layernorm."},
                    {"channel_pre_norm.", "post_attention_layernorm."},
                    {"temporal_block.q_proj.", "self_attn.q_proj."},
                    {"temporal_block.k_proj.", "self_attn.k_proj."},
                    {"temporal_block.v_proj.", "self_attn.v_proj."},
                    {"temporal_block.o_proj.", "self_attn.o_proj."},
                    {"model.final_norm.", "model.norm."}};
}

// ---- Multimodal models: the text decoder of text_config, text-only inputs. ----

// qwen2_vl and qwen2_5_vl (text_config, model_type qwen2_vl_text / qwen2_5_vl_text): qwen2's decoder
// (q/k/v with bias, o without; layer i slides iff use_sliding_window and i >= max_window_layers, whose
// default is 80 here, or by layer_types), with head_dim = hidden_size / num_attention_heads
// (Qwen2VLAttention and Qwen2_5_VLAttention compute it so in every release), and M-RoPE:
// mrope_section splits a head's head_dim / 2 frequencies into temporal, height and width sections, each
// rotated by its own position id. For text tokens the three ids are one position (the text model's
// default position_ids, and get_rope_index's text stretches), so every section rotates by it and the
// rope is the default one; the sections must cover the head exactly (4.x splits cos by
// mrope_section * 2, 5.24 on splits the frequencies by mrope_section: a mismatch raises in both).
void read_qwen2_vl(const json& c, const std::string& file, ModelConfig& m) {
  if (!c.contains("sliding_window") && bool_or(c, "use_sliding_window", false, file))
    m.sliding_window = 4096;  // the class default
  if (m.hidden % m.heads) bad(file, "/hidden_size", "must be a multiple of num_attention_heads");
  // The attention's head size is hidden_size / num_attention_heads; the rotary's is head_dim where set (5.x):
  // a config where they differ fails in transformers' forward, so it is refused here.
  if (c.contains("head_dim") && !c["head_dim"].is_null() && m.head_dim != m.hidden / m.heads)
    bad(file, "/head_dim",
        "is " + std::to_string(m.head_dim) + ", not hidden_size / num_attention_heads = " + std::to_string(m.hidden / m.heads));
  m.head_dim = m.hidden / m.heads;
  read_qwen(c, file, m, false, 80);
  const json* section = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (c.contains(key) && c[key].is_object() && c[key].contains("mrope_section")) section = &c[key]["mrope_section"];
  if (!section) bad(file, "/rope_scaling/mrope_section", "missing (M-RoPE's three sections of head_dim / 2 frequencies)");
  int64_t sum = 0;
  if (!section->is_array() || section->size() != 3) bad(file, "/rope_scaling/mrope_section", "must list three section sizes");
  for (const json& n : *section) {
    if (!n.is_number_integer() || n.get<int64_t>() <= 0)
      bad(file, "/rope_scaling/mrope_section", "sizes must be positive integers");
    sum += n.get<int64_t>();
  }
  if (sum != m.head_dim / 2)
    bad(file, "/rope_scaling/mrope_section",
        "sums to " + std::to_string(sum) + ", not head_dim / 2 = " + std::to_string(m.head_dim / 2));
}

// mlp_layer_types as exaone_moe and mellum write it: "dense" or "sparse" per layer (the MoE layers).
std::vector<bool> mlp_layer_types_of(const json& c, int64_t layers, const std::string& file) {
  const json& t = c["mlp_layer_types"];
  if (!t.is_array() || static_cast<int64_t>(t.size()) != layers)
    bad(file, "/mlp_layer_types", "must list \"dense\" or \"sparse\" per layer (" + std::to_string(layers) + ")");
  std::vector<bool> out;
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string v = t[i].is_string() ? t[i].get<std::string>() : "";
    if (v != "dense" && v != "sparse")
      bad(file, "/mlp_layer_types/" + std::to_string(i), "is \"" + v + "\" (expected dense or sparse)");
    out.push_back(v == "sparse");
  }
  return out;
}

// MellumConfig (5.13.1 on): qwen3_moe's attention (per-head q/k RMS norms before rope, attention_bias on
// q/k/v/o) with layer_types (default: every layer full) and one rope base per layer type from
// rope_parameters keyed by layer type (default: full 5e5, sliding 1e4; the config converts no flat or
// top-level rope_theta, and a layer type missing there fails in its rotary module: refused); the llama
// block; the feed-forward per mlp_layer_types (default: every layer sparse): dense the MLP of
// intermediate_size, sparse a softmax over num_local_experts (alias num_experts, default 64) experts, the
// top num_experts_per_tok, renormalised where norm_topk_prob (default true), no shared expert. The releases
// differ only in tensor-parallel plans and multi-token-prediction keys the forward ignores.
void read_mellum(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 1024;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) types.assign(static_cast<size_t>(m.layers), "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  const bool per_type = c.contains("rope_parameters") && !c["rope_parameters"].is_null();
  for (const std::string& t : types) {
    if (!per_type) {
      m.rope_thetas.push_back(t == "full_attention" ? 500000.0 : 10000.0);
      continue;
    }
    const json& rp = c["rope_parameters"];
    if (!rp.is_object() || !rp.contains(t) || !rp[t].is_object())
      bad(file, "/rope_parameters/" + t, "must be an object (mellum keys its rope by layer type)");
    if (number_or(rp[t], "partial_rotary_factor", 1.0, file) != 1.0)
      bad(file, "/rope_parameters/" + t + "/partial_rotary_factor", "only 1 is modelled");
    if (!rp[t].contains("rope_theta")) bad(file, "/rope_parameters/" + t + "/rope_theta", "is required");
    m.rope_thetas.push_back(number_or(rp[t], "rope_theta", 0, file));
  }
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Softmax;
  moe.experts =
      c.contains("num_local_experts") ? positive(c, "num_local_experts", file) : positive_or(c, "num_experts", 64, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 896, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  read_topk_moe(c, file, m, nullptr, false, [&] { return moe_layers_of(c, m.layers, 0, 1, nullptr, file); });
}

// FlintConfig (5.24.0 on): qwen3_moe's attention (per-head q/k RMS norms, attention_bias on q/k/v/o) with a
// learned sink per head, layer types (default: full on the first two layers, on every layer i % 4 == 1 and
// on the last; the others slide, window default 513), rope on the sliding layers only (the full layers are
// NoPE); a MoE where a layer is not in mlp_only_layers (default [0, 1]) and (i + 1) % decoder_sparse_step == 0:
// sigmoid scores of the router's logits, the top num_experts_per_tok, renormalised where norm_topk_prob
// (default true), plus an ungated shared expert of shared_expert_intermediate_size.
void read_flint(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.qk_norm = true;
  m.sinks = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 513;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back(i < 2 || i % 4 == 1 || i == m.layers - 1 ? "full_attention" : "sliding_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  for (int64_t w : m.windows) m.rope_layers.push_back(w > 0);
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Sigmoid;
  moe.experts = positive_or(c, "num_experts", 256, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 6, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 512, file);
  moe.shared_intermediate = positive_or(c, "shared_expert_intermediate_size", 1024, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  moe.router = "gate.";
  moe.shared = "shared_expert.";
  check_topk(moe, file);
  json dense = c;
  if (!c.contains("mlp_only_layers") || c["mlp_only_layers"].is_null()) dense["mlp_only_layers"] = json::array();
  moe.layers = moe_layers_of(dense, m.layers, 0, positive_or(c, "decoder_sparse_step", 1, file), "mlp_only_layers", file);
  if (!c.contains("mlp_only_layers") || c["mlp_only_layers"].is_null())
    for (int64_t i = 0; i < std::min<int64_t>(2, m.layers); ++i) moe.layers[static_cast<size_t>(i)] = false;
}

// Cohere2MoeConfig (5.13.1 on): cohere2's parallel block (one input norm per layer, x + attn(h) + mlp(h)),
// interleaved rope, logits times logit_scale (0.0625), tied by default, but head_dim from the config
// (default 128), and its norms RMSNorms (weight w) where rms_norm_eps is set, else LayerNorms without bias
// (layer_norm_eps, 1e-5; rms_norm_eps defaults to None). layer_types default: the first_k_dense_replace
// layers (a config key it pops, default 0) sliding unless (i + 1) % prefix_dense_sliding_window_pattern
// (default 1) == 0, the rest by sliding_window_pattern (default 4) counted from 0 again; mlp_layer_types
// default dense on those first layers, sparse after. Rope on the sliding layers, and on the dense layers
// too where prefix_dense_sliding_window_pattern is 1 (its force_rope). A dense layer is the MLP of
// prefix_dense_intermediate_size (None: intermediate_size); a sparse one routes by the top
// num_experts_per_tok of the router's logits (stacked experts of intermediate_size each), weighted by the
// softmax of the chosen logits (expert_selection_fn "softmax") or their sigmoids, renormalised where
// norm_topk_prob (default true; the softmax ignores it); num_shared_experts (default 0) shared experts are
// one SwiGLU of intermediate_size * num_shared_experts, combined with the routed output by
// shared_expert_combination_strategy: "sum", or "average" (the default): (routed + shared) / 2, which is
// MoeConfig::combined_scale 0.5. The three releases compute the same forward.
void read_cohere2_moe(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", true);
  read_head_dim_128(c, file, m);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.rope_interleaved = true;
  m.parallel_block = true;
  const bool rms = c.contains("rms_norm_eps") && !c["rms_norm_eps"].is_null();
  m.layer_norm = !rms;
  m.eps = rms ? number_or(c, "rms_norm_eps", 1e-6, file) : number_or(c, "layer_norm_eps", 1e-5, file);
  m.logit_scale = number_or(c, "logit_scale", 0.0625, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  const int64_t first = c.contains("first_k_dense_replace") && c["first_k_dense_replace"].is_number_integer()
                            ? c["first_k_dense_replace"].get<int64_t>()
                            : 0;
  if (first < 0 || first > m.layers) bad(file, "/first_k_dense_replace", "must be in [0, num_hidden_layers]");
  const int64_t prefix_pattern = positive_or(c, "prefix_dense_sliding_window_pattern", 1, file);
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t pattern = positive_or(c, "sliding_window_pattern", 4, file);
    for (int64_t i = 0; i < m.layers; ++i) {
      const bool slides = i < first ? (i + 1) % prefix_pattern != 0 : (i - first + 1) % pattern != 0;
      types.push_back(slides ? "sliding_attention" : "full_attention");
    }
  }
  m.windows = windows_of(types, m.sliding_window, file);
  MoeConfig& moe = m.moe;
  if (c.contains("mlp_layer_types") && !c["mlp_layer_types"].is_null()) moe.layers = mlp_layer_types_of(c, m.layers, file);
  else
    for (int64_t i = 0; i < m.layers; ++i) moe.layers.push_back(i >= first);
  for (int64_t i = 0; i < m.layers; ++i)
    m.rope_layers.push_back(types[static_cast<size_t>(i)] == "sliding_attention" ||
                            (!moe.layers[static_cast<size_t>(i)] && prefix_pattern == 1));
  const int64_t experts_inter = m.intermediate;  // intermediate_size: each expert's
  m.intermediate = positive_or(c, "prefix_dense_intermediate_size", experts_inter, file);
  moe.routing = MoeRouting::TopK;
  const std::string selection = c.contains("expert_selection_fn") && c["expert_selection_fn"].is_string()
                                    ? c["expert_selection_fn"].get<std::string>()
                                    : "softmax";
  if (selection != "softmax" && selection != "sigmoid")
    bad(file, "/expert_selection_fn", "is \"" + selection + "\" (expected softmax or sigmoid)");
  moe.score = selection == "softmax" ? MoeScore::TopKSoftmax : MoeScore::Sigmoid;
  moe.renormalize = selection == "sigmoid" && bool_or(c, "norm_topk_prob", true, file);
  moe.experts = positive_or(c, "num_experts", 8, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 2, file);
  moe.intermediate = experts_inter;
  const int64_t shared = c.contains("num_shared_experts") && c["num_shared_experts"].is_number_integer()
                             ? c["num_shared_experts"].get<int64_t>()
                             : 0;
  if (shared < 0) bad(file, "/num_shared_experts", "must be >= 0");
  moe.shared_intermediate = experts_inter * shared;
  const std::string strategy =
      c.contains("shared_expert_combination_strategy") && c["shared_expert_combination_strategy"].is_string()
          ? c["shared_expert_combination_strategy"].get<std::string>()
          : "average";
  if (strategy != "average" && strategy != "sum")
    bad(file, "/shared_expert_combination_strategy", "is \"" + strategy + "\" (expected average or sum)");
  moe.combined_scale = shared > 0 && strategy == "average" ? 0.5 : 1.0;
  moe.router = "gate.";
  moe.shared = "shared_experts.";
  moe.stacked_experts = true;
  check_topk(moe, file);
}

// AfmoeConfig (5.13.1 on): layer_types default sliding unless (i + 1) % global_attn_every_n_layers (4) == 0;
// rope on the sliding layers only; per-head q/k RMS norms before rope; each attention output element times
// its own sigmoid(gate_proj h) (ModelConfig::attn_gate_elementwise); gemma's sandwich with weight w
// (input_layernorm, post_attention_layernorm, pre_mlp_layernorm, post_mlp_layernorm); embeddings times
// sqrt(hidden_size) where mup_enabled. Layers from num_dense_layers (default 1) on are a MoE: sigmoid
// scores of router.gate, the top num_experts_per_tok chosen by score + expert_bias, renormalised (their
// sum + 1e-20), times route_scale; stacked experts of moe_intermediate_size; num_shared_experts (default
// 2) shared experts as one SwiGLU of moe_intermediate_size * num_shared_experts, ungated; the first
// layers the MLP of intermediate_size. head_dim default 128; untied by default. The three releases
// compute the same forward.
void read_afmoe(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  read_head_dim_128(c, file, m);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.attn_gate = m.attn_gate_elementwise = true;
  m.norm_placement = NormPlacement::Sandwich;
  if (bool_or(c, "mup_enabled", false, file)) m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
  m.tensor_names = {{"self_attn.gate_proj.", "self_attn.g_proj."},
                    {"pre_mlp_layernorm.", "pre_feedforward_layernorm."},
                    {"post_mlp_layernorm.", "post_feedforward_layernorm."},
                    {"mlp.expert_bias", "mlp.router.gate.e_score_correction_bias"}};
  if (!c.contains("sliding_window")) m.sliding_window = 1024;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    types = patterned_types(c, m.layers, positive_or(c, "global_attn_every_n_layers", 4, file), file);
  m.windows = windows_of(types, m.sliding_window, file);
  for (const std::string& t : types) m.rope_layers.push_back(t == "sliding_attention");
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = true;
  moe.renormalize = true;
  moe.experts = positive_or(c, "num_experts", 64, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 6, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 1408, file);
  const int64_t shared = c.contains("num_shared_experts") && c["num_shared_experts"].is_number_integer()
                             ? c["num_shared_experts"].get<int64_t>()
                             : 2;
  if (shared < 0) bad(file, "/num_shared_experts", "must be >= 0");
  moe.shared_intermediate = moe.intermediate * shared;
  moe.routed_scale = number_or(c, "route_scale", 1.0, file);
  moe.router = "router.gate.";
  moe.shared = "shared_experts.";
  moe.stacked_experts = true;
  check_topk(moe, file);
  const int64_t dense =
      c.contains("num_dense_layers") && c["num_dense_layers"].is_number_integer() ? c["num_dense_layers"].get<int64_t>() : 1;
  if (dense < 0) bad(file, "/num_dense_layers", "must be >= 0");
  for (int64_t i = 0; i < m.layers; ++i) moe.layers.push_back(i >= dense);
}

// ModernBertDecoderConfig (every pinned release): ModernBERT's layout in a causal decoder. Embeddings through a
// LayerNorm; layer 0's attention reads them directly (its attn_norm is an Identity), every other layer's through
// attn_norm; separate q/k/v projections (head size hidden_size / num_attention_heads, whatever head_dim says) and
// Wo, with biases where attention_bias; mlp_norm before the MLP, Wi [2I, H] whose first half is activated
// (act(input) * gate), then Wo, biases where mlp_bias; every norm a LayerNorm of norm_eps (default 1e-5), with a
// bias where norm_bias; the final norm; the prediction head (dense, classifier_bias; classifier_activation; norm)
// and the decoder (decoder_bias, default true) tied to the embeddings by default. Without layer_types, layer i is
// full iff i % global_attn_every_n_layers (default 3) == 0; a sliding layer's window is local_attention // 2 (the
// causal sliding mask: the query and window - 1 earlier keys). 4.x rotates every layer by global_rope_theta
// (default 160000; its local rotary module reads the same config.rope_theta), 5.x its sliding layers by
// local_rope_theta (default 10000): a model whose two bases differ on a sliding layer, or that gives them only
// in rope_parameters (which 4.x does not read), is refused, since the releases' forwards differ.
// ModernBERT's modules, shared by the decoder and the encoder (read_modernbert below).
void read_modernbert_layout(const json& c, const std::string& file, ModelConfig& m) {
  if (m.hidden % m.heads) bad(file, "/num_attention_heads", "must divide hidden_size (the head size is their quotient)");
  m.head_dim = m.hidden / m.heads;
  m.kv_heads = m.heads;
  if (c.contains("head_dim") && !c["head_dim"].is_null() && positive(c, "head_dim", file) != m.head_dim)
    bad(file, "/head_dim",
        "must be hidden_size / num_attention_heads: the attention's head size, which 5.x's rope reads "
        "head_dim for");
  if (m.head_dim % 2) bad(file, "/num_attention_heads", "hidden_size / num_attention_heads must be even (rope rotates pairs)");
  m.eps = number_or(c, "norm_eps", 1e-5, file);
  m.layer_norm = true;
  m.norm_bias = bool_or(c, "norm_bias", false, file);
  m.embed_norm = true;
  m.prediction_head = PredictionHead::ModernBert;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.mlp_bias = bool_or(c, "mlp_bias", false, file);
  m.fused_mlp = true;
  m.head_dense_bias = bool_or(c, "classifier_bias", false, file);
  m.lm_head_bias = bool_or(c, "decoder_bias", true, file);
  m.tied = bool_or(c, "tie_word_embeddings", true, file);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  const std::string act = c.value("hidden_activation", std::string("gelu"));
  if (act == "gelu") m.gelu = m.gelu_exact = true;
  else if (act == "gelu_pytorch_tanh") m.gelu = true;
  else if (act != "silu") bad(file, "/hidden_activation", "\"" + act + "\" is not modelled (gelu, gelu_pytorch_tanh, silu are)");
  if (c.value("classifier_activation", std::string("gelu")) != act)
    bad(file, "/classifier_activation", "differs from hidden_activation: the oracle applies one activation to both");
  if (c.contains("rope_parameters") && !c["rope_parameters"].is_null())
    bad(file, "/rope_parameters", "4.x reads global_rope_theta and local_rope_theta only: give the bases there");
  m.rope_theta = number_or(c, "global_rope_theta", 160000, file);
  m.tensor_names = {{"attn_norm.", "input_layernorm."},
                    {"mlp_norm.", "post_attention_layernorm."},
                    {"attn.Wqkv.", "self_attn.qkv_proj."},
                    {"attn.q_proj.", "self_attn.q_proj."},
                    {"attn.k_proj.", "self_attn.k_proj."},
                    {"attn.v_proj.", "self_attn.v_proj."},
                    {"attn.Wo.", "self_attn.o_proj."},
                    {"mlp.Wi.", "mlp.gate_up_proj."},
                    {"mlp.Wo.", "mlp.down_proj."},
                    {"model.embeddings.tok_embeddings.", "model.embed_tokens."},
                    {"model.embeddings.norm.", "model.embed_norm."},
                    {"model.final_norm.", "model.norm."},
                    {"decoder.", "lm_head."}};
}

void read_modernbert_decoder(const json& c, const std::string& file, ModelConfig& m) {
  read_modernbert_layout(c, file, m);
  m.tensor_names.insert(m.tensor_names.end() - 1, {"lm_head.", "head."});  // its head's name (the encoder's is head.)
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t every = positive_or(c, "global_attn_every_n_layers", 3, file);
    for (int64_t i = 0; i < m.layers; ++i) types.push_back(i % every ? "sliding_attention" : "full_attention");
  }
  const bool slides = std::find(types.begin(), types.end(), "sliding_attention") != types.end();
  m.sliding_window = 0;
  if (slides) {
    if (!c.contains("local_attention") || !c["local_attention"].is_number_integer() || c["local_attention"].get<int64_t>() < 2)
      bad(file, "/local_attention", "a sliding layer needs local_attention >= 2 (its window is local_attention // 2)");
    m.sliding_window = c["local_attention"].get<int64_t>() / 2;
  }
  m.windows = windows_of(types, m.sliding_window, file);
  if (slides && number_or(c, "local_rope_theta", 10000, file) != m.rope_theta)
    bad(file, "/local_rope_theta",
        "differs from global_rope_theta (or is absent: 5.x's default 10000): 4.x rotates every "
        "layer by global_rope_theta, 5.x the sliding ones by local_rope_theta");
}

// ModernBertConfig (every pinned release), read as ModernBertForMaskedLM: ModernBERT's modules (above) with one fused
// attn.Wqkv [3H, H] (rows [q; k; v]) and bidirectional attention. Layer i is global iff i % global_attn_every_n_layers
// (default 3) == 0 (4.x reads no layer_types: one that differs from the pattern is refused); a local layer sees the
// keys within local_attention // 2 on each side (encoder_mask_rule("modernbert"): 4.x's own window mask, 5.x's
// create_bidirectional_sliding_window_mask) and rotates by local_rope_theta (default 10000; global_rope_theta where
// null in 4.x, refused: 5.x reads no null), the global ones by global_rope_theta (default 160000). The head is
// head.dense / head.norm, then decoder.
void read_modernbert(const json& c, const std::string& file, ModelConfig& m) {
  read_modernbert_layout(c, file, m);
  m.fused_projections = true;
  m.bidirectional = true;
  const int64_t every = positive_or(c, "global_attn_every_n_layers", 3, file);
  std::vector<std::string> types, pattern;
  for (int64_t i = 0; i < m.layers; ++i) pattern.push_back(i % every ? "sliding_attention" : "full_attention");
  if (layer_types(c, m.layers, kSlidingOrFull, types, file) && types != pattern)
    bad(file, "/layer_types", "differs from global_attn_every_n_layers' pattern, the only one 4.x reads");
  const bool slides = std::find(pattern.begin(), pattern.end(), "sliding_attention") != pattern.end();
  int64_t reach = 0;
  if (slides) {
    if (!c.contains("local_attention") || !c["local_attention"].is_number_integer() || c["local_attention"].get<int64_t>() < 0)
      bad(file, "/local_attention", "a local layer needs local_attention >= 0 (its reach is local_attention // 2 each side)");
    reach = c["local_attention"].get<int64_t>() / 2;
  }
  m.sliding_window = reach;
  for (const std::string& t : pattern) {
    const bool local = t == "sliding_attention";
    m.windows.push_back(local ? reach + 1 : 0);
    m.reach_before.push_back(local ? reach : 0);
    m.reach_after.push_back(local ? reach : 0);
  }
  if (c.contains("local_rope_theta") && c["local_rope_theta"].is_null())
    bad(file, "/local_rope_theta", "null: 4.x then rotates by global_rope_theta, 5.x cannot read it");
  m.rope_local_theta = number_or(c, "local_rope_theta", 10000, file);
}

// UltrabertConfig (5.24.0 on), read as UltrabertForMaskedLM: llama's pre-norm layers (RMSNorm of rms_norm_eps, default
// 1e-6; q/k/v/o biases where attention_bias, the MLP's where mlp_bias; hidden_act, default silu) with bidirectional
// attention: without layer_types, layer i is full iff (i + 1) % 3 == 0; a sliding layer sees sliding_window (default
// 128) keys on each side (create_bidirectional_sliding_window_mask); rope per layer type from rope_parameters (default:
// sliding 10000, full 2560000). The head: gelu_tanh(head.linear2 gelu_tanh(head.linear1 h)) of prediction_head_size
// (default 768), then head.decoder (untied by default). The checkpoints' older encodings (attention_windows, a rope_theta
// per layer) are refused.
void read_ultrabert(const json& c, const std::string& file, ModelConfig& m) {
  m.bidirectional = true;
  m.tied = bool_or(c, "tie_word_embeddings", false, file);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-6, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.mlp_bias = bool_or(c, "mlp_bias", false, file);
  const std::string act = c.value("hidden_act", std::string("silu"));
  if (act == "gelu") m.gelu = m.gelu_exact = true;
  else if (act == "gelu_pytorch_tanh") m.gelu = true;
  else if (act != "silu") bad(file, "/hidden_act", "\"" + act + "\" is not modelled (silu, gelu, gelu_pytorch_tanh are)");
  for (const char* key : {"attention_windows", "rope_theta"})
    if (c.contains(key)) bad(file, std::string("/") + key, "an older encoding, not read: give layer_types and rope_parameters");
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object() && c["rope_parameters"].contains("rope_theta"))
    bad(file, "/rope_parameters", "one base for every layer type is not read: key it by layer type");
  if (!c.contains("sliding_window") || c["sliding_window"].is_null()) m.sliding_window = 128;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((i + 1) % 3 ? "sliding_attention" : "full_attention");
  for (const std::string& t : types) {
    const bool local = t == "sliding_attention";
    m.windows.push_back(local ? m.sliding_window + 1 : 0);
    m.reach_before.push_back(local ? m.sliding_window : 0);
    m.reach_after.push_back(local ? m.sliding_window : 0);
  }
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 2560000, file);
  m.rope_local_theta = rope_base(c, "sliding_attention", "rope_theta", 10000, file);
  m.prediction_head = PredictionHead::Ultrabert;
  m.head_size = positive_or(c, "prediction_head_size", 768, file);
  m.tensor_names = {{"head.decoder.", "lm_head."}};
}

// A config's per_layer_config, checked: {layer index below `layers`: {key: value}} with only the `allowed` keys; null
// where absent or null (embedding_gemma2's head sizes, neomme's windows).
json per_layer_config(const json& c, const std::string& file, int64_t layers, const std::vector<std::string>& allowed) {
  if (!c.contains("per_layer_config") || c["per_layer_config"].is_null()) return json();
  std::string names;
  for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
  const json& plc = c["per_layer_config"];
  if (!plc.is_object()) bad(file, "/per_layer_config", "must map layer indices to {" + names + "}");
  for (auto it = plc.begin(); it != plc.end(); ++it) {
    const std::string& key = it.key();
    const bool index = !key.empty() && key.size() < 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!index || std::stoll(key) >= layers || !it.value().is_object())
      bad(file, "/per_layer_config/" + key, "must be a layer index below num_hidden_layers with an object");
    for (auto f = it.value().begin(); f != it.value().end(); ++f)
      if (std::find(allowed.begin(), allowed.end(), f.key()) == allowed.end())
        bad(file, "/per_layer_config/" + key + "/" + f.key(), "is not modelled (" + names + ": only those are)");
  }
  return plc;
}
// EmbeddingGemma2TextConfig (5.24.0 on), read as EmbeddingGemma2TextModel (AutoModel): gemma4_text's layers (sandwich
// RMSNorms of weight w, weighted q/k norms and a weightless value norm before rope, unscaled scores, layer_scalar,
// sqrt(hidden) embedding scale, the gate/up/down MLP of hidden_activation, default gelu_pytorch_tanh) with bidirectional
// attention: a sliding layer sees sliding_window (default 512) keys on each side (create_bidirectional_sliding_window_mask,
// abs(q - kv) <= sliding_window). layer_types default from sliding_window_pattern (6: every 6th layer full), the last
// layer forced full; rope per layer type from rope_parameters (sliding 1e4, full 1e6, default rope only). A layer's head
// size and KV heads are per_layer_config's entry for it where the config has one, else (a config.json without it)
// global_head_dim (default 512) and num_global_key_value_heads (default 1) on the full layers; head_dim (default 256)
// and num_key_value_heads (default 2) elsewhere. Projection-only per-layer inputs of hidden_size_per_layer_input
// (default 512; ModelConfig::per_layer_input). Its output is embedding_projection of the final norm's hidden states,
// embedding_dim (default 768) values per position (ModelConfig::outputs): the pooling sentence embeddings use is not in
// the model's forward. The checkpoint keeps the text model's own names (embed_tokens., layers., norm., ple.).
void read_embedding_gemma2_text(const json& c, const std::string& file, ModelConfig& m) {
  m.bidirectional = true;
  m.norm_placement = NormPlacement::Sandwich;
  m.qk_norm = m.v_norm = m.layer_scalar = true;
  m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
  m.query_scale = 1.0;
  if (!c.contains("head_dim") || c["head_dim"].is_null()) m.head_dim = 256;
  if (!c.contains("num_key_value_heads") || c["num_key_value_heads"].is_null()) m.kv_heads = 2;
  if (m.heads % m.kv_heads) bad(file, "/num_key_value_heads", "must divide num_attention_heads");
  const std::string act = c.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act == "gelu") m.gelu = m.gelu_exact = true;
  else if (act == "gelu_pytorch_tanh") m.gelu = true;
  else if (act != "silu") bad(file, "/hidden_activation", "\"" + act + "\" is not modelled (gelu_pytorch_tanh, gelu, silu are)");
  m.outputs = positive_or(c, "embedding_dim", 768, file);
  m.per_layer_input = positive_or(c, "hidden_size_per_layer_input", 512, file);
  m.per_layer_projection_scale = std::pow(static_cast<double>(m.hidden), -0.5);  // a Python float, not a buffer
  m.per_layer_tensors = {"model.ple.", "ple_block."};
  if (!c.contains("sliding_window") || c["sliding_window"].is_null()) m.sliding_window = 512;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t pattern = positive_or(c, "sliding_window_pattern", 6, file);
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((i + 1) % pattern ? "sliding_attention" : "full_attention");
  }
  types.back() = "full_attention";
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters keys the rope by layer type");
  const json rp = c.contains("rope_parameters") && c["rope_parameters"].is_object()
                      ? c["rope_parameters"]
                      : json{{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                             {"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
  const json plc = per_layer_config(c, file, m.layers, {"head_dim", "num_key_value_heads"});
  const int64_t global_dim = positive_or(c, "global_head_dim", 512, file);
  const int64_t global_kv = positive_or(c, "num_global_key_value_heads", 1, file);
  std::map<std::string, int64_t> type_dim;  // the rotary module builds one inv_freq per layer type
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string& type = types[static_cast<size_t>(l)];
    const bool full = type == "full_attention";
    const std::string key = std::to_string(l);
    int64_t d = full && plc.is_null() ? global_dim : m.head_dim, kv = full && plc.is_null() ? global_kv : m.kv_heads;
    if (!plc.is_null() && plc.contains(key)) {
      d = positive_or(plc[key], "head_dim", m.head_dim, file + " (per_layer_config/" + key + ")");
      kv = positive_or(plc[key], "num_key_value_heads", m.kv_heads, file + " (per_layer_config/" + key + ")");
    }
    if (d % 2) bad(file, "/per_layer_config/" + key + "/head_dim", "must be even (rope rotates pairs)");
    if (m.heads % kv) bad(file, "/per_layer_config/" + key + "/num_key_value_heads", "must divide num_attention_heads");
    if (type_dim.count(type) && type_dim[type] != d)
      bad(file, "/per_layer_config/" + key + "/head_dim", "differs from another " + type + " layer's (one rope per type)");
    type_dim[type] = d;
    m.head_dims.push_back(d);
    m.layer_kv_heads.push_back(kv);
    if (!rp.contains(type) || !rp[type].is_object()) bad(file, "/rope_parameters/" + type, "is missing");
    if (rp[type].value("rope_type", std::string("default")) != "default")
      bad(file, "/rope_parameters/" + type + "/rope_type", "only the default rope is modelled");
    m.rope_thetas.push_back(number_or(rp[type], "rope_theta", 10000, file));
    const bool local = type == "sliding_attention";
    m.windows.push_back(local ? m.sliding_window + 1 : 0);
    m.reach_before.push_back(local ? m.sliding_window : 0);
    m.reach_after.push_back(local ? m.sliding_window : 0);
  }
  m.tensor_names = {{"embed_tokens.", "model.embed_tokens."},
                    {"layers.", "model.layers."},
                    {"norm.", "model.norm."},
                    {"ple.", "model.ple."},
                    {"embedding_projection.", "lm_head."}};
}

// OpenAIPrivacyFilterConfig (5.13.1 on), read as OpenAIPrivacyFilterForTokenClassification: gpt_oss's layers (RMSNorm
// of rms_norm_eps, default 1e-5; q/k/v/o biases where attention_bias, default true; a sink per head; the MoE on every
// layer: the biased router's top num_experts_per_tok logits softmaxed, clamped SwiGLU experts with biases) with
// bidirectional attention on every layer: each sees sliding_window (default 128) keys on either side
// (create_bidirectional_sliding_window_mask; the model has no full layer and reads no layer_types). Its own departures
// from gpt_oss: rope rotates interleaved pairs (2i, 2i + 1); q and k are each scaled by head_dim ** -0.25 (the scores'
// head_dim ** -0.5); the experts' gate and up are the halves of gate_up_proj (MoeConfig::gate_up_halves); the router's
// weights are divided by top_k and the MLP's output multiplied by num_experts_per_tok, which cancel. The rope without
// rope_parameters is YaRN (factor 32, beta_fast 32, beta_slow 1, truncate false, original 4096) at base 150000.
// swiglu_alpha and swiglu_limit other than 1.702 and 7.0 are refused: 5.13.1 hard-codes those. Its output is score
// (weight and bias) of the final norm's hidden states: num_labels values per position (id2label's count where given,
// else num_labels, else the 33 privacy labels).
void read_openai_privacy_filter(const json& c, const std::string& file, ModelConfig& m) {
  m.bidirectional = true;
  if (!c.contains("num_key_value_heads")) m.kv_heads = 2;  // null: num_attention_heads (parse_config)
  if (m.heads % m.kv_heads) bad(file, "/num_key_value_heads", "must divide num_attention_heads");
  if (!c.contains("head_dim")) m.head_dim = 64;  // null: hidden_size / num_attention_heads
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", true, file);
  m.sinks = true;
  m.rope_interleaved = true;
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters holds the rope");
  m.rope_theta = rope_base(c, "", "rope_theta", 150000, file);
  if (!c.contains("rope_parameters") || c["rope_parameters"].is_null()) {
    m.yarn = ModelConfig::Yarn{32, 32, 1, 4096, 0.1 * std::log(32.0) + 1.0, false};
  }
  if (!c.contains("sliding_window") || c["sliding_window"].is_null()) m.sliding_window = 128;
  for (int64_t l = 0; l < m.layers; ++l) {
    m.windows.push_back(m.sliding_window + 1);
    m.reach_before.push_back(m.sliding_window);
    m.reach_after.push_back(m.sliding_window);
  }
  m.moe.routing = MoeRouting::GptOss;
  m.moe.gate_up_halves = true;
  m.moe.experts = positive_or(c, "num_local_experts", 128, file);
  m.moe.top_k = positive_or(c, "num_experts_per_tok", 4, file);
  if (m.moe.top_k > m.moe.experts) bad(file, "/num_experts_per_tok", "exceeds num_local_experts");
  m.moe.intermediate = m.intermediate;
  m.moe.layers.assign(static_cast<size_t>(m.layers), true);
  if (number_or(c, "swiglu_alpha", 1.702, file) != 1.702 || number_or(c, "swiglu_limit", 7.0, file) != 7.0)
    bad(file, "/swiglu_alpha", "only 1.702 and swiglu_limit 7.0 are one model across the releases (5.13.1 hard-codes them)");
  if (c.contains("id2label") && c["id2label"].is_object() && !c["id2label"].empty())
    m.outputs = static_cast<int64_t>(c["id2label"].size());
  else m.outputs = positive_or(c, "num_labels", 33, file);
  m.lm_head_bias = true;
  m.tensor_names = {{"score.", "lm_head."}};
}

// CohereCompassTextConfig (5.24.0 on; the text decoder of cohere_compass, and CohereCompassForCausalLM alone): cohere2's
// layers (LayerNorm without bias, the parallel block, head_dim hidden / heads whatever the config says) with its own
// defaults and rope. layer_types default every layer full; rope_parameters is keyed by layer type, an entry's
// rope_theta that type's base or the entry null (its layers NoPE): the rotary module reads one entry per layer type
// present (a flat dict or a missing type fails there). Its M-RoPE sections choose among three equal position rows
// on text-only input, so the rope is the default one, rotating halves (qwen3's apply_rotary_pos_emb), not
// cohere2's pairs. logit_scale defaults to none (1).
void read_cohere_compass_text(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", true);
  m.head_dim = m.hidden / m.heads;
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "layer_norm_eps", 1e-5, file);
  m.layer_norm = m.parallel_block = true;
  m.logit_scale = number_or(c, "logit_scale", 1.0, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (!c.contains("sliding_window")) m.sliding_window = 4096;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) types.assign(static_cast<size_t>(m.layers), "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  // 5.24.0 and 5.25.0 set rope_parameters from a rope_scaling key (its setter), null included.
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters keys the rope by layer type");
  if (!c.contains("rope_parameters") || !c["rope_parameters"].is_object())
    bad(file, "/rope_parameters", "must key a rope (or null) by each layer type");
  const json& rp = c["rope_parameters"];
  for (size_t i = 0; i < types.size(); ++i) {
    if (!rp.contains(types[i]))
      bad(file, "/rope_parameters", "has no " + types[i] + " entry (layer " + std::to_string(i) + " is one)");
    const json& r = rp[types[i]];
    if (!r.is_null() && !r.is_object()) bad(file, "/rope_parameters/" + types[i], "must be an object or null");
    m.rope_layers.push_back(!r.is_null());
    // A NoPE layer's base is never used: 10000 only so that every layer has one.
    const double base = r.is_null() ? 10000 : number_or(r, "rope_theta", number_or(c, "rope_theta", 0, file), file);
    if (base <= 0) bad(file, "/rope_parameters/" + types[i] + "/rope_theta", "must be a positive number");
    m.rope_thetas.push_back(base);
  }
}

// MuseGlimmerTextConfig (5.24.0 on; the text decoder of muse_glimmer): gemma2's layers (gemma's (1 + w) sandwich
// norms, the gate/up/down MLP of hidden_activation, default silu) with afmoe's attention: weightless per-head q/k RMS
// norms before rope, q then times qk_scale_factor (3.87; folded into the scores' scale head_dim ** -0.5), each
// attention output element times sigmoid(gate_proj h). A weightless RMS norm of the embeddings (no sqrt(hidden)
// factor); the post-attention and post-MLP norms' epsilon post_norm_eps (1e-8), the others' rms_norm_eps (1e-5); the
// final norm of weight w. Layer i is full iff (layers - 1 - i) % 4 == 0 by default; layer_rope_theta 0 is a NoPE
// layer (default: those full layers), any other value rotates with the one global base. Logits times
// output_multiplier, then the tanh soft-cap final_logit_softcapping (20). head_dim default 128; untied by default.
void read_muse_glimmer_text(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  read_head_dim_128(c, file, m);
  m.query_scale *= number_or(c, "qk_scale_factor", 3.87, file);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.post_eps = number_or(c, "post_norm_eps", 1e-8, file);
  m.gemma_norm = m.final_norm_plain = m.embed_rms_norm = true;
  m.norm_placement = NormPlacement::Sandwich;
  m.qk_norm = m.qk_norm_weightless = true;
  m.attn_gate = m.attn_gate_elementwise = true;
  m.tensor_names = {{"self_attn.gate_proj.", "self_attn.g_proj."}};
  const std::string act = c.value("hidden_activation", std::string("silu"));
  if (act != "silu" && act != "gelu_pytorch_tanh") bad(file, "/hidden_activation", "\"" + act + "\" is not modelled");
  m.gelu = act == "gelu_pytorch_tanh";
  m.logit_scale = number_or(c, "output_multiplier", 0.19611613513818404, file);
  m.final_softcap = number_or(c, "final_logit_softcapping", 20.0, file);
  if (m.final_softcap <= 0) bad(file, "/final_logit_softcapping", "must be positive (the class divides by it)");
  // 5.24.0 and 5.25.0 set rope_parameters from a rope_scaling key (its setter), null included.
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters holds the rope");
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  if (!c.contains("sliding_window")) m.sliding_window = 2048;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((m.layers - 1 - i) % 4 ? "sliding_attention" : "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  if (c.contains("layer_rope_theta") && !c["layer_rope_theta"].is_null()) {
    const json& t = c["layer_rope_theta"];
    if (!t.is_array() || static_cast<int64_t>(t.size()) != m.layers)
      bad(file, "/layer_rope_theta", "must list one base per layer (" + std::to_string(m.layers) + ")");
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_number() || t[i].get<double>() < 0) bad(file, "/layer_rope_theta/" + std::to_string(i), "must be >= 0");
      m.rope_layers.push_back(t[i].get<double>() != 0);
    }
  } else {
    for (int64_t i = 0; i < m.layers; ++i) m.rope_layers.push_back((m.layers - 1 - i) % 4 != 0);
  }
}

// MuseSparkTextConfig (5.24.0 on; the text decoder of muse_spark): muse_glimmer_text's decoder (its reader, above)
// under its own defaults (qk_scale_factor 5.4730064863875, output_multiplier 0.1767766952966369, head_dim 64, rope
// base 5e5, the MLP's activation hidden_act: hidden_activation is no field of it) with these differences: a weightless
// RMS norm (rms_norm_eps) of each head's attention output before the gate (o_norm); a post-attention norm without
// weight and a post-MLP norm that scales by (1 + w) before it normalises (both post_norm_eps); each residual add gated
// per hidden dimension (MuseSparkResidualGate: alpha * x + beta * block, beta = sigmoid(g / residual_gate_temperature),
// default 0.3, alpha = sqrt(max(sigmoid(-g / T) * (1 + beta), 1e-3))). The feed-forward per mlp_layer_types (default
// every layer "sparse"): "dense" the MLP of intermediate_size, "sparse" a MoE whose router (mlp.gate) scales its
// logits by output_multiplier before their sigmoid, chooses the top num_experts_per_tok (8) by score +
// e_score_correction_bias, divides the chosen scores by their sum + 1e-15 and scales them by routed_scaling_factor (1);
// its num_local_experts (256) stacked experts of moe_intermediate_size (4096) run at moe_hidden_size (4096): their
// input pre_expert_norm(pre_expert_proj h) ((1 + w), rms_norm_eps), each expert's output normed by the shared
// experts.post_expert_norm (input-scaled, post_norm_eps) before its weight, the sum through post_expert_proj; no shared
// expert. Only SiLU is modelled (the experts' activation is hidden_act too). 5.24.0 and 5.25.0 compute the same
// forward (5.25.0 renames the norms' eps attribute).
void read_muse_spark_text(const json& c, const std::string& file, ModelConfig& m) {
  if (c.contains("hidden_activation")) bad(file, "/hidden_activation", "is no field of muse_spark_text (hidden_act is)");
  const std::string act = c.value("hidden_act", std::string("silu"));
  if (act != "silu") bad(file, "/hidden_act", "\"" + act + "\" is not modelled (silu is)");
  json g = c;  // muse_glimmer_text's keys under muse_spark_text's defaults
  g["hidden_activation"] = act;
  for (const auto& [key, value] : {std::pair<const char*, json>{"qk_scale_factor", 5.4730064863875},
                                   {"output_multiplier", 0.1767766952966369},
                                   {"head_dim", 64}})
    if (!c.contains(key) || c[key].is_null()) g[key] = value;
  if (!c.contains("rope_parameters") || c["rope_parameters"].is_null())
    g["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  read_muse_glimmer_text(g, file, m);
  m.attn_out_norm = m.post_attn_norm_weightless = m.post_ff_norm_input_scaled = true;
  m.residual_gate_temperature = number_or(c, "residual_gate_temperature", 0.3, file);
  if (m.residual_gate_temperature <= 0) bad(file, "/residual_gate_temperature", "must be positive (the gate divides by it)");
  MoeConfig& moe = m.moe;
  moe.layers = c.contains("mlp_layer_types") && !c["mlp_layer_types"].is_null() ? mlp_layer_types_of(c, m.layers, file)
                                                                                : std::vector<bool>(m.layers, true);
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = moe.renormalize = moe.stacked_experts = moe.expert_out_norm = true;
  moe.renormalize_eps = 1e-15;
  moe.router = "gate.";
  moe.router_scale = m.logit_scale;  // output_multiplier, read above
  moe.routed_scale = number_or(c, "routed_scaling_factor", 1.0, file);
  moe.experts = positive_or(c, "num_local_experts", 256, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  if (moe.top_k > moe.experts) bad(file, "/num_experts_per_tok", "exceeds num_local_experts");
  moe.intermediate = positive_or(c, "moe_intermediate_size", 4096, file);
  moe.pooled = positive_or(c, "moe_hidden_size", 4096, file);
}

// Kolibri1Config (5.24.0 on): layer_types default full on every fifth layer ((i + 1) % 5 == 0), sliding
// otherwise (window 513 where the key is absent); rope on the sliding layers only (NoPE full layers), on every
// layer where sliding_window is null (then every layer is full); per-head q/k RMS norms before rope; a sandwich
// with weight w under its own names (post_self_attn_layernorm after the attention, post_attention_layernorm
// before the MoE, post_mlp_layernorm after it). Every layer is a MoE (no dense MLP, no intermediate_size): the
// top num_experts_per_tok (6) of the router's logits + e_score_correction_bias are chosen (the logits, not
// their sigmoids: MoeConfig::select_logits), weighted by the sigmoids of their logits, renormalised where
// norm_topk_prob (default false); num_local_experts (num_experts, 384) stacked experts of
// moe_intermediate_size (512) and an ungated shared expert of shared_expert_intermediate_size (512) added.
// head_dim default 128; untied by default. 5.24.0 and 5.25.0 compute the same forward.
void read_kolibri1(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  read_head_dim_128(c, file, m);
  m.rope_theta = rope_base(c, "full_attention", "rope_theta", 10000, file);
  m.qk_norm = true;
  m.norm_placement = NormPlacement::Sandwich;
  m.tensor_names = {{"post_self_attn_layernorm.", "post_attention_layernorm."},
                    {"post_attention_layernorm.", "pre_feedforward_layernorm."},
                    {"post_mlp_layernorm.", "post_feedforward_layernorm."}};
  if (!c.contains("sliding_window")) m.sliding_window = 513;
  const std::vector<std::string> types = patterned_types(c, m.layers, 5, file);
  m.windows = windows_of(types, m.sliding_window, file);
  for (int64_t w : m.windows) m.rope_layers.push_back(w > 0 || m.sliding_window == 0);
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = moe.select_logits = true;
  moe.renormalize = bool_or(c, "norm_topk_prob", false, file);
  moe.experts = positive_or(c, "num_local_experts", positive_or(c, "num_experts", 384, file), file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 6, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 512, file);
  moe.shared_intermediate = positive_or(c, "shared_expert_intermediate_size", 512, file);
  moe.router = "gate.";
  moe.shared = "shared_experts.";
  moe.stacked_experts = true;
  check_topk(moe, file);
  moe.layers.assign(static_cast<size_t>(m.layers), true);
}

// LagunaConfig (5.13.1 on): layer_types default every layer full (window 512 where the key is absent); rope
// everywhere, rope_parameters keyed by layer type (default: full base 5e5 with partial_rotary_factor 0.5, sliding
// base 1e4 with 1.0), each type's factor rotating the first int(head_dim * factor) entries of a head
// (ModelConfig::rotary_dims); per-head q/k RMS norms before rope; each head's output times softplus(g_proj h), or
// each output element's where gating is neither true nor "per-head" (ModelConfig::attn_gate_softplus); a head
// count per layer (num_attention_heads_per_layer) is read only where every layer has num_attention_heads. A
// sparse layer (mlp_layer_types, default dense first, sparse after) routes by the router's logits soft-capped
// by moe_router_logit_softcapping (0: none), their sigmoids chosen by score + e_score_correction_bias,
// always renormalised, times moe_routed_scaling_factor, over num_experts stacked experts of
// moe_intermediate_size, plus an ungated shared expert of shared_expert_intermediate_size; a dense one is the
// MLP of intermediate_size. moe_apply_router_weight_on_input true is refused, as transformers refuses it.
// head_dim default 128; untied by default. The three releases compute the same forward.
void read_laguna(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  read_head_dim_128(c, file, m);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.attn_gate = m.attn_gate_softplus = true;
  const json gating = c.contains("gating") && !c["gating"].is_null() ? c["gating"] : json(true);
  m.attn_gate_elementwise = !(gating == json(true) || gating == json("per-head"));
  if (c.contains("num_attention_heads_per_layer") && !c["num_attention_heads_per_layer"].is_null()) {
    const json& per = c["num_attention_heads_per_layer"];
    if (!per.is_array() || static_cast<int64_t>(per.size()) != m.layers)
      bad(file, "/num_attention_heads_per_layer", "must list one head count per layer");
    for (const json& h : per)
      if (h != json(m.heads)) bad(file, "/num_attention_heads_per_layer", "a head count per layer is not modelled");
  }
  if (bool_or(c, "moe_apply_router_weight_on_input", false, file))
    bad(file, "/moe_apply_router_weight_on_input", "true is not supported (transformers refuses it too)");
  if (!c.contains("sliding_window")) m.sliding_window = 512;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) types.assign(static_cast<size_t>(m.layers), "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  const bool keyed = c.contains("rope_parameters") && c["rope_parameters"].is_object();
  for (const std::string& t : types) {
    const bool full = t == "full_attention";
    double theta = full ? 500000.0 : 10000.0, factor = full ? 0.5 : 1.0;
    if (keyed) {
      const json& rp = c["rope_parameters"];
      if (!rp.contains(t) || !rp[t].is_object()) bad(file, "/rope_parameters", "has no " + t + " entry (keyed by layer type)");
      theta = number_or(rp[t], "rope_theta", 0, file);
      if (theta <= 0) bad(file, "/rope_parameters/" + t + "/rope_theta", "must be a positive number");
      factor = number_or(rp[t], "partial_rotary_factor", 1.0, file);
    }
    const int64_t rd = static_cast<int64_t>(static_cast<double>(m.head_dim) * factor);
    if (rd <= 0 || rd > m.head_dim || rd % 2)
      bad(file, "/rope_parameters/" + t + "/partial_rotary_factor", "must give an even rotary dimension in (0, head_dim]");
    m.rope_thetas.push_back(theta);
    m.rotary_dims.push_back(rd);
  }
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = moe.renormalize = true;
  moe.router_softcap = number_or(c, "moe_router_logit_softcapping", 0, file);
  if (moe.router_softcap < 0) bad(file, "/moe_router_logit_softcapping", "must be >= 0");
  moe.routed_scale = number_or(c, "moe_routed_scaling_factor", 1.0, file);
  moe.experts = positive_or(c, "num_experts", 256, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 512, file);
  moe.shared_intermediate = positive_or(c, "shared_expert_intermediate_size", 512, file);
  read_topk_moe(c, file, m, "shared_experts.", true, [&] { return moe_layers_of(c, m.layers, 1, 1, nullptr, file); });
}

// Step3p7TextConfig (model_type step3p5; 5.24.0 on), the text decoder of step3p7, read from its text_config (the
// class has no causal LM of its own). Layers as step3p5 builds them: gemma's (1 + w) RMSNorms everywhere (rms_norm_eps,
// default 1e-5; the per-head q/k norms before rope too), llama's pre-norm block, each head's output times
// sigmoid(g_proj h) (gating true or "per-head", the default; any other value breaks the class's own broadcast: refused),
// scores times query_pre_attn_scalar ** -0.5 (default head_dim, default 128), q/k/v/o biases where attention_bias. The
// sliding layers (layer_types, default every layer full; window sliding_window) have num_sliding_attention_heads query
// heads (legacy attention_other_setting.num_attention_heads; default num_attention_heads), the class's per_layer_config
// where the config carries one (a saved config does). Rope per layer type: rope_parameters keyed by type where it has
// every type present, else rebuilt from rope_theta (one base, or one per layer, default 1e4) and
// partial_rotary_factors (one per layer), each type taking its first layer's entry; a factor rotates the first
// int(head_dim * factor) entries of a head. mlp_layer_types (legacy moe_layers_enum; default dense on layers 0-2):
// a sparse layer is dots1's sigmoid routing without groups (n_routed_experts stacked experts of
// moe_intermediate_size, the top num_experts_per_tok by score + e_score_correction_bias, always renormalised, times
// moe_router_scaling_factor) plus an ungated shared expert of share_expert_dim; a dense one the MLP of
// intermediate_size. The SwiGLU bounds: swiglu_limits[l] on the routed experts, swiglu_limits_shared[l] on the shared
// expert and on a dense layer's MLP (0 or null: none). Lists padded with num_nextn_predict_layers trailing
// multi-token-prediction entries are cut to the decoder's layers, as the config does. The head: untied unless the
// outer config says tie_word_embeddings (the text config's own is not read by the class: refused where true).
// 5.24.0 and 5.25.0 compute the same forward (5.25.0 skips a clamp where 5.24.0 clamps at infinity).
void read_step3p7(const json& text, const std::string& file, ModelConfig& m) {
  json c = text;
  if (bool_or(c, "tie_word_embeddings", false, file))
    bad(file, "/tie_word_embeddings", "step3p7 ties its head by the outer config's tie_word_embeddings only");
  if (bool_or(c, "use_bidirectional_attention", false, file)) bad(file, "/use_bidirectional_attention", "true is not modelled");
  if (bool_or(c, "mlp_bias", false, file)) bad(file, "/mlp_bias", "true is not modelled");
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    bad(file, "/rope_scaling", "is merged into the full layers' rope by the class: not modelled");
  const json gating = c.contains("gating") && !c["gating"].is_null() ? c["gating"] : json(true);
  if (!(gating == json(true) || gating == json("per-head")))
    bad(file, "/gating", gating.dump() + " is not modelled (true or \"per-head\": one gate per head)");
  // Aliases (the class's attribute_map): a second name for a field, read where the field itself is absent.
  for (const auto& [alias, key] :
       std::vector<std::pair<const char*, const char*>>{{"num_attention_groups", "num_key_value_heads"},
                                                        {"moe_num_experts", "n_routed_experts"},
                                                        {"num_local_experts", "n_routed_experts"},
                                                        {"moe_top_k", "num_experts_per_tok"},
                                                        {"share_expert_dims", "share_expert_dim"}}) {
    if (!c.contains(alias) || c[alias].is_null()) continue;
    if (c.contains(key) && !c[key].is_null() && c[key] != c[alias])
      bad(file, std::string("/") + alias, std::string("differs from ") + key + ", which it names");
    c[key] = c[alias];
  }
  // The multi-token-prediction layers' trailing entries, cut as the config cuts them.
  const int64_t mtp = c.contains("num_nextn_predict_layers") && c["num_nextn_predict_layers"].is_number_integer()
                          ? c["num_nextn_predict_layers"].get<int64_t>()
                          : 0;
  if (mtp < 0) bad(file, "/num_nextn_predict_layers", "must be >= 0");
  for (const char* key :
       {"layer_types", "mlp_layer_types", "swiglu_limits", "swiglu_limits_shared", "rope_theta", "partial_rotary_factors"})
    if (mtp > 0 && c.contains(key) && c[key].is_array() && static_cast<int64_t>(c[key].size()) == m.layers + mtp)
      c[key].erase(c[key].begin() + m.layers, c[key].end());
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  read_head_dim_128(c, file, m);
  m.query_scale = std::pow(number_or(c, "query_pre_attn_scalar", static_cast<double>(m.head_dim), file), -0.5);
  m.kv_heads = positive_or(c, "num_key_value_heads", 8, file);
  m.gemma_norm = true;
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.attn_gate = true;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) types.assign(static_cast<size_t>(m.layers), "full_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  // Query heads per layer: per_layer_config's where the config has one, else num_sliding_attention_heads on sliding layers.
  int64_t sliding_heads = m.heads;
  if (c.contains("num_sliding_attention_heads") && !c["num_sliding_attention_heads"].is_null())
    sliding_heads = positive(c, "num_sliding_attention_heads", file);
  else if (c.contains("attention_other_setting") && c["attention_other_setting"].is_object())
    sliding_heads = positive_or(c["attention_other_setting"], "num_attention_heads", m.heads, file);
  const bool per_layer = c.contains("per_layer_config") && !c["per_layer_config"].is_null();
  if (per_layer && !c["per_layer_config"].is_object()) bad(file, "/per_layer_config", "must map layer indices to overrides");
  for (int64_t l = 0; l < m.layers; ++l) {
    int64_t h = types[static_cast<size_t>(l)] == "sliding_attention" ? sliding_heads : m.heads;
    if (per_layer) {
      const std::string at = std::to_string(l);
      const json& p = c["per_layer_config"];
      h = m.heads;
      if (p.contains(at)) {
        if (!p[at].is_object()) bad(file, "/per_layer_config/" + at, "must be an object");
        for (const auto& item : p[at].items())
          if (item.key() != "num_attention_heads")
            bad(file, "/per_layer_config/" + at + "/" + item.key(), "is not modelled (num_attention_heads is)");
        h = positive_or(p[at], "num_attention_heads", m.heads, file);
      }
    }
    if (h % m.kv_heads)
      bad(file, "/num_sliding_attention_heads", "a layer's head count must be a multiple of num_key_value_heads");
    m.layer_heads.push_back(h);
  }
  // Rope per layer type, each type its first layer's entry.
  const json rp = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : json::object();
  bool keyed = true;
  for (const std::string& t : types) keyed = keyed && rp.contains(t) && rp[t].is_object();
  if (!rp.empty() && !keyed)
    bad(file, "/rope_parameters", "must key every layer type present (the class rebuilds any other from rope_theta)");
  auto per_layer_number = [&](const char* key, size_t first, double fallback) {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    if (c[key].is_number()) return c[key].get<double>();
    if (!c[key].is_array() || static_cast<int64_t>(c[key].size()) < m.layers || !c[key][first].is_number())
      bad(file, std::string("/") + key, "must be a number or list one per layer");
    return c[key][first].get<double>();
  };
  for (const std::string& t : types) {
    const size_t first = static_cast<size_t>(std::find(types.begin(), types.end(), t) - types.begin());
    const double theta = keyed ? number_or(rp[t], "rope_theta", 0, file) : per_layer_number("rope_theta", first, 10000);
    const double factor =
        keyed ? number_or(rp[t], "partial_rotary_factor", 1.0, file) : per_layer_number("partial_rotary_factors", first, 1.0);
    if (theta <= 0) bad(file, "/rope_parameters/" + t + "/rope_theta", "must be a positive number");
    const int64_t rd = static_cast<int64_t>(static_cast<double>(m.head_dim) * factor);
    if (rd <= 0 || rd > m.head_dim || rd % 2)
      bad(file, "/partial_rotary_factors", "must give an even rotary dimension in (0, head_dim]");
    m.rope_thetas.push_back(theta);
    m.rotary_dims.push_back(rd);
  }
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = moe.renormalize = true;
  moe.routed_scale = number_or(c, "moe_router_scaling_factor", 1.0, file);
  moe.experts = positive_or(c, "n_routed_experts", 288, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 1280, file);
  moe.shared_intermediate = positive_or(c, "share_expert_dim", 1280, file);
  read_topk_moe(c, file, m, "shared_experts.", true, [&] {
    if (!c.contains("moe_layers_enum") || c["moe_layers_enum"].is_null()) return moe_layers_of(c, m.layers, 3, 1, nullptr, file);
    // A comma-separated string or a list of the MoE layers' indices.
    const json& e = c["moe_layers_enum"];
    std::vector<json> items;
    if (e.is_string()) {
      std::stringstream in(e.get<std::string>());
      for (std::string part; std::getline(in, part, ',');)
        if (part.find_first_not_of(" \t") != std::string::npos) items.emplace_back(std::stoll(part));
    } else if (e.is_array()) {
      items.assign(e.begin(), e.end());
    } else {
      bad(file, "/moe_layers_enum", "must be a comma-separated string or a list of layer indices");
    }
    std::vector<bool> out(static_cast<size_t>(m.layers), false);
    for (const json& i : items) {
      if (!i.is_number_integer()) bad(file, "/moe_layers_enum", "must list layer indices");
      if (i.get<int64_t>() >= 0 && i.get<int64_t>() < m.layers) out[static_cast<size_t>(i.get<int64_t>())] = true;
    }
    return out;
  });
  // The SwiGLU bounds per layer (0 or null: none).
  auto limits = [&](const char* key) {
    std::vector<double> out;
    if (!c.contains(key) || c[key].is_null() || (c[key].is_array() && c[key].empty())) return out;
    if (!c[key].is_array() || static_cast<int64_t>(c[key].size()) < m.layers)
      bad(file, std::string("/") + key, "must list a bound (or 0, or null) per layer");
    for (int64_t l = 0; l < m.layers; ++l) {
      const json& v = c[key][static_cast<size_t>(l)];
      if (!v.is_null() && (!v.is_number() || v.get<double>() < 0))
        bad(file, std::string("/") + key + "/" + std::to_string(l), "must be a bound >= 0 or null");
      out.push_back(v.is_null() ? 0.0 : v.get<double>());
    }
    if (std::all_of(out.begin(), out.end(), [](double v) { return v == 0; })) out.clear();
    return out;
  };
  moe.expert_limits = limits("swiglu_limits");
  m.mlp_limits = limits("swiglu_limits_shared");
}

// ErgoConfig (5.25.0 on): sandwich norms of weight w (rms_norm_eps, default 1e-12) with a learned residual gate after
// each post norm (ModelConfig::residual_gates); one fused qkv_proj (rows [q; k; v], head size hidden_size /
// num_attention_heads: a head_dim that differs is refused, the rotary would read it), per-head q/k norms before the
// rope, which rotates interleaved pairs; layer_types default sliding unless (i + 1) % global_attention_every_n_layers
// (4) == 0, window sliding_window (alias local_attention_window, default 512). rope_parameters: a flat one (or
// rope_theta, default 1e6) is the sliding layers' and the full layers are NoPE; one keyed by layer type gives each
// type a base or null (NoPE). mlp_layer_types default dense on the first num_dense_blocks (1) layers: a dense layer
// is down(relu2(up h)) of first_dense_intermediate_size, a sparse one dots1's sigmoid routing without groups (always
// renormalised, times moe_routed_scaling_factor, default sqrt(8)) over num_experts relu2 experts without a gate
// (experts.up_proj [E, H, I], x @ W), each expert's output RMS-normed by its own post_expert_norm row before its
// weight, plus a relu2 shared expert normed by its own norm. The router and the head take float32 operands, which a
// float64 forward reads as float64. ErgoForCausalLM never ties its head (tie_word_embeddings true is refused);
// global_attention_scale (q and k of the full layers times its square root) is not modelled (refused).
void read_ergo(const json& c, const std::string& file, ModelConfig& m) {
  if (m.hidden % m.heads) bad(file, "/num_attention_heads", "must divide hidden_size (the head size is their quotient)");
  if (c.contains("head_dim") && !c["head_dim"].is_null() && m.head_dim != m.hidden / m.heads)
    bad(file, "/head_dim", "must be hidden_size / num_attention_heads: the attention's head size, which the rotary reads");
  m.head_dim = m.hidden / m.heads;
  if (m.head_dim % 2) bad(file, "/num_attention_heads", "the head size must be even (rope rotates pairs)");
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.eps = number_or(c, "rms_norm_eps", 1e-12, file);
  if (bool_or(c, "tie_word_embeddings", false, file))
    bad(file, "/tie_word_embeddings", "true: ErgoForCausalLM never ties its head");
  if (c.contains("global_attention_scale") && !c["global_attention_scale"].is_null())
    bad(file, "/global_attention_scale", "is not modelled (the full layers' q and k times its square root)");
  m.qk_norm = m.fused_projections = m.rope_interleaved = true;
  m.norm_placement = NormPlacement::Sandwich;
  m.residual_gates = m.mlp_ungated = m.relu2 = true;
  m.intermediate = positive_or(c, "first_dense_intermediate_size", 32768, file);
  if (!c.contains("sliding_window") || c["sliding_window"].is_null())
    m.sliding_window = positive_or(c, "local_attention_window", 512, file);
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    const int64_t every = positive_or(c, "global_attention_every_n_layers", 4, file);
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((i + 1) % every ? "sliding_attention" : "full_attention");
  }
  m.windows = windows_of(types, m.sliding_window, file);
  const json rp = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : json::object();
  const bool keyed = !rp.empty() && !rp.contains("rope_type") && !rp.contains("rope_theta");
  for (const std::string& t : types) {
    json r = keyed ? (rp.contains(t) ? rp[t] : json()) : t == "sliding_attention" ? rp : json();
    if (!keyed && t == "sliding_attention" && !r.contains("rope_theta")) r["rope_theta"] = number_or(c, "rope_theta", 1e6, file);
    if (!r.is_null() && !r.is_object()) bad(file, "/rope_parameters/" + t, "must be an object or null");
    m.rope_layers.push_back(!r.is_null());
    const double base = r.is_null() ? 10000 : number_or(r, "rope_theta", 0, file);  // a NoPE layer's base is unused
    if (base <= 0) bad(file, "/rope_parameters/" + t + "/rope_theta", "must be a positive number");
    m.rope_thetas.push_back(base);
  }
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = moe.renormalize = true;
  moe.expert_norms = moe.shared_norm = true;
  moe.routed_scale = number_or(c, "moe_routed_scaling_factor", std::sqrt(8.0), file);
  moe.experts = positive_or(c, "num_experts", 256, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 4096, file);
  moe.shared_intermediate = positive_or(c, "shared_intermediate_size", 8192, file);
  read_topk_moe(c, file, m, "shared_experts.", false, [&] {
    const int64_t dense =
        c.contains("num_dense_blocks") && c["num_dense_blocks"].is_number_integer() ? c["num_dense_blocks"].get<int64_t>() : 1;
    if (dense < 0) bad(file, "/num_dense_blocks", "must be >= 0");
    return moe_layers_of(c, m.layers, dense, 1, nullptr, file);
  });
  m.tensor_names = {{"mlp.gate.linear.", "mlp.gate."}};
}

// BeamConfig (5.24.0 on): the layers of gemma's sandwich with weight w (input_layernorm, post_attention_layernorm,
// pre_feedforward_layernorm, post_feedforward_layernorm) and three rules of its own: each attention output element
// times sigmoid(gate_proj h + gate_bias[head]) (ModelConfig::attn_gate_bias), the depth-scaled residual
// (depth_scaled_residual) and NoPE layers whose queries are scaled by (1 + (pos + 1)/2048) ** 0.1
// (nope_query_length, nope_query_power). layer_types default sliding but every sixth layer and the last full; a
// layer type's rope is rope_parameters[type] (keyed by layer type: the class converts no flat dict; default sliding
// "default" at base 1e4, full null), null a NoPE layer; per-head q/k RMS norms before rope; attention_bias on
// q/k/v/o. The feed-forward per mlp_layer_types (default: the first min(3, layers) dense): dense the MLP of
// intermediate_size, sparse exaone_moe's routing (sigmoid scores chosen by score + e_score_correction_bias within
// the topk_group best of n_group groups, renormalised where norm_topk_prob, times routed_scaling_factor) over
// num_experts stacked experts of moe_intermediate_size, no shared expert. The logits soft-capped by
// final_logit_softcapping (30). head_dim default 128; untied by default. 5.24.0 and 5.25.0 compute the same forward
// (they differ in tensor-parallel plans and kernel decorators).
void read_beam(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  read_head_dim_128(c, file, m);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.norm_placement = NormPlacement::Sandwich;
  m.attn_gate = m.attn_gate_elementwise = m.attn_gate_bias = true;
  m.depth_scaled_residual = true;
  m.tensor_names = {{"self_attn.gate_proj.", "self_attn.g_proj."}};
  if (c.value("hidden_act", std::string("silu")) != "silu") bad(file, "/hidden_act", "only silu is modelled");
  // null: no soft-cap; a number is the cap (0 divides by zero in the class: refused).
  const bool no_softcap = c.contains("final_logit_softcapping") && c["final_logit_softcapping"].is_null();
  m.final_softcap = no_softcap ? 0 : number_or(c, "final_logit_softcapping", 30.0, file);
  if (m.final_softcap <= 0 && !no_softcap)
    bad(file, "/final_logit_softcapping", "must be positive or null (the class divides by it)");
  if (!c.contains("sliding_window")) m.sliding_window = 512;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file)) {
    for (int64_t i = 0; i < m.layers; ++i) types.push_back((i + 1) % 6 ? "sliding_attention" : "full_attention");
    types.back() = "full_attention";
  }
  m.windows = windows_of(types, m.sliding_window, file);
  // 5.24.0 and 5.25.0 set rope_parameters from a rope_scaling key (the config's setter), null included.
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters keys the rope by layer type");
  json rp = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}, {"full_attention", nullptr}};
  if (c.contains("rope_parameters") && !c["rope_parameters"].is_null()) rp = c["rope_parameters"];
  if (!rp.is_object()) bad(file, "/rope_parameters", "must key a rope (or null) by each layer type");
  for (size_t i = 0; i < types.size(); ++i) {
    if (!rp.contains(types[i]))
      bad(file, "/rope_parameters", "has no " + types[i] + " entry (layer " + std::to_string(i) + " is one)");
    const json& r = rp[types[i]];
    if (!r.is_null() && !r.is_object()) bad(file, "/rope_parameters/" + types[i], "must be an object or null");
    if (r.is_object() && r.contains("partial_rotary_factor"))
      bad(file, "/rope_parameters/" + types[i] + "/partial_rotary_factor", "is not modelled (beam's rope ignores it)");
    m.rope_layers.push_back(!r.is_null());
    // A NoPE layer's base is never used: 10000 only so that every layer has one.
    const double base = r.is_null() ? 10000 : number_or(r, "rope_theta", 0, file);
    if (base <= 0) bad(file, "/rope_parameters/" + types[i] + "/rope_theta", "must be a positive number");
    m.rope_thetas.push_back(base);
  }
  m.nope_query_length = 2048;
  m.nope_query_power = 0.1;
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = true;
  moe.experts = positive_or(c, "num_experts", 256, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 2560, file);
  for (const char* key : {"n_group", "topk_group"})
    if (c.contains(key) && c[key].is_null()) bad(file, std::string("/") + key, "null is not modelled (the router divides by it)");
  moe.groups = positive_or(c, "n_group", 8, file);
  moe.topk_groups = positive_or(c, "topk_group", 4, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  moe.routed_scale = number_or(c, "routed_scaling_factor", 2.5, file);
  read_topk_moe(c, file, m, nullptr, true, [&] { return moe_layers_of(c, m.layers, 3, 1, nullptr, file); });
}

// MiMoV2FlashConfig (5.13.1 on): llama's pre-norm block and no q/k norms, with an attention of its own: value heads
// of v_head_dim (128) beside head_dim (192) (ModelConfig::v_head_dim), twice num_key_value_heads on the sliding
// layers (layer_kv_heads), sinks on the sliding layers only (sink_layers), values times attention_value_scale (0.707;
// null: 1), q/k/v biases where attention_bias and none on o_proj. layer_types default full on layer 0 and every
// sixth, sliding otherwise; rope_parameters keyed by layer type (default full base 5e6, sliding 1e4, each with
// partial_rotary_factor 0.334, the class's default where a type leaves it out): int(head_dim * factor) entries rotate
// (rotary_dims; an odd count is refused). The feed-forward per mlp_layer_types (default: the first dense): dense the
// MLP of intermediate_size, sparse exaone_moe's routing (sigmoid scores chosen by score + e_score_correction_bias
// within the topk_group best of n_group groups, renormalised where norm_topk_prob, times routed_scaling_factor) over
// n_routed_experts stacked experts of moe_intermediate_size, no shared expert. The window: 5.13.1 defaults it to
// 128, 5.24.0 on to 129 and read sliding_window_size as that + 1: a config without sliding_window is refused.
void read_mimo_v2_flash(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = c.value("tie_word_embeddings", false);
  m.head_dim = positive_or(c, "head_dim", 192, file);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.v_head_dim = positive_or(c, "v_head_dim", 128, file);
  m.eps = number_or(c, "rms_norm_eps", 1e-5, file);
  m.qkv_bias = bool_or(c, "attention_bias", false, file);
  m.value_scale = number_or(c, "attention_value_scale", 0.707, file);
  if (c.contains("attention_value_scale") && c["attention_value_scale"].is_null()) m.value_scale = 1;
  if (c.value("hidden_act", std::string("silu")) != "silu") bad(file, "/hidden_act", "only silu is modelled");
  if (!c.contains("sliding_window") || c["sliding_window"].is_null())
    bad(file, "/sliding_window", "missing: its default differs by release (128 in 5.13.1, 129 from 5.24.0)");
  if (c.contains("sliding_window_size")) bad(file, "/sliding_window_size", "is read by 5.24.0 on only (as the window - 1)");
  if (c.contains("rope_scaling")) bad(file, "/rope_scaling", "is not read: rope_parameters keys the rope by layer type");
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i) types.push_back(i == 0 || (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  m.windows = windows_of(types, m.sliding_window, file);
  m.sinks = true;
  const bool keyed = c.contains("rope_parameters") && !c["rope_parameters"].is_null();
  for (const std::string& t : types) {
    const bool full = t == "full_attention";
    m.layer_kv_heads.push_back(full ? m.kv_heads : 2 * m.kv_heads);
    m.sink_layers.push_back(!full);
    double theta = full ? 5000000.0 : 10000.0, factor = 0.334;
    if (keyed) {
      const json& rp = c["rope_parameters"];
      if (!rp.is_object() || !rp.contains(t) || !rp[t].is_object())
        bad(file, "/rope_parameters", "has no " + t + " entry (keyed by layer type)");
      theta = number_or(rp[t], "rope_theta", 0, file);
      if (theta <= 0) bad(file, "/rope_parameters/" + t + "/rope_theta", "must be a positive number");
      factor = number_or(rp[t], "partial_rotary_factor", 0.334, file);
    }
    const int64_t rd = static_cast<int64_t>(static_cast<double>(m.head_dim) * factor);
    if (rd <= 0 || rd > m.head_dim || rd % 2)
      bad(file, "/rope_parameters/" + t + "/partial_rotary_factor", "must give an even rotary dimension in (0, head_dim]");
    m.rope_thetas.push_back(theta);
    m.rotary_dims.push_back(rd);
  }
  for (int64_t h : m.layer_kv_heads)
    if (m.heads % h) bad(file, "/num_key_value_heads", "twice it (the sliding layers') must divide num_attention_heads");
  MoeConfig& moe = m.moe;
  moe.score = MoeScore::Sigmoid;
  moe.selection_bias = true;
  moe.experts = positive_or(c, "n_routed_experts", positive_or(c, "num_local_experts", 256, file), file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 8, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 2048, file);
  moe.groups = positive_or(c, "n_group", 1, file);
  moe.topk_groups = positive_or(c, "topk_group", 1, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  moe.routed_scale = number_or(c, "routed_scaling_factor", 1.0, file);
  read_topk_moe(c, file, m, nullptr, true, [&] { return moe_layers_of(c, m.layers, 1, 1, nullptr, file); });
}

// DoryConfig (5.24.0 on): nGPT on the unit sphere. Every norm a weightless L2 norm of eps 1e-6 (DoryL2Norm; no config
// key), gemma2's sandwich with each residual add an interpolation towards the normed block at the rate |lambda *
// ngpt_alpha_init / initializer_range| per channel; per-head q/k norms before rope, the queries then times (sqk *
// sqrt(head_dim) / initializer_range)^2; afmoe's element-wise gate with its logit times (s_gate * hidden^0.25 /
// initializer_range)^2, then an L2 sub-norm before o_proj; the MLP's gate and up times suv * sqrt(hidden), an L2
// sub-norm before down_proj; each logit times logit_scale[r] / initializer_range. q/k/v/o biases where
// attention_bias, the MLP's where mlp_bias; hidden_act (default silu); head_dim (default 256); scores times head_dim **
// -0.5; layer_types (default full iff (i + 1) % 4 == 0), sliding_window (default 1024), rope per layer type
// (rope_parameters keyed by type, default sliding 1e4, full 1e7; a top-level rope_theta is not read). A config.json
// saved by transformers lists each layer as an attention and an "mlp" block and doubles the layer counts: the
// configuration halves them back (layer_types[::2], every count // 2), as here. Layers [n_input_layers, +
// n_recurrent_layers) run n_recurrent_loops times, each pass entered as norm(x) + norm(the input section's output):
// with recurrent_kv_cache_mode "per_loop" each pass keeps its own K/V, so the loop is its layers unrolled (layer_weights,
// loop_entries); "last_loop" (earlier passes read the last pass's cached K/V of past positions, so the cached forward
// is not the no-cache one) is refused. 5.24.0 and 5.25.0 agree on per_loop.
void read_dory(const json& c, const std::string& file, ModelConfig& m) {
  const std::string mode = c.value("recurrent_kv_cache_mode", std::string("per_loop"));
  if (mode == "last_loop")
    bad(file, "/recurrent_kv_cache_mode",
        "\"last_loop\" is not modelled: its earlier passes read the last pass's cached K/V of past positions, so the "
        "cached forward is not the no-cache one (per_loop is)");
  if (mode != "per_loop") bad(file, "/recurrent_kv_cache_mode", "\"" + mode + "\" is not per_loop or last_loop");
  auto count = [&](const char* key, int64_t fallback) {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    if (!c[key].is_number_integer() || c[key].get<int64_t>() < 0) bad(file, std::string("/") + key, "must be an integer >= 0");
    return c[key].get<int64_t>();
  };
  int64_t layers = m.layers, in = count("n_input_layers", 8), out = count("n_output_layers", 8);
  const bool has_recurrent = c.contains("n_recurrent_layers") && !c["n_recurrent_layers"].is_null();
  int64_t looped = count("n_recurrent_layers", 0);
  std::vector<std::string> types;
  const json& lt = c.contains("layer_types") ? c["layer_types"] : json();
  if (lt.is_array() && std::find(lt.begin(), lt.end(), json("mlp")) != lt.end()) {
    // Saved as (attention, mlp) block pairs: every other entry, every count halved, as DoryConfig.__post_init__.
    json halved = json::array();
    for (size_t i = 0; i < lt.size(); i += 2) halved.push_back(lt[i]);
    layers /= 2, in /= 2, out /= 2, looped /= 2;
    if (!layer_types({{"layer_types", halved}}, layers, kSlidingOrFull, types, file + " (layer_types[::2])"))
      bad(file, "/layer_types", "must be a list");
  } else if (!layer_types(c, layers, kSlidingOrFull, types, file)) {
    for (int64_t i = 0; i < layers; ++i) types.push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
  }
  if (layers < 1) bad(file, "/num_hidden_layers", "no layer left after halving the saved (attention, mlp) blocks");
  if (!has_recurrent) looped = layers - in - out;
  if (looped < 1 || in + looped + out != layers)
    bad(file, "/n_recurrent_layers",
        "n_input_layers + n_recurrent_layers + n_output_layers must be num_hidden_layers, with at least one looped layer (" +
            std::to_string(in) + " + " + std::to_string(looped) + " + " + std::to_string(out) + " of " + std::to_string(layers) +
            ")");
  const int64_t loops = positive_or(c, "n_recurrent_loops", 2, file);
  if (!c.contains("head_dim")) m.head_dim = 256;
  else if (c["head_dim"].is_null()) bad(file, "/head_dim", "null: DoryAttention needs it");
  if (!c.contains("sliding_window")) m.sliding_window = 1024;
  m.eps = 1e-6;
  m.tied = bool_or(c, "tie_word_embeddings", false, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  m.mlp_bias = bool_or(c, "mlp_bias", false, file);
  const std::string act = c.value("hidden_act", std::string("silu"));
  if (act == "gelu") m.gelu = m.gelu_exact = true;
  else if (act == "gelu_pytorch_tanh") m.gelu = true;
  else if (act != "silu") bad(file, "/hidden_act", "\"" + act + "\" is not modelled (silu, gelu, gelu_pytorch_tanh are)");
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.norm_placement = NormPlacement::Sandwich;
  m.l2_norm = m.qk_norm = m.qk_norm_weightless = true;
  m.attn_gate = m.attn_gate_elementwise = true;
  m.attn_sub_norm = m.mlp_sub_norm = true;
  const double init = number_or(c, "initializer_range", 0.0177, file);
  if (init <= 0) bad(file, "/initializer_range", "must be positive (every nGPT scale divides by it)");
  const double alpha = number_or(c, "ngpt_alpha_init", 0.05, file);
  if (alpha == 0) bad(file, "/ngpt_alpha_init", "0 is not modelled (each block's residual rate would be 0)");
  m.residual_interpolation = std::abs(alpha / init);  // the rate |lambda * alpha / init|: the sign of alpha is lost
  m.query_channel_scale = std::pow(static_cast<double>(m.head_dim), 0.5) / init;
  m.attn_gate_scale = std::pow(static_cast<double>(m.hidden), 0.25) / init;
  m.mlp_channel_scale = std::pow(static_cast<double>(m.hidden), 0.5);
  m.logit_channel_scale = 1 / init;
  m.tensor_names = {{"self_attn.gate_proj.", "self_attn.g_proj."}};
  // Rope per layer type: each type the model has needs its entry (the rotary module reads rope_parameters[type]).
  std::vector<double> bases;
  const bool keyed = c.contains("rope_parameters") && !c["rope_parameters"].is_null();
  for (const std::string& t : types) {
    if (!keyed) {
      bases.push_back(t == "full_attention" ? 1e7 : 1e4);
      continue;
    }
    const json& rp = c["rope_parameters"];
    if (!rp.is_object() || !rp.contains(t) || !rp[t].is_object())
      bad(file, "/rope_parameters/" + t, "must be an object (dory keys its rope by layer type)");
    const double base = number_or(rp[t], "rope_theta", 0, file);
    if (base <= 0) bad(file, "/rope_parameters/" + t + "/rope_theta", "must be a positive number");
    bases.push_back(base);
  }
  // The loop unrolled: input layers, loops passes of the looped ones (each entered at its first layer), output layers.
  std::vector<int64_t> order;
  for (int64_t l = 0; l < in; ++l) order.push_back(l);
  for (int64_t pass = 0; pass < loops; ++pass)
    for (int64_t l = in; l < in + looped; ++l) {
      m.loop_entries.resize(order.size() + 1, false);
      m.loop_entries.back() = l == in;
      order.push_back(l);
    }
  for (int64_t l = in + looped; l < layers; ++l) order.push_back(l);
  m.loop_entries.resize(order.size(), false);
  m.layers = static_cast<int64_t>(order.size());
  m.layer_weights = order;
  std::vector<std::string> unrolled;
  for (int64_t l : order) {
    unrolled.push_back(types[static_cast<size_t>(l)]);
    m.rope_thetas.push_back(bases[static_cast<size_t>(l)]);
  }
  m.windows = windows_of(unrolled, m.sliding_window, file);
}

// LaraMiniConfig (5.24.0 on): qwen3's attention (per-head q/k RMSNorms of weight w, q/k/v/o biases where
// attention_bias, head_dim default 128) on the sliding and full layers, gated DeltaNet blocks
// (ModelConfig::delta_layers) on the linear_attention ones. layer_types default: [linear, sliding, linear, full,
// sliding] repeated; sliding_window default 512. Rope (default, rope_parameters' base, the whole head: its rotary
// module's default init reads no partial factor) on the sliding layers only: the model hands the full layers no
// position embeddings (NoPE). The delta blocks: linear_num_key_heads (8) q/k heads of linear_key_head_dim (128),
// linear_num_value_heads (16) value heads of linear_value_head_dim (128), linear_conv_kernel_dim (4) taps; their SiLU
// is hidden_act's (as the MLPs'): only silu is modelled. Every layer's feed-forward is a MoE: a softmax over
// num_experts (128) experts of the router's logits (its float32 casts an exact64 island), the top num_experts_per_tok
// (4), renormalised where norm_topk_prob (default true), stacked experts of moe_intermediate_size, and an ungated
// shared expert of shared_expert_intermediate_size always added; no intermediate_size. The checkpoint fuses a delta
// block's input projections into linear_attn.in_proj (rows [qkv | z | b | a], split by load_model) and names its
// gated norm out_norm. Tied by default. 5.24.0 and 5.25.0 compute the same forward (5.25.0 moved the convolution into
// causal_conv1d_forward).
void read_lara_mini(const json& c, const std::string& file, ModelConfig& m) {
  m.tied = bool_or(c, "tie_word_embeddings", true, file);
  m.head_dim = positive_or(c, "head_dim", 128, file);
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.rope_theta = rope_base(c, "", "rope_theta", 10000, file);
  m.qk_norm = true;
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (c.value("hidden_act", std::string("silu")) != "silu") bad(file, "/hidden_act", "only silu is modelled");
  if (!c.contains("sliding_window") || c["sliding_window"].is_null()) m.sliding_window = 512;
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, {"linear_attention", "sliding_attention", "full_attention"}, types, file)) {
    const std::vector<std::string> pattern = {"linear_attention", "sliding_attention", "linear_attention", "full_attention",
                                              "sliding_attention"};
    for (int64_t i = 0; i < m.layers; ++i) types.push_back(pattern[static_cast<size_t>(i) % pattern.size()]);
  }
  m.windows = windows_of(types, m.sliding_window, file);
  for (const std::string& t : types) {
    m.delta_layers.push_back(t == "linear_attention");
    m.rope_layers.push_back(t == "sliding_attention");
  }
  m.delta_k_heads = positive_or(c, "linear_num_key_heads", 8, file);
  m.delta_v_heads = positive_or(c, "linear_num_value_heads", 16, file);
  m.delta_k_dim = positive_or(c, "linear_key_head_dim", 128, file);
  m.delta_v_dim = positive_or(c, "linear_value_head_dim", 128, file);
  if (m.delta_v_heads % m.delta_k_heads) bad(file, "/linear_num_value_heads", "must be a multiple of linear_num_key_heads");
  m.conv_kernel = positive_or(c, "linear_conv_kernel_dim", 4, file);
  MoeConfig& moe = m.moe;
  moe.routing = MoeRouting::TopK;
  moe.score = MoeScore::Softmax;
  moe.experts = positive_or(c, "num_experts", 128, file);
  moe.top_k = positive_or(c, "num_experts_per_tok", 4, file);
  moe.intermediate = positive_or(c, "moe_intermediate_size", 512, file);
  moe.shared_intermediate = positive_or(c, "shared_expert_intermediate_size", 512, file);
  moe.renormalize = bool_or(c, "norm_topk_prob", true, file);
  moe.router = "gate.";
  moe.shared = "shared_expert.";
  moe.stacked_experts = true;
  check_topk(moe, file);
  moe.layers.assign(static_cast<size_t>(m.layers), true);
  m.tensor_names = {{"linear_attn.out_norm.", "linear_attn.norm."}};
}

struct FamilyEntry {
  Family family;
  const char* model_type;
  void (*read)(const json&, const std::string&, ModelConfig&);
  // A multimodal model: its text decoder's config is config.text_config (the reader reads that), its
  // tensors are under ModelConfig::text_prefix.
  bool multimodal = false;
  // A multimodal model whose head is tied by the outer config's tie_word_embeddings alone (step3p7: its class reads
  // no text_config tie, and a saved text_config says false); else text_config_tie.
  bool outer_tie_only = false;
};

// A wrapper: a multimodal class around a registry family's decoder (AutoModel.from_config(text_config)), whose
// text-only forward is that decoder's, its head the class's own lm_head (transformers 4.56 to 5.25: the input ids'
// embeddings go through the decoder unchanged; the towers run only on pixel or audio inputs).
struct WrapperEntry {
  const char* model_type;
  const char* decoder;        // text_config's model_type, the family its decoder is read as
  const char* decoder_alias;  // another text_config model_type the class renames to `decoder` on load, or ""
  const char* text_prefix;    // where the checkpoint keeps the decoder's model.* tensors
  const char* head_prefix;    // ... and its lm_head
  bool plain_head;            // the class's lm_head has no logit_scale of the decoder's causal-LM class
  bool untied_head_only;      // a tied head is not one model across the pinned releases (refused)
  // The class's own text config over the decoder family's (its defaults, its extra fields), rewritten into the
  // family's terms before the family reads it; null where the text config is the family's own.
  void (*text_rules)(json& text, const std::string& file) = nullptr;
};

// Qwen2_5OmniTextConfig (every pinned release): qwen2's decoder (Qwen2_5OmniAttention: q/k/v with bias, o without,
// head_dim where set, else hidden_size / num_attention_heads; layer i slides iff use_sliding_window and
// i >= max_window_layers, or by layer_types) under its own defaults: sliding_window 32768, rope base 1e6. Its
// M-RoPE (mrope_section, default [16, 24, 24], in rope_parameters or 4.x's rope_scaling) rotates each section of
// a head's head_dim / 2 frequencies by its own position id, and a text-only forward gives all three the text
// position (the text model's default position_ids), so it is the default rope; sections that do not cover the
// head exactly fail transformers' own recomposition, and are refused. The head's tie: text_config's default
// (true) and the thinker's (false) differ, so the text config must say it.
void qwen2_5_omni_text_rules(json& c, const std::string& file) {
  if (!c.contains("tie_word_embeddings") || !c["tie_word_embeddings"].is_boolean())
    bad(file, "/tie_word_embeddings", "missing: its class default (true) and the thinker's (false) differ");
  if (!c.contains("sliding_window")) c["sliding_window"] = 32768;
  const bool in_parameters = c.contains("rope_parameters") && c["rope_parameters"].is_object();
  if (!c.contains("rope_theta") && !(in_parameters && c["rope_parameters"].contains("rope_theta"))) c["rope_theta"] = 1e6;
  const int64_t heads = positive(c, "num_attention_heads", file);
  const int64_t head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? positive(c, "head_dim", file)
                                                                              : positive(c, "hidden_size", file) / heads;
  json section = json::array({16, 24, 24});
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!c.contains(key) || !c[key].is_object()) continue;
    json& r = c[key];
    if (r.contains("mrope_section")) section = r["mrope_section"];
    r.erase("mrope_section");
    for (const char* type : {"type", "rope_type"})  // 4.x spells M-RoPE's default frequencies "mrope"
      if (r.contains(type) && r[type] == "mrope") r[type] = "default";
  }
  int64_t sum = 0;
  if (!section.is_array() || section.size() != 3) bad(file, "/rope_parameters/mrope_section", "must list three section sizes");
  for (const json& n : section) {
    if (!n.is_number_integer() || n.get<int64_t>() <= 0)
      bad(file, "/rope_parameters/mrope_section", "sizes must be positive integers");
    sum += n.get<int64_t>();
  }
  if (sum != head_dim / 2)
    bad(file, "/rope_parameters/mrope_section",
        "sums to " + std::to_string(sum) + ", not head_dim / 2 = " + std::to_string(head_dim / 2));
}

// Gemma4UnifiedTextConfig (5.13.1 on): gemma4_text's decoder without per-layer input embeddings or the MoE block
// (the class drops those fields: one in a config is refused), under its own defaults: sliding_window 1024, a tied
// head (its outer class's default too). use_bidirectional_attention (default "vision") lets vision tokens see each
// other; a text-only forward has none (no mm_token_type_ids: every token outside any block), so "vision" is the
// causal decoder, and "all" (every token bidirectional) is refused.
void gemma4_unified_text_rules(json& c, const std::string& file) {
  for (const char* key : {"hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block", "num_experts",
                          "top_k_experts", "moe_intermediate_size"})
    if (c.contains(key))
      bad(file, std::string("/") + key, "is not a field of gemma4_unified_text (no per-layer inputs, no MoE block)");
  c["hidden_size_per_layer_input"] = 0;
  if (!c.contains("sliding_window")) c["sliding_window"] = 1024;
  if (!c.contains("tie_word_embeddings")) c["tie_word_embeddings"] = true;
  const json bidirectional = c.contains("use_bidirectional_attention") ? c["use_bidirectional_attention"] : json("vision");
  if (!bidirectional.is_null() && bidirectional != "vision")
    bad(file, "/use_bidirectional_attention", bidirectional.dump() + " is not modelled (\"vision\", text-only causal, is)");
  c.erase("use_bidirectional_attention");
}

// Adding a wrapper: one entry here, once the agreement with transformers' own forward of the class holds
// (engines/models/families.py WRAPPERS writes its checkpoints).
const WrapperEntry kWrappers[] = {
    {"mistral3", "mistral", "", "model.language_model.", "", false, false},
    // Cohere2VisionForConditionalGeneration's logits are lm_head(hidden): cohere2's logit_scale is not applied.
    {"cohere2_vision", "cohere2", "", "model.language_model.", "", true, false},
    // Exaone4_5_Config renames the text model type exaone4_5_text (EXAONE 4.5's first checkpoints) to exaone4.
    {"exaone4_5", "exaone4", "exaone4_5_text", "model.language_model.", "", false, false},
    {"lfm3_vl", "lfm3", "", "model.language_model.", "", false, false},
    // 4.x's class holds a whole Qwen2ForCausalLM (language_model.model.*, language_model.lm_head); 5.x's
    // conversion mapping loads that layout (real Qwen2-Audio checkpoints keep it). A tied head: 4.x ties it, while
    // 5.13.1 to 5.25.0's class has no _tied_weights_keys and leaves lm_head newly initialised.
    {"qwen2_audio", "qwen2", "", "language_model.model.", "language_model.", false, true},
    {"qwen3_asr", "qwen3", "", "model.language_model.", "", false, false},
    // Qwen2_5OmniThinkerForConditionalGeneration (Qwen2.5-Omni's text-producing half; the whole qwen2_5_omni class
    // has no forward of its own, only generate): 4.x and 5.13.1 hold the decoder as model.*, and 5.24 on load that
    // layout into model.language_model (their conversion mapping).
    {"qwen2_5_omni_thinker", "qwen2", "qwen2_5_omni_text", "model.", "", false, false, qwen2_5_omni_text_rules},
    {"gemma4_unified", "gemma4_text", "gemma4_unified_text", "model.language_model.", "", false, false,
     gemma4_unified_text_rules},
    // CohereCompassForConditionalGeneration scales its logits by text_config.logit_scale where set, as its decoder's
    // causal-LM class does (default none).
    {"cohere_compass", "cohere_compass_text", "", "model.language_model.", "", false, false},
    // MuseGlimmerForConditionalGeneration applies its decoder's output_multiplier and soft-cap to lm_head's logits.
    {"muse_glimmer", "muse_glimmer_text", "", "model.language_model.", "", false, false},
    // MuseSparkForConditionalGeneration: muse_glimmer's head (output_multiplier, soft-cap) around muse_spark_text. A tied
    // head is refused: the class drops muse_glimmer's _tied_weights_keys, so 5.24.0 and 5.25.0 leave lm_head newly
    // initialised (engines/transformers/repro/muse_spark_tied_head_untied.py).
    {"muse_spark", "muse_spark_text", "", "model.language_model.", "", false, true},
};

// Wrappers whose forward embeds the outer config's placeholder ids as id 0 whatever the input (muse_glimmer:
// llm_input_ids[multimodal_mask] = 0 before the lookup, text-only inputs too; muse_spark's mask adds audio_token_id).
struct PlaceholdersAsZero {
  const char* model_type;
  std::vector<const char*> keys;
};
const PlaceholdersAsZero kPlaceholdersAsZero[] = {{"muse_glimmer", {"image_token_id", "video_token_id"}},
                                                  {"muse_spark", {"image_token_id", "video_token_id", "audio_token_id"}}};

// The head's tie of a model whose decoder is its text_config: the outer config's (5.x) or text_config's (4.x reads
// it there; 5.25 ties when either says so): a checkpoint whose two disagree would differ between releases.
bool text_config_tie(const json& outer, const std::string& outer_file, const json& c, const std::string& file) {
  const bool outer_tie = bool_or(outer, "tie_word_embeddings", false, outer_file),
             inner_tie = bool_or(c, "tie_word_embeddings", false, file);
  if (outer.contains("tie_word_embeddings") && c.contains("tie_word_embeddings") && outer_tie != inner_tie)
    bad(outer_file, "/tie_word_embeddings", "differs from text_config's: the releases read one or the other");
  return outer_tie || inner_tie;
}

// NeoMMEConfig (5.24.0 on), read as NeoMMEForMaskedLM on text alone (no pixel_values: an image placeholder id is
// embedded as any token, and both M-RoPE axes carry the text position, which makes its interleaved two-axis rope the
// default one): pre-norm layers whose norms have no weight (norm_eps; the embedding's, the q/k norms per head before
// rope, the input, post-attention and final norms: ModelConfig::norms_weightless), bidirectional attention. A layer's
// keys: per_layer_config's sliding_window for it (absent from the config: full layers none, sliding layers alternating
// sliding_window, default 256, and the class's 1024 by sliding-layer index; a layer's entry without the key: the
// top-level sliding_window), a window seeing abs(i - j) <= window keys on each side (create_bidirectional_sliding_window_mask,
// the rule of ultrabert and embedding_gemma2: encoder_mask_rule's default reach, not modernbert's halved
// local_attention), none every key; its rope the layer type's rope_parameters (default: full 1e6 rotating
// head_dim * 0.25, sliding 1e4 rotating all). layer_types default to full on every sixth layer and the last.
// Factorized embeddings of embedding_rank (default 256) and head (embedding_rank), value embeddings on the first and
// last full layers, initial-state mixing (lambdas), exclusive self-attention, the sigmoid output gate of
// self_attn.output_projection (gate_proj [heads * head_dim, H] of the attention's normed input, then o_proj), the
// residual branches times residual_multiplier (default (2 * layers) ** -0.5), relu2's ungated MLP, scores times
// head_dim ** -0.5, tied (both factors) by default.
void read_neomme(const json& c, const std::string& file, ModelConfig& m) {
  m.bidirectional = true;
  m.eps = number_or(c, "norm_eps", 1e-6, file);
  m.qkv_bias = m.o_bias = bool_or(c, "attention_bias", false, file);
  if (bool_or(c, "mlp_bias", false, file)) bad(file, "/mlp_bias", "true is not modelled for neomme");
  const std::string act = c.value("hidden_act", std::string("relu2"));
  if (act != "relu2") bad(file, "/hidden_act", "\"" + act + "\" is not modelled (NeoMMEConfig allows relu2 only)");
  m.mlp_ungated = m.relu2 = true;
  m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
  m.tied = bool_or(c, "tie_word_embeddings", true, file);
  m.embedding_rank = positive_or(c, "embedding_rank", 256, file);
  m.norms_weightless = m.embed_rms_norm = m.qk_norm = m.qk_norm_weightless = true;
  m.initial_mix = m.exclusive_attention = true;
  m.attn_gate = m.attn_gate_elementwise = true;
  m.residual_scale = number_or(c, "residual_multiplier", std::pow(2.0 * static_cast<double>(m.layers), -0.5), file);
  if (!(m.residual_scale > 0) || !std::isfinite(m.residual_scale))
    bad(file, "/residual_multiplier", "must be finite and positive");
  std::vector<std::string> types;
  if (!layer_types(c, m.layers, kSlidingOrFull, types, file))
    for (int64_t i = 0; i < m.layers; ++i)
      types.push_back((i + 1) % 6 == 0 || i == m.layers - 1 ? "full_attention" : "sliding_attention");
  if (std::find(types.begin(), types.end(), "full_attention") == types.end())
    bad(file, "/layer_types", "must contain a full_attention layer (NeoMMEConfig refuses none)");
  const bool has_window = c.contains("sliding_window") && !c["sliding_window"].is_null();
  const int64_t top = c.contains("sliding_window") ? (has_window ? m.sliding_window : 0) : 256;
  const json plc = per_layer_config(c, file, m.layers, {"sliding_window"});
  const json rp = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : json::object();
  if (c.contains("rope_theta"))
    bad(file, "/rope_theta", "one base for every layer type is not read: key rope_parameters by type");
  int64_t sliding_index = 0, first_full = -1, last_full = -1;
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string& type = types[static_cast<size_t>(l)];
    const bool full = type == "full_attention";
    if (full) last_full = l, first_full = first_full < 0 ? l : first_full;
    // The layer's mask: its per_layer_config entry, else the class's default one.
    int64_t reach = full ? 0 : sliding_index % 2 ? 1024 : top;
    if (!full) ++sliding_index;
    const std::string key = std::to_string(l);
    if (!plc.is_null()) {
      reach = top;
      if (plc.contains(key) && plc[key].contains("sliding_window"))
        reach = plc[key]["sliding_window"].is_null()
                    ? 0
                    : positive(plc[key], "sliding_window", file + " (per_layer_config/" + key + ")");
    }
    m.windows.push_back(reach > 0 ? reach + 1 : 0);
    m.reach_before.push_back(reach);
    m.reach_after.push_back(reach);
    const json p = rp.contains(type) && rp[type].is_object() ? rp[type] : json::object();
    if (p.value("rope_type", std::string("default")) != "default")
      bad(file, "/rope_parameters/" + type + "/rope_type", "only the default rope is modelled");
    m.rope_thetas.push_back(number_or(p, "rope_theta", full ? 1e6 : 1e4, file));
    const double factor = number_or(p, "partial_rotary_factor", full ? 0.25 : 1.0, file);
    const int64_t rd = static_cast<int64_t>(static_cast<double>(m.head_dim) * factor);
    if (!(factor > 0 && factor <= 1) || rd < 4 || rd % 4)
      bad(file, "/rope_parameters/" + type + "/partial_rotary_factor", "must rotate a positive multiple of 4 of head_dim");
    m.rotary_dims.push_back(rd);
  }
  m.sliding_window = 0;
  for (int64_t r : m.reach_before) m.sliding_window = std::max(m.sliding_window, r);
  for (int64_t l = 0; l < m.layers; ++l) m.value_embed_layers.push_back(l == first_full || l == last_full);
  m.tensor_names = {{"model.embed_tokens.word_embeddings.", "model.embed_tokens."},
                    {"self_attn.output_projection.gate_proj.", "self_attn.g_proj."},
                    {"self_attn.output_projection.o_proj.", "self_attn.o_proj."}};
}

// Adding a family: its enumerator, its reader above, and one entry here.
const FamilyEntry kRegistry[] = {
    {Family::Gemma2, "gemma2", read_gemma2},
    {Family::Gemma3, "gemma3_text", read_gemma3},
    {Family::Mistral, "mistral", read_mistral},
    {Family::Llama4Text, "llama4_text", read_llama4_text},
    {Family::Qwen2, "qwen2", read_qwen2},
    {Family::Qwen3, "qwen3", read_qwen3},
    {Family::GptOss, "gpt_oss", read_gpt_oss},
    {Family::SmolLM3, "smollm3", read_smollm3},
    {Family::Cohere2, "cohere2", read_cohere2},
    {Family::Ministral, "ministral", read_ministral},
    {Family::Phi3, "phi3", read_phi3},
    {Family::Gemma4Text, "gemma4_text", read_gemma4_text},
    {Family::Olmo3, "olmo3", read_olmo3},
    {Family::Exaone4, "exaone4", read_exaone4},
    {Family::VaultGemma, "vaultgemma", read_vaultgemma},
    {Family::Cwm, "cwm", read_cwm},
    {Family::GraniteSwa, "granite_swa", read_granite_swa},
    {Family::Qwen2Moe, "qwen2_moe", read_qwen2_moe},
    {Family::Dots1, "dots1", read_dots1},
    {Family::GraniteMoeSwa, "granitemoe_swa", read_granitemoe_swa},
    {Family::ExaoneMoe, "exaone_moe", read_exaone_moe},
    {Family::Lfm3, "lfm3", read_lfm3},
    {Family::Qwen2Vl, "qwen2_vl", read_qwen2_vl, true},
    {Family::Qwen25Vl, "qwen2_5_vl", read_qwen2_vl, true},
    {Family::Mellum, "mellum", read_mellum},
    {Family::Flint, "flint", read_flint},
    {Family::Cohere2Moe, "cohere2_moe", read_cohere2_moe},
    {Family::Afmoe, "afmoe", read_afmoe},
    {Family::ModernBertDecoder, "modernbert-decoder", read_modernbert_decoder},
    {Family::ModernBert, "modernbert", read_modernbert},
    {Family::Ultrabert, "ultrabert", read_ultrabert},
    {Family::CohereCompassText, "cohere_compass_text", read_cohere_compass_text},
    {Family::MuseGlimmerText, "muse_glimmer_text", read_muse_glimmer_text},
    {Family::MuseSparkText, "muse_spark_text", read_muse_spark_text},
    {Family::Kolibri1, "kolibri1", read_kolibri1},
    {Family::Laguna, "laguna", read_laguna},
    {Family::EmbeddingGemma2Text, "embedding_gemma2_text", read_embedding_gemma2_text},
    {Family::OpenAIPrivacyFilter, "openai_privacy_filter", read_openai_privacy_filter},
    {Family::Gemma3nText, "gemma3n_text", read_gemma3n_text},
    {Family::RecurrentGemma, "recurrent_gemma", read_recurrent_gemma},
    {Family::Step3p7, "step3p7", read_step3p7, true, true},
    {Family::Ergo, "ergo", read_ergo},
    {Family::Beam, "beam", read_beam},
    {Family::MimoV2Flash, "mimo_v2_flash", read_mimo_v2_flash},
    {Family::Dory, "dory", read_dory},
    {Family::T5Gemma, "t5gemma", read_t5gemma_module},  // each stack of the encoder-decoder (kEncoderDecoders)
    {Family::LaraMini, "lara_mini", read_lara_mini},
    {Family::T5Gemma2, "t5gemma2", read_t5gemma2_module},  // each stack of the encoder-decoder (kEncoderDecoders)
    {Family::NeoMME, "neomme", read_neomme},
};

// An encoder-decoder (T5GemmaForConditionalGeneration, every pinned release): config.encoder and config.decoder are
// each a stack's own config (model_type `stack`), their tensors under model.encoder. and model.decoder., the head
// lm_head.out_proj (tied to the decoder's embedding where the outer tie_word_embeddings, default true) and the logits
// soft-capped by the decoder's final_logit_softcapping. The encoder is bidirectional: a sliding layer sees
// sliding_window keys on each side (create_bidirectional_sliding_window_mask from 5.0; 4.x's own overlay reached
// sliding_window - 1, finding 54: the registry reads the newest release's rule, oracle_agreement's 4.x rows run
// kvc-model-oracle --encoder-reach-delta -1). The decoder's layers cross-attend the encoder's output
// (ModelConfig::encoder).
// T5Gemma2ForConditionalGeneration (5.13.1 on) differs as data: its encoder's config is encoder.text_config (beside a
// vision_config whose tower a text-only source never runs), its decoder attends its own keys and the source's in one
// softmax (ModelConfig::merged_cross_attention), its encoder's sliding layers see (w + 1) / 2 - 1 keys before and w / 2
// after (sliding_window_mask_function(w, is_causal=False): left (w + 1) // 2 with itself, right w // 2 + 1 with itself),
// and under the outer tie_word_embeddings the decoder's embedding is the encoder's (_tied_weights_keys) and so is the
// head; untied, each stack keeps its own and lm_head.out_proj is the head (the stacks' own ties are not read).
struct EncoderDecoderEntry {
  const char* model_type;  // its registry row reads each stack
  const char* stack;       // the sub-configs' own model_type
  const char *encoder_prefix, *decoder_prefix, *head;
  const char* encoder_stack = nullptr;  // the encoder's text stack's model_type where it differs from `stack`
  const char* encoder_text = nullptr;   // the key under config.encoder that holds it (null: config.encoder itself)
  bool merged_cross_attention = false;  // ModelConfig::merged_cross_attention on the decoder
  bool reach_split = false;             // the encoder's sliding reach: (w + 1) / 2 - 1 before, w / 2 after (else w, w)
  bool shared_embedding = false;        // tied: the decoder's embedding is the encoder's
  bool stacks_tie_with_outer = true;    // 4.57.6's t5gemma rule: an untied model needs an untied decoder config
  const char* eoi_key = nullptr;        // a token whose embedding is a tensor of its own (refused inside the vocabulary)
};
const EncoderDecoderEntry kEncoderDecoders[] = {
    {"t5gemma", "t5_gemma_module", "model.encoder.", "model.decoder.", "lm_head.out_proj."},
    {"t5gemma2", "t5gemma2_decoder", "model.encoder.", "model.decoder.", "lm_head.out_proj.", "t5gemma2_text", "text_config",
     true, true, true, false, "eoi_token_index"},
};

ModelConfig read_family(const std::string& type, const json& outer, const std::string& outer_file);

}  // namespace

const char* to_string(Family f) {
  for (const FamilyEntry& e : kRegistry)
    if (e.family == f) return e.model_type;
  return "?";
}

const char* to_string(Attention a) {
  switch (a) {
    case Attention::Full: return "full";
    case Attention::Sliding: return "sliding";
    case Attention::Chunked: return "chunked";
  }
  return "?";
}

double sparsity_quantile(double p) {
  // Normal(0, 1).icdf(value) = loc + scale * erfinv(2 * value - 1) * sqrt(2), every step a float32 tensor op (the
  // Python scalars 2, 1 and math.sqrt(2) rounded to float32). erfinv is ATen's calc_erfinv (Math.h: a rational first
  // guess, then two Newton steps), here run in double and rounded to float32, which is what torch 2.13's CPU kernel
  // gives nearly always: of the targets i / 200000, 199,951 of 199,999 quantiles agree with torch's bit for bit (the
  // others by one float32 ulp, near a rounding tie), where the same steps run in float32 part from it on 37,847.
  const float y = 2.0f * static_cast<float>(p) - 1.0f;
  const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  const double d[2] = {3.543889200, 1.637067800};
  const double yd = y, y_abs = std::abs(yd);
  if (!(y_abs < 1.0)) throw std::invalid_argument("sparsity_quantile: the target must be in (0, 1)");
  double x;
  if (y_abs <= 0.7) {
    const double z = yd * yd;
    const double num = (((a[3] * z + a[2]) * z + a[1]) * z + a[0]);
    const double dem = ((((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0);
    x = yd * num / dem;
  } else {
    const double z = std::sqrt(-std::log((1.0 - y_abs) / 2.0));
    const double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    const double dem = (d[1] * z + d[0]) * z + 1.0;
    x = std::copysign(num, yd) / dem;
  }
  const double two_over_sqrt_pi = 2.0 * 0.564189583547756286948079451560772586;
  x = x - (std::erf(x) - yd) / (two_over_sqrt_pi * std::exp(-x * x));
  x = x - (std::erf(x) - yd) / (two_over_sqrt_pi * std::exp(-x * x));
  const float scaled = 1.0f * static_cast<float>(x) * static_cast<float>(1.4142135623730951);  // scale * erfinv * sqrt(2)
  return static_cast<double>(0.0f + scaled);                                                   // loc + ...
}

Attention ModelConfig::attention(int64_t layer) const {
  const size_t l = static_cast<size_t>(layer);
  if (l < chunks.size() && chunks[l] > 0) return Attention::Chunked;
  if (l < windows.size() && windows[l] > 0) return Attention::Sliding;
  return Attention::Full;
}

ModelConfig parse_config(const json& outer, const std::string& outer_file) {
  if (!outer.is_object()) bad(outer_file, "", "must be a JSON object");
  const std::string type = outer.value("model_type", std::string());
  for (const EncoderDecoderEntry& e : kEncoderDecoders) {
    if (type != e.model_type) continue;
    if (!bool_or(outer, "is_encoder_decoder", true, outer_file))
      bad(outer_file, "/is_encoder_decoder", "false (an encoder alone, " + type + "'s EncoderModel) is not modelled");
    ModelConfig stacks[2];
    for (int i = 0; i < 2; ++i) {
      const char* key = i ? "decoder" : "encoder";
      if (!(outer.contains(key) && outer[key].is_object()))
        bad(outer_file, std::string("/") + key, "missing: " + type + " describes its " + key + " there");
      json c = outer[key];
      std::string file = outer_file + " (" + key + ")";
      const char* stack = !i && e.encoder_stack ? e.encoder_stack : e.stack;
      if (!i && e.encoder_text) {
        if (!(c.contains(e.encoder_text) && c[e.encoder_text].is_object()))
          bad(file, std::string("/") + e.encoder_text, "missing: " + type + " describes its encoder's text stack there");
        c = json(c[e.encoder_text]);
        file = outer_file + " (encoder." + e.encoder_text + ")";
      }
      if (c.value("model_type", std::string(stack)) != stack)
        bad(file, "/model_type", "\"" + c.value("model_type", std::string()) + "\": " + type + "'s stack there is " + stack);
      stacks[i] = read_family(e.model_type, c, file);
      stacks[i].text_prefix = i ? e.decoder_prefix : e.encoder_prefix;
      stacks[i].head_prefix = "";
    }
    ModelConfig& enc = stacks[0];
    enc.bidirectional = true;
    enc.hidden_output = true;
    enc.tied = false;
    enc.final_softcap = 0;
    for (int64_t w : enc.windows) {
      enc.reach_before.push_back(e.reach_split && w > 0 ? (w + 1) / 2 - 1 : w);
      enc.reach_after.push_back(e.reach_split && w > 0 ? w / 2 : w);
    }
    ModelConfig m = std::move(stacks[1]);
    m.tied = bool_or(outer, "tie_word_embeddings", true, outer_file);
    // 4.57.6 ties the head to the encoder's embedding (get_input_embeddings) where the decoder's config ties, whatever
    // the outer config says; the other releases read the outer one alone
    // (engines/transformers/repro/t5gemma_untied_head_is_the_encoders_embedding.py).
    if (e.stacks_tie_with_outer && !m.tied && bool_or(outer["decoder"], "tie_word_embeddings", true, outer_file + " (decoder)"))
      bad(outer_file, "/decoder/tie_word_embeddings",
          "true (or absent) under an untied model: 4.57.6 then ties lm_head to the encoder's embedding");
    // T5Gemma2TextScaledWordEmbedding puts eoi_embedding (unscaled) in place of the eoi token's row: not modelled, so a
    // vocabulary that holds the token is refused.
    // The outer config's value is the encoder config's (T5Gemma2Config.__post_init__); both are checked.
    for (const json* c : {&outer, &outer["encoder"]})
      if (e.eoi_key && c->contains(e.eoi_key) && (*c)[e.eoi_key].is_number_integer() && (*c)[e.eoi_key].get<int64_t>() >= 0 &&
          (*c)[e.eoi_key].get<int64_t>() < m.vocab)
        bad(outer_file, std::string(c == &outer ? "/" : "/encoder/") + e.eoi_key,
            "inside the vocabulary: its token's own embedding (embed_tokens.eoi_embedding) is not modelled");
    if (e.shared_embedding && m.tied) m.shared_embedding = std::string(e.encoder_prefix) + "embed_tokens.weight";
    m.merged_cross_attention = e.merged_cross_attention;
    m.tensor_names.emplace_back(e.head, "lm_head.");
    m.cross_width = enc.hidden;
    m.encoder = std::make_shared<const ModelConfig>(std::move(enc));
    return m;
  }
  for (const WrapperEntry& w : kWrappers) {
    if (type != w.model_type) continue;
    // A wrapper: its decoder is its text_config, read as that family's own config.json.
    if (!(outer.contains("text_config") && outer["text_config"].is_object()))
      bad(outer_file, "/text_config", "missing: " + type + " describes its text decoder there");
    json c = outer["text_config"];
    const std::string file = outer_file + " (text_config)", inner = c.value("model_type", std::string());
    if (inner != w.decoder && !(*w.decoder_alias && inner == w.decoder_alias))
      bad(file, "/model_type",
          "\"" + inner + "\": " + type + " is read with a " + w.decoder +
              " decoder only (the one its agreement "
              "with transformers is proven with)");
    c["model_type"] = w.decoder;
    if (w.text_rules) w.text_rules(c, file);
    ModelConfig m = parse_config(c, file);
    m.tied = text_config_tie(outer, outer_file, c, file);
    if (m.tied && w.untied_head_only)
      bad(outer_file, "/tie_word_embeddings",
          "a tied head is not modelled for " + type +
              ": its 5.x class declares no tied weights and "
              "leaves lm_head untied and newly initialised");
    m.text_prefix = w.text_prefix;
    m.head_prefix = w.head_prefix;
    if (w.plain_head) m.logit_scale = 1;
    for (const PlaceholdersAsZero& p : kPlaceholdersAsZero)
      if (type == p.model_type)
        for (const char* key : p.keys)
          if (outer.contains(key) && outer[key].is_number_integer()) m.zero_tokens.push_back(outer[key].get<int64_t>());
    return m;
  }
  return read_family(type, outer, outer_file);
}

namespace {
// The registry row of `type` reading `outer`.
ModelConfig read_family(const std::string& type, const json& outer, const std::string& outer_file) {
  ModelConfig m;
  const FamilyEntry* entry = nullptr;
  std::string known;
  for (const FamilyEntry& e : kRegistry) {
    if (type == e.model_type) entry = &e;
    known += (known.empty() ? "" : ", ") + std::string(e.model_type);
  }
  if (!entry) bad(outer_file, "/model_type", "\"" + type + "\" is not a family the oracle models (" + known + ")");
  m.family = entry->family;
  // A multimodal model's decoder is described by its text_config (the fields below name that object).
  if (entry->multimodal && !(outer.contains("text_config") && outer["text_config"].is_object()))
    bad(outer_file, "/text_config", "missing: " + type + " describes its text decoder there");
  const json& c = entry->multimodal ? outer["text_config"] : outer;
  const std::string file = entry->multimodal ? outer_file + " (text_config)" : outer_file;
  m.vocab = positive(c, "vocab_size", file);
  m.hidden = positive(c, "hidden_size", file);
  m.layers = positive(c, "num_hidden_layers", file);
  m.heads = positive(c, "num_attention_heads", file);
  m.kv_heads = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null() ? positive(c, "num_key_value_heads", file)
                                                                                        : m.heads;
  if (m.heads % m.kv_heads) bad(file, "/num_key_value_heads", "must divide num_attention_heads");
  m.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? positive(c, "head_dim", file) : m.hidden / m.heads;
  if (m.head_dim % 2) bad(file, "/head_dim", "must be even (rope rotates pairs)");
  // kolibri1 has no dense MLP (every layer a MoE) and no intermediate_size.
  if (m.family == Family::Gemma3nText && c.contains("intermediate_size") && c["intermediate_size"].is_array()) {
    // Gemma3nTextConfig: one size per layer (an int stands for every layer); the forward has one.
    const json& sizes = c["intermediate_size"];
    if (static_cast<int64_t>(sizes.size()) != m.layers || sizes.empty() || !sizes[0].is_number_integer() ||
        sizes[0].get<int64_t>() <= 0 || std::any_of(sizes.begin(), sizes.end(), [&](const json& v) { return v != sizes[0]; }))
      bad(file, "/intermediate_size", "a list must give every layer the same positive size (one per layer is not modelled)");
    m.intermediate = sizes[0].get<int64_t>();
  } else {
    // ergo's dense MLP is first_dense_intermediate_size (its reader); lara_mini has none (every layer a MoE).
    m.intermediate = m.family == Family::Kolibri1 || m.family == Family::Ergo || m.family == Family::LaraMini
                         ? 0
                         : positive(c, "intermediate_size", file);
  }
  m.eps = number_or(c, "rms_norm_eps", 1e-6, file);
  // attention_bias is read by the families that have it (qwen3); elsewhere true is not modelled.
  if (m.family != Family::Qwen3 && m.family != Family::Qwen2 && m.family != Family::Qwen2Vl && m.family != Family::Qwen25Vl &&
      m.family != Family::GptOss && m.family != Family::SmolLM3 && m.family != Family::Cohere2 && m.family != Family::Olmo3 &&
      m.family != Family::GraniteSwa && m.family != Family::Dots1 && m.family != Family::GraniteMoeSwa &&
      m.family != Family::Mellum && m.family != Family::Flint && m.family != Family::Cohere2Moe && m.family != Family::Afmoe &&
      m.family != Family::ModernBertDecoder && m.family != Family::ModernBert && m.family != Family::Ultrabert &&
      m.family != Family::CohereCompassText && m.family != Family::Laguna && m.family != Family::OpenAIPrivacyFilter &&
      m.family != Family::Step3p7 && m.family != Family::RecurrentGemma && m.family != Family::Beam &&
      m.family != Family::MimoV2Flash && m.family != Family::Dory && m.family != Family::T5Gemma &&
      m.family != Family::LaraMini && m.family != Family::T5Gemma2 && m.family != Family::NeoMME &&
      c.value("attention_bias", false))
    bad(file, "/attention_bias", "true is not modelled for " + type);
  // Rope: default, or YaRN in one rope_scaling (4.x) / rope_parameters (5.x) dict for every layer.
  const json* scaling = nullptr;
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null()) scaling = &c["rope_scaling"];
  // gemma4's and lfm3's readers read their per-layer-type rope (proportional on full layers) themselves.
  if (m.family != Family::Gemma4Text && m.family != Family::Lfm3 && c.contains("rope_parameters") &&
      c["rope_parameters"].is_object()) {
    const json& rp = c["rope_parameters"];
    for (const json* p : {&rp, rp.contains("full_attention") ? &rp["full_attention"] : nullptr,
                          rp.contains("sliding_attention") ? &rp["sliding_attention"] : nullptr})
      if (p && p->is_object() && p->value("rope_type", std::string("default")) != "default") {
        if (p != &rp) bad(file, "/rope_parameters", "a per-layer-type rope_type other than default is not modelled");
        scaling = p;
      }
  }
  if (scaling) {
    const json& r = *scaling;
    const std::string rt = r.is_object() ? r.value("rope_type", r.value("type", std::string("default"))) : "";
    if (rt == "yarn") {
      if (m.family != Family::GptOss && m.family != Family::OpenAIPrivacyFilter)
        bad(file, "/rope_scaling",
            "YaRN is modelled (and checked against transformers) for gpt_oss and openai_privacy_filter only");
      m.yarn.factor = number_or(r, "factor", 0, file);
      if (m.yarn.factor <= 0) bad(file, "/rope_scaling/factor", "YaRN needs a positive factor");
      m.yarn.beta_fast = number_or(r, "beta_fast", 32, file);
      m.yarn.beta_slow = number_or(r, "beta_slow", 1, file);
      if (m.yarn.beta_fast == 0) m.yarn.beta_fast = 32;  // transformers: `get("beta_fast") or 32`
      if (m.yarn.beta_slow == 0) m.yarn.beta_slow = 1;
      m.yarn.original_max_position =
          number_or(r, "original_max_position_embeddings", number_or(c, "max_position_embeddings", 0, file), file);
      if (m.yarn.original_max_position <= 0) bad(file, "/rope_scaling/original_max_position_embeddings", "YaRN needs it");
      m.yarn.truncate = bool_or(r, "truncate", true, file);
      if (r.contains("mscale") || r.contains("mscale_all_dim")) bad(file, "/rope_scaling", "YaRN mscale is not modelled");
      const double mscale = m.yarn.factor <= 1 ? 1.0 : 0.1 * std::log(m.yarn.factor) + 1.0;
      m.yarn.attention_factor = number_or(r, "attention_factor", mscale, file);
    } else if (rt == "mrope" && (m.family == Family::Qwen2Vl || m.family == Family::Qwen25Vl)) {
      // M-RoPE: default rope frequencies in sections (read_qwen2_vl); transformers loads it as "default".
    } else if (rt != "default") {
      bad(file, "/rope_scaling", "rope_type \"" + rt + "\" is not modelled (default and yarn are)");
    }
  }
  const bool has_window = c.contains("sliding_window") && !c["sliding_window"].is_null();
  m.sliding_window = has_window ? positive(c, "sliding_window", file) : 0;
  entry->read(c, file, m);
  if (entry->multimodal) {
    m.tied = entry->outer_tie_only ? bool_or(outer, "tie_word_embeddings", false, outer_file)
                                   : text_config_tie(outer, outer_file, c, file);
    m.text_prefix = "model.language_model.";
  }
  for (int64_t w : m.windows)
    if (w < 0) bad(file, "/sliding_window", "must be positive");
  return m;
}
}  // namespace

const std::vector<double>& Model::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::runtime_error(config.name + ": model.safetensors has no tensor \"" + name + "\"");
  return it->second;
}

namespace {

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, frac = h & 0x3FF;
  double v = exp == 0 ? std::ldexp(frac, -24) : exp == 31 ? (frac ? NAN : INFINITY) : std::ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::vector<double>> read_safetensors(const std::string& path) {
  const std::string data = read_file(path);
  if (data.size() < 8) throw std::runtime_error(path + ": shorter than a safetensors header");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  if (n > data.size() - 8) throw std::runtime_error(path + ": header of " + std::to_string(n) + " bytes runs past the file");
  const json header = json::parse(data.begin() + 8, data.begin() + 8 + static_cast<std::ptrdiff_t>(n), nullptr, false);
  if (header.is_discarded() || !header.is_object()) throw std::runtime_error(path + ": the header is not a JSON object");
  const size_t base = 8 + n;
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = t.value("dtype", "");
    const json off = t.value("data_offsets", json());
    int64_t count = 1;
    for (const json& d : t.value("shape", json::array())) count *= d.get<int64_t>();
    const size_t width = dtype == "F64" ? 8 : dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
    if (!width)
      throw std::runtime_error(path + ": tensor \"" + name + "\" has dtype " + dtype + " (F64, F32, F16, BF16 are read)");
    if (!off.is_array() || off.size() != 2) throw std::runtime_error(path + ": tensor \"" + name + "\" has no data_offsets");
    const size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
    if (end < begin || end - begin != static_cast<size_t>(count) * width || base + end > data.size())
      throw std::runtime_error(path + ": tensor \"" + name + "\" data_offsets disagree with its shape or the file size");
    std::vector<double> v(static_cast<size_t>(count));
    const char* p = data.data() + base + begin;
    for (int64_t i = 0; i < count; ++i, p += width) {
      if (width == 8) std::memcpy(&v[i], p, 8);
      else if (width == 4) {
        float f;
        std::memcpy(&f, p, 4);
        v[i] = f;
      } else {
        uint16_t h;
        std::memcpy(&h, p, 2);
        if (dtype == "F16") v[i] = half_to_double(h);
        else {
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          float f;
          std::memcpy(&f, &bits, 4);
          v[i] = f;
        }
      }
    }
    out[name] = std::move(v);
  }
  return out;
}

std::string layer_name(int64_t l, const std::string& what) { return "model.layers." + std::to_string(l) + "." + what; }

}  // namespace

std::string content_digest(std::initializer_list<std::string_view> parts) {
  uint64_t fnv = 1469598103934665603ull;
  std::string joined;
  for (std::string_view part : parts) {
    const std::string length = std::to_string(part.size()) + ":";
    for (std::string_view piece : {std::string_view(length), part})
      for (unsigned char ch : piece) fnv = (fnv ^ ch) * 1099511628211ull;
    joined += length;
    joined += part;
  }
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(fnv),
                static_cast<unsigned long long>(std::hash<std::string>{}(joined)));
  return out;
}

namespace {
void read_stack(Model& m, const std::string& st, const std::string& cfg_path);
}

Model load_model(const std::string& dir) {
  Model m;
  const std::string cfg_path = dir + "/config.json";
  const json c = json::parse(read_file(cfg_path), nullptr, false);
  if (c.is_discarded()) throw std::runtime_error(cfg_path + ": not valid JSON");
  m.config = parse_config(c, cfg_path);
  m.config.name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  const std::string st = dir + "/model.safetensors";
  m.tensors = read_safetensors(st);
  m.digest = content_digest({m.config.name, read_file(cfg_path), read_file(st)});
  if (m.config.encoder) {  // an encoder-decoder: the encoder's tensors (under its text_prefix) as a model of their own
    auto encoder = std::make_shared<Model>();
    encoder->config = *m.config.encoder;
    encoder->config.name = m.config.name + " (encoder)";
    for (const auto& [name, t] : m.tensors)
      if (name.rfind(encoder->config.text_prefix, 0) == 0) encoder->tensors[name] = t;
    encoder->digest = m.digest;
    read_stack(*encoder, st, cfg_path);
    m.encoder = std::move(encoder);
  }
  if (!m.config.shared_embedding.empty()) {  // a tied t5gemma2: the decoder's embedding is the encoder's
    auto it = m.tensors.find(m.config.shared_embedding);
    if (it == m.tensors.end()) throw std::runtime_error(st + ": no tensor \"" + m.config.shared_embedding + "\"");
    m.tensors[m.config.text_prefix + "embed_tokens.weight"] = it->second;
  }
  read_stack(m, st, cfg_path);
  return m;
}

namespace {
// The tensors of one stack under the names the forward reads, each checked against its shape.
void read_stack(Model& m, const std::string& st, const std::string& cfg_path) {
  if (!m.config.text_prefix.empty()) {
    // A multimodal checkpoint: its text decoder's tensors become the decoder's own names, the towers go.
    std::map<std::string, std::vector<double>> text;
    for (auto& [name, t] : m.tensors) {
      if (name.rfind(m.config.text_prefix, 0) == 0) text["model." + name.substr(m.config.text_prefix.size())] = std::move(t);
      else if (name.rfind(m.config.head_prefix + "lm_head.", 0) == 0)
        text[name.substr(m.config.head_prefix.size())] = std::move(t);
    }
    if (!text.count("model.embed_tokens.weight"))
      throw std::runtime_error(st + ": no tensor \"" + m.config.text_prefix + "embed_tokens.weight\" (a " +
                               to_string(m.config.family) + " checkpoint keeps its text decoder under " + m.config.text_prefix +
                               ")");
    m.tensors = std::move(text);
  }
  const ModelConfig& k = m.config;
  if (!k.tensor_names.empty()) {
    // The family's checkpoint names under the forward's (lfm3's operator_norm is input_layernorm, ...).
    std::map<std::string, std::vector<double>> renamed;
    for (auto& [name, t] : m.tensors) {
      std::string to = name;
      const size_t layer_at = name.rfind("model.layers.", 0) == 0 ? name.find('.', 13) + 1 : 0;
      for (const auto& [from, into] : k.tensor_names) {
        const bool whole = from.rfind("model.", 0) == 0 || name.rfind("model.", 0) != 0;
        const size_t at = whole ? 0 : layer_at;
        if ((whole || layer_at > 0) && name.compare(at, from.size(), from) == 0) {
          to = name.substr(0, at) + into + name.substr(at + from.size());
          break;
        }
      }
      if (renamed.count(to)) throw std::runtime_error(st + ": tensors \"" + name + "\" and another both read as \"" + to + "\"");
      renamed[to] = std::move(t);
    }
    m.tensors = std::move(renamed);
  }
  if (!k.layer_weights.empty()) {
    // A looped section unrolled: the forward's layer l runs checkpoint layer layer_weights[l]'s tensors, copied to its
    // own names (a layer the forward does not run is left out).
    std::map<std::string, std::vector<double>> unrolled;
    std::map<int64_t, std::vector<std::pair<std::string, const std::vector<double>*>>> by_layer;
    for (const auto& [name, t] : m.tensors) {
      if (name.rfind("model.layers.", 0) != 0) {
        unrolled[name] = t;
        continue;
      }
      const size_t dot = name.find('.', 13);
      if (dot == std::string::npos) throw std::runtime_error(st + ": tensor \"" + name + "\" names no layer");
      by_layer[std::stoll(name.substr(13, dot - 13))].emplace_back(name.substr(dot + 1), &t);
    }
    for (size_t l = 0; l < k.layer_weights.size(); ++l)
      for (const auto& [rest, t] : by_layer[k.layer_weights[l]]) unrolled[layer_name(static_cast<int64_t>(l), rest)] = *t;
    m.tensors = std::move(unrolled);
  }
  if (k.fused_projections || k.fused_mlp) {
    // qkv_proj rows are [q; k; v], gate_up_proj rows [gate; up] (a bias the same, one column): split into the names
    // the forward reads.
    auto split = [&](const std::string& fused, const std::vector<std::pair<std::string, int64_t>>& parts, int64_t cols) {
      const std::vector<double> t = m.at(fused);
      int64_t rows = 0;
      for (const auto& p : parts) rows += p.second;
      if (static_cast<int64_t>(t.size()) != rows * cols)
        throw std::runtime_error(st + ": tensor \"" + fused + "\" has " + std::to_string(t.size()) + " values, expected " +
                                 std::to_string(rows * cols));
      size_t at = 0;
      for (const auto& [name, n] : parts) {
        const size_t len = static_cast<size_t>(n * cols);
        m.tensors[name].assign(t.begin() + static_cast<std::ptrdiff_t>(at), t.begin() + static_cast<std::ptrdiff_t>(at + len));
        at += len;
      }
    };
    for (int64_t l = 0; l < k.layers; ++l) {
      if (k.fused_projections)
        split(layer_name(l, "self_attn.qkv_proj.weight"),
              {{layer_name(l, "self_attn.q_proj.weight"), k.heads * k.head_dim},
               {layer_name(l, "self_attn.k_proj.weight"), k.kv_heads * k.head_dim},
               {layer_name(l, "self_attn.v_proj.weight"), k.kv_heads * k.head_dim}},
              k.hidden);
      if (k.fused_projections && k.qkv_bias)
        split(layer_name(l, "self_attn.qkv_proj.bias"),
              {{layer_name(l, "self_attn.q_proj.bias"), k.heads * k.head_dim},
               {layer_name(l, "self_attn.k_proj.bias"), k.kv_heads * k.head_dim},
               {layer_name(l, "self_attn.v_proj.bias"), k.kv_heads * k.head_dim}},
              1);
      for (const char* what : {"weight", "bias"}) {
        if ((what == std::string("bias") && !k.mlp_bias) || k.mlp_ungated) continue;  // ergo: no gate_up_proj
        split(layer_name(l, std::string("mlp.gate_up_proj.") + what),
              {{layer_name(l, std::string("mlp.gate_proj.") + what), k.intermediate},
               {layer_name(l, std::string("mlp.up_proj.") + what), k.intermediate}},
              what == std::string("bias") ? 1 : k.hidden);
      }
    }
  }
  for (int64_t l = 0; l < k.layers; ++l) {
    // A gated DeltaNet block's fused linear_attn.in_proj [2 Kd + Vd + Vd + 2 Hv, H] (the checkpoint's layout, rows [qkv |
    // z | b | a]) split into the projections transformers loads it as.
    const std::string fused = layer_name(l, "linear_attn.in_proj.weight");
    if (!k.delta(l) || !m.tensors.count(fused)) continue;
    const std::vector<double> t = m.tensors[fused];
    const int64_t Vd = k.delta_v_heads * k.delta_v_dim, parts[4] = {k.delta_conv_width(), Vd, k.delta_v_heads, k.delta_v_heads};
    if (static_cast<int64_t>(t.size()) != (parts[0] + parts[1] + parts[2] + parts[3]) * k.hidden)
      throw std::runtime_error(st + ": tensor \"" + fused + "\" has " + std::to_string(t.size()) + " values, expected " +
                               std::to_string((parts[0] + parts[1] + parts[2] + parts[3]) * k.hidden));
    const char* names[4] = {"qkv", "z", "b", "a"};
    size_t at = 0;
    for (int i = 0; i < 4; ++i) {
      const size_t len = static_cast<size_t>(parts[i] * k.hidden);
      m.tensors[layer_name(l, std::string("linear_attn.in_proj_") + names[i] + ".weight")].assign(
          t.begin() + static_cast<std::ptrdiff_t>(at), t.begin() + static_cast<std::ptrdiff_t>(at + len));
      at += len;
    }
    m.tensors.erase(fused);
  }
  if (k.moe.routing == MoeRouting::TopK && !k.mlp_ungated) {  // ergo's experts.up_proj is x @ W already
    // Each expert's module (experts.<e>.{gate,up,down}_proj.weight, nn.Linear's [out, in]) into the
    // x @ W tensors the forward reads: experts.gate_up_proj [E, H, 2I] (gate the first half) and
    // experts.down_proj [E, I, H] (H the experts' width: MoeConfig::pooled where set).
    const int64_t E = k.moe.experts, I = k.moe.intermediate, H = k.expert_width();
    for (int64_t l = 0; l < k.layers; ++l) {
      if (k.moe.layers.empty() || !k.moe.layers[static_cast<size_t>(l)]) continue;
      std::vector<double> gate_up(static_cast<size_t>(E * H * 2 * I)), down(static_cast<size_t>(E * I * H));
      auto sized = [&](const std::string& name, int64_t size) -> const std::vector<double>& {
        const std::vector<double>& t = m.at(name);
        if (static_cast<int64_t>(t.size()) != size)
          throw std::runtime_error(st + ": tensor \"" + name + "\" has " + std::to_string(t.size()) + " values, expected " +
                                   std::to_string(size));
        return t;
      };
      // Stacked: [E, 2I, H] and [E, H, I] read in place; modules: each expert's three tensors.
      const std::vector<double> no_tensor;
      const std::vector<double>& stacked_gate_up =
          k.moe.stacked_experts ? sized(layer_name(l, k.mlp_prefix + "experts.gate_up_proj"), E * 2 * I * H) : no_tensor;
      const std::vector<double>& stacked_down =
          k.moe.stacked_experts ? sized(layer_name(l, k.mlp_prefix + "experts.down_proj"), E * H * I) : no_tensor;
      for (int64_t e = 0; e < E; ++e) {
        const std::string expert = k.mlp_prefix + "experts." + std::to_string(e) + ".";
        const double* g = k.moe.stacked_experts ? stacked_gate_up.data() + e * 2 * I * H
                                                : sized(layer_name(l, expert + "gate_proj.weight"), I * H).data();
        const double* u = k.moe.stacked_experts ? g + I * H : sized(layer_name(l, expert + "up_proj.weight"), I * H).data();
        const double* d = k.moe.stacked_experts ? stacked_down.data() + e * H * I
                                                : sized(layer_name(l, expert + "down_proj.weight"), H * I).data();
        for (int64_t i = 0; i < I; ++i)
          for (int64_t h = 0; h < H; ++h) {
            gate_up[static_cast<size_t>((e * H + h) * 2 * I + i)] = g[i * H + h];
            gate_up[static_cast<size_t>((e * H + h) * 2 * I + I + i)] = u[i * H + h];
            down[static_cast<size_t>((e * I + i) * H + h)] = d[h * I + i];
          }
      }
      if (!k.moe.fused_shared.empty() && k.moe.shared_intermediate > 0) {
        // input_linear [2S, H]: the gate's rows, then the up's; output_linear is the down projection.
        const int64_t S = k.moe.shared_intermediate;
        const std::vector<double>& in = sized(layer_name(l, k.moe.fused_shared + "input_linear.weight"), 2 * S * H);
        const std::string shared = k.mlp_prefix + k.moe.shared;
        m.tensors[layer_name(l, shared + "gate_proj.weight")].assign(in.begin(), in.begin() + S * H);
        m.tensors[layer_name(l, shared + "up_proj.weight")].assign(in.begin() + S * H, in.end());
        m.tensors[layer_name(l, shared + "down_proj.weight")] =
            sized(layer_name(l, k.moe.fused_shared + "output_linear.weight"), H * S);
      }
      m.tensors[layer_name(l, k.mlp_prefix + "experts.gate_up_proj")] = std::move(gate_up);
      m.tensors[layer_name(l, k.mlp_prefix + "experts.down_proj")] = std::move(down);
    }
  }
  auto need = [&](const std::string& name, int64_t size) {
    const auto& t = m.at(name);
    if (static_cast<int64_t>(t.size()) != size)
      throw std::runtime_error(st + ": tensor \"" + name + "\" has " + std::to_string(t.size()) + " values, expected " +
                               std::to_string(size));
  };
  if (k.norms_weightless) {
    // The layers' and the final norm have no weight (neomme): ones, which x * w leaves exact.
    std::vector<std::string> names{"model.norm.weight"};
    for (int64_t l = 0; l < k.layers; ++l)
      for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) names.push_back(layer_name(l, n));
    for (const std::string& name : names) {
      if (m.tensors.count(name))
        throw std::runtime_error(st + ": tensor \"" + name + "\" is a weight its family's norm has none of");
      m.tensors[name].assign(static_cast<size_t>(k.hidden), 1.0);
    }
  }
  need("model.embed_tokens.weight", k.vocab * k.embed_width());
  if (!k.l2_norm) need("model.norm.weight", k.hidden);  // l2_norm: every norm weightless
  if (!k.tied && !k.hidden_output) need("lm_head.weight", k.out_width() * k.embed_width());
  if (k.embedding_rank > 0) {  // the factorized embedding's projection, and the head's own where untied
    need("model.embed_tokens.embedding_projection.weight", k.hidden * k.embedding_rank);
    if (!k.tied) need("unembedding_projection.weight", k.hidden * k.embedding_rank);
  }
  if (k.logit_channel_scale > 0) need("lm_head.logit_scale", k.vocab);
  if (k.tied && k.outputs > 0) throw std::runtime_error(cfg_path + ": an output of its own width cannot be the tied embedding");
  // A LayerNorm's weight (and bias where norm_bias).
  auto need_norm = [&](const std::string& prefix) {
    need(prefix + "weight", k.hidden);
    if (k.norm_bias) need(prefix + "bias", k.hidden);
  };
  if (k.norm_bias) need("model.norm.bias", k.hidden);
  if (k.embed_norm) need_norm("model.embed_norm.");
  if (k.prediction_head == PredictionHead::ModernBert) {
    need("head.dense.weight", k.hidden * k.hidden);
    if (k.head_dense_bias) need("head.dense.bias", k.hidden);
    need_norm("head.norm.");
  } else if (k.prediction_head == PredictionHead::Ultrabert) {
    need("head.linear1.weight", k.head_size * k.hidden);
    need("head.linear2.weight", k.hidden * k.head_size);
  }
  if (k.lm_head_bias) need("lm_head.bias", k.out_width());
  for (int64_t l = 0; l < k.layers; ++l) {
    const int64_t qd = k.q_heads(l) * k.dim(l), kvd = k.kv(l) * k.dim(l), od = k.q_heads(l) * k.vdim(l),
                  kvdv = k.kv(l) * k.vdim(l);
    const bool recurrent = k.recurrent(l), delta = k.delta(l);  // an RG-LRU or gated DeltaNet block in place of the attention
    const bool conv = k.conv(l) || recurrent || delta;          // a short-convolution block in place of the attention
    const bool own_kv = !conv && !k.shares_kv(l), own_v = own_kv && !(!k.k_eq_v.empty() && k.k_eq_v[static_cast<size_t>(l)]);
    if (delta) {
      const int64_t Vd = k.delta_v_heads * k.delta_v_dim;
      need(layer_name(l, "linear_attn.in_proj_qkv.weight"), k.delta_conv_width() * k.hidden);
      need(layer_name(l, "linear_attn.in_proj_z.weight"), Vd * k.hidden);
      need(layer_name(l, "linear_attn.in_proj_b.weight"), k.delta_v_heads * k.hidden);
      need(layer_name(l, "linear_attn.in_proj_a.weight"), k.delta_v_heads * k.hidden);
      need(layer_name(l, "linear_attn.conv1d.weight"), k.delta_conv_width() * k.conv_kernel);
      need(layer_name(l, "linear_attn.A_log"), k.delta_v_heads);
      need(layer_name(l, "linear_attn.dt_bias"), k.delta_v_heads);
      need(layer_name(l, "linear_attn.norm.weight"), k.delta_v_dim);
      need(layer_name(l, "linear_attn.out_proj.weight"), k.hidden * Vd);
    } else if (recurrent) {
      const int64_t W = k.lru_width, w = k.lru_width / std::max<int64_t>(1, k.lru_blocks);
      for (const char* what : {"linear_x.", "linear_y."}) {
        need(layer_name(l, std::string("temporal_block.") + what + "weight"), W * k.hidden);
        need(layer_name(l, std::string("temporal_block.") + what + "bias"), W);
      }
      need(layer_name(l, "temporal_block.linear_out.weight"), k.hidden * W);
      need(layer_name(l, "temporal_block.linear_out.bias"), k.hidden);
      need(layer_name(l, "temporal_block.conv_1d.weight"), W * k.conv_kernel);
      need(layer_name(l, "temporal_block.conv_1d.bias"), W);
      need(layer_name(l, "temporal_block.rg_lru.recurrent_param"), W);
      for (const char* gate : {"input_gate_", "recurrent_gate_"}) {
        need(layer_name(l, std::string("temporal_block.rg_lru.") + gate + "weight"), k.lru_blocks * w * w);
        need(layer_name(l, std::string("temporal_block.rg_lru.") + gate + "bias"), W);
      }
    } else if (conv) {
      need(layer_name(l, "conv.in_proj.weight"), 3 * k.hidden * k.hidden);
      need(layer_name(l, "conv.conv.weight"), k.hidden * k.conv_kernel);
      need(layer_name(l, "conv.out_proj.weight"), k.hidden * k.hidden);
      if (k.conv_bias) {
        need(layer_name(l, "conv.in_proj.bias"), 3 * k.hidden);
        need(layer_name(l, "conv.conv.bias"), k.hidden);
        need(layer_name(l, "conv.out_proj.bias"), k.hidden);
      }
    } else {
      need(layer_name(l, "self_attn.q_proj.weight"), qd * k.hidden);
      need(layer_name(l, "self_attn.o_proj.weight"), k.hidden * od);
      if (k.attn_gate) need(layer_name(l, "self_attn.g_proj.weight"), (k.attn_gate_elementwise ? od : k.q_heads(l)) * k.hidden);
    }
    if (own_kv) need(layer_name(l, "self_attn.k_proj.weight"), kvd * k.hidden);
    if (own_v) need(layer_name(l, "self_attn.v_proj.weight"), kvdv * k.hidden);
    if (k.qkv_bias && !conv) {
      need(layer_name(l, "self_attn.q_proj.bias"), qd);
      need(layer_name(l, "self_attn.k_proj.bias"), kvd);
      need(layer_name(l, "self_attn.v_proj.bias"), kvdv);
    }
    if (k.o_bias && !conv) need(layer_name(l, "self_attn.o_proj.bias"), k.hidden);
    if (k.initial_mix) need(layer_name(l, "lambdas"), 2);
    if (k.exclusive_attention && !conv) need(layer_name(l, "self_attn.exclusive_self_attention.alpha"), k.q_heads(l));
    if (k.value_embed(l)) need("model.value_embeddings.weight", k.vocab * kvdv);
    const bool moe = !k.moe.layers.empty() && k.moe.layers[static_cast<size_t>(l)];
    const bool gpt_oss = moe && k.moe.routing == MoeRouting::GptOss;
    if (!moe || k.moe.shared_intermediate > 0) {  // the dense MLP, or the shared expert
      const std::string mlp = k.mlp_prefix + (moe ? k.moe.shared : "");
      const int64_t inter = moe ? k.moe.shared_intermediate : k.intermediate;
      if (!k.mlp_ungated) need(layer_name(l, mlp + "gate_proj.weight"), inter * k.hidden);
      need(layer_name(l, mlp + "up_proj.weight"), inter * k.hidden);
      if (moe && k.moe.shared_norm) need(layer_name(l, mlp + "norm.weight"), k.hidden);
      need(layer_name(l, mlp + "down_proj.weight"), k.hidden * inter);
      if (k.mlp_bias && !moe) {
        need(layer_name(l, mlp + "gate_proj.bias"), inter);
        need(layer_name(l, mlp + "up_proj.bias"), inter);
        need(layer_name(l, mlp + "down_proj.bias"), k.hidden);
      }
      if (moe && k.moe.shared_gate) need(layer_name(l, k.mlp_prefix + "shared_expert_gate.weight"), k.hidden);
    }
    if (moe) {
      const int64_t E = k.moe.experts, I = k.moe.intermediate, P = k.expert_width();
      need(layer_name(l, k.mlp_prefix + k.moe.router + "weight"), E * k.hidden);
      if (k.moe.selection_bias) need(layer_name(l, k.mlp_prefix + k.moe.router + "e_score_correction_bias"), E);
      if (k.mlp_ungated) need(layer_name(l, k.mlp_prefix + "experts.up_proj"), E * P * I);
      else need(layer_name(l, k.mlp_prefix + "experts.gate_up_proj"), E * P * 2 * I);
      if (k.moe.expert_norms) need(layer_name(l, k.mlp_prefix + "experts.post_expert_norm.weight"), E * P);
      need(layer_name(l, k.mlp_prefix + "experts.down_proj"), E * I * P);
      if (k.moe.pooled > 0) {
        need(layer_name(l, k.mlp_prefix + "pre_expert_proj.weight"), P * k.hidden);
        need(layer_name(l, k.mlp_prefix + "pre_expert_norm.weight"), P);
        need(layer_name(l, k.mlp_prefix + "post_expert_proj.weight"), k.hidden * P);
      }
      if (k.moe.expert_out_norm) need(layer_name(l, k.mlp_prefix + "experts.post_expert_norm.weight"), P);
      if (gpt_oss) {
        need(layer_name(l, k.mlp_prefix + "router.bias"), E);
        need(layer_name(l, k.mlp_prefix + "experts.gate_up_proj_bias"), E * 2 * I);
        need(layer_name(l, k.mlp_prefix + "experts.down_proj_bias"), E * k.hidden);
      }
    }
    if (k.sink(l) && !conv) need(layer_name(l, "self_attn.sinks"), k.q_heads(l));
    if (k.norm_placement != NormPlacement::Post && !(k.embed_norm && l == 0) && !k.l2_norm)
      need_norm(layer_name(l, "input_layernorm."));
    if (!k.parallel_block && !k.post_attn_norm_weightless && !k.l2_norm)
      need_norm(layer_name(l, k.norm_placement == NormPlacement::Pre ? k.pre_ff_norm : "post_attention_layernorm."));
    if (k.residual_gate_temperature > 0) {
      need(layer_name(l, "post_attention_residual_gate.gate"), k.hidden);
      need(layer_name(l, "post_feedforward_residual_gate.gate"), k.hidden);
    }
    if (k.norm_placement == NormPlacement::Sandwich && !k.l2_norm)
      need(layer_name(l, "pre_feedforward_layernorm.weight"), k.hidden);
    if (k.norm_placement != NormPlacement::Pre && !k.l2_norm) need(layer_name(l, "post_feedforward_layernorm.weight"), k.hidden);
    if (k.query_channel_scale > 0 && !conv) need(layer_name(l, "self_attn.sqk"), qd);
    if (k.attn_gate_scale > 0 && !conv) need(layer_name(l, "self_attn.s_gate"), qd);
    if (k.mlp_channel_scale > 0) {
      need(layer_name(l, "mlp.suv_gate"), k.intermediate);
      need(layer_name(l, "mlp.suv_up"), k.intermediate);
    }
    if (k.residual_interpolation > 0) {
      need(layer_name(l, "lambda_1"), k.hidden);
      need(layer_name(l, "lambda_2"), k.hidden);
    }
    if (k.qk_norm && !k.qk_norm_weightless && !conv) {
      need(layer_name(l, "self_attn.q_norm.weight"), k.qk_norm_whole ? qd : k.dim(l));
      if (own_kv) need(layer_name(l, "self_attn.k_norm.weight"), k.qk_norm_whole ? kvd : k.dim(l));
    }
    if (k.layer_scalar) need(layer_name(l, "layer_scalar"), 1);
    if (k.altup_inputs > 0) {
      const int64_t A = k.altup_inputs;
      need(layer_name(l, "altup.correct_output_scale"), k.hidden);
      need(layer_name(l, "altup.correction_coefs.weight"), A * A);
      need(layer_name(l, "altup.prediction_coefs.weight"), A * A * A);
      need(layer_name(l, "altup.modality_router.weight"), A * k.hidden);
      need(layer_name(l, "altup.router_norm.weight"), k.hidden);
    }
    if (k.laurel_rank > 0) {
      need(layer_name(l, "laurel.linear_left.weight"), k.laurel_rank * k.hidden);
      need(layer_name(l, "laurel.linear_right.weight"), k.hidden * k.laurel_rank);
      need(layer_name(l, "laurel.post_laurel_norm.weight"), k.hidden);
    }
    if (k.per_layer_input > 0) {
      const std::string& in = k.per_layer_tensors.second;
      need(layer_name(l, in + "per_layer_input_gate.weight"), k.per_layer_input * k.hidden);
      need(layer_name(l, in + "per_layer_projection.weight"), k.hidden * k.per_layer_input);
      need(layer_name(l, in + "post_per_layer_input_norm.weight"), k.hidden);
    }
    if (k.residual_gates) {
      need(layer_name(l, "attention_residual_gate.weight"), k.hidden);
      need(layer_name(l, "feedforward_residual_gate.weight"), k.hidden);
    }
    if (k.cross_width > 0 && !k.merged_cross_attention) {  // an encoder-decoder's cross-attention (q and o as self's)
      const int64_t qd = k.q_heads(l) * k.dim(l), kvd = k.kv(l) * k.dim(l);
      need(layer_name(l, "cross_attn.q_proj.weight"), qd * k.hidden);
      need(layer_name(l, "cross_attn.k_proj.weight"), kvd * k.cross_width);
      need(layer_name(l, "cross_attn.v_proj.weight"), kvd * k.cross_width);
      need(layer_name(l, "cross_attn.o_proj.weight"), k.hidden * qd);
      if (k.qkv_bias) {
        need(layer_name(l, "cross_attn.q_proj.bias"), qd);
        need(layer_name(l, "cross_attn.k_proj.bias"), kvd);
        need(layer_name(l, "cross_attn.v_proj.bias"), kvd);
      }
      if (k.o_bias) need(layer_name(l, "cross_attn.o_proj.bias"), k.hidden);
      need(layer_name(l, "pre_cross_attn_layernorm.weight"), k.hidden);
      need(layer_name(l, "post_cross_attn_layernorm.weight"), k.hidden);
    }
  }
  if (k.per_layer_input > 0) {
    const std::string& at = k.per_layer_tensors.first;
    if (k.per_layer_vocab > 0) need(at + "embed_tokens_per_layer.weight", k.per_layer_vocab * k.layers * k.per_layer_input);
    need(at + "per_layer_model_projection.weight", k.layers * k.per_layer_input * k.hidden);
    need(at + "per_layer_projection_norm.weight", k.per_layer_input);
  }
  for (int64_t i = 1; i < k.altup_inputs; ++i) {
    need("model.altup_projections." + std::to_string(i - 1) + ".weight", k.hidden * k.hidden);
    need("model.altup_unembed_projections." + std::to_string(i - 1) + ".weight", k.hidden * k.hidden);
  }
}
}  // namespace

namespace {

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// RMSNorm over n values; gemma applies its weight as (1 + w); no weight: the weightless norm; l2: the L2 norm (the sum
// of squares, not their mean: ModelConfig::l2_norm).
template <class T>
void rms_norm(const T* x, const std::vector<T>& w, int64_t n, T eps, bool plus_one, T* out, bool l2 = false);

// LayerNorm: (x - mean) / sqrt(var + eps) * w (+ b where a bias is given).
template <class T>
void layer_norm(const T* x, const std::vector<T>& w, int64_t n, T eps, T* out, const std::vector<T>& b = {}) {
  T mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<T>(n);
  std::vector<T> centred(x, x + n);
  for (T& v : centred) v -= mean;
  rms_norm(centred.data(), w, n, eps, false, out);
  if (!b.empty())
    for (int64_t i = 0; i < n; ++i) out[i] += b[static_cast<size_t>(i)];
}

template <class T>
void rms_norm(const T* x, const std::vector<T>& w, int64_t n, T eps, bool plus_one, T* out, bool l2) {
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const T inv = T(1) / std::sqrt((l2 ? sum : sum / static_cast<T>(n)) + eps);
  if (w.empty())
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  else
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * (plus_one ? T(1) + w[i] : w[i]);
}

// out[r] = sum_c W[r, c] x[c] (+ b[r]), W row-major [rows, cols] as nn.Linear stores it.
// The dot products of x with the four rows at `row`, `row + stride`, ... (n terms each) into out[0..3]:
// each summed over its terms in order, the same sums bit for bit as one row at a time, in four
// independent chains of additions instead of one (a float64 add's latency, not its throughput,
// bounds a single chain).
template <class T>
void dot4(const T* x, const T* row, int64_t stride, int64_t n, T* out) {
  const T *r0 = row, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t c = 0; c < n; ++c) {
    s0 += r0[c] * x[c];
    s1 += r1[c] * x[c];
    s2 += r2[c] * x[c];
    s3 += r3[c] * x[c];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

template <class T>
void matvec(const std::vector<T>& w, const T* x, int64_t rows, int64_t cols, T* out, const std::vector<T>& bias = {}) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) dot4(x, w.data() + r * cols, cols, cols, out + r);
  for (; r < rows; ++r) {
    const T* row = w.data() + r * cols;
    T s = 0;
    for (int64_t c = 0; c < cols; ++c) s += row[c] * x[c];
    out[r] = s;
  }
  if (!bias.empty())
    for (r = 0; r < rows; ++r) out[r] += bias[static_cast<size_t>(r)];
}

// Rotates pairs by pos * inv_freq[i]: (i, i + d/2) (transformers' rotate_half convention), or
// (2i, 2i + 1) (llama4's complex multiplication).
template <class T>
void rope(T* v, const std::vector<T>& inv_freq, int64_t d, int64_t pos, bool interleaved, T scale) {
  const int64_t h = d / 2;
  for (int64_t i = 0; i < h; ++i) {
    const T angle = static_cast<T>(pos) * inv_freq[static_cast<size_t>(i)];
    T c = std::cos(angle), s = std::sin(angle);
    if (scale != T(1)) c *= scale, s *= scale;  // YaRN's attention factor
    const int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + h;
    const T a = v[ia], b = v[ib];
    v[ia] = a * c - b * s;
    v[ib] = b * c + a * s;
  }
}

template <class T>
T round_kv(T x, bool half) {
  return half ? static_cast<T>(static_cast<_Float16>(x)) : x;
}

// To the nearest bfloat16 (ties to even), as torch rounds a float32 to bfloat16.
template <class T>
T round_bf16(T x) {
  float f = static_cast<float>(x);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) != 0x7F800000u) u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return static_cast<T>(f);
}

template <class T>
T silu(T a) {
  return a / (T(1) + std::exp(-a));
}

// muse_spark's residual gate of one hidden dimension (MuseSparkResidualGate): w = g / T, beta = sigmoid(w), alpha =
// sqrt(max(sigmoid(-w) * (1 + beta), 1e-3)); the add is alpha * x + beta * block.
std::pair<double, double> residual_gate(double g, double temperature) {
  const double w = g / temperature, beta = 1 / (1 + std::exp(-w));
  return {std::sqrt(std::max(1 / (1 + std::exp(w)) * (1 + beta), 1e-3)), beta};
}

// The MLP's activation (and the prediction head's): gelu_pytorch_tanh, the exact gelu, or SiLU.
template <class T>
T activate(const ModelConfig& k, T a) {
  if (k.relu2) return a > T(0) ? a * a : T(0);  // ergo's relu(x)^2
  if (!k.gelu) return silu(a);
  if (k.gelu_exact) return a * T(0.5) * (T(1) + std::erf(a * static_cast<T>(M_SQRT1_2)));
  return T(0.5) * a * (T(1) + std::tanh(static_cast<T>(0.7978845608028654) * (a + T(0.044715) * a * a * a)));
}

}  // namespace

// The layer's rule, explicitly: key j is visible to query pos iff j <= pos and pos - W < j (sliding,
// window W) or j / C == pos / C (chunked, chunk C).
int64_t first_visible_key(const ModelConfig& k, const OracleOptions& o, int64_t layer, int64_t pos, int64_t forgotten) {
  const size_t li = static_cast<size_t>(layer);
  const int64_t window = o.windows.empty() ? k.windows[li] : o.windows[li];
  const int64_t chunk = o.chunks.empty() ? (k.chunks.empty() ? 0 : k.chunks[li]) : o.chunks[li];
  const int64_t shift = o.chunk_shift;
  int64_t first = 0;
  if (k.bidirectional) return window > 0 ? std::max<int64_t>(0, pos - k.reach_before[li] - o.reach_delta) : 0;
  if (chunk > 0) first = pos < shift ? 0 : std::max<int64_t>(0, (pos - shift) / chunk * chunk + shift);
  else if (window > 0) first = std::max<int64_t>(0, pos - window - (pos == o.window_delta_position ? o.window_delta : 0) + 1);
  if (k.attention(layer) != Attention::Full) first = std::max(first, std::min(forgotten, pos));
  return first;
}

int64_t last_visible_key(const ModelConfig& k, const OracleOptions& o, int64_t layer, int64_t pos, int64_t length) {
  if (!k.bidirectional || o.causal) return pos;
  const size_t li = static_cast<size_t>(layer);
  const int64_t window = o.windows.empty() ? k.windows[li] : o.windows[li];
  return window > 0 ? std::min(length - 1, pos + k.reach_after[li] + o.reach_delta) : length - 1;
}

template <class T>
SequenceOracle<T>::SequenceOracle(const Model& model, const ModelConfig& config, OracleOptions options)
    : config_(config), options_(std::move(options)) {
  const ModelConfig& k = config_;
  if (!options_.windows.empty() && static_cast<int64_t>(options_.windows.size()) != k.layers)
    throw std::invalid_argument("OracleOptions::windows needs one window per layer");
  if (!options_.chunks.empty() && static_cast<int64_t>(options_.chunks.size()) != k.layers)
    throw std::invalid_argument("OracleOptions::chunks needs one chunk size per layer");
  if (!k.chunks.empty() && static_cast<int64_t>(k.chunks.size()) != k.layers)
    throw std::invalid_argument("ModelConfig::chunks needs one chunk size per layer");
  if (!k.rope_layers.empty() && static_cast<int64_t>(k.rope_layers.size()) != k.layers)
    throw std::invalid_argument("ModelConfig::rope_layers needs one entry per layer");
  if ((k.depth_scaled_residual || k.residual_gates || k.residual_interpolation > 0 || k.residual_gate_temperature > 0) &&
      (k.norm_placement != NormPlacement::Sandwich || k.parallel_block))
    throw std::invalid_argument(
        "ModelConfig's residual rules (depth_scaled_residual, residual_gates, residual_interpolation, "
        "residual_gate_temperature): modelled with the sandwich norms only");
  if (k.v_head_dim > 0 && !k.k_eq_v.empty() && std::find(k.k_eq_v.begin(), k.k_eq_v.end(), true) != k.k_eq_v.end())
    throw std::invalid_argument("ModelConfig::v_head_dim: values that are the keys have the keys' size");
  if (!k.sink_layers.empty() && static_cast<int64_t>(k.sink_layers.size()) != k.layers)
    throw std::invalid_argument("ModelConfig::sink_layers needs one entry per layer");
  if (k.bidirectional &&
      (static_cast<int64_t>(k.reach_before.size()) != k.layers || static_cast<int64_t>(k.reach_after.size()) != k.layers))
    throw std::invalid_argument("ModelConfig: an encoder needs reach_before and reach_after per layer");
  for (size_t n : {k.rope_thetas.size(), k.rope_angles.size(), k.head_dims.size(), k.layer_kv_heads.size(), k.k_eq_v.size(),
                   k.kv_source.size(), k.rotary_dims.size(), k.recurrent_layers.size(), k.layer_heads.size(), k.mlp_limits.size(),
                   k.moe.expert_limits.size(), k.layer_weights.size(), k.loop_entries.size(), k.delta_layers.size(),
                   k.value_embed_layers.size()})
    if (n != 0 && static_cast<int64_t>(n) != k.layers)
      throw std::invalid_argument("ModelConfig: a per-layer field needs one entry per layer");
  if (k.cross_width > 0) {
    if (!k.encoder || !model.encoder || k.cross_width != k.encoder->hidden)
      throw std::invalid_argument(
          "ModelConfig::cross_width: an encoder-decoder needs its encoder (the model's, its hidden size)");
    if (k.norm_placement != NormPlacement::Sandwich || k.parallel_block || k.conv_layers.size() || k.recurrent_layers.size() ||
        k.altup_inputs > 0 || k.shares_kv(0) || !k.kv_source.empty())
      throw std::invalid_argument("ModelConfig::cross_width: cross-attention is modelled in sandwich attention layers only");
    encoder_ = model.encoder;
  }
  if (k.merged_cross_attention &&
      (k.cross_width != k.hidden || k.sinks || k.v_norm || k.qk_norm_whole || k.qk_norm_weightless || k.qk_l2_norm || k.l2_norm ||
       k.v_head_dim > 0 || k.value_scale != 1 || !k.k_eq_v.empty() || !k.delta_layers.empty()))
    throw std::invalid_argument(
        "ModelConfig::merged_cross_attention: an encoder-decoder's decoder of its encoder's width, its keys k_proj and "
        "a per-head k_norm (no sinks, value norm or value head size of its own)");
  if (k.initial_mix && (k.norm_placement != NormPlacement::Pre || k.layer_norm || !k.conv_layers.empty() ||
                        !k.recurrent_layers.empty() || !k.delta_layers.empty()))
    throw std::invalid_argument("ModelConfig::initial_mix: modelled in pre-norm RMS attention layers only");
  embed_ = as<T>(model.at("model.embed_tokens.weight"));
  if (k.embedding_rank > 0) {
    embed_proj_ = as<T>(model.at("model.embed_tokens.embedding_projection.weight"));
    unembed_proj_ = k.tied ? embed_proj_ : as<T>(model.at("unembedding_projection.weight"));
  }
  if (!k.value_embed_layers.empty()) value_embed_ = as<T>(model.at("model.value_embeddings.weight"));
  if (!k.loop_entries.empty() && k.layer_norm)
    throw std::invalid_argument("ModelConfig::loop_entries: a loop's entry norm is an RMS or L2 norm, not a LayerNorm");
  if (!k.l2_norm) final_norm_ = as<T>(model.at("model.norm.weight"));  // l2_norm: weightless
  if (k.logit_channel_scale > 0)
    for (double v : model.at("lm_head.logit_scale")) logit_scales_.push_back(static_cast<T>(v * k.logit_channel_scale));
  if (!k.hidden_output) lm_head_ = k.tied ? embed_ : as<T>(model.at("lm_head.weight"));
  if (k.norm_bias) final_norm_bias_ = as<T>(model.at("model.norm.bias"));
  if (k.embed_norm) {
    embed_norm_ = as<T>(model.at("model.embed_norm.weight"));
    if (k.norm_bias) embed_norm_bias_ = as<T>(model.at("model.embed_norm.bias"));
  }
  if (k.prediction_head == PredictionHead::ModernBert) {
    head_dense_ = as<T>(model.at("head.dense.weight"));
    if (k.head_dense_bias) head_dense_bias_ = as<T>(model.at("head.dense.bias"));
    head_norm_ = as<T>(model.at("head.norm.weight"));
    if (k.norm_bias) head_norm_bias_ = as<T>(model.at("head.norm.bias"));
  } else if (k.prediction_head == PredictionHead::Ultrabert) {
    head_dense_ = as<T>(model.at("head.linear1.weight"));  // [head_size, H]
    head_norm_ = as<T>(model.at("head.linear2.weight"));   // [H, head_size]: stands where ModernBERT's norm does
  }
  if (k.lm_head_bias) lm_head_bias_ = as<T>(model.at("lm_head.bias"));
  if (k.per_layer_input > 0) {
    const std::string& at = k.per_layer_tensors.first;
    if (k.per_layer_vocab > 0) per_layer_embed_ = as<T>(model.at(at + "embed_tokens_per_layer.weight"));
    per_layer_model_proj_ = as<T>(model.at(at + "per_layer_model_projection.weight"));
    per_layer_proj_norm_ = as<T>(model.at(at + "per_layer_projection_norm.weight"));
  }
  for (int64_t i = 1; i < k.altup_inputs; ++i) {
    altup_proj_.push_back(as<T>(model.at("model.altup_projections." + std::to_string(i - 1) + ".weight")));
    altup_unembed_.push_back(as<T>(model.at("model.altup_unembed_projections." + std::to_string(i - 1) + ".weight")));
  }
  if (!k.activation_sparsity.empty() && static_cast<int64_t>(k.activation_sparsity.size()) != k.layers)
    throw std::invalid_argument("ModelConfig::activation_sparsity needs one entry per layer");
  layers_.resize(static_cast<size_t>(k.layers));
  for (int64_t l = 0; l < k.layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const size_t li = static_cast<size_t>(l);
    auto get = [&](const std::string& what) { return as<T>(model.at(layer_name(l, what))); };
    const bool recurrent = k.recurrent(l), delta = k.delta(l);
    const bool conv = k.conv(l) || recurrent || delta;  // no attention: neither K/V nor q
    const bool own_kv = !conv && !k.shares_kv(l), own_v = own_kv && !(!k.k_eq_v.empty() && k.k_eq_v[li]);
    if (k.source(l) < 0 || k.source(l) > l || k.attention(k.source(l)) != k.attention(l) || k.dim(k.source(l)) != k.dim(l) ||
        k.kv(k.source(l)) != k.kv(l) || (conv && k.shares_kv(l)))
      throw std::invalid_argument("ModelConfig::kv_source: layer " + std::to_string(l) +
                                  " must share an earlier layer of its rule and shape");
    if (delta) {
      if (k.conv_kernel < 1) throw std::invalid_argument("ModelConfig::conv_kernel: a delta layer needs at least one tap");
      if (k.delta_k_heads < 1 || k.delta_v_heads % k.delta_k_heads || k.delta_k_dim < 1 || k.delta_v_dim < 1)
        throw std::invalid_argument("ModelConfig::delta_v_heads: must be a multiple of delta_k_heads (and the sizes positive)");
      // Its out_proj stands where the attention's o_proj does: the rest of the layer is the same.
      L.delta_qkv = get("linear_attn.in_proj_qkv.weight");
      L.delta_z = get("linear_attn.in_proj_z.weight");
      L.delta_b = get("linear_attn.in_proj_b.weight");
      L.delta_a = get("linear_attn.in_proj_a.weight");
      L.conv = get("linear_attn.conv1d.weight");
      L.delta_a_log = get("linear_attn.A_log");
      L.delta_dt_bias = get("linear_attn.dt_bias");
      L.delta_norm = get("linear_attn.norm.weight");
      L.o = get("linear_attn.out_proj.weight");
    } else if (recurrent) {
      if (k.conv_kernel < 1) throw std::invalid_argument("ModelConfig::conv_kernel: a recurrent layer needs at least one tap");
      if (k.lru_blocks < 1 || k.lru_width % k.lru_blocks)
        throw std::invalid_argument("ModelConfig::lru_blocks: must divide lru_width");
      // Its linear_out stands where the attention's o_proj does: the rest of the layer is the same.
      L.lru_x = get("temporal_block.linear_x.weight");
      L.lru_x_bias = get("temporal_block.linear_x.bias");
      L.lru_y = get("temporal_block.linear_y.weight");
      L.lru_y_bias = get("temporal_block.linear_y.bias");
      L.conv = get("temporal_block.conv_1d.weight");
      L.conv_b = get("temporal_block.conv_1d.bias");
      L.lru_param = get("temporal_block.rg_lru.recurrent_param");
      L.lru_input_gate = get("temporal_block.rg_lru.input_gate_weight");
      L.lru_input_bias = get("temporal_block.rg_lru.input_gate_bias");
      L.lru_gate = get("temporal_block.rg_lru.recurrent_gate_weight");
      L.lru_gate_bias = get("temporal_block.rg_lru.recurrent_gate_bias");
      L.o = get("temporal_block.linear_out.weight");
      L.o_bias = get("temporal_block.linear_out.bias");
    } else if (conv) {
      if (k.conv_kernel < 1) throw std::invalid_argument("ModelConfig::conv_kernel: a conv layer needs at least one tap");
      // The block's out_proj stands where the attention's o_proj does: the rest of the layer is the same.
      L.in_proj = get("conv.in_proj.weight");
      L.conv = get("conv.conv.weight");
      L.o = get("conv.out_proj.weight");
      if (k.conv_bias) {
        L.in_bias = get("conv.in_proj.bias");
        L.conv_b = get("conv.conv.bias");
        L.o_bias = get("conv.out_proj.bias");
      }
    } else {
      L.q = get("self_attn.q_proj.weight");
      L.o = get("self_attn.o_proj.weight");
      if (k.attn_gate) L.gate_proj = get("self_attn.g_proj.weight");
      if (k.attn_gate_bias) L.attn_gate_bias = get("self_attn.gate_bias");
    }
    if (own_kv) L.k = get("self_attn.k_proj.weight");
    if (own_v) L.v = get("self_attn.v_proj.weight");
    if (k.qkv_bias && !conv) {
      L.q_bias = get("self_attn.q_proj.bias");
      L.k_bias = get("self_attn.k_proj.bias");
      L.v_bias = get("self_attn.v_proj.bias");
    }
    if (k.o_bias && !conv) L.o_bias = get("self_attn.o_proj.bias");
    if (k.cross_width > 0 && !k.merged_cross_attention) {
      L.cross_q = get("cross_attn.q_proj.weight");
      L.cross_k = get("cross_attn.k_proj.weight");
      L.cross_v = get("cross_attn.v_proj.weight");
      L.cross_o = get("cross_attn.o_proj.weight");
      if (k.qkv_bias) {
        L.cross_q_bias = get("cross_attn.q_proj.bias");
        L.cross_k_bias = get("cross_attn.k_proj.bias");
        L.cross_v_bias = get("cross_attn.v_proj.bias");
      }
      if (k.o_bias) L.cross_o_bias = get("cross_attn.o_proj.bias");
      L.cross_pre_norm = get("pre_cross_attn_layernorm.weight");
      L.cross_post_norm = get("post_cross_attn_layernorm.weight");
    }
    const bool moe = !k.moe.layers.empty() && k.moe.layers[li];
    if (!moe || k.moe.shared_intermediate > 0) {  // the dense MLP, or the shared expert
      const std::string mlp = k.mlp_prefix + (moe ? k.moe.shared : "");
      if (!k.mlp_ungated) L.gate = get(mlp + "gate_proj.weight");
      L.up = get(mlp + "up_proj.weight");
      if (moe && k.moe.shared_norm) L.shared_norm = get(mlp + "norm.weight");
      L.down = get(mlp + "down_proj.weight");
      if (k.mlp_bias && !moe) {
        L.gate_bias = get(mlp + "gate_proj.bias");
        L.up_bias = get(mlp + "up_proj.bias");
        L.down_bias = get(mlp + "down_proj.bias");
      }
      if (moe && k.moe.shared_gate) L.shared_gate = get(k.mlp_prefix + "shared_expert_gate.weight");
    }
    if (moe && k.moe.pooled > 0) {
      L.pre_expert_proj = get(k.mlp_prefix + "pre_expert_proj.weight");
      L.pre_expert_norm = get(k.mlp_prefix + "pre_expert_norm.weight");
      L.post_expert_proj = get(k.mlp_prefix + "post_expert_proj.weight");
    }
    if (moe && k.moe.expert_out_norm) L.post_expert_norm = get(k.mlp_prefix + "experts.post_expert_norm.weight");
    if (moe) {
      L.router = get(k.mlp_prefix + k.moe.router + "weight");
      if (k.moe.selection_bias) L.selection_bias = get(k.mlp_prefix + k.moe.router + "e_score_correction_bias");
      L.experts_gate_up = get(k.mlp_prefix + (k.mlp_ungated ? "experts.up_proj" : "experts.gate_up_proj"));
      if (k.moe.expert_norms) L.expert_norms = get(k.mlp_prefix + "experts.post_expert_norm.weight");
      L.experts_down = get(k.mlp_prefix + "experts.down_proj");
      if (k.moe.routing == MoeRouting::GptOss) {
        L.router_bias = get(k.mlp_prefix + "router.bias");
        L.experts_gate_up_bias = get(k.mlp_prefix + "experts.gate_up_proj_bias");
        L.experts_down_bias = get(k.mlp_prefix + "experts.down_proj_bias");
      }
    }
    if (k.sink(l) && !conv) L.sinks = get("self_attn.sinks");
    // embed_norm: layer 0's attention reads the normed embeddings as they are (no in_norm).
    if (k.norm_placement != NormPlacement::Post && !(k.embed_norm && l == 0) && !k.l2_norm) {
      L.in_norm = get("input_layernorm.weight");
      if (k.norm_bias) L.in_norm_bias = get("input_layernorm.bias");
    }
    // Pre: post_attn_norm is the MLP's input norm; Sandwich and Post: the attention output's.
    if (!k.parallel_block && !k.post_attn_norm_weightless && !k.l2_norm) {
      const std::string norm = k.norm_placement == NormPlacement::Pre ? k.pre_ff_norm : "post_attention_layernorm.";
      L.post_attn_norm = get(norm + "weight");
      if (k.norm_bias) L.post_attn_norm_bias = get(norm + "bias");
    }
    if (k.norm_placement == NormPlacement::Sandwich && !k.l2_norm) L.pre_ff_norm = get("pre_feedforward_layernorm.weight");
    if (k.norm_placement != NormPlacement::Pre && !k.l2_norm) L.post_ff_norm = get("post_feedforward_layernorm.weight");
    // dory's learned scales, each a tensor times its constant (squared where the rule squares it).
    auto scaled = [&](const std::string& name, double s, bool squared, bool absolute) {
      std::vector<T> out;
      for (double v : model.at(layer_name(l, name))) {
        const double x = v * s;
        out.push_back(static_cast<T>(squared ? x * x : absolute ? std::abs(x) : x));
      }
      return out;
    };
    if (k.query_channel_scale > 0 && !conv) L.q_scale = scaled("self_attn.sqk", k.query_channel_scale, true, false);
    if (k.attn_gate_scale > 0 && !conv) L.gate_scale = scaled("self_attn.s_gate", k.attn_gate_scale, true, false);
    if (k.mlp_channel_scale > 0) {
      L.suv_gate = scaled("mlp.suv_gate", k.mlp_channel_scale, false, false);
      L.suv_up = scaled("mlp.suv_up", k.mlp_channel_scale, false, false);
    }
    // The layer's residual rule (Residual), after the attention and after the MLP: each weight's (keep, branch).
    for (const bool mlp : {false, true}) {
      Residual& r = mlp ? L.ff_residual : L.attn_residual;
      auto per_weight = [&](const std::string& name, auto keep_branch) {
        for (double g : model.at(layer_name(l, name))) {
          const auto [keep, branch] = keep_branch(g);
          r.keep.push_back(static_cast<T>(keep));
          r.branch.push_back(static_cast<T>(branch));
        }
      };
      const size_t H = static_cast<size_t>(k.hidden);
      if (k.residual_gates) {  // ergo
        per_weight(mlp ? "feedforward_residual_gate.weight" : "attention_residual_gate.weight", [](double w) {
          const double b = 1 / (1 + std::exp(-w)), softplus = w > 20 ? w : std::log1p(std::exp(w));
          return std::pair{std::sqrt(1 + b) * std::exp(-0.5 * softplus), b};
        });
      } else if (k.residual_interpolation > 0) {  // dory
        r.from_input = true;
        r.branch = scaled(mlp ? "lambda_2" : "lambda_1", k.residual_interpolation, false, true);
      } else if (k.residual_gate_temperature > 0) {  // muse_spark
        per_weight(mlp ? "post_feedforward_residual_gate.gate" : "post_attention_residual_gate.gate",
                   [&](double g) { return residual_gate(g, k.residual_gate_temperature); });
      } else if (k.depth_scaled_residual) {  // beam
        const double d = static_cast<double>(2 * (l + 1) + (mlp ? 1 : 0));
        r.keep.assign(H, static_cast<T>(std::sqrt((d - 1) / d)));
        r.branch.assign(H, static_cast<T>(1.0 / std::sqrt(d)));
      } else {  // the plain add: granite's residual_multiplier after the MLP and after a pre-norm attention (x * 1 is exact)
        const bool scaled = mlp || (k.norm_placement == NormPlacement::Pre && !k.parallel_block);
        r.keep.assign(H, T(1));
        r.branch.assign(H, static_cast<T>(scaled ? k.residual_scale : 1.0));
      }
    }
    if (k.qk_norm && !k.qk_norm_weightless && !conv) {
      L.q_norm = get("self_attn.q_norm.weight");
      if (own_kv) L.k_norm = get("self_attn.k_norm.weight");
    }
    if (k.layer_scalar) L.scalar = get("layer_scalar")[0];
    if (k.initial_mix) L.lambdas = get("lambdas");
    if (k.exclusive_attention && !conv)
      for (double a : model.at(layer_name(l, "self_attn.exclusive_self_attention.alpha")))
        L.exclusive_scale.push_back(static_cast<T>(std::tanh(a)));
    if (k.altup_inputs > 0) {
      L.altup_scale = get("altup.correct_output_scale");
      L.altup_correct = get("altup.correction_coefs.weight");
      L.altup_predict = get("altup.prediction_coefs.weight");
      L.altup_router = get("altup.modality_router.weight");
      L.altup_router_norm = get("altup.router_norm.weight");
    }
    if (k.laurel_rank > 0) {
      L.laurel_left = get("laurel.linear_left.weight");
      L.laurel_right = get("laurel.linear_right.weight");
      L.laurel_norm = get("laurel.post_laurel_norm.weight");
    }
    if (k.per_layer_input > 0) {
      L.per_layer_gate = get(k.per_layer_tensors.second + "per_layer_input_gate.weight");
      L.per_layer_proj = get(k.per_layer_tensors.second + "per_layer_projection.weight");
      L.per_layer_norm = get(k.per_layer_tensors.second + "post_per_layer_input_norm.weight");
    }
    if (!k.activation_sparsity.empty() && k.activation_sparsity[li] > 0)
      L.sparsity_cut = static_cast<T>(sparsity_quantile(k.activation_sparsity[li]));
    // The rope base follows the layer's type in the config, not the window a variant tells it.
    const Attention rule = k.attention(l);
    const double base = !k.rope_thetas.empty()                                 ? k.rope_thetas[li]
                        : rule == Attention::Sliding && k.rope_local_theta > 0 ? k.rope_local_theta
                                                                               : k.rope_theta;
    const int64_t rd = k.rotary(l);
    // Proportional rope: only the first `angles` frequencies rotate; the others are 0 (an identity rotation).
    const int64_t angles = k.rope_angles.empty() || k.rope_angles[li] == 0 ? rd / 2 : k.rope_angles[li];
    const double d = static_cast<double>(rd);
    if (k.yarn.factor > 0) {
      // transformers' _compute_yarn_parameters, in float64.
      const ModelConfig::Yarn& y = k.yarn;
      auto correction_dim = [&](double rotations) {
        return d * std::log(y.original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(base));
      };
      double low = correction_dim(y.beta_fast), high = correction_dim(y.beta_slow);
      if (y.truncate) low = std::floor(low), high = std::ceil(high);
      low = std::max(low, 0.0), high = std::min(high, d - 1);
      if (low == high) high += 0.001;
      for (int64_t i = 0; i < rd / 2; ++i) {
        const double pos_freq = std::pow(base, static_cast<double>(2 * i) / d);
        const double extrapolation = 1 - std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        L.inv_freq.push_back(static_cast<T>(1.0 / (y.factor * pos_freq) * (1 - extrapolation) + 1.0 / pos_freq * extrapolation));
      }
    } else {
      for (int64_t i = 0; i < rd / 2; ++i)
        L.inv_freq.push_back(i < angles ? static_cast<T>(1.0 / std::pow(base, static_cast<double>(2 * i) / d)) : T(0));
    }
  }
}

// A row of a per-token buffer, used where the one-token forward used a std::vector of its own.
template <class T>
struct Row {
  T* p;
  size_t n;
  T* data() const { return p; }
  T* begin() const { return p; }
  T* end() const { return p + n; }
  T& operator[](int64_t i) const { return p[i]; }
};

// Tokens whose queries go through a K/V head's keys and values together (forward's attention).
constexpr int64_t kQueryTile = 8;

// 32 bytes of T as one value (GCC's vector extension: one AVX register where the code is compiled
// for AVX, two SSE2 registers otherwise). Lane-wise + and * are the scalar operations, without contraction into a
// fused multiply-add, so each lane's sum is the scalar loop's bit for bit.
template <class T>
struct Lanes {
  static constexpr int64_t n = 32 / sizeof(T);
  typedef T V __attribute__((vector_size(32)));
  [[gnu::always_inline]] static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  [[gnu::always_inline]] static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
};

// A tile's query rows: token t of the tile sees keys first[t]..last[t]; its scores for head gi of the
// group are scores[at[t] + gi * span[t] + (key - first[t])].
struct TileRows {
  int64_t tn, group;
  const int64_t *first, *last, *span, *at;
};

// Every score of the tile's rows against keys lo..hi of one K/V head, four keys at a time. qt holds
// the query rows as lanes (qt[c * rows + r], rows padded with zeros to whole vectors): each lane sums
// its q[c] * key[c] over c in order from 0, as one row at a time does.
template <class T>
[[gnu::always_inline]] inline void tile_scores_of(const T* qt, int64_t rows, const T* keys, int64_t kvd, int64_t D, int64_t lo,
                                                  int64_t hi, const TileRows& tile, T* scores) {
  using L = Lanes<T>;
  const int64_t R = tile.tn * tile.group;
  for (int64_t j = lo; j <= hi; j += 4) {
    const int64_t nk = std::min<int64_t>(4, hi + 1 - j);
    const T* k0 = keys + j * kvd;
    const T* k1 = nk > 1 ? k0 + kvd : k0;  // a missing key is computed from key j and not kept
    const T* k2 = nk > 2 ? k0 + 2 * kvd : k0;
    const T* k3 = nk > 3 ? k0 + 3 * kvd : k0;
    for (int64_t rv = 0; rv < R; rv += L::n) {
      typename L::V a0{}, a1{}, a2{}, a3{};
      for (int64_t c = 0; c < D; ++c) {
        const typename L::V q = L::load(qt + c * rows + rv);
        a0 += q * k0[c];
        a1 += q * k1[c];
        a2 += q * k2[c];
        a3 += q * k3[c];
      }
      for (int64_t lane = 0; lane < L::n && rv + lane < R; ++lane) {
        const int64_t t = (rv + lane) / tile.group, gi = (rv + lane) % tile.group;
        T* out = scores + tile.at[t] + gi * tile.span[t] - tile.first[t];  // out[j]: key j's score
        const T got[4] = {a0[lane], a1[lane], a2[lane], a3[lane]};
        for (int64_t kk = 0; kk < nk; ++kk)
          if (j + kk >= tile.first[t] && j + kk <= tile.last[t]) out[j + kk] = got[kk];
      }
    }
  }
}

// Adds each row's softmax weights (scores over total) times the values of keys lo..hi of one K/V
// head into its output (out: the tile's first token's first head of the group, rows `widest` apart):
// four keys at a time, lanes over d, so each out[d] adds its terms in key order as one key at a time does.
template <class T>
[[gnu::always_inline]] inline void tile_values_of(const T* scores, const T* total, const T* values, int64_t kvd, int64_t D,
                                                  int64_t lo, int64_t hi, const TileRows& tile, T* out0, int64_t widest) {
  using L = Lanes<T>;
  const int64_t* first = tile.first;
  const int64_t* last = tile.last;
  for (int64_t j = lo; j <= hi; j += 4)
    for (int64_t t = 0; t < tile.tn; ++t) {
      if (j + 4 <= first[t] || j > last[t]) continue;
      for (int64_t gi = 0; gi < tile.group; ++gi) {
        const T* w = scores + tile.at[t] + gi * tile.span[t] - first[t];  // w[j]: key j's weight before the division
        const T sum = total[t * tile.group + gi];
        T* out = out0 + t * widest + gi * D;
        if (j >= first[t] && j + 4 <= last[t] + 1) {
          const T w0 = w[j] / sum, w1 = w[j + 1] / sum, w2 = w[j + 2] / sum, w3 = w[j + 3] / sum;
          const T *v0 = values + j * kvd, *v1 = v0 + kvd, *v2 = v1 + kvd, *v3 = v2 + kvd;
          int64_t d = 0;
          for (; d + L::n <= D; d += L::n)
            L::store(out + d, L::load(out + d) + w0 * L::load(v0 + d) + w1 * L::load(v1 + d) + w2 * L::load(v2 + d) +
                                  w3 * L::load(v3 + d));
          for (; d < D; ++d) out[d] = out[d] + w0 * v0[d] + w1 * v1[d] + w2 * v2[d] + w3 * v3[d];
        } else {
          for (int64_t jj = std::max(j, first[t]); jj < std::min(j + 4, last[t] + 1); ++jj) {
            const T wj = w[jj] / sum;
            const T* vj = values + jj * kvd;
            for (int64_t d = 0; d < D; ++d) out[d] += wj * vj[d];
          }
        }
      }
    }
}

// The two loops that bound a long window, compiled twice and chosen at load by the CPU (GCC's
// target_clones): AVX2 where the CPU has it, the baseline otherwise. Neither clone may fuse a
// multiply-add (AVX2 does not bring FMA, and the library builds with -ffp-contract=off), so both give
// the same bits.
#define KVC_ATTENTION_CLONES __attribute__((target_clones("avx2", "default")))
KVC_ATTENTION_CLONES void tile_scores(const double* qt, int64_t rows, const double* keys, int64_t kvd, int64_t D, int64_t lo,
                                      int64_t hi, const TileRows& tile, double* scores) {
  tile_scores_of(qt, rows, keys, kvd, D, lo, hi, tile, scores);
}
KVC_ATTENTION_CLONES void tile_scores(const float* qt, int64_t rows, const float* keys, int64_t kvd, int64_t D, int64_t lo,
                                      int64_t hi, const TileRows& tile, float* scores) {
  tile_scores_of(qt, rows, keys, kvd, D, lo, hi, tile, scores);
}
KVC_ATTENTION_CLONES void tile_values(const double* scores, const double* total, const double* values, int64_t kvd, int64_t D,
                                      int64_t lo, int64_t hi, const TileRows& tile, double* out0, int64_t widest) {
  tile_values_of(scores, total, values, kvd, D, lo, hi, tile, out0, widest);
}
KVC_ATTENTION_CLONES void tile_values(const float* scores, const float* total, const float* values, int64_t kvd, int64_t D,
                                      int64_t lo, int64_t hi, const TileRows& tile, float* out0, int64_t widest) {
  tile_values_of(scores, total, values, kvd, D, lo, hi, tile, out0, widest);
}

// The id whose embedding a token gets: 0 for a placeholder id (ModelConfig::zero_tokens), else its own.
inline int64_t embedded(const ModelConfig& k, int32_t token) {
  return std::find(k.zero_tokens.begin(), k.zero_tokens.end(), token) != k.zero_tokens.end() ? 0 : token;
}

template <class T>
void SequenceOracle<T>::forward(const int32_t* tokens, int64_t n, int64_t pos0, double* logits) {
  const ModelConfig& k = config_;
  for (int64_t t = 0; t < n; ++t)
    if (tokens[t] < 0 || tokens[t] >= k.vocab)
      throw std::invalid_argument("token " + std::to_string(tokens[t]) + " is outside the vocabulary of " +
                                  std::to_string(k.vocab));
  const int64_t H = k.hidden;
  int64_t widest = 0;  // the largest q and K/V widths over the layers
  for (int64_t l = 0; l < k.layers; ++l) widest = std::max({widest, k.q_heads(l) * k.dim(l), k.q_heads(l) * k.vdim(l)});
  if (!k.conv_layers.empty()) widest = std::max(widest, H);                 // a conv layer's output row (C * conv) is H wide
  if (!k.recurrent_layers.empty()) widest = std::max(widest, k.lru_width);  // a recurrent layer's (state * y)
  if (!k.delta_layers.empty()) widest = std::max(widest, k.delta_v_heads * k.delta_v_dim);  // a delta layer's heads
  const T eps = static_cast<T>(k.eps), post_eps = static_cast<T>(k.post_eps > 0 ? k.post_eps : k.eps);
  const std::vector<T> no_weight;
  // Layer by layer over the tokens, each token computed as alone: the residual stream, its normed
  // copy, the queries and the attention output per token; the rest is one token's scratch.
  std::vector<T> X(static_cast<size_t>(n * H)), Hn(static_cast<size_t>(n * H)), Q(static_cast<size_t>(n * widest)),
      A(static_cast<size_t>(n * widest));
  const int64_t embed_row = k.embed_width();  // the embedding table's row: H, or a factorized embedding's rank
  for (int64_t t = 0; t < n; ++t) {
    const T* e = embed_.data() + embedded(k, tokens[t]) * embed_row;
    if (k.embedding_rank > 0) matvec(embed_proj_, e, H, embed_row, X.data() + t * H);  // neomme: projection [H, R] of the row
    else std::copy(e, e + H, X.begin() + t * H);
    for (int64_t i = 0; i < H; ++i) X[static_cast<size_t>(t * H + i)] *= static_cast<T>(k.embed_scale);
  }
  if (k.embed_norm)
    for (int64_t t = 0; t < n; ++t) layer_norm(X.data() + t * H, embed_norm_, H, eps, X.data() + t * H, embed_norm_bias_);
  if (k.embed_rms_norm)  // muse_glimmer's weightless norm of each embedding row
    for (int64_t t = 0; t < n; ++t) rms_norm(X.data() + t * H, no_weight, H, eps, false, X.data() + t * H);
  const std::vector<T> X0 = k.initial_mix ? X : std::vector<T>();  // the layers' input, which each one mixes in
  // Each token's per-layer inputs [layers * P] (gemma3n, embedding_gemma2) and its AltUp streams [A][H] (gemma3n).
  const int64_t P = k.per_layer_input, NA = k.altup_inputs;
  std::vector<T> pli(static_cast<size_t>(n * k.layers * P)), streams(static_cast<size_t>(n * NA * H)),
      pred(static_cast<size_t>(n * NA * H)), lr(static_cast<size_t>(H)), mod(static_cast<size_t>(NA)),
      coefs(static_cast<size_t>(NA * NA)), gated(static_cast<size_t>(P));
  for (int64_t t = 0; t < n && P > 0; ++t) {
    T* out = pli.data() + t * k.layers * P;
    matvec(per_layer_model_proj_, X.data() + t * H, k.layers * P, H, out);
    const int64_t id = tokens[t] < k.per_layer_vocab ? tokens[t] : 0;
    for (int64_t l = 0; l < k.layers; ++l) {
      T* row = out + l * P;
      for (int64_t j = 0; j < P; ++j) row[j] *= static_cast<T>(k.per_layer_projection_scale);
      rms_norm(row, per_layer_proj_norm_, P, eps, k.gemma_norm, row);
      if (k.per_layer_vocab == 0) continue;  // projection-only inputs (embedding_gemma2)
      const T* e = per_layer_embed_.data() + id * k.layers * P + l * P;
      for (int64_t j = 0; j < P; ++j)
        row[j] = (row[j] + e[j] * static_cast<T>(k.per_layer_embed_scale)) * static_cast<T>(k.per_layer_input_scale);
    }
  }
  // The RMS of a row (torch.mean(x ** 2) ** 0.5), and a row rescaled to the RMS `target` (AltUp's streams).
  auto rms = [H](const T* x) {
    T sum = 0;
    for (int64_t i = 0; i < H; ++i) sum += x[i] * x[i];
    return std::sqrt(sum / static_cast<T>(H));
  };
  auto rescale = [H](T* x, T target) {
    T sum = 0;
    for (int64_t i = 0; i < H; ++i) sum += x[i] * x[i];
    const T magnitude = std::sqrt(std::max(sum / static_cast<T>(H), static_cast<T>(1e-5)));
    for (int64_t i = 0; i < H; ++i) x[i] = x[i] * target / magnitude;
  };
  // tanh(router(RMSNorm_w(x) * altup_router_scale)): AltUp's modalities of a row.
  std::vector<T> routed_in(static_cast<size_t>(H));
  auto modalities = [&](const Layer& L, const T* x) {
    rms_norm(x, L.altup_router_norm, H, eps, false, routed_in.data());
    for (T& v : routed_in) v *= static_cast<T>(k.altup_router_scale);
    matvec(L.altup_router, routed_in.data(), NA, H, mod.data());
    for (T& v : mod) v = std::tanh(v);
  };
  for (int64_t t = 0; t < n && NA > 0; ++t) {  // stream 0 the embedding, stream i its projection i - 1 at its RMS
    T* st = streams.data() + t * NA * H;
    std::copy(X.begin() + t * H, X.begin() + (t + 1) * H, st);
    const T target = rms(st);
    for (int64_t i = 1; i < NA; ++i) {
      matvec(altup_proj_[static_cast<size_t>(i - 1)], st, H, H, st + i * H);
      rescale(st + i * H, target);
    }
  }
  const int64_t inter = std::max({k.intermediate, k.moe.intermediate, k.moe.shared_intermediate});
  std::vector<T> kk(widest), vv(widest), o(H), g(inter), u(inter), m(H);
  const int64_t expert_rows = std::max(H, k.expert_width());  // the routed experts' width (muse_spark's pooled one)
  std::vector<T> scores, qt, routed(expert_rows), expert_in(expert_rows), expert_out(expert_rows), pooled_in(expert_rows),
      router_logits(k.moe.experts);
  auto row = [](std::vector<T>& b, int64_t t, int64_t w) { return Row<T>{b.data() + t * w, static_cast<size_t>(w)}; };
  // A looped section's input (loop_entries): the final norm of each token's row where the first pass begins.
  std::vector<T> entry;
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    const int64_t li = static_cast<int64_t>(l);
    const bool use_rope = k.rope(li);
    if (!k.loop_entries.empty() && k.loop_entries[l]) {  // a pass begins: x = norm(x) + the section's input
      const bool first = entry.empty();
      if (first) entry.resize(static_cast<size_t>(n * H));
      for (int64_t t = 0; t < n; ++t) {
        const Row<T> x = row(X, t, H), h = row(Hn, t, H);
        rms_norm(x.data(), final_norm_, H, eps, k.gemma_norm && !k.final_norm_plain, h.data(), k.l2_norm);
        if (first) std::copy(h.begin(), h.end(), entry.begin() + t * H);
        for (int64_t i = 0; i < H; ++i) x[i] = h[i] + entry[static_cast<size_t>(t * H + i)];
      }
    }
    // The layer's widths; a layer that shares another's K/V computes only its queries.
    const int64_t NQ = k.q_heads(li), D = k.dim(li), KVH = k.kv(li), kvd = KVH * D, group = NQ / KVH;
    const int64_t Dv = k.vdim(li), kvdv = KVH * Dv;  // the value heads' size (mimo_v2_flash's v_head_dim)
    const bool own_kv = !k.shares_kv(li);
    const bool conv = k.conv(li), recurrent = k.recurrent(li), delta = k.delta(li);
    // AltUp's prediction of every stream, pred_q = s_q + sum_p c[q * A + p] s_p (c from the active stream's
    // modalities); the layer runs on the active one.
    for (int64_t t = 0; t < n && NA > 0; ++t) {
      const T* st = streams.data() + t * NA * H;
      T* pr = pred.data() + t * NA * H;
      modalities(L, st + k.altup_active * H);
      matvec(L.altup_predict, mod.data(), NA * NA, NA, coefs.data());
      for (int64_t q = 0; q < NA; ++q)
        for (int64_t i = 0; i < H; ++i) {
          T sum = 0;
          for (int64_t p = 0; p < NA; ++p) sum += st[p * H + i] * coefs[static_cast<size_t>(q * NA + p)];
          pr[q * H + i] = sum + st[q * H + i];
        }
      std::copy(pr + k.altup_active * H, pr + (k.altup_active + 1) * H, X.begin() + t * H);
    }
    if (conv) {
      // The short-convolution block, token by token: B, C, x = in_proj(h); the state keeps B * x per
      // position; the output row is C * (the causal depthwise convolution of B * x over the last
      // conv_kernel positions, tap j on position pos - conv_kernel + 1 + j, zeros before position 0).
      const int64_t taps = k.conv_kernel;
      std::vector<T> bcx(static_cast<size_t>(3 * H));
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = pos0 + t;
        const Row<T> x = row(X, t, H), h = row(Hn, t, H);
        if (k.norm_placement == NormPlacement::Post || (L.in_norm.empty() && !k.l2_norm))
          std::copy(x.begin(), x.end(), h.begin());
        else if (k.layer_norm) layer_norm(x.data(), L.in_norm, H, eps, h.data(), L.in_norm_bias);
        else rms_norm(x.data(), L.in_norm, H, eps, k.gemma_norm, h.data(), k.l2_norm);
        matvec(L.in_proj, h.data(), 3 * H, H, bcx.data(), L.in_bias);
        for (int64_t c = 0; c < H; ++c) L.conv_in.push_back(bcx[static_cast<size_t>(c)] * bcx[static_cast<size_t>(2 * H + c)]);
        T* a = A.data() + t * widest;
        for (int64_t c = 0; c < H; ++c) {
          T sum = L.conv_b.empty() ? T(0) : L.conv_b[static_cast<size_t>(c)];
          for (int64_t j = 0; j < taps; ++j) {
            const int64_t p = pos - taps + 1 + j;
            if (p >= 0) sum += L.conv[static_cast<size_t>(c * taps + j)] * L.conv_in[static_cast<size_t>(p * H + c)];
          }
          a[c] = bcx[static_cast<size_t>(H + c)] * sum;
        }
      }
    }
    if (recurrent) {
      // The RG-LRU block, token by token: y = act(linear_y h); x = linear_x h, kept per position (conv_in); c = bias +
      // the causal depthwise convolution of x (tap j on position pos - conv_kernel + 1 + j, zeros before position 0);
      // then the gates of c per block, the decay a = exp(-lru_decay_scale * r * softplus(recurrent_param)) and the
      // state a * state + sqrt(1 - a^2) * i * c (at position 0: i * c), kept per position; the row is state * y.
      const int64_t W = k.lru_width, bw = W / k.lru_blocks, taps = k.conv_kernel;
      std::vector<T> y(static_cast<size_t>(W)), xb(static_cast<size_t>(W)), cv(static_cast<size_t>(W));
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = pos0 + t;
        const Row<T> x = row(X, t, H), h = row(Hn, t, H);
        if (k.norm_placement == NormPlacement::Post || (L.in_norm.empty() && !k.l2_norm))
          std::copy(x.begin(), x.end(), h.begin());
        else if (k.layer_norm) layer_norm(x.data(), L.in_norm, H, eps, h.data(), L.in_norm_bias);
        else rms_norm(x.data(), L.in_norm, H, eps, k.gemma_norm, h.data(), k.l2_norm);
        matvec(L.lru_y, h.data(), W, H, y.data(), L.lru_y_bias);
        for (T& v : y) v = activate(k, v);
        matvec(L.lru_x, h.data(), W, H, xb.data(), L.lru_x_bias);
        L.conv_in.insert(L.conv_in.end(), xb.begin(), xb.end());
        for (int64_t c = 0; c < W; ++c) {
          T sum = L.conv_b[static_cast<size_t>(c)];
          for (int64_t j = 0; j < taps; ++j) {
            const int64_t p = pos - taps + 1 + j;
            if (p >= 0) sum += L.conv[static_cast<size_t>(c * taps + j)] * L.conv_in[static_cast<size_t>(p * W + c)];
          }
          cv[static_cast<size_t>(c)] = sum;
        }
        T* a = A.data() + t * widest;
        for (int64_t c = 0; c < W; ++c) {
          const int64_t b = c / bw, col = c % bw;
          T zi = 0, za = 0;
          for (int64_t i = 0; i < bw; ++i) {
            const T in = cv[static_cast<size_t>(b * bw + i)];
            zi += in * L.lru_input_gate[static_cast<size_t>((b * bw + i) * bw + col)];
            za += in * L.lru_gate[static_cast<size_t>((b * bw + i) * bw + col)];
          }
          const T input_gate = T(1) / (T(1) + std::exp(-(zi + L.lru_input_bias[static_cast<size_t>(c)])));
          const T r = T(1) / (T(1) + std::exp(-(za + L.lru_gate_bias[static_cast<size_t>(c)])));
          const T lambda = L.lru_param[static_cast<size_t>(c)];
          const T softplus = lambda > T(20) ? lambda : std::log1p(std::exp(lambda));  // torch's threshold 20
          const T log_a = -static_cast<T>(k.lru_decay_scale) * r * softplus;
          const T normalized =
              cv[static_cast<size_t>(c)] * input_gate * (pos == 0 ? T(1) : std::sqrt(T(1) - std::exp(T(2) * log_a)));
          const T state =
              pos == 0 ? normalized : std::exp(log_a) * L.lru_state[static_cast<size_t>((pos - 1) * W + c)] + normalized;
          L.lru_state.push_back(state);
          a[c] = state * y[static_cast<size_t>(c)];
        }
      }
    }
    if (delta) {
      // The gated DeltaNet block, token by token: qkv = in_proj_qkv h, kept per position (conv_in); c = silu(the causal
      // depthwise convolution of qkv, tap j on position pos - conv_kernel + 1 + j, zeros before position 0); q and k
      // L2-normed per key head, q times delta_k_dim ** -0.5; per value head the state S = exp(g) S_prev, S += k (beta (v -
      // S^T k))^T, kept per position (delta_state); its output S^T q RMS-normed, times the norm's weight and silu(z).
      const int64_t C = k.delta_conv_width(), taps = k.conv_kernel, HK = k.delta_k_heads, HV = k.delta_v_heads;
      const int64_t DK = k.delta_k_dim, DV = k.delta_v_dim, Kd = HK * DK, per_key = HV / HK, state = DK * DV;
      std::vector<T> qkv(static_cast<size_t>(C)), cv(static_cast<size_t>(C)), z(static_cast<size_t>(HV * DV)),
          b(static_cast<size_t>(HV)), a(static_cast<size_t>(HV)), mem(static_cast<size_t>(DV));
      const T q_scale = T(1) / std::sqrt(static_cast<T>(DK));
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = pos0 + t;
        const Row<T> x = row(X, t, H), h = row(Hn, t, H);
        if (k.norm_placement == NormPlacement::Post || L.in_norm.empty()) std::copy(x.begin(), x.end(), h.begin());
        else if (k.layer_norm) layer_norm(x.data(), L.in_norm, H, eps, h.data(), L.in_norm_bias);
        else rms_norm(x.data(), L.in_norm, H, eps, k.gemma_norm, h.data());
        matvec(L.delta_qkv, h.data(), C, H, qkv.data());
        matvec(L.delta_z, h.data(), HV * DV, H, z.data());
        matvec(L.delta_b, h.data(), HV, H, b.data());
        matvec(L.delta_a, h.data(), HV, H, a.data());
        L.conv_in.insert(L.conv_in.end(), qkv.begin(), qkv.end());
        for (int64_t c = 0; c < C; ++c) {
          T sum = 0;
          for (int64_t j = 0; j < taps; ++j) {
            const int64_t p = pos - taps + 1 + j;
            if (p >= 0) sum += L.conv[static_cast<size_t>(c * taps + j)] * L.conv_in[static_cast<size_t>(p * C + c)];
          }
          cv[static_cast<size_t>(c)] = silu(sum);
        }
        for (int64_t i = 0; i < 2 * HK; ++i) {  // each q head, then each k head: x * rsqrt(sum x^2 + 1e-6)
          T* head = cv.data() + i * DK;
          T sum = 0;
          for (int64_t d = 0; d < DK; ++d) sum += head[d] * head[d];
          const T inv = T(1) / std::sqrt(sum + static_cast<T>(1e-6));
          for (int64_t d = 0; d < DK; ++d) head[d] = head[d] * inv * (i < HK ? q_scale : T(1));
        }
        T* out = A.data() + t * widest;
        for (int64_t j = 0; j < HV; ++j) {
          const T* q = cv.data() + (j / per_key) * DK;
          const T* key = cv.data() + Kd + (j / per_key) * DK;
          const T* v = cv.data() + 2 * Kd + j * DV;
          const T beta = T(1) / (T(1) + std::exp(-b[static_cast<size_t>(j)]));
          const T in = a[static_cast<size_t>(j)] + L.delta_dt_bias[static_cast<size_t>(j)];
          const T softplus = in > T(20) ? in : std::log1p(std::exp(in));  // torch's threshold 20
          const T decay =
              std::exp(-(static_cast<T>(k.delta_decay_scale) * std::exp(L.delta_a_log[static_cast<size_t>(j)])) * softplus);
          const size_t at = L.delta_state.size();
          if (pos == 0) L.delta_state.resize(at + static_cast<size_t>(state), T(0));
          else
            for (int64_t e = 0; e < state; ++e)
              L.delta_state.push_back(L.delta_state[static_cast<size_t>(((pos - 1) * HV + j) * state + e)] * decay);
          T* S = L.delta_state.data() + at;
          for (int64_t d = 0; d < DV; ++d) {  // what S already reads at key: S^T k
            T sum = 0;
            for (int64_t i = 0; i < DK; ++i) sum += S[i * DV + d] * key[i];
            mem[static_cast<size_t>(d)] = (v[d] - sum) * beta;
          }
          for (int64_t i = 0; i < DK; ++i)
            for (int64_t d = 0; d < DV; ++d) S[i * DV + d] += key[i] * mem[static_cast<size_t>(d)];
          T* o = out + j * DV;
          T sq = 0;
          for (int64_t d = 0; d < DV; ++d) {
            T sum = 0;
            for (int64_t i = 0; i < DK; ++i) sum += S[i * DV + d] * q[i];
            o[d] = sum;
            sq += sum * sum;
          }
          const T inv = T(1) / std::sqrt(sq / static_cast<T>(DV) + eps);
          for (int64_t d = 0; d < DV; ++d) {
            o[d] = o[d] * inv * L.delta_norm[static_cast<size_t>(d)];
            if (k.delta_norm_gated) o[d] *= silu(z[static_cast<size_t>(j * DV + d)]);
          }
        }
      }
    }
    // Each token's queries, and its keys and values appended in token order.
    if (!conv && !recurrent && !delta)
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = pos0 + t;
        const Row<T> x = row(X, t, H), h = row(Hn, t, H), q = row(Q, t, widest);
        if (!L.lambdas.empty()) {  // neomme: the norm of lambdas[0] * x + lambdas[1] * x0 (x itself stays the residual)
          for (int64_t i = 0; i < H; ++i) h[i] = L.lambdas[0] * x[i] + L.lambdas[1] * X0[static_cast<size_t>(t * H + i)];
          rms_norm(h.data(), L.in_norm, H, eps, k.gemma_norm, h.data(), k.l2_norm);
        } else if (k.norm_placement == NormPlacement::Post || (L.in_norm.empty() && !k.l2_norm))
          std::copy(x.begin(), x.end(), h.begin());
        else if (k.layer_norm) layer_norm(x.data(), L.in_norm, H, eps, h.data(), L.in_norm_bias);
        else rms_norm(x.data(), L.in_norm, H, eps, k.gemma_norm, h.data(), k.l2_norm);
        matvec(L.q, h.data(), NQ * D, H, q.data(), L.q_bias);
        if (own_kv) {
          matvec(L.k, h.data(), kvd, H, kk.data(), L.k_bias);
          if (L.v.empty()) std::copy(kk.begin(), kk.begin() + kvd, vv.begin());  // k_eq_v: the raw key projection
          else matvec(L.v, h.data(), kvdv, H, vv.data(), L.v_bias);
          if (k.value_scale != 1)
            for (int64_t i = 0; i < kvdv; ++i) vv[i] *= static_cast<T>(k.value_scale);
          if (k.value_embed(li))  // neomme: plus the token's value embedding
            for (int64_t i = 0; i < kvdv; ++i) vv[i] += value_embed_[static_cast<size_t>(tokens[t] * kvdv + i)];
        }
        if (k.qk_norm && k.qk_norm_whole) {
          rms_norm(q.data(), L.q_norm, NQ * D, eps, k.gemma_norm, q.data(), k.l2_norm);
          rms_norm(kk.data(), L.k_norm, kvd, eps, k.gemma_norm, kk.data(), k.l2_norm);
        } else if (k.qk_norm) {
          for (int64_t i = 0; i < NQ; ++i)
            rms_norm(q.data() + i * D, L.q_norm, D, eps, k.gemma_norm, q.data() + i * D, k.l2_norm);
          if (own_kv)
            for (int64_t i = 0; i < KVH; ++i)
              rms_norm(kk.data() + i * D, L.k_norm, D, eps, k.gemma_norm, kk.data() + i * D, k.l2_norm);
        }
        if (k.v_norm && own_kv)
          for (int64_t i = 0; i < KVH; ++i) rms_norm(vv.data() + i * Dv, no_weight, Dv, eps, false, vv.data() + i * Dv);
        if (use_rope) {
          const T scale = static_cast<T>(k.yarn.factor > 0 ? k.yarn.attention_factor : 1.0);
          // Partial rotary: the first rd entries of each head rotate (halves within them), the rest pass.
          const int64_t rd = k.rotary(l);
          for (int64_t i = 0; i < NQ; ++i) rope(q.data() + i * D, L.inv_freq, rd, pos, k.rope_interleaved, scale);
          if (own_kv)
            for (int64_t i = 0; i < KVH; ++i) rope(kk.data() + i * D, L.inv_freq, rd, pos, k.rope_interleaved, scale);
          if (k.qk_l2_norm) {
            for (int64_t i = 0; i < NQ; ++i) rms_norm(q.data() + i * D, no_weight, D, eps, false, q.data() + i * D);
            for (int64_t i = 0; i < KVH; ++i) rms_norm(kk.data() + i * D, no_weight, D, eps, false, kk.data() + i * D);
          }
        } else if (k.nope_query_length > 0) {
          // beam: (1 + (pos + 1) / length) ** power, as transformers writes it: exp(power * log1p(...)).
          const T scale =
              static_cast<T>(std::exp(k.nope_query_power * std::log1p((static_cast<double>(pos) + 1) / k.nope_query_length)));
          for (T& v : q) v *= scale;
        } else if (k.temperature_floor_scale > 0) {
          const T scale =
              static_cast<T>(std::log(std::floor((static_cast<double>(pos) + 1.0) / k.temperature_floor_scale) + 1.0) *
                                 k.temperature_attn_scale +
                             1.0);
          for (T& v : q) v *= scale;
        }
        for (size_t i = 0; i < L.q_scale.size(); ++i) q[i] *= L.q_scale[i];  // dory: (sqk * s)^2 per channel, after rope
        if (options_.q_block != KvBlock::None)
          for (int64_t i = 0; i < NQ; ++i) round_kv_blocks(q.data() + i * D, D, options_.q_block);
        else if (options_.q_half)
          for (T& v : q) v = round_kv(v, true);
        if (own_kv) {
          // A quantized cache stores the token's whole row (every K/V head) in blocks, as ggml_set_rows does.
          round_kv_blocks(kk.data(), kvd, options_.k_block);
          round_kv_blocks(vv.data(), kvdv, options_.v_block);
          for (int64_t i = 0; i < kvd; ++i) {
            const T key = kk[i];
            L.keys.push_back(options_.k_block != KvBlock::None ? key
                             : options_.kv_bf16                ? round_bf16(key)
                                                               : round_kv(key, options_.kv_half));
          }
          for (int64_t i = 0; i < kvdv; ++i) {
            const T value = vv[i];
            L.values.push_back(options_.v_block != KvBlock::None ? value
                               : options_.kv_bf16                ? round_bf16(value)
                                                                 : round_kv(value, options_.kv_half));
          }
        }
      }
    const Layer& S = layers_[static_cast<size_t>(k.source(li))];  // whose keys and values the layer attends
    // The attention, kQueryTile tokens and the heads that share a K/V head at a time, four keys at a
    // time: each key and value row is read once per tile while it is in cache (the long windows are
    // memory-bound), and each score and each out[d] still sums its terms in the order of one token,
    // one head and one key at a time, so the results are the same bit for bit.
    std::vector<T> total(static_cast<size_t>(kQueryTile * group));  // each (token, head) row's softmax denominator
    // A merged cross-attention: each (token, head) row's weights over the source (before the division), and with the
    // cross_softmax_apart mutant their own denominators.
    const bool merged = k.merged_cross_attention && source_length_ >= 0, apart = merged && options_.cross_softmax_apart;
    const int64_t src = merged ? source_length_ : 0;
    std::vector<T> cross_e(static_cast<size_t>(kQueryTile * group * src)), cross_total(static_cast<size_t>(kQueryTile * group));
    if (!conv && !recurrent && !delta)
      for (int64_t t0 = 0; t0 < n; t0 += kQueryTile) {
        const int64_t tn = std::min(kQueryTile, n - t0);
        int64_t first[kQueryTile], last[kQueryTile], span[kQueryTile], at[kQueryTile];
        int64_t lo = pos0 + t0, hi = pos0 + t0 + tn - 1, size = 0;
        for (int64_t t = 0; t < tn; ++t) {
          const int64_t pos = pos0 + t0 + t;
          last[t] = last_visible_key(k, options_, li, pos, pos0 + n);
          hi = std::max(hi, last[t]);
          first[t] = first_visible_key(k, options_, li, pos, forgotten_);
          span[t] = last[t] + 1 - first[t];
          at[t] = size;  // token t's rows of scores: one per head of the group, span[t] each
          size += group * span[t];
          lo = std::min(lo, first[t]);
        }
        scores.assign(static_cast<size_t>(size), 0);
        const TileRows tile{tn, group, first, last, span, at};
        for (int64_t kvh = 0; kvh < KVH; ++kvh) {
          const T* keys = S.keys.data() + kvh * D;
          const T* values = S.values.data() + kvh * Dv;
          // This K/V head's query rows (token t, head gi of the group: row t * group + gi) as
          // tile_scores' lanes.
          const int64_t R = tn * group, rows = (R + Lanes<T>::n - 1) / Lanes<T>::n * Lanes<T>::n;
          qt.assign(static_cast<size_t>(D * rows), T(0));
          for (int64_t r = 0; r < R; ++r) {
            const T* qh = Q.data() + (t0 + r / group) * widest + (kvh * group + r % group) * D;
            for (int64_t c = 0; c < D; ++c) qt[static_cast<size_t>(c * rows + r)] = qh[c];
          }
          tile_scores(qt.data(), rows, keys, kvd, D, lo, hi, tile, scores.data());
          for (int64_t t = 0; t < tn; ++t)
            for (int64_t gi = 0; gi < group; ++gi) {
              const int64_t head = kvh * group + gi;
              T* r = scores.data() + at[t] + gi * span[t];
              T best = -INFINITY;
              for (int64_t i = 0; i < span[t]; ++i) {
                T s = r[i] * static_cast<T>(k.query_scale);
                if (k.attn_softcap > 0) s = std::tanh(s / static_cast<T>(k.attn_softcap)) * static_cast<T>(k.attn_softcap);
                if (!real_.empty() && !real_[static_cast<size_t>(first[t] + i)]) s = -INFINITY;  // a padding key
                r[i] = s;
                best = std::max(best, s);
              }
              if (best == -INFINITY)
                throw std::invalid_argument("position " + std::to_string(pos0 + t0 + t) + " of layer " + std::to_string(li) +
                                            " sees no real key (transformers' eager forward averages every value there)");
              // A merged cross-attention: the source's keys (every real position, no rope, no window) scored by the same
              // query, in the same softmax after the layer's own keys (apart: a softmax of their own).
              T* ce = cross_e.data() + (t * group + gi) * src;
              T cross_best = -INFINITY;
              if (merged) {
                const T* qh = Q.data() + (t0 + t) * widest + head * D;
                for (int64_t j = 0; j < src; ++j) {
                  if (!source_real_.empty() && !source_real_[static_cast<size_t>(j)]) continue;
                  const T* key = L.cross_keys.data() + j * kvd + kvh * D;
                  T sc = 0;
                  for (int64_t d = 0; d < D; ++d) sc += qh[d] * key[d];
                  sc *= static_cast<T>(k.query_scale);
                  if (k.attn_softcap > 0) sc = std::tanh(sc / static_cast<T>(k.attn_softcap)) * static_cast<T>(k.attn_softcap);
                  ce[j] = sc;
                  cross_best = std::max(cross_best, sc);
                }
                if (cross_best == -INFINITY) throw std::invalid_argument("set_source: the source has no real position");
                if (!apart) best = std::max(best, cross_best);
              }
              // A sink: one more logit in the softmax's max and denominator, with no value.
              const T sink = L.sinks.empty() ? T(0) : L.sinks[static_cast<size_t>(head)];
              if (!L.sinks.empty()) best = std::max(best, sink);
              T sum = 0, cross_sum = 0;
              for (int64_t i = 0; i < span[t]; ++i) sum += (r[i] = std::exp(r[i] - best));
              if (!L.sinks.empty()) sum += std::exp(sink - best);
              for (int64_t j = 0; j < src; ++j) {
                if (!source_real_.empty() && !source_real_[static_cast<size_t>(j)]) continue;
                if (apart) cross_sum += (ce[j] = std::exp(ce[j] - cross_best));
                else sum += (ce[j] = std::exp(ce[j] - best));
              }
              total[static_cast<size_t>(t * group + gi)] = sum;
              cross_total[static_cast<size_t>(t * group + gi)] = apart ? cross_sum : sum;
              T* out = A.data() + (t0 + t) * widest + head * Dv;
              std::fill(out, out + Dv, T(0));
            }
          tile_values(scores.data(), total.data(), values, kvdv, Dv, lo, hi, tile, A.data() + t0 * widest + kvh * group * Dv,
                      widest);
          for (int64_t t = 0; t < tn && merged; ++t)  // the source's values after the layer's own, key by key
            for (int64_t gi = 0; gi < group; ++gi) {
              const T* ce = cross_e.data() + (t * group + gi) * src;
              const T sum = cross_total[static_cast<size_t>(t * group + gi)];
              T* out = A.data() + (t0 + t) * widest + (kvh * group + gi) * Dv;
              for (int64_t j = 0; j < src; ++j) {
                if (!source_real_.empty() && !source_real_[static_cast<size_t>(j)]) continue;
                const T wj = ce[j] / sum;
                const T* vj = L.cross_values.data() + j * kvdv + kvh * Dv;
                for (int64_t d = 0; d < Dv; ++d) out[d] += wj * vj[d];
              }
            }
        }
      }
    // A residual add by the layer's rule (Residual): x = keep (.) x + branch (.) block, or h + branch (.) (block - h).
    auto residual_add = [&](const Row<T>& x, const std::vector<T>& block, const Row<T>& h, const Residual& r) {
      if (r.from_input)
        for (int64_t i = 0; i < H; ++i) x[i] = h[i] + r.branch[i] * (block[i] - h[i]);
      else
        for (int64_t i = 0; i < H; ++i) x[i] = r.keep[i] * x[i] + r.branch[i] * block[i];
    };
    // The rest of the layer, token by token.
    for (int64_t t = 0; t < n; ++t) {
      const Row<T> x = row(X, t, H), h = row(Hn, t, H), attn = row(A, t, widest);
      // The gate's activation: sigmoid, or laguna's softplus (torch's, linear above its threshold 20).
      auto gate_of = [&](T z) {
        return k.attn_gate_softplus ? (z > T(20) ? z : std::log1p(std::exp(z))) : T(1) / (T(1) + std::exp(-z));
      };
      if (!L.exclusive_scale.empty() && !conv && !recurrent && !delta) {
        // neomme's exclusive self-attention: each head's output less tanh(alpha) times its projection on the unit
        // vector of the query position's own value (its K/V head's), F.normalize's norm at least 1e-12.
        for (int64_t head = 0; head < NQ; ++head) {
          const T* v = S.values.data() + (pos0 + t) * kvdv + (head / group) * Dv;
          T* a = attn.data() + head * Dv;
          T sq = 0;
          for (int64_t d = 0; d < Dv; ++d) sq += v[d] * v[d];
          const T norm = std::max(std::sqrt(sq), static_cast<T>(1e-12));
          T proj = 0;
          for (int64_t d = 0; d < Dv; ++d) proj += a[d] * (v[d] / norm);
          const T scaled = L.exclusive_scale[static_cast<size_t>(head)] * proj;
          for (int64_t d = 0; d < Dv; ++d) a[d] -= scaled * (v[d] / norm);
        }
      }
      if (k.attn_out_norm && !conv)  // muse_spark's o_norm: each head's output RMS-normed, weightless
        for (int64_t head = 0; head < NQ; ++head)
          rms_norm(attn.data() + head * Dv, no_weight, Dv, eps, false, attn.data() + head * Dv);
      if (!L.gate_proj.empty() && k.attn_gate_elementwise) {
        // afmoe's attention gate: each output element times its own sigmoid(g_proj h).
        for (int64_t e = 0; e < NQ * Dv; ++e) {
          T z = 0;
          for (int64_t i = 0; i < H; ++i) z += L.gate_proj[static_cast<size_t>(e * H + i)] * h[i];
          if (!L.attn_gate_bias.empty()) z += L.attn_gate_bias[static_cast<size_t>(e / Dv)];        // beam: a bias per head
          attn[e] *= gate_of(L.gate_scale.empty() ? z : z * L.gate_scale[static_cast<size_t>(e)]);  // dory: (s_gate * s)^2
        }
      } else if (!L.gate_proj.empty()) {
        // lfm3's attention gate: each head's output times sigmoid(g_proj h), h the attention's input.
        for (int64_t head = 0; head < NQ; ++head) {
          T z = 0;
          for (int64_t i = 0; i < H; ++i) z += L.gate_proj[static_cast<size_t>(head * H + i)] * h[i];
          if (!L.attn_gate_bias.empty()) z += L.attn_gate_bias[static_cast<size_t>(head)];
          const T gate = gate_of(z);
          for (int64_t d = 0; d < Dv; ++d) attn[head * Dv + d] *= gate;
        }
      }
      if (k.attn_sub_norm && !conv && !recurrent)  // dory: every head's output at once, weightless
        rms_norm(attn.data(), no_weight, NQ * Dv, eps, false, attn.data(), k.l2_norm);
      if (k.laurel_rank > 0) {  // LAuReL of the attention's input: h + RMSNorm_w(right(left(h)))
        std::vector<T> low(static_cast<size_t>(k.laurel_rank));
        matvec(L.laurel_left, h.data(), k.laurel_rank, H, low.data());
        matvec(L.laurel_right, low.data(), H, k.laurel_rank, lr.data());
        rms_norm(lr.data(), L.laurel_norm, H, eps, k.gemma_norm, lr.data());
        for (int64_t i = 0; i < H; ++i) lr[i] = h[i] + lr[i];
      }
      matvec(L.o, attn.data(), H,
             recurrent ? k.lru_width
             : delta   ? k.delta_v_heads * k.delta_v_dim
             : conv    ? H
                       : NQ * Dv,
             o.data(), L.o_bias);
      if (k.parallel_block) {
        // The MLP reads the same normed input as the attention: h is kept.
        residual_add(x, o, h, L.attn_residual);
      } else if (k.norm_placement == NormPlacement::Sandwich) {
        rms_norm(o.data(), L.post_attn_norm, H, post_eps, k.gemma_norm, o.data(), k.l2_norm);  // weightless: post_attn_norm empty
        residual_add(x, o, h, L.attn_residual);
        if (k.laurel_rank > 0)
          for (int64_t i = 0; i < H; ++i) x[i] = (x[i] + lr[i]) / static_cast<T>(M_SQRT2);
        if (!L.cross_q.empty()) {
          // An encoder-decoder's cross-attention: queries from pre_cross_attn_layernorm(x) over every real source
          // position's keys and values (set_source), no rope, no window; x += post_cross_attn_layernorm(o_proj out).
          const Row<T> cq = row(Q, t, widest);
          rms_norm(x.data(), L.cross_pre_norm, H, eps, k.gemma_norm, h.data());
          matvec(L.cross_q, h.data(), NQ * D, H, cq.data(), L.cross_q_bias);
          const int64_t S = source_length_;
          const int64_t from = options_.cross_window && k.attention(li) == Attention::Sliding
                                   ? std::max<int64_t>(0, S - k.windows[l])
                                   : 0;  // the cross_window mutant: a sliding cache's last window of the source
          std::vector<T> e(static_cast<size_t>(S));
          for (int64_t head = 0; head < NQ; ++head) {
            const T* qh = cq.data() + head * D;
            const int64_t kv = (head / group) * D;
            T top = -INFINITY;
            for (int64_t j = from; j < S; ++j) {
              if (!source_real_.empty() && !source_real_[static_cast<size_t>(j)]) continue;
              const T* key = L.cross_keys.data() + j * kvd + kv;
              T sc = 0;
              for (int64_t d = 0; d < D; ++d) sc += qh[d] * key[d];
              sc *= static_cast<T>(k.query_scale);
              if (k.attn_softcap > 0) sc = std::tanh(sc / static_cast<T>(k.attn_softcap)) * static_cast<T>(k.attn_softcap);
              e[static_cast<size_t>(j)] = sc;
              top = std::max(top, sc);
            }
            if (top == -INFINITY) throw std::invalid_argument("set_source: the source has no real position");
            T sum = 0;
            for (int64_t j = from; j < S; ++j)
              if (source_real_.empty() || source_real_[static_cast<size_t>(j)]) sum += (e[j] = std::exp(e[j] - top));
            T* out = attn.data() + head * D;
            std::fill(out, out + D, T(0));
            for (int64_t j = from; j < S; ++j) {
              if (!source_real_.empty() && !source_real_[static_cast<size_t>(j)]) continue;
              const T* value = L.cross_values.data() + j * kvd + kv;
              for (int64_t d = 0; d < D; ++d) out[d] += e[j] / sum * value[d];
            }
          }
          matvec(L.cross_o, attn.data(), H, NQ * D, o.data(), L.cross_o_bias);
          rms_norm(o.data(), L.cross_post_norm, H, post_eps, k.gemma_norm, o.data());
          for (int64_t i = 0; i < H; ++i) x[i] += o[i];
        }
        rms_norm(x.data(), L.pre_ff_norm, H, eps, k.gemma_norm, h.data(), k.l2_norm);
      } else if (k.norm_placement == NormPlacement::Post) {
        rms_norm(o.data(), L.post_attn_norm, H, eps, k.gemma_norm, o.data());
        residual_add(x, o, h, L.attn_residual);
        std::copy(x.begin(), x.end(), h.begin());
      } else {
        residual_add(x, o, h, L.attn_residual);
        if (k.layer_norm) layer_norm(x.data(), L.post_attn_norm, H, eps, h.data(), L.post_attn_norm_bias);
        else rms_norm(x.data(), L.post_attn_norm, H, eps, k.gemma_norm, h.data());
      }
      // The dense MLP, or on a MoE layer its shared expert: act(gate h) * (up h), then down.
      const bool moe = !L.router.empty();
      int64_t I = moe ? k.moe.shared_intermediate : k.intermediate;
      if (!L.up.empty()) {
        if (!L.gate.empty()) matvec(L.gate, h.data(), I, H, g.data(), L.gate_bias);
        for (size_t i = 0; i < L.suv_gate.size(); ++i) g[i] *= L.suv_gate[i];  // dory: suv_gate * s per channel
        if (!L.gate.empty() && !k.activation_sparsity.empty() && k.activation_sparsity[l] > 0) {
          // relu(g - (mean + std * z)), the population std.
          T mean = 0, var = 0;
          for (int64_t i = 0; i < I; ++i) mean += g[i];
          mean /= static_cast<T>(I);
          for (int64_t i = 0; i < I; ++i) var += (g[i] - mean) * (g[i] - mean);
          const T cutoff = mean + std::sqrt(var / static_cast<T>(I)) * L.sparsity_cut;
          for (int64_t i = 0; i < I; ++i) g[i] = std::max(g[i] - cutoff, T(0));
        }
        matvec(L.up, h.data(), I, H, u.data(), L.up_bias);
        for (size_t i = 0; i < L.suv_up.size(); ++i) u[i] *= L.suv_up[i];
        // step3p7's bound after the activation (mlp_limits): act(gate) <= c, -c <= up <= c.
        const T limit = k.mlp_limits.empty() ? T(0) : static_cast<T>(k.mlp_limits[l]);
        for (int64_t i = 0; i < I; ++i) {
          if (L.gate.empty()) {  // ergo: down(act(up h)), no gate
            g[i] = activate(k, u[i]);
            continue;
          }
          const T a = options_.gelu_half && k.gelu ? round_kv(g[i], true) : g[i];
          T act = activate(k, a);
          if (limit > 0) act = std::min(act, limit), u[i] = std::clamp(u[i], -limit, limit);
          g[i] = (options_.gelu_half && k.gelu ? round_kv(act, true) : act) * u[i];
        }
        if (k.mlp_sub_norm) rms_norm(g.data(), no_weight, I, eps, false, g.data(), k.l2_norm);  // dory, before down_proj
        matvec(L.down, g.data(), H, I, m.data(), L.down_bias);
        if (!L.shared_gate.empty()) {  // qwen2_moe: the shared expert's output times sigmoid(shared_expert_gate h)
          T z = 0;
          for (int64_t i = 0; i < H; ++i) z += L.shared_gate[static_cast<size_t>(i)] * h[i];
          const T gate = T(1) / (T(1) + std::exp(-z));
          for (T& v : m) v *= gate;
        }
        if (!L.shared_norm.empty()) rms_norm(m.data(), L.shared_norm, H, eps, false, m.data());  // ergo's shared norm
      } else {
        std::fill(m.begin(), m.end(), T(0));
      }
      I = k.moe.intermediate;
      if (moe) {
        const int64_t E = k.moe.experts;
        const bool gpt_oss = k.moe.routing == MoeRouting::GptOss, topk = k.moe.routing == MoeRouting::TopK;
        matvec(L.router, h.data(), E, H, router_logits.data(), L.router_bias);
        if (k.moe.router_scale != 1)  // muse_spark: the logits times output_multiplier
          for (T& v : router_logits) v *= static_cast<T>(k.moe.router_scale);
        if (k.moe.router_softcap > 0)  // laguna: tanh(logit / c) * c before the scores and the choice
          for (T& v : router_logits)
            v = std::tanh(v / static_cast<T>(k.moe.router_softcap)) * static_cast<T>(k.moe.router_softcap);
        // TopK: the scores the weights come from, and what the experts are chosen by.
        std::vector<T> score(router_logits.begin(), router_logits.end()), choice;
        if (topk && k.moe.score == MoeScore::Softmax) {
          const T top = *std::max_element(score.begin(), score.end());
          T sum = 0;
          for (T& v : score) sum += (v = std::exp(v - top));
          for (T& v : score) v /= sum;
        } else if (topk && k.moe.score == MoeScore::Sigmoid) {
          for (T& v : score) v = T(1) / (T(1) + std::exp(-v));
        }
        choice = k.moe.select_logits ? std::vector<T>(router_logits.begin(), router_logits.end()) : score;
        if (!L.selection_bias.empty())
          for (int64_t e = 0; e < E; ++e) choice[static_cast<size_t>(e)] += L.selection_bias[static_cast<size_t>(e)];
        if (topk && k.moe.groups > 1) {
          // Group-limited: a group's score is the sum of its two best choices; the experts of all but
          // the topk_groups best groups cannot be chosen.
          const int64_t G = k.moe.groups, per = E / G;
          std::vector<T> group_score(static_cast<size_t>(G));
          for (int64_t gi = 0; gi < G; ++gi) {
            std::vector<T> members(choice.begin() + gi * per, choice.begin() + (gi + 1) * per);
            std::partial_sort(members.begin(), members.begin() + 2, members.end(), std::greater<T>());
            group_score[static_cast<size_t>(gi)] = members[0] + members[1];
          }
          std::vector<int64_t> groups(static_cast<size_t>(G));
          for (int64_t gi = 0; gi < G; ++gi) groups[static_cast<size_t>(gi)] = gi;
          std::stable_sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return group_score[a] > group_score[b]; });
          for (int64_t r = k.moe.topk_groups; r < G; ++r)
            for (int64_t e = groups[static_cast<size_t>(r)] * per; e < (groups[static_cast<size_t>(r)] + 1) * per; ++e)
              choice[static_cast<size_t>(e)] = -INFINITY;
        }
        std::vector<int64_t> order(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
        // llama4: sigmoid of each top-k logit, scaling the expert's input (the other experts get a
        // zero input, sigmoid(-inf), and add nothing); gpt_oss: softmax over the top-k logits,
        // weighting the expert's output; TopK: the chosen scores (MoeConfig), weighting the output.
        const int64_t top_k = k.moe.top_k;
        std::vector<T> weight(static_cast<size_t>(top_k));
        if (topk) {
          if (k.moe.score == MoeScore::TopKSoftmax) {
            const T top = score[order[0]];
            T sum = 0;
            for (int64_t r = 0; r < top_k; ++r) sum += (weight[r] = std::exp(score[order[r]] - top));
            for (T& w : weight) w /= sum;
          } else {
            for (int64_t r = 0; r < top_k; ++r) weight[r] = score[order[r]];
          }
          if (k.moe.renormalize) {
            T sum = 0;
            for (const T& w : weight) sum += w;
            sum += static_cast<T>(k.moe.renormalize_eps);  // muse_spark's 1e-15 (x + 0 is exact)
            for (T& w : weight) w /= sum;
          }
          for (T& w : weight) w *= static_cast<T>(k.moe.routed_scale);
        } else if (gpt_oss) {
          const T top = router_logits[order[0]];
          T sum = 0;
          for (int64_t r = 0; r < top_k; ++r) sum += (weight[r] = std::exp(router_logits[order[r]] - top));
          for (T& w : weight) w /= sum;
        } else {
          for (int64_t r = 0; r < top_k; ++r) weight[r] = T(1) / (T(1) + std::exp(-router_logits[order[r]]));
        }
        const T alpha = static_cast<T>(k.moe.swiglu_alpha), limit = static_cast<T>(k.moe.swiglu_limit);
        // The experts' width P: the hidden size, or muse_spark's pooled width (their input pre_expert_norm(pre_expert_proj h)).
        const int64_t P = k.expert_width();
        if (k.moe.pooled > 0) {
          matvec(L.pre_expert_proj, h.data(), P, H, pooled_in.data());
          rms_norm(pooled_in.data(), L.pre_expert_norm, P, eps, true, pooled_in.data());
        }
        const T* in = k.moe.pooled > 0 ? pooled_in.data() : h.data();
        const T expert_limit = k.moe.expert_limits.empty() ? T(0) : static_cast<T>(k.moe.expert_limits[l]);
        std::fill(routed.begin(), routed.end(), T(0));
        for (int64_t r = 0; r < top_k; ++r) {
          const int64_t e = order[static_cast<size_t>(r)];
          for (int64_t i = 0; i < P; ++i) expert_in[i] = gpt_oss || topk ? in[i] : in[i] * weight[r];
          const int64_t cols = k.mlp_ungated ? I : 2 * I;         // ergo: up only
          const T* gu = L.experts_gate_up.data() + e * P * cols;  // [P, 2I] (ergo [P, I]): x @ W
          for (int64_t c = 0; c < cols; ++c) {
            T s = 0;
            for (int64_t i = 0; i < P; ++i) s += expert_in[i] * gu[i * cols + c];
            if (gpt_oss) s += L.experts_gate_up_bias[static_cast<size_t>(e * 2 * I + c)];
            // llama4 (and gate_up_halves): gate, up = the halves; gpt_oss: the even and odd columns; ergo: up alone.
            if (gpt_oss && !k.moe.gate_up_halves) (c % 2 ? u[c / 2] : g[c / 2]) = s;
            else if (k.mlp_ungated) u[c] = s;
            else (c < I ? g[c] : u[c - I]) = s;
          }
          for (int64_t i = 0; i < I; ++i) {
            if (gpt_oss) {
              const T gate = std::min(g[i], limit), up = std::clamp(u[i], -limit, limit);
              g[i] = (up + T(1)) * (gate / (T(1) + std::exp(-gate * alpha)));
            } else if (k.mlp_ungated) {  // ergo: act(up)
              g[i] = activate(k, u[i]);
            } else if (expert_limit > 0) {  // step3p7: silu(gate) <= c, -c <= up <= c
              g[i] = std::clamp(u[i], -expert_limit, expert_limit) * std::min(silu(g[i]), expert_limit);
            } else {
              g[i] = u[i] * silu(g[i]);
            }
          }
          const T* dn = L.experts_down.data() + e * I * P;  // [I, P]
          for (int64_t c = 0; c < P; ++c) {
            T s = 0;
            for (int64_t i = 0; i < I; ++i) s += g[i] * dn[i * P + c];
            if (gpt_oss) s = (s + L.experts_down_bias[static_cast<size_t>(e * P + c)]);
            expert_out[c] = s;
          }
          if (!L.expert_norms.empty()) {  // ergo: the expert's own RMS norm of its output, before its weight
            T sum = 0;
            for (int64_t c = 0; c < P; ++c) sum += expert_out[c] * expert_out[c];
            const T inv = T(1) / std::sqrt(sum / static_cast<T>(P) + eps);
            for (int64_t c = 0; c < P; ++c) expert_out[c] = expert_out[c] * inv * L.expert_norms[static_cast<size_t>(e * P + c)];
          }
          if (k.moe.expert_out_norm) {  // muse_spark's post_expert_norm: RMS of out * (1 + w)
            for (int64_t c = 0; c < P; ++c) expert_out[c] *= T(1) + L.post_expert_norm[c];
            rms_norm(expert_out.data(), no_weight, P, post_eps, false, expert_out.data());
          }
          for (int64_t c = 0; c < P; ++c) routed[c] += gpt_oss || topk ? expert_out[c] * weight[r] : expert_out[c];
        }
        if (k.moe.pooled > 0) {  // back to the hidden size
          matvec(L.post_expert_proj, routed.data(), H, P, expert_out.data());
          std::copy(expert_out.begin(), expert_out.begin() + H, routed.begin());
        }
        for (int64_t i = 0; i < H; ++i) m[i] += routed[i];
        if (k.moe.combined_scale != 1)  // cohere2_moe's "average": (routed + shared) / 2
          for (T& v : m) v *= static_cast<T>(k.moe.combined_scale);
      }
      if (k.post_ff_norm_input_scaled) {  // muse_spark: RMS of m * (1 + w)
        for (int64_t i = 0; i < H; ++i) m[i] *= T(1) + L.post_ff_norm[i];
        rms_norm(m.data(), no_weight, H, post_eps, false, m.data());
      } else if (k.norm_placement != NormPlacement::Pre) {
        rms_norm(m.data(), L.post_ff_norm, H, k.norm_placement == NormPlacement::Sandwich ? post_eps : eps, k.gemma_norm,
                 m.data(), k.l2_norm);
      }
      residual_add(x, m, h, L.ff_residual);
      if (P > 0 && NA == 0) {  // the layer's per-layer input: x += norm(per_layer_projection(act(gate x) * pli_l))
        matvec(L.per_layer_gate, x.data(), P, H, gated.data());
        const T* in = pli.data() + (t * k.layers + li) * P;
        for (int64_t j = 0; j < P; ++j) gated[j] = activate(k, gated[j]) * in[j];
        matvec(L.per_layer_proj, gated.data(), H, P, o.data());
        rms_norm(o.data(), L.per_layer_norm, H, eps, k.gemma_norm, o.data());
        for (int64_t i = 0; i < H; ++i) x[i] += o[i];
      }
      if (k.layer_scalar)
        for (T& v : x) v *= L.scalar;
      if (NA > 0) {
        // AltUp's correction of every stream by the layer's output x, then the per-layer input into streams 1..
        T* st = streams.data() + t * NA * H;
        const T* pr = pred.data() + t * NA * H;
        modalities(L, x.data());
        for (int64_t i = 0; i < NA; ++i) {
          T coef = 0;
          for (int64_t j = 0; j < NA; ++j) coef += L.altup_correct[static_cast<size_t>(i * NA + j)] * mod[j];
          coef += T(1);
          for (int64_t c = 0; c < H; ++c) st[i * H + c] = (x[c] - pr[k.altup_active * H + c]) * coef + pr[i * H + c];
        }
        std::copy(st + k.altup_active * H, st + (k.altup_active + 1) * H, o.begin());
        if (k.altup_correct_scale)
          for (int64_t c = 0; c < H; ++c) o[c] *= L.altup_scale[static_cast<size_t>(c)];
        if (P > 0) {
          matvec(L.per_layer_gate, o.data(), P, H, gated.data());
          const T* in = pli.data() + (t * k.layers + li) * P;
          for (int64_t j = 0; j < P; ++j) gated[j] = activate(k, gated[j]) * in[j];
          matvec(L.per_layer_proj, gated.data(), H, P, o.data());
          rms_norm(o.data(), L.per_layer_norm, H, eps, k.gemma_norm, o.data());
          for (int64_t i = 1; i < NA; ++i)
            for (int64_t c = 0; c < H; ++c) st[i * H + c] += o[c];
        }
      }
    }
  }
  // AltUp: the final norm reads the mean of stream 0 and the others' unembedding projections at stream 0's RMS.
  for (int64_t t = 0; t < n && NA > 0; ++t) {
    T* st = streams.data() + t * NA * H;
    const T target = rms(st);
    for (int64_t i = 1; i < NA; ++i) {
      matvec(altup_unembed_[static_cast<size_t>(i - 1)], st + i * H, H, H, o.data());
      rescale(o.data(), target);
      std::copy(o.begin(), o.end(), st + i * H);
    }
    for (int64_t c = 0; c < H; ++c) {
      T sum = 0;
      for (int64_t i = 0; i < NA; ++i) sum += st[i * H + c];
      X[static_cast<size_t>(t * H + c)] = sum / static_cast<T>(NA);
    }
  }
  const int64_t V = k.out_width();
  std::vector<T> head(static_cast<size_t>(V)), head_inner;
  for (int64_t t = 0; t < n; ++t) {
    const Row<T> x = row(X, t, H), h = row(Hn, t, H);
    double* out = logits + t * V;
    if (k.layer_norm) layer_norm(x.data(), final_norm_, H, eps, h.data(), final_norm_bias_);
    else rms_norm(x.data(), final_norm_, H, eps, k.gemma_norm && !k.final_norm_plain, h.data(), k.l2_norm);
    if (k.hidden_output) {  // an encoder-decoder's encoder: the final-normed rows themselves
      for (int64_t i = 0; i < H; ++i) out[i] = static_cast<double>(h[i]);
      continue;
    }
    if (k.prediction_head == PredictionHead::ModernBert) {  // norm(act(dense h)) (x is done with: its row is scratch)
      matvec(head_dense_, h.data(), H, H, x.data(), head_dense_bias_);
      for (T& v : x) v = activate(k, v);
      layer_norm(x.data(), head_norm_, H, eps, h.data(), head_norm_bias_);
    } else if (k.prediction_head == PredictionHead::Ultrabert) {  // gelu_tanh(linear2 gelu_tanh(linear1 h))
      ModelConfig tanh_gelu;
      tanh_gelu.gelu = true;
      head_inner.resize(static_cast<size_t>(k.head_size));
      matvec(head_dense_, h.data(), k.head_size, H, head_inner.data());
      for (T& v : head_inner) v = activate(tanh_gelu, v);
      matvec(head_norm_, head_inner.data(), H, k.head_size, h.data());
      for (T& v : h) v = activate(tanh_gelu, v);
    }
    if (k.embedding_rank > 0) {  // neomme's factorized head: r = U^T h (R values), then lm_head [V, R]
      head_inner.assign(static_cast<size_t>(embed_row), T(0));
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < embed_row; ++j)
          head_inner[static_cast<size_t>(j)] += h[i] * unembed_proj_[static_cast<size_t>(i * embed_row + j)];
      matvec(lm_head_, head_inner.data(), V, embed_row, head.data(), lm_head_bias_);
    } else matvec(lm_head_, h.data(), V, H, head.data(), lm_head_bias_);
    for (int64_t r = 0; r < V; ++r) {
      T s = head[static_cast<size_t>(r)];
      if (k.logit_scale != 1) s *= static_cast<T>(k.logit_scale);
      if (!logit_scales_.empty()) s *= logit_scales_[static_cast<size_t>(r)];  // dory: per vocabulary entry
      if (k.final_softcap > 0) s = std::tanh(s / static_cast<T>(k.final_softcap)) * static_cast<T>(k.final_softcap);
      out[r] = static_cast<double>(s);
    }
  }
}

template <class T>
std::vector<double> SequenceOracle<T>::encode(const std::vector<int32_t>& tokens, const std::vector<bool>& real) {
  if (!config_.bidirectional) throw std::invalid_argument(config_.name + ": encode runs an encoder; a causal model extends");
  if (length_ != 0) throw std::invalid_argument(config_.name + ": an encoder's forward is one whole sequence");
  if (!real.empty() && real.size() != tokens.size())
    throw std::invalid_argument("encode: attention_mask has " + std::to_string(real.size()) + " entries for " +
                                std::to_string(tokens.size()) + " tokens");
  real_ = real;
  std::vector<double> out(tokens.size() * static_cast<size_t>(config_.out_width()));
  forward(tokens.data(), static_cast<int64_t>(tokens.size()), 0, out.data());
  length_ = static_cast<int64_t>(tokens.size());
  return out;
}

template <class T>
void SequenceOracle<T>::set_source(const std::vector<int32_t>& tokens, const std::vector<bool>& real) {
  if (!encoder_) throw std::invalid_argument(config_.name + ": set_source is an encoder-decoder's");
  if (source_length_ >= 0 || length_ != 0) throw std::invalid_argument(config_.name + ": the source is set once, first");
  // The encoder under this run's encoder options (its reach, causal); the decoder's windows are not its.
  OracleOptions encoder_options;
  encoder_options.reach_delta = options_.reach_delta;
  encoder_options.causal = options_.causal;
  SequenceOracle<T> encoder(*encoder_, *config_.encoder, encoder_options);
  const std::vector<double> rows = encoder.encode(tokens, real);  // [source, cross_width]
  const int64_t S = static_cast<int64_t>(tokens.size()), W = config_.cross_width;
  std::vector<T> in(static_cast<size_t>(W));
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    const int64_t li = static_cast<int64_t>(l), kvd = config_.kv(li) * config_.dim(li);
    std::vector<T> kk(static_cast<size_t>(kvd)), vv(static_cast<size_t>(kvd));
    const bool merged = config_.merged_cross_attention;
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t i = 0; i < W; ++i) in[i] = static_cast<T>(rows[static_cast<size_t>(j * W + i)]);
      matvec(merged ? L.k : L.cross_k, in.data(), kvd, W, kk.data(), merged ? L.k_bias : L.cross_k_bias);
      matvec(merged ? L.v : L.cross_v, in.data(), kvd, W, vv.data(), merged ? L.v_bias : L.cross_v_bias);
      if (merged && config_.qk_norm) {  // the self-attention's k_norm per head, no rope (T5Gemma2MergedAttention)
        const int64_t D = config_.dim(li);
        for (int64_t h = 0; h < config_.kv(li); ++h)
          rms_norm(kk.data() + h * D, L.k_norm, D, static_cast<T>(config_.eps), config_.gemma_norm, kk.data() + h * D);
      }
      L.cross_keys.insert(L.cross_keys.end(), kk.begin(), kk.end());
      L.cross_values.insert(L.cross_values.end(), vv.begin(), vv.end());
    }
  }
  source_real_ = real;
  source_length_ = S;
}

template <class T>
std::vector<double> SequenceOracle<T>::extend(const std::vector<int32_t>& tokens) {
  if (config_.bidirectional)
    throw std::invalid_argument(config_.name + ": an encoder (" + to_string(config_.family) +
                                ") has no incremental forward: its positions see later tokens (encode)");
  if (encoder_ && source_length_ < 0)
    throw std::invalid_argument(config_.name + ": an encoder-decoder decodes against its source (set_source first)");
  std::vector<double> out(tokens.size() * static_cast<size_t>(config_.out_width()));
  forward(tokens.data(), static_cast<int64_t>(tokens.size()), length_, out.data());
  length_ += static_cast<int64_t>(tokens.size());
  return out;
}

template <class T>
void SequenceOracle<T>::truncate(int64_t n) {
  if (n < 0 || n > length_)
    throw std::invalid_argument("cannot drop " + std::to_string(n) + " of " + std::to_string(length_) + " positions");
  length_ -= n;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int64_t li = static_cast<int64_t>(l);
    const int64_t state_width = config_.recurrent(li) ? config_.lru_width
                                : config_.delta(li)   ? config_.delta_conv_width()
                                                      : config_.hidden;  // conv_in's row
    layers_[l].conv_in.resize(layers_[l].conv_in.empty() ? 0 : static_cast<size_t>(length_ * state_width));
    layers_[l].lru_state.resize(layers_[l].lru_state.empty() ? 0 : static_cast<size_t>(length_ * config_.lru_width));
    layers_[l].delta_state.resize(static_cast<size_t>(
        layers_[l].delta_state.empty() ? 0 : length_ * config_.delta_v_heads * config_.delta_k_dim * config_.delta_v_dim));
    if (config_.shares_kv(li)) continue;
    layers_[l].keys.resize(static_cast<size_t>(length_ * config_.kv(li) * config_.dim(li)));
    layers_[l].values.resize(static_cast<size_t>(length_ * config_.kv(li) * config_.vdim(li)));
  }
}

template <class T>
void SequenceOracle<T>::shift(int64_t keep, int64_t discard, bool rerotate) {
  if (keep < 0 || discard < 0 || keep + discard > length_)
    throw std::invalid_argument("cannot shift out " + std::to_string(discard) + " positions after " + std::to_string(keep) +
                                " of " + std::to_string(length_));
  const ModelConfig& k = config_;
  if (!k.conv_layers.empty() && std::find(k.conv_layers.begin(), k.conv_layers.end(), true) != k.conv_layers.end())
    throw std::invalid_argument(
        "a context shift is not defined for a model with convolution layers: their state has no position to move");
  if (std::find(k.recurrent_layers.begin(), k.recurrent_layers.end(), true) != k.recurrent_layers.end() ||
      std::find(k.delta_layers.begin(), k.delta_layers.end(), true) != k.delta_layers.end())
    throw std::invalid_argument(
        "a context shift is not defined for a model with recurrent layers: their state has no position to move");
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int64_t li = static_cast<int64_t>(l);
    if (k.shares_kv(li)) continue;
    Layer& L = layers_[l];
    const int64_t D = k.dim(li), KVH = k.kv(li), kvd = KVH * D;
    const bool use_rope = k.rope(li);
    if (rerotate && use_rope && discard > 0) {
      // A pure rotation (scale 1: YaRN's attention factor was applied once, when the key was computed),
      // re-stored at the cache's precision as llama.cpp writes the shifted K back.
      const int64_t rd = k.rotary(li);
      for (int64_t j = keep + discard; j < length_; ++j)
        for (int64_t i = 0; i < KVH; ++i) {
          T* key = L.keys.data() + j * kvd + i * D;
          rope(key, L.inv_freq, rd, -discard, k.rope_interleaved, T(1));
          if (options_.k_block != KvBlock::None) continue;  // the whole row is re-quantized below
          for (int64_t d = 0; d < D; ++d) key[d] = options_.kv_bf16 ? round_bf16(key[d]) : round_kv(key[d], options_.kv_half);
        }
      // llama.cpp's shift of a quantized K dequantizes, rotates and copies back (ggml_cpy: from_float).
      if (options_.k_block != KvBlock::None)
        for (int64_t j = keep + discard; j < length_; ++j) round_kv_blocks(L.keys.data() + j * kvd, kvd, options_.k_block);
    }
    L.keys.erase(L.keys.begin() + keep * kvd, L.keys.begin() + (keep + discard) * kvd);
    const int64_t kvdv = KVH * k.vdim(li);
    L.values.erase(L.values.begin() + keep * kvdv, L.values.begin() + (keep + discard) * kvdv);
  }
  length_ -= discard;
  if (forgotten_ > keep) forgotten_ = std::max(keep, forgotten_ - discard);
}

template class SequenceOracle<double>;
template class SequenceOracle<float>;

std::optional<WindowSensitivity> window_sensitivity(const Model& model) {
  const ModelConfig& c = model.config;
  OracleOptions moved;
  bool local = false;
  for (int64_t l = 0; l < c.layers; ++l) local |= c.attention(l) != Attention::Full;
  if (!local) return std::nullopt;
  for (const int64_t w : c.windows) moved.windows.push_back(w > 0 ? w + 1 : 0);
  for (const int64_t k : c.chunks) moved.chunks.push_back(k > 0 ? k + 1 : 0);
  const int64_t span = c.local_span(), n = span <= 64 ? 2 * span + 2 : span + 2;
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(1 + (37 * i + 11) % std::max<int64_t>(1, c.vocab - 1)));
  const std::vector<double> base = SequenceOracle<double>(model).extend(tokens);
  const std::vector<double> wider = SequenceOracle<double>(model, moved).extend(tokens);
  const std::vector<double> single = SequenceOracle<float>(model).extend(tokens);
  WindowSensitivity out;
  for (size_t i = 0; i < base.size(); ++i) {
    out.moved = std::max(out.moved, std::abs(base[i] - wider[i]));
    out.float32_error = std::max(out.float32_error, std::abs(base[i] - single[i]));
  }
  return out;
}

}  // namespace kvc::engine
