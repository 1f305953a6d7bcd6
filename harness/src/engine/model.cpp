// The model-level oracle (engine/model.h): a plain-loop forward of the gemma2, gemma3 and mistral
// families, written from the families' published architecture (the transformers modeling files),
// with the window rule of each layer applied as an explicit predicate over absolute positions.
#include "kvconform/engine/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kvc::engine {

using nlohmann::json;

const char* to_string(Family f) {
  switch (f) {
    case Family::Gemma2: return "gemma2";
    case Family::Gemma3: return "gemma3_text";
    case Family::Mistral: return "mistral";
  }
  return "?";
}

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& field, const std::string& why) {
  throw std::invalid_argument(file + ": " + field + ": " + why);
}

int64_t positive(const json& c, const std::string& key, const std::string& file) {
  if (!c.contains(key) || !c[key].is_number_integer() || c[key].get<int64_t>() <= 0)
    bad(file, "/" + key, "must be a positive integer");
  return c[key].get<int64_t>();
}

double number_or(const json& c, const std::string& key, double fallback, const std::string& file) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_number()) bad(file, "/" + key, "must be a number");
  return c[key].get<double>();
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

std::vector<int64_t> layer_windows(const json& c, int64_t layers, int64_t window, int64_t default_pattern,
                                   const std::string& file) {
  std::vector<int64_t> w(static_cast<size_t>(layers), 0);
  if (c.contains("layer_types") && !c["layer_types"].is_null()) {
    const json& t = c["layer_types"];
    if (!t.is_array() || static_cast<int64_t>(t.size()) != layers)
      bad(file, "/layer_types", "must list one type per layer (" + std::to_string(layers) + ")");
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string s = t[i].is_string() ? t[i].get<std::string>() : "";
      if (s == "sliding_attention") w[i] = window;
      else if (s != "full_attention")
        bad(file, "/layer_types/" + std::to_string(i), "is \"" + s + "\" (expected sliding_attention or full_attention)");
    }
    return w;
  }
  for (int64_t i = 0; i < layers; ++i) w[static_cast<size_t>(i)] = (i + 1) % default_pattern ? window : 0;
  return w;
}

}  // namespace

ModelConfig parse_config(const json& c, const std::string& file) {
  if (!c.is_object()) bad(file, "", "must be a JSON object");
  ModelConfig m;
  const std::string type = c.value("model_type", std::string());
  if (type == "gemma2") m.family = Family::Gemma2;
  else if (type == "gemma3_text") m.family = Family::Gemma3;
  else if (type == "mistral") m.family = Family::Mistral;
  else bad(file, "/model_type", "\"" + type + "\" is not a family the oracle models (gemma2, gemma3_text, mistral)");
  m.vocab = positive(c, "vocab_size", file);
  m.hidden = positive(c, "hidden_size", file);
  m.layers = positive(c, "num_hidden_layers", file);
  m.heads = positive(c, "num_attention_heads", file);
  m.kv_heads = c.contains("num_key_value_heads") ? positive(c, "num_key_value_heads", file) : m.heads;
  if (m.heads % m.kv_heads) bad(file, "/num_key_value_heads", "must divide num_attention_heads");
  m.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? positive(c, "head_dim", file) : m.hidden / m.heads;
  if (m.head_dim % 2) bad(file, "/head_dim", "must be even (rope rotates halves)");
  m.intermediate = positive(c, "intermediate_size", file);
  m.eps = number_or(c, "rms_norm_eps", 1e-6, file);
  if (c.value("attention_bias", false)) bad(file, "/attention_bias", "true is not modelled");
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null()) bad(file, "/rope_scaling", "is not modelled (default rope only)");
  const bool has_window = c.contains("sliding_window") && !c["sliding_window"].is_null();
  m.sliding_window = has_window ? positive(c, "sliding_window", file) : 0;
  switch (m.family) {
    case Family::Gemma2:
    case Family::Gemma3: {
      const bool g3 = m.family == Family::Gemma3;
      m.gemma_norm = true;
      m.gelu = true;
      m.qk_norm = g3;
      m.tied = c.value("tie_word_embeddings", true);
      m.embed_scale = std::sqrt(static_cast<double>(m.hidden));
      m.query_scale = std::pow(number_or(c, "query_pre_attn_scalar", g3 ? 256 : 256, file), -0.5);
      m.attn_softcap = number_or(c, "attn_logit_softcapping", g3 ? 0 : 50, file);
      m.final_softcap = number_or(c, "final_logit_softcapping", g3 ? 0 : 30, file);
      m.rope_theta = rope_base(c, "full_attention", "rope_theta", g3 ? 1e6 : 1e4, file);
      if (g3) m.rope_local_theta = rope_base(c, "sliding_attention", "rope_local_base_freq", 1e4, file);
      const int64_t pattern = g3 ? (c.contains("sliding_window_pattern") ? positive(c, "sliding_window_pattern", file) : 6) : 2;
      m.windows = layer_windows(c, m.layers, m.sliding_window, pattern, file);
      break;
    }
    case Family::Mistral:
      m.tied = c.value("tie_word_embeddings", false);
      m.query_scale = std::pow(static_cast<double>(m.head_dim), -0.5);
      m.rope_theta = rope_base(c, "full_attention", "rope_theta", 1e4, file);
      // MistralAttention passes config.sliding_window to every layer.
      m.windows.assign(static_cast<size_t>(m.layers), m.sliding_window);
      break;
  }
  for (int64_t w : m.windows)
    if (w < 0) bad(file, "/sliding_window", "must be positive");
  return m;
}

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
    if (!width) throw std::runtime_error(path + ": tensor \"" + name + "\" has dtype " + dtype + " (F64, F32, F16, BF16 are read)");
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

