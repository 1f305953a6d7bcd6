#include "kvconform/cases.h"

#include "kvconform/json_schema.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace kvc::cases {

using nlohmann::json;

CaseError::CaseError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(file + ": " + (pointer.empty() ? "/" : pointer) + ": " + message),
      file_(std::move(file)),
      pointer_(std::move(pointer)) {}

std::string sha256_hex(const std::string& bytes) { return sha256_hex(bytes.data(), bytes.size()); }

std::string sha256_hex(const void* data, size_t size) {
  // OpenSSL 3 looks the algorithm up on every EVP_sha256() digest (most of the cost for the small
  // buffers golden replay hashes): fetch it once per thread and reuse one context.
  struct Sha256 {
    EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Sha256() {
      EVP_MD_CTX_free(ctx);
      EVP_MD_free(md);
    }
  };
  thread_local Sha256 sha;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!sha.md || !sha.ctx || EVP_DigestInit_ex(sha.ctx, sha.md, nullptr) != 1 || EVP_DigestUpdate(sha.ctx, data, size) != 1 ||
      EVP_DigestFinal_ex(sha.ctx, digest, &len) != 1)
    throw std::runtime_error("sha256: OpenSSL failed");
  static const char* hex = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CaseError(path, "", "cannot read the file");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

namespace {

// A JSON pointer token: '~' and '/' escaped (RFC 6901).
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char ch : key) out += ch == '~' ? "~0" : ch == '/' ? "~1" : std::string(1, ch);
  return out;
}

