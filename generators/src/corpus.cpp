#include "kvcgen/corpus.h"

#include <rapidcheck.h>

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "kvconform/positions.h"
#include "kvconform/seeds.h"
#include "kvcgen/rc_gen.h"

namespace kvc::corpus {

namespace {

using nlohmann::ordered_json;

// Hybrid layer lists as models use them (Gemma2 alternates sliding/full, Llama4 chunked/full).
std::vector<LayerType> gen_layers(LayerType attention) {
  using L = LayerType;
  const int shape = *rc::gen::weightedElement<int>({{6, 0}, {2, 1}, {1, 2}, {1, 3}});
  switch (shape) {
    case 1: return {attention, L::Full};
    case 2: return {L::Full, attention, attention};
    case 3: return {L::Sliding, L::Chunked, L::Full};
    default: return {attention};
  }
}

// Token counts for each update: a prefill, then decodes and multi-token extends near the window.
std::vector<int64_t> gen_steps(int64_t window, int64_t first_at_least, int64_t total_limit) {
  std::vector<int64_t> near = {window - 1, window, window + 1, 2 * window + 1, 1, 2};
  auto pick = [&](int64_t at_least, int64_t room) -> int64_t {
    std::vector<int64_t> fits;
    for (int64_t n : near)
      if (n >= at_least && n <= room) fits.push_back(n);
    if (!fits.empty() && *rc::gen::inRange(0, 3) > 0) return *rc::gen::elementOf(fits);
    return *rc::gen::inRange<int64_t>(at_least, room + 1);
  };
  std::vector<int64_t> steps = {pick(first_at_least, total_limit)};
  int64_t total = steps[0];
  const int more = *rc::gen::weightedElement<int>({{1, 0}, {3, 1}, {3, 2}, {3, 3}, {2, 5}, {1, 7}});
  for (int i = 0; i < more && total < total_limit; ++i) {
    const int64_t n = *rc::gen::inRange(0, 2) == 0 ? 1 : pick(2, std::max<int64_t>(2, total_limit - total));
    if (total + n > total_limit) break;
    steps.push_back(n);
    total += n;
  }
  return steps;
}

rc::Gen<ordered_json> gen_case(std::string name) {
  return rc::gen::exec([name] {
    const ScenarioConfig c = *gen_config();
    const CacheKind cache = *rc::gen::element(CacheKind::Static, CacheKind::Dynamic);
    const std::vector<LayerType> layers =
        c.attention == LayerType::Full ? std::vector<LayerType>{LayerType::Full} : gen_layers(c.attention);
    const bool any_window = std::any_of(layers.begin(), layers.end(), [](LayerType t) { return t != LayerType::Full; });
    // Small tensors keep the committed fixtures small; the shapes still cover MHA/GQA/MQA.
    const int64_t head_dim = std::min<int64_t>(c.head_dim, 8);
    const int64_t batch = std::min<int64_t>(c.batch, 3);
    int64_t limit = std::min<int64_t>(3 * c.window + 8, 40);
    if (cache == CacheKind::Static)
      for (LayerType t : layers) {
        const int64_t bound = positions::max_total_tokens({cache, t, c.window, c.max_cache_len});
        if (bound >= 0) limit = std::min(limit, bound);
      }
    LeftPadding padding;
    if (c.left_padding) {
      padding = std::vector<int64_t>(c.left_padding->begin(), c.left_padding->begin() + batch);
      for (int64_t& lp : *padding) lp = std::min(lp, limit - 1);
    }
    int64_t max_pad = 0;
    if (padding) max_pad = *std::max_element(padding->begin(), padding->end());
    const std::vector<int64_t> steps = gen_steps(c.window, max_pad + 1, limit);

    std::string kinds;
    for (LayerType t : layers) kinds += t == LayerType::Full ? "f" : t == LayerType::Sliding ? "s" : "c";
    ordered_json j;
    j["name"] = name;
    j["description"] = "Generated from the property generators (kvconform golden --generate-corpus); layers " + kinds +
                       ", window " + std::to_string(c.window) + ".";
    j["tags"] = {"generated"};
    j["cache"] = to_string(cache);
    ordered_json types = ordered_json::array();
    for (LayerType t : layers) types.push_back(to_string(t));
    j["layer_types"] = types;
    if (any_window) j["window"] = c.window;
    if (cache == CacheKind::Static) j["max_cache_len"] = c.max_cache_len;
    j["batch"] = batch;
    j["heads"] = c.heads;
    j["kv_heads"] = c.kv_heads;
    j["head_dim"] = head_dim;
    j["dtype"] = to_string(c.dtype);
    j["left_padding"] = padding ? ordered_json(*padding) : ordered_json(nullptr);
    ordered_json js = ordered_json::array();
    for (int64_t n : steps) js.push_back({{"tokens", n}});
    j["steps"] = js;
    j["inputs"] = {{"generator", "kvc-mix64-v1"}, {"seed", c.seed}};
    return j;
  });
}

ordered_json sample(uint64_t seed, const std::string& name) { return gen_case(name)(rc::Random(seed), 50).value(); }

// The mask builders' rare branches, which the plain draws reach seldom or never (golden/dump.py's
// mask_builders): decoding with left padding on a static sliding or chunked layer that holds fewer
// rows than its window (max_cache_len below it), and on dynamic hybrids whose sliding and chunked
// layers share one builder's sizes. Every case left-pads a row and decodes past its capacity.
rc::Gen<ordered_json> gen_rare_case(std::string name) {
  return rc::gen::exec([name] {
    using L = LayerType;
    const CacheKind cache = *rc::gen::element(CacheKind::Static, CacheKind::Dynamic);
    const std::vector<LayerType> layers =
        cache == CacheKind::Static
            ? *rc::gen::element(std::vector<L>{L::Sliding}, std::vector<L>{L::Chunked}, std::vector<L>{L::Sliding, L::Chunked},
                                std::vector<L>{L::Chunked, L::Sliding, L::Sliding})
            : *rc::gen::element(std::vector<L>{L::Sliding, L::Full}, std::vector<L>{L::Full, L::Chunked, L::Sliding},
                                std::vector<L>{L::Chunked, L::Full}, std::vector<L>{L::Sliding, L::Chunked, L::Full});
    const int64_t window = *rc::gen::inRange<int64_t>(2, 9);
    const int64_t max_cache_len = *rc::gen::inRange<int64_t>(1, window);  // below the window
    const int64_t batch = *rc::gen::inRange<int64_t>(2, 4);
    std::vector<int64_t> padding(static_cast<size_t>(batch));
    for (int64_t& lp : padding) lp = *rc::gen::inRange<int64_t>(0, window + 1);
    padding[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, batch))] = *rc::gen::inRange<int64_t>(1, window + 1);
    const int64_t max_pad = *std::max_element(padding.begin(), padding.end());
    // A prefill past the padding, then decodes (some after an extend) well past the capacity.
    std::vector<int64_t> steps = {*rc::gen::inRange<int64_t>(max_pad + 1, max_pad + window + 1)};
    const int decodes = *rc::gen::inRange(3, 3 + static_cast<int>(window) + 2);
    for (int i = 0; i < decodes; ++i) steps.push_back(*rc::gen::weightedElement<int64_t>({{4, 1}, {1, 2}, {1, window}}));
    const int64_t heads = *rc::gen::element<int64_t>(1, 2, 4);
    const int64_t kv_heads = *rc::gen::element<int64_t>(1, heads);
    const DType dtype = *rc::gen::element(DType::Float32, DType::Float64, DType::BFloat16, DType::Float16);

    std::string kinds;
    for (LayerType t : layers) kinds += t == LayerType::Full ? "f" : t == LayerType::Sliding ? "s" : "c";
    ordered_json j;
    j["name"] = name;
    j["description"] =
        "Generated for the mask builders' rare branches (kvconform golden --generate-corpus): left "
        "padding at decode; layers " +
        kinds + ", window " + std::to_string(window) +
        (cache == CacheKind::Static ? ", max_cache_len " + std::to_string(max_cache_len) + " below it" : "") + ".";
    j["tags"] = {"generated", "rare-branch"};
    j["cache"] = to_string(cache);
    ordered_json types = ordered_json::array();
    for (LayerType t : layers) types.push_back(to_string(t));
    j["layer_types"] = types;
    j["window"] = window;
    if (cache == CacheKind::Static) j["max_cache_len"] = max_cache_len;
    j["batch"] = batch;
    j["heads"] = heads;
    j["kv_heads"] = kv_heads;
    j["head_dim"] = 4;
    j["dtype"] = to_string(dtype);
    j["left_padding"] = padding;
    ordered_json js = ordered_json::array();
    for (int64_t n : steps) js.push_back({{"tokens", n}});
    j["steps"] = js;
    j["inputs"] = {{"generator", "kvc-mix64-v1"}, {"seed", *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 40)}};
    return j;
  });
}

}  // namespace

