// kvc-model-oracle MODEL_DIR TOKENS OUT [--float32] [--span-delta N]: the model oracle's logits for one
// sequence, raw little-endian float64 [n, vocab] into OUT, for comparing it with other forwards
// (engines/transformers/oracle_agreement.py holds it to transformers' own no-cache forward).
// --span-delta N runs every sliding window and chunk N tokens larger (engines/models/sensitivity.py:
// does moving the window move the logits?). Prints {"n", "vocab", "span", "local_layers"} (the model's local span, and how many
// layers slide or chunk).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kvconform/engine/model.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: kvc-model-oracle MODEL_DIR TOKENS(1,2,3) OUT [--float32] [--span-delta N]\n";
    return 2;
  }
  try {
    const kvc::engine::Model model = kvc::engine::load_model(argv[1]);
    std::vector<int32_t> tokens;
    std::stringstream list(argv[2]);
    for (std::string t; std::getline(list, t, ',');) tokens.push_back(std::stoi(t));
    bool f32 = false;
    int64_t delta = 0;
    for (int i = 4; i < argc; ++i) {
      if (std::strcmp(argv[i], "--float32") == 0) f32 = true;
      else if (std::strcmp(argv[i], "--span-delta") == 0 && i + 1 < argc) delta = std::stoll(argv[++i]);
      else throw std::invalid_argument(std::string("unknown argument ") + argv[i]);
    }
    kvc::engine::OracleOptions options;
    if (delta != 0) {
      for (int64_t w : model.config.windows) options.windows.push_back(w > 0 ? std::max<int64_t>(1, w + delta) : 0);
      for (int64_t c : model.config.chunks) options.chunks.push_back(c > 0 ? std::max<int64_t>(1, c + delta) : 0);
    }
    const std::vector<double> logits = f32 ? kvc::engine::SequenceOracle<float>(model, options).extend(tokens)
                                           : kvc::engine::SequenceOracle<double>(model, options).extend(tokens);
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(double)));
    if (!out) throw std::runtime_error(std::string(argv[3]) + ": cannot be written");
    int64_t local = 0;
    for (int64_t l = 0; l < model.config.layers; ++l) local += model.config.attention(l) != kvc::engine::Attention::Full;
    std::cout << "{\"n\": " << tokens.size() << ", \"vocab\": " << model.config.vocab << ", \"span\": " << model.config.local_span()
              << ", \"local_layers\": " << local << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "kvc-model-oracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
