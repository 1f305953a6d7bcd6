// 4.56's static sliding layers (Behaviours::sliding_layer pre_merge): SlidingWindowLayer for sliding
// attention, ChunkedSlidingLayer for chunked attention, and 4.56's get_mask_sizes(cache_position)
// reading the first position. The expected values are not derived from the C++: they were printed
// by transformers 4.56.2 itself (torch 2.13.0+cpu) running its own classes on these sequences, with
// B = H = D = 1 and token t holding value t; the script is in the comment at the end of this file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "kvconform/reference.h"
#include "kvconform/tensors.h"

namespace kvc {
namespace {

struct Step {
  std::vector<double> values;
  std::vector<int64_t> cache_position;
  MaskSizes mask_sizes;                  // get_mask_sizes(cache_position) before the update
  std::vector<double> returned, stored;  // update's keys and layer.keys after it
  int64_t seq_length;                    // get_seq_length() after it
  std::string raises;                    // Python's exception type, "" when none
};

struct Sequence {
  const char* name;
  LayerSpec spec;
  std::vector<Step> steps;
};

// Printed by transformers 4.56.2 (measure.py below), converted line by line.
const std::vector<Sequence> kMeasured = {
    {"sliding decode",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2}, {0, 1}, {4, 0}, {1, 2, 0, 0}, {1, 2, 0, 0}, 2, ""},
         {{3}, {2}, {4, 0}, {1, 2, 3, 0}, {1, 2, 3, 0}, 3, ""},
         {{4}, {3}, {4, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}, 4, ""},
         {{5}, {4}, {4, 1}, {2, 3, 4, 5}, {2, 3, 4, 5}, 5, ""},
         {{6}, {5}, {4, 2}, {3, 4, 5, 6}, {3, 4, 5, 6}, 6, ""},
     }},
    {"sliding long prefill then decode",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5}, {6, 0}, {1, 2, 3, 4, 5, 6}, {3, 4, 5, 6}, 6, ""},
         {{7}, {6}, {4, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}, 7, ""},
         {{8}, {7}, {4, 4}, {5, 6, 7, 8}, {5, 6, 7, 8}, 8, ""},
     }},
    {"sliding multi-token once full",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2, 3, 4}, {0, 1, 2, 3}, {4, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}, 4, ""},
         {{5, 6}, {4, 5}, {4, 1}, {}, {}, -1, "RuntimeError"},
     }},
    {"sliding multi-token after long prefill",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5}, {6, 0}, {1, 2, 3, 4, 5, 6}, {3, 4, 5, 6}, 6, ""},
         {{7, 8}, {6, 7}, {4, 3}, {}, {}, -1, "RuntimeError"},
     }},
    {"sliding becoming full within window",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2, 3}, {0, 1, 2}, {4, 0}, {1, 2, 3, 0}, {1, 2, 3, 0}, 3, ""},
         {{4, 5}, {3, 4}, {4, 0}, {}, {}, -1, "IndexError"},
     }},
    {"sliding more than capacity after some",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2}, {0, 1}, {4, 0}, {1, 2, 0, 0}, {1, 2, 0, 0}, 2, ""},
         {{3, 4, 5, 6, 7}, {2, 3, 4, 5, 6}, {5, 0}, {3, 4, 5, 6, 7}, {4, 5, 6, 7}, 7, ""},
         {{8}, {7}, {4, 4}, {5, 6, 7, 8}, {5, 6, 7, 8}, 8, ""},
     }},
    {"sliding exactly capacity",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2, 3, 4}, {0, 1, 2, 3}, {4, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}, 4, ""},
         {{5}, {4}, {4, 1}, {2, 3, 4, 5}, {2, 3, 4, 5}, 5, ""},
     }},
    {"sliding custom positions",
     {CacheKind::Static, LayerType::Sliding, 4, 8},
     {
         {{1, 2}, {1, 2}, {4, 0}, {0, 1, 2, 0}, {0, 1, 2, 0}, 2, ""},
         {{3}, {0}, {4, 0}, {3, 1, 2, 0}, {3, 1, 2, 0}, 3, ""},
     }},
    {"chunked",
     {CacheKind::Static, LayerType::Chunked, 4, 8},
     {
         {{1, 2, 3}, {0, 1, 2}, {4, 0}, {1, 2, 3, 0}, {1, 2, 3, 0}, 3, ""},
         {{4, 5}, {3, 4}, {5, 0}, {1, 2, 3, 4, 5}, {2, 3, 4, 5}, 5, ""},
         {{6, 7}, {5, 6}, {5, 2}, {3, 4, 5, 6, 7}, {4, 5, 6, 7}, 7, ""},
         {{8}, {7}, {4, 4}, {5, 6, 7, 8}, {5, 6, 7, 8}, 8, ""},
     }},
    {"chunked long prefill",
     {CacheKind::Static, LayerType::Chunked, 4, 8},
     {
         {{1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5}, {6, 0}, {1, 2, 3, 4, 5, 6}, {3, 4, 5, 6}, 6, ""},
         {{7}, {6}, {4, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}, 7, ""},
         {{8, 9, 10}, {7, 8, 9}, {6, 4}, {5, 6, 7, 8, 9, 10}, {7, 8, 9, 10}, 10, ""},
     }},
    {"chunked custom positions",
     {CacheKind::Static, LayerType::Chunked, 4, 8},
     {
         {{1, 2}, {0, 1}, {4, 0}, {1, 2, 0, 0}, {1, 2, 0, 0}, 2, ""},
         {{3}, {5}, {4, 2}, {}, {}, -1, "IndexError"},
     }},
    {"dynamic custom positions",
     {CacheKind::Dynamic, LayerType::Sliding, 4, 0},
     {
         {{1, 2}, {0, 1}, {2, 0}, {1, 2}, {1, 2}, 2, ""},
         {{3}, {6}, {3, 3}, {1, 2, 3}, {1, 2, 3}, 3, ""},
         {{4, 5}, {3, 4}, {5, 0}, {1, 2, 3, 4, 5}, {3, 4, 5}, 5, ""},
     }},
    {"sliding capacity from max_cache_len (W=5, L=3)",
     {CacheKind::Static, LayerType::Sliding, 5, 3},
     {
         {{1, 2}, {0, 1}, {3, 0}, {1, 2, 0}, {1, 2, 0}, 2, ""},
         {{3}, {2}, {3, 0}, {1, 2, 3}, {1, 2, 3}, 3, ""},
         {{4}, {3}, {3, 1}, {2, 3, 4}, {2, 3, 4}, 4, ""},
         {{5, 6}, {4, 5}, {3, 2}, {}, {}, -1, "RuntimeError"},
     }},
};

