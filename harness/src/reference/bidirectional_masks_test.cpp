// The bidirectional (encoder) masks against the masks each pinned release's encoders really hand their
// attention layers (golden/encoder_masks/<release>.json, recorded by golden/encoder_masks.py from a
// forward pre-hook on every self-attention module), and the mistakes that comparison catches.
#include "kvconform/bidirectional_masks.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "build_paths.h"
#include "kvconform/masks.h"

namespace kvc::masks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kEncoderMasksDir = fs::path(kvc::paths::source_dir()) / "golden" / "encoder_masks";

// What the reference is asked to be, or a deliberately wrong variant of it (each one must be caught).
enum class Variant {
  Faithful,
  WindowPlusOne,       // Mutation::WindowTooWide: one key more on each side
  OneSided,            // the causal sliding mask of the same reach (what a decoder's layer gets)
  NoFamilyOffsets,     // every family's reach = its config's sliding_window on both sides (no ModernBERT half, no T5Gemma
                       // 4.x - 1, no T5Gemma2 asymmetry)
  NeverSkips,          // the builders always hand a mask
  SlidingAlwaysSkips,  // T5Gemma2's sliding layers may be skipped like the others'
  ModelWindowOnly,     // neomme's sliding layers read at the model's sliding_window, not each layer's per_layer_config one
};

std::vector<std::string> rows_of(const at::Tensor& mask, int64_t b) {
  std::vector<std::string> out;
  const at::Tensor m = mask[b][0];
  auto a = m.accessor<bool, 2>();
  for (int64_t i = 0; i < m.size(0); ++i) {
    std::string s;
    for (int64_t j = 0; j < m.size(1); ++j) s += a[i][j] ? '1' : '0';
    out.push_back(s);
  }
  return out;
}

std::vector<fs::path> release_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kEncoderMasksDir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The reference's mask for one recorded layer (nullopt: skipped).
std::optional<at::Tensor> reference(const json& c, const json& layer, const std::string& release, Variant v) {
  EncoderMaskRule rule = encoder_mask_rule(c.at("family").get<std::string>(), release);
  if (v == Variant::NoFamilyOffsets) rule = EncoderMaskRule{};
  if (v == Variant::NeverSkips) rule.skips = false;
  if (v == Variant::SlidingAlwaysSkips) rule.sliding_skips = true;
  if (v == Variant::ModelWindowOnly) rule.per_layer_window = false;
  BidirectionalRequest r;
  r.type = parse_layer_type(layer.at("layer_type").get<std::string>());
  // A per-layer window is the layer record's (null on a full layer, which reads none)
  const json& window = rule.per_layer_window && r.type == LayerType::Sliding ? layer.at("config_sliding_window")
                       : rule.window_key == "local_attention"                ? c.at("config_local_attention")
                                                                             : c.at("config_sliding_window");
  r.before = rule.before.of(window.get<int64_t>());
  r.after = rule.after.of(window.get<int64_t>());
  // the builder's local size: the layer's config.sliding_window
  r.skip_window = rule.per_layer_window && r.type == LayerType::Sliding ? window.get<int64_t>()
                                                                        : c.at("config_sliding_window").get<int64_t>();
  r.length = c.at("length").get<int64_t>();
  r.builder_skips = rule.skips && (r.type == LayerType::Full || rule.sliding_skips);
  const auto& padding = c.at("padding");
  r.batch = static_cast<int64_t>(padding.size());
  for (const auto& p : padding) {
    std::vector<bool> row(static_cast<size_t>(r.length), true);
    for (int64_t j = 0; j < p.at(0).get<int64_t>(); ++j) row[j] = false;
    for (int64_t j = r.length - p.at(1).get<int64_t>(); j < r.length; ++j) row[j] = false;
    r.real.push_back(row);
  }
  if (v == Variant::OneSided && r.type == LayerType::Sliding) {
    MaskRequest m;  // the decoders' sliding mask: 0 <= q - kv < window, so window = before + 1 keeps the reach back
    m.type = LayerType::Sliding;
    m.window = r.before + 1;
    m.batch = r.batch;
    for (int64_t i = 0; i < r.length; ++i) m.query_positions.push_back(i);
    m.sizes = {r.length, 0};
    m.seen_after = r.length;
    BidirectionalRequest keys = r;  // the same padding of the keys
    keys.type = LayerType::Full;
    return boolean_mask(m).logical_and(bidirectional_boolean_mask(keys));
  }
  return bidirectional_mask(r, v == Variant::WindowPlusOne ? Mutation::WindowTooWide : Mutation::None);
}