Model load_model(const std::string& dir) {
  Model m;
  const std::string cfg_path = dir + "/config.json";
  const json c = json::parse(read_file(cfg_path), nullptr, false);
  if (c.is_discarded()) throw std::runtime_error(cfg_path + ": not valid JSON");
  m.config = parse_config(c, cfg_path);
  m.config.name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  const std::string st = dir + "/model.safetensors";
  m.tensors = read_safetensors(st);
  const ModelConfig& k = m.config;
  auto need = [&](const std::string& name, int64_t size) {
    const auto& t = m.at(name);
    if (static_cast<int64_t>(t.size()) != size)
      throw std::runtime_error(st + ": tensor \"" + name + "\" has " + std::to_string(t.size()) + " values, expected " +
                               std::to_string(size));
  };
  need("model.embed_tokens.weight", k.vocab * k.hidden);
  need("model.norm.weight", k.hidden);
  if (!k.tied) need("lm_head.weight", k.vocab * k.hidden);
  for (int64_t l = 0; l < k.layers; ++l) {
    need(layer_name(l, "self_attn.q_proj.weight"), k.heads * k.head_dim * k.hidden);
    need(layer_name(l, "self_attn.k_proj.weight"), k.kv_heads * k.head_dim * k.hidden);
    need(layer_name(l, "self_attn.v_proj.weight"), k.kv_heads * k.head_dim * k.hidden);
    need(layer_name(l, "self_attn.o_proj.weight"), k.hidden * k.heads * k.head_dim);
    need(layer_name(l, "mlp.gate_proj.weight"), k.intermediate * k.hidden);
    need(layer_name(l, "mlp.up_proj.weight"), k.intermediate * k.hidden);
    need(layer_name(l, "mlp.down_proj.weight"), k.hidden * k.intermediate);
    need(layer_name(l, "input_layernorm.weight"), k.hidden);
    need(layer_name(l, "post_attention_layernorm.weight"), k.hidden);
    if (k.gemma_norm) {
      need(layer_name(l, "pre_feedforward_layernorm.weight"), k.hidden);
      need(layer_name(l, "post_feedforward_layernorm.weight"), k.hidden);
    }
    if (k.qk_norm) {
      need(layer_name(l, "self_attn.q_norm.weight"), k.head_dim);
      need(layer_name(l, "self_attn.k_norm.weight"), k.head_dim);
    }
  }
  return m;
}

namespace {

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// RMSNorm over n values; gemma applies its weight as (1 + w).
template <class T>
void rms_norm(const T* x, const std::vector<T>& w, int64_t n, T eps, bool plus_one, T* out) {
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const T inv = T(1) / std::sqrt(sum / static_cast<T>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * (plus_one ? T(1) + w[i] : w[i]);
}

// out[r] = sum_c W[r, c] x[c], W row-major [rows, cols] as nn.Linear stores it.
template <class T>
void matvec(const std::vector<T>& w, const T* x, int64_t rows, int64_t cols, T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = w.data() + r * cols;
    T s = 0;
    for (int64_t c = 0; c < cols; ++c) s += row[c] * x[c];
    out[r] = s;
  }
}

// Rotates halves (transformers' rotate_half convention): pairs (i, i + d/2).
template <class T>
void rope(T* v, const std::vector<T>& inv_freq, int64_t d, int64_t pos) {
  const int64_t h = d / 2;
  for (int64_t i = 0; i < h; ++i) {
    const T angle = static_cast<T>(pos) * inv_freq[static_cast<size_t>(i)];
    const T c = std::cos(angle), s = std::sin(angle);
    const T a = v[i], b = v[i + h];
    v[i] = a * c - b * s;
    v[i + h] = b * c + a * s;
  }
}

template <class T>
T round_kv(T x, bool half) {
  return half ? static_cast<T>(static_cast<_Float16>(x)) : x;
}

}  // namespace