// nlohmann's DOM builder, plus the JSON pointer of the value being read: a syntax error or a number
// that fits no C++ type is reported where it is ("/steps/3/tokens"), not at a byte offset alone.
class PointerSax {
 public:
  PointerSax(json& out, const std::string& origin) : dom_(out, true), origin_(origin) {}
  bool null() { return next(dom_.null()); }
  bool boolean(bool v) { return next(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return next(dom_.number_integer(v)); }
  bool number_unsigned(json::number_unsigned_t v) {
    // Above INT64_MAX: every integer field is int64_t, and get<int64_t>() would wrap it negative.
    if (v > static_cast<json::number_unsigned_t>(std::numeric_limits<int64_t>::max()))
      throw CaseError(origin_, pointer(), std::to_string(v) + " is out of the 64-bit integer range");
    return next(dom_.number_unsigned(v));
  }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    // An integer literal past 2^64 arrives as a float; it is an integer that fits no integer type.
    if (text.find_first_of(".eE") == std::string::npos)
      throw CaseError(origin_, pointer(), text + " is out of the 64-bit integer range");
    return next(dom_.number_float(v, text));
  }
  bool string(json::string_t& v) { return next(dom_.string(v)); }
  bool binary(json::binary_t& v) { return next(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    path_.push_back({false, 0, {}});
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    path_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    path_.pop_back();
    return next(dom_.end_object());
  }
  bool start_array(std::size_t n) {
    path_.push_back({true, 0, {}});
    return dom_.start_array(n);
  }
  bool end_array() {
    path_.pop_back();
    return next(dom_.end_array());
  }
  bool parse_error(std::size_t byte, const std::string& token, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." -> "parse error at ..."
    if (const size_t close = what.find("] "); what.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    if (e.id == 406) throw CaseError(origin_, pointer(), what);  // "number overflow parsing '1e400'"
    throw CaseError(origin_, pointer(), "invalid JSON at byte " + std::to_string(byte) + ": " + what);
  }

 private:
  struct Level {
    bool array;
    size_t index;
    std::string key;
  };
  // After a value: the enclosing array moves on to its next element.
  bool next(bool ok) {
    if (!path_.empty() && path_.back().array) ++path_.back().index;
    return ok;
  }
  std::string pointer() const {
    std::string p;
    for (const Level& l : path_) p += "/" + (l.array ? std::to_string(l.index) : pointer_token(l.key));
    return p;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const std::string& origin_;
  std::vector<Level> path_;
};

bool large_allowed = false;

int64_t env_cap(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno == ERANGE || n < 1)
    throw std::invalid_argument(std::string(name) + "=" + v + ": a cap is a positive integer");
  return n;
}

}  // namespace

json parse_json(const std::string& text, const std::string& origin) {
  json doc;
  PointerSax sax(doc, origin);
  json::sax_parse(text, &sax);
  return doc;
}

Limits Limits::unlimited() {
  Limits l;
  for (int64_t* cap : {&l.tokens, &l.steps, &l.batch, &l.heads, &l.head_dim, &l.window, &l.max_cache_len, &l.elements, &l.scores})
    *cap = std::numeric_limits<int64_t>::max();
  return l;
}

const Limits& limits() {
  static const Limits unlimited = Limits::unlimited();
  if (large_allowed) return unlimited;
  static const Limits from_env = [] {
    const char* all = std::getenv("KVC_ALLOW_LARGE");
    if (all && std::string(all) == "1") return Limits::unlimited();
    Limits l;
    l.tokens = env_cap("KVC_MAX_TOKENS", l.tokens);
    l.steps = env_cap("KVC_MAX_STEPS", l.steps);
    l.batch = env_cap("KVC_MAX_BATCH", l.batch);
    l.heads = env_cap("KVC_MAX_HEADS", l.heads);
    l.head_dim = env_cap("KVC_MAX_HEAD_DIM", l.head_dim);
    l.window = env_cap("KVC_MAX_WINDOW", l.window);
    l.max_cache_len = env_cap("KVC_MAX_CACHE_LEN", l.max_cache_len);
    l.elements = env_cap("KVC_MAX_ELEMENTS", l.elements);
    l.scores = env_cap("KVC_MAX_SCORES", l.scores);
    return l;
  }();
  return from_env;
}

void allow_large() {
  large_allowed = true;
  setenv("KVC_ALLOW_LARGE", "1", 1);
}

namespace {

const JsonSchema& compiled_schema() {
  static const JsonSchema schema(schema_text());
  return schema;
}

// The releases a case applies to were once called "profiles"; that key is still read as a deprecated
// alias of "releases" (cases/README.md), but a case may not give both.
constexpr const char* kReleasesAlias = "profiles";
const char* releases_key(const json& doc) { return doc.contains("releases") ? "releases" : kReleasesAlias; }

// valijson matches "pattern" with std::regex, which recurses once per character: a name of 60,000
// characters overflowed the stack (a hand-made input to fuzz/case_fuzz.cpp). Strings with a pattern get
// the schema's maxLength checked first, with validate_cases.py's message. Giving both "releases" and
// its alias is refused here too, before the schema's less specific message.
void check_pattern_lengths(const json& doc, const std::string& origin) {
  if (!doc.is_object()) return;
  if (doc.contains("releases") && doc.contains(kReleasesAlias))
    throw CaseError(origin, std::string("/") + kReleasesAlias,
                    "'profiles' is the deprecated name of 'releases'; give only 'releases'");
  auto check = [&](const json& v, const std::string& ptr, size_t max) {
    if (v.is_string() && v.get_ref<const std::string&>().size() > max)
      throw CaseError(origin, ptr,
                      "a string of " + std::to_string(v.get_ref<const std::string&>().size()) + " characters, longer than " +
                          std::to_string(max));
  };
  if (doc.contains("name")) check(doc.at("name"), "/name", 128);
  const std::string key = releases_key(doc);
  if (doc.contains(key) && doc.at(key).is_array())
    for (size_t i = 0; i < doc.at(key).size(); ++i) check(doc.at(key)[i], "/" + key + "/" + std::to_string(i), 32);
}

void validate_schema(const json& doc, const std::string& origin) {
  check_pattern_lengths(doc, origin);
  if (const auto violation = compiled_schema().check(doc)) throw CaseError(origin, violation->pointer, violation->message);
}

std::vector<std::vector<double>> per_step(const json& j) {
  std::vector<std::vector<double>> out;
  for (const json& step : j) out.push_back(step.get<std::vector<double>>());
  return out;
}

// a * b, or INT64_MAX when that overflows: the caps compare products of capped (or, with
// --allow-large, uncapped) int64 fields.
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// The size caps (Limits), checked on the schema-valid document before any of it is copied out. The
// same checks, order and messages as golden/validate_cases.py's limit_errors().
void check_limits(const json& doc, const std::string& origin, const Limits& L) {
  auto over = [&](const std::string& ptr, const std::string& value, int64_t cap, const char* unit, const char* env) {
    throw CaseError(
        origin, ptr,
        value + " exceeds the cap of " + std::to_string(cap) + " " + unit + " (raise with --allow-large or " + env + ")");
  };
  auto field = [&](const char* name, int64_t cap, const char* unit, const char* env) -> int64_t {
    const int64_t v = doc.value(name, int64_t{0});
    if (v > cap) over(std::string("/") + name, std::to_string(v), cap, unit, env);
    return v;
  };
  const int64_t batch = field("batch", L.batch, "rows per batch", "KVC_MAX_BATCH");
  const int64_t heads = field("heads", L.heads, "heads", "KVC_MAX_HEADS");
  field("kv_heads", L.heads, "heads", "KVC_MAX_HEADS");
  const int64_t head_dim = field("head_dim", L.head_dim, "features per head", "KVC_MAX_HEAD_DIM");
  field("window", L.window, "tokens of window", "KVC_MAX_WINDOW");
  const int64_t cache_len = field("max_cache_len", L.max_cache_len, "rows of cache", "KVC_MAX_CACHE_LEN");
  const json& steps = doc.at("steps");
  if (static_cast<int64_t>(steps.size()) > L.steps)
    over("/steps", std::to_string(steps.size()) + " steps", L.steps, "steps per case", "KVC_MAX_STEPS");
  const int64_t bh = mul(batch, heads);
  if (mul(mul(bh, cache_len), head_dim) > L.elements)
    over("/max_cache_len", "batch*heads*max_cache_len*head_dim = " + std::to_string(mul(mul(bh, cache_len), head_dim)),
         L.elements, "elements per tensor", "KVC_MAX_ELEMENTS");
  int64_t total = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::string ptr = "/steps/" + std::to_string(s) + "/tokens";
    const int64_t q = steps[s].value("tokens", int64_t{0});  // a call step feeds no tokens
    if (q > L.tokens) over(ptr, std::to_string(q), L.tokens, "tokens per case", "KVC_MAX_TOKENS");
    total += q;  // both <= the cap, which is < 2^63: no overflow
    if (total > L.tokens)
      over(ptr, "the case's " + std::to_string(total) + " tokens so far", L.tokens, "tokens per case", "KVC_MAX_TOKENS");
    const int64_t rows = std::max(total, cache_len);
    if (mul(mul(bh, rows), head_dim) > L.elements)
      over(ptr, "batch*heads*tokens*head_dim = " + std::to_string(mul(mul(bh, rows), head_dim)), L.elements,
           "elements per tensor", "KVC_MAX_ELEMENTS");
    if (mul(mul(bh, q), rows) > L.scores)
      over(ptr, "batch*heads*step tokens*key rows = " + std::to_string(mul(mul(bh, q), rows)), L.scores,
           "attention scores per step", "KVC_MAX_SCORES");
    if (steps[s].contains("cache_position"))
      for (size_t i = 0; i < steps[s].at("cache_position").size(); ++i) {
        const int64_t p = steps[s].at("cache_position")[i].get<int64_t>();
        if (p >= L.tokens)
          over("/steps/" + std::to_string(s) + "/cache_position/" + std::to_string(i), "position " + std::to_string(p),
               L.tokens - 1, "(positions stay below the cap of tokens per case)", "KVC_MAX_TOKENS");
      }
  }
}

// What the schema cannot say (the same rules as golden/validate_cases.py).
void check_semantics(const Scenario& c, const std::string& origin) {
  if (c.heads % c.kv_heads != 0)
    throw CaseError(origin, "/kv_heads",
                    "kv_heads " + std::to_string(c.kv_heads) + " does not divide heads " + std::to_string(c.heads));
  if (c.left_padding && static_cast<int64_t>(c.left_padding->size()) != c.batch)
    throw CaseError(origin, "/left_padding",
                    "has " + std::to_string(c.left_padding->size()) + " entries, batch is " + std::to_string(c.batch));
  if (c.left_padding)
    for (size_t b = 0; b < c.left_padding->size(); ++b)
      if ((*c.left_padding)[b] > c.total_tokens())
        throw CaseError(origin, "/left_padding/" + std::to_string(b),
                        std::to_string((*c.left_padding)[b]) + " pad tokens but only " + std::to_string(c.total_tokens()) +
                            " tokens in the scenario");
  if (std::none_of(c.steps.begin(), c.steps.end(), [](const Step& s) { return s.judged; }))
    throw CaseError(origin, "/steps", "every step is a fill step (\"judged\": false): the case would judge nothing");
  for (size_t s = 0; s < c.steps.size(); ++s)
    if (c.steps[s].cache_position && static_cast<int64_t>(c.steps[s].cache_position->size()) != c.steps[s].tokens &&
        !c.steps[s].is_call())
      throw CaseError(origin, "/steps/" + std::to_string(s) + "/cache_position",
                      "has " + std::to_string(c.steps[s].cache_position->size()) + " entries for " +
                          std::to_string(c.steps[s].tokens) + " tokens");
  auto check_explicit = [&](const std::vector<std::vector<double>>& v, const char* name, int64_t heads) {
    if (v.empty()) return;
    if (v.size() != c.steps.size())
      throw CaseError(origin, std::string("/inputs/explicit/") + name,
                      "has " + std::to_string(v.size()) + " steps, the case has " + std::to_string(c.steps.size()));
    for (size_t s = 0; s < v.size(); ++s) {
      const size_t want = static_cast<size_t>(mul(mul(mul(c.batch, heads), c.steps[s].tokens), c.head_dim));
      if (v[s].size() != want)
        throw CaseError(origin, std::string("/inputs/explicit/") + name + "/" + std::to_string(s),
                        "has " + std::to_string(v[s].size()) + " values, expected " + std::to_string(want) +
                            " (batch x heads x tokens x head_dim)");
    }
  };
  if (c.cache == CacheKind::Dynamic && c.max_cache_len != 0)
    throw CaseError(origin, "/max_cache_len", "max_cache_len is only meaningful for a static cache");
  const auto full = [](LayerType t) { return t == LayerType::Full; };
  const std::vector<LayerType> absent = c.mask_builder_call ? c.mask_builder_call->absent_layer_types : std::vector<LayerType>{};
  if (std::all_of(c.layer_types.begin(), c.layer_types.end(), full) && std::all_of(absent.begin(), absent.end(), full) &&
      c.window != 0)
    throw CaseError(origin, "/window", "window given but no sliding or chunked layer");
  check_explicit(c.explicit_q, "q", c.heads);
  check_explicit(c.explicit_k, "k", c.kv_heads);
  check_explicit(c.explicit_v, "v", c.kv_heads);
}

}  // namespace