struct Verdict {
  int64_t layers = 0;
  std::vector<std::string> problems;
  std::set<std::string> families;
};

Verdict judge(Variant v) {
  Verdict out;
  for (const auto& path : release_files()) {
    std::ifstream in(path);
    const json doc = json::parse(in);
    const std::string release = doc.at("transformers").get<std::string>();
    for (const auto& c : doc.at("cases")) {
      const std::string where = release + " " + c.at("family").get<std::string>() + " " +
                                c.at("attn_implementation").get<std::string>() + " length " +
                                std::to_string(c.at("length").get<int>()) + " window " + c.at("config_sliding_window").dump() +
                                " padding " + c.at("padding").dump();
      if (c.contains("error")) {  // the release's own model could not run: never a pass
        out.problems.push_back(where + ": the recorded forward failed: " + c.at("error").get<std::string>());
        continue;
      }
      out.families.insert(release + " " + c.at("family").get<std::string>());
      int64_t li = 0;
      for (const auto& layer : c.at("layers")) {
        const std::string at_layer =
            where + " layer " + std::to_string(li++) + " (" + layer.at("layer_type").get<std::string>() + ")";
        ++out.layers;
        const auto got = reference(c, layer, release, v);
        if (layer.at("skipped").get<bool>() != !got.has_value()) {
          out.problems.push_back(at_layer + ": the model's mask is " + (layer.at("skipped").get<bool>() ? "skipped" : "built") +
                                 ", the reference's " + (got ? "built" : "skipped"));
          continue;
        }
        if (!got) continue;
        const auto& want = layer.at("allowed");
        for (int64_t b = 0; b < got->size(0); ++b)
          if (rows_of(*got, b) != want.at(b).get<std::vector<std::string>>()) {
            out.problems.push_back(at_layer + " row " + std::to_string(b) + ": the model's mask " + want.at(b).dump() +
                                   ", the reference's " + json(rows_of(*got, b)).dump());
            break;
          }
        // eager's additive form: finfo(float32).min where masked (additive_mask), 0 where allowed
        if (!layer.at("masked_value").is_null()) {
          const at::Tensor add = additive_mask(*got, at::kFloat);
          const double masked = add.min().item<double>();
          if (masked != layer.at("masked_value").get<double>())
            out.problems.push_back(at_layer + ": masked value " + layer.at("masked_value").dump() + ", the reference's " +
                                   std::to_string(masked));
        }
      }
    }
  }
  return out;
}

std::string first(const Verdict& v, size_t n = 5) {
  std::string s;
  for (size_t i = 0; i < v.problems.size() && i < n; ++i) s += "\n  " + v.problems[i];
  return s;
}

TEST(EncoderMasks, EveryPinnedReleasesEncodersAgreeWithTheReference) {
  const Verdict v = judge(Variant::Faithful);
  EXPECT_TRUE(v.problems.empty()) << v.problems.size() << " disagreements:" << first(v);
  EXPECT_GT(v.layers, 0) << "no recorded encoder masks in " << kEncoderMasksDir.string();
  // Every pinned release that has an encoder family recorded it: modernbert and t5gemma from 4.56.2
  for (const char* need :
       {"4.56.2 modernbert", "4.56.2 t5gemma", "5.25.0 modernbert", "5.25.0 ultrabert", "5.25.0 embedding_gemma2",
        "5.25.0 openai_privacy_filter", "5.25.0 t5gemma", "5.25.0 t5gemma2", "5.24.0 neomme", "5.25.0 neomme"})
    EXPECT_TRUE(v.families.count(need)) << need << " is not in " << kEncoderMasksDir.string();
}

