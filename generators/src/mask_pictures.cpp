// Replays a scenario on position tags (each token's value is its index + 1) so that every returned
// column names the token it holds, then draws the last update's boolean mask against the rule.
#include "kvcgen/mask_pictures.h"

#include <ATen/ATen.h>

#include <regex>
#include <sstream>

#include "kvconform/masks.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"

namespace kvc {

std::vector<report::MaskPicture> mask_pictures(const ScenarioConfig& config, const std::vector<int64_t>& steps,
                                               Mutation mutation, size_t max_pictures) {
  std::vector<report::MaskPicture> pictures;
  if (steps.empty()) return pictures;
  for (const LayerSpec& spec : {config.static_spec(), config.dynamic_spec()}) {
    try {
      std::unique_ptr<CacheLayer> layer = make_layer(spec, Behaviours{}, mutation);
      const size_t first_of_layer = pictures.size();
      int64_t seen = 0;
      for (size_t s = 0; s < steps.size(); ++s) {
        const int64_t q = steps[s];
        const MaskSizes sizes = layer->get_mask_sizes(q);
        const at::Tensor tag = at::arange(seen + 1, seen + q + 1, at::kDouble).view({1, 1, q, 1});
        const at::Tensor returned = layer->update(tag, tag).keys.contiguous();
        if (s + 1 < steps.size()) {
          seen += q;
          continue;
        }
        masks::MaskQuery m;
        m.type = spec.type;
        m.window = config.window;
        m.batch = config.batch;
        for (int64_t i = 0; i < q; ++i) m.query_positions.push_back(seen + i);
        m.sizes = sizes;
        m.left_padding = config.left_padding;
        m.tokens_so_far = seen + q;
        m.allow_skip = spec.cache == CacheKind::Dynamic;
        const at::Tensor mask = masks::boolean_mask(m, mutation).to(at::kBool).contiguous();
        const int64_t cols = mask.size(3), held = returned.size(2);
        const bool* p = mask.data_ptr<bool>();
        const double* tokens = returned.data_ptr<double>();
        for (int64_t b = 0; b < config.batch && pictures.size() < max_pictures; ++b) {
          const int64_t lp = config.left_padding ? (*config.left_padding)[static_cast<size_t>(b)] : 0;
          report::MaskPicture pic;
          bool differs = false;
          for (int64_t i = 0; i < q; ++i) {
            const int64_t qpos = seen + i;
            std::string row;
            for (int64_t j = 0; j < cols; ++j) {
              const bool got = p[(b * q + i) * cols + j];
              const int64_t tok = j < held ? static_cast<int64_t>(tokens[j]) - 1 : -1;
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
          title << spec.describe() << " update " << (steps.size()) << " (" << q << " tokens after " << seen
                << ") batch row";
          // Rows with the same picture (same padding) are drawn once: "batch rows 0,1,2".
          if (first_of_layer < pictures.size() && pictures.back().rows == pic.rows && pictures.back().kv_offset == sizes.kv_offset) {
            pictures.back().title = std::regex_replace(pictures.back().title, std::regex(" batch rows? ([0-9,]+)"),
                                                       " batch rows $1," + std::to_string(b));
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
      }
    } catch (const std::exception&) {
      // A layer that cannot even run the steps has no mask to draw; the failure message says why.
    }
  }
  return pictures;
}

}  // namespace kvc
