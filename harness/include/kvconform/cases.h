// Scenario files (cases/*.json, schema in cases/schema.json, documented in cases/README.md).
// Loading validates against the JSON Schema and the rules a schema cannot express; any problem
// raises CaseError naming the file and the JSON pointer. No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconform/inputs.h"
#include "kvconform/types.h"

namespace kvc::cases {

class CaseError : public std::runtime_error {
 public:
  CaseError(std::string file, std::string pointer, const std::string& message);
  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }

 private:
  std::string file_, pointer_;
};

struct Step {
  int64_t tokens = 0;
  std::optional<std::vector<int64_t>> cache_position;  // 4.57 API only
};

struct Case {
  std::string name, description, file;
  std::vector<std::string> tags;
  CacheKind cache = CacheKind::Static;
  std::vector<LayerType> layer_types;
  int64_t window = 0, max_cache_len = 0;
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 1;
  DType dtype = DType::Float32;
  LeftPadding left_padding;
  std::vector<Step> steps;
  // inputs: the generator (seed) or explicit per-step flat lists; explicit q may be absent.
  std::optional<uint64_t> seed;
  std::vector<std::vector<double>> explicit_q, explicit_k, explicit_v;
  std::vector<std::string> profiles;  // transformers versions this case applies to; empty = all
  std::string sha256;                 // of the file's bytes, as the fixtures record it

  LayerSpec layer_spec(size_t layer) const;
  int64_t total_tokens() const;
  bool applies_to(const std::string& transformers_version) const;
  // Row-major [batch, heads or kv_heads, tokens, head_dim] inputs of one step for one layer.
  std::vector<double> step_inputs(inputs::TensorId tensor, size_t layer, size_t step) const;
};

// Reads, validates and parses one case file.
Case load_case(const std::string& path);
// Validates and parses a case given as JSON text; `origin` names it in errors.
Case parse_case(const std::string& json_text, const std::string& origin);
// Every *.json directly in `dir` (schema.json excepted), sorted by name.
std::vector<std::string> list_case_files(const std::string& dir);

// The schema every case is validated against (cases/schema.json, compiled in).
const std::string& schema_text();

std::string sha256_hex(const std::string& bytes);
std::string read_file(const std::string& path);  // throws CaseError when unreadable

}  // namespace kvc::cases