template <class T>
SequenceOracle<T>::SequenceOracle(const Model& model, OracleOptions options)
    : config_(model.config), options_(std::move(options)) {
  const ModelConfig& k = config_;
  if (!options_.windows.empty() && static_cast<int64_t>(options_.windows.size()) != k.layers)
    throw std::invalid_argument("OracleOptions::windows needs one window per layer");
  embed_ = as<T>(model.at("model.embed_tokens.weight"));
  final_norm_ = as<T>(model.at("model.norm.weight"));
  lm_head_ = k.tied ? embed_ : as<T>(model.at("lm_head.weight"));
  layers_.resize(static_cast<size_t>(k.layers));
  for (int64_t l = 0; l < k.layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    auto get = [&](const std::string& what) { return as<T>(model.at(layer_name(l, what))); };
    L.q = get("self_attn.q_proj.weight");
    L.k = get("self_attn.k_proj.weight");
    L.v = get("self_attn.v_proj.weight");
    L.o = get("self_attn.o_proj.weight");
    L.gate = get("mlp.gate_proj.weight");
    L.up = get("mlp.up_proj.weight");
    L.down = get("mlp.down_proj.weight");
    L.in_norm = get("input_layernorm.weight");
    L.post_attn_norm = get("post_attention_layernorm.weight");
    if (k.gemma_norm) {
      L.pre_ff_norm = get("pre_feedforward_layernorm.weight");
      L.post_ff_norm = get("post_feedforward_layernorm.weight");
    }
    if (k.qk_norm) {
      L.q_norm = get("self_attn.q_norm.weight");
      L.k_norm = get("self_attn.k_norm.weight");
    }
    // The rope base follows the layer's type in the config, not the window a variant tells it.
    const bool sliding = k.windows[static_cast<size_t>(l)] > 0;
    L.window = options_.windows.empty() ? k.windows[static_cast<size_t>(l)] : options_.windows[static_cast<size_t>(l)];
    const double base = sliding && k.rope_local_theta > 0 ? k.rope_local_theta : k.rope_theta;
    for (int64_t i = 0; i < k.head_dim / 2; ++i)
      L.inv_freq.push_back(static_cast<T>(1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(k.head_dim))));
  }
}