at::Tensor sequence(const std::vector<double>& v) {
  return from_values(v, {1, 1, static_cast<int64_t>(v.size()), 1}, DType::Float32);
}

TEST(PreMergeLayers, AgreeWithTransformers4562) {
  const Behaviours b = behaviours_for_release("4.56.2");
  ASSERT_EQ(b.sliding_layer, SlidingLayer::PreMerge);
  for (const Sequence& s : kMeasured) {
    auto layer = make_layer(s.spec, b);
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      SCOPED_TRACE(std::string(s.name) + ", step " + std::to_string(i));
      EXPECT_EQ(layer->mask_sizes_for_positions(st.cache_position), st.mask_sizes);
      if (st.raises == "RuntimeError") {  // the index assignment's shape mismatch
        EXPECT_THROW(layer->update(sequence(st.values), sequence(st.values), st.cache_position), std::runtime_error);
        break;
      }
      if (st.raises == "IndexError") {  // index_copy_ past the buffer
        EXPECT_THROW(layer->update(sequence(st.values), sequence(st.values), st.cache_position), std::out_of_range);
        break;
      }
      ASSERT_EQ(st.raises, "");
      const KV kv = layer->update(sequence(st.values), sequence(st.values), st.cache_position);
      EXPECT_EQ(values_of(kv.keys), st.returned);
      EXPECT_EQ(values_of(layer->keys()), st.stored);
      EXPECT_EQ(layer->seq_length(), st.seq_length);
    }
  }
}

// The same sequences through the merged layer (4.57's behaviours) must differ somewhere: the test
// above would not notice make_layer ignoring sliding_layer otherwise.
TEST(PreMergeLayers, MergedLayerDiffersOnTheMeasuredSequences) {
  int differences = 0;
  for (const Sequence& s : kMeasured) {
    auto layer = make_layer(s.spec, behaviours_for_release("4.57.6"));
    for (const Step& st : s.steps) {
      if (layer->mask_sizes_for_positions(st.cache_position) != st.mask_sizes) ++differences;
      try {
        const KV kv = layer->update(sequence(st.values), sequence(st.values), st.cache_position);
        if (!st.raises.empty() || values_of(kv.keys) != st.returned) ++differences;
      } catch (const std::exception&) {
        differences += st.raises.empty();
        break;
      }
      if (!st.raises.empty()) break;
    }
  }
  EXPECT_GE(differences, 5);
}

