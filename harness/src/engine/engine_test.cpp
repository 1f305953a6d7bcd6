// The engine level's own tests: the model oracle's window rule and its prefix property, plans, the
// diagnoses, and the judge against kvc-oracle-engine with its mutants and faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <unistd.h>

#include "build_paths.h"
#include "kvconform/engine/check.h"
#include "kvconform/engine/model.h"
#include "kvconform/engine/plan.h"
#include "target_files.h"

namespace kvc::engine {
namespace {

// A random model of the family in memory (weights ~ N(0, scale)), not a file.
Model random_model(Family family, std::vector<int64_t> windows, int64_t window, uint64_t seed = 7) {
  Model m;
  ModelConfig& c = m.config;
  c.name = "test";
  c.family = family;
  c.vocab = 32, c.hidden = 16, c.layers = static_cast<int64_t>(windows.size()), c.heads = 4, c.kv_heads = 2, c.head_dim = 8,
  c.intermediate = 24;
  const bool gemma = family != Family::Mistral;
  c.gemma_norm = c.gelu = gemma;
  c.qk_norm = family == Family::Gemma3;
  c.tied = gemma;
  c.embed_scale = gemma ? 4 : 1;
  c.query_scale = 1 / std::sqrt(family == Family::Gemma2 ? 12.0 : 8.0);
  c.attn_softcap = family == Family::Gemma2 ? 5 : 0;
  c.final_softcap = family == Family::Gemma2 ? 8 : 0;
  c.rope_local_theta = family == Family::Gemma3 ? 10000 : 0;
  c.rope_theta = family == Family::Gemma3 ? 1e6 : 1e4;
  c.sliding_window = window;
  c.windows = windows;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0, 0.5);
  auto t = [&](const std::string& name, int64_t size) {
    auto& v = m.tensors[name];
    v.resize(static_cast<size_t>(size));
    for (double& x : v) x = n(rng);
  };
  t("model.embed_tokens.weight", c.vocab * c.hidden);
  t("model.norm.weight", c.hidden);
  if (!c.tied) t("lm_head.weight", c.vocab * c.hidden);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t(p + "self_attn.q_proj.weight", c.heads * c.head_dim * c.hidden);
    t(p + "self_attn.k_proj.weight", c.kv_heads * c.head_dim * c.hidden);
    t(p + "self_attn.v_proj.weight", c.kv_heads * c.head_dim * c.hidden);
    t(p + "self_attn.o_proj.weight", c.hidden * c.heads * c.head_dim);
    t(p + "mlp.gate_proj.weight", c.intermediate * c.hidden);
    t(p + "mlp.up_proj.weight", c.intermediate * c.hidden);
    t(p + "mlp.down_proj.weight", c.hidden * c.intermediate);
    for (const char* norm :
         {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      t(p + norm + ".weight", c.hidden);
    t(p + "self_attn.q_norm.weight", c.head_dim);
    t(p + "self_attn.k_norm.weight", c.head_dim);
  }
  return m;
}

std::vector<int32_t> tokens(int64_t n, uint64_t salt = 1) { return tokens_for(3, salt, n, 32); }

// A context shift is not the no-cache forward of the kept tokens: the moved keys keep the context
// of the discarded ones. Its independent construction is rope's relative-position invariance: on a
// model whose every layer slides (window W), a token after the shift whose window holds only moved
// keys (the W-1 before it) sees what it would have seen, at the same distances, had nothing been
// discarded; so shift + extend equals the unshifted forward's row (to float64 rounding), and differs
// from the fresh forward of the kept tokens (the discarded ones are in the moved keys' context two
// layers up) and from the same shift without re-rotation. A shift of the last n is a rollback of n.
TEST(ModelOracle, AShiftKeepsTheKeysAsComputedAndReRotatesThem) {
  for (Family f : {Family::Mistral, Family::Gemma3}) {
    const int64_t W = 4, keep = 1, n = 3;
    const Model m = random_model(f, {W, W, W}, W);
    const std::vector<int32_t> head = tokens(keep, 1), dropped = tokens(n, 2), moved = tokens(W - 1, 3), next = tokens(1, 4);
    std::vector<int32_t> all = head;
    for (const auto* part : {&dropped, &moved}) all.insert(all.end(), part->begin(), part->end());
    auto max_diff = [](const std::vector<double>& a, const std::vector<double>& b) {
      double d = 0;
      for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
      return d;
    };
    auto shifted = [&](bool rerotate) {
      SequenceOracle<double> o(m);
      o.extend(all);
      o.shift(keep, n, rerotate);
      EXPECT_EQ(o.length(), keep + W - 1);
      return o.extend(next);
    };
    const std::vector<double> after = shifted(true);
    SequenceOracle<double> unshifted(m);
    unshifted.extend(all);
    EXPECT_LT(max_diff(after, unshifted.extend(next)), 1e-10) << to_string(f);
    SequenceOracle<double> fresh(m);
    std::vector<int32_t> kept = head;
    kept.insert(kept.end(), moved.begin(), moved.end());
    fresh.extend(kept);
    EXPECT_GT(max_diff(after, fresh.extend(next)), 1e-3)
        << to_string(f) << ": the shift is the no-cache forward of the kept tokens";
    EXPECT_GT(max_diff(after, shifted(false)), 1e-3) << to_string(f) << ": re-rotation changed nothing";

    SequenceOracle<double> end(m), rolled(m);
    end.extend(all), rolled.extend(all);
    end.shift(static_cast<int64_t>(all.size()) - n, n);
    rolled.truncate(n);
    EXPECT_EQ(end.extend(next), rolled.extend(next)) << to_string(f);
  }
  SequenceOracle<double> o(random_model(Family::Mistral, {4}, 4));
  o.extend(tokens(5));
  EXPECT_THROW(o.shift(3, 3), std::invalid_argument);
}

TEST(ModelOracle, ExtendInPiecesEqualsOneForwardBitForBit) {
  for (Family f : {Family::Gemma2, Family::Gemma3, Family::Mistral}) {
    const Model m = random_model(f, {3, 0, 3}, 3);
    const std::vector<int32_t> t = tokens(20);
    SequenceOracle<double> whole(m), pieces(m);
    const std::vector<double> all = whole.extend(t);
    std::vector<double> got;
    for (auto [a, b] : {std::pair{0, 7}, {7, 8}, {8, 20}}) {
      const auto part = pieces.extend(std::vector<int32_t>(t.begin() + a, t.begin() + b));
      got.insert(got.end(), part.begin(), part.end());
    }
    EXPECT_EQ(all, got) << to_string(f);
    // truncate(n) is the forward of the shorter prefix: re-extending gives the same logits.
    pieces.truncate(5);
    EXPECT_EQ(pieces.extend(std::vector<int32_t>(t.begin() + 15, t.end())),
              std::vector<double>(all.begin() + 15 * 32, all.end()));
  }
}

TEST(ModelOracle, AWindowAtLeastTheSequenceIsFullAttentionAndAShorterOneIsNot) {
  const Model sliding = random_model(Family::Gemma2, {30, 0}, 30), full = random_model(Family::Gemma2, {0, 0}, 30);
  EXPECT_EQ(SequenceOracle<double>(sliding).extend(tokens(30)), SequenceOracle<double>(full).extend(tokens(30)));
  const Model w4 = random_model(Family::Gemma2, {4, 0}, 4);
  const auto a = SequenceOracle<double>(w4).extend(tokens(12));
  const auto b = SequenceOracle<double>(full).extend(tokens(12));
  // Positions 0..3 see the same keys; position 4 is the first whose window drops a key.
  EXPECT_EQ(std::vector<double>(a.begin(), a.begin() + 4 * 32), std::vector<double>(b.begin(), b.begin() + 4 * 32));
  EXPECT_NE(std::vector<double>(a.begin() + 4 * 32, a.begin() + 5 * 32),
            std::vector<double>(b.begin() + 4 * 32, b.begin() + 5 * 32));
}

// The sensitivity check before a drawn model judges a window: a window one token larger moves a
// sliding model's logits; a model with values of zero on its only sliding layer reads nothing through
// attention, so no window bug could show (0, and redrawn); a model with no local layer has none.
TEST(ModelOracle, WindowSensitivityIsHowFarAOneTokenWiderWindowMovesTheLogits) {
  const Model w4 = random_model(Family::Mistral, {4}, 4);
  ASSERT_TRUE(window_sensitivity(w4).has_value());
  EXPECT_GE(window_sensitivity(w4)->moved, kMinWindowSensitivity);
  // float32 rounding moves a tiny model's logits by about 1e-6, far below the window's move.
  EXPECT_GT(window_sensitivity(w4)->float32_error, 0.0);
  EXPECT_LT(window_sensitivity(w4)->float32_error, 1e-4);
  Model deaf = w4;
  for (double& x : deaf.tensors["model.layers.0.self_attn.v_proj.weight"]) x = 0;
  ASSERT_TRUE(window_sensitivity(deaf).has_value());
  EXPECT_EQ(window_sensitivity(deaf)->moved, 0.0);
  EXPECT_FALSE(window_sensitivity(random_model(Family::Mistral, {0, 0}, 0)).has_value());
  // What a draw must move by: the minimum for a tiny model, ten bounds for one whose float32 error is
  // large (the wide gpt_oss draw, W = 4096: moved by 11.9, float32 by 9.69, refused).
  EXPECT_EQ(window_move_needed({1.0, 1e-6}, kMinWindowSensitivity), kMinWindowSensitivity);
  EXPECT_NEAR(window_move_needed({11.9, 9.69}, kMinWindowSensitivity), 969, 1e-9);
  EXPECT_GT(window_move_needed({11.9, 9.69}, kMinWindowSensitivity), 11.9);
}

TEST(ModelOracle, Float32StaysNearFloat64) {
  const Model m = random_model(Family::Gemma3, {3, 3, 0}, 3);
  const auto a = SequenceOracle<double>(m).extend(tokens(40));
  const auto b = SequenceOracle<float>(m).extend(tokens(40));
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  EXPECT_GT(e, 0);
  EXPECT_LT(e, 1e-4);
}

// One layer: position p's output depends only on the keys that layer's rule lets it see (they are
// computed from the embeddings alone), so a rule is pinned by the window that shows the same keys.
std::vector<double> row(const std::vector<double>& logits, int64_t p, int64_t vocab) {
  return std::vector<double>(logits.begin() + p * vocab, logits.begin() + (p + 1) * vocab);
}

TEST(ModelOracle, AChunkedLayerSeesExactlyTheKeysOfItsOwnChunk) {
  const int64_t C = 4, n = 14;
  Model chunked = random_model(Family::Mistral, {0}, 0);
  chunked.config.chunks = {C};
  const std::vector<int32_t> t = tokens(n);
  const auto got = SequenceOracle<double>(chunked).extend(t);
  for (int64_t p = 0; p < n; ++p) {
    // Keys p / C * C .. p: a window of p % C + 1 ending at p.
    const Model sliding = random_model(Family::Mistral, {p % C + 1}, p % C + 1);
    const auto want = SequenceOracle<double>(sliding).extend(std::vector<int32_t>(t.begin(), t.begin() + p + 1));
    EXPECT_EQ(row(got, p, 32), row(want, p, 32)) << "position " << p;
  }
  // OracleOptions::chunks re-runs a chunked layer with another chunk size, as windows does a sliding one.
  Model c5 = chunked;
  c5.config.chunks = {5};
  OracleOptions o;
  o.chunks = {5};
  EXPECT_EQ(SequenceOracle<double>(chunked, o).extend(tokens(n)), SequenceOracle<double>(c5).extend(tokens(n)));
  EXPECT_NE(SequenceOracle<double>(chunked, o).extend(tokens(n)), got);
}

TEST(ModelOracle, ANoPELayerIgnoresPositionsAndGetsTheTemperatureTuning) {
  // Without rope a full-attention layer's output at p is the same for any order of tokens 0..p-1.
  Model nope = random_model(Family::Mistral, {0}, 0);
  nope.config.rope_layers = {false};
  Model roped = random_model(Family::Mistral, {0}, 0);
  std::vector<int32_t> t = tokens(10), shuffled = t;
  std::reverse(shuffled.begin(), shuffled.begin() + 9);
  auto last_diff = [&](const Model& m) {
    const auto a = SequenceOracle<double>(m).extend(t), b = SequenceOracle<double>(m).extend(shuffled);
    double e = 0;
    for (int64_t i = 0; i < 32; ++i) e = std::max(e, std::abs(a[9 * 32 + i] - b[9 * 32 + i]));
    return e;
  };
  EXPECT_LT(last_diff(nope), 1e-12);
  EXPECT_GT(last_diff(roped), 1e-3);
  // Temperature tuning: q *= 1 + s * log(floor((p + 1) / F) + 1), on NoPE layers only; 1 below p = F - 1.
  Model tuned = nope;
  tuned.config.temperature_floor_scale = 4, tuned.config.temperature_attn_scale = 0.5;
  const auto a = SequenceOracle<double>(tuned).extend(t), b = SequenceOracle<double>(nope).extend(t);
  EXPECT_EQ(std::vector<double>(a.begin(), a.begin() + 3 * 32), std::vector<double>(b.begin(), b.begin() + 3 * 32));
  EXPECT_NE(row(a, 3, 32), row(b, 3, 32));
  Model roped_tuned = roped;
  roped_tuned.config.temperature_floor_scale = 4, roped_tuned.config.temperature_attn_scale = 0.5;
  EXPECT_EQ(SequenceOracle<double>(roped_tuned).extend(t), SequenceOracle<double>(roped).extend(t));
}

TEST(ModelOracle, PartialRotaryRotatesOnlyTheFirstRotaryDimEntriesOfAHead) {
  // q and k zero on the first 4 of each head's 8 entries: with rotary_dim 4 the scores see only
  // unrotated entries, so position p's output is the same for any order of tokens 0..p-1; with
  // rope on the whole head it is not.
  Model m = random_model(Family::Mistral, {0}, 0);
  for (const char* w : {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"}) {
    std::vector<double>& t = m.tensors[w];
    for (size_t row = 0; row < t.size() / 16; ++row)
      if (row % 8 < 4)
        std::fill(t.begin() + static_cast<std::ptrdiff_t>(row * 16), t.begin() + static_cast<std::ptrdiff_t>(row * 16 + 16), 0.0);
  }
  std::vector<int32_t> t = tokens(10), shuffled = t;
  std::reverse(shuffled.begin(), shuffled.begin() + 9);
  auto last_diff = [&](int64_t rotary_dim) {
    Model x = m;
    x.config.rotary_dim = rotary_dim;
    const auto a = SequenceOracle<double>(x).extend(t), b = SequenceOracle<double>(x).extend(shuffled);
    double e = 0;
    for (int64_t i = 0; i < 32; ++i) e = std::max(e, std::abs(a[9 * 32 + i] - b[9 * 32 + i]));
    return e;
  };
  EXPECT_LT(last_diff(4), 1e-12);
  EXPECT_GT(last_diff(0), 1e-3);
}

TEST(ModelOracle, ASinkJoinsTheSoftmaxDenominatorAndHoldsNoValue) {
  Model plain = random_model(Family::Mistral, {0}, 0);
  auto with_sinks = [&](double v) {
    Model m = plain;
    m.config.sinks = true;
    m.tensors["model.layers.0.self_attn.sinks"] = std::vector<double>(static_cast<size_t>(m.config.heads), v);
    return m;
  };
  const std::vector<int32_t> t = tokens(12);
  // A sink far below every score takes no weight: exactly the model without sinks.
  EXPECT_EQ(SequenceOracle<double>(with_sinks(-1e4)).extend(t), SequenceOracle<double>(plain).extend(t));
  // A sink far above every score takes all the weight, and adds no value: the attention output is
  // zero, as with a zero o_proj.
  Model silent = plain;
  std::fill(silent.tensors["model.layers.0.self_attn.o_proj.weight"].begin(),
            silent.tensors["model.layers.0.self_attn.o_proj.weight"].end(), 0.0);
  const auto a = SequenceOracle<double>(with_sinks(500)).extend(t), b = SequenceOracle<double>(silent).extend(t);
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  EXPECT_LT(e, 1e-12);
  // In between it changes every position.
  const auto c = SequenceOracle<double>(with_sinks(0)).extend(t), d = SequenceOracle<double>(plain).extend(t);
  for (int64_t p = 0; p < 12; ++p) EXPECT_NE(row(c, p, 32), row(d, p, 32)) << "position " << p;
}

// A model whose layer 0 is lfm3's short-convolution block with `taps` taps (weights ~ N(0, 0.5)), layer 1
// (if `layers` is 2) attention; the conv weights given per tap (one value for every channel) where `tap`.
Model conv_model(int64_t taps, int64_t layers = 1, std::vector<double> tap = {}) {
  Model m = random_model(Family::Mistral, std::vector<int64_t>(static_cast<size_t>(layers), 0), 0);
  ModelConfig& c = m.config;
  c.family = Family::Lfm3;
  c.conv_layers.assign(static_cast<size_t>(layers), false);
  c.conv_layers[0] = true;
  c.conv_kernel = taps;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n(0, 0.5);
  auto t = [&](const std::string& name, int64_t size) {
    auto& v = m.tensors[name];
    v.resize(static_cast<size_t>(size));
    for (double& x : v) x = n(rng);
  };
  t("model.layers.0.conv.in_proj.weight", 3 * c.hidden * c.hidden);
  t("model.layers.0.conv.out_proj.weight", c.hidden * c.hidden);
  t("model.layers.0.conv.conv.weight", c.hidden * taps);  // last: the projections do not depend on taps
  if (!tap.empty())
    for (int64_t ch = 0; ch < c.hidden; ++ch)
      for (int64_t j = 0; j < taps; ++j)
        m.tensors["model.layers.0.conv.conv.weight"][static_cast<size_t>(ch * taps + j)] = tap[static_cast<size_t>(j)];
  return m;
}

// lfm3's conv layer is F.conv1d over the last `taps` positions, left-padded with zeros: its row at
// position p depends on tokens p - taps + 1 .. p and on no other (a one-layer model), tap taps - 1 is
// the current position (before position taps - 1 the earlier taps read zeros: at position 0 the model
// is its last tap alone), and its state is restored exactly by a rollback.
TEST(ModelOracle, AConvLayerSeesExactlyItsLastTapsPositionsWithZerosBeforeTheFirst) {
  const int64_t taps = 3;
  const Model m = conv_model(taps);
  std::vector<int32_t> a = tokens(10, 1), b = a;
  const int64_t p = 7;
  b[static_cast<size_t>(p - taps)] = (b[static_cast<size_t>(p - taps)] + 5) % 32;  // just outside the taps
  EXPECT_EQ(row(SequenceOracle<double>(m).extend(a), p, 32), row(SequenceOracle<double>(m).extend(b), p, 32));
  b = a;
  b[static_cast<size_t>(p - taps + 1)] = (b[static_cast<size_t>(p - taps + 1)] + 5) % 32;  // the oldest tap
  EXPECT_NE(row(SequenceOracle<double>(m).extend(a), p, 32), row(SequenceOracle<double>(m).extend(b), p, 32));
  // Position 0: taps 0 and 1 read the zero padding, so the model is its last tap alone.
  const std::vector<double> w = {0.7, -1.3, 0.4};
  const Model full = conv_model(taps, 1, w), last = conv_model(1, 1, {w[2]});
  EXPECT_EQ(row(SequenceOracle<double>(full).extend(a), 0, 32), row(SequenceOracle<double>(last).extend(a), 0, 32));
  EXPECT_NE(row(SequenceOracle<double>(full).extend(a), 2, 32), row(SequenceOracle<double>(last).extend(a), 2, 32));
  // A tap only on the oldest position delays B * x by taps - 1: a token there moves position p + taps - 1.
  const Model delay = conv_model(taps, 1, {1.0, 0.0, 0.0});
  b = a;
  b[3] = (b[3] + 5) % 32;
  const auto da = SequenceOracle<double>(delay).extend(a), db = SequenceOracle<double>(delay).extend(b);
  EXPECT_NE(row(da, 3 + taps - 1, 32), row(db, 3 + taps - 1, 32));
  EXPECT_EQ(row(da, 3 + taps, 32), row(db, 3 + taps, 32));
}

// The oracle's rollback on a recurrent state is the forward re-run from the prompt: the kept rows of
// B * x are the state, so truncate + extend equals one forward of the new sequence bit for bit (with an
// attention layer above the conv one). A context shift has no meaning for a state: refused.
TEST(ModelOracle, AConvStateRollsBackAsARerunFromThePromptAndRefusesAShift) {
  const Model m = conv_model(4, 2);
  const std::vector<int32_t> a = tokens(12, 2), b = tokens(5, 3);
  SequenceOracle<double> rolled(m);
  rolled.extend(a);
  rolled.truncate(4);
  const std::vector<double> got = rolled.extend(b);
  std::vector<int32_t> whole(a.begin(), a.end() - 4);
  whole.insert(whole.end(), b.begin(), b.end());
  const std::vector<double> want = SequenceOracle<double>(m).extend(whole);
  EXPECT_EQ(got, std::vector<double>(want.end() - static_cast<std::ptrdiff_t>(got.size()), want.end()));
  SequenceOracle<double> shifted(m);
  shifted.extend(a);
  EXPECT_THROW(shifted.shift(2, 3), std::invalid_argument);
}

// A model whose layer 0 is recurrent_gemma's RG-LRU block (lru_width 16 in 4 gate blocks, one conv tap:
// the block reads its own position's x only) with every recurrent_param `lambda`, layer 1 (if `layers` is 2)
// attention; weights ~ N(0, 0.5).
Model recurrent_model(double lambda, int64_t layers = 1, int64_t taps = 1) {
  Model m = random_model(Family::Mistral, std::vector<int64_t>(static_cast<size_t>(layers), 0), 0);
  ModelConfig& c = m.config;
  c.family = Family::RecurrentGemma;
  c.recurrent_layers.assign(static_cast<size_t>(layers), false);
  c.recurrent_layers[0] = true;
  c.lru_width = 16, c.lru_blocks = 4, c.conv_kernel = taps;
  std::mt19937_64 rng(13);
  std::normal_distribution<double> n(0, 0.5);
  auto t = [&](const std::string& name, int64_t size) {
    auto& v = m.tensors["model.layers.0.temporal_block." + name];
    v.resize(static_cast<size_t>(size));
    for (double& x : v) x = n(rng);
  };
  for (const char* w : {"linear_x.", "linear_y."}) t(std::string(w) + "weight", 16 * c.hidden), t(std::string(w) + "bias", 16);
  t("linear_out.weight", c.hidden * 16), t("linear_out.bias", c.hidden);
  t("conv_1d.weight", 16 * taps), t("conv_1d.bias", 16);
  for (const char* g : {"input_gate_", "recurrent_gate_"})
    t(std::string("rg_lru.") + g + "weight", 4 * 4 * 4), t(std::string("rg_lru.") + g + "bias", 16);
  m.tensors["model.layers.0.temporal_block.rg_lru.recurrent_param"].assign(16, lambda);
  return m;
}

// The RG-LRU's decay is what carries a token forward (a one-layer model, one conv tap): with softplus(lambda)
// 1000 the decay a = exp(-8000 r) is below 1e-17 for any r > 0.005, so position p reads token p alone (a token
// before it moves nothing; the same token at positions 1 and 5 gives the same logits, sqrt(1 - a^2) being 1 as at
// the reset); with lambda = 0 the state carries an earlier token to p. Position 0 is the reset: its state is its
// own gated input, whatever the decay.
TEST(ModelOracle, AnRgLruStateCarriesEarlierTokensByItsDecayAndResetsAtPositionZero) {
  const Model fast = recurrent_model(1000), slow = recurrent_model(0);
  std::vector<int32_t> a = tokens(8, 4), b = a;
  b[3] = (b[3] + 7) % 32;
  auto far = [](const std::vector<double>& x, const std::vector<double>& y) {
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::abs(x[i] - y[i]));
    return e;
  };
  for (int64_t p = 4; p < 8; ++p) {
    EXPECT_LT(far(row(SequenceOracle<double>(fast).extend(a), p, 32), row(SequenceOracle<double>(fast).extend(b), p, 32)), 1e-12);
    EXPECT_GT(far(row(SequenceOracle<double>(slow).extend(a), p, 32), row(SequenceOracle<double>(slow).extend(b), p, 32)), 1e-6);
  }
  std::vector<int32_t> same = a;
  same[5] = same[1];
  const std::vector<double> f = SequenceOracle<double>(fast).extend(same), s = SequenceOracle<double>(slow).extend(same);
  EXPECT_LT(far(row(f, 1, 32), row(f, 5, 32)), 1e-12);
  EXPECT_GT(far(row(s, 1, 32), row(s, 5, 32)), 1e-6);
  // The reset: at position 0 the decay has no state to act on and the input is not scaled by sqrt(1 - a^2).
  EXPECT_LT(far(row(f, 0, 32), row(s, 0, 32)), 1e-12);
}

// As the conv state: the RG-LRU's state is kept per position, so a rollback is the re-run from the prompt bit for
// bit (with a conv of 3 taps and an attention layer above), and a context shift is refused.
TEST(ModelOracle, AnRgLruStateRollsBackAsARerunFromThePromptAndRefusesAShift) {
  const Model m = recurrent_model(0, 2, 3);
  const std::vector<int32_t> a = tokens(12, 2), b = tokens(5, 3);
  SequenceOracle<double> rolled(m);
  rolled.extend(a);
  rolled.truncate(4);
  const std::vector<double> got = rolled.extend(b);
  std::vector<int32_t> whole(a.begin(), a.end() - 4);
  whole.insert(whole.end(), b.begin(), b.end());
  const std::vector<double> want = SequenceOracle<double>(m).extend(whole);
  EXPECT_EQ(got, std::vector<double>(want.end() - static_cast<std::ptrdiff_t>(got.size()), want.end()));
  SequenceOracle<double> shifted(m);
  shifted.extend(a);
  EXPECT_THROW(shifted.shift(2, 3), std::invalid_argument);
}

// lfm3's attention gate: each head's output times sigmoid(g_proj h). A zero g_proj halves every head
// (exactly: the model with o_proj halved); a head whose gate logit is far below zero is silenced (the
// model with that head's o_proj columns zeroed), one far above passes unchanged.
TEST(ModelOracle, AnAttentionGateScalesEachHeadByTheSigmoidOfItsOwnLogit) {
  const Model plain = random_model(Family::Mistral, {0}, 0);
  const ModelConfig& c = plain.config;
  auto gated = [&](double head0, double others) {
    Model m = plain;
    m.config.attn_gate = true;
    auto& g = m.tensors["model.layers.0.self_attn.g_proj.weight"];
    g.assign(static_cast<size_t>(c.heads * c.hidden), 0.0);
    // Every entry of head 0's row of g_proj is head0, of the other heads' rows `others`.
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.hidden; ++i) g[static_cast<size_t>(h * c.hidden + i)] = h == 0 ? head0 : others;
    return m;
  };
  const std::vector<int32_t> t = tokens(9);
  Model half = plain;
  for (double& v : half.tensors["model.layers.0.self_attn.o_proj.weight"]) v *= 0.5;
  EXPECT_EQ(SequenceOracle<double>(gated(0, 0)).extend(t), SequenceOracle<double>(half).extend(t));
  // The gate reads h, the normed input: with every input-norm weight 0 but the first, and every token's
  // first embedding entry 1, h = (1 / rms(x), 0, ...), so a row of +-1e4 gives a logit of +-1e4 / rms(x).
  Model base = plain;
  auto& in = base.tensors["model.layers.0.input_layernorm.weight"];
  std::fill(in.begin(), in.end(), 0.0);
  in[0] = 1.0;
  auto with_gate = [&](double head0, double others) {
    Model m = gated(head0, others);
    m.tensors["model.layers.0.input_layernorm.weight"] = in;
    return m;
  };
  for (int64_t tok = 0; tok < c.vocab; ++tok)
    base.tensors["model.embed_tokens.weight"][static_cast<size_t>(tok * c.hidden)] = 1.0;
  auto embed = base.tensors["model.embed_tokens.weight"];
  Model silenced = base;
  auto& o = silenced.tensors["model.layers.0.self_attn.o_proj.weight"];
  for (int64_t r = 0; r < c.hidden; ++r)
    for (int64_t d = 0; d < c.head_dim; ++d) o[static_cast<size_t>(r * c.heads * c.head_dim + d)] = 0.0;  // head 0's columns
  Model g1 = with_gate(-1e4, 1e4);
  g1.tensors["model.embed_tokens.weight"] = embed;
  const auto x = SequenceOracle<double>(g1).extend(t), y = SequenceOracle<double>(silenced).extend(t);
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::abs(x[i] - y[i]));
  EXPECT_LT(e, 1e-12);
  Model open = with_gate(1e4, 1e4);
  open.tensors["model.embed_tokens.weight"] = embed;
  const auto z = SequenceOracle<double>(open).extend(t), w = SequenceOracle<double>(base).extend(t);
  e = 0;
  for (size_t i = 0; i < z.size(); ++i) e = std::max(e, std::abs(z[i] - w[i]));
  EXPECT_LT(e, 1e-12);
}