template <class T>
void SequenceOracle<T>::forward_one(int32_t token, int64_t pos, double* logits) {
  const ModelConfig& k = config_;
  if (token < 0 || token >= k.vocab)
    throw std::invalid_argument("token " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(k.vocab));
  const int64_t H = k.hidden, D = k.head_dim, kvd = k.kv_heads * D, group = k.heads / k.kv_heads;
  const T eps = static_cast<T>(k.eps);
  std::vector<T> x(embed_.begin() + token * H, embed_.begin() + (token + 1) * H);
  for (T& v : x) v *= static_cast<T>(k.embed_scale);
  std::vector<T> h(H), q(k.heads * D), kk(kvd), vv(kvd), attn(k.heads * D), o(H), g(k.intermediate), u(k.intermediate), m(H);
  std::vector<T> scores;
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    const bool sliding_layer = k.windows[l] > 0;
    rms_norm(x.data(), L.in_norm, H, eps, k.gemma_norm, h.data());
    matvec(L.q, h.data(), k.heads * D, H, q.data());
    matvec(L.k, h.data(), kvd, H, kk.data());
    matvec(L.v, h.data(), kvd, H, vv.data());
    if (k.qk_norm) {
      for (int64_t i = 0; i < k.heads; ++i) rms_norm(q.data() + i * D, L.q_norm, D, eps, true, q.data() + i * D);
      for (int64_t i = 0; i < k.kv_heads; ++i) rms_norm(kk.data() + i * D, L.k_norm, D, eps, true, kk.data() + i * D);
    }
    for (int64_t i = 0; i < k.heads; ++i) rope(q.data() + i * D, L.inv_freq, D, pos);
    if (options_.q_half)
      for (T& v : q) v = round_kv(v, true);
    for (int64_t i = 0; i < k.kv_heads; ++i) rope(kk.data() + i * D, L.inv_freq, D, pos);
    for (int64_t i = 0; i < kvd; ++i) {
      L.keys.push_back(round_kv(kk[i], options_.kv_half));
      L.values.push_back(round_kv(vv[i], options_.kv_half));
    }
    // The window rule, explicitly: key j is visible to query pos iff j <= pos and pos - W < j.
    int64_t first = L.window > 0 ? std::max<int64_t>(0, pos - L.window + 1) : 0;
    if (sliding_layer) first = std::max(first, std::min(forgotten_, pos));
    scores.assign(static_cast<size_t>(pos + 1), 0);
    for (int64_t head = 0; head < k.heads; ++head) {
      const T* qh = q.data() + head * D;
      const int64_t kvh = head / group;
      T best = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        const T* kj = L.keys.data() + j * kvd + kvh * D;
        T s = 0;
        for (int64_t d = 0; d < D; ++d) s += qh[d] * kj[d];
        s *= static_cast<T>(k.query_scale);
        if (k.attn_softcap > 0) s = std::tanh(s / static_cast<T>(k.attn_softcap)) * static_cast<T>(k.attn_softcap);
        scores[static_cast<size_t>(j)] = s;
        best = std::max(best, s);
      }
      T total = 0;
      for (int64_t j = first; j <= pos; ++j) total += (scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - best));
      T* out = attn.data() + head * D;
      std::fill(out, out + D, T(0));
      for (int64_t j = first; j <= pos; ++j) {
        const T w = scores[static_cast<size_t>(j)] / total;
        const T* vj = L.values.data() + j * kvd + kvh * D;
        for (int64_t d = 0; d < D; ++d) out[d] += w * vj[d];
      }
    }
    matvec(L.o, attn.data(), H, k.heads * D, o.data());
    if (k.gemma_norm) {
      rms_norm(o.data(), L.post_attn_norm, H, eps, true, o.data());
      for (int64_t i = 0; i < H; ++i) x[i] += o[i];
      rms_norm(x.data(), L.pre_ff_norm, H, eps, true, h.data());
    } else {
      for (int64_t i = 0; i < H; ++i) x[i] += o[i];
      rms_norm(x.data(), L.post_attn_norm, H, eps, false, h.data());
    }
    matvec(L.gate, h.data(), k.intermediate, H, g.data());
    matvec(L.up, h.data(), k.intermediate, H, u.data());
    for (int64_t i = 0; i < k.intermediate; ++i) {
      const T a = options_.gelu_half && k.gelu ? round_kv(g[i], true) : g[i];
      // gelu_pytorch_tanh, or SiLU
      const T act = k.gelu ? T(0.5) * a * (T(1) + std::tanh(static_cast<T>(0.7978845608028654) * (a + T(0.044715) * a * a * a)))
                           : a / (T(1) + std::exp(-a));
      g[i] = (options_.gelu_half && k.gelu ? round_kv(act, true) : act) * u[i];
    }
    matvec(L.down, g.data(), H, k.intermediate, m.data());
    if (k.gemma_norm) rms_norm(m.data(), L.post_ff_norm, H, eps, true, m.data());
    for (int64_t i = 0; i < H; ++i) x[i] += m[i];
  }
  rms_norm(x.data(), final_norm_, H, eps, k.gemma_norm, h.data());
  for (int64_t r = 0; r < k.vocab; ++r) {
    const T* row = lm_head_.data() + r * H;
    T s = 0;
    for (int64_t c = 0; c < H; ++c) s += row[c] * h[c];
    if (k.final_softcap > 0) s = std::tanh(s / static_cast<T>(k.final_softcap)) * static_cast<T>(k.final_softcap);
    logits[r] = static_cast<double>(s);
  }
}

template <class T>
std::vector<double> SequenceOracle<T>::extend(const std::vector<int32_t>& tokens) {
  std::vector<double> out(tokens.size() * static_cast<size_t>(config_.vocab));
  for (size_t i = 0; i < tokens.size(); ++i) forward_one(tokens[i], length_++, out.data() + i * static_cast<size_t>(config_.vocab));
  return out;
}

template <class T>
void SequenceOracle<T>::truncate(int64_t n) {
  if (n < 0 || n > length_) throw std::invalid_argument("cannot drop " + std::to_string(n) + " of " + std::to_string(length_) + " positions");
  length_ -= n;
  const size_t keep = static_cast<size_t>(length_ * config_.kv_heads * config_.head_dim);
  for (Layer& L : layers_) {
    L.keys.resize(keep);
    L.values.resize(keep);
  }
}

template class SequenceOracle<double>;
template class SequenceOracle<float>;

}  // namespace kvc::engine
