// `kvconform bench`: time per prefill and per decode step of every layer kind and attention
// backend over a grid of windows, cache lengths, head counts and head dims; then the harness's own
// throughput (random traces checked per second). The one CLI file that needs LibTorch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "kvconform/attention.h"
#include "kvcgen/campaign.h"
#include "kvconform/masks.h"
#include "kvconform/reference.h"
#include "kvconform/report.h"
#include "kvconform/tensors.h"

namespace kvc::cli {

namespace {
using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::vector<int64_t> windows{128, 1024}, cache_lens{4096}, heads{8}, head_dims{64, 128};
  int64_t kv_heads = 0, batch = 1, prefill = 512;
  int repeats = 15, warmup = 3, harness_iterations = 50, threads = 0;
  std::string dtype = "float32", json;
  std::vector<std::string> kinds{"static_sliding",  "dynamic_sliding", "static_chunked",
                                 "dynamic_chunked", "static_full",     "dynamic_full"};
  std::vector<std::string> backends{"eager", "sdpa"};
  bool quick = false, no_harness = false, vs_python = false;
  VsPythonRequest python;
  CasePerfRequest cases;
};

struct Stats {
  double median = 0, p25 = 0, p75 = 0, min = 0;
};

Stats stats(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  const auto at = [&](double f) { return us[static_cast<size_t>(f * static_cast<double>(us.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.25), at(0.75), us.front()};
}

LayerSpec parse_kind(const std::string& kind, int64_t window, int64_t cache_len) {
  const auto us = kind.find('_');
  if (us == std::string::npos) throw std::invalid_argument("--kinds: '" + kind + "' is not CACHE_TYPE (static_sliding, ...)");
  LayerSpec s;
  s.cache = parse_cache_kind(kind.substr(0, us));
  const std::string t = kind.substr(us + 1);
  if (t == "sliding") s.type = LayerType::Sliding;
  else if (t == "chunked") s.type = LayerType::Chunked;
  else if (t == "full") s.type = LayerType::Full;
  else throw std::invalid_argument("--kinds: '" + kind + "': expected sliding, chunked or full after the cache kind");
  s.window = window;
  s.max_cache_len = cache_len;
  s.validate();
  return s;
}

struct Measurement {
  std::string kind, backend, op;
  int64_t window, cache_len, heads, kv_heads, head_dim, batch, tokens, kv_length;
  Stats us;
  double gbps;
};

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

void print_header(std::ostream& table) {
  table << std::left << std::setw(16) << "kind" << std::setw(7) << "backend" << std::right << std::setw(6) << "W" << std::setw(7)
        << "L" << std::setw(4) << "H" << std::setw(4) << "Hkv" << std::setw(5) << "D" << std::setw(9) << "op" << std::setw(6)
        << "q" << std::setw(7) << "kv" << std::setw(12) << "median_us" << std::setw(12) << "iqr_us" << std::setw(9) << "GB/s"
        << "\n";
}

void print_row(std::ostream& table, const Measurement& m) {
  table << std::left << std::setw(16) << m.kind << std::setw(7) << m.backend << std::right << std::setw(6) << m.window
        << std::setw(7) << m.cache_len << std::setw(4) << m.heads << std::setw(4) << m.kv_heads << std::setw(5) << m.head_dim
        << std::setw(9) << m.op << std::setw(6) << m.tokens << std::setw(7) << m.kv_length << std::setw(12)
        << fixed(m.us.median, 1) << std::setw(12) << fixed(m.us.p75 - m.us.p25, 1) << std::setw(9) << fixed(m.gbps, 2)
        << std::endl;  // one line as soon as it is measured
}

class Bench {
 public:
  Bench(const BenchArgs& a, DType dtype, std::function<void(const Measurement&)> on_result)
      : a_(a), dtype_(dtype), elem_(at::elementSize(scalar_type(dtype))), on_result_(std::move(on_result)) {}

  // One update + mask + attention of q tokens after `seen`; returns kv_length.
  int64_t step(CacheLayer& layer, const std::string& backend, int64_t seen, int64_t q, int64_t H, int64_t Hkv, int64_t D) {
    const auto opts = at::TensorOptions().dtype(scalar_type(dtype_));
    const at::Tensor k = at::randn({a_.batch, Hkv, q, D}, opts), v = at::randn({a_.batch, Hkv, q, D}, opts);
    const at::Tensor query = at::randn({a_.batch, H, q, D}, opts);
    const auto t0 = Clock::now();
    const MaskSizes sizes = layer.get_mask_sizes(q);
    const KV out = layer.update(k, v);
    // The newest release's request: SDPA may skip a static cache's multi-token mask too
    // (allow_is_causal_skip), as transformers does.
    const MaskRequest m = mask_request(layer.spec(), Behaviours{}, a_.batch, std::nullopt, seen, q, std::nullopt, sizes);
    if (backend == "eager") {
      const at::Tensor mask = masks::additive_mask(masks::boolean_mask(m), scalar_type(dtype_));
      (void)attention::eager(query, out.keys, out.values, mask);
    } else {
      (void)attention::sdpa(query, out.keys, out.values, masks::sdpa_mask(m));
    }
    last_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    return sizes.kv_length;
  }

  // Bytes one step moves at least once: K/V read by attention, Q read, output written, new K/V written.
  double bytes(int64_t q, int64_t kv, int64_t H, int64_t Hkv, int64_t D) const {
    return static_cast<double>(elem_) * static_cast<double>(a_.batch) *
           static_cast<double>(2 * Hkv * kv * D + 2 * H * q * D + 2 * Hkv * q * D);
  }

  std::vector<Measurement> run() {
    std::vector<Measurement> out;
    for (int64_t W : a_.windows)
      for (int64_t L : a_.cache_lens)
        for (int64_t H : a_.heads)
          for (int64_t D : a_.head_dims) {
            const int64_t Hkv = a_.kv_heads ? a_.kv_heads : H;
            if (H % Hkv != 0) throw std::invalid_argument("--kv-heads must divide every --heads value");
            for (const std::string& kind : a_.kinds)
              for (const std::string& backend : a_.backends) {
                const LayerSpec spec = parse_kind(kind, W, L);
                if (spec.type == LayerType::Full && W != a_.windows.front()) continue;  // no window: measure once
                Measurement base{kind, backend, "", W, L, H, Hkv, D, a_.batch, 0, 0, {}, 0};
                // Prefill: a fresh layer per repetition.
                const int64_t P = std::max<int64_t>(1, std::min(a_.prefill, L));
                std::vector<double> us;
                int64_t kv = 0;
                for (int i = 0; i < a_.warmup + a_.repeats; ++i) {
                  auto layer = make_layer(spec);
                  kv = step(*layer, backend, 0, P, H, Hkv, D);
                  if (i >= a_.warmup) us.push_back(last_us_);
                }
                Measurement pre = base;
                pre.op = "prefill";
                pre.tokens = P;
                pre.kv_length = kv;
                pre.us = stats(us);
                pre.gbps = bytes(P, kv, H, Hkv, D) / (pre.us.median * 1e-6) / 1e9;
                out.push_back(pre);
                on_result_(pre);
                // Decode: fill to L - steps tokens (a full static layer must not overflow), then time each step.
                const int64_t steps = a_.warmup + a_.repeats;
                const int64_t fill = std::max<int64_t>(1, L - steps);
                auto layer = make_layer(spec);
                {  // the fill itself is not timed and needs no attention: one update
                  const auto opts = at::TensorOptions().dtype(scalar_type(dtype_));
                  const at::Tensor k = at::randn({a_.batch, Hkv, fill, D}, opts);
                  layer->update(k, k);
                }
                us.clear();
                for (int64_t i = 0; i < steps; ++i) {
                  kv = step(*layer, backend, fill + i, 1, H, Hkv, D);
                  if (i >= a_.warmup) us.push_back(last_us_);
                }
                Measurement dec = base;
                dec.op = "decode";
                dec.tokens = 1;
                dec.kv_length = kv;
                dec.us = stats(us);
                dec.gbps = bytes(1, kv, H, Hkv, D) / (dec.us.median * 1e-6) / 1e9;
                out.push_back(dec);
                on_result_(dec);
              }
          }
    return out;
  }

 private:
  const BenchArgs& a_;
  DType dtype_;
  size_t elem_;
  std::function<void(const Measurement&)> on_result_;
  double last_us_ = 0;
};

// --json: '-' for standard output, else the file (written whole or not at all); empty: nothing.
void write_json(const std::string& where, const nlohmann::ordered_json& j) {
  if (where == "-") std::cout << j.dump(2) << "\n";
  else if (!where.empty()) report::write_file_atomically(where, j.dump(2) + "\n");
}
}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time prefill and decode per layer kind and attention backend; harness throughput");
  cmd->add_option("--windows", a->windows, "Windows (sliding_window / attention_chunk_size)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cache-lens", a->cache_lens, "max_cache_len values (static layers; decode fills to this length)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--heads", a->heads, "Query head counts")->delimiter(',')->check(CLI::PositiveNumber);
  cmd->add_option("--head-dims", a->head_dims, "Head dims")->delimiter(',')->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", a->kv_heads, "KV heads (default: as many as query heads)")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", a->batch, "Batch size (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--prefill", a->prefill, "Prefill tokens (capped at the cache length; default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dtype", a->dtype, "float32, float16, bfloat16 or float64 (default float32)");
  cmd->add_option("--kinds", a->kinds, "Layer kinds: {static,dynamic}_{sliding,chunked,full}")->delimiter(',');
  cmd->add_option("--backends", a->backends, "eager, sdpa")->delimiter(',');
  cmd->add_option("--repeats", a->repeats, "Timed repetitions per measurement (default 15)")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "Untimed repetitions first (default 3)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--harness-iterations", a->harness_iterations, "Traces per property for the throughput line")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads,
                  "ATen intra-op threads (default: ATen's choice; 1 on a busy shared machine, where spinning threads "
                  "distort timings)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-harness", a->no_harness, "Skip the harness throughput measurement");
  cmd->add_flag("--quick", a->quick, "A tiny grid (windows 4,16; cache length 64; 2 heads; head dim 8): a smoke test");
  cmd->add_option("--json", a->json, "Also write the results as JSON to this file ('-' for standard output)");
  cmd->add_flag("--vs-python", a->vs_python,
                "Instead: the same random traces through golden/dump.py (real transformers) and the C++ harness; "
                "traces/s of both and the ratio");
  cmd->add_option("--traces", a->python.traces, "With --vs-python: traces for both sides (default 200)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--campaign-traces", a->python.campaign_traces,
                  "With --vs-python: random traces per fast-engine campaign (default 100000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-seconds", a->python.min_seconds,
                  "With --vs-python: repeat each C++ measurement over the traces for at least this many CPU seconds "
                  "(default 0.5; longer evens out a busy machine)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--python-repeats", a->python.python_repeats,
                  "With --vs-python: passes of the Python side over the traces, every dump_case timed (default 3; "
                  "one pass moves by about 10 % between runs)")
      ->check(CLI::PositiveNumber);
  CLI::Option* release = cmd->add_option(
      "--release", a->python.version, "With --vs-python: transformers release of the Python side (default: the newest pinned)");
  add_old_spelling(cmd, "--python-version", release, a->python.version);
  cmd->add_option("--root", a->python.root, "With --vs-python: the repository root (golden/)");
  add_seed_option(cmd, a->python.seed, "With --vs-python: seed of the traces; with --filter: the run's seed");
  cmd->add_option("--filter", a->cases.filter,
                  "Instead: perf mode over the registry: time each case `kvconform run --list --filter REGEX` lists "
                  "(golden/..., backend/..., property/...), one line per case id (--repeats, --warmup)");
  cmd->add_option("--fixtures", a->cases.fixtures, "With --filter: golden fixtures folder (default golden/fixtures)");
  cmd->add_option("--cases", a->cases.cases, "With --filter: scenario folder the fixtures were dumped from (default cases)");
  cmd->add_option("--iterations", a->cases.iterations, "With --filter: traces per property (default 100)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--differential-sequences", a->python.differential_sequences,
                  "With --vs-python: sequences of fuzz --differential to time with the dumper pool (default 1000, 0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workers", a->python.workers, "With --vs-python: dumper workers for those (default: one per core)")
      ->check(CLI::PositiveNumber);

  return [a]() -> int {
    if (!a->cases.filter.empty()) {
      if (a->vs_python) throw std::invalid_argument("--filter and --vs-python are two modes: choose one");
      if (a->threads > 0) at::set_num_threads(a->threads);
      a->cases.seed = a->python.seed;
      a->cases.repeats = a->repeats;
      a->cases.warmup = a->warmup;
      a->cases.quiet_stdout = a->json == "-";
      nlohmann::ordered_json j;
      const int rc = run_case_perf(a->cases, a->json.empty() ? nullptr : &j);
      write_json(a->json, j);
      return rc;
    }
    if (a->vs_python) {
      at::set_num_threads(1);  // as golden/dump.py pins torch
      nlohmann::ordered_json j;
      const int rc = run_vs_python(a->python, a->json.empty() ? nullptr : &j);
      write_json(a->json, j);
      return rc;
    }
    if (a->quick) {
      a->windows = {4, 16};
      a->cache_lens = {64};
      a->heads = {2};
      a->head_dims = {8};
      a->prefill = 16;
      a->repeats = std::min(a->repeats, 5);
      a->warmup = std::min(a->warmup, 1);
      a->harness_iterations = std::min(a->harness_iterations, 10);
    }
    const DType dtype = parse_dtype(a->dtype);
    for (const std::string& b : a->backends)
      if (b != "eager" && b != "sdpa") throw std::invalid_argument("--backends: '" + b + "' (expected eager or sdpa)");
    for (const std::string& k : a->kinds) parse_kind(k, 4, 8);  // reject bad names before timing anything
    at::manual_seed(0);
    if (a->threads > 0) at::set_num_threads(a->threads);

    std::ostream& table = a->json == "-" ? std::cerr : std::cout;
    print_header(table);
    const std::vector<Measurement> results = Bench(*a, dtype, [&](const Measurement& m) { print_row(table, m); }).run();

    nlohmann::ordered_json harness = nlohmann::ordered_json::array();
    if (!a->no_harness) {
      table << "\nharness throughput (random traces checked per second, " << a->harness_iterations << " cases per property):\n";
      for (campaign::Property p : campaign::all_properties()) {
        campaign::Options o;
        o.iterations = a->harness_iterations;
        const auto t0 = Clock::now();
        const campaign::Outcome out = campaign::run(p, o);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        const double rate = out.cases / std::max(s, 1e-9);
        table << "  " << std::left << std::setw(22) << campaign::to_string(p) << std::right << std::setw(10) << fixed(rate, 1)
              << " traces/s  (" << out.cases << " traces, " << out.observations.steps << " steps, " << fixed(s, 2) << " s)\n";
        harness.push_back({{"property", campaign::to_string(p)},
                           {"traces", out.cases},
                           {"steps", out.observations.steps},
                           {"seconds", s},
                           {"traces_per_second", rate},
                           {"ok", out.ok}});
      }
    }
    if (!a->json.empty()) {
      nlohmann::ordered_json j;
      j["format"] = "kvconform-bench-v1";
      j["tool_version"] = kToolVersion;
      j["command"] = command_line();
      j["dtype"] = to_string(dtype);
      j["threads"] = at::get_num_threads();
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const Measurement& m : results)
        rows.push_back({{"kind", m.kind},
                        {"backend", m.backend},
                        {"op", m.op},
                        {"window", m.window},
                        {"cache_len", m.cache_len},
                        {"batch", m.batch},
                        {"heads", m.heads},
                        {"kv_heads", m.kv_heads},
                        {"head_dim", m.head_dim},
                        {"tokens", m.tokens},
                        {"kv_length", m.kv_length},
                        {"median_us", m.us.median},
                        {"p25_us", m.us.p25},
                        {"p75_us", m.us.p75},
                        {"min_us", m.us.min},
                        {"gbps", m.gbps}});
      j["results"] = rows;
      j["harness"] = harness;
      write_json(a->json, j);
    }
    return 0;
  };
}

}  // namespace kvc::cli