// The rows a SequenceModel keeps for the process (check.cpp's memo) are the rows the oracles compute:
// a model without a digest keeps nothing, and is the reference here. A kept row is keyed by the
// model, the reference's options and every step before it; a plan that leaves the kept steps catches
// its oracles up before computing.
std::vector<SequenceModel::Expected> expected_rows(const Model& m, const std::vector<PlanStep>& steps, OracleOptions o = {}) {
  SequenceModel s(m, o);
  std::vector<SequenceModel::Expected> out;
  for (size_t i = 0; i < steps.size(); ++i) out.push_back(s.apply(steps[i], i));
  return out;
}

void expect_same_rows(const std::vector<SequenceModel::Expected>& got, const std::vector<SequenceModel::Expected>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].positions, want[i].positions) << what << " step " << i;
    EXPECT_EQ(got[i].logits, want[i].logits) << what << " step " << i;  // bit for bit
    EXPECT_EQ(got[i].reference_error, want[i].reference_error) << what << " step " << i;
  }
}

TEST(SequenceModel, KeptRowsAreTheComputedOnesUnderModelOptionsAndEveryStep) {
  auto keyed = [](Model m, const std::string& digest) {
    m.digest = digest;
    return m;
  };
  const Model a = random_model(Family::Gemma2, {3, 0}, 3, 7), b = random_model(Family::Gemma2, {3, 0}, 3, 8);
  const Model ka = keyed(a, "memo-test-a"), kb = keyed(b, "memo-test-b");
  const PlanStep s0{Extend{0, tokens(6, 1)}}, s1{Extend{0, tokens(3, 2)}}, other0{Extend{0, tokens(6, 3)}},
      s2{Extend{0, tokens(2, 4)}};
  OracleOptions half;
  half.kv_half = true;
  const OracleMemoStats before = oracle_memo_stats();
  expect_same_rows(expected_rows(ka, {s0, s1}), expected_rows(a, {s0, s1}), "first run");
  expect_same_rows(expected_rows(ka, {s0, s1}), expected_rows(a, {s0, s1}), "kept run");
  EXPECT_GE(oracle_memo_stats().hits - before.hits, 4);  // both oracles, both steps, on the second run
  expect_same_rows(expected_rows(ka, {s0, s1}, half), expected_rows(a, {s0, s1}, half), "other options");
  expect_same_rows(expected_rows(kb, {s0, s1}), expected_rows(b, {s0, s1}), "other model");
  expect_same_rows(expected_rows(ka, {other0, s1}), expected_rows(a, {other0, s1}), "other first step");
  expect_same_rows(expected_rows(ka, {s0, s1, s2}), expected_rows(a, {s0, s1, s2}), "a step after the kept ones");
  EXPECT_NE(expected_rows(a, {other0, s1})[1].logits, expected_rows(a, {s0, s1})[1].logits);  // the test can tell them apart
  EXPECT_NE(expected_rows(a, {s0, s1}, half)[1].reference_error, expected_rows(a, {s0, s1})[1].reference_error);
}

// The memo's files: rows another process kept are the computed ones, and a damaged file (a flipped
// byte in its rows) is computed again rather than believed.
TEST(SequenceModel, RowsKeptInFilesAreTheComputedOnesAndADamagedFileIsComputedAgain) {
  namespace fs = std::filesystem;
  const fs::path dir = oracle_files_dir();
  if (dir.empty()) GTEST_SKIP() << "the oracle keeps no files here (KVC_ORACLE_MEMO, KVC_CACHE, HOME)";
  Model a = random_model(Family::Gemma2, {3, 0}, 3, 11);
  const std::vector<PlanStep> plan = {{Extend{0, tokens(6, 1)}}, {Extend{0, tokens(3, 2)}}};
  const auto want = expected_rows(a, plan);  // no digest: computed, nothing kept
  a.digest = "memo-file-test-" + std::to_string(getpid()) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const size_t before_written = oracle_files_written().size();
  expect_same_rows(expected_rows(a, plan), want, "computed and written");
  // Only this process's files: the binary's other tests, each its own process, write to the same folder.
  const std::vector<std::string> all_written = oracle_files_written();
  const std::vector<fs::path> written(all_written.begin() + static_cast<std::ptrdiff_t>(before_written), all_written.end());
  ASSERT_EQ(written.size(), 4u);  // both oracles, both steps
  forget_kept_oracle_rows();
  OracleMemoStats before = oracle_memo_stats();
  expect_same_rows(expected_rows(a, plan), want, "read from the files");
  EXPECT_EQ(oracle_memo_stats().file_hits - before.file_hits, 4);
  for (const fs::path& f : written) {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(3);
    const char byte = static_cast<char>(io.get() ^ 0xff);
    io.seekp(3);
    io.put(byte);
  }
  forget_kept_oracle_rows();
  before = oracle_memo_stats();
  expect_same_rows(expected_rows(a, plan), want, "damaged files");
  EXPECT_EQ(oracle_memo_stats().file_hits - before.file_hits, 0);
  for (const fs::path& f : written) fs::remove(f);
}

// The files are keyed by the oracle's code: the sha256 of its archives' sha256s, as sha256sum says
// of the archives this test was built with (a stale or partial id would hand one oracle's rows to another).
TEST(SequenceModel, TheOraclesFilesAreKeyedByItsArchivesAsTheyAreNow) {
  auto shell = [](const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    char buffer[256];
    while (p && fgets(buffer, sizeof buffer, p)) out += buffer;
    if (p) pclose(p);
    return out;
  };
  const std::string sums = shell(std::string("sha256sum ") + kvc::paths::target_file("kvc_engine") + " " +
                                 kvc::paths::target_file("kvc_core") + " | cut -c1-64 | tr -d '\\n'");
  ASSERT_EQ(sums.size(), 128u) << sums;
  const std::string id = shell("printf %s " + sums + " | sha256sum | cut -c1-32 | tr -d '\\n'");
  EXPECT_EQ(oracle_code_id(), id);
}

TEST(ModelConfig, AGemma2SoftCapIsTheDefaultWhenAbsentAndNoneWhenNull) {
  nlohmann::json g = {{"model_type", "gemma2"}, {"vocab_size", 32},         {"hidden_size", 16},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 8},          {"intermediate_size", 8},   {"sliding_window", 3}};
  EXPECT_EQ(parse_config(g, "c.json").attn_softcap, 50);
  EXPECT_EQ(parse_config(g, "c.json").final_softcap, 30);
  g["attn_logit_softcapping"] = nullptr, g["final_logit_softcapping"] = nullptr;
  EXPECT_EQ(parse_config(g, "c.json").attn_softcap, 0);
  EXPECT_EQ(parse_config(g, "c.json").final_softcap, 0);
}

TEST(ModelConfig, ReadsGptOssAlternationYarnAndMoe) {
  nlohmann::json g = {{"model_type", "gpt_oss"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"intermediate_size", 8},
                      {"sliding_window", 3},
                      {"num_local_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 64}}}};
  const ModelConfig m = parse_config(g, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3, 0}));  // (i + 1) % 2: even layers slide
  EXPECT_TRUE(m.sinks && m.qkv_bias && m.o_bias);
  EXPECT_EQ(m.moe.routing, MoeRouting::GptOss);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(4, true)));
  EXPECT_DOUBLE_EQ(m.yarn.attention_factor, 0.1 * std::log(8.0) + 1);
  EXPECT_TRUE(m.yarn.truncate);
  g["rope_scaling"]["rope_type"] = "longrope";
  EXPECT_THROW(parse_config(g, "c.json"), std::invalid_argument);
}

