#include "kvconform/engine/steps.h"

#include <stdexcept>

#include "kvconform/engine/check.h"
#include "kvconform/engine/plan.h"

namespace kvc::engine {

using nlohmann::json;

// ---- Reading ----

void StepReader::bad(const std::string& at, const std::string& why) const {
  throw std::invalid_argument(file + ": " + at + ": " + why);
}

int64_t StepReader::seq(const json& obj, const std::string& key, const std::string& at) const {
  if (!obj[key].is_number_integer() || obj[key].get<int64_t>() < 0 || obj[key].get<int64_t>() > 15)
    bad(at + "/" + key, "must be an integer in [0, 15]");
  return obj[key].get<int64_t>();
}

std::vector<int32_t> StepReader::tokens(const json& obj, const std::string& at) const {
  if (!obj.contains("tokens") || !obj["tokens"].is_array() || obj["tokens"].empty())
    bad(at + "/tokens", "must be a non-empty array of token ids");
  std::vector<int32_t> out;
  for (size_t k = 0; k < obj["tokens"].size(); ++k) {
    const json& t = obj["tokens"][k];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > (1 << 24))
      bad(at + "/tokens/" + std::to_string(k), "must be a token id");
    out.push_back(t.get<int32_t>());
  }
  return out;
}

int64_t StepReader::integer(const std::string& key, int64_t least, const std::string& what) const {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < least) bad(ptr + "/" + key, what);
  return j[key].get<int64_t>();
}

// ---- Shared by the rows ----

namespace steps {

std::string span(int64_t first, int64_t n) {
  return std::to_string(n) + (n == 1 ? " token at " + std::to_string(first)
                                     : " tokens at " + std::to_string(first) + ".." + std::to_string(first + n - 1));
}

int64_t length_of(const Lengths& len, int64_t seq) {
  const auto it = len.find(seq);
  return it == len.end() ? 0 : it->second;
}

std::string bad_tokens(const char* op, const std::vector<int32_t>& tokens, int64_t vocab) {
  if (tokens.empty()) return std::string(op) + " without tokens";
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab) return "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab);
  return "";
}

Positions new_rows(int64_t seq, size_t count, const Lengths& before) {
  Positions out;
  const int64_t first = length_of(before, seq);
  for (size_t k = 0; k < count; ++k) out.emplace_back(seq, first + static_cast<int64_t>(k));
  return out;
}

}  // namespace steps

// ---- Rows defined out of line ----

Fork Fork::read(const StepReader& r) {
  Fork f;
  f.seq = r.seq();
  if (!r.j.contains("from")) r.bad(r.ptr + "/from", "must name the source sequence");
  f.from = r.seq(r.j, "from", r.ptr);
  if (f.from == f.seq) r.bad(r.ptr + "/from", "must differ from seq");
  f.length = r.integer("length", 0, "must be the length of the source's prefix (an integer >= 0)");
  return f;
}

Spec Spec::read(const StepReader& r) {
  Spec s{r.seq(), r.tokens(r.j, r.ptr), 0};
  s.reject = r.integer("n", 0, "must be the number of rejected draft tokens (an integer >= 0)");
  if (s.reject > static_cast<int64_t>(s.draft.size()))
    r.bad(r.ptr + "/n", "rejects more than the draft's " + std::to_string(s.draft.size()) + " tokens");
  return s;
}

std::string Batch::pre(const Lengths&, int64_t vocab) const {
  if (items.empty()) return "batch without items";
  std::vector<int64_t> seen;
  for (const BatchItem& item : items) {
    if (item.seq < 0) return "seq is negative";
    if (std::find(seen.begin(), seen.end(), item.seq) != seen.end())
      return "seq " + std::to_string(item.seq) + " twice in one batch";
    seen.push_back(item.seq);
    if (std::string why = steps::bad_tokens(op, item.tokens, vocab); !why.empty()) return why;
  }
  return "";
}

json Batch::fields() const {
  json j = {{"items", json::array()}};
  for (const BatchItem& item : items) j["items"].push_back({{"seq", item.seq}, {"tokens", item.tokens}});
  return j;
}

Batch Batch::read(const StepReader& r) {
  const json& s = r.j;
  if (!s.contains("items") || !s["items"].is_array() || s["items"].empty())
    r.bad(r.ptr + "/items", "must be a non-empty array of {seq, tokens}");
  Batch b;
  for (size_t k = 0; k < s["items"].size(); ++k) {
    const json& item = s["items"][k];
    const std::string at = r.ptr + "/items/" + std::to_string(k);
    if (!item.is_object() || !item.contains("seq")) r.bad(at, "must be an object {seq, tokens}");
    BatchItem one{r.seq(item, "seq", at), r.tokens(item, at)};
    for (const BatchItem& other : b.items)
      if (other.seq == one.seq) r.bad(at + "/seq", "sequence " + std::to_string(one.seq) + " is already in this batch");
    b.items.push_back(std::move(one));
  }
  return b;
}

