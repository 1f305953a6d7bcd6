#include "kvconform/cases.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

namespace kvc::cases {

using nlohmann::json;

CaseError::CaseError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(file + ": " + (pointer.empty() ? "/" : pointer) + ": " + message),
      file_(std::move(file)),
      pointer_(std::move(pointer)) {}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  std::ostringstream os;
  for (unsigned int i = 0; i < len; ++i) os << std::hex << std::setw(2) << std::setfill('0') << int(digest[i]);
  return os.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CaseError(path, "", "cannot read the file");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

namespace {

// valijson names the path as ["<root>", "[steps]", "[0]", ...]; we print JSON pointers.
std::string pointer_of(const std::vector<std::string>& context) {
  std::string p;
  for (const std::string& c : context) {
    if (c == "<root>" || c.size() < 2 || c.front() != '[') continue;
    std::string part = c.substr(1, c.size() - 2);
    if (!part.empty() && part.front() == '"') part = part.substr(1, part.size() - 2);
    p += "/" + part;
  }
  return p;
}

const valijson::Schema& compiled_schema() {
  static const std::unique_ptr<valijson::Schema> schema = [] {
    auto s = std::make_unique<valijson::Schema>();
    const json doc = json::parse(schema_text());
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(doc), *s);
    return s;
  }();
  return *schema;
}

void validate_schema(const json& doc, const std::string& origin) {
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  if (validator.validate(compiled_schema(), valijson::adapters::NlohmannJsonAdapter(doc), &results)) return;
  // Report the deepest error: valijson lists the enclosing failures (allOf, properties) first.
  valijson::ValidationResults::Error error, deepest;
  while (results.popError(error))
    if (deepest.context.empty() || error.context.size() > deepest.context.size()) deepest = error;
  throw CaseError(origin, pointer_of(deepest.context), deepest.description);
}

std::vector<std::vector<double>> per_step(const json& j) {
  std::vector<std::vector<double>> out;
  for (const json& step : j) out.push_back(step.get<std::vector<double>>());
  return out;
}

// What the schema cannot say (the same rules as golden/validate_cases.py).
void check_semantics(const Case& c, const std::string& origin) {
  if (c.heads % c.kv_heads != 0)
    throw CaseError(origin, "/kv_heads", "kv_heads " + std::to_string(c.kv_heads) + " does not divide heads " +
                                             std::to_string(c.heads));
  if (c.left_padding && static_cast<int64_t>(c.left_padding->size()) != c.batch)
    throw CaseError(origin, "/left_padding", "has " + std::to_string(c.left_padding->size()) +
                                                 " entries, batch is " + std::to_string(c.batch));
  for (size_t s = 0; s < c.steps.size(); ++s)
    if (c.steps[s].cache_position && static_cast<int64_t>(c.steps[s].cache_position->size()) != c.steps[s].tokens)
      throw CaseError(origin, "/steps/" + std::to_string(s) + "/cache_position",
                      "has " + std::to_string(c.steps[s].cache_position->size()) + " entries for " +
                          std::to_string(c.steps[s].tokens) + " tokens");
  auto check_explicit = [&](const std::vector<std::vector<double>>& v, const char* name, int64_t heads) {
    if (v.empty()) return;
    if (v.size() != c.steps.size())
      throw CaseError(origin, std::string("/inputs/explicit/") + name,
                      "has " + std::to_string(v.size()) + " steps, the case has " + std::to_string(c.steps.size()));
    for (size_t s = 0; s < v.size(); ++s) {
      const size_t want = static_cast<size_t>(c.batch * heads * c.steps[s].tokens * c.head_dim);
      if (v[s].size() != want)
        throw CaseError(origin, std::string("/inputs/explicit/") + name + "/" + std::to_string(s),
                        "has " + std::to_string(v[s].size()) + " values, expected " + std::to_string(want) +
                            " (batch x heads x tokens x head_dim)");
    }
  };
  check_explicit(c.explicit_q, "q", c.heads);
  check_explicit(c.explicit_k, "k", c.kv_heads);
  check_explicit(c.explicit_v, "v", c.kv_heads);
}

}  // namespace