TEST(ModelConfig, ReadsQwenMaxWindowLayersAndLlama4NoRopeAndChunks) {
  nlohmann::json q = {{"model_type", "qwen2"},    {"vocab_size", 32},          {"hidden_size", 16},      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2},  {"intermediate_size", 8}, {"sliding_window", 3},
                      {"max_window_layers", 2},   {"use_sliding_window", true}};
  // Layer i slides iff i >= max_window_layers: the first max_window_layers layers are full.
  EXPECT_EQ(parse_config(q, "c.json").windows, (std::vector<int64_t>{0, 0, 3, 3}));
  EXPECT_TRUE(parse_config(q, "c.json").qkv_bias);
  q["use_sliding_window"] = false;  // sliding_window counts only with use_sliding_window
  EXPECT_EQ(parse_config(q, "c.json").windows, (std::vector<int64_t>{0, 0, 0, 0}));
  q["use_sliding_window"] = true, q["model_type"] = "qwen3",
  q["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  EXPECT_EQ(parse_config(q, "c.json").windows, (std::vector<int64_t>{3, 0, 0, 3}));
  EXPECT_TRUE(parse_config(q, "c.json").qk_norm);
  nlohmann::json l = {{"model_type", "llama4_text"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"intermediate_size", 8},
                      {"intermediate_size_mlp", 12},
                      {"attention_chunk_size", 5},
                      {"interleave_moe_layer_step", 2}};
  const ModelConfig m = parse_config(l, "c.json");
  // no_rope_layers defaults to every 4th layer NoPE (0); without layer_types rope layers are chunked.
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(m.chunks, (std::vector<int64_t>{5, 5, 5, 0}));
  EXPECT_EQ(m.attention(0), Attention::Chunked);
  EXPECT_EQ(m.attention(3), Attention::Full);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(m.intermediate, 12);
  EXPECT_EQ(m.moe.intermediate, 8);
  l["no_rope_layers"] = {0, 1, 0, 1};  // 1 = rope, 0 = NoPE
  EXPECT_EQ(parse_config(l, "c.json").chunks, (std::vector<int64_t>{0, 5, 0, 5}));
  l["layer_types"] = {"full_attention", "full_attention", "chunked_attention", "chunked_attention"};
  EXPECT_EQ(parse_config(l, "c.json").chunks, (std::vector<int64_t>{0, 0, 5, 5}));
  l["layer_types"] = {"full_attention", "sliding_attention", "chunked_attention", "chunked_attention"};
  EXPECT_THROW(parse_config(l, "c.json"), std::invalid_argument);
}

TEST(ModelConfig, ReadsEachFamilysWindowsAndRefusesWhatItDoesNotModel) {
  nlohmann::json c = {{"model_type", "gemma3_text"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"intermediate_size", 8},
                      {"sliding_window", 3},
                      {"layer_types", {"sliding_attention", "full_attention", "full_attention", "sliding_attention"}}};
  EXPECT_EQ(parse_config(c, "c.json").windows, (std::vector<int64_t>{3, 0, 0, 3}));
  c.erase("layer_types");
  EXPECT_EQ(parse_config(c, "c.json").windows, (std::vector<int64_t>{3, 3, 3, 3}));  // pattern 6
  // stored, never applied by Gemma3Attention
  c["attn_logit_softcapping"] = 10.0;
  EXPECT_EQ(parse_config(c, "c.json").attn_softcap, 0);
  c["model_type"] = "llama";
  try {
    parse_config(c, "c.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: /model_type"), std::string::npos) << e.what();
  }
}

// Lfm3Config's defaults: layer i full iff i % 4 == 2, sliding iff i % 4 == 0 and i > 0, else conv;
// proportional rope 0.5 on full layers (4 of 8 frequencies at head_dim 16), the gate and sandwich norms
// on, norm_eps 1e-5, conv_L_cache 7; its tensor names read as the forward's; what it does not model refused.
TEST(ModelConfig, ReadsLfm3ConvLayersRopePerLayerTypeAndItsTensorNames) {
  nlohmann::json c = {{"model_type", "lfm3"},   {"vocab_size", 32},         {"hidden_size", 16},
                      {"num_hidden_layers", 6}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 16},         {"intermediate_size", 8},   {"sliding_window", 3}};
  const ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.conv_layers, (std::vector<bool>{true, true, false, true, false, true}));
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 0, 0, 0, 3, 0}));
  EXPECT_EQ(m.rope_angles[2], 4);
  EXPECT_EQ(m.rope_thetas[2], 1e6);
  EXPECT_EQ(m.rope_angles[4], 0);
  EXPECT_EQ(m.rope_thetas[4], 1e4);
  EXPECT_TRUE(m.attn_gate && m.qk_norm && m.tied);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.eps, 1e-5);
  EXPECT_EQ(m.conv_kernel, 7);
  c["layer_types"] = {"sliding_attention", "conv", "full_attention", "conv", "conv", "conv"};
  c["use_sandwich_norm"] = false, c["use_attention_gate"] = false, c["conv_L_cache"] = 2;
  const ModelConfig e = parse_config(c, "c.json");
  EXPECT_EQ(e.conv_layers, (std::vector<bool>{false, true, false, true, true, true}));
  EXPECT_EQ(e.windows, (std::vector<int64_t>{3, 0, 0, 0, 0, 0}));
  EXPECT_EQ(e.norm_placement, NormPlacement::Pre);
  EXPECT_FALSE(e.attn_gate);
  EXPECT_EQ(e.conv_kernel, 2);
  c["layer_types"][1] = "linear_attention";
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["layer_types"][1] = "conv";
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "yarn"}, {"factor", 2.0}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// A multimodal model (qwen2_vl, qwen2_5_vl): its decoder is read from text_config, not from the outer
// config; the attention's head size is hidden_size / num_attention_heads; layer i slides iff
// use_sliding_window and i >= max_window_layers (default 80 in Qwen2VLTextConfig, not qwen2's 28); the
// M-RoPE sections must cover head_dim / 2; the head is tied where either config ties it, and refused
// where they disagree; the tensors come from under model.language_model.
TEST(ModelConfig, AMultimodalModelsDecoderIsItsTextConfig) {
  nlohmann::json text = {{"model_type", "qwen2_vl_text"},
                         {"vocab_size", 32},
                         {"hidden_size", 16},
                         {"num_hidden_layers", 4},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"intermediate_size", 8},
                         {"use_sliding_window", true},
                         {"sliding_window", 3},
                         {"max_window_layers", 1},
                         {"rope_scaling", {{"type", "mrope"}, {"mrope_section", {1, 0, 1}}}}};
  nlohmann::json c = {{"model_type", "qwen2_vl"}, {"vocab_size", 99}, {"num_hidden_layers", 9}, {"text_config", text}};
  auto error = [&](const nlohmann::json& j) -> std::string {
    try {
      parse_config(j, "c.json");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(c).find("c.json (text_config): /rope_scaling/mrope_section: sizes must be positive"), std::string::npos)
      << error(c);
  c["text_config"]["rope_scaling"]["mrope_section"] = {1, 1, 1};  // head_dim 4: 2 frequencies
  EXPECT_NE(error(c).find("sums to 3, not head_dim / 2 = 2"), std::string::npos) << error(c);
  c["text_config"]["rope_scaling"]["mrope_section"] = {2, 1, 1};
  c["text_config"]["hidden_size"] = 32;  // head_dim 8: 4 frequencies
  const ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.family, Family::Qwen2Vl);
  EXPECT_EQ(m.vocab, 32);
  EXPECT_EQ(m.layers, 4);
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 3, 3, 3}));
  EXPECT_TRUE(m.qkv_bias && !m.o_bias && !m.tied);
  EXPECT_EQ(m.text_prefix, "model.language_model.");
  c["text_config"].erase("max_window_layers");  // Qwen2VLTextConfig's default, 80 (qwen2's 28): 30 layers all full
  c["text_config"]["num_hidden_layers"] = 30;
  EXPECT_EQ(parse_config(c, "c.json").windows, std::vector<int64_t>(30, 0));
  c["text_config"]["num_hidden_layers"] = 4;
  c["text_config"]["head_dim"] = 16;
  EXPECT_NE(error(c).find("/head_dim: is 16, not hidden_size / num_attention_heads = 8"), std::string::npos)
      << "[" << error(c) << "]";
  c["text_config"]["head_dim"] = 8;
  c["model_type"] = "qwen2_5_vl", c["tie_word_embeddings"] = true;
  EXPECT_EQ(parse_config(c, "c.json").family, Family::Qwen25Vl);
  EXPECT_TRUE(parse_config(c, "c.json").tied);
  c["text_config"]["tie_word_embeddings"] = false;
  EXPECT_NE(error(c).find("c.json: /tie_word_embeddings: differs from text_config's"), std::string::npos) << error(c);
  c.erase("text_config");
  EXPECT_NE(error(c).find("c.json: /text_config: missing"), std::string::npos) << error(c);
}

// The multimodal checkpoint's decoder is exactly the qwen2 checkpoint of the same tensors and config:
// the loader takes model.language_model.* as model.*, leaves the towers out, and M-RoPE with text positions
// is the default rope (which oracle_agreement.py holds to transformers' own multimodal forward).
TEST(ModelOracle, AMultimodalCheckpointsDecoderIsTheSameQwen2Decoder) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("kvc-mm-test-" + std::to_string(getpid()))).string();
  const std::string cmd = "python3 " + std::string(kvc::paths::source_dir()) + "/engines/models/make_models.py " + dir +
                          " --set families --only qwen2vl-mwl2 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Model mm = load_model(dir + "/qwen2vl-mwl2");
  for (const auto& [name, t] : mm.tensors)
    EXPECT_TRUE(name.rfind("model.layers.", 0) == 0 || name == "model.embed_tokens.weight" || name == "model.norm.weight" ||
                name == "lm_head.weight")
        << name;
  nlohmann::json flat = nlohmann::json::parse(std::ifstream(dir + "/qwen2vl-mwl2/config.json"))["text_config"];
  flat["model_type"] = "qwen2", flat.erase("rope_scaling");
  Model plain;
  plain.config = parse_config(flat, "flat.json");
  plain.tensors = mm.tensors;
  EXPECT_EQ(plain.config.windows, mm.config.windows);
  EXPECT_EQ(plain.config.windows, (std::vector<int64_t>{0, 3, 3, 3}));
  SequenceOracle<double> a(mm), b(plain);
  const std::vector<int32_t> t = tokens(12);
  EXPECT_EQ(a.extend(t), b.extend(t));
  std::filesystem::remove_all(dir);
}

// A wrapper (mistral3, cohere2_vision, exaone4_5, lfm3_vl, qwen2_audio, qwen3_asr): its decoder is its
// text_config read as that family's config.json, only with the family its agreement is proven with (and
// exaone4_5's renamed exaone4_5_text); cohere2_vision's head has no logit_scale; qwen2_audio's checkpoint keeps
// the decoder under language_model.model. and its head under language_model.; the tie as the multimodal models'.
TEST(ModelConfig, AWrappersDecoderIsItsTextConfigsFamily) {
  const nlohmann::json text = {{"model_type", "cohere2"}, {"vocab_size", 32},           {"hidden_size", 16},
                               {"num_hidden_layers", 4},  {"num_attention_heads", 4},   {"num_key_value_heads", 2},
                               {"intermediate_size", 8},  {"sliding_window", 3},        {"sliding_window_pattern", 2},
                               {"logit_scale", 0.5},      {"tie_word_embeddings", true}};
  nlohmann::json c = {{"model_type", "cohere2_vision"}, {"vocab_size", 99}, {"text_config", text}};
  auto error = [&](const nlohmann::json& j) -> std::string {
    try {
      parse_config(j, "c.json");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const ModelConfig plain = parse_config(text, "t.json"), m = parse_config(c, "c.json");
  EXPECT_EQ(m.family, Family::Cohere2);
  EXPECT_EQ(m.vocab, 32);
  EXPECT_EQ(m.windows, plain.windows);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3, 0}));
  EXPECT_EQ(plain.logit_scale, 0.5);
  EXPECT_EQ(m.logit_scale, 1.0);  // Cohere2VisionForConditionalGeneration: logits = lm_head(hidden)
  EXPECT_TRUE(m.tied);
  EXPECT_EQ(m.text_prefix, "model.language_model.");
  EXPECT_EQ(m.head_prefix, "");
  c["model_type"] = "mistral3";
  EXPECT_NE(error(c).find("c.json (text_config): /model_type: \"cohere2\": mistral3 is read with a mistral decoder only"),
            std::string::npos)
      << error(c);
  c["tie_word_embeddings"] = false;
  c["model_type"] = "cohere2_vision";
  EXPECT_NE(error(c).find("c.json: /tie_word_embeddings: differs from text_config's"), std::string::npos) << error(c);
  c.erase("text_config");
  EXPECT_NE(error(c).find("c.json: /text_config: missing"), std::string::npos) << error(c);
  nlohmann::json q = text;
  q["model_type"] = "qwen2", q["use_sliding_window"] = true, q["max_window_layers"] = 1, q.erase("logit_scale");
  q["tie_word_embeddings"] = false;
  const ModelConfig audio = parse_config({{"model_type", "qwen2_audio"}, {"text_config", q}}, "a.json");
  EXPECT_EQ(audio.family, Family::Qwen2);
  EXPECT_EQ(audio.windows, (std::vector<int64_t>{0, 3, 3, 3}));
  EXPECT_EQ(audio.text_prefix, "language_model.model.");
  EXPECT_EQ(audio.head_prefix, "language_model.");
  q["tie_word_embeddings"] = true;  // 5.x's Qwen2AudioForConditionalGeneration does not tie its head
  EXPECT_NE(error({{"model_type", "qwen2_audio"}, {"text_config", q}})
                .find("c.json: /tie_word_embeddings: a tied head is not modelled"),
            std::string::npos);
  nlohmann::json e = text;
  e["model_type"] = "exaone4_5_text", e.erase("logit_scale");
  EXPECT_EQ(parse_config({{"model_type", "exaone4_5"}, {"text_config", e}}, "e.json").family, Family::Exaone4);
}

// qwen2_5_omni_thinker: qwen2's decoder under Qwen2_5OmniTextConfig's own defaults (sliding_window 32768, rope
// base 1e6), its M-RoPE sections checked against the head and read as the default rope (text-only positions),
// the tie said in text_config (its default and the thinker's differ).
TEST(ModelConfig, AnOmniThinkersDecoderIsQwen2UnderItsTextConfigsDefaults) {
  nlohmann::json text = {{"model_type", "qwen2_5_omni_text"},
                         {"vocab_size", 32},
                         {"hidden_size", 16},
                         {"num_hidden_layers", 3},
                         {"num_attention_heads", 2},
                         {"intermediate_size", 8},
                         {"use_sliding_window", true},
                         {"max_window_layers", 1},
                         {"tie_word_embeddings", false},
                         {"rope_parameters", {{"rope_type", "default"}, {"mrope_section", {2, 1, 1}}}}};
  auto read = [&](const nlohmann::json& t) {
    return parse_config({{"model_type", "qwen2_5_omni_thinker"}, {"text_config", t}}, "c.json");
  };
  auto error = [&](const nlohmann::json& t) -> std::string {
    try {
      read(t);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const ModelConfig m = read(text);
  EXPECT_EQ(m.family, Family::Qwen2);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 32768, 32768}));
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_EQ(m.text_prefix, "model.");
  EXPECT_EQ(m.head_prefix, "");
  nlohmann::json t = text;
  t["rope_parameters"]["mrope_section"] = {2, 1, 2};
  EXPECT_NE(error(t).find("/rope_parameters/mrope_section: sums to 5, not head_dim / 2 = 4"), std::string::npos) << error(t);
  t = text;
  t["rope_parameters"].erase("mrope_section");  // the class default [16, 24, 24] covers a head of 128
  EXPECT_NE(error(t).find("sums to 64, not head_dim / 2 = 4"), std::string::npos) << error(t);
  t["head_dim"] = 128;
  EXPECT_EQ(read(t).head_dim, 128);
  t = text;
  t.erase("tie_word_embeddings");
  EXPECT_NE(error(t).find("/tie_word_embeddings: missing"), std::string::npos) << error(t);
}

// gemma4_unified: gemma4_text's decoder without per-layer inputs or the MoE block (their fields refused), under
// Gemma4UnifiedTextConfig's defaults (sliding_window 1024, tied), use_bidirectional_attention "vision" (its
// default) causal on text-only inputs and "all" refused.
TEST(ModelConfig, AGemma4UnifiedDecoderIsGemma4WithoutPerLayerInputs) {
  const nlohmann::json text = {{"model_type", "gemma4_unified_text"},
                               {"vocab_size", 32},
                               {"hidden_size", 16},
                               {"num_hidden_layers", 3},
                               {"num_attention_heads", 2},
                               {"head_dim", 8},
                               {"global_head_dim", 8},
                               {"intermediate_size", 8}};
  auto read = [&](const nlohmann::json& t) {
    return parse_config({{"model_type", "gemma4_unified"}, {"text_config", t}}, "c.json");
  };
  auto error = [&](const nlohmann::json& t) -> std::string {
    try {
      read(t);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const ModelConfig m = read(text);
  EXPECT_EQ(m.family, Family::Gemma4Text);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{1024, 1024, 0}));  // the last layer forced full
  EXPECT_TRUE(m.tied);
  EXPECT_EQ(m.text_prefix, "model.language_model.");
  nlohmann::json t = text;
  t["use_bidirectional_attention"] = "all";
  EXPECT_NE(error(t).find("/use_bidirectional_attention: \"all\" is not modelled"), std::string::npos) << error(t);
  t["use_bidirectional_attention"] = "vision";
  EXPECT_EQ(read(t).windows, m.windows);
  t = text;
  t["hidden_size_per_layer_input"] = 0;
  EXPECT_NE(error(t).find("/hidden_size_per_layer_input: is not a field of gemma4_unified_text"), std::string::npos) << error(t);
}

