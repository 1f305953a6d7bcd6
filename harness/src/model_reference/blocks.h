// The plain model reference's parts, internal to kvc_model_reference: the operations every block is written in
// (ops.cpp), a layer's token mixers (mixers.cpp: attention, the gated DeltaNet, the RG-LRU, the short convolution),
// its feed-forward (feed_forward.cpp: the MLP and the routed experts) and the streams some families carry beside the
// residual (streams.cpp: per-layer inputs, AltUp). model_reference.cpp is the forward that calls them, top to
// bottom. Each keeps the order of operations transformers' modeling code writes (SequenceOracle keeps it too: the two
// agree bit for bit), and each reads the family only through its ModelConfig: nothing here is per family.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvconform/engine/model.h"

namespace kvc::engine::reference {

using Vec = std::vector<double>;
using Rows = std::vector<Vec>;  // one row per position

// ---- operations (ops.cpp) ----
double dot(const double* a, const double* b, int64_t n);
// nn.Linear: out[r] = W[r, :] . x (+ bias[r]), W [rows, cols] row-major.
Vec linear(const Vec& w, const Vec& x, int64_t rows, const Vec* bias = nullptr);
// RMSNorm of x[0..n) in place; weight null: weightless; plus_one: gemma's (1 + w); l2: the L2 norm, x * rsqrt(sum x^2 +
// eps), the sum where RMS takes the mean (dory).
void rms_norm(double* x, int64_t n, const double* weight, double eps, bool plus_one, bool l2 = false);
// A norm of a whole row: a LayerNorm (centred first; plus its bias, where it has one) or an RMSNorm.
Vec norm(Vec x, const Vec& weight, const Vec* bias, double eps, bool layer_norm, bool plus_one);
// The model's norm named `name` ("model.norm."): a LayerNorm (cohere2; its bias where norm_bias) or an
// RMSNorm (gemma's 1 + w where gemma_norm and plus_one).
Vec norm(const Model& model, const ModelConfig& k, const std::string& name, const Vec& x, double eps, bool plus_one = true);
// An RMS norm of x * (1 + w), weightless after (muse_spark's input-scaled norm).
Vec input_scaled_norm(Vec x, const Vec& weight, double eps);
double sigmoid(double z);
double silu(double a);
double gelu_tanh(double a);
// The MLP's (and ModernBERT's head's) activation.
double activate(const ModelConfig& k, double a);
// Weights divided by their sum, after subtracting the largest (softmax of logits).
void softmax(Vec& v);
std::string layer_name(int64_t l, const std::string& what);
// The layer's rope frequencies over its rotary entries: base ** (-2i / d), the first `angles` of them
// (proportional rope; the rest 0), or YaRN's blend of them and them / factor.
Vec inv_freq(const ModelConfig& k, int64_t l);
// Rotates one head's first rd entries by pos * freq: pairs (i, i + rd/2), or (2i, 2i + 1) interleaved.
void rope(double* v, const Vec& freq, int64_t pos, bool interleaved, double scale);
// The layer's rule: may the query at `pos` see the key at j? An encoder's (bidirectional) query sees
// every key, on a sliding layer those from reach_before before it to reach_after after it.
bool visible(const ModelConfig& k, int64_t l, int64_t pos, int64_t j);

// One layer of a model: its config, and its weights by name ("self_attn.q_proj.weight").
struct Layer {
  const Model& model;
  const ModelConfig& k;
  int64_t l;
  const Vec& w(const std::string& what) const { return model.at(layer_name(l, what)); }
  Vec norm(const std::string& what, const Vec& x, double eps) const {
    return reference::norm(model, k, layer_name(l, what), x, eps);
  }
};

// ---- token mixers (mixers.cpp): from the block's normed input rows h, the rows before its output projection ----
// An encoder-decoder's memory as one decoder layer reads it: the layer's cross_attn k_proj and v_proj of every memory
// row (merged_cross_attention: its self_attn's, the keys through k_norm per head, no rope); real: the source's
// attention_mask (empty: every row real).
struct Memory {
  Rows keys, values;
  const std::vector<bool>& real;
};
Memory memory_of(const Layer& layer, const Rows& memory, const std::vector<bool>& real);
// Softmax attention over the keys the layer's rule shows each query (and a merged cross-attention's memory, in the
// same softmax): keys and values per layer, a layer that shares K/V reading its source layer's; real: the padding
// mask (no query sees a false position).
Rows attention(const Layer& layer, const Rows& h, const std::vector<int32_t>& tokens, const std::vector<bool>& real,
               const Memory& memory, std::vector<Rows>& keys, std::vector<Rows>& values);
// The separate cross-attention of an encoder-decoder's sandwich layer: post_cross_attn_layernorm(cross_attn(
// pre_cross_attn_layernorm(x))), every real memory row, no rope, no window.
Vec cross_attention(const Layer& layer, const Vec& x, const Memory& memory, double post_eps);
Rows gated_delta_net(const Layer& layer, const Rows& h);
Rows rg_lru(const Layer& layer, const Rows& h);
Rows short_conv(const Layer& layer, const Rows& h);

// ---- feed-forward (feed_forward.cpp) ----
// The layer's feed-forward of one normed row: the dense MLP, or on a MoE layer the routed experts plus the shared one.
Vec feed_forward(const Layer& layer, const Vec& h);

// ---- streams beside the residual (streams.cpp) ----
// A position's per-layer inputs, one row of per_layer_input per layer (gemma3n, embedding_gemma2), from its token and
// its scaled embedding x.
Rows per_layer_inputs(const Model& model, const ModelConfig& k, int32_t token, const Vec& x);
// The per-layer input's branch of a row s: norm(per_layer_projection(act(per_layer_input_gate s) * input)).
Vec per_layer_branch(const Layer& layer, const Vec& s, const Vec& input);
// AltUp (gemma3n): a position's streams from its embedding x (stream 0 x, stream i its altup_projections[i - 1] at x's
// RMS); every stream predicted from the active one's modalities (the layer runs on the active prediction); the layer's
// output y corrected into the streams; the streams merged into the row the final norm reads.
Rows altup_streams(const Model& model, const ModelConfig& k, const Vec& x);
Rows altup_predict(const Layer& layer, const Rows& streams);
void altup_correct(const Layer& layer, Rows& streams, const Rows& predicted, const Vec& y, const Vec* per_layer_input);
Vec altup_merge(const Model& model, const ModelConfig& k, Rows streams);

}  // namespace kvc::engine::reference
