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
    const std::vector<LayerType> layers = c.attention == LayerType::Full ? std::vector<LayerType>{LayerType::Full}
                                                                         : gen_layers(c.attention);
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

ordered_json sample(uint64_t seed, const std::string& name) {
  return gen_case(name)(rc::Random(seed), 50).value();
}

}  // namespace

ordered_json draw(uint64_t seed, uint64_t index, const std::string& name) {
  return sample(seeds::case_seed(seed, index), name);
}

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

}  // namespace kvc::corpus