// A wrapper's checkpoint is its decoder's: the loader takes the decoder's tensors from under the class's
// prefixes (qwen2_audio's 4.x layout, language_model.model.* and language_model.lm_head) and leaves the tower
// out, and the forward is the decoder's of the same tensors (cohere2_vision's without its logit_scale).
TEST(ModelOracle, AWrapperCheckpointIsItsDecodersCheckpoint) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("kvc-wrap-test-" + std::to_string(getpid()))).string();
  const std::string cmd = "python3 " + std::string(kvc::paths::source_dir()) + "/engines/models/make_models.py " + dir +
                          " --set families --only qwen2audio-mwl2 --only cohere2vision-w3 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* name : {"qwen2audio-mwl2", "cohere2vision-w3"}) {
    const Model w = load_model(dir + "/" + name);
    for (const auto& [t, v] : w.tensors)
      EXPECT_TRUE(t.rfind("model.layers.", 0) == 0 || t == "model.embed_tokens.weight" || t == "model.norm.weight" ||
                  t == "lm_head.weight")
          << name << ": " << t;
    EXPECT_EQ(w.tensors.count("lm_head.weight"), w.config.tied ? 0u : 1u) << name;
    nlohmann::json flat = nlohmann::json::parse(std::ifstream(dir + "/" + name + "/config.json"))["text_config"];
    flat["logit_scale"] = 1.0;  // cohere2's causal-LM head scales; the wrapper's does not (qwen2 has none)
    Model plain;
    plain.config = parse_config(flat, "flat.json");
    plain.tensors = w.tensors;
    EXPECT_EQ(plain.config.windows, w.config.windows) << name;
    SequenceOracle<double> a(w), b(plain);
    const std::vector<int32_t> t = tokens(12);
    EXPECT_EQ(a.extend(t), b.extend(t)) << name;
  }
  std::filesystem::remove_all(dir);
}

// cohere_compass_text (the decoder of cohere_compass): cohere2's layers with layer types default all full, a rope
// per layer type (null: NoPE) rotating halves, no logit_scale by default; its wrapper reads it from text_config.
TEST(ModelConfig, ReadsCohereCompassTextsRopePerLayerType) {
  nlohmann::json c = {{"model_type", "cohere_compass_text"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 3},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"intermediate_size", 8},
                      {"sliding_window", 3},
                      {"rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}}}}};
  auto error = [&](const nlohmann::json& j) -> std::string {
    try {
      parse_config(j, "c.json");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{5e5, 5e5, 5e5}));
  EXPECT_EQ(m.head_dim, 4);  // hidden / heads, whatever head_dim says
  EXPECT_EQ(m.logit_scale, 1.0);
  EXPECT_TRUE(m.layer_norm && m.parallel_block && m.tied);
  EXPECT_FALSE(m.rope_interleaved);
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  EXPECT_NE(error(c).find("c.json: /rope_parameters: has no sliding_attention entry (layer 0 is one)"), std::string::npos)
      << error(c);
  c["rope_parameters"]["sliding_attention"] = nullptr;
  c["logit_scale"] = 0.5;
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(m.logit_scale, 0.5);
  const ModelConfig w = parse_config({{"model_type", "cohere_compass"}, {"text_config", c}}, "w.json");
  EXPECT_EQ(w.family, Family::CohereCompassText);
  EXPECT_EQ(w.rope_layers, m.rope_layers);
  EXPECT_EQ(w.logit_scale, 0.5);  // CohereCompassForConditionalGeneration scales by text_config.logit_scale
  EXPECT_EQ(w.text_prefix, "model.language_model.");
  c["rope_scaling"] = nullptr;  // 5.24.0 on set rope_parameters from it
  EXPECT_NE(error(c).find("c.json: /rope_scaling: is not read"), std::string::npos) << error(c);
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};  // its rotary module keys by layer type
  EXPECT_NE(error(c).find("c.json: /rope_parameters: has no sliding_attention entry"), std::string::npos) << error(c);
}

// muse_glimmer_text (the decoder of muse_glimmer): layer i full and NoPE iff (layers - 1 - i) % 4 == 0 by default,
// weightless q/k norms, q times qk_scale_factor, the embedding norm, post_norm_eps, a final norm of weight w,
// output_multiplier before the soft-cap; its wrapper embeds the image and video placeholder ids as id 0.
TEST(ModelConfig, ReadsMuseGlimmerTextAndItsPlaceholders) {
  nlohmann::json c = {{"model_type", "muse_glimmer_text"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 5},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"head_dim", 4},
                      {"intermediate_size", 8},
                      {"sliding_window", 3}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 3, 3, 3, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, true, true, true, false}));
  EXPECT_DOUBLE_EQ(m.query_scale, 0.5 * 3.87);
  EXPECT_TRUE(m.embed_rms_norm && !m.embed_norm && m.qk_norm && m.qk_norm_weightless && m.gemma_norm && m.final_norm_plain &&
              m.attn_gate_elementwise);
  EXPECT_EQ(m.post_eps, 1e-8);
  EXPECT_EQ(m.final_softcap, 20.0);
  c["layer_rope_theta"] = {1e4, 0, 5e5, 1e4, 1e4};  // a nonzero base rotates with the global one
  EXPECT_EQ(parse_config(c, "c.json").rope_layers, (std::vector<bool>{true, false, true, true, true}));
  const ModelConfig w = parse_config(
      {{"model_type", "muse_glimmer"}, {"image_token_id", 30}, {"video_token_id", 31}, {"text_config", c}}, "w.json");
  EXPECT_EQ(w.family, Family::MuseGlimmerText);
  EXPECT_EQ(w.zero_tokens, (std::vector<int64_t>{30, 31}));
  EXPECT_TRUE(m.zero_tokens.empty());
}

// muse_spark_text (the decoder of muse_spark): muse_glimmer_text's reading under its own defaults (qk_scale_factor
// 5.473, output_multiplier 0.177, head_dim 64, base 5e5, hidden_act), the o_norm, the weightless post-attention
// norm, the input-scaled post-MLP norm, the residual gates' temperature, and its MoE as TopK data: every layer sparse
// by default, sigmoid scores of the logits times output_multiplier, chosen by score + bias, renormalised with 1e-15,
// routed_scaling_factor, stacked experts at moe_hidden_size normed after; its wrapper zeroes the audio id too.
TEST(ModelConfig, ReadsMuseSparkTextsGatesNormsAndPooledMoe) {
  nlohmann::json c = {{"model_type", "muse_spark_text"}, {"vocab_size", 32},           {"hidden_size", 16},
                      {"num_hidden_layers", 5},          {"num_attention_heads", 4},   {"num_key_value_heads", 2},
                      {"intermediate_size", 8},          {"sliding_window", 3},        {"num_local_experts", 4},
                      {"num_experts_per_tok", 2},        {"moe_intermediate_size", 6}, {"moe_hidden_size", 12}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.family, Family::MuseSparkText);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_DOUBLE_EQ(m.query_scale, 0.125 * 5.4730064863875);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 3, 3, 3, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, true, true, true, false}));
  EXPECT_TRUE(m.attn_out_norm && m.post_attn_norm_weightless && m.post_ff_norm_input_scaled && m.embed_rms_norm &&
              m.qk_norm_weightless && m.final_norm_plain && !m.gelu);
  EXPECT_EQ(m.residual_gate_temperature, 0.3);
  EXPECT_EQ(m.logit_scale, 0.1767766952966369);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(5, true)));
  EXPECT_EQ(m.moe.routing, MoeRouting::TopK);
  EXPECT_EQ(m.moe.score, MoeScore::Sigmoid);
  EXPECT_TRUE(m.moe.selection_bias && m.moe.renormalize && m.moe.stacked_experts && m.moe.expert_out_norm &&
              !m.moe.select_logits);
  EXPECT_EQ(m.moe.router_scale, 0.1767766952966369);
  EXPECT_EQ(m.moe.renormalize_eps, 1e-15);
  EXPECT_EQ(m.moe.pooled, 12);
  EXPECT_EQ(m.expert_width(), 12);
  EXPECT_EQ(m.moe.shared_intermediate, 0);
  c["mlp_layer_types"] = {"dense", "sparse", "dense", "sparse", "sparse"};
  c["residual_gate_temperature"] = 1.0;
  c["output_multiplier"] = 0.5;
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, false, true, true}));
  EXPECT_EQ(m.residual_gate_temperature, 1.0);
  EXPECT_EQ(m.moe.router_scale, 0.5);
  const ModelConfig w = parse_config(
      {{"model_type", "muse_spark"}, {"image_token_id", 30}, {"video_token_id", 31}, {"audio_token_id", 29}, {"text_config", c}},
      "w.json");
  EXPECT_EQ(w.zero_tokens, (std::vector<int64_t>{30, 31, 29}));
  auto error = [](nlohmann::json cfg) {
    try {
      parse_config(cfg, "c.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // The class leaves a tied head newly initialised (engines/transformers/repro/muse_spark_tied_head_untied.py).
  EXPECT_NE(error({{"model_type", "muse_spark"}, {"tie_word_embeddings", true}, {"text_config", c}}).find("/tie_word_embeddings"),
            std::string::npos);
  c["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_NE(error(c).find("/hidden_act"), std::string::npos) << error(c);
  c["hidden_act"] = "silu";
  c["residual_gate_temperature"] = 0;
  EXPECT_NE(error(c).find("/residual_gate_temperature"), std::string::npos) << error(c);
}

// mellum: layer types default all full, one rope base per layer type (defaults full 5e5, sliding 1e4;
// no flat base), mlp_layer_types (default every layer sparse), softmax top-k renormalised by default,
// no shared expert.
TEST(ModelConfig, ReadsMellumsRopePerLayerTypeAndItsMlpLayerTypes) {
  nlohmann::json c = {{"model_type", "mellum"},   {"vocab_size", 32},         {"hidden_size", 16},       {"num_hidden_layers", 3},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8},           {"intermediate_size", 8},
                      {"sliding_window", 3},      {"num_local_experts", 4},   {"num_experts_per_tok", 2}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{500000.0, 500000.0, 500000.0}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(m.moe.score, MoeScore::Softmax);
  EXPECT_TRUE(m.moe.renormalize && m.qk_norm);
  EXPECT_EQ(m.moe.shared_intermediate, 0);
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  c["mlp_layer_types"] = {"dense", "sparse", "sparse"};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{10000.0, 500000.0, 10000.0}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, true}));
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
  EXPECT_EQ(parse_config(c, "c.json").rope_thetas, (std::vector<double>{2e4, 1e6, 2e4}));
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};  // its rotary module keys by layer type
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// flint: layer types default full on layers 0, 1, every i % 4 == 1 and the last; rope on the sliding layers
// only; sinks; mlp_only_layers default [0, 1]; sigmoid top-k renormalised; an ungated shared expert.
TEST(ModelConfig, ReadsFlintsDefaultPatternNoPEFullLayersAndDenseFirstLayers) {
  nlohmann::json c = {{"model_type", "flint"},  {"vocab_size", 32},         {"hidden_size", 16},
                      {"num_hidden_layers", 7}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 8},          {"intermediate_size", 8},   {"sliding_window", 3},
                      {"num_experts", 4},       {"num_experts_per_tok", 2}, {"shared_expert_intermediate_size", 8}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 0, 3, 3, 3, 0, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, false, true, true, true, false, false}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, false, true, true, true, true, true}));
  EXPECT_TRUE(m.sinks && m.qk_norm && m.moe.renormalize);
  EXPECT_EQ(m.moe.score, MoeScore::Sigmoid);
  EXPECT_EQ(m.moe.shared_intermediate, 8);
  EXPECT_FALSE(m.moe.shared_gate);
  c["mlp_only_layers"] = {3};
  c["decoder_sparse_step"] = 2;
  EXPECT_EQ(parse_config(c, "c.json").moe.layers, (std::vector<bool>{false, true, false, false, false, true, false}));
}

// cohere2_moe: the dense prefix layers (first_k_dense_replace, a key the config pops) take their own pattern and
// rotate where prefix_dense_sliding_window_pattern is 1; the others by sliding_window_pattern counted from 0 again,
// rope on the sliding ones; softmax of the chosen logits; the shared experts averaged with the routed output.
TEST(ModelConfig, ReadsCohere2MoesDensePrefixRopeAndSharedAverage) {
  nlohmann::json c = {{"model_type", "cohere2_moe"}, {"vocab_size", 32}, {"hidden_size", 16},      {"num_hidden_layers", 6},
                      {"num_attention_heads", 4},    {"head_dim", 8},    {"intermediate_size", 8}, {"sliding_window", 3},
                      {"first_k_dense_replace", 2},  {"num_experts", 4}, {"num_shared_experts", 2}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 0, 3, 3, 3, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, true, true, true, true, false}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, false, true, true, true, true}));
  EXPECT_TRUE(m.layer_norm && m.parallel_block && m.rope_interleaved && m.tied);
  EXPECT_EQ(m.moe.score, MoeScore::TopKSoftmax);
  EXPECT_FALSE(m.moe.renormalize);
  EXPECT_EQ(m.moe.shared_intermediate, 16);
  EXPECT_EQ(m.moe.combined_scale, 0.5);
  c["prefix_dense_sliding_window_pattern"] = 2;  // the prefix: S, F; neither forced to rotate
  c["rms_norm_eps"] = 1e-6;
  c["expert_selection_fn"] = "sigmoid";
  c["shared_expert_combination_strategy"] = "sum";
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3, 3, 3, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, false, true, true, true, false}));
  EXPECT_FALSE(m.layer_norm);
  EXPECT_EQ(m.moe.score, MoeScore::Sigmoid);
  EXPECT_TRUE(m.moe.renormalize);
  EXPECT_EQ(m.moe.combined_scale, 1);
  c["shared_expert_combination_strategy"] = "max";
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// afmoe: layer types every global_attn_every_n_layers-th layer full, rope on the sliding ones only; the attention gate
// per output element; sandwich norms; MoE from num_dense_layers on, sigmoid scores chosen with expert_bias,
// renormalised, times route_scale; its own tensor names read as the forward's.
TEST(ModelConfig, ReadsAfmoesPatternElementwiseGateAndDenseFirstLayers) {
  nlohmann::json c = {{"model_type", "afmoe"},  {"vocab_size", 32},         {"hidden_size", 16},
                      {"num_hidden_layers", 5}, {"num_attention_heads", 4}, {"head_dim", 8},
                      {"intermediate_size", 8}, {"sliding_window", 3},      {"global_attn_every_n_layers", 2},
                      {"num_experts", 4},       {"num_experts_per_tok", 2}, {"moe_intermediate_size", 8},
                      {"route_scale", 2.5},     {"mup_enabled", true}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3, 0, 3}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, true, true, true}));
  EXPECT_TRUE(m.attn_gate && m.attn_gate_elementwise && m.qk_norm && m.moe.selection_bias && m.moe.renormalize);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.moe.score, MoeScore::Sigmoid);
  EXPECT_EQ(m.moe.shared_intermediate, 16);
  EXPECT_EQ(m.moe.routed_scale, 2.5);
  EXPECT_EQ(m.embed_scale, 4.0);
  c["num_dense_layers"] = 0;
  c["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention", "sliding_attention"};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, true, false, false, true}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(5, true)));
}

// An encoder's whole-sequence forward, by its rule's consequence: on a one-layer model whose layer slides with a reach
// of r keys before and a after, a position's logits depend on the tokens p - r .. p + a and no other (the MLP and the
// head are per position); a padding key is one no query sees, so changing its token moves only its own row; a full
// layer sees every token. The causal option and a wider reach are seen by the same probes.
TEST(ModelOracle, AnEncoderPositionSeesItsReachOnBothSidesAndNoPadding) {
  Model m = random_model(Family::Mistral, {3}, 3);
  m.config.bidirectional = true;
  m.config.reach_before = {2};
  m.config.reach_after = {1};
  const int64_t n = 10, p = 5;
  const std::vector<int32_t> base = tokens(n, 5);
  auto rows_moved = [&](const Model& model, int64_t changed, const std::vector<bool>& real = {}, OracleOptions o = {}) {
    std::vector<int32_t> other = base;
    other[static_cast<size_t>(changed)] = (other[static_cast<size_t>(changed)] + 1) % 32;
    const std::vector<double> a = SequenceOracle<double>(model, o).encode(base, real),
                              b = SequenceOracle<double>(model, o).encode(other, real);
    std::vector<int64_t> moved;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t v = 0; v < 32; ++v)
        if (a[static_cast<size_t>(r * 32 + v)] != b[static_cast<size_t>(r * 32 + v)]) {
          moved.push_back(r);
          break;
        }
    return moved;
  };
  EXPECT_EQ(rows_moved(m, p), (std::vector<int64_t>{4, 5, 6, 7}));  // rows p - 1 (a = 1 after it) .. p + 2 (r = 2 before)
  std::vector<bool> real(n, true);
  real[p] = false;
  EXPECT_EQ(rows_moved(m, p, real), (std::vector<int64_t>{p}));  // a padding key: its own row only
  OracleOptions wider;
  wider.reach_delta = 1;
  EXPECT_EQ(rows_moved(m, p, {}, wider), (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
  OracleOptions causal;
  causal.causal = true;
  EXPECT_EQ(rows_moved(m, p, {}, causal), (std::vector<int64_t>{5, 6, 7}));
  Model full = m;
  full.config.windows = {0};
  EXPECT_EQ(rows_moved(full, p).size(), static_cast<size_t>(n));
  EXPECT_THROW(SequenceOracle<double>(m).extend(base), std::invalid_argument);  // no incremental forward
  std::vector<bool> none(n, false);
  EXPECT_THROW(SequenceOracle<double>(m).encode(base, none), std::invalid_argument);  // no real key at all
}

// An encoder-decoder (ModelConfig::encoder): each decoder position cross-attends every real source position, however far
// (no window on the cross-attention, a sliding self-attention beside it), and no padding one; the cross_window mutant
// (a sliding cache of the encoder's output: only the last window of the source) leaves a change at the source's start
// unseen; the decoder needs its source first.
TEST(ModelOracle, AnEncoderDecodersPositionsCrossAttendEveryRealSourcePosition) {
  Model m = random_model(Family::Gemma2, {3}, 3, 9);
  m.config.norm_placement = NormPlacement::Sandwich;  // t5gemma's decoder layer: cross-attention sits in the sandwich
  const Model encoder_model = random_model(Family::Gemma2, {2}, 2, 11);
  auto encoder = std::make_shared<Model>(encoder_model);
  ModelConfig& e = encoder->config;
  e.bidirectional = e.hidden_output = true;
  e.reach_before = e.reach_after = {2};
  m.config.cross_width = e.hidden;
  m.config.encoder = std::make_shared<const ModelConfig>(e);
  m.encoder = encoder;
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal(0, 0.5);
  const ModelConfig& c = m.config;
  for (const auto& [name, size] :
       std::vector<std::pair<std::string, int64_t>>{{"cross_attn.q_proj.weight", c.heads * c.head_dim * c.hidden},
                                                    {"cross_attn.k_proj.weight", c.kv_heads * c.head_dim * e.hidden},
                                                    {"cross_attn.v_proj.weight", c.kv_heads * c.head_dim * e.hidden},
                                                    {"cross_attn.o_proj.weight", c.hidden * c.heads * c.head_dim},
                                                    {"pre_cross_attn_layernorm.weight", c.hidden},
                                                    {"post_cross_attn_layernorm.weight", c.hidden}}) {
    auto& v = m.tensors["model.layers.0." + name];
    v.resize(static_cast<size_t>(size));
    for (double& x : v) x = normal(rng);
  }
  const int64_t S = 10, n = 6;
  const std::vector<int32_t> source = tokens(S, 5), target = tokens(n, 6);
  // Which decoder rows move when source position `changed` changes.
  auto rows_moved = [&](int64_t changed, const std::vector<bool>& real = {}, OracleOptions o = {}) {
    std::vector<int32_t> other = source;
    other[static_cast<size_t>(changed)] = (other[static_cast<size_t>(changed)] + 1) % 32;
    SequenceOracle<double> a(m, o), b(m, o);
    a.set_source(source, real);
    b.set_source(other, real);
    const std::vector<double> x = a.extend(target), y = b.extend(target);
    int64_t moved = 0;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t v = 0; v < 32; ++v)
        if (x[static_cast<size_t>(r * 32 + v)] != y[static_cast<size_t>(r * 32 + v)]) {
          ++moved;
          break;
        }
    return moved;
  };
  EXPECT_EQ(rows_moved(0), n);      // the source's first token reaches every decoder position
  EXPECT_EQ(rows_moved(S - 1), n);  // and its last
  std::vector<bool> real(S, true);
  real[0] = false;
  EXPECT_EQ(rows_moved(0, real), 0);  // a padding source position: seen by no query (its encoder row alone moves)
  OracleOptions cross_window;
  cross_window.cross_window = true;
  EXPECT_EQ(rows_moved(0, {}, cross_window), 0);  // source 0 reaches encoder rows 0..2 only, outside the last 3
  EXPECT_EQ(rows_moved(S - 1, {}, cross_window), n);
  EXPECT_THROW(SequenceOracle<double>(m).extend(target), std::invalid_argument);  // no source set
}