Scenario parse_case(const std::string& text, const std::string& origin) { return parse_case(text, origin, limits()); }

Scenario parse_case(const std::string& text, const std::string& origin, const Limits& limits) {
  const json doc = parse_json(text, origin);
  validate_schema(doc, origin);
  check_limits(doc, origin, limits);
  Scenario c;
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
  // Optional in the schema: absent and null both mean no 2D attention_mask (case_fuzz found the
  // absent form raising an uncaught json exception here).
  if (doc.contains("left_padding") && !doc.at("left_padding").is_null())
    c.left_padding = doc.at("left_padding").get<std::vector<int64_t>>();
  for (const json& s : doc.at("steps")) {
    const std::string at = "/steps/" + std::to_string(c.steps.size());
    Step step;
    if (s.contains("call")) {                                          // a call step: another layer method instead of an update
      LayerCall call{&layer_method(s.at("call").get<std::string>())};  // one of the schema's enum
      for (const char* only_updates : {"cache_position", "judged"})
        if (s.contains(only_updates))
          throw CaseError(origin, at + "/" + only_updates, std::string("a call step takes no ") + only_updates);
      if (call.method->takes_argument != s.contains("argument"))
        throw CaseError(origin, at + (call.method->takes_argument ? "" : "/argument"),
                        call.method->takes_argument ? std::string(call.method->name) + " needs an \"argument\""
                                                    : std::string(call.method->name) + " takes no argument");
      call.argument = s.value("argument", int64_t{0});
      step.call = call;
    } else {
      if (s.contains("argument")) throw CaseError(origin, at + "/argument", "only a call step takes an argument");
      step.tokens = s.at("tokens").get<int64_t>();
      if (s.contains("cache_position")) step.cache_position = s.at("cache_position").get<std::vector<int64_t>>();
      step.judged = s.value("judged", true);
    }
    c.steps.push_back(step);
  }
  const json& in = doc.at("inputs");
  if (in.contains("generator")) {
    c.seed = in.at("seed").get<uint64_t>();
    if (in.contains("distribution")) {
      const std::string d = in.at("distribution").get<std::string>();  // one of the schema's enum
      for (inputs::Distribution each :
           {inputs::Distribution::Mix64, inputs::Distribution::Normal, inputs::Distribution::LargeLogits})
        if (d == inputs::to_string(each)) c.distribution = each;
    }
  } else {
    const json& e = in.at("explicit");
    if (e.contains("q")) c.explicit_q = per_step(e.at("q"));
    c.explicit_k = per_step(e.at("k"));
    c.explicit_v = per_step(e.at("v"));
  }
  c.releases = doc.value(releases_key(doc), std::vector<std::string>{});
  if (doc.contains("mask_builder_call")) {  // the schema checked its shape
    const json& b = doc.at("mask_builder_call");
    MaskBuilderCall call;
    call.cache = b.value("cache", true);
    call.packed_documents = b.value("packed_documents", std::vector<int64_t>{});
    if (b.contains("layer_idx")) {
      call.layer_idx = b.at("layer_idx").get<int64_t>();
      if (*call.layer_idx >= static_cast<int64_t>(c.layer_types.size()))
        throw CaseError(origin, "/mask_builder_call/layer_idx", "no such layer");
    }
    for (auto [key, slot] : {std::pair{"and_mask", &call.and_mask}, std::pair{"or_mask", &call.or_mask}})
      if (b.contains(key)) {
        const json& f = b.at(key);
        NamedMaskFunction fn;
        fn.kind = f.at("kind") == "prefix"          ? NamedMaskFunction::Kind::Prefix
                  : f.at("kind") == "same_document" ? NamedMaskFunction::Kind::SameDocument
                                                    : NamedMaskFunction::Kind::NotAFunction;
        fn.length = f.value("length", int64_t{0});
        fn.lengths = f.value("lengths", std::vector<int64_t>{});
        fn.per_element = f.value("per_element", false);
        *slot = fn;
      }
    call.attention_mask_4d = b.value("attention_mask_4d", false);
    call.flash = b.value("flash", false);
    call.unregistered_attention = b.value("unregistered_attention", false);
    call.block_sequence_ids = b.value("block_sequence_ids", std::vector<std::vector<int64_t>>{});
    if (!call.block_sequence_ids.empty() && static_cast<int64_t>(call.block_sequence_ids.size()) != c.batch)
      throw CaseError(origin, "/mask_builder_call/block_sequence_ids", "needs one row per batch row");
    for (const json& t : b.value("absent_layer_types", json::array())) {
      const LayerType type = parse_layer_type(t.get<std::string>());
      if (std::find(c.layer_types.begin(), c.layer_types.end(), type) != c.layer_types.end())
        throw CaseError(origin, "/mask_builder_call/absent_layer_types", "names a layer type the cache holds");
      call.absent_layer_types.push_back(type);
    }
    if (call.attention_mask_4d && !c.left_padding)
      throw CaseError(origin, "/mask_builder_call/attention_mask_4d", "a 4D mask is made from left_padding's 2D mask");
    c.mask_builder_call = call;
  }
  check_semantics(c, origin);
  return c;
}

