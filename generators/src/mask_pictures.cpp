// Replays a scenario on the fast path through its one step loop (fast::for_each_step: which token
// each returned column holds, the boolean mask from the mask functions), then draws the last
// update's mask against the rule. No LibTorch: the fast path is held to the tensor reference by
// masks_test.cpp.
#include "kvcgen/mask_pictures.h"

#include <algorithm>
#include <sstream>

#include "kvconform/fastpath.h"
#include "kvconform/positions.h"
#include "kvconform/regex.h"

namespace kvc {

std::vector<report::MaskPicture> mask_pictures(const ScenarioConfig& config, const std::vector<int64_t>& steps, Mutation mutation,
                                               size_t max_pictures) {
  std::vector<report::MaskPicture> pictures;
  if (steps.empty()) return pictures;
  // A layer that cannot even be made or run the steps has no mask to draw (the failure message says
  // why); the other layer's pictures are still drawn.
  std::vector<fast::Layer> layers;
  for (const LayerSpec& spec : {config.static_spec(), config.dynamic_spec()}) {
    try {
      layers.emplace_back(spec, Behaviours{}, mutation);
    } catch (const std::exception&) {
    }
  }
  std::vector<bool> raised(layers.size(), false);
  fast::TokenRows returned;
  std::vector<uint8_t> mask;
  // Only the last update is drawn (the static layer's pictures first: the loop is step-major).
  const auto updates = static_cast<size_t>(std::count_if(steps.begin(), steps.end(), [](int64_t q) { return q > 0; }));
  size_t update = 0;
  fast::for_each_step(layers, steps, [&](size_t l, fast::Layer& layer, int64_t seen, int64_t q) -> std::string {
    const bool last = update + 1 == updates;
    if (l + 1 == layers.size()) ++update;
    if (raised[l]) return {};
    const LayerSpec& spec = layer.spec();
    MaskSizes sizes;
    try {
      sizes = layer.get_mask_sizes(q);
      layer.update(q, returned);
    } catch (const std::exception&) {
      raised[l] = true;
      return {};
    }
    if (!last) return {};
    const MaskRequest m = mask_request(spec, Behaviours{}, config.batch, config.left_padding, seen, q, std::nullopt, sizes);
    fast::boolean_mask(m, mask, mutation);
    const int64_t cols = sizes.kv_length, held = static_cast<int64_t>(returned.size());
    const uint8_t* p = mask.data();
    const size_t first_of_layer = pictures.size();
    for (int64_t b = 0; b < config.batch && pictures.size() < max_pictures; ++b) {
      const int64_t lp = config.left_padding ? (*config.left_padding)[static_cast<size_t>(b)] : 0;
      report::MaskPicture pic;
      bool differs = false;
      for (int64_t i = 0; i < q; ++i) {
        const int64_t qpos = seen + i;
        std::string row;
        for (int64_t j = 0; j < cols; ++j) {
          const bool got = p[(b * q + i) * cols + j];
          const int64_t tok = j < held ? returned[static_cast<size_t>(j)] : -1;
          const bool exists = tok >= 0 && tok < seen + q;
          const bool want = exists && tok >= lp && positions::window_allows(spec.type, config.window, lp, qpos, tok);
          const char c = got ? (want ? '#' : '+') : (want ? '-' : (exists ? '.' : ' '));
          differs = differs || c == '+' || c == '-';
          row += c;
        }
        pic.rows.push_back(row);
        pic.query_positions.push_back(qpos);
      }
      if (!differs) continue;
      std::ostringstream title;
      title << spec.describe() << " update " << steps.size() << " (" << q << " tokens after " << seen << ") batch row";
      // Rows with the same picture (same padding) are drawn once: "batch rows 0,1,2".
      if (first_of_layer < pictures.size() && pictures.back().rows == pic.rows && pictures.back().kv_offset == sizes.kv_offset) {
        pictures.back().title =
            Regex(" batch rows? ([0-9,]+)").replace(pictures.back().title, " batch rows $1," + std::to_string(b));
        continue;
      }
      title << " " << b;
      if (lp) title << " (left padding " << lp << ")";
      pic.title = title.str();
      pic.kv_offset = sizes.kv_offset;
      pic.kv_length = cols;
      pic.window = spec.type == LayerType::Full ? 0 : config.window;
      pic.layer_type = to_string(spec.type);
      pictures.push_back(std::move(pic));
    }
    return {};
  });
  return pictures;
}

}  // namespace kvc