std::string Batch::describe(const Lengths& len) const {
  std::string out = "batch of " + std::to_string(items.size()) + ":";
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? ", seq " : " seq ") + std::to_string(items[i].seq) + " " +
           steps::span(steps::length_of(len, items[i].seq), static_cast<int64_t>(items[i].tokens.size()));
  return out;
}

// ---- Drawing ----

bool DrawContext::has(const char* operation) const {
  return std::find(operations.begin(), operations.end(), operation) != operations.end();
}
int64_t DrawContext::length(int64_t seq) const { return steps::length_of(len, seq); }
std::vector<int32_t> DrawContext::tokens(int64_t n, int size) const {
  return tokens_for(seed, salt * 1000003 + static_cast<uint64_t>(size), n, vocab);
}

int64_t DrawContext::chunk_behind(int64_t length, int variant) const {
  const int v = variant % 8;
  if (chunk <= 0 || v == 0) return -1;
  const int64_t C = chunk, c0 = (length / C) * C;
  const int64_t at[] = {0, c0 - 1, c0, c0 + 1, c0 - C, c0 - C + 1, c0 - C - 1, c0 + (length - c0 + 1) / 2};
  return std::clamp<int64_t>(at[v], 0, length);
}

int64_t DrawContext::chunk_ahead(int64_t length, int variant) const {
  const int v = variant % 8;
  if (chunk <= 0 || v == 0) return -1;
  const int64_t C = chunk, next = (length / C) * C + C;
  const int64_t at[] = {0, next - 1, next, next + 1, next + C - 1, next + C, next + C + 1, next + C / 2};
  return std::max(at[v], length + 1);
}

bool Extend::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  const int64_t size = d.size, v = d.variant % 8, w = c.window;
  int64_t n = size;
  if (d.kind >= 3 && d.kind <= 5) {
    const int64_t edge[] = {size, 1, w - 1, w, w + 1, 2 * w, 2 * w + 1, w + size};
    n = std::max<int64_t>(1, edge[v]);
    if (const int64_t to = c.chunk_ahead(c.length(seq), d.variant); to >= 0) n = to - c.length(seq);
  } else if (d.kind == 6) {
    const int64_t long_extend[] = {16 * size, 16 * size, 16 * size,      16 * size,
                                   16 * size, 16 * size, 256 + w + size, 1024 + w + size};
    n = long_extend[v];
  }
  out.push_back(Extend{seq, c.tokens(n, d.size)});
  return true;
}

bool Rollback::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if ((d.kind != 7 && d.kind != 10) || !c.has(operation) || c.length(seq) <= 0) return false;
  int64_t drop = std::min<int64_t>(d.kind == 10 ? 16 * d.size : d.size, c.length(seq));
  if (const int64_t to = c.chunk_behind(c.length(seq), d.variant); d.kind == 7 && to >= 0)
    drop = std::max<int64_t>(1, c.length(seq) - to);
  out.push_back(Rollback{seq, drop});
  return true;
}

bool Reload::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if (d.kind != 8 || !c.has(operation) || c.length(seq) <= 0) return false;
  out.push_back(Reload{seq});
  // A reload keeps the length: a deep rollback behind what a sliding cache keeps follows it.
  if (d.variant % 8 >= 6 && c.has(Rollback::operation))
    out.push_back(Rollback{seq, std::min<int64_t>(16 * d.size, c.length(seq))});
  return true;
}

bool Preempt::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if (d.kind != 8 || d.variant % 2 == 0 || !c.has(operation) || c.length(seq) <= 0) return false;
  out.push_back(Preempt{seq});
  if (d.variant % 8 == 7 && c.has(Rollback::operation))
    out.push_back(Rollback{seq, std::min<int64_t>(16 * d.size, c.length(seq))});
  return true;
}

bool Turn::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  const int v = d.variant % 8;
  if (d.kind != 7 || v < 4 || !c.has(operation) || c.length(seq) <= 0) return false;
  const int64_t L = c.length(seq), w = c.window;
  const int64_t keeps[] = {L - d.size, L - w, L - w - 1, L - w + 1};
  const int64_t to = c.chunk_behind(L, v - 3);
  out.push_back(Turn{seq, std::clamp<int64_t>(to >= 0 ? to : keeps[v - 4], 0, L), c.tokens(d.size, d.size)});
  return true;
}