nlohmann::ordered_json to_case_json(const Scenario& s) {
  using oj = nlohmann::ordered_json;
  oj j;
  j["name"] = s.name;
  j["description"] = s.description;
  if (!s.tags.empty()) j["tags"] = s.tags;
  j["cache"] = to_string(s.cache);
  oj layers = oj::array();
  bool windowed = false;
  for (LayerType t : s.layer_types) {
    layers.push_back(to_string(t));
    windowed = windowed || t != LayerType::Full;
  }
  j["layer_types"] = layers;
  if (s.mask_builder_call)  // the window of builders whose layer type the cache lacks
    for (LayerType t : s.mask_builder_call->absent_layer_types) windowed = windowed || t != LayerType::Full;
  if (windowed && s.window != 0) j["window"] = s.window;
  if (s.cache == CacheKind::Static && s.max_cache_len > 0) j["max_cache_len"] = s.max_cache_len;
  j["batch"] = s.batch;
  j["heads"] = s.heads;
  j["kv_heads"] = s.kv_heads;
  j["head_dim"] = s.head_dim;
  j["dtype"] = to_string(s.dtype);
  j["left_padding"] = s.left_padding ? oj(*s.left_padding) : oj(nullptr);
  oj steps = oj::array();
  for (const Step& st : s.steps) {
    if (st.is_call()) {
      oj step = {{"call", st.call->method->name}};
      if (st.call->method->takes_argument) step["argument"] = st.call->argument;
      steps.push_back(step);
      continue;
    }
    if (st.is_reset())
      throw std::invalid_argument("to_case_json: '" + s.name +
                                  "' has a reset step, which a case file holds as {\"call\": \"reset\"}");
    oj step = {{"tokens", st.tokens}};
    if (st.cache_position) step["cache_position"] = *st.cache_position;
    if (!st.judged) step["judged"] = false;
    steps.push_back(step);
  }
  j["steps"] = steps;
  if (s.explicit_k.empty()) {
    j["inputs"] = {{"generator", "kvc-mix64-v1"}, {"seed", s.seed.value_or(0)}};
    if (s.distribution != inputs::Distribution::Mix64) j["inputs"]["distribution"] = inputs::to_string(s.distribution);
  } else {
    oj e;
    if (!s.explicit_q.empty()) e["q"] = s.explicit_q;
    e["k"] = s.explicit_k;
    e["v"] = s.explicit_v;
    j["inputs"] = {{"explicit", e}};
  }
  if (!s.releases.empty()) j["releases"] = s.releases;
  if (const auto& b = s.mask_builder_call) {
    oj call = oj::object();
    if (!b->cache) call["cache"] = false;
    if (!b->packed_documents.empty()) call["packed_documents"] = b->packed_documents;
    if (b->layer_idx) call["layer_idx"] = *b->layer_idx;
    for (auto [key, fn] : {std::pair{"and_mask", &b->and_mask}, std::pair{"or_mask", &b->or_mask}})
      if (*fn) {
        const NamedMaskFunction& f = **fn;
        call[key] = f.kind == NamedMaskFunction::Kind::Prefix         ? oj{{"kind", "prefix"}, {"length", f.length}}
                    : f.kind == NamedMaskFunction::Kind::SameDocument ? oj{{"kind", "same_document"}, {"lengths", f.lengths}}
                                                                      : oj{{"kind", "not_a_function"}};
        if (f.per_element) call[key]["per_element"] = true;
      }
    if (b->attention_mask_4d) call["attention_mask_4d"] = true;
    if (b->flash) call["flash"] = true;
    if (b->unregistered_attention) call["unregistered_attention"] = true;
    if (!b->block_sequence_ids.empty()) call["block_sequence_ids"] = b->block_sequence_ids;
    if (!b->absent_layer_types.empty()) {
      oj types = oj::array();
      for (LayerType t : b->absent_layer_types) types.push_back(to_string(t));
      call["absent_layer_types"] = types;
    }
    j["mask_builder_call"] = call;
  }
  return j;
}

Scenario load_case(const std::string& path) { return parse_case(read_file(path), path); }

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

}  // namespace kvc::cases
