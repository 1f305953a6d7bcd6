// A layer's feed-forward (blocks.h): the dense MLP, the routed experts of a MoE layer and its shared expert.
#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

namespace kvc::engine::reference {
namespace {

// The routed experts of a MoE layer for one normed row h (MoeConfig tells the routings apart).
Vec routed_experts(const Model& model, const ModelConfig& k, int64_t l, const Vec& h) {
  const MoeConfig& moe = k.moe;
  const int64_t E = moe.experts, I = moe.intermediate, H = k.expert_width();  // muse_spark's experts: its pooled width
  auto w = [&](const std::string& what) -> const Vec& { return model.at(layer_name(l, k.mlp_prefix + what)); };
  const bool llama4 = moe.routing == MoeRouting::Llama4, gpt_oss = moe.routing == MoeRouting::GptOss;
  Vec logits = linear(w(moe.router + "weight"), h, E, gpt_oss ? &w("router.bias") : nullptr);
  for (double& v : logits) v = moe.router_scale != 1 ? v * moe.router_scale : v;
  for (double& v : logits) v = moe.router_softcap > 0 ? std::tanh(v / moe.router_softcap) * moe.router_softcap : v;
  Vec score = logits;
  if (moe.routing == MoeRouting::TopK && moe.score == MoeScore::Softmax) softmax(score);
  if (moe.routing == MoeRouting::TopK && moe.score == MoeScore::Sigmoid)
    for (double& s : score) s = sigmoid(s);
  Vec choice = moe.select_logits ? logits : score;
  if (moe.selection_bias)
    for (int64_t e = 0; e < E; ++e) choice[e] += w(moe.router + "e_score_correction_bias")[e];
  if (moe.groups > 1) {  // only the experts of the topk_groups groups whose two best choices sum highest
    const int64_t per = E / moe.groups;
    Vec group_score;
    for (int64_t g = 0; g < moe.groups; ++g) {
      Vec members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(members.begin(), members.end(), std::greater<double>());
      group_score.push_back(members[0] + members[1]);
    }
    std::vector<int64_t> groups(static_cast<size_t>(moe.groups));
    for (int64_t g = 0; g < moe.groups; ++g) groups[g] = g;
    std::stable_sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return group_score[a] > group_score[b]; });
    for (int64_t r = moe.topk_groups; r < moe.groups; ++r)
      for (int64_t e = groups[r] * per; e < (groups[r] + 1) * per; ++e) choice[e] = -INFINITY;
  }
  std::vector<int64_t> chosen(static_cast<size_t>(E));  // best first; ties to the lower index
  for (int64_t e = 0; e < E; ++e) chosen[e] = e;
  std::stable_sort(chosen.begin(), chosen.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
  chosen.resize(static_cast<size_t>(moe.top_k));
  Vec weight;
  for (int64_t e : chosen) weight.push_back(llama4 ? sigmoid(logits[e]) : gpt_oss ? logits[e] : score[e]);
  if (gpt_oss || moe.score == MoeScore::TopKSoftmax) softmax(weight);
  if (moe.routing == MoeRouting::TopK) {
    double sum = 0;
    for (double v : weight) sum += v;
    for (double& v : weight) v = (moe.renormalize ? v / (sum + moe.renormalize_eps) : v) * moe.routed_scale;
  }
  // muse_spark: the experts read pre_expert_norm(pre_expert_proj h), (1 + w).
  const Vec x = moe.pooled > 0
                    ? norm(linear(w("pre_expert_proj.weight"), h, H), w("pre_expert_norm.weight"), nullptr, k.eps, false, true)
                    : h;
  const int64_t cols = k.mlp_ungated ? I : 2 * I;  // ergo's experts have an up projection only
  const Vec& gate_up = w(k.mlp_ungated ? "experts.up_proj" : "experts.gate_up_proj");  // [E, H, 2I] (ergo [E, H, I]): x @ W
  const Vec& down = w("experts.down_proj");                                            // [E, I, H]
  Vec out(static_cast<size_t>(H), 0.0);
  for (size_t r = 0; r < chosen.size(); ++r) {
    const int64_t e = chosen[r];
    Vec in = x;
    if (llama4)  // llama4 scales the expert's input, the others its output
      for (double& v : in) v *= weight[r];
    Vec gate(static_cast<size_t>(I)), up(static_cast<size_t>(I));
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += in[i] * gate_up[(e * H + i) * cols + c];
      if (gpt_oss) s += w("experts.gate_up_proj_bias")[e * 2 * I + c];
      // gpt_oss: gate and up are the even and odd columns (unless gate_up_halves); ergo: up alone; the others: the halves.
      (gpt_oss && !moe.gate_up_halves ? (c % 2 ? up[c / 2] : gate[c / 2])
       : k.mlp_ungated                ? up[c]
                                      : (c < I ? gate[c] : up[c - I])) = s;
    }
    for (int64_t i = 0; i < I; ++i) {
      if (gpt_oss) {  // the clamped SwiGLU
        const double g = std::min(gate[i], moe.swiglu_limit), u = std::clamp(up[i], -moe.swiglu_limit, moe.swiglu_limit);
        gate[i] = (u + 1) * (g / (1 + std::exp(-g * moe.swiglu_alpha)));
      } else if (k.mlp_ungated) {
        gate[i] = activate(k, up[i]);
      } else {
        const double c = moe.expert_limits.empty() ? 0 : moe.expert_limits[static_cast<size_t>(l)];  // step3p7's bound
        gate[i] = (c > 0 ? std::clamp(up[i], -c, c) : up[i]) * (c > 0 ? std::min(silu(gate[i]), c) : silu(gate[i]));
      }
    }
    Vec y(static_cast<size_t>(H));
    Vec expert(static_cast<size_t>(H));
    for (int64_t c = 0; c < H; ++c)
      for (int64_t i = 0; i < I; ++i) expert[c] += gate[i] * down[(e * I + i) * H + c];
    if (moe.expert_norms)  // ergo: the expert's own RMS norm of its output, before its weight
      rms_norm(expert.data(), H, w("experts.post_expert_norm.weight").data() + e * H, k.eps, false);
    for (int64_t c = 0; c < H; ++c) {
      double s = expert[c];
      if (gpt_oss) s += w("experts.down_proj_bias")[e * H + c];
      y[c] = s;
    }
    if (moe.expert_out_norm) y = input_scaled_norm(y, w("experts.post_expert_norm.weight"), k.post_eps > 0 ? k.post_eps : k.eps);
    for (int64_t c = 0; c < H; ++c) out[c] += llama4 ? y[c] : y[c] * weight[r];
  }
  return moe.pooled > 0 ? linear(w("post_expert_proj.weight"), out, k.hidden) : out;
}

}  // namespace

