// The plain model reference (engine/model_reference.h): one forward over a ModelConfig, written to
// be read top to bottom; a layer's blocks (its token mixer, its feed-forward, the streams beside the residual) are
// in blocks.h. Every family is the data of its description; nothing here is per family.
// The operations keep the order transformers' modeling code writes them in (x * rsqrt(mean + eps) *
// w, sums over their terms from the first, the softmax's weights then the values in key order), which
// is also the order SequenceOracle keeps through its tiles and lanes: the two agree bit for bit.
#include "kvconform/engine/model_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "blocks.h"

namespace kvc::engine {
namespace {

using namespace reference;

// A token's row of the residual stream: its embedding (a placeholder id's is id 0's; neomme's factorized table a row
// of R times its projection [H, R]), scaled, then ModernBERT's LayerNorm or muse_glimmer's weightless RMS norm of it.
Vec embed(const Model& model, const ModelConfig& k, int32_t t) {
  const Vec& table = model.at("model.embed_tokens.weight");
  const int64_t id = std::count(k.zero_tokens.begin(), k.zero_tokens.end(), t) ? 0 : t;
  const int64_t R = k.embed_width();
  Vec x(table.begin() + id * R, table.begin() + (id + 1) * R);
  if (k.embedding_rank > 0) x = linear(model.at("model.embed_tokens.embedding_projection.weight"), x, k.hidden);
  for (double& v : x) v *= k.embed_scale;
  if (k.embed_norm)
    x = norm(x, model.at("model.embed_norm.weight"), k.norm_bias ? &model.at("model.embed_norm.bias") : nullptr, k.eps, true,
             false);
  if (k.embed_rms_norm) rms_norm(x.data(), k.hidden, nullptr, k.eps, false);
  return x;
}

// Every residual add, one rule (after the attention whatever the norm placement, and after the MLP): x = keep * x + branch * block per dimension, or, where dory interpolates, x = h +
// branch * (block - h), h the block's normed input. keep and branch: 1 and `scale` (the plain add), ergo's gates w:
// sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2) and sigmoid(w), dory's rates |lambda * s|, muse_spark's gates g: alpha =
// sqrt(max(sigmoid(-g / T) (1 + beta), 1e-3)) and beta = sigmoid(g / T), beam's depth-scaled sqrt((d - 1) / d) and
// 1 / sqrt(d), d = 2(l + 1) after the attention and 2(l + 1) + 1 after the MLP.
void residual_add(const Layer& layer, Vec& x, const Vec& block, const Vec& h_in, bool mlp, double scale) {
  const ModelConfig& k = layer.k;
  const int64_t l = layer.l, H = k.hidden;
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  const double d = static_cast<double>(2 * (l + 1) + (mlp ? 1 : 0));
  for (int64_t i = 0; i < H; ++i) {
    double keep = 1, branch = scale;
    if (k.residual_gates) {
      const double g = w(mlp ? "feedforward_residual_gate.weight" : "attention_residual_gate.weight")[i];
      const double softplus = g > 20 ? g : std::log1p(std::exp(g));
      branch = 1 / (1 + std::exp(-g)), keep = std::sqrt(1 + branch) * std::exp(-0.5 * softplus);
    } else if (k.residual_interpolation > 0) {
      branch = std::abs(w(mlp ? "lambda_2" : "lambda_1")[i] * k.residual_interpolation);
      x[i] = h_in[i] + branch * (block[i] - h_in[i]);
      continue;
    } else if (k.residual_gate_temperature > 0) {
      const double g =
          w(mlp ? "post_feedforward_residual_gate.gate" : "post_attention_residual_gate.gate")[i] / k.residual_gate_temperature;
      branch = 1 / (1 + std::exp(-g)), keep = std::sqrt(std::max(1 / (1 + std::exp(g)) * (1 + branch), 1e-3));
    } else if (k.depth_scaled_residual) {
      keep = std::sqrt((d - 1) / d), branch = 1 / std::sqrt(d);
    }
    x[i] = keep * x[i] + branch * block[i];
  }
}

// A row's outputs after the final norm (its weight plain where final_norm_plain): the prediction head's, lm_head's
// logits; an encoder-decoder's encoder's rows are the final norm's.
void head(const Model& model, const ModelConfig& k, const Vec& x, std::vector<double>& logits) {
  const int64_t H = k.hidden;
  const Vec& unembed = model.at(k.tied || k.hidden_output ? "model.embed_tokens.weight" : "lm_head.weight");
  Vec y = norm(model, k, "model.norm.", x, k.eps, !k.final_norm_plain);
  if (k.hidden_output) {
    logits.insert(logits.end(), y.begin(), y.end());
    return;
  }
  if (k.prediction_head == PredictionHead::ModernBert) {  // head.norm(act(head.dense y)), head.norm a LayerNorm
    y = linear(model.at("head.dense.weight"), y, H, k.head_dense_bias ? &model.at("head.dense.bias") : nullptr);
    for (double& v : y) v = activate(k, v);
    y = norm(y, model.at("head.norm.weight"), k.norm_bias ? &model.at("head.norm.bias") : nullptr, k.eps, true, false);
  } else if (k.prediction_head == PredictionHead::Ultrabert) {  // gelu_tanh(linear2 gelu_tanh(linear1 y))
    y = linear(model.at("head.linear1.weight"), y, k.head_size);
    for (double& v : y) v = gelu_tanh(v);
    y = linear(model.at("head.linear2.weight"), y, H);
    for (double& v : y) v = gelu_tanh(v);
  }
  if (k.embedding_rank > 0) {  // neomme's factorized head: y^T U [R] (U the unembedding, tied: the embedding's), then lm_head
    const Vec& u = model.at(k.tied ? "model.embed_tokens.embedding_projection.weight" : "unembedding_projection.weight");
    Vec r(static_cast<size_t>(k.embedding_rank), 0.0);
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < k.embedding_rank; ++j) r[j] += y[i] * u[i * k.embedding_rank + j];
    y = std::move(r);
  }
  for (double v : linear(unembed, y, k.out_width(), k.lm_head_bias ? &model.at("lm_head.bias") : nullptr)) {
    v *= k.logit_scale;
    if (k.logit_channel_scale > 0) v *= model.at("lm_head.logit_scale")[logits.size() % k.out_width()] * k.logit_channel_scale;
    if (k.final_softcap > 0) v = std::tanh(v / k.final_softcap) * k.final_softcap;
    logits.push_back(v);
  }
}

// One stack's forward: its output rows (logits, or an encoder-decoder's encoder's final-normed hidden states). memory:
// the encoder's rows an encoder-decoder's decoder cross-attends (memory_real: the source's attention_mask).
std::vector<double> stack_forward(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                  const std::vector<bool>& real, const std::vector<Vec>& memory,
                                  const std::vector<bool>& memory_real);

}  // namespace