bool Reset::draw(const DrawnStep& d, int64_t, DrawContext&, std::vector<PlanStep>& out) {
  if (d.kind != 9) return false;
  out.push_back(Reset{});
  return true;
}

bool Fork::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  const int64_t other = 1 - seq;
  if (d.kind != 11 || !c.has(operation) || !c.has("sequences") || c.length(other) <= 0) return false;
  const int64_t L = c.length(other), last_block = ((L - 1) / kBlock) * kBlock, w = c.window;
  const int64_t at[] = {L, w - 1, w, w + 1, kBlock - 1, kBlock, kBlock + 1, last_block + (L - last_block + 1) / 2};
  const int64_t to = c.chunk_behind(L, d.variant);
  out.push_back(Fork{seq, other, std::clamp<int64_t>(to >= 0 ? to : at[d.variant % 8], 1, L)});
  return true;
}

bool Chunked::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if (d.kind != 12 || !c.has(operation)) return false;
  const int64_t w = c.window;
  const int64_t chunk[] = {w, 1, w - 1, w + 1, 2 * w, 2 * w + 1, 3, w + 2};
  out.push_back(Chunked{seq, c.tokens(d.size, d.size), std::max<int64_t>(1, chunk[d.variant % 8])});
  return true;
}

bool Spec::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if (d.kind != 13 || !c.has(operation)) return false;
  const int64_t w = c.window, size = d.size;
  const int64_t rejected[] = {1, 0, w - 1, w, w + 1, size, size - 1, 2 * w};
  int64_t reject = rejected[d.variant % 8];
  // On a chunked model: the cycle ends at a chunk boundary at or behind its draft's end (not before it).
  if (const int64_t to = c.chunk_behind(c.length(seq) + size, d.variant); to >= 0)
    reject = c.length(seq) + size - std::max(to, c.length(seq));
  out.push_back(Spec{seq, c.tokens(size, d.size), std::clamp<int64_t>(reject, 0, size)});
  return true;
}

bool Batch::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  if (d.kind != 14 || !c.has(operation) || !c.has("sequences")) return false;
  const int64_t w = c.window;
  const int64_t count[] = {1, 2, w - 1, w, w + 1, 2 * w + 1, 3, 5};
  Batch b;
  b.items.push_back({seq, c.tokens(d.size, d.size)});
  b.items.push_back({1 - seq, tokens_for(c.seed ^ 0x5bd1e995u, c.salt, std::max<int64_t>(1, count[d.variant % 8]), c.vocab)});
  out.push_back(std::move(b));
  return true;
}

bool Shift::draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out) {
  const int64_t v = d.variant % 8;
  if (d.kind != 10 || v < 4 || !c.has(operation) || c.length(seq) <= 1) return false;
  const int64_t L = c.length(seq), w = c.window;
  const int64_t keeps[] = {1, w - 1, w, 0};
  const int64_t to = c.chunk_behind(L, static_cast<int>(v) - 3);  // a chunk's front, the previous chunk's start
  Shift s{seq, std::clamp<int64_t>(to >= 0 ? to : keeps[v - 4], 0, L - 1), 0};
  s.discard = std::clamp<int64_t>(d.size, 1, L - s.keep);
  out.push_back(s);
  return true;
}

std::vector<PlanStep> draw_step(const DrawnStep& d, DrawContext& c) {
  std::vector<PlanStep> out;
  const int64_t seq = c.has("sequences") ? d.seq : 0;
  ++c.salt;
  for_each_row<DrawOrder>([&](auto row) { return decltype(row)::draw(d, seq, c, out); });
  for (const PlanStep& s : out) s.apply(c.len);
  return out;
}

// ---- PlanStep: the table asked ----

namespace {
template <class T, class = void>
struct has_seq : std::false_type {};
template <class T>
struct has_seq<T, std::void_t<decltype(std::declval<T>().seq)>> : std::true_type {};
template <class T, class = void>
struct has_peak : std::false_type {};
template <class T>
struct has_peak<T, std::void_t<decltype(std::declval<T>().peak(Lengths{}))>> : std::true_type {};
template <class T, class = void>
struct loses_keys : std::false_type {};
template <class T>
struct loses_keys<T, std::void_t<decltype(T::may_lose_keys)>> : std::bool_constant<T::may_lose_keys> {};
template <class T, class = void>
struct spans_sequences : std::false_type {};
template <class T>
struct spans_sequences<T, std::void_t<decltype(T::several_sequences)>> : std::bool_constant<T::several_sequences> {};
}  // namespace