Vec feed_forward(const Layer& layer, const Vec& h) {
  const Model& model = layer.model;
  const ModelConfig& k = layer.k;
  const int64_t l = layer.l;
  const bool moe = !k.moe.layers.empty() && k.moe.layers[static_cast<size_t>(l)];
  const int64_t I = moe ? k.moe.shared_intermediate : k.intermediate;
  Vec out(static_cast<size_t>(k.hidden), 0.0);
  if (I > 0) {  // act(gate h) * (up h), then down
    const std::string p = k.mlp_prefix + (moe ? k.moe.shared : "");
    auto proj = [&](const std::string& what, const Vec& in, int64_t rows) {  // with its bias where mlp_bias (not an expert)
      return linear(model.at(layer_name(l, p + what + "weight")), in, rows,
                    k.mlp_bias && !moe ? &model.at(layer_name(l, p + what + "bias")) : nullptr);
    };
    Vec u = proj("up_proj.", h, I);
    Vec g = k.mlp_ungated ? u : proj("gate_proj.", h, I);
    for (int64_t i = 0; k.mlp_channel_scale > 0 && i < I; ++i) {  // dory: times suv * s per channel
      g[i] *= model.at(layer_name(l, "mlp.suv_gate"))[i] * k.mlp_channel_scale;
      u[i] *= model.at(layer_name(l, "mlp.suv_up"))[i] * k.mlp_channel_scale;
    }
    if (!k.activation_sparsity.empty() && k.activation_sparsity[static_cast<size_t>(l)] > 0) {
      // gemma3n: relu(g - (mean(g) + std(g) * z)), the population std, z the target's normal quantile.
      double mean = 0, var = 0;
      for (double v : g) mean += v;
      mean /= static_cast<double>(I);
      for (double v : g) var += (v - mean) * (v - mean);
      const double cutoff = mean + std::sqrt(var / static_cast<double>(I)) * sparsity_quantile(k.activation_sparsity[l]);
      for (double& v : g) v = std::max(v - cutoff, 0.0);
    }
    // step3p7's bound after the activation (mlp_limits): act(gate) <= c, -c <= up <= c.
    const double c = k.mlp_limits.empty() ? 0 : k.mlp_limits[static_cast<size_t>(l)];
    for (int64_t i = 0; i < I; ++i)
      g[i] = k.mlp_ungated
                 ? activate(k, u[i])  // ergo: down(act(up h)), no gate
                 : (c > 0 ? std::min(activate(k, g[i]), c) : activate(k, g[i])) * (c > 0 ? std::clamp(u[i], -c, c) : u[i]);
    if (k.mlp_sub_norm) rms_norm(g.data(), I, nullptr, k.eps, false, k.l2_norm);  // dory's sub-norm before down_proj
    out = proj("down_proj.", g, k.hidden);
    if (moe && k.moe.shared_gate) {
      const double gate =
          sigmoid(dot(model.at(layer_name(l, k.mlp_prefix + "shared_expert_gate.weight")).data(), h.data(), k.hidden));
      for (double& v : out) v *= gate;
    }
    if (moe && k.moe.shared_norm) rms_norm(out.data(), k.hidden, model.at(layer_name(l, p + "norm.weight")).data(), k.eps, false);
  }
  if (moe) {
    const Vec routed = routed_experts(model, k, l, h);
    for (int64_t i = 0; i < k.hidden; ++i) out[i] = (out[i] + routed[i]) * k.moe.combined_scale;
  }
  return out;
}

}  // namespace kvc::engine::reference