// t5gemma2: the decoder's merged cross-attention and (tied) shared embedding, the encoder's text stack under
// encoder.text_config with its split reach ((w + 1) / 2 - 1 keys before, w / 2 after), and refusals naming their keys:
// an attn_logit_softcapping its attention never applies, an eoi token inside the vocabulary.
TEST(ModelConfig, ReadsT5Gemma2sMergedCrossAttentionAndSplitReach) {
  const nlohmann::json stack = {
      {"vocab_size", 32},       {"hidden_size", 16},
      {"num_hidden_layers", 3}, {"num_attention_heads", 2},
      {"intermediate_size", 8}, {"head_dim", 8},
      {"sliding_window", 4},    {"layer_types", {"sliding_attention", "sliding_attention", "full_attention"}}};
  nlohmann::json text = stack, decoder = stack;
  text["model_type"] = "t5gemma2_text";
  decoder["model_type"] = "t5gemma2_decoder";
  nlohmann::json c = {{"model_type", "t5gemma2"},
                      {"eoi_token_index", 256000},
                      {"encoder", {{"model_type", "t5gemma2_encoder"}, {"text_config", text}}},
                      {"decoder", decoder}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_TRUE(m.merged_cross_attention);
  EXPECT_EQ(m.shared_embedding, "model.encoder.embed_tokens.weight");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{4, 4, 0}));
  ASSERT_TRUE(m.encoder);
  EXPECT_FALSE(m.encoder->merged_cross_attention);
  EXPECT_EQ(m.encoder->reach_before, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(m.encoder->reach_after, (std::vector<int64_t>{2, 2, 0}));
  EXPECT_TRUE(m.qk_norm);
  c["tie_word_embeddings"] = false;  // untied: each stack its own embedding (the decoder config's own tie not read)
  EXPECT_EQ(parse_config(c, "c.json").shared_embedding, "");
  auto refusal = [](const nlohmann::json& config) {
    try {
      parse_config(config, "c.json");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json capped = c;  // stored, never applied by T5Gemma2's attention: read as no soft-cap
  capped["decoder"]["attn_logit_softcapping"] = 50.0;
  EXPECT_EQ(parse_config(capped, "c.json").attn_softcap, 0);
  nlohmann::json eoi = c;
  eoi["encoder"]["eoi_token_index"] = 31;
  EXPECT_NE(refusal(eoi).find("eoi_token_index"), std::string::npos);
}

// modernbert-decoder: layer i full iff i % global_attn_every_n_layers == 0 (layer 0 full), a window of
// local_attention // 2, the head size from the heads, and a refusal where the releases' rope bases differ.
TEST(ModelConfig, ReadsModernBertDecodersPatternHalfWindowAndRefusesUnequalRopeBases) {
  nlohmann::json c = {{"model_type", "modernbert-decoder"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 2},
                      {"intermediate_size", 8},
                      {"local_attention", 7},
                      {"global_rope_theta", 1e4},
                      {"local_rope_theta", 1e4}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{0, 3, 3, 0}));
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_TRUE(m.layer_norm && m.embed_norm && m.lm_head_bias && m.tied && m.gelu && m.gelu_exact);
  EXPECT_EQ(m.prediction_head, PredictionHead::ModernBert);
  EXPECT_FALSE(m.norm_bias || m.mlp_bias || m.qkv_bias || m.head_dense_bias);
  EXPECT_EQ(m.eps, 1e-5);
  c["local_rope_theta"] = 160000.0;
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);  // 4.x and 5.x rotate the sliding layers apart
  c["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(parse_config(c, "c.json").windows, (std::vector<int64_t>(4, 0)));  // no sliding layer: no difference
  c["head_dim"] = 4;
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// kolibri1: every fifth layer full, rope on the sliding ones only (every layer where sliding_window is null: then
// every layer is full); every layer a MoE chosen by router logit + bias (not score + bias), not renormalised by
// default, an ungated shared expert; no intermediate_size; the experts' count under num_local_experts or num_experts.
TEST(ModelConfig, ReadsKolibri1sPatternNoPEFullLayersAndLogitSelection) {
  nlohmann::json c = {{"model_type", "kolibri1"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 6},
                      {"num_attention_heads", 4},
                      {"head_dim", 8},
                      {"sliding_window", 3},
                      {"num_local_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"moe_intermediate_size", 8},
                      {"shared_expert_intermediate_size", 12}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 3, 3, 3, 0, 3}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, true, true, true, false, true}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(6, true)));
  EXPECT_TRUE(m.qk_norm && m.moe.selection_bias && m.moe.select_logits && m.moe.stacked_experts);
  EXPECT_FALSE(m.moe.renormalize || m.moe.shared_gate || m.tied);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.moe.score, MoeScore::Sigmoid);
  EXPECT_EQ(m.moe.experts, 4);
  EXPECT_EQ(m.moe.shared_intermediate, 12);
  c.erase("num_local_experts");
  c["num_experts"] = 6;
  c["sliding_window"] = nullptr;
  c["layer_types"] = std::vector<std::string>(6, "full_attention");
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.moe.experts, 6);
  EXPECT_EQ(m.windows, (std::vector<int64_t>(6, 0)));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>(6, true)));
}

// laguna: every layer full by default, rope on every layer with a base and a partial factor per layer type (default
// full 5e5 rotating half of a head, sliding 1e4 all of it); the softplus gate per head unless gating says per element;
// the first layer dense by default; the router's logits soft-capped; a head count per layer refused unless uniform.
TEST(ModelConfig, ReadsLagunasRotaryPerLayerTypeSoftplusGateAndRouterSoftcap) {
  nlohmann::json c = {{"model_type", "laguna"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 3},
                      {"num_attention_heads", 4},
                      {"head_dim", 8},
                      {"intermediate_size", 24},
                      {"num_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"moe_intermediate_size", 8},
                      {"shared_expert_intermediate_size", 12},
                      {"moe_router_logit_softcapping", 1.5}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>(3, 0)));
  EXPECT_EQ(m.rotary_dims, (std::vector<int64_t>(3, 4)));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>(3, 500000.0)));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, true}));
  EXPECT_TRUE(m.attn_gate && m.attn_gate_softplus && m.qk_norm && m.moe.selection_bias && m.moe.renormalize);
  EXPECT_FALSE(m.attn_gate_elementwise);
  EXPECT_EQ(m.moe.router_softcap, 1.5);
  EXPECT_EQ(m.moe.shared_intermediate, 12);
  c["sliding_window"] = 3;
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  c["gating"] = "per-element";
  c["mlp_layer_types"] = {"sparse", "dense", "sparse"};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3}));
  EXPECT_EQ(m.rotary_dims, (std::vector<int64_t>{8, 4, 8}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{10000.0, 500000.0, 10000.0}));
  EXPECT_TRUE(m.attn_gate_elementwise);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{true, false, true}));
  c["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.25}}},
                          {"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.rotary_dims, (std::vector<int64_t>{2, 8, 2}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{10000.0, 1e6, 10000.0}));
  c["num_attention_heads_per_layer"] = {4, 2, 4};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["num_attention_heads_per_layer"] = {4, 4, 4};
  EXPECT_NO_THROW(parse_config(c, "c.json"));
}

// neomme: an encoder; without layer_types every sixth layer and the last full; without per_layer_config the sliding
// layers alternate sliding_window and 1024 (NeoMMEConfig.__post_init__), with one a layer missing from it reads the
// top-level sliding_window (a full layer too, as the class's mask builder does), and null there is no window; the rope
// per type (full: 1e6 on a quarter of each head); value embeddings on the first and last full layers.
TEST(ModelConfig, ReadsNeoMMEsPerLayerWindowsRopeAndRules) {
  nlohmann::json c = {{"model_type", "neomme"},   {"vocab_size", 32},         {"hidden_size", 16}, {"num_hidden_layers", 7},
                      {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 16},    {"intermediate_size", 8},
                      {"sliding_window", 3},      {"embedding_rank", 4}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_TRUE(m.bidirectional && m.norms_weightless && m.initial_mix && m.exclusive_attention && m.attn_gate_elementwise &&
              m.relu2 && m.mlp_ungated && m.tied);
  EXPECT_EQ(m.embedding_rank, 4);
  EXPECT_EQ(m.reach_before, (std::vector<int64_t>{3, 1024, 3, 1024, 3, 0, 0}));  // S S S S S F F
  EXPECT_EQ(m.reach_after, m.reach_before);
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 1e4, 1e4, 1e4, 1e4, 1e6, 1e6}));
  EXPECT_EQ(m.rotary_dims, (std::vector<int64_t>{16, 16, 16, 16, 16, 4, 4}));
  EXPECT_EQ(m.value_embed_layers, (std::vector<bool>{false, false, false, false, false, true, true}));
  EXPECT_DOUBLE_EQ(m.residual_scale, std::pow(14.0, -0.5));
  c["per_layer_config"] = {{"1", {{"sliding_window", 2}}}, {"6", {{"sliding_window", nullptr}}}};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.reach_before, (std::vector<int64_t>{3, 2, 3, 3, 3, 3, 0}));
  c["per_layer_config"] = {{"1", {{"head_dim", 8}}}};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c.erase("per_layer_config");
  c["hidden_act"] = "silu";
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// embedding_gemma2_text: an encoder; without layer_types every sliding_window_pattern-th layer full and the last forced
// full; full layers global_head_dim wide with num_global_key_value_heads (or per_layer_config's entries, as transformers
// saves them); the output is embedding_dim wide, with per-layer inputs of hidden_size_per_layer_input.
TEST(ModelConfig, ReadsEmbeddingGemma2sPatternPerLayerShapesAndOutputWidth) {
  nlohmann::json c = {{"model_type", "embedding_gemma2_text"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 2},
                      {"num_key_value_heads", 2},
                      {"head_dim", 8},
                      {"intermediate_size", 8},
                      {"sliding_window", 3},
                      {"sliding_window_pattern", 3},
                      {"global_head_dim", 16},
                      {"hidden_size_per_layer_input", 4},
                      {"embedding_dim", 6}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_TRUE(m.bidirectional && m.qk_norm && m.v_norm && m.layer_scalar && m.gelu && !m.gemma_norm);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{4, 4, 0, 0}));  // S, S, F, and the last forced full
  EXPECT_EQ(m.reach_before, (std::vector<int64_t>{3, 3, 0, 0}));
  EXPECT_EQ(m.reach_after, m.reach_before);
  EXPECT_EQ(m.head_dims, (std::vector<int64_t>{8, 8, 16, 16}));
  EXPECT_EQ(m.layer_kv_heads, (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 1e4, 1e6, 1e6}));
  EXPECT_EQ(m.outputs, 6);
  EXPECT_EQ(m.out_width(), 6);
  EXPECT_EQ(m.per_layer_input, 4);
  EXPECT_EQ(m.query_scale, 1.0);
  c["per_layer_config"] = {{"2", {{"head_dim", 12}, {"num_key_value_heads", 2}}}, {"3", {{"head_dim", 12}}}};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.head_dims, (std::vector<int64_t>{8, 8, 12, 12}));  // per_layer_config wins over global_head_dim
  EXPECT_EQ(m.layer_kv_heads, (std::vector<int64_t>{2, 2, 2, 2}));
  c["per_layer_config"]["3"]["head_dim"] = 10;  // two full layers, one rope: refused
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["per_layer_config"]["3"] = {{"sliding_window", 2}};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c.erase("per_layer_config");
  c["rope_scaling"] = nullptr;
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// openai_privacy_filter: an encoder sliding on every layer (sliding_window keys each side), gpt_oss's MoE with gate and
// up the halves of gate_up_proj, interleaved rope, YaRN by default, num_labels outputs with a bias.
TEST(ModelConfig, ReadsOpenAIPrivacyFiltersEveryLayerSlidingDefaultYarnAndLabels) {
  nlohmann::json c = {{"model_type", "openai_privacy_filter"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 3},
                      {"num_attention_heads", 4},
                      {"head_dim", 4},
                      {"intermediate_size", 8},
                      {"sliding_window", 2},
                      {"num_local_experts", 4},
                      {"num_experts_per_tok", 2}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_TRUE(m.bidirectional && m.sinks && m.qkv_bias && m.o_bias && m.rope_interleaved && m.lm_head_bias);
  EXPECT_EQ(m.windows, (std::vector<int64_t>(3, 3)));
  EXPECT_EQ(m.reach_before, (std::vector<int64_t>(3, 2)));
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.eps, 1e-5);
  EXPECT_EQ(m.rope_theta, 150000);
  EXPECT_EQ(m.yarn.factor, 32);
  EXPECT_FALSE(m.yarn.truncate);
  EXPECT_EQ(m.moe.routing, MoeRouting::GptOss);
  EXPECT_TRUE(m.moe.gate_up_halves);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(3, true)));
  EXPECT_EQ(m.outputs, 33);  // the privacy labels
  c["id2label"] = {{"0", "O"}, {"1", "S-secret"}};
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.outputs, 2);
  EXPECT_EQ(m.yarn.factor, 0);
  EXPECT_EQ(m.rope_theta, 1e4);
  c["swiglu_limit"] = 5.0;  // 5.13.1 hard-codes 7
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// step3p7's text_config: the sliding layers' own head count (and its legacy spelling, and a saved per_layer_config), the
// rope per layer type from per-layer lists (each type its first layer's), the SwiGLU bounds per layer, the multi-token-
// prediction entries cut, and the head tied by the outer config alone.
TEST(ModelConfig, ReadsStep3p7sHeadsPerLayerTypeRopeListsAndSwigluBounds) {
  nlohmann::json text = {{"model_type", "step3p5"},
                         {"vocab_size", 32},
                         {"hidden_size", 16},
                         {"num_hidden_layers", 3},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 8},
                         {"intermediate_size", 24},
                         {"sliding_window", 3},
                         {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
                         {"num_sliding_attention_heads", 2},
                         {"rope_theta", {1e4, 5e5, 2e4}},
                         {"partial_rotary_factors", {1.0, 0.5, 0.25}},
                         {"n_routed_experts", 4},
                         {"num_experts_per_tok", 2},
                         {"moe_intermediate_size", 8},
                         {"share_expert_dim", 12},
                         {"swiglu_limits", {0, nullptr, 7.0}},
                         {"swiglu_limits_shared", {2.5, 0, nullptr}}};
  nlohmann::json c = {{"model_type", "step3p7"}, {"text_config", text}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.layer_heads, (std::vector<int64_t>{2, 4, 2}));
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 5e5, 1e4}));  // each type its first layer's
  EXPECT_EQ(m.rotary_dims, (std::vector<int64_t>{8, 4, 8}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>(3, false)));  // no mlp_layer_types: sparse from layer 3 on
  EXPECT_EQ(m.moe.expert_limits, (std::vector<double>{0, 0, 7.0}));
  EXPECT_EQ(m.mlp_limits, (std::vector<double>{2.5, 0, 0}));
  EXPECT_TRUE(m.gemma_norm && m.qk_norm && m.attn_gate && !m.attn_gate_elementwise && !m.attn_gate_softplus);
  EXPECT_FALSE(m.tied);
  EXPECT_DOUBLE_EQ(m.query_scale, std::pow(8.0, -0.5));
  EXPECT_EQ(m.text_prefix, "model.language_model.");
  c["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_config(c, "c.json").tied);
  c["text_config"]["tie_word_embeddings"] = true;  // the class reads no text_config tie
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["text_config"] = text;
  // The legacy spellings, a multi-token-prediction layer's trailing entries, and a saved per_layer_config.
  c["text_config"].erase("num_sliding_attention_heads");
  c["text_config"].erase("num_key_value_heads");
  c["text_config"]["num_attention_groups"] = 1;
  c["text_config"]["attention_other_setting"] = {{"num_attention_heads", 8}};
  c["text_config"]["num_nextn_predict_layers"] = 1;
  c["text_config"]["layer_types"].push_back("sliding_attention");
  c["text_config"]["swiglu_limits"].push_back(3.0);
  c["text_config"]["moe_layers_enum"] = "1,2,3";
  c["text_config"]["query_pre_attn_scalar"] = 32;
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.kv_heads, 1);
  EXPECT_EQ(m.layer_heads, (std::vector<int64_t>{8, 4, 8}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(m.moe.expert_limits, (std::vector<double>{0, 0, 7.0}));
  EXPECT_DOUBLE_EQ(m.query_scale, std::pow(32.0, -0.5));
  c["text_config"]["per_layer_config"] = {{"1", {{"num_attention_heads", 2}}}};  // replaces the derived counts
  EXPECT_EQ(parse_config(c, "c.json").layer_heads, (std::vector<int64_t>{4, 2, 4}));
  c["text_config"]["per_layer_config"] = {{"1", {{"head_dim", 4}}}};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["text_config"] = text;
  c["text_config"]["num_sliding_attention_heads"] = 3;  // not a multiple of the KV heads
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["text_config"] = text;
  c["text_config"]["gating"] = "per-element";  // the class's broadcast fails on it
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
  c["text_config"] = text;
  c["text_config"]["swiglu_limits"] = {1.0, -1.0, 0};
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// ergo: relu2 MLPs without a gate, the experts' and the shared expert's output norms, residual gates, the rope of the
// sliding layers only from a flat rope_parameters (the full ones NoPE), or per layer type where keyed.
TEST(ModelConfig, ReadsErgosUngatedRelu2MlpsNormsResidualGatesAndRope) {
  nlohmann::json c = {{"model_type", "ergo"},
                      {"vocab_size", 32},
                      {"hidden_size", 16},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"first_dense_intermediate_size", 24},
                      {"num_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"moe_intermediate_size", 8},
                      {"shared_intermediate_size", 12},
                      {"local_attention_window", 3},
                      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.head_dim, 4);
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 3, 3, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(m.intermediate, 24);
  EXPECT_TRUE(m.mlp_ungated && m.relu2 && m.residual_gates && m.moe.expert_norms && m.moe.shared_norm);
  EXPECT_TRUE(m.fused_projections && m.rope_interleaved && m.qk_norm && !m.tied);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_DOUBLE_EQ(m.moe.routed_scale, std::sqrt(8.0));
  EXPECT_EQ(m.eps, 1e-12);
  c["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
                          {"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}}};
  c["mlp_layer_types"] = {"sparse", "dense", "sparse", "sparse"};
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.rope_layers, (std::vector<bool>(4, true)));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 1e4, 1e4, 5e5}));
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{true, false, true, true}));
  for (const char* key : {"global_attention_scale", "tie_word_embeddings", "head_dim"}) {
    nlohmann::json bad = c;
    bad[key] = std::string(key) == "tie_word_embeddings" ? nlohmann::json(true) : nlohmann::json(8);
    EXPECT_THROW(parse_config(bad, "c.json"), std::invalid_argument) << key;
  }
}