TEST(PreMergeLayers, SlidingLayerNeedsCachePosition) {
  auto layer = make_layer({CacheKind::Static, LayerType::Sliding, 4, 8}, behaviours_for_release("4.56.0"));
  EXPECT_THROW(layer->update(sequence({1}), sequence({1})), std::invalid_argument);
}

}  // namespace
}  // namespace kvc

// measure.py, run as PYTHONPATH=<pip install --target DIR transformers==4.56.2 --no-deps> python measure.py
// with torch 2.13.0+cpu:
// # Runs transformers 4.56.2's SlidingWindowLayer / ChunkedSlidingLayer / DynamicSlidingWindowLayer on
// # scalar sequences (B = H = D = 1, token t has value t) and prints what each step observes.
// import torch, transformers
// from transformers.cache_utils import SlidingWindowLayer, ChunkedSlidingLayer, DynamicSlidingWindowLayer
// print("# transformers", transformers.__version__, "torch", torch.__version__)
//
// def t(vals):
//     return torch.tensor(vals, dtype=torch.float32).view(1, 1, -1, 1)
//
// def flat(x):
//     return [int(v) for v in x.flatten().tolist()]
//
// def run(name, make, steps):
//     layer = make()
//     seen = 0
//     print(f"== {name}")
//     for step in steps:
//         vals, pos = step if isinstance(step, tuple) else (step, None)
//         if pos is None:
//             pos = list(range(seen, seen + len(vals)))
//         cp = torch.tensor(pos)
//         try:
//             kl, ko = layer.get_mask_sizes(cp)
//             sizes = (int(kl), int(ko))
//         except Exception as e:
//             sizes = f"{type(e).__name__}"
//         try:
//             k, v = layer.update(t(vals), t(vals), {"cache_position": cp})
//             print(f"  feed {vals} at {pos}: mask_sizes {sizes} returned {flat(k)} stored {flat(layer.keys)} seq_length {int(layer.get_seq_length())}")
//         except Exception as e:
//             print(f"  feed {vals} at {pos}: mask_sizes {sizes} RAISES {type(e).__name__}: {str(e)[:150]}")
//             break
//         seen += len(vals)
//
// W, L = 4, 8
// sl = lambda: SlidingWindowLayer(max_cache_len=L, sliding_window=W)
// ch = lambda: ChunkedSlidingLayer(max_cache_len=L, sliding_window=W)
// dy = lambda: DynamicSlidingWindowLayer(sliding_window=W)
// run("sliding decode", sl, [[1, 2], [3], [4], [5], [6]])
// run("sliding long prefill then decode", sl, [[1, 2, 3, 4, 5, 6], [7], [8]])
// run("sliding multi-token once full", sl, [[1, 2, 3, 4], [5, 6]])
// run("sliding multi-token after long prefill", sl, [[1, 2, 3, 4, 5, 6], [7, 8]])
// run("sliding becoming full within window", sl, [[1, 2, 3], [4, 5]])
// run("sliding more than capacity after some", sl, [[1, 2], [3, 4, 5, 6, 7], [8]])
// run("sliding exactly capacity", sl, [[1, 2, 3, 4], [5]])
// run("sliding custom positions", sl, [([1, 2], [1, 2]), ([3], [0])])
// run("chunked", ch, [[1, 2, 3], [4, 5], [6, 7], [8]])
// run("chunked long prefill", ch, [[1, 2, 3, 4, 5, 6], [7], [8, 9, 10]])
// run("chunked custom positions", ch, [([1, 2], [0, 1]), ([3], [5])])
// run("dynamic custom positions", dy, [([1, 2], [0, 1]), ([3], [6]), ([4, 5], [3, 4])])
// small = lambda: SlidingWindowLayer(max_cache_len=3, sliding_window=5)
// run("sliding capacity from max_cache_len (W=5, L=3)", small, [[1, 2], [3], [4], [5, 6]])
