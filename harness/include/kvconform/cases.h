// Scenario files (cases/*.json, schema in cases/schema.json, documented in cases/README.md).
// Loading validates against the JSON Schema and the rules a schema cannot express; any problem
// raises CaseError naming the file and the JSON pointer. No LibTorch here.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconform/scenario.h"

namespace kvc::cases {

class CaseError : public std::runtime_error {
 public:
  CaseError(std::string file, std::string pointer, const std::string& message);
  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }

 private:
  std::string file_, pointer_;
};

// Size caps (cases/README.md "Size caps", the same numbers as golden/validate_cases.py). A case past
// one is rejected when loaded, naming the field, before anything is allocated for it: a hostile
// "tokens": 2000000000 must be an exit 2, not an out-of-memory kill. Each cap is raised by its
// environment variable (KVC_MAX_TOKENS, ...); --allow-large (allow_large()) lifts them all.
struct Limits {
  int64_t tokens = 65536;         // over all steps of a case (KVC_MAX_TOKENS)
  int64_t steps = 4096;           // KVC_MAX_STEPS
  int64_t batch = 256;            // KVC_MAX_BATCH
  int64_t heads = 256;            // heads and kv_heads (KVC_MAX_HEADS)
  int64_t head_dim = 1024;        // KVC_MAX_HEAD_DIM
  int64_t window = 65536;         // KVC_MAX_WINDOW
  int64_t max_cache_len = 65536;  // KVC_MAX_CACHE_LEN
  // batch * heads * max(tokens, max_cache_len) * head_dim: the largest K/V/Q tensor (KVC_MAX_ELEMENTS).
  int64_t elements = int64_t{1} << 24;
  // batch * heads * step tokens * max(tokens so far, max_cache_len): one step's attention scores and
  // mask (KVC_MAX_SCORES).
  int64_t scores = int64_t{1} << 26;

  static Limits unlimited();  // every cap at INT64_MAX: only the int64 range is checked
};
// The caps load_case and parse_case apply: the defaults raised by KVC_MAX_* (read once; a value that
// is not a positive integer throws std::invalid_argument), or unlimited after allow_large().
const Limits& limits();
// Lifts every cap for this process and sets KVC_ALLOW_LARGE=1, so that child processes
// (golden/dump.py) lift theirs too.
void allow_large();

// Reads, validates and parses one case file.
Scenario load_case(const std::string& path);

// The case file of a scenario (cases/schema.json), what parse_case reads back: the same
// configuration, steps and inputs. Resets (steps of 0 tokens) have no place in a case file: throws
// std::invalid_argument on one, as on explicit inputs missing for a step.
nlohmann::ordered_json to_case_json(const Scenario& s);
// Validates and parses a case given as JSON text; `origin` names it in errors.
Scenario parse_case(const std::string& json_text, const std::string& origin);
Scenario parse_case(const std::string& json_text, const std::string& origin, const Limits& limits);
// JSON text parsed with the JSON pointer of a syntax error or an out-of-range number in the error
// ("file: /inputs/seed: number overflow parsing '1e400'"); the case and fixture loaders use it.
nlohmann::json parse_json(const std::string& text, const std::string& origin);
// Every *.json directly in `dir` (schema.json excepted), sorted by name.
std::vector<std::string> list_case_files(const std::string& dir);

// The schema every case is validated against (cases/schema.json, compiled in).
const std::string& schema_text();

std::string sha256_hex(const std::string& bytes);
std::string sha256_hex(const void* data, size_t size);
std::string read_file(const std::string& path);  // throws CaseError when unreadable

}  // namespace kvc::cases