// beam: every sixth layer and the last full by default, rope on the sliding layers only (the full layers NoPE with
// scaled queries), rope_parameters keyed by layer type (null: NoPE); the first three layers dense by default; the gate
// of every output element with a bias per head, the sandwich with the depth-scaled residual, the logit soft-cap.
TEST(ModelConfig, ReadsBeamsNoPEQueryScaleGateBiasAndDepthScaledResidual) {
  nlohmann::json c = {{"model_type", "beam"},     {"vocab_size", 32}, {"hidden_size", 16},       {"num_hidden_layers", 7},
                      {"num_attention_heads", 4}, {"head_dim", 8},    {"intermediate_size", 24}, {"num_experts", 8},
                      {"num_experts_per_tok", 3}, {"n_group", 4},     {"topk_group", 2},         {"moe_intermediate_size", 8},
                      {"sliding_window", 3}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 3, 3, 3, 3, 0, 0}));
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{true, true, true, true, true, false, false}));
  EXPECT_EQ(m.rope_thetas[0], 10000.0);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{false, false, false, true, true, true, true}));
  EXPECT_TRUE(m.attn_gate && m.attn_gate_elementwise && m.attn_gate_bias && m.depth_scaled_residual && m.qk_norm);
  EXPECT_TRUE(m.moe.selection_bias && m.moe.renormalize && m.moe.stacked_experts);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.nope_query_length, 2048);
  EXPECT_EQ(m.nope_query_power, 0.1);
  EXPECT_EQ(m.moe.routed_scale, 2.5);
  EXPECT_EQ(m.moe.shared_intermediate, 0);
  EXPECT_EQ(m.final_softcap, 30.0);
  EXPECT_FALSE(m.tied || m.qkv_bias);
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  c["mlp_layer_types"] = {"sparse", "dense", "sparse"};
  c["rope_parameters"] = {{"sliding_attention", nullptr}, {"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e5}}}};
  c["final_logit_softcapping"] = nullptr;
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.rope_layers, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(m.rope_thetas[1], 5e5);
  EXPECT_EQ(m.moe.layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(m.final_softcap, 0);
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};  // flat: the class reads it by layer type
  EXPECT_THROW(parse_config(c, "c.json"), std::invalid_argument);
}

// dory: the saved (attention, "mlp") block pairs halved, the looped section unrolled (a layer per pass, its window and
// rope base its checkpoint layer's, each pass's first layer an entry), the nGPT constants from initializer_range, and
// last_loop refused naming the key and its value.
TEST(ModelConfig, ReadsDorysLoopUnrolledAndItsNgptScales) {
  const std::string S = "sliding_attention", F = "full_attention";
  nlohmann::json c = {
      {"model_type", "dory"},
      {"vocab_size", 32},
      {"hidden_size", 16},
      {"intermediate_size", 24},
      {"num_hidden_layers", 8},
      {"num_attention_heads", 2},
      {"num_key_value_heads", 1},
      {"head_dim", 4},
      {"sliding_window", 3},
      {"layer_types", {S, "mlp", F, "mlp", S, "mlp", S, "mlp"}},
      {"n_input_layers", 2},
      {"n_recurrent_layers", 4},
      {"n_output_layers", 2},
      {"n_recurrent_loops", 3},
      {"initializer_range", 0.05},
      {"rope_parameters",
       {{S, {{"rope_type", "default"}, {"rope_theta", 1e4}}}, {F, {{"rope_type", "default"}, {"rope_theta", 5e5}}}}}};
  ModelConfig m = parse_config(c, "c.json");
  EXPECT_EQ(m.layers, 1 + 2 * 3 + 1);
  EXPECT_EQ(m.layer_weights, (std::vector<int64_t>{0, 1, 2, 1, 2, 1, 2, 3}));
  EXPECT_EQ(m.loop_entries, (std::vector<bool>{false, true, false, true, false, true, false, false}));
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 0, 3, 0, 3, 0, 3, 3}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 5e5, 1e4, 5e5, 1e4, 5e5, 1e4, 1e4}));
  EXPECT_TRUE(m.l2_norm && m.qk_norm && m.qk_norm_weightless && m.attn_gate_elementwise && m.attn_sub_norm && m.mlp_sub_norm);
  EXPECT_EQ(m.norm_placement, NormPlacement::Sandwich);
  EXPECT_EQ(m.eps, 1e-6);
  EXPECT_DOUBLE_EQ(m.residual_interpolation, 0.05 / 0.05);
  EXPECT_DOUBLE_EQ(m.query_channel_scale, 2 / 0.05);
  EXPECT_DOUBLE_EQ(m.attn_gate_scale, 2 / 0.05);
  EXPECT_DOUBLE_EQ(m.mlp_channel_scale, 4);
  EXPECT_DOUBLE_EQ(m.logit_channel_scale, 1 / 0.05);
  EXPECT_DOUBLE_EQ(m.query_scale, 0.5);
  // The plain layout, the defaults: full iff (i + 1) % 4 == 0, sliding 1e4 and full 1e7, the looped section the rest.
  for (const char* key : {"layer_types", "n_recurrent_layers", "rope_parameters", "n_recurrent_loops"}) c.erase(key);
  c["num_hidden_layers"] = 4, c["n_input_layers"] = 1, c["n_output_layers"] = 0;
  m = parse_config(c, "c.json");
  EXPECT_EQ(m.layer_weights, (std::vector<int64_t>{0, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(m.loop_entries, (std::vector<bool>{false, true, false, false, true, false, false}));
  EXPECT_EQ(m.windows, (std::vector<int64_t>{3, 3, 3, 0, 3, 3, 0}));
  EXPECT_EQ(m.rope_thetas, (std::vector<double>{1e4, 1e4, 1e4, 1e7, 1e4, 1e4, 1e7}));
  nlohmann::json last = c;
  last["recurrent_kv_cache_mode"] = "last_loop";
  try {
    parse_config(last, "c.json");
    ADD_FAILURE() << "last_loop was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent_kv_cache_mode"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last_loop"), std::string::npos) << e.what();
  }
  nlohmann::json none = c;
  none["n_recurrent_layers"] = 0, none["n_output_layers"] = 3;  // no looped layer
  EXPECT_THROW(parse_config(none, "c.json"), std::invalid_argument);
  nlohmann::json flat = c;
  flat["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}};  // the rotary module reads it by type
  EXPECT_THROW(parse_config(flat, "c.json"), std::invalid_argument);
}

TEST(Plans, RoundTripThroughJsonAndNameTheBadField) {
  for (const Plan& p : fixed_plans("m", 4, 32)) {
    EXPECT_EQ(invalid_reason(p, 32), "") << p.name;
    const Plan q = plan_from_json(to_json(p), "p.json");
    EXPECT_EQ(to_json(q), to_json(p));
  }
  const auto long_run = fixed_plans("m", 2, 32);
  const auto it = std::find_if(long_run.begin(), long_run.end(), [](const Plan& p) { return p.name == "long_run"; });
  ASSERT_NE(it, long_run.end());
  EXPECT_GE(max_tokens(*it), 600);
  nlohmann::json bad = to_json(long_run.front());
  bad["steps"][0]["op"] = "rewind";
  try {
    plan_from_json(bad, "p.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: /steps/0/op"), std::string::npos) << e.what();
  }
  Plan p{"x", "m", {}};
  p.steps.push_back(Rollback{0, 1});
  EXPECT_NE(invalid_reason(p, 32).find("rollback by 1 of a sequence of 0"), std::string::npos);
}

// Records what an oracle variant says for a plan, as if an engine had answered it.
Recorded record(const Model& m, const Plan& plan, OracleOptions o) {
  Recorded r;
  std::map<int64_t, std::unique_ptr<SequenceOracle<double>>> seqs;
  auto seq = [&](int64_t s) -> SequenceOracle<double>& {
    auto& slot = seqs[s];
    if (!slot) slot = std::make_unique<SequenceOracle<double>>(m, o);
    return *slot;
  };
  for (const PlanStep& s : plan.steps) {
    r.logits.emplace_back();
    if (const Extend* e = s.as<Extend>()) {
      const auto l = seq(e->seq).extend(e->tokens);
      r.logits.back().assign(l.begin(), l.end());
    }
    if (const Rollback* b = s.as<Rollback>()) seq(b->seq).truncate(b->drop);
  }
  return r;
}

TEST(Diagnose, NamesTheChunkThatExplainsTheLogits) {
  Model m = random_model(Family::Mistral, {0, 0}, 0);
  m.config.chunks = {4, 0};
  m.config.chunk_size = 4;
  const Plan plan{"p", "test", {PlanStep{Extend{0, tokens(13)}}}};
  auto with = [](std::vector<int64_t> c, std::vector<int64_t> w = {0, 0}) {
    OracleOptions o;
    o.chunks = c;
    o.windows = w;
    return o;
  };
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({5, 0})), 1e-3)),
            "consistent with a chunk of C+1 on the chunked layers");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({3, 0})), 1e-3)),
            "consistent with a chunk of C-1 on the chunked layers");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({0, 0})), 1e-3)),
            "consistent with full attention on the chunked layers");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({0, 0}, {4, 0})), 1e-3)),
            "consistent with a sliding window of C on the chunked layers instead of chunks");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, {}), 1e-3)), "");
}

TEST(Diagnose, NamesTheWindowThatExplainsTheLogits) {
  const Model m = random_model(Family::Gemma2, {4, 0, 4}, 4);
  const Plan plan{"p", "test", {PlanStep{Extend{0, tokens(13)}}, PlanStep{Extend{0, tokens(3, 2)}}}};
  auto with = [](std::vector<int64_t> w) {
    OracleOptions o;
    o.windows = w;
    return o;
  };
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({5, 0, 5})), 1e-3)),
            "consistent with a window of W+1 on the sliding layers (one key too many)");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({3, 0, 3})), 1e-3)),
            "consistent with a window of W-1 on the sliding layers (one key too few)");
  // A plan no longer than W+1 cannot tell W+1 from full attention: both are named.
  const Plan short_plan{"p", "test", {PlanStep{Extend{0, tokens(5)}}}};
  EXPECT_EQ(
      explain(diagnose(m, short_plan, record(m, short_plan, with({5, 0, 5})), 1e-3)),
      "consistent with a window of W+1 on the sliding layers (one key too many) or with full attention on the sliding layers");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({0, 0, 0})), 1e-3)),
            "consistent with full attention on the sliding layers");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({4, 4, 4})), 1e-3)),
            "consistent with the sliding window applied to the full-attention layers too");
  EXPECT_EQ(explain(diagnose(m, plan, record(m, plan, with({4, 0, 4})), 1e-3)), "");  // the truth is no deviation
  Plan roll = plan;
  roll.steps.insert(roll.steps.begin() + 1, PlanStep{Rollback{0, 2}});
  // After the rollback to 11, the sliding layers lost key 8 (they kept W - 1 = 3 rows, 2 of them rolled back).
  Recorded lost = record(m, roll, {});
  {
    SequenceOracle<double> o(m);
    o.extend(roll.steps[0].as<Extend>()->tokens);
    o.truncate(2);
    o.forget_before(9);
    const auto l = o.extend(roll.steps[2].as<Extend>()->tokens);
    lost.logits[2].assign(l.begin(), l.end());
  }
  const std::vector<Diagnosis> why = diagnose(m, roll, lost, 1e-3);
  // The loss shows at position 11 alone (its key 8): one eviction off by one there fits too.
  ASSERT_EQ(why.size(), 2u) << explain(why);
  EXPECT_EQ(why[0].id(), "lost_keys(before=9,from=11,op=rollback,step=1,wants=8)");
  EXPECT_EQ(why[1].id(), "eviction_off_by_one(delta=-1,position=11,seq=0)");
  EXPECT_NE(
      explain(why).find("rollback at step 1 losing keys: from position 11 on, the sliding layers see no key before position 9"),
      std::string::npos)
      << explain(why);
}

// Each hypothesis of the new features is named for the oracle variant it stands for (the recorded
// logits are that variant's, as if an engine computed them), by its typed value and its sentence.
std::string named(const Model& m, const Plan& plan, const Recorded& rec) {
  std::string ids;
  for (const Diagnosis& d : diagnose(m, plan, rec, 1e-3)) ids += (ids.empty() ? "" : " | ") + d.id();
  return ids;
}

TEST(Diagnose, NamesEachConfigReadWrong) {
  const Plan plan{"p", "test", {PlanStep{Extend{0, tokens(13)}}, PlanStep{Extend{0, tokens(3, 2)}}}};
  auto opts = [](auto f) {
    OracleOptions o;
    f(o);
    return o;
  };
  // A config read another way: what the model of the other config computes.
  auto read_as = [](Model m, auto edit) {
    edit(m.config);
    return m;
  };
  const Model g2 = random_model(Family::Gemma2, {4, 0, 4}, 4);
  EXPECT_EQ(named(g2, plan, record(read_as(g2, [](ModelConfig& k) { k.attn_softcap = 0; }), plan, {})),
            "softcap_dropped(which=attention)");
  EXPECT_EQ(named(g2, plan, record(read_as(g2, [](ModelConfig& k) { k.final_softcap = 0; }), plan, {})),
            "softcap_dropped(which=final)");
  EXPECT_EQ(named(g2, plan, record(read_as(g2, [](ModelConfig& k) { k.attn_softcap = k.final_softcap = 0; }), plan, {})),
            "softcap_dropped(which=both)");
  EXPECT_EQ(named(g2, plan, record(g2, plan, opts([](OracleOptions& o) { o.kv_bf16 = true; }))),
            "kv_rounded(precision=bfloat16)");
  EXPECT_EQ(named(g2, plan, record(g2, plan, opts([](OracleOptions& o) { o.windows = {0, 4, 0}; }))), "layer_types_swapped");
  EXPECT_EQ(named(g2, plan, record(g2, plan, opts([](OracleOptions& o) {
                                     o.windows = {4, 0, 4}, o.chunks = {4, 0, 4};
                                   }))),
            "sliding_as_chunked");
  EXPECT_EQ(named(g2, plan, record(g2, plan, opts([](OracleOptions& o) { o.windows = {4, 4, 4}; }))), "window_on_every_layer");
  // A full layer keeping its last 9 keys first departs at position 9, which names the cap.
  const Plan past{"p", "test", {PlanStep{Extend{0, tokens(13)}}, PlanStep{Extend{0, tokens(4, 2)}}}};
  EXPECT_EQ(named(g2, past, record(g2, past, opts([](OracleOptions& o) {
                                     o.windows = {4, 9, 4};
                                   }))),
            "full_attention_capped(keys=9)");
  // One eviction late (position 6 sees W+1 keys) is not a window of W+1: the positions after it tell.
  const Recorded late = record(g2, plan, opts([](OracleOptions& o) { o.window_delta_position = 6, o.window_delta = 1; }));
  EXPECT_EQ(named(g2, plan, late), "eviction_off_by_one(delta=1,position=6,seq=0)");
  EXPECT_EQ(explain(diagnose(g2, plan, late, 1e-3)),
            "consistent with one eviction off by one: at position 6 alone the sliding layers see W+1 keys");
  // A glitch in one position's logits alone.
  Recorded glitch = record(g2, plan, {});
  glitch.logits[0][7 * 32 + 3] += 0.5f;
  EXPECT_EQ(named(g2, plan, glitch), "position_glitch(position=7,seq=0)");
  // ... but not at the last position, where nothing after it could tell it from anything else.
  Recorded last = record(g2, plan, {});
  last.logits[1][2 * 32 + 3] += 0.5f;
  EXPECT_EQ(named(g2, plan, last), "");

  const Model g3 = random_model(Family::Gemma3, {4, 0, 4}, 4);
  EXPECT_EQ(named(g3, plan, record(read_as(g3, [](ModelConfig& k) { k.rope_local_theta = 1e6; }), plan, {})),
            "rope_base(base=1000000.0,layer_type=sliding)");
  EXPECT_EQ(named(g3, plan, record(read_as(g3, [](ModelConfig& k) { k.rope_theta = 1e4; }), plan, {})),
            "rope_base(base=10000.0,layer_type=full)");

  Model nope = random_model(Family::Mistral, {4, 0, 4}, 4);
  nope.config.rope_layers = {true, true, false};
  EXPECT_EQ(named(nope, plan, record(read_as(nope, [](ModelConfig& k) { k.rope_layers.clear(); }), plan, {})), "nope_given_rope");
  EXPECT_EQ(named(nope, plan,
                  record(read_as(nope,
                                 [](ModelConfig& k) {
                                   k.rope_layers = {false, false, true};
                                 }),
                         plan, {})),
            "nope_inverted");

  Model sinks = random_model(Family::Mistral, {4, 0, 4}, 4);
  sinks.config.sinks = true;
  for (int64_t l = 0; l < 3; ++l)
    sinks.tensors["model.layers." + std::to_string(l) + ".self_attn.sinks"] = {1.5, -0.5, 2.0, 0.25};
  EXPECT_EQ(named(sinks, plan, record(read_as(sinks, [](ModelConfig& k) { k.sinks = false; }), plan, {})), "sinks_dropped");

  Model chunked = random_model(Family::Mistral, {0, 0}, 0);
  chunked.config.chunks = {4, 0};
  chunked.config.chunk_size = 4;
  EXPECT_EQ(named(chunked, plan, record(chunked, plan, opts([](OracleOptions& o) { o.chunk_shift = 1; }))),
            "chunk_boundaries_shifted(shift=1)");
  EXPECT_EQ(named(chunked, plan, record(chunked, plan, opts([](OracleOptions& o) {
                                          o.chunks = {8, 0};
                                        }))),
            "chunk_size(chunk=8,from=head_dim)");
  EXPECT_EQ(named(chunked, plan, record(chunked, plan, opts([](OracleOptions& o) {
                                          o.windows = {0, 0}, o.chunks = {0, 0};
                                        }))),
            "full_attention_on_chunked");
}

