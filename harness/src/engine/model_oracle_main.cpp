// kvc-model-oracle MODEL_DIR TOKENS OUT [--float32] [--span-delta N] [--top-k-delta N] [--no-renormalize]
// [--no-shared-expert] [--shared-summed] [--select-by-score] [--no-router-softcap] [--conv-taps-dropped N]
// [--lru-decay-off] [--delta-decay-off] [--no-delta-gate] [--no-attention-gate] [--sigmoid-gate] [--no-residual-gate] [--no-attention-output-norm]
// [--post-norm-scales-after] [--no-router-scale] [--no-expert-norm] [--no-prediction-head] [--no-per-layer-input]
// [--no-laurel] [--no-activation-sparsity] [--altup-active N] [--no-mlp-limits] [--no-expert-limits]
// [--no-residual-gates] [--no-expert-norms] [--no-shared-norm] [--silu-mlp]: the model oracle's logits for one sequence, raw
// little-endian float64 [n, vocab] into OUT, for comparing it with other forwards
// (engines/transformers/oracle_agreement.py holds it to transformers' own no-cache forward).
// --span-delta N runs every sliding window and chunk N tokens larger (engines/models/sensitivity.py:
// does moving the window move the logits?). --top-k-delta N routes every token of a MoE layer to N more
// experts, --no-renormalize keeps the chosen routing weights as scored, --no-shared-expert leaves the shared
// expert out, --shared-summed adds the shared expert's output to the routed one without cohere2_moe's averaging
// (combined_scale 1), --select-by-score chooses kolibri1's experts by their sigmoid scores + bias, not their logits
// + bias (select_logits off), --no-router-softcap leaves laguna's soft-cap of the router's logits out
// (OracleOptions: the MoE rules' mutants, and sensitivity.py's check that the drawn expert constants act; each edits
// the model's description as a reader that got it wrong would). --conv-taps-dropped N gives every convolution layer
// (lfm3's, recurrent_gemma's recurrent blocks' and lara_mini's gated DeltaNet blocks') only its last conv_kernel - N
// taps (a state N rows short), --lru-decay-off runs the RG-LRU without its decay (lru_decay_scale 0: a = 1),
// --delta-decay-off the delta rule without its decay (delta_decay_scale 0: exp(g) = 1), --no-delta-gate its output norm
// without the silu(z) gate (delta_norm_gated false), --no-attention-gate leaves lfm3's
// attention gate out: the hybrid rules' mutants; --sigmoid-gate gates with a sigmoid where laguna's gate is a softplus.
// muse_spark's rules' mutants: --no-residual-gate adds each block's output to the residual plainly (x + block),
// --no-attention-output-norm leaves the per-head norm of the attention output (o_norm) out, --post-norm-scales-after
// applies the post-MLP norm's (1 + w) after normalising (muse_glimmer's order), --no-router-scale leaves the router's
// logits unscaled by output_multiplier, --no-expert-norm leaves each expert's post_expert_norm out.
// --no-mlp-limits leaves step3p7's SwiGLU bound of the dense MLP and the shared expert out, --no-expert-limits the
// routed experts' (ModelConfig::mlp_limits, MoeConfig::expert_limits). ergo's rules: --no-residual-gates adds each
// branch plainly, --no-expert-norms and --no-shared-norm leave the routed experts' and the shared expert's output norms
// out, --silu-mlp activates its ungated MLPs by SiLU instead of relu2.
// --no-prediction-head reads a ModernBERT-layout model's logits straight from its final norm (its head.dense,
// activation and head.norm left out, as a loader that maps only the decoder to lm_head would). gemma3n's rules
// mutants: --no-per-layer-input leaves the per-layer input embeddings out, --no-laurel the LAuReL branch,
// --no-activation-sparsity the Gaussian cut of the gate activations, and --altup-active N runs the layers on AltUp's
// stream N (a misread altup_active_idx). An encoder
// (ModelConfig::bidirectional) runs its whole-sequence forward (encode) with --real MASK (comma-separated 1 / 0: the
// attention_mask, 0 = padding; default all 1); its --span-delta N widens each sliding layer's reach by N on both
// sides, and --causal lets no query see a later key (OracleOptions::causal): the encoder rules' mutants;
// --no-per-layer-input leaves embedding_gemma2's per-layer inputs out (ModelConfig::per_layer_input 0),
// --gate-up-interleaved reads openai_privacy_filter's experts' gate and up as gpt_oss's even and odd columns. Prints
// {"n", "vocab", "span", "local_layers", "moe_layers", "experts", "top_k", "top_k_max", "renormalize",
// "shared_expert", "conv_layers", "recurrent_layers", "delta_layers", "conv_kernel", "attention_gate", "per_layer_input",
// "altup_inputs", "altup_active", "laurel_rank", "sparse_layers", "mlp_limits",
// "expert_limits"} (the model's local span, how many layers slide or
// chunk, how many are MoE, and their routing, how many are convolutions, RG-LRU or gated DeltaNet blocks and their taps,
// the gate, and gemma3n's rules as read: 0 where the model has none; whether SwiGLU bounds are read).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kvconform/engine/model.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr
        << "usage: kvc-model-oracle MODEL_DIR TOKENS(1,2,3) OUT [--float32] [--span-delta N] [--top-k-delta N] "
           "[--no-renormalize] [--no-shared-expert] [--shared-summed] [--select-by-score] [--no-router-softcap] "
           "[--conv-taps-dropped N] [--lru-decay-off] [--delta-decay-off] [--no-delta-gate] [--no-attention-gate] [--sigmoid-gate] [--no-residual-gate] "
           "[--no-attention-output-norm] [--post-norm-scales-after] [--no-router-scale] [--no-expert-norm] [--no-prediction-head] "
           "[--no-per-layer-input] [--no-laurel] [--no-activation-sparsity] [--altup-active N] [--gate-up-interleaved] [--real MASK] "
           "[--no-mlp-limits] [--no-expert-limits] [--no-residual-gates] [--no-expert-norms] [--no-shared-norm] [--silu-mlp] [--causal]\n";
    return 2;
  }
  try {
    kvc::engine::Model model = kvc::engine::load_model(argv[1]);
    std::vector<int32_t> tokens;
    std::stringstream list(argv[2]);
    for (std::string t; std::getline(list, t, ',');) tokens.push_back(std::stoi(t));
    bool f32 = false;
    int64_t delta = 0;
    std::vector<bool> real;  // an encoder's attention_mask
    kvc::engine::OracleOptions options;
    kvc::engine::MoeConfig& moe = model.config.moe;
    const kvc::engine::MoeConfig as_read = moe;
    const kvc::engine::ModelConfig config_as_read = model.config;  // gemma3n's rules, before a mutant's edit
    int64_t sparse_layers = 0;
    for (double p : config_as_read.activation_sparsity) sparse_layers += p > 0;
    const bool mlp_limits = !model.config.mlp_limits.empty();
    // The most experts a token can be routed to: those of the groups it may choose.
    const int64_t allowed = moe.routing == kvc::engine::MoeRouting::TopK
                                ? moe.topk_groups * (moe.experts / std::max<int64_t>(1, moe.groups))
                                : moe.experts;
    for (int i = 4; i < argc; ++i) {
      if (std::strcmp(argv[i], "--float32") == 0) f32 = true;
      else if (std::strcmp(argv[i], "--span-delta") == 0 && i + 1 < argc) delta = std::stoll(argv[++i]);
      else if (std::strcmp(argv[i], "--top-k-delta") == 0 && i + 1 < argc) {
        moe.top_k = std::clamp<int64_t>(moe.top_k + std::stoll(argv[++i]), 1, std::max<int64_t>(1, allowed));
      } else if (std::strcmp(argv[i], "--no-renormalize") == 0) moe.renormalize = false;
      else if (std::strcmp(argv[i], "--no-shared-expert") == 0) moe.shared_intermediate = 0, moe.shared_gate = false;
      else if (std::strcmp(argv[i], "--shared-summed") == 0) moe.combined_scale = 1;
      else if (std::strcmp(argv[i], "--select-by-score") == 0) moe.select_logits = false;
      else if (std::strcmp(argv[i], "--no-router-softcap") == 0) moe.router_softcap = 0;
      else if (std::strcmp(argv[i], "--sigmoid-gate") == 0) model.config.attn_gate_softplus = false;
      else if (std::strcmp(argv[i], "--no-residual-gate") == 0) model.config.residual_gate_temperature = 0;
      else if (std::strcmp(argv[i], "--no-attention-output-norm") == 0) model.config.attn_out_norm = false;
      else if (std::strcmp(argv[i], "--post-norm-scales-after") == 0) model.config.post_ff_norm_input_scaled = false;
      else if (std::strcmp(argv[i], "--no-router-scale") == 0) moe.router_scale = 1;
      else if (std::strcmp(argv[i], "--no-expert-norm") == 0) moe.expert_out_norm = false;
      else if (std::strcmp(argv[i], "--no-mlp-limits") == 0) model.config.mlp_limits.clear();
      else if (std::strcmp(argv[i], "--no-expert-limits") == 0) moe.expert_limits.clear();
      else if (std::strcmp(argv[i], "--no-residual-gates") == 0) model.config.residual_gates = false;
      else if (std::strcmp(argv[i], "--no-expert-norms") == 0) moe.expert_norms = false;
      else if (std::strcmp(argv[i], "--no-shared-norm") == 0) moe.shared_norm = false;
      else if (std::strcmp(argv[i], "--silu-mlp") == 0) model.config.relu2 = false;
      else if (std::strcmp(argv[i], "--conv-taps-dropped") == 0 && i + 1 < argc) {
        // The oldest N taps of each channel's kernel left out: conv.conv.weight [H, K] becomes [H, K - N].
        kvc::engine::ModelConfig& c = model.config;
        const int64_t drop = std::clamp<int64_t>(std::stoll(argv[++i]), 0, std::max<int64_t>(0, c.conv_kernel - 1));
        for (int64_t l = 0; l < c.layers; ++l) {
          if (!c.conv(l) && !c.recurrent(l) && !c.delta(l)) continue;
          std::vector<double>& w = model.tensors["model.layers." + std::to_string(l) +
                                                 (c.recurrent(l) ? ".temporal_block.conv_1d.weight"
                                                  : c.delta(l)   ? ".linear_attn.conv1d.weight"
                                                                 : ".conv.conv.weight")];
          std::vector<double> kept;
          for (int64_t ch = 0; ch < (c.recurrent(l) ? c.lru_width : c.delta(l) ? c.delta_conv_width() : c.hidden); ++ch)
            kept.insert(kept.end(), w.begin() + ch * c.conv_kernel + drop, w.begin() + (ch + 1) * c.conv_kernel);
          w = std::move(kept);
        }
        c.conv_kernel -= drop;
      } else if (std::strcmp(argv[i], "--lru-decay-off") == 0) model.config.lru_decay_scale = 0;
      else if (std::strcmp(argv[i], "--delta-decay-off") == 0) model.config.delta_decay_scale = 0;
      else if (std::strcmp(argv[i], "--no-delta-gate") == 0) model.config.delta_norm_gated = false;
      else if (std::strcmp(argv[i], "--no-attention-gate") == 0) model.config.attn_gate = false;
      else if (std::strcmp(argv[i], "--no-prediction-head") == 0)
        model.config.prediction_head = kvc::engine::PredictionHead::None;
      else if (std::strcmp(argv[i], "--no-per-layer-input") == 0) model.config.per_layer_input = 0;
      else if (std::strcmp(argv[i], "--no-laurel") == 0) model.config.laurel_rank = 0;
      else if (std::strcmp(argv[i], "--no-activation-sparsity") == 0) model.config.activation_sparsity.clear();
      else if (std::strcmp(argv[i], "--altup-active") == 0 && i + 1 < argc) {
        model.config.altup_active = std::stoll(argv[++i]);
        if (model.config.altup_active < 0 || model.config.altup_active >= model.config.altup_inputs)
          throw std::invalid_argument("--altup-active: the model's AltUp has no such stream");
      } else if (std::strcmp(argv[i], "--causal") == 0) options.causal = true;
      else if (std::strcmp(argv[i], "--gate-up-interleaved") == 0) moe.gate_up_halves = false;
      else if (std::strcmp(argv[i], "--real") == 0 && i + 1 < argc) {
        std::stringstream mask(argv[++i]);
        for (std::string b; std::getline(mask, b, ',');) real.push_back(b == "1");
      } else throw std::invalid_argument(std::string("unknown argument ") + argv[i]);
    }
    if (delta != 0 && model.config.bidirectional) {
      options.reach_delta = delta;
    } else if (delta != 0) {
      for (int64_t w : model.config.windows) options.windows.push_back(w > 0 ? std::max<int64_t>(1, w + delta) : 0);
      for (int64_t c : model.config.chunks) options.chunks.push_back(c > 0 ? std::max<int64_t>(1, c + delta) : 0);
    }
    if (!real.empty() && !model.config.bidirectional) throw std::invalid_argument("--real: an encoder's attention_mask");
    auto run = [&](auto oracle) { return model.config.bidirectional ? oracle.encode(tokens, real) : oracle.extend(tokens); };
    const std::vector<double> logits =
        f32 ? run(kvc::engine::SequenceOracle<float>(model, options)) : run(kvc::engine::SequenceOracle<double>(model, options));
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(double)));
    if (!out) throw std::runtime_error(std::string(argv[3]) + ": cannot be written");
    int64_t local = 0;
    for (int64_t l = 0; l < model.config.layers; ++l) local += model.config.attention(l) != kvc::engine::Attention::Full;
    int64_t moe_layers = 0;
    for (bool b : as_read.layers) moe_layers += b;
    int64_t conv_layers = 0;
    for (bool b : model.config.conv_layers) conv_layers += b;
    int64_t recurrent_layers = 0;
    for (bool b : model.config.recurrent_layers) recurrent_layers += b;
    int64_t delta_layers = 0;
    for (bool b : model.config.delta_layers) delta_layers += b;
    // The renormalisation scales each token's routed sum by one factor: it reaches the logits only where a shared
    // expert joins that sum or no post-MLP norm (which erases a per-token scale) follows it (muse_spark has neither).
    const bool renormalize = as_read.routing == kvc::engine::MoeRouting::TopK && as_read.renormalize &&
                             (as_read.shared_intermediate > 0 || model.config.norm_placement == kvc::engine::NormPlacement::Pre ||
                              model.config.parallel_block);
    std::cout << "{\"n\": " << tokens.size() << ", \"vocab\": " << model.config.vocab
              << ", \"span\": " << model.config.local_span() << ", \"local_layers\": " << local
              << ", \"moe_layers\": " << moe_layers << ", \"experts\": " << as_read.experts
              << ", \"top_k\": " << (moe_layers ? as_read.top_k : 0) << ", \"top_k_max\": " << (moe_layers ? allowed : 0)
              << ", \"renormalize\": " << (renormalize ? "true" : "false")
              << ", \"shared_expert\": " << (moe_layers && as_read.shared_intermediate > 0 ? "true" : "false")
              << ", \"conv_layers\": " << conv_layers << ", \"recurrent_layers\": " << recurrent_layers
              << ", \"delta_layers\": " << delta_layers << ", \"conv_kernel\": " << model.config.conv_kernel
              << ", \"attention_gate\": " << (model.config.attn_gate ? "true" : "false")
              << ", \"per_layer_input\": " << config_as_read.per_layer_input
              << ", \"altup_inputs\": " << config_as_read.altup_inputs << ", \"altup_active\": " << config_as_read.altup_active
              << ", \"laurel_rank\": " << config_as_read.laurel_rank << ", \"sparse_layers\": " << sparse_layers
              << ", \"mlp_limits\": " << (mlp_limits ? "true" : "false")
              << ", \"expert_limits\": " << (moe_layers && !as_read.expert_limits.empty() ? "true" : "false") << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "kvc-model-oracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
