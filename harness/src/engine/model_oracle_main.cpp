// kvc-model-oracle MODEL_DIR TOKENS OUT [--float32] [--span-delta N] [--top-k-delta N] [--no-renormalize]
// [--no-shared-expert] [--shared-summed] [--select-by-score] [--no-router-softcap] [--conv-taps-dropped N]
// [--lru-decay-off] [--delta-decay-off] [--no-delta-gate] [--no-attention-gate] [--sigmoid-gate] [--no-residual-gate] [--no-attention-output-norm]
// [--post-norm-scales-after] [--no-router-scale] [--no-expert-norm] [--no-prediction-head] [--no-per-layer-input]
// [--no-laurel] [--no-activation-sparsity] [--altup-active N] [--no-mlp-limits] [--no-expert-limits]
// [--no-residual-gates] [--no-expert-norms] [--no-shared-norm] [--silu-mlp] [--no-gate-bias]
// [--plain-residual] [--no-nope-query-scale] [--no-value-scale] [--rms-norms]
// [--residual-add] [--no-query-scale] [--no-gate-scale] [--no-attention-sub-norm] [--no-mlp-sub-norm] [--no-mlp-scale]
// [--no-logit-scale] [--no-loop-entries] [--no-value-embeddings] [--no-exclusive-attention] [--no-initial-mix]
// [--unembedding-transposed]: the model oracle's logits for one sequence, raw
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
// out, --silu-mlp activates its ungated MLPs by SiLU instead of relu2. dory's rules: --rms-norms takes its L2 norms for
// weightless RMS norms (the mean of squares; the norms' weights read as ones), --residual-add adds each block where it
// interpolates, --no-query-scale, --no-gate-scale, --no-mlp-scale and --no-logit-scale leave the learned per-channel
// scales (sqk, s_gate, suv, logit_scale) out, --no-attention-sub-norm and --no-mlp-sub-norm the sub-norms before o_proj
// and down_proj, --no-loop-entries enters each pass of the looped section with x as it is (not norm(x) + its input).
// beam's rules' mutants: --no-gate-bias leaves the gate's bias per head out, --plain-residual adds each block's
// output to the residual (x + out) instead of the depth-scaled sum, --no-nope-query-scale leaves the NoPE layers'
// queries unscaled. --no-value-scale leaves mimo_v2_flash's attention_value_scale out. neomme's rules' mutants:
// --no-value-embeddings leaves its value embeddings out, --no-exclusive-attention its exclusive self-attention,
// --no-initial-mix the layers' mix of the initial state (the input norm reads x alone), --unembedding-transposed applies
// an untied factorized head's unembedding projection [H, H] as an nn.Linear (its transpose) instead of h @ W.
// --no-prediction-head reads a ModernBERT-layout model's logits straight from its final norm (its head.dense,
// activation and head.norm left out, as a loader that maps only the decoder to lm_head would). gemma3n's rules
// mutants: --no-per-layer-input leaves the per-layer input embeddings out, --no-laurel the LAuReL branch,
// --no-activation-sparsity the Gaussian cut of the gate activations, and --altup-active N runs the layers on AltUp's
// stream N (a misread altup_active_idx). An encoder
// (ModelConfig::bidirectional) runs its whole-sequence forward (encode) with --real MASK (comma-separated 1 / 0: the
// attention_mask, 0 = padding; default all 1); its --span-delta N widens each sliding layer's reach by N on both
// sides, and --causal lets no query see a later key (OracleOptions::causal): the encoder rules' mutants;
// --no-per-layer-input leaves embedding_gemma2's per-layer inputs out (ModelConfig::per_layer_input 0),
// --gate-up-interleaved reads openai_privacy_filter's experts' gate and up as gpt_oss's even and odd columns. An
// encoder-decoder (ModelConfig::encoder) decodes TOKENS against --source TOKENS (required; --source-real MASK its
// attention_mask): its --span-delta N moves the decoder's windows and the encoder's reach, --encoder-reach-delta N the
// encoder's reach alone (T5Gemma's 4.x encoder reached one key less: -1), --causal reads the encoder causally, and
// --cross-window lets the cross-attention of the decoder's sliding layers see only the last sliding_window source
// positions (a sliding cache of the encoder's output), --cross-softmax-apart gives a merged cross-attention's source
// keys a softmax of their own (t5gemma's rule on t5gemma2): the encoder-decoder's mutants. Prints
// {"n", "vocab", "span", "local_layers", "moe_layers", "experts", "top_k", "top_k_max", "renormalize",
// "shared_expert", "conv_layers", "recurrent_layers", "delta_layers", "conv_kernel", "attention_gate", "per_layer_input",
// "altup_inputs", "altup_active", "laurel_rank", "sparse_layers", "mlp_limits",
// "expert_limits", "ngpt", "loop_passes", "o_bias", "mlp_bias", "bidirectional", "seq2seq", "encoder_span",
// "encoder_local_layers", "merged_cross_attention", "value_embed_layers", "exclusive_attention", "initial_mix"} (the
// model's local span, how many layers slide or
// chunk, how many are MoE, and their routing, how many are convolutions, RG-LRU or gated DeltaNet blocks and their taps, the gate, and
// gemma3n's rules as read: 0 where the model has none; whether SwiGLU bounds are read; whether dory's nGPT rules are
// read (l2_norm), how many passes of a looped section begin, and whether o_proj and the MLP have biases: through a
// following norm, a sub-norm acts only by them and its epsilon; whether it is an encoder or an encoder-decoder, the
// encoder's widest reach and local layers, and the encoder rules read: t5gemma2's merged cross-attention, neomme's
// value-embedding layers, exclusive self-attention and initial-state mix).
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
           "[--conv-taps-dropped N] [--lru-decay-off] [--delta-decay-off] [--no-delta-gate] "
           "[--no-attention-gate] [--sigmoid-gate] [--no-gate-bias] [--plain-residual] "
           "[--no-nope-query-scale] [--no-value-scale] [--no-residual-gate] "
           "[--no-attention-output-norm] [--post-norm-scales-after] [--no-router-scale] [--no-expert-norm] [--no-prediction-head] "
           "[--no-per-layer-input] [--no-laurel] [--no-activation-sparsity] [--altup-active N] [--gate-up-interleaved] [--real MASK] "
           "[--no-mlp-limits] [--no-expert-limits] [--no-residual-gates] [--no-expert-norms] [--no-shared-norm] [--silu-mlp] "
           "[--rms-norms] [--residual-add] [--no-query-scale] [--no-gate-scale] [--no-attention-sub-norm] [--no-mlp-sub-norm] "
           "[--no-mlp-scale] [--no-logit-scale] [--no-loop-entries] [--no-value-embeddings] [--no-exclusive-attention] "
           "[--no-initial-mix] [--unembedding-transposed] [--causal] "
           "[--source TOKENS] [--source-real MASK] [--encoder-reach-delta N] [--cross-window] [--cross-softmax-apart]\n";
    return 2;
  }
  try {
    kvc::engine::Model model = kvc::engine::load_model(argv[1]);
    std::vector<int32_t> tokens;
    std::stringstream list(argv[2]);
    for (std::string t; std::getline(list, t, ',');) tokens.push_back(std::stoi(t));
    bool f32 = false;
    int64_t delta = 0;
    std::vector<bool> real;       // an encoder's attention_mask
    std::vector<int32_t> source;  // an encoder-decoder's source, and its attention_mask
    std::vector<bool> source_real;
    int64_t encoder_reach_delta = 0;
    kvc::engine::OracleOptions options;
    kvc::engine::MoeConfig& moe = model.config.moe;
    const kvc::engine::MoeConfig as_read = moe;
    const kvc::engine::ModelConfig config_as_read = model.config;  // gemma3n's rules, before a mutant's edit
    int64_t sparse_layers = 0;
    for (double p : config_as_read.activation_sparsity) sparse_layers += p > 0;
    int64_t loop_passes = 0;
    for (bool b : config_as_read.loop_entries) loop_passes += b;
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
      else if (std::strcmp(argv[i], "--no-gate-bias") == 0) model.config.attn_gate_bias = false;
      else if (std::strcmp(argv[i], "--plain-residual") == 0) model.config.depth_scaled_residual = false;
      else if (std::strcmp(argv[i], "--no-nope-query-scale") == 0) model.config.nope_query_length = 0;
      else if (std::strcmp(argv[i], "--no-value-scale") == 0) model.config.value_scale = 1;
      else if (std::strcmp(argv[i], "--rms-norms") == 0) {
        // The L2 norms as weightless RMS norms: the norms' weights, which an l2_norm model has none of, read as ones.
        kvc::engine::ModelConfig& c = model.config;
        c.l2_norm = false;
        model.tensors["model.norm.weight"].assign(static_cast<size_t>(c.hidden), 1.0);
        for (int64_t l = 0; l < c.layers; ++l)
          for (const char* n :
               {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"})
            model.tensors["model.layers." + std::to_string(l) + "." + n + ".weight"].assign(static_cast<size_t>(c.hidden), 1.0);
      } else if (std::strcmp(argv[i], "--residual-add") == 0) model.config.residual_interpolation = 0;
      else if (std::strcmp(argv[i], "--no-query-scale") == 0) model.config.query_channel_scale = 0;
      else if (std::strcmp(argv[i], "--no-gate-scale") == 0) model.config.attn_gate_scale = 0;
      else if (std::strcmp(argv[i], "--no-attention-sub-norm") == 0) model.config.attn_sub_norm = false;
      else if (std::strcmp(argv[i], "--no-mlp-sub-norm") == 0) model.config.mlp_sub_norm = false;
      else if (std::strcmp(argv[i], "--no-mlp-scale") == 0) model.config.mlp_channel_scale = 0;
      else if (std::strcmp(argv[i], "--no-logit-scale") == 0) model.config.logit_channel_scale = 0;
      else if (std::strcmp(argv[i], "--no-loop-entries") == 0) model.config.loop_entries.clear();
      else if (std::strcmp(argv[i], "--no-value-embeddings") == 0) model.config.value_embed_layers.clear();
      else if (std::strcmp(argv[i], "--no-exclusive-attention") == 0) model.config.exclusive_attention = false;
      else if (std::strcmp(argv[i], "--no-initial-mix") == 0) model.config.initial_mix = false;
      else if (std::strcmp(argv[i], "--unembedding-transposed") == 0) {
        // The factorized head's unembedding [H, R] applied as an nn.Linear (W h: its transpose), not h @ W: square only.
        kvc::engine::ModelConfig& c = model.config;
        const std::string name = c.tied ? "model.embed_tokens.embedding_projection.weight" : "unembedding_projection.weight";
        if (c.embedding_rank != c.hidden || c.tied)
          throw std::invalid_argument("--unembedding-transposed: an untied factorized head of rank hidden_size");
        std::vector<double>& u = model.tensors[name];
        for (int64_t i = 0; i < c.hidden; ++i)
          for (int64_t j = 0; j < i; ++j)
            std::swap(u[static_cast<size_t>(i * c.hidden + j)], u[static_cast<size_t>(j * c.hidden + i)]);
      } else if (std::strcmp(argv[i], "--conv-taps-dropped") == 0 && i + 1 < argc) {
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
      else if (std::strcmp(argv[i], "--source") == 0 && i + 1 < argc) {
        std::stringstream list_of(argv[++i]);
        for (std::string t; std::getline(list_of, t, ',');) source.push_back(std::stoi(t));
      } else if (std::strcmp(argv[i], "--source-real") == 0 && i + 1 < argc) {
        std::stringstream mask(argv[++i]);
        for (std::string b; std::getline(mask, b, ',');) source_real.push_back(b == "1");
      } else if (std::strcmp(argv[i], "--encoder-reach-delta") == 0 && i + 1 < argc) encoder_reach_delta = std::stoll(argv[++i]);
      else if (std::strcmp(argv[i], "--cross-window") == 0) options.cross_window = true;
      else if (std::strcmp(argv[i], "--cross-softmax-apart") == 0) options.cross_softmax_apart = true;
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
    const bool seq2seq = model.config.encoder != nullptr;
    if (delta != 0 && seq2seq) options.reach_delta = delta;  // and the decoder's windows (above)
    options.reach_delta += encoder_reach_delta;
    if (!real.empty() && !model.config.bidirectional) throw std::invalid_argument("--real: an encoder's attention_mask");
    if (seq2seq == source.empty()) throw std::invalid_argument("--source: an encoder-decoder's, and it needs one");
    if ((encoder_reach_delta != 0 || options.cross_window || options.cross_softmax_apart) && !seq2seq)
      throw std::invalid_argument("--encoder-reach-delta, --cross-window, --cross-softmax-apart: an encoder-decoder's");
    auto run = [&](auto oracle) {
      if (seq2seq) oracle.set_source(source, source_real);
      return model.config.bidirectional ? oracle.encode(tokens, real) : oracle.extend(tokens);
    };
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
    int64_t value_embed_layers = 0;
    for (bool b : config_as_read.value_embed_layers) value_embed_layers += b;
    // An encoder-decoder's encoder: its widest reach and how many of its layers are local (sensitivity.py sizes the
    // source by it and asks --encoder-reach-delta 1 to move the logits).
    int64_t encoder_span = 0, encoder_local = 0;
    if (seq2seq) {
      const kvc::engine::ModelConfig& e = *model.config.encoder;
      encoder_span = e.local_span();
      for (int64_t l = 0; l < e.layers; ++l) encoder_local += e.attention(l) != kvc::engine::Attention::Full;
    }
    // The renormalisation scales each token's routed sum by one factor: it reaches the logits only where a shared
    // expert joins that sum or no post-MLP norm (which erases a per-token scale) follows it (muse_spark and beam have neither).
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
              << ", \"expert_limits\": " << (moe_layers && !as_read.expert_limits.empty() ? "true" : "false")
              << ", \"ngpt\": " << (config_as_read.l2_norm ? "true" : "false") << ", \"loop_passes\": " << loop_passes
              << ", \"o_bias\": " << (config_as_read.o_bias ? "true" : "false")
              << ", \"mlp_bias\": " << (config_as_read.mlp_bias ? "true" : "false")
              << ", \"bidirectional\": " << (config_as_read.bidirectional ? "true" : "false")
              << ", \"seq2seq\": " << (seq2seq ? "true" : "false") << ", \"encoder_span\": " << encoder_span
              << ", \"encoder_local_layers\": " << encoder_local
              << ", \"merged_cross_attention\": " << (config_as_read.merged_cross_attention ? "true" : "false")
              << ", \"value_embed_layers\": " << value_embed_layers
              << ", \"exclusive_attention\": " << (config_as_read.exclusive_attention ? "true" : "false")
              << ", \"initial_mix\": " << (config_as_read.initial_mix ? "true" : "false") << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "kvc-model-oracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