// The zoo's gemma2 model, written once for these tests by the project's generator into a folder
// removed when the test binary exits.
const std::string& gemma2_dir() {
  struct Folder {
    std::string path = (std::filesystem::temp_directory_path() / ("kvc-engine-test-" + std::to_string(getpid()))).string();
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  static const std::string dir = [] {
    const std::string cmd = "python3 " + std::string(kvc::paths::source_dir()) + "/engines/models/make_models.py " + folder.path +
                            " --only gemma2-w4 >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    return folder.path + "/gemma2-w4";
  }();
  return dir;
}

Plan plan_named(const std::string& name) {
  const Model m = load_model(gemma2_dir());
  for (const Plan& p : fixed_plans("gemma2-w4", m.config.sliding_window, m.config.vocab))
    if (p.name == name) return p;
  throw std::runtime_error("no plan " + name);
}

report::CaseResult run_oracle_engine(const Plan& plan, nlohmann::json options, const std::string& mutant = "none",
                                     EngineClient* reuse = nullptr) {
  EngineSpec spec{"oracle", kvc::paths::target_file("kvc-oracle-engine"), std::move(options), mutant, 5};
  EngineClient own(spec);
  EngineClient& client = reuse ? *reuse : own;
  return check_plan(client, load_model(gemma2_dir()), gemma2_dir(), plan, {});
}

TEST(EngineCheck, TheOracleEnginePassesAndEachMutantFailsWithItsDiagnosis) {
  const Plan plan = plan_named("extend_after_full");
  const auto ok = run_oracle_engine(plan, nlohmann::json::object());
  EXPECT_EQ(ok.status, report::Status::Pass) << ok.message;
  EXPECT_EQ(ok.policy, "same-dtype-reference");
  EXPECT_GT(ok.bound, 0);
  // The picture of the first failing position: a key used that the rule masks ('+'), or one the rule
  // allows left out ('-'), on the sliding layer.
  for (auto [mutant, diagnosis, cell] : {std::tuple{"window_off_by_one+1", "window of W+1", '+'},
                                         {"window_off_by_one-1", "window of W-1", '-'},
                                         {"full_attention_on_sliding", "full attention on the sliding", '+'}}) {
    const auto bad = run_oracle_engine(plan, nlohmann::json::object(), mutant);
    EXPECT_EQ(bad.status, report::Status::Fail) << mutant;
    EXPECT_NE(bad.message.find(diagnosis), std::string::npos) << bad.message;
    EXPECT_NE(bad.message.find("step "), std::string::npos) << bad.message;
    ASSERT_FALSE(bad.masks.empty()) << mutant;
    EXPECT_EQ(bad.masks[0].layer_type, "sliding_attention");
    EXPECT_NE(bad.masks[0].rows.at(0).find(cell), std::string::npos) << mutant << ": " << bad.masks[0].rows[0];
  }
}

// No plan of causal steps applies to an encoder or an encoder-decoder: a SKIP naming why, from one engine and from a
// pair of an engine's cache paths alike (the pair used to run the plan, and failed where the engine cannot).
TEST(EngineCheck, AnEncoderIsSkippedByTheEngineCheckAndByAPair) {
  const Plan plan = plan_named("extend_after_full");
  for (auto [encoder, why] : {std::pair{true, "an encoder ("}, {false, "an encoder-decoder ("}}) {
    Model m = load_model(gemma2_dir());
    if (encoder) m.config.bidirectional = true;
    else m.config.encoder = std::make_shared<const ModelConfig>(m.config);
    EngineClient a({"oracle", kvc::paths::target_file("kvc-oracle-engine"), nlohmann::json::object(), "none", 5});
    EngineClient b({"oracle", kvc::paths::target_file("kvc-oracle-engine"), nlohmann::json::object(), "none", 5});
    const auto one = check_plan(a, m, gemma2_dir(), plan, {});
    const auto pair = check_pair(a, b, "oracle-pair", m, gemma2_dir(), plan, {});
    for (const auto* r : {&one, &pair}) {
      EXPECT_EQ(r->status, report::Status::Skipped) << r->message;
      EXPECT_NE(r->message.find(why), std::string::npos) << r->message;
    }
  }
}

TEST(EngineCheck, AWorkerFaultIsThatCasesFailAndTheNextCaseGetsAFreshWorker) {
  const Plan plan = plan_named("prefill_gt_w");
  // abort@1: the assertion line scrolled out of the stderr tail by a long backtrace is still quoted.
  for (auto [fault, words] : {std::pair{"crash@1", "crashed: the worker was killed by SIGSEGV"},
                              {"exit@1", "exited with status 3"},
                              {"abort@1", "worker stderr: kvc-oracle-engine: ASSERT(fault != abort) failed at step 1 | ..."},
                              {"hang@1", "timed out after 5 s"},
                              {"garbage@1", "protocol error"},
                              {"ansi@1", "printed to stdout: '\\x1b[2m2026-12-06T21:51:42Z\\x1b[0m \\x1b[32m INFO"}}) {
    EngineSpec spec{"oracle", kvc::paths::target_file("kvc-oracle-engine"), {{"fault", fault}}, "none", 5};
    EngineClient client(spec);
    const auto bad = check_plan(client, load_model(gemma2_dir()), gemma2_dir(), plan, {});
    EXPECT_EQ(bad.status, report::Status::Fail) << fault;
    EXPECT_NE(bad.message.find("step 1 (extend seq 0"), std::string::npos) << bad.message;
    EXPECT_NE(bad.message.find(words), std::string::npos) << bad.message;
    // The same client, its worker restarted, passes the next case.
    client.stop();
    EngineSpec fine = spec;
    fine.options = nlohmann::json::object();
    EngineClient again(fine);
    EXPECT_EQ(check_plan(again, load_model(gemma2_dir()), gemma2_dir(), plan, {}).status, report::Status::Pass) << fault;
  }
}

// CheckOptions expecting one entry (the fields given; an exact engine, any model and plan by default).
CheckOptions expecting(expect::Expectation e) {
  if (e.pattern.empty()) e.pattern = "^engine/oracle/";
  e.file = "test.jsonc", e.line = 7, e.reason = "test";
  CheckOptions o;
  o.expectations = std::make_shared<expect::Set>();
  o.expectations->add({e});
  return o;
}

TEST(EngineCheck, AnExpectedFailureIsADeviationAndOnlyWithItsDiagnosis) {
  const Plan plan = plan_named("extend_after_full");
  const Model m = load_model(gemma2_dir());
  // The engine's own window of W+1 (the oracle engine's "deviate" option: the suite is not told).
  EngineClient own({"oracle", kvc::paths::target_file("kvc-oracle-engine"), {{"deviate", "window_off_by_one+1"}}, "none", 5});
  EngineClient plus1(
      {"oracle", kvc::paths::target_file("kvc-oracle-engine"), nlohmann::json::object(), "window_off_by_one+1", 5});
  auto known = [](std::string kind, nlohmann::json params = nlohmann::json::object()) {
    expect::Expectation e;
    e.pattern = "^engine/oracle/gemma2[^/]*/extend_after_full$";
    e.diagnosis = std::move(kind);
    e.params = std::move(params);
    return expecting(e);
  };
  const auto excused = check_plan(own, m, gemma2_dir(), plan, known("window_off_by_one", {{"delta", 1}}));
  EXPECT_EQ(excused.status, report::Status::Deviation) << excused.message;
  EXPECT_NE(excused.message.find("expected failure (test.jsonc:7: test): "), std::string::npos) << excused.message;
  EXPECT_NE(excused.message.find("[window_off_by_one(delta=1)]"), std::string::npos) << excused.message;
  EXPECT_EQ(excused.expectation.outcome, "expected_failure");
  EXPECT_EQ(excused.expectation.line, 7);
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, known("window_off_by_one")).status, report::Status::Deviation);
  // Another parameter, another kind, another plan: not this failure.
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, known("window_off_by_one", {{"delta", -1}})).status, report::Status::Fail);
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, known("full_attention_on_sliding")).status, report::Status::Fail);
  expect::Expectation other;
  other.pattern = "^engine/oracle/gemma2[^/]*/prefill_eq_w$";
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting(other)).status, report::Status::Fail);
  // Any logit failure; an entry with no qualifier: any failure.
  expect::Expectation logits;
  logits.any_logits = true;
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting(logits)).status, report::Status::Deviation);
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting({})).status, report::Status::Deviation);
  // Mutant runs are never excused.
  EXPECT_EQ(check_plan(plus1, m, gemma2_dir(), plan, known("window_off_by_one")).status, report::Status::Fail);
}

// An engine that refuses to load a config it should take: its known error text excuses the load's
// failure as its expected failure, another text does not, "failure": "logits" does not (no logits
// failed), and a mutant run is never excused.
TEST(EngineCheck, AnExpectedLoadErrorIsADeviation) {
  const Plan plan = plan_named("extend_after_full");
  const Model m = load_model(gemma2_dir());
  const nlohmann::json refuses = {{"fault", "load-error@99"}};
  auto known = [](const std::string& error) {
    expect::Expectation e;
    e.pattern = "^engine/oracle/gemma2";
    e.error = error;
    return expecting(e);
  };
  EngineClient own({"oracle", kvc::paths::target_file("kvc-oracle-engine"), refuses, "none", 5});
  const auto excused = check_plan(own, m, gemma2_dir(), plan, known("fewer than 99"));
  EXPECT_EQ(excused.status, report::Status::Deviation) << excused.message;
  EXPECT_NE(excused.message.find("expected failure (test.jsonc:7: test): load: ValueError: a model of"), std::string::npos)
      << excused.message;
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, known("KeyError")).status, report::Status::Fail);
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, {}).status, report::Status::Fail);
  expect::Expectation logits;
  logits.any_logits = true;
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting(logits)).status, report::Status::Fail);
  EngineClient told({"oracle", kvc::paths::target_file("kvc-oracle-engine"), refuses, "window_off_by_one+1", 5});
  EXPECT_EQ(check_plan(told, m, gemma2_dir(), plan, known("fewer than 99")).status, report::Status::Fail);
}

// A family's misreading is known on every model of that family, whatever its folder is called: the
// entry's "family" matches config.model_type (the copy below is named like no zoo model), another
// family's entry does not, and the case pattern still narrows to some folders.
TEST(EngineCheck, AnExpectationOfAFamilyMatchesItsModelsByModelType) {
  const Plan plan = plan_named("extend_after_full");
  const std::string copy = (std::filesystem::temp_directory_path() / ("my-own-checkpoint-" + std::to_string(getpid()))).string();
  std::filesystem::copy(gemma2_dir(), copy,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  const Model m = load_model(copy);
  EngineClient own({"oracle", kvc::paths::target_file("kvc-oracle-engine"), {{"deviate", "window_off_by_one+1"}}, "none", 5});
  auto known = [](const std::string& family, const std::string& pattern) {
    expect::Expectation e;
    e.pattern = pattern;
    e.family = family;
    e.diagnosis = "window_off_by_one";
    return expecting(e);
  };
  Plan named = plan;
  named.model = std::filesystem::path(copy).filename().string();
  EXPECT_EQ(check_plan(own, m, copy, named, known("^gemma2$", "^engine/oracle/")).status, report::Status::Deviation);
  EXPECT_EQ(check_plan(own, m, copy, named, known("^(mistral|gemma3_text)$", "^engine/oracle/")).status, report::Status::Fail);
  EXPECT_EQ(check_plan(own, m, copy, named, known("^gemma2$", "^engine/oracle/draw-")).status, report::Status::Fail);
  std::filesystem::remove_all(copy);
}

// A passing case counts for the entries that apply to it: an entry whose cases all passed is stale
// (an unexpected pass), one that excused a failure is not.
TEST(EngineCheck, AnEntryWhoseCasesPassIsAnUnexpectedPass) {
  const Plan plan = plan_named("extend_after_full");
  const Model m = load_model(gemma2_dir());
  EngineClient fine({"oracle", kvc::paths::target_file("kvc-oracle-engine"), nlohmann::json::object(), "none", 5});
  expect::Expectation e;
  e.diagnosis = "window_off_by_one";
  const CheckOptions o = expecting(e);
  const auto passed = check_plan(fine, m, gemma2_dir(), plan, o);
  EXPECT_EQ(passed.status, report::Status::Pass) << passed.message;
  ASSERT_EQ(o.expectations->stale().size(), 1u);
  EXPECT_EQ(o.expectations->stale().front().passed, std::vector<std::string>{passed.id});
  std::vector<report::CaseResult> cases{passed};
  EXPECT_EQ(o.expectations->mark_unexpected_passes(cases, false), 1);
  EXPECT_EQ(cases.front().status, report::Status::Pass);
  EXPECT_EQ(cases.front().expectation.outcome, "unexpected_pass");
  cases = {passed};
  EXPECT_EQ(o.expectations->mark_unexpected_passes(cases, true), 1);
  EXPECT_EQ(cases.front().status, report::Status::Fail);
  EXPECT_NE(cases.front().message.find("unexpected pass (--strict-expectations): test.jsonc:7"), std::string::npos)
      << cases.front().message;
  // The same entry excusing a failure of another case is not stale.
  EngineClient own({"oracle", kvc::paths::target_file("kvc-oracle-engine"), {{"deviate", "window_off_by_one+1"}}, "none", 5});
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, o).status, report::Status::Deviation);
  EXPECT_TRUE(o.expectations->stale().empty());
}

// The project's own expectations files (engines/<engine>/expectations.jsonc) load, naming only
// diagnosis kinds the judge has, and docs/expectations.schema.json lists exactly those kinds.
TEST(EngineCheck, TheEngineFoldersExpectationsLoadAndTheSchemaNamesEveryKind) {
  const std::filesystem::path root = kvc::paths::source_dir();
  size_t files = 0, entries = 0;
  for (const auto& folder : std::filesystem::directory_iterator(root / "engines")) {
    const std::filesystem::path file = folder.path() / "expectations.jsonc";
    if (!std::filesystem::exists(file)) continue;
    ++files;
    const auto loaded = expect::load(file.string(), std::filesystem::relative(file, root).string(), diagnosis_kind_names());
    EXPECT_FALSE(loaded.empty()) << file;
    for (const expect::Expectation& e : loaded) {
      ++entries;
      EXPECT_EQ(e.outcome, expect::Outcome::Fail) << e.where();
      // Each folder's entries speak of its own configurations' cases only.
      EXPECT_EQ(e.pattern.rfind("^engine/", 0), 0u) << e.where() << ": " << e.pattern;
    }
  }
  EXPECT_GE(files, 8u);
  EXPECT_GE(entries, 89u);
  std::ifstream in(root / "docs/expectations.schema.json");
  const nlohmann::json schema = nlohmann::json::parse(in);
  EXPECT_EQ(schema["$defs"]["kind"]["enum"].get<std::vector<std::string>>(), diagnosis_kind_names());
}