const char* PlanStep::op() const {
  return visit([](const auto& s) { return std::decay_t<decltype(s)>::op; });
}
std::string PlanStep::operation() const {
  return visit([](const auto& s) { return std::string(std::decay_t<decltype(s)>::operation); });
}
bool PlanStep::logits() const {
  return visit([](const auto& s) { return std::decay_t<decltype(s)>::logits; });
}
std::string PlanStep::pre(const Lengths& before, int64_t vocab) const {
  return visit([&](const auto& s) -> std::string {
    if constexpr (has_seq<std::decay_t<decltype(s)>>::value)
      if (s.seq < 0) return "seq is negative";
    return s.pre(before, vocab);
  });
}
void PlanStep::apply(Lengths& len) const {
  visit([&](const auto& s) { s.apply(len); });
}
Positions PlanStep::positions(const Lengths& before) const {
  return visit([&](const auto& s) { return s.positions(before); });
}
int64_t PlanStep::peak(const Lengths& before) const {
  Lengths after = before;
  apply(after);
  int64_t most = 0;
  for (const auto& [seq, l] : after) most = std::max(most, l);
  visit([&](const auto& s) {
    if constexpr (has_peak<std::decay_t<decltype(s)>>::value) most = std::max(most, s.peak(before));
  });
  return most;
}
std::vector<int64_t> PlanStep::sequences() const {
  std::vector<int64_t> out;
  visit([&](const auto& s) {
    using S = std::decay_t<decltype(s)>;
    if constexpr (has_seq<S>::value) out.push_back(s.seq);
    if constexpr (std::is_same_v<S, Fork>) out.push_back(s.from);
    if constexpr (std::is_same_v<S, Batch>)
      for (const BatchItem& item : s.items) out.push_back(item.seq);
  });
  return out;
}
int64_t PlanStep::may_lose_keys_of() const {
  return visit([](const auto& s) -> int64_t {
    using S = std::decay_t<decltype(s)>;
    if constexpr (loses_keys<S>::value) return s.seq;
    return -1;
  });
}
bool PlanStep::several_sequences() const {
  return visit([](const auto& s) { return spans_sequences<std::decay_t<decltype(s)>>::value; });
}
json PlanStep::to_json() const {
  json j = visit([](const auto& s) { return s.fields(); });
  j["op"] = op();
  return j;
}
std::string PlanStep::describe(const Lengths& before) const {
  return visit([&](const auto& s) { return s.describe(before); });
}

PlanStep PlanStep::from_json(const json& s, const std::string& ptr, const std::string& file) {
  const StepReader r{s, ptr, file};
  const std::string op = s.value("op", "");
  // The sequence is checked wherever it is given, also on a step that names none.
  if (s.contains("seq")) r.seq();
  PlanStep out;
  const bool found = for_each_row<StepKinds>([&](auto row) {
    if (op != decltype(row)::op) return false;
    out = decltype(row)::read(r);
    return true;
  });
  if (!found) {
    std::vector<std::string> ops;
    for_each_row<StepKinds>([&](auto row) {
      ops.push_back(decltype(row)::op);
      return false;
    });
    std::string known;
    for (size_t i = 0; i < ops.size(); ++i) known += (i == 0 ? "" : i + 1 == ops.size() ? " or " : ", ") + ops[i];
    r.bad(ptr + "/op", "\"" + op + "\" (expected " + known + ")");
  }
  return out;
}

// ---- The protocol as data ----

std::vector<std::string> operation_mutants() {
  std::vector<std::string> out;
  for_each_row<StepKinds>([&](auto row) {
    for (const OperationMutant& m : decltype(row)::mutants) out.push_back(m.name);
    return false;
  });
  return out;
}

std::string operation_of_mutant(const std::string& mutant) {
  std::string out;
  for_each_row<StepKinds>([&](auto row) {
    using S = decltype(row);
    for (const OperationMutant& m : S::mutants)
      if (mutant == m.name) out = S::operation;
    return !out.empty();
  });
  return out;
}