ordered_json draw(uint64_t seed, uint64_t index, const std::string& name) { return sample(seeds::case_seed(seed, index), name); }

std::vector<ordered_json> generate(uint64_t seed, int count) {
  std::vector<ordered_json> out;
  for (int i = 0; i < count; ++i) {
    ordered_json probe = draw(seed, static_cast<uint64_t>(i), "x");
    std::ostringstream name;
    name << "gen_" << std::setw(4) << std::setfill('0') << i << "_" << probe["cache"].get<std::string>() << "_";
    for (const auto& t : probe["layer_types"]) name << t.get<std::string>().substr(0, 1);
    if (probe.contains("window")) name << "_w" << probe["window"].get<int64_t>();
    probe["name"] = name.str();
    out.push_back(std::move(probe));
  }
  return out;
}

std::vector<ordered_json> generate_rare(uint64_t seed, int count) {
  std::vector<ordered_json> out;
  for (int i = 0; i < count; ++i) {
    // Drawn from its own stream of case seeds (index offset), so the plain draws stay as they were.
    ordered_json probe = gen_rare_case("x")(rc::Random(seeds::case_seed(seed, (uint64_t{1} << 32) + i)), 50).value();
    std::ostringstream name;
    name << "gen_rare_" << std::setw(4) << std::setfill('0') << i << "_" << probe["cache"].get<std::string>() << "_";
    for (const auto& t : probe["layer_types"]) name << t.get<std::string>().substr(0, 1);
    name << "_w" << probe["window"].get<int64_t>();
    probe["name"] = name.str();
    out.push_back(std::move(probe));
  }
  return out;
}

}  // namespace kvc::corpus