// A finding that upstream fixed stops excusing at the release that fixed it: "releases" holds the
// engines whose name's release is in [from, fixed_in), and no engine without a release.
TEST(EngineCheck, AKnownDeviationHoldsOnlyInItsReleaseRange) {
  using expect::case_release;
  using expect::in_release_range;
  EXPECT_EQ(case_release("engine/transformers-5.24.0/static/eager/gemma2-w2/extend"), "5.24.0");
  EXPECT_EQ(case_release("engine/openvino-2026.4.1/stateful/m/p"), "2026.4.1");
  EXPECT_EQ(case_release("engine/mlx-lm/m/p"), "");
  EXPECT_EQ(case_release("engine/llama.cpp-b11434/default/m/p"), "");
  EXPECT_EQ(case_release("golden/5.24.0/static_sliding_decode"), "");  // only an engine case's configuration
  expect::Expectation k;
  k.from = "5.23.0", k.fixed_in = "5.25.0";
  EXPECT_FALSE(in_release_range(k, "engine/transformers-5.22.2/static/eager/m/p"));
  EXPECT_TRUE(in_release_range(k, "engine/transformers-5.23.0/static/eager/m/p"));
  EXPECT_TRUE(in_release_range(k, "engine/transformers-5.24.0/dynamic/sdpa/m/p"));
  EXPECT_FALSE(in_release_range(k, "engine/transformers-5.25.0/static/eager/m/p"));
  EXPECT_FALSE(in_release_range(k, "engine/transformers-5.100.0/static/eager/m/p"));  // numbers, not text
  EXPECT_FALSE(in_release_range(k, "engine/oracle/m/p"));
  expect::Expectation open;
  open.fixed_in = "5.25.0";
  EXPECT_TRUE(in_release_range(open, "engine/transformers-4.56.2/static/eager/m/p"));
  EXPECT_TRUE(in_release_range(expect::Expectation{}, "engine/oracle/m/p"));
  // At the check: the oracle engine's load error is excused by an entry without a range, not by one
  // with a range (the oracle names no release).
  const Plan plan = plan_named("extend_after_full");
  const Model m = load_model(gemma2_dir());
  EngineClient own({"oracle", kvc::paths::target_file("kvc-oracle-engine"), {{"fault", "load-error@99"}}, "none", 5});
  expect::Expectation e;
  e.error = "fewer than 99";
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting(e)).status, report::Status::Deviation);
  e.fixed_in = "5.25.0";
  EXPECT_EQ(check_plan(own, m, gemma2_dir(), plan, expecting(e)).status, report::Status::Fail);
}

TEST(EngineCheck, AnUnknownOptionIsTheEnginesErrorAndAPlanTheEngineCannotRunIsASkip) {
  const auto bad = run_oracle_engine(plan_named("prefill_eq_w"), {{"no_such_option", 1}});
  EXPECT_EQ(bad.status, report::Status::Fail);
  EXPECT_NE(bad.message.find("unknown option \"no_such_option\""), std::string::npos) << bad.message;
}

// Each serving operation's plan format: a bad field is named by file and JSON pointer.
TEST(Plans, TheServingOperationsNameTheirBadField) {
  const nlohmann::json ext = {{"op", "extend"}, {"seq", 0}, {"tokens", {1, 2, 3, 4, 5}}};
  auto error = [&](nlohmann::json step) -> std::string {
    const nlohmann::json plan = {{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {ext, step}}};
    try {
      plan_from_json(plan, "p.json");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const nlohmann::json fork = {{"op", "fork"}, {"seq", 1}, {"from", 0}, {"length", 3}};
  const nlohmann::json chunked = {{"op", "chunked"}, {"seq", 0}, {"tokens", {1, 2, 3}}, {"chunk", 2}};
  const nlohmann::json spec = {{"op", "spec"}, {"seq", 0}, {"tokens", {1, 2, 3}}, {"n", 2}};
  const nlohmann::json batch = {{"op", "batch"}, {"items", {{{"seq", 0}, {"tokens", {1}}}, {{"seq", 1}, {"tokens", {2, 3}}}}}};
  const nlohmann::json shift = {{"op", "shift"}, {"seq", 0}, {"keep", 1}, {"discard", 2}};
  for (const nlohmann::json& good : {fork, chunked, spec, batch, shift}) EXPECT_EQ(error(good), "") << good.dump();
  auto with = [](nlohmann::json j, const std::string& key, nlohmann::json value) {
    if (value.is_null()) j.erase(key);
    else j[key] = value;
    return j;
  };
  const std::vector<std::pair<nlohmann::json, std::string>> bad{
      {with(fork, "from", nullptr), "p.json: /steps/1/from: must name the source sequence"},
      {with(fork, "from", 1), "p.json: /steps/1/from: must differ from seq"},
      {with(fork, "from", 16), "p.json: /steps/1/from: must be an integer in [0, 15]"},
      {with(fork, "length", -1), "p.json: /steps/1/length: must be the length"},
      {with(chunked, "chunk", 0), "p.json: /steps/1/chunk: must be a positive integer"},
      {with(chunked, "tokens", nlohmann::json::array()), "p.json: /steps/1/tokens: must be a non-empty array"},
      {with(spec, "n", 4), "p.json: /steps/1/n: rejects more than the draft's 3 tokens"},
      {with(spec, "n", nullptr), "p.json: /steps/1/n: must be the number of rejected draft tokens"},
      {with(batch, "items", nlohmann::json::array()), "p.json: /steps/1/items: must be a non-empty array"},
      {with(batch, "items", {{{"seq", 0}, {"tokens", {1}}}, {{"seq", 0}, {"tokens", {2}}}}),
       "p.json: /steps/1/items/1/seq: sequence 0 is already"},
      {with(batch, "items", {{{"seq", 0}, {"tokens", {1, "x"}}}}), "p.json: /steps/1/items/0/tokens/1: must be a token id"},
      {with(shift, "discard", 0), "p.json: /steps/1/discard: must be the number of positions discarded"},
      {with(shift, "keep", nullptr), "p.json: /steps/1/keep: must be the number of positions kept"},
  };
  for (const auto& [step, words] : bad)
    EXPECT_NE(error(step).find(words), std::string::npos) << step.dump() << " -> " << error(step);
  // What the format cannot see, the plan's run does: a fork longer than its source.
  Plan p = plan_from_json({{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {ext, with(fork, "length", 6)}}},
                          "p.json");
  EXPECT_NE(invalid_reason(p, 32).find("step 1: fork of the first 6 tokens of a sequence of 5"), std::string::npos)
      << invalid_reason(p, 32);
  EXPECT_EQ(
      max_tokens(plan_from_json({{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {ext, spec}}}, "p.json")), 8);
  Lengths len{{0, 5}, {1, 2}};
  EXPECT_EQ(plan_from_json({{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {batch}}}, "p.json")
                .steps[0]
                .describe(len),
            "batch of 2: seq 0 1 token at 5, seq 1 2 tokens at 2..3");
  EXPECT_EQ(p.steps[1].describe(len), "fork seq 1 from the first 6 of seq 0's 5 tokens");
  // A shift past the sequence's end, and what a valid one says.
  Plan q = plan_from_json({{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {ext, with(shift, "discard", 5)}}},
                          "p.json");
  EXPECT_NE(invalid_reason(q, 32).find("step 1: shift discarding 5 after 1 of a sequence of 5 tokens"), std::string::npos)
      << invalid_reason(q, 32);
  q = plan_from_json(
      to_json(plan_from_json({{"format", "kvconform-engine-plan-v1"}, {"model", "m"}, {"steps", {ext, shift}}}, "p.json")),
      "p.json");
  EXPECT_EQ(q.steps[1].describe(len), "shift seq 0: discard 2 tokens at 1..2, move 2 down (to 3)");
  EXPECT_EQ(invalid_reason(q, 32), "");
}

// The step table: each row reads back what it writes, the protocol names each row's fields, every
// draw of the campaign is a valid step of a listed operation, and the operation mutants each name
// their row's operation.
TEST(StepTable, EachRowRoundTripsAndTheProtocolIsTheTable) {
  const std::vector<PlanStep> one_of_each{Extend{0, tokens(3)},
                                          Rollback{0, 1},
                                          Reload{0},
                                          Reset{},
                                          Fork{1, 0, 2},
                                          Chunked{0, tokens(4, 2), 3},
                                          Spec{0, tokens(3, 3), 1},
                                          Batch{{{0, tokens(1)}, {1, tokens(2, 4)}}},
                                          Shift{0, 1, 1},
                                          Preempt{0},
                                          Turn{0, 1, tokens(2, 5)}};
  const nlohmann::json protocol = protocol_description();
  ASSERT_EQ(protocol["steps"].size(), one_of_each.size());
  for (size_t i = 0; i < one_of_each.size(); ++i) {
    const PlanStep& s = one_of_each[i];
    const nlohmann::json j = s.to_json();
    EXPECT_EQ(PlanStep::from_json(j, "/steps/0", "t").to_json(), j) << j.dump();
    EXPECT_EQ(protocol["steps"][i]["op"], s.op());
    EXPECT_EQ(protocol["steps"][i]["logits"], s.logits());
    std::vector<std::string> fields;
    for (const auto& [key, value] : j.items())
      if (key != "op") fields.push_back(key);
    EXPECT_EQ(protocol["steps"][i]["fields"].get<std::vector<std::string>>(), fields) << s.op();
    EXPECT_EQ(s.logits(), !s.positions({{0, 5}, {1, 5}}).empty()) << s.op();
  }
  for (const std::string& m : operation_mutants()) EXPECT_NE(operation_of_mutant(m), "") << m;
  EXPECT_EQ(operation_of_mutant("window_off_by_one+1"), "");
  // Every kind drawn, each step valid and of an operation listed: by the whole list, and by none.
  for (const std::vector<std::string>& operations :
       {std::vector<std::string>{"rollback", "reload", "sequences", "fork", "chunked", "spec", "batch", "shift", "preempt",
                                 "turn"},
        std::vector<std::string>{}}) {
    DrawContext c{operations, 4, 32, 7, 0, {}};
    Plan p{"drawn", "m", {}};
    std::set<std::string> ops;
    for (int kind = 0; kind < 15; ++kind)
      for (int variant = 0; variant < 8; ++variant)
        for (PlanStep& s : draw_step(DrawnStep{kind, 3 + variant, variant % 2, variant}, c))
          ops.insert(s.op()), p.steps.push_back(std::move(s));
    EXPECT_EQ(invalid_reason(p, 32), "");
    for (const std::string& op : operations_used(p))
      EXPECT_NE(std::find(operations.begin(), operations.end(), op), operations.end()) << op;
    EXPECT_EQ(ops.size(), operations.empty() ? 2u : one_of_each.size());  // without operations: extends and resets
  }
}

// On a chunked model the campaign's operations aim at chunk starts (issue: chunk boundaries were drawn
// less than window edges): where each drawn extend, rollback, fork, spec cycle and shift leaves its
// sequence (a shift and a turn: the prefix they keep) lies within one token of a chunk start k*C past
// the first chunk (after a cache keeping one chunk evicted the previous one) far more often than the
// same draws give on the model without chunks, and the draws are the seed's alone.
TEST(StepTable, ChunkedModelsDrawEveryOperationAtChunkBoundaries) {
  const int64_t C = 5;
  const std::vector<std::string> operations{"rollback", "reload", "sequences", "fork",    "chunked",
                                            "spec",     "batch",  "shift",     "preempt", "turn"};
  struct Tally {
    std::map<std::string, int> at_boundary, drawn;
    int past_first_chunk = 0;
    std::string plan;
  };
  const auto draw = [&](int64_t chunk, uint32_t seed) {
    Tally t;
    DrawContext c{operations, C, 32, seed, 0, {}, chunk};
    std::mt19937 r(seed);
    const int aimed[] = {3, 4, 5, 7, 10, 11, 13};  // the kinds with targets (10: a shift at variants 4-7)
    for (int i = 0; i < 3000; ++i) {
      if (i % 40 == 0) c.len.clear();  // fresh sequences now and then, as a plan starts
      const int kind = r() % 3 == 0 ? 0 : aimed[r() % 7], variant = 1 + static_cast<int>(r() % 7);
      const int size = 1 + static_cast<int>(r() % 12), seq = static_cast<int>(r() % 2);
      if (c.length(0) == 0 || c.length(1) == 0) {  // grow both sequences first, so that every operation can run
        draw_step(DrawnStep{0, size, c.length(0) == 0 ? 0 : 1, 0}, c);
        continue;
      }
      for (const PlanStep& s : draw_step(DrawnStep{kind, size, seq, variant}, c)) {
        t.plan += s.to_json().dump();
        if (kind == 0 || (kind == 10 && !s.as<Shift>())) continue;  // plain extends, deep rollbacks: no target
        const int64_t on = s.sequences().front();
        // Where it leaves the sequence; a shift's and a turn's kept prefix.
        const int64_t at = s.as<Shift>() ? s.as<Shift>()->keep : s.as<Turn>() ? s.as<Turn>()->keep : c.length(on);
        const int64_t off = at % C;
        const bool boundary = off == 0 || off == 1 || off == C - 1;
        ++t.drawn[s.op()];
        // past the first chunk (whose edges are the window's edges W - 1, W, W + 1 as well)
        if (at >= 2 * C - 1 && boundary) ++t.at_boundary[s.op()];
        if (at > C + 1 && boundary) ++t.past_first_chunk;
      }
    }
    return t;
  };
  Tally chunked = draw(C, 11), plain = draw(0, 11);
  for (const char* op : {"extend", "rollback", "fork", "spec", "shift", "turn"}) {
    ASSERT_GT(chunked.drawn.at(op), 20) << op;
    const double aimed = double(chunked.at_boundary[op]) / chunked.drawn.at(op),
                 before = double(plain.at_boundary[op]) / plain.drawn.at(op);
    EXPECT_GT(aimed, 0.6) << op << ": " << chunked.at_boundary[op] << " of " << chunked.drawn.at(op) << " at a chunk boundary";
    EXPECT_GT(aimed, before + 0.15) << op << ": " << aimed << " against " << before << " without chunks";
  }
  EXPECT_GT(chunked.past_first_chunk, 200);
  EXPECT_EQ(draw(C, 11).plan, chunked.plan);  // the same seed, the same draws
  EXPECT_NE(draw(C, 12).plan, chunked.plan);
}

TEST(EngineCheck, TheOracleEnginePassesEveryServingPlanAndEachOperationMutantFailsIt) {
  // The diagnosis each mutant gets ("" where none of the named departures explains it).
  for (auto [prefix, mutant, diagnosis] :
       {std::tuple{"fork_", "fork_shared", ""},
        {"fork_", "fork_off_by_one", "consistent with the forks starting one token short of their prefix"},
        {"chunked_", "window_restarts_per_chunk", "consistent with the window restarting at each chunk"},
        {"spec_", "spec_rollback_off_by_one", "consistent with the spec cycles rolling back one token more than they reject"},
        {"batch", "batch_offset", ""},
        {"shift_", "shift_not_rerotated", "consistent with the kept keys not re-rotated after a shift"},
        {"shift_", "shift_discard_off_by_one", ""},
        {"preempt_", "preempt_short", ""},
        {"turn_", "turn_past", ""}}) {
    const Model m = load_model(gemma2_dir());
    int plans = 0;
    for (const Plan& plan : fixed_plans("gemma2-w4", m.config.sliding_window, m.config.vocab)) {
      if (plan.name.rfind(prefix, 0) != 0) continue;
      ++plans;
      const auto ok = run_oracle_engine(plan, nlohmann::json::object());
      EXPECT_EQ(ok.status, report::Status::Pass) << plan.name << ": " << ok.message;
      const auto bad = run_oracle_engine(plan, nlohmann::json::object(), mutant);
      EXPECT_EQ(bad.status, report::Status::Fail) << plan.name << " under " << mutant << ": " << bad.message;
      EXPECT_NE(bad.message.find("step "), std::string::npos) << bad.message;
      EXPECT_NE(bad.message.find(*diagnosis ? diagnosis : "no single explanation fits"), std::string::npos)
          << mutant << ": " << bad.message;
    }
    EXPECT_GT(plans, 0) << prefix;
  }
}

TEST(EngineCheck, AnEngineMayAnswerASubsetOfThePositionsButNotNone) {
  const Plan plan = plan_named("batch");
  const auto last = run_oracle_engine(plan, {{"logits", "last"}});
  EXPECT_EQ(last.status, report::Status::Pass) << last.message;
  EXPECT_NE(last.message.find("5 positions judged"), std::string::npos) << last.message;  // one per step with new positions
  EXPECT_NE(last.detail.find("(the engine answered 1 of"), std::string::npos) << last.detail;
  // The subset is still judged: a mutant that changes the last positions fails.
  EXPECT_EQ(run_oracle_engine(plan_named("extend_after_full"), {{"logits", "last"}}, "window_off_by_one+1").status,
            report::Status::Fail);
  const auto none = run_oracle_engine(plan, {{"logits", "none"}});
  EXPECT_EQ(none.status, report::Status::Fail);
  EXPECT_NE(none.message.find("nothing was judged"), std::string::npos) << none.message;
}

TEST(EngineCheck, LogProbabilitiesAreJudgedAsLogSoftmaxUnderTheirOwnBound) {
  for (const char* answer : {"logprobs", "last-logprobs"}) {
    const auto ok = run_oracle_engine(plan_named("batch"), {{"logits", answer}});
    EXPECT_EQ(ok.status, report::Status::Pass) << answer << ": " << ok.message;
    // A wrong window still shows through log-probabilities, diagnosed as with logits.
    const auto bad = run_oracle_engine(plan_named("extend_after_full"), {{"logits", answer}}, "window_off_by_one+1");
    EXPECT_EQ(bad.status, report::Status::Fail) << answer;
    EXPECT_NE(bad.message.find("max |log-prob error|"), std::string::npos) << bad.message;
    EXPECT_NE(bad.message.find("consistent with a window of W+1"), std::string::npos) << bad.message;
  }
  // Log-probabilities labelled as logits are off by each row's log-sum-exp: not a pass.
  const auto mislabelled = run_oracle_engine(plan_named("batch"), {{"logits", "logprobs-as-logits"}});
  EXPECT_EQ(mislabelled.status, report::Status::Fail) << mislabelled.message;
  EXPECT_NE(mislabelled.message.find("max |logit error|"), std::string::npos) << mislabelled.message;
}

TEST(EngineCheck, RowsRepeatedOrShiftedByOneGetAHint) {
  // An adapter that sends one position's row for every position, or each position the row before
  // it, fits no cache hypothesis: the failure says what its rows look like.
  for (auto [answer, words] :
       {std::pair{"first-repeated", "hint: the engine answered the same row for all "},
        {"shifted", "hint: the engine's rows are the oracle's shifted by one position (each row is the position before"}}) {
    const auto bad = run_oracle_engine(plan_named("prefill_gt_w"), {{"logits", answer}});
    EXPECT_EQ(bad.status, report::Status::Fail) << answer;
    EXPECT_NE(bad.message.find(words), std::string::npos) << bad.message;
  }
  // A right answer and a wrong window get none.
  const auto plus1 = run_oracle_engine(plan_named("prefill_gt_w"), {}, "window_off_by_one+1");
  EXPECT_EQ(plus1.message.find("hint:"), std::string::npos) << plus1.message;
}

}  // namespace
}  // namespace kvc::engine