// Each mutant of the reference disagrees with some release's encoders.
TEST(EncoderMasks, WindowPlusOneIsCaught) { EXPECT_FALSE(judge(Variant::WindowPlusOne).problems.empty()); }
TEST(EncoderMasks, OneSidedWindowIsCaught) { EXPECT_FALSE(judge(Variant::OneSided).problems.empty()); }
TEST(EncoderMasks, FamilyReachRulesAct) {
  const Verdict v = judge(Variant::NoFamilyOffsets);
  bool modernbert = false, t5gemma4 = false, t5gemma2 = false;
  for (const auto& p : v.problems) {
    modernbert = modernbert || p.find(" modernbert ") != std::string::npos;
    t5gemma4 = t5gemma4 || (p.rfind("4.", 0) == 0 && p.find(" t5gemma ") != std::string::npos);
    t5gemma2 = t5gemma2 || p.find(" t5gemma2 ") != std::string::npos;
  }
  EXPECT_TRUE(modernbert) << "ModernBERT's half of local_attention is not shown to act";
  EXPECT_TRUE(t5gemma4) << "T5Gemma 4.x's reach of sliding_window - 1 is not shown to act";
  EXPECT_TRUE(t5gemma2) << "T5Gemma2's asymmetric reach is not shown to act";
}
TEST(EncoderMasks, NeoMMEPerLayerWindowsAct) {
  const Verdict v = judge(Variant::ModelWindowOnly);
  EXPECT_FALSE(v.problems.empty());
  for (const auto& p : v.problems) EXPECT_NE(p.find(" neomme "), std::string::npos) << p;
}
TEST(EncoderMasks, SkipRuleActs) { EXPECT_FALSE(judge(Variant::NeverSkips).problems.empty()); }
TEST(EncoderMasks, T5Gemma2SlidingMasksAreNeverSkipped) { EXPECT_FALSE(judge(Variant::SlidingAlwaysSkips).problems.empty()); }

// A module's own sliding_window reaches only flash attention, as window_size = (w - 1, w - 1): a reach of
// w - 1 on each side. It matches the masks' reach everywhere but in T5Gemma's encoder from 5.0 and
// T5Gemma2's (finding 54, engines/transformers/repro_t5gemma_flash_window.py), which this test names so
// that a fix upstream shows.
TEST(EncoderMasks, FlashAttentionReachesAsFarAsTheMasksExceptFinding54) {
  std::set<std::string> differ, expected;
  int64_t compared = 0;
  for (const auto& path : release_files()) {
    std::ifstream in(path);
    const json doc = json::parse(in);
    const std::string release = doc.at("transformers").get<std::string>();
    for (const auto& c : doc.at("cases")) {
      if (c.contains("error")) continue;
      const std::string family = c.at("family").get<std::string>();
      const EncoderMaskRule rule = encoder_mask_rule(family, release);
      for (const auto& layer : c.at("layers")) {
        if (layer.at("layer_type") != "sliding_attention" || layer.at("module_sliding_window").is_null()) continue;
        const json& window = rule.per_layer_window                  ? layer.at("config_sliding_window")
                             : rule.window_key == "local_attention" ? c.at("config_local_attention")
                                                                    : c.at("config_sliding_window");
        ++compared;
        const int64_t flash = layer.at("module_sliding_window").get<int64_t>() - 1;  // both sides
        if (flash != rule.before.of(window.get<int64_t>()) || flash != rule.after.of(window.get<int64_t>()))
          differ.insert(release + " " + family);
        if ((family == "t5gemma" && std::stoi(release) >= 5) || family == "t5gemma2") expected.insert(release + " " + family);
      }
    }
  }
  EXPECT_GT(compared, 0);
  EXPECT_EQ(differ, expected);
  EXPECT_TRUE(expected.count("5.25.0 t5gemma"));
}

TEST(EncoderMasks, RequestsAreChecked) {
  BidirectionalRequest r;
  r.length = 3;
  r.before = -1;
  EXPECT_THROW(bidirectional_boolean_mask(r), std::invalid_argument);
  r.before = 1;
  r.real = {{true, true}};
  EXPECT_THROW(bidirectional_boolean_mask(r), std::invalid_argument);
  r.real.clear();
  r.type = LayerType::Chunked;
  EXPECT_THROW(bidirectional_boolean_mask(r), std::invalid_argument);
  EXPECT_THROW(encoder_mask_rule("gemma2", "5.25.0"), std::invalid_argument);
  EXPECT_THROW(encoder_mask_rule("modernbert", "5.25"), std::invalid_argument);
}

// A window of 1 on 4 tokens: each query sees itself and one key either side; row 1's first key is padding.
TEST(EncoderMasks, SlidingReachOneWithPadding) {
  BidirectionalRequest r;
  r.length = 4;
  r.before = r.after = 1;
  r.batch = 2;
  r.real = {{true, true, true, true}, {false, true, true, true}};
  const at::Tensor m = bidirectional_boolean_mask(r);
  EXPECT_EQ(rows_of(m, 0), (std::vector<std::string>{"1100", "1110", "0111", "0011"}));
  EXPECT_EQ(rows_of(m, 1), (std::vector<std::string>{"0100", "0110", "0111", "0011"}));
}

}  // namespace
}  // namespace kvc::masks