std::vector<EngineMutant> engine_mutants() {
  // {name, does, the spelling it replaced}, by kind; the operation mutants are the step rows'.
  struct Row {
    const char* name;
    const char* does;
    const char* old;
  };
  std::vector<EngineMutant> out;
  const auto add = [&](const char* kind, const Row& r, const char* operation) {
    // The diagnosis kind is the mutant's name without its sign, where the judge has that kind.
    std::string kind_name = r.name;
    if (kind_name.size() > 2 &&
        (kind_name.compare(kind_name.size() - 2, 2, "+1") == 0 || kind_name.compare(kind_name.size() - 2, 2, "-1") == 0))
      kind_name.resize(kind_name.size() - 2);
    out.push_back({r.name, kind, r.does, operation, diagnosis_kind(kind_name) ? kind_name : "", r.old});
  };
  const Row window[] = {{"window_off_by_one+1", "the engine is told W+1 (C+1 on a chunked model)", "window+1"},
                        {"window_off_by_one-1", "the engine is told W-1 (C-1)", "window-1"},
                        {"full_attention_on_sliding", "the sliding (chunked) layers run as full attention", "full"}};
  for (const Row& r : window) add("window", r, "");
  for_each_row<StepKinds>([&](auto row) {
    using S = decltype(row);
    for (const OperationMutant& m : S::mutants) add("operation", {m.name, m.does, m.old}, S::operation);
    return false;
  });
  const Row model[] = {
      {"sinks_dropped", "the attention sinks left out", "sinks-dropped"},
      {"nope_inverted", "rope on the NoPE layers and none on the rope layers", "nope-inverted"},
      {"rope_all_rotary", "partial (proportional) rope rotating every frequency", "rope-all-rotary"},
      {"shared_kv_full", "KV-shared sliding layers attending every key of the layer they share", "shared-kv-full"},
      {"window_on_every_layer", "the config's window on every layer", "window-everywhere"},
      {"layer_types_swapped", "the sliding and the full layers swapped (max_window_layers read inverted)", "layers-swapped"}};
  for (const Row& r : model) add("model", r, "");
  const Row config[] = {{"chunk_boundaries_shifted", "chunk boundaries at k*C+1", "chunk-shift"},
                        {"chunked_as_sliding", "a sliding window of C on the chunked layers", "chunked-as-sliding"},
                        {"softcap_dropped", "the attention scores' soft-cap left out", "softcap-dropped"},
                        {"kv_rounded", "K and V stored coarser than declared (bfloat16; a q8_0 cache side as q4_0)", "kv-bf16"},
                        {"eviction_off_by_one", "the first eviction one token late", "eviction-once"},
                        {"full_attention_capped", "a full layer keeping only its last 1024 keys", "full-capped"},
                        {"position_glitch", "a wrong logit at one position", "glitch"}};
  for (const Row& r : config) add("config", r, "");
  return out;
}

std::string canonical_mutant(const std::string& name, std::string* note) {
  if (name == "none") return name;
  std::string names = "none";
  for (const EngineMutant& m : engine_mutants()) {
    if (name == m.name) return name;
    if (!m.old.empty() && name == m.old) {
      if (note) *note = "--mutant " + m.old + " is deprecated (accepted for one release): it is now " + m.name;
      return m.name;
    }
    names += ", " + m.name;
  }
  throw std::invalid_argument("unknown mutant '" + name + "' (expected one of: " + names + ")");
}

json protocol_description() {
  json ops = json::array(), operations = json::array();
  for_each_row<StepKinds>([&](auto row) {
    using S = decltype(row);
    json fields = row.fields();
    json names = json::array();
    for (const auto& [key, value] : fields.items()) names.push_back(key);
    ops.push_back({{"op", S::op}, {"fields", names}, {"logits", S::logits}, {"operation", S::operation}, {"about", S::about}});
    if (std::string(S::operation).empty()) return false;
    json mutants = json::array();
    for (const OperationMutant& m : S::mutants) mutants.push_back({{"name", m.name}, {"does", m.does}});
    operations.push_back({{"name", S::operation}, {"op", S::op}, {"mutants", mutants}});
    // Not a step: an engine that runs several sequences interleaved lists it to be sent plans with
    // more than one; it follows the state operations, before the serving ones.
    if (std::is_same_v<S, Reload>) operations.push_back({{"name", "sequences"}, {"op", nullptr}, {"mutants", json::array()}});
    return false;
  });
  json mutants = json::array();
  for (const EngineMutant& m : engine_mutants()) {
    json j = {{"name", m.name}, {"kind", m.kind}, {"does", m.does}};
    if (!m.operation.empty()) j["operation"] = m.operation;
    if (!m.diagnosis.empty()) j["diagnosis"] = m.diagnosis;
    if (!m.old.empty()) j["replaces"] = m.old;
    mutants.push_back(j);
  }
  return {{"format", "kvconform-engine-protocol-v1"},
          {"generated_by", "kvconform engine --protocol (harness/include/kvconform/engine/steps.h)"},
          {"steps", ops},
          {"operations", operations},
          {"mutants", mutants}};
}

}  // namespace kvc::engine
