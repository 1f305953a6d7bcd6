#include "kvcgen/scenario.h"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "kvconform/inputs.h"
#include "kvconform/positions.h"
#include "kvconform/seeds.h"

namespace kvc {

int64_t ScenarioConfig::max_left_padding() const {
  if (!left_padding) return 0;
  return *std::max_element(left_padding->begin(), left_padding->end());
}

std::string ScenarioConfig::describe() const {
  std::ostringstream os;
  os << to_string(attention) << " W=" << window << " L=" << max_cache_len << " B=" << batch << " H=" << heads
     << " Hkv=" << kv_heads << " D=" << head_dim << " " << to_string(dtype) << " left_padding=";
  if (!left_padding) {
    os << "none";
  } else {
    os << "[";
    for (size_t i = 0; i < left_padding->size(); ++i) os << (i ? "," : "") << (*left_padding)[i];
    os << "]";
  }
  os << " seed=" << seed << " max_tokens=" << max_tokens;
  return os.str();
}

void showValue(const ScenarioConfig& c, std::ostream& os) { os << c.describe(); }

int64_t token_limit(const ScenarioConfig& c) {
  int64_t limit = std::min<int64_t>(3 * c.window + 8, 160);
  for (const LayerSpec& s : {c.static_spec(), c.dynamic_spec()}) {
    const int64_t bound = positions::max_total_tokens(s);
    if (bound >= 0) limit = std::min(limit, bound);
  }
  return limit;
}

namespace {

// The rows of the command table (scenario.h, CommandRow). Updates differ only in their precondition.
void run_update(const Command& cmd, TraceSystem& system, const TraceModel& before) { system.update(before, cmd.n, cmd.name()); }
void apply_update(const Command& cmd, TraceModel& m) { m.seen += cmd.n; }
bool record_update(const Command& cmd, std::vector<int64_t>& steps) {
  steps.push_back(cmd.n);
  return true;
}
int64_t least_same(const Command& cmd, const ScenarioConfig&) { return cmd.n; }
bool record_nothing(const Command&, std::vector<int64_t>&) { return true; }

// The sequence after a crop to `kept` is still a prefix the next tokens extend: it must hold a real
// token in every row (a rollback into the left padding is not a sequence a model resumes).
bool resumable(const ScenarioConfig& c, int64_t kept) { return kept == 0 || kept > c.max_left_padding(); }

const CommandRow kRows[] = {
    {CommandKind::Prefill, "Prefill",
     [](const Command& cmd, const ScenarioConfig& c, const TraceModel& m) {
       return m.seen == 0 && cmd.n > c.max_left_padding() && cmd.n <= c.max_tokens;
     },
     apply_update, [](const Command&, const ScenarioConfig& c) { return c.max_left_padding() + 1; }, run_update, record_update},
    {CommandKind::Decode, "Decode",
     [](const Command&, const ScenarioConfig& c, const TraceModel& m) { return m.seen > 0 && m.seen + 1 <= c.max_tokens; },
     apply_update, least_same, run_update, record_update},
    {CommandKind::Extend, "Extend",
     [](const Command& cmd, const ScenarioConfig& c, const TraceModel& m) {
       return m.seen > 0 && cmd.n >= 2 && m.seen + cmd.n <= c.max_tokens;
     },
     apply_update, [](const Command&, const ScenarioConfig&) -> int64_t { return 2; }, run_update, record_update},
    {CommandKind::Reset, "Reset", [](const Command&, const ScenarioConfig&, const TraceModel& m) { return m.seen > 0; },
     [](const Command&, TraceModel& m) { m = TraceModel{}; }, least_same,
     [](const Command&, TraceSystem& system, const TraceModel&) { system.reset(); },
     [](const Command&, std::vector<int64_t>& steps) {
       steps.clear();
       return true;
     }},
    {CommandKind::Crop, "Crop",
     [](const Command& cmd, const ScenarioConfig& c, const TraceModel& m) {
       if (!resumable(c, m.seen - cmd.n)) return false;
       // The dynamic layer is the one judged throughout (the static one where transformers' own
       // window-1 dynamic layer is left out, positions::upstream_deviation).
       return serves_crop(positions::upstream_deviation(c.dynamic_spec()) ? c.static_spec() : c.dynamic_spec(), m, cmd.n);
     },
     [](const Command& cmd, TraceModel& m) { m.crop_point = m.seen -= cmd.n; },
     [](const Command&, const ScenarioConfig&) -> int64_t { return 1; },
     [](const Command& cmd, TraceSystem& system, const TraceModel& before) { system.crop(before, cmd.n); },
     [](const Command&, std::vector<int64_t>& steps) {
       steps.clear();
       return false;
     }},
    {CommandKind::Record, "Record",
     [](const Command&, const ScenarioConfig&, const TraceModel& m) { return m.seen == 0 && !m.recording; },
     [](const Command&, TraceModel& m) { m.recording = true; }, least_same,
     [](const Command&, TraceSystem& system, const TraceModel& before) { system.record_past(before); }, record_nothing},
    {CommandKind::Read, "Read", [](const Command&, const ScenarioConfig&, const TraceModel&) { return true; },
     [](const Command&, TraceModel&) {}, least_same,
     [](const Command&, TraceSystem& system, const TraceModel& before) { system.read_attributes(before); }, record_nothing},
    {CommandKind::LayerReset, "LayerReset", [](const Command&, const ScenarioConfig&, const TraceModel& m) { return m.seen > 0; },
     [](const Command&, TraceModel& m) {
       m = TraceModel{0, m.recording, 0};
     },
     least_same, [](const Command&, TraceSystem& system, const TraceModel& before) { system.reset_layers(before); },
     // A case file writes it as a call step, not as updates.
     [](const Command&, std::vector<int64_t>& steps) {
       steps.clear();
       return false;
     }},
};

}  // namespace

const CommandRow& row(CommandKind kind) {
  for (const CommandRow& r : kRows)
    if (r.kind == kind) return r;
  throw std::logic_error("no command row for kind " + std::to_string(static_cast<int>(kind)));
}

const char* Command::name() const { return row(kind).name; }

std::string Command::show() const {
  if (kind == CommandKind::Decode || n == 0) return name();
  return std::string(name()) + "(" + std::to_string(n) + ")";
}

bool serves_crop(const LayerSpec& spec, const TraceModel& m, int64_t n) {
  if (n < 1 || n > m.seen) return false;
  if (!spec.is_sliding()) return true;  // a static full layer never slides; a dynamic one keeps every row
  if (spec.cache == CacheKind::Dynamic) return m.seen < spec.window || (m.recording && n <= m.seen - m.crop_point);
  return spec.max_cache_len <= spec.window && m.seen <= std::min(spec.window, spec.max_cache_len);
}

void run_trace(const Trace& t, TraceSystem& system, size_t& at) {
  TraceModel m;
  for (at = 0; at < t.commands.size(); ++at) {
    const Command& cmd = t.commands[at];
    const CommandRow& r = row(cmd.kind);
    r.run(cmd, system, m);
    r.apply(cmd, m);
  }
}

namespace {

// Windows mostly small (every branch is reached within a few steps), sometimes up to 64;
// max_cache_len below, equal to and above the window; MHA, GQA and MQA; left padding half the time.
ScenarioConfig draw_config(Rng& r, const ConfigFilter& filter) {
  ScenarioConfig c;
  c.attention = filter.attention
                    ? *filter.attention
                    : r.weighted<LayerType>({{4, LayerType::Sliding}, {4, LayerType::Chunked}, {1, LayerType::Full}});
  const int band = r.weighted<int>({{6, 0}, {3, 1}, {1, 2}});
  const int64_t lo[] = {1, 9, 17}, hi[] = {9, 17, 65};
  c.window = r.in(lo[band], hi[band]);
  switch (r.in(0, 3)) {
    case 0: c.max_cache_len = r.in(1, c.window + 1); break;
    case 1: c.max_cache_len = c.window; break;
    default: c.max_cache_len = r.in(c.window, 3 * c.window + 4);
  }
  c.batch = r.weighted<int64_t>({{4, 1}, {3, 2}, {1, 3}, {1, 4}});
  c.kv_heads = r.in(1, 3);
  c.heads = c.kv_heads * r.weighted<int64_t>({{1, 1}, {1, 2}, {1, 4}});
  c.head_dim = r.weighted<int64_t>({{3, 1}, {4, 4}, {3, 8}, {1, 16}, {1, 64}});
  c.dtype = filter.dtype
                ? *filter.dtype
                : r.weighted<DType>({{4, DType::Float32}, {2, DType::Float16}, {2, DType::BFloat16}, {1, DType::Float64}});
  if (r.in(0, 2) == 1) {
    const int64_t most = std::min<int64_t>(2 * c.window + 1, 12);
    c.left_padding = std::vector<int64_t>(static_cast<size_t>(c.batch));
    for (int64_t& lp : *c.left_padding) lp = r.in(0, most + 1);
  }
  c.seed = static_cast<uint32_t>(r.next());
  c.max_tokens = token_limit(c);
  // The first update must hold at least one real token per row.
  if (c.left_padding)
    for (int64_t& lp : *c.left_padding) lp = std::min(lp, c.max_tokens - 1);
  return c;
}

// Token counts biased toward the window boundaries, where the branches change.
int64_t draw_count(Rng& r, const ScenarioConfig& c, int64_t at_least, int64_t room) {
  if (room < at_least) return at_least;
  const int64_t w = c.window;
  int64_t fits[6];
  int n = 0;
  for (int64_t v : {w - 1, w, w + 1, 2 * w + 1, at_least, room})
    if (v >= at_least && v <= room) fits[n++] = v;
  if (n > 0 && r.in(0, 2) == 0) return fits[r.in(0, n)];
  return r.in(at_least, room + 1);
}

}  // namespace

ScenarioConfig draw_config(uint64_t state, const ConfigFilter& filter) {
  Rng r{state};
  return draw_config(r, filter);
}

bool allowed(const Command& cmd, const ScenarioConfig& c, int64_t seen) {
  TraceModel m;
  m.seen = seen;
  return row(cmd.kind).allowed(cmd, c, m);
}

bool replayable(const Trace& t) {
  TraceModel m;
  for (const Command& cmd : t.commands) {
    const CommandRow& r = row(cmd.kind);
    if (!r.allowed(cmd, t.config, m)) return false;
    r.apply(cmd, m);
  }
  return true;
}

Trace draw_trace(uint64_t seed, int64_t index, int size, const ConfigFilter& filter, bool calls) {
  Rng r{seeds::case_seed(seed, static_cast<uint64_t>(index))};
  Trace t;
  t.config = draw_config(r, filter);
  // The call steps are judged on positions, counts and float64 attention: four dimensions per head
  // show a misplaced row as well as 64 and cost a sixteenth.
  if (calls) t.config.head_dim = std::min<int64_t>(t.config.head_dim, 4);
  const ScenarioConfig& c = t.config;
  const int64_t length = r.in(1, 2 + size / 5);
  TraceModel m;
  // A command whose precondition fails is drawn again (a bounded number of times).
  for (int64_t k = 0, tries = 0; k < length && tries < 4 * length + 8; ++tries) {
    Command cmd{};
    // Only a trace with call steps draws the four more kinds: without them the stream is what it was.
    switch (r.in(0, calls ? 9 : 4)) {
      case 0: cmd = {CommandKind::Prefill, draw_count(r, c, c.max_left_padding() + 1, c.max_tokens)}; break;
      case 1: cmd = {CommandKind::Decode, 1}; break;
      case 2: cmd = {CommandKind::Extend, draw_count(r, c, 2, std::max<int64_t>(c.max_tokens - m.seen, 2))}; break;
      case 3: cmd = {CommandKind::Reset, 0}; break;
      case 4:
      case 5: cmd = {CommandKind::Crop, draw_count(r, c, 1, std::max<int64_t>(m.seen, 1))}; break;
      case 6: cmd = {CommandKind::Record, 0}; break;
      case 7: cmd = {CommandKind::Read, 0}; break;
      default: cmd = {CommandKind::LayerReset, 0};
    }
    const CommandRow& row_of = row(cmd.kind);
    if (!row_of.allowed(cmd, c, m)) continue;
    row_of.apply(cmd, m);
    t.commands.push_back(cmd);
    ++k;
  }
  return t;
}

std::vector<ScenarioConfig> simpler_configs(const ScenarioConfig& c) {
  std::vector<ScenarioConfig> out;
  auto with = [&](ScenarioConfig s) {
    s.max_tokens = token_limit(s);
    if (s.left_padding)
      for (int64_t& lp : *s.left_padding) lp = std::min(lp, s.max_tokens - 1);
    out.push_back(std::move(s));
  };
  if (c.left_padding) {
    ScenarioConfig s = c;
    s.left_padding.reset();
    with(s);
    for (size_t b = 0; b < c.left_padding->size(); ++b)
      if ((*c.left_padding)[b] > 0) {
        std::vector<int64_t> padding = *c.left_padding;
        padding[b] -= 1;
        ScenarioConfig one_less = c;
        one_less.left_padding = std::move(padding);
        with(one_less);
      }
  }
  if (c.batch > 1) {
    ScenarioConfig s = c;
    s.batch = 1;
    if (s.left_padding) s.left_padding->resize(1);
    with(s);
  }
  if (c.window > 1) {
    ScenarioConfig s = c;
    s.window -= 1;
    with(s);
  }
  if (c.max_cache_len > 1) {
    ScenarioConfig s = c;
    s.max_cache_len -= 1;
    with(s);
  }
  if (c.heads > 1 || c.kv_heads > 1 || c.head_dim > 1) {
    ScenarioConfig s = c;
    s.heads = s.kv_heads = s.head_dim = 1;
    with(s);
  }
  return out;
}

std::vector<Trace> simplifications(const Trace& t) {
  std::vector<Trace> out;
  for (size_t i = t.commands.size(); i-- > 0 && t.commands.size() > 1;) {  // drop a command
    Trace s = t;
    s.commands.erase(s.commands.begin() + static_cast<long>(i));
    out.push_back(s);
  }
  for (size_t i = 0; i < t.commands.size(); ++i) {  // fewer tokens in one update
    const Command& cmd = t.commands[i];
    const int64_t least = row(cmd.kind).least(cmd, t.config);
    if (cmd.n > least) {
      Trace s = t;
      s.commands[i].n = least;
      out.push_back(s);
      s.commands[i].n = cmd.n - 1;
      out.push_back(s);
    }
  }
  for (ScenarioConfig& c : simpler_configs(t.config)) out.push_back(Trace{std::move(c), t.commands});
  return out;
}

}  // namespace kvc