Case parse_case(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw CaseError(origin, "", std::string("invalid JSON at byte ") + std::to_string(e.byte) + ": " + e.what());
  }
  validate_schema(doc, origin);
  Case c;
  c.file = origin;
  c.sha256 = sha256_hex(text);
  c.name = doc.at("name").get<std::string>();
  const std::string stem = std::filesystem::path(origin).stem().string();
  if (std::filesystem::path(origin).extension() == ".json" && stem != c.name)
    throw CaseError(origin, "/name", "'" + c.name + "' differs from the file name '" + stem + "'");
  c.description = doc.value("description", "");
  c.tags = doc.value("tags", std::vector<std::string>{});
  c.cache = parse_cache_kind(doc.at("cache").get<std::string>());
  for (const json& t : doc.at("layer_types")) c.layer_types.push_back(parse_layer_type(t.get<std::string>()));
  c.window = doc.value("window", int64_t{0});
  c.max_cache_len = doc.value("max_cache_len", int64_t{0});
  c.batch = doc.at("batch").get<int64_t>();
  c.heads = doc.at("heads").get<int64_t>();
  c.kv_heads = doc.at("kv_heads").get<int64_t>();
  c.head_dim = doc.at("head_dim").get<int64_t>();
  c.dtype = parse_dtype(doc.at("dtype").get<std::string>());
  if (!doc.at("left_padding").is_null()) c.left_padding = doc.at("left_padding").get<std::vector<int64_t>>();
  for (const json& s : doc.at("steps")) {
    Step step;
    step.tokens = s.at("tokens").get<int64_t>();
    if (s.contains("cache_position")) step.cache_position = s.at("cache_position").get<std::vector<int64_t>>();
    c.steps.push_back(step);
  }
  const json& in = doc.at("inputs");
  if (in.contains("generator")) {
    c.seed = in.at("seed").get<uint64_t>();
  } else {
    const json& e = in.at("explicit");
    if (e.contains("q")) c.explicit_q = per_step(e.at("q"));
    c.explicit_k = per_step(e.at("k"));
    c.explicit_v = per_step(e.at("v"));
  }
  c.profiles = doc.value("profiles", std::vector<std::string>{});
  check_semantics(c, origin);
  return c;
}

Case load_case(const std::string& path) { return parse_case(read_file(path), path); }

std::vector<std::string> list_case_files(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw CaseError(dir, "", "not a directory");
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".json" && entry.path().filename() != "schema.json")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

LayerSpec Case::layer_spec(size_t layer) const { return {cache, layer_types.at(layer), window, max_cache_len}; }

int64_t Case::total_tokens() const {
  int64_t n = 0;
  for (const Step& s : steps) n += s.tokens;
  return n;
}

bool Case::applies_to(const std::string& version) const {
  return profiles.empty() || std::find(profiles.begin(), profiles.end(), version) != profiles.end();
}

std::vector<double> Case::step_inputs(inputs::TensorId tensor, size_t layer, size_t step) const {
  const std::vector<std::vector<double>>& given =
      tensor == inputs::kQuery ? explicit_q : tensor == inputs::kKey ? explicit_k : explicit_v;
  if (!given.empty()) return given.at(step);
  int64_t t0 = 0;
  for (size_t s = 0; s < step; ++s) t0 += steps[s].tokens;
  // An explicit case without q takes its queries from the generator with seed 0.
  const uint64_t s = seed.value_or(0);
  return inputs::block(s, tensor, layer, batch, tensor == inputs::kQuery ? heads : kv_heads, t0, steps.at(step).tokens,
                       head_dim);
}

}  // namespace kvc::cases
