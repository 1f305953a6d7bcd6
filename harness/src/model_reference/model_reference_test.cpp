// The oracle's fast forward (SequenceOracle: tiles, lanes, target_clones) against the plain model
// reference (model_reference.cpp), as fastpath.cpp is held to the layer reference: on every
// checkpoint the project writes for its families (make_models.py --set zoo, families, drawn and
// encoders: every family, each of its registry rows, two configs drawn from each decoder family's
// config space, and the encoders' rows), over a
// sequence past twice its window or chunk, every logit must be the same bits. An encoder's
// (ModelConfig::bidirectional) fast path is SequenceOracle::encode, whole sequences, also with padding.
// The same comparison must catch a fast path that is wrong by one token of window (an encoder's: of reach).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "build_paths.h"
#include "kvconform/engine/model.h"
#include "kvconform/engine/model_reference.h"
#include "kvconform/engine/plan.h"

namespace kvc::engine {
namespace {

namespace fs = std::filesystem;

// Every checkpoint of the four sets, written once into a folder removed when the binary exits.
const std::vector<std::string>& checkpoints() {
  struct Folder {
    std::string path = (fs::temp_directory_path() / ("kvc-model-reference-test-" + std::to_string(getpid()))).string();
    ~Folder() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  static const std::vector<std::string> dirs = [] {
    for (const char* set : {"zoo", "families", "drawn", "encoders"}) {
      const std::string cmd = "python3 " + std::string(kvc::paths::source_dir()) + "/engines/models/make_models.py " +
                              folder.path + " --set " + set + " >/dev/null";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(folder.path))
      if (fs::exists(e.path() / "config.json")) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }();
  return dirs;
}

// Past two windows (chunks) and then some: every rule's edge is crossed at least twice. The
// placeholder ids embedded as id 0 (ModelConfig::zero_tokens) stand at positions 2, 3, ... so the rule acts.
std::vector<int32_t> sequence_for(const ModelConfig& c) {
  const int64_t n = std::min<int64_t>(64, std::max<int64_t>(12, 2 * c.local_span() + 5));
  std::vector<int32_t> tokens = tokens_for(3, 5, n, c.vocab);
  for (size_t i = 0; i < c.zero_tokens.size() && 2 + i < tokens.size(); ++i)
    tokens[2 + i] = static_cast<int32_t>(c.zero_tokens[i]);
  return tokens;
}

// An encoder-decoder's source (ModelConfig::encoder): past two of its encoder's reaches and then some, other tokens than
// the decoder's; empty for every other model.
std::vector<int32_t> source_for(const ModelConfig& c) {
  if (!c.encoder) return {};
  const int64_t n = std::min<int64_t>(64, std::max<int64_t>(12, 2 * c.encoder->local_span() + 5));
  return tokens_for(7, 11, n, c.encoder->vocab);
}

struct Compared {
  int64_t values = 0, differing = 0;
  double max_relative = 0;  // |fast - reference| / max(1, |reference|)
};

// The fast path's logits of `tokens`: a decoder's extend, an encoder's encode (with `real` its attention_mask), an
// encoder-decoder's extend after set_source (source_for, with `source_real` its attention_mask).
std::vector<double> fast(const Model& m, const ModelConfig& config, const std::vector<int32_t>& tokens,
                         const OracleOptions& options = {}, const std::vector<bool>& real = {},
                         const std::vector<bool>& source_real = {}) {
  SequenceOracle<double> oracle(m, config, options);
  if (config.encoder) oracle.set_source(source_for(config), source_real);
  return config.bidirectional ? oracle.encode(tokens, real) : oracle.extend(tokens);
}

Compared compare(const std::vector<double>& fast, const std::vector<double>& reference) {
  Compared c;
  for (size_t i = 0; i < reference.size(); ++i) {
    ++c.values;
    if (fast[i] != reference[i] && !(std::isnan(fast[i]) && std::isnan(reference[i]))) ++c.differing;
    c.max_relative = std::max(c.max_relative, std::abs(fast[i] - reference[i]) / std::max(1.0, std::abs(reference[i])));
  }
  return c;
}

TEST(ModelReference, TheOracleIsThePlainForwardBitForBitOnEveryFamilysCheckpoints) {
  std::set<std::string> families;
  int64_t models = 0, encoders = 0, values = 0;
  for (const std::string& dir : checkpoints()) {
    const Model m = load_model(dir);
    const std::vector<int32_t> tokens = sequence_for(m.config);
    const std::vector<int32_t> source = source_for(m.config);
    const std::vector<double> reference = reference_logits(m, tokens, source);
    const Compared c = compare(fast(m, m.config, tokens), reference);
    EXPECT_EQ(c.differing, 0) << m.config.name << " (" << to_string(m.config.family) << "): " << c.differing << " of " << c.values
                              << " logits differ, by up to " << c.max_relative << " relative";
    families.insert(to_string(m.config.family));
    ++models, values += c.values;
    if (m.config.encoder) {  // an encoder-decoder's source padded at position 1 and at its end
      std::vector<bool> source_real(source.size(), true);
      source_real[1] = source_real[source.size() - 1] = false;
      const Compared pc =
          compare(fast(m, m.config, tokens, {}, {}, source_real), reference_logits(m, m.config, tokens, {}, source, source_real));
      EXPECT_EQ(pc.differing, 0) << m.config.name << ", source padded: " << pc.differing << " of " << pc.values
                                 << " logits differ, by up to " << pc.max_relative << " relative";
      ++encoders, values += pc.values;
    }
    if (!m.config.bidirectional) continue;
    // An encoder's batch row padded at position 1 and at its end: no query sees those keys (or, where
    // a query then sees no real key, both refuse the sequence).
    std::vector<bool> real(tokens.size(), true);
    real[1] = real[tokens.size() - 1] = false;
    std::vector<double> padded;
    try {
      padded = fast(m, m.config, tokens, {}, real);
    } catch (const std::invalid_argument&) {
      EXPECT_THROW(reference_logits(m, m.config, tokens, real), std::invalid_argument) << m.config.name;
      continue;
    }
    const Compared pc = compare(padded, reference_logits(m, m.config, tokens, real));
    EXPECT_EQ(pc.differing, 0) << m.config.name << ", padded: " << pc.differing << " of " << pc.values
                               << " logits differ, by up to " << pc.max_relative << " relative";
    ++encoders, values += pc.values;
  }
  // Every family of the registry is among them (NeoMME the last).
  EXPECT_EQ(families.size(), static_cast<size_t>(Family::NeoMME) + 1);
  EXPECT_GT(encoders, 0);
  std::printf("%lld checkpoints of %zu families (%lld encoders and encoder-decoders also padded), %lld logits compared\n",
              static_cast<long long>(models), families.size(), static_cast<long long>(encoders), static_cast<long long>(values));
}

// The diagnoses' hypotheses that the config was read another way are the oracle under another
// ModelConfig (check.cpp's read_as): each such reading of each checkpoint that has the feature (the
// sinks, either soft-cap left out; rope on every layer and rope inverted where it has NoPE layers;
// every rope base 10000) is held to the reference under the same reading, bit for bit.
TEST(ModelReference, TheConfigReadingsOfTheDiagnosesAreThePlainForwardBitForBit) {
  int64_t readings = 0;
  for (const std::string& dir : checkpoints()) {
    const Model m = load_model(dir);
    const ModelConfig& k = m.config;
    std::vector<std::pair<std::string, ModelConfig>> as;
    auto read = [&](const char* what, bool applies, auto edit) {
      if (!applies) return;
      ModelConfig r = k;
      edit(r);
      as.emplace_back(what, std::move(r));
    };
    read("sinks dropped", k.sinks, [](ModelConfig& r) { r.sinks = false; });
    read("attention soft-cap dropped", k.attn_softcap > 0, [](ModelConfig& r) { r.attn_softcap = 0; });
    read("final soft-cap dropped", k.final_softcap > 0, [](ModelConfig& r) { r.final_softcap = 0; });
    const bool nope = std::count(k.rope_layers.begin(), k.rope_layers.end(), false) > 0;
    read("rope on every layer", nope, [](ModelConfig& r) { r.rope_layers.clear(); });
    read("rope inverted", nope, [](ModelConfig& r) { r.rope_layers.flip(); });
    read("rope base 10000 everywhere", true, [](ModelConfig& r) { r.rope_thetas.assign(static_cast<size_t>(r.layers), 1e4); });
    const std::vector<int32_t> tokens = sequence_for(k);
    for (const auto& [what, r] : as) {
      const Compared c = compare(fast(m, r, tokens), reference_logits(m, r, tokens, {}, source_for(k)));
      EXPECT_EQ(c.differing, 0) << k.name << ", " << what << ": " << c.differing << " of " << c.values
                                << " logits differ, by up to " << c.max_relative << " relative";
      ++readings;
    }
  }
  std::printf("%lld readings compared\n", static_cast<long long>(readings));
}

// The mutant: the fast path with every sliding window and chunk one token larger (the off-by-one an
// eviction or a chunk boundary gets wrong; an encoder's: its sliding layers' reach one key further on
// each side) differs from the reference on every checkpoint that has a sliding or chunked layer, by far
// more than rounding.
TEST(ModelReference, AFastPathOneTokenOffInItsWindowDiffersOnEveryLocalCheckpoint) {
  int64_t local = 0, caught = 0;
  double smallest = INFINITY;
  for (const std::string& dir : checkpoints()) {
    const Model m = load_model(dir);
    const ModelConfig& k = m.config;
    OracleOptions wider;
    bool has_local = false;
    for (int64_t l = 0; l < k.layers; ++l) has_local |= k.attention(l) != Attention::Full;
    if (!has_local) continue;
    for (const int64_t w : k.windows) wider.windows.push_back(w > 0 ? w + 1 : 0);
    for (const int64_t c : k.chunks) wider.chunks.push_back(c > 0 ? c + 1 : 0);
    if (k.bidirectional) wider = {}, wider.reach_delta = 1;  // an encoder's reach is its own, not the window's
    const std::vector<int32_t> tokens = sequence_for(k);
    const Compared c = compare(fast(m, k, tokens, wider), reference_logits(m, tokens, source_for(k)));
    ++local;
    if (c.max_relative > 1e-6) ++caught;
    else ADD_FAILURE() << k.name << ": a window one token wider moved no logit past 1e-6 (" << c.max_relative << ")";
    smallest = std::min(smallest, c.max_relative);
  }
  EXPECT_EQ(caught, local);
  EXPECT_GT(local, 0);
  std::printf("%lld of %lld local checkpoints caught; the smallest difference %.3g relative\n", static_cast<long long>(caught),
              static_cast<long long>(local), smallest);
}

}  // namespace
}  // namespace kvc::engine
