// kvc-model-oracle MODEL_DIR TOKENS OUT [--float32]: the model oracle's logits for one sequence,
// raw little-endian float64 [n, vocab] into OUT, for comparing it with other forwards
// (engines/transformers/oracle_agreement.py holds it to transformers' own no-cache forward).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kvconform/engine/model.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: kvc-model-oracle MODEL_DIR TOKENS(1,2,3) OUT [--float32]\n";
    return 2;
  }
  try {
    const kvc::engine::Model model = kvc::engine::load_model(argv[1]);
    std::vector<int32_t> tokens;
    std::stringstream list(argv[2]);
    for (std::string t; std::getline(list, t, ',');) tokens.push_back(std::stoi(t));
    const bool f32 = argc > 4 && std::strcmp(argv[4], "--float32") == 0;
    const std::vector<double> logits = f32 ? kvc::engine::SequenceOracle<float>(model).extend(tokens)
                                           : kvc::engine::SequenceOracle<double>(model).extend(tokens);
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(double)));
    if (!out) throw std::runtime_error(std::string(argv[3]) + ": cannot be written");
    std::cout << "{\"n\": " << tokens.size() << ", \"vocab\": " << model.config.vocab << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "kvc-model-oracle: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