std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens, const std::vector<int32_t>& source,
                                     const std::vector<bool>& source_real) {
  return reference_logits(model, model.config, tokens, {}, source, source_real);
}

std::vector<double> reference_logits(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                     const std::vector<bool>& real, const std::vector<int32_t>& source,
                                     const std::vector<bool>& source_real) {
  std::vector<Vec> memory;
  if (k.encoder) {  // an encoder-decoder: its encoder's output rows over the source, the decoder's memory
    if (!model.encoder) throw std::invalid_argument(k.name + ": an encoder-decoder's model needs its encoder");
    if (!source_real.empty() && source_real.size() != source.size())
      throw std::invalid_argument("source_real: one entry per source token");
    const Vec rows = stack_forward(*model.encoder, *k.encoder, source, source_real, {}, {});
    for (size_t j = 0; j < source.size(); ++j)
      memory.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(j * k.cross_width),
                          rows.begin() + static_cast<std::ptrdiff_t>((j + 1) * k.cross_width));
  }
  return stack_forward(model, k, tokens, real, memory, source_real);
}

namespace {

std::vector<double> stack_forward(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                  const std::vector<bool>& real, const std::vector<Vec>& memory,
                                  const std::vector<bool>& memory_real) {
  if (!real.empty() && real.size() != tokens.size()) throw std::invalid_argument("real: one entry per token");
  const int64_t n = static_cast<int64_t>(tokens.size()), H = k.hidden;
  for (int32_t t : tokens)
    if (t < 0 || t >= k.vocab) throw std::invalid_argument("token " + std::to_string(t) + " is outside the vocabulary");
  const double post_eps = k.post_eps > 0 ? k.post_eps : k.eps;  // a sandwich's post-attention and post-MLP norms'
  if ((k.depth_scaled_residual || k.residual_gates || k.residual_interpolation > 0 || k.residual_gate_temperature > 0) &&
      (k.norm_placement != NormPlacement::Sandwich || k.parallel_block))
    throw std::invalid_argument(
        "ModelConfig's residual rules (depth_scaled_residual, residual_gates, residual_interpolation, "
        "residual_gate_temperature): modelled with the sandwich norms only");
  std::vector<Vec> x;
  for (int32_t t : tokens) x.push_back(embed(model, k, t));
  const std::vector<Vec> x0 = x;  // the layers' input (neomme's initial-state mix reads it in every layer)
  // Each position's per-layer inputs (one row per layer) and its AltUp streams.
  const int64_t P = k.per_layer_input, NA = k.altup_inputs;
  std::vector<Rows> pli(static_cast<size_t>(n)), streams(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    if (P > 0) pli[p] = per_layer_inputs(model, k, tokens[p], x[p]);
    if (NA > 0) streams[p] = altup_streams(model, k, x[p]);
  }
  // Per layer, every position's keys and values ([position][kv heads * head dim]); a layer that
  // shares K/V reads its source layer's.
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(k.layers)), values(static_cast<size_t>(k.layers));
  std::vector<Vec> entry;  // a looped section's input: the final norm of each row where its first pass begins
  for (int64_t l = 0; l < k.layers; ++l) {
    if (!k.loop_entries.empty() && k.loop_entries[static_cast<size_t>(l)]) {  // a pass begins: x = norm(x) + entry
      const bool first = entry.empty();
      for (int64_t p = 0; p < n; ++p) {
        const Vec y = norm(model, k, "model.norm.", x[p], k.eps, !k.final_norm_plain);
        if (first) entry.push_back(y);
        for (int64_t i = 0; i < H; ++i) x[p][i] = y[i] + entry[p][i];
      }
    }
    const Layer layer{model, k, l};
    auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
    const bool conv = k.conv(l), recurrent = k.recurrent(l), delta = k.delta(l);
    const Memory cross = memory_of(layer, memory, memory_real);
    // AltUp: every stream predicted; the layer runs on the active prediction.
    std::vector<Rows> pred(static_cast<size_t>(n));
    for (int64_t p = 0; p < n && NA > 0; ++p) x[p] = (pred[p] = altup_predict(layer, streams[p]))[k.altup_active];
    std::vector<Vec> h(static_cast<size_t>(n));  // the block's input
    // Post: no input norm; embed_norm: layer 0 reads the normed embeddings as they are.
    const bool in_norm = k.norm_placement != NormPlacement::Post && !(k.embed_norm && l == 0);
    for (int64_t p = 0; p < n; ++p) {
      Vec in = x[p];  // neomme: lambdas[0] * x + lambdas[1] * x0 goes into the norm; x stays the residual
      for (int64_t i = 0; k.initial_mix && i < H; ++i) in[i] = w("lambdas")[0] * x[p][i] + w("lambdas")[1] * x0[p][i];
      h[p] = in_norm ? norm(model, k, layer_name(l, "input_layernorm."), in, k.eps) : in;
    }
    // The token mixer: its rows before the output projection.
    const Rows mixed = delta       ? gated_delta_net(layer, h)
                       : recurrent ? rg_lru(layer, h)
                       : conv      ? short_conv(layer, h)
                                   : attention(layer, h, tokens, real, cross, keys, values);
    // The block's output projection, the norms around it and the feed-forward, per position.
    const std::string o = recurrent ? "temporal_block.linear_out."
                          : delta   ? "linear_attn.out_proj."
                          : conv    ? "conv.out_proj."
                                    : "self_attn.o_proj.";
    const bool o_bias = recurrent || (delta ? false : conv ? k.conv_bias : k.o_bias);
    for (int64_t p = 0; p < n; ++p) {
      Vec out = linear(w(o + "weight"), mixed[p], H, o_bias ? &w(o + "bias") : nullptr);
      Vec ff_in;
      switch (k.parallel_block ? NormPlacement::Pre : k.norm_placement) {
        case NormPlacement::Pre:
          residual_add(layer, x[p], out, h[p], false, k.parallel_block ? 1 : k.residual_scale);
          ff_in = k.parallel_block ? h[p] : norm(model, k, layer_name(l, k.pre_ff_norm), x[p], k.eps);
          break;
        case NormPlacement::Sandwich:
          if (k.post_attn_norm_weightless) rms_norm(out.data(), H, nullptr, post_eps, false);
          else out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, post_eps);
          residual_add(layer, x[p], out, h[p], false, 1);
          if (k.laurel_rank > 0) {  // LAuReL: (x + h + RMSNorm_w(right(left(h)))) / sqrt(2), h the attention's input
            Vec laurel = linear(w("laurel.linear_right.weight"), linear(w("laurel.linear_left.weight"), h[p], k.laurel_rank), H);
            laurel = norm(model, k, layer_name(l, "laurel.post_laurel_norm."), laurel, k.eps);
            for (int64_t i = 0; i < H; ++i) x[p][i] = (x[p][i] + (h[p][i] + laurel[i])) / M_SQRT2;
          }
          if (k.cross_width > 0 && !k.merged_cross_attention) {  // x += post_cross_attn_layernorm(cross_attn(...))
            const Vec co = cross_attention(layer, x[p], cross, post_eps);
            for (int64_t i = 0; i < H; ++i) x[p][i] += co[i];
          }
          ff_in = norm(model, k, layer_name(l, "pre_feedforward_layernorm."), x[p], k.eps);
          break;
        case NormPlacement::Post:
          out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, k.eps);
          residual_add(layer, x[p], out, h[p], false, 1);
          ff_in = x[p];
          break;
      }
      Vec ff = feed_forward(layer, ff_in);
      if (k.post_ff_norm_input_scaled) ff = input_scaled_norm(ff, w("post_feedforward_layernorm.weight"), post_eps);
      else if (k.norm_placement != NormPlacement::Pre)
        ff = norm(model, k, layer_name(l, "post_feedforward_layernorm."), ff,
                  k.norm_placement == NormPlacement::Sandwich ? post_eps : k.eps);
      residual_add(layer, x[p], ff, ff_in, true, k.residual_scale);
      if (P > 0 && NA == 0) {  // x += the branch of x
        const Vec added = per_layer_branch(layer, x[p], pli[p][l]);
        for (int64_t i = 0; i < H; ++i) x[p][i] += added[i];
      }
      if (k.layer_scalar)
        for (double& v : x[p]) v *= w("layer_scalar")[0];
      if (NA > 0) altup_correct(layer, streams[p], pred[p], x[p], P > 0 ? &pli[p][l] : nullptr);
    }
  }
  std::vector<double> logits;
  for (int64_t p = 0; p < n; ++p) head(model, k, NA > 0 ? altup_merge(model, k, streams[p]) : x[p], logits);
  return logits;
}

}  // namespace

}  // namespace kvc::engine
