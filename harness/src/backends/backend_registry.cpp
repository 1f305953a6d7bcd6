// The attention backends, one line each, in the order suites run them. Adding a LibTorch backend:
// a source file with a Backend subclass and its make_<name>(Fault) factory, its declaration and
// one line below, and a row in docs/backends.md (a unit test holds the table to this list).
#include "kvconform/backends.h"

namespace kvc::backends {

std::unique_ptr<Backend> make_eager(Fault);
std::unique_ptr<Backend> make_sdpa(Fault);
std::unique_ptr<Backend> make_sdpa_is_causal(Fault);
std::unique_ptr<Backend> make_windowed(Fault);
std::unique_ptr<Backend> make_windowed_cache(Fault);

const std::vector<BackendInfo>& registry() {
  static const std::vector<BackendInfo> backends = {
      {"eager", "transformers' eager attention: matmul, additive mask, softmax in float32, matmul", make_eager},
      {"sdpa", "LibTorch scaled_dot_product_attention with the full boolean mask", make_sdpa},
      {"sdpa_is_causal", "transformers' SDPA path: is_causal instead of the mask where it may be skipped", make_sdpa_is_causal},
      {"windowed", "a mask-free kernel: window_size = (W - 1, 0), chunk size or causality by index arithmetic", make_windowed},
      {"windowed_cache", "the windowed kernel over a K/V cache of its own, held to the reference layer's stored rows",
       make_windowed_cache},
  };
  return backends;
}

}  // namespace kvc::backends
