// Checks a plugin (plugin_abi.h, docs/plugins.md): its cache layer against the C++ reference
// (make_layer) and the positions:: rules after every step, its attention kernel against the float64
// oracle with the backends' tolerance policy, on fixed scenarios (the random campaign lives above
// this library, in kvcgen/plugin_campaign.h). Every case runs in a forked child (plugin_runner.h),
// so a crash or a hang fails that case with the signal or timeout named and the run goes on.
// No LibTorch in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/plugin_runner.h"
#include "kvconform/results.h"
#include "kvconform/scenario.h"
#include "kvconform/seeds.h"

namespace kvc::plugin {

struct PluginCheckOptions {
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int iterations = 25;    // random-campaign cases per part (cache, kernel); 0 = none (kvcgen/plugin_campaign.h)
  int max_size = 50;      // the last random case's size (search.h)
  double timeout_s = 10;  // per case (one child process runs one case's whole step sequence)
  bool cache = true;      // check the cache layer (when the plugin exports one)
  bool kernel = true;     // check the attention kernel (when the plugin exports one)
  // Scenario files (cases/*.json) whose step sequences are replayed on every layer type they list,
  // beside the built-in scenarios; empty = none. Cases limited to releases of the
  // cache_position API are skipped (plugins implement the query_length API, behaviours.h).
  std::string cases_dir;
  // Over the registry id "plugin/<plugin>/<case>/<dtype>" (report::id_of); empty = all.
  std::function<bool(const std::string& id)> select;
  bool list_only = false;  // run nothing but the load probe: one Pass result per selected case
  // The found-case corpus (kvconform/regressions.h) whose plugin suite is replayed: the entries of
  // regressions/plugin/<plugin name>/ and of its family folders, as cases "regressions/<kernel|cache>/
  // <folder>/<hash>/<layer type>"; empty = none.
  std::string regressions_root;
  // A corpus root: a random-campaign failure, shrunk, is saved there (regressions/plugin/<plugin>/)
  // as a case file (the step sequence that fails on its own), so a found bug becomes a permanent case.
  std::string save_regressions;
  // Selectors (--dtype, --attention): only cases of this dtype / this layer type; the random
  // campaign draws only such configurations.
  std::optional<DType> dtype;
  std::optional<LayerType> attention;
  // After this many worker failures (a crash, a hang, an exit, a worker that does not start) the
  // remaining cases of this target are SKIP "gave up after N worker failures"; 0: never give up.
  int max_worker_failures = 0;
  // A reproduce string (trace:SEED:INDEX:SIZE, search.h): replays one shrunk campaign failure.
  std::string reproduce;
};

// Whether a failed result is a failure of the worker itself (crashed, timed out, exited, did not
// load) rather than a wrong answer: what --max-worker-failures counts.
bool worker_fault(const report::CaseResult& r);

// "gave up after N worker failures": the message of a case skipped by --max-worker-failures.
std::string gave_up_message(int failures);

// Where the checks send their calls: a forked child loading a shared library (plugin_target), or a
// worker process speaking the subprocess protocol (subprocess_backend.h). `run` executes one case's
// ops like plugin_runner's execute.
struct Target {
  std::string label;  // the path or command, for messages
  std::function<PluginRun(const std::vector<Op>&, double timeout_s)> run;
  // The optional layouts the kernel declared (docs/plugins.md, "Optional layouts":
  // "key_padding_mask", ...); unset or empty: none. Asked after the worker answered hello.
  std::function<std::vector<std::string>()> layouts;
};
Target plugin_target(const std::string& path);

enum class Part { Cache, Kernel };

// "static/sliding_attention(W=4,L=8) B=1 H=1 Hkv=1 D=4 float32 steps=[2,1,0,3] seed=11": a
// plugin case's configuration in its report detail and in a shrunk campaign counterexample.
std::string describe(const Scenario& scenario);

// One scenario (one layer: layer_types[0], inputs from its seed) through the plugin's cache layer
// or kernel, judged at every step by the StepDriver's reference and oracle. A failure message names
// the first wrong step and field: "step 3 (Decode after 8 tokens): stored row 2 holds token 5,
// expected 6". `plugin` is the plugin's name for the report.
report::CaseResult check_scenario(const Target& target, const std::string& name, const Scenario& scenario, Part part,
                                  const std::string& plugin, double timeout_s);
// Whether a plugin can be held to the scenario: no upstream deviation of its layer, and a sequence
// the layer can serve (not a case about the overflow error).
bool checkable(const Scenario& scenario);

// The fixed checks: a load probe, the built-in scenarios and options.cases_dir's cases. One
// CaseResult per case: name "cache/<scenario>/<static|dynamic>", "kernel/...", "golden-cache/<case>/<layer
// type>", "golden-kernel/..." (or "load" when the plugin cannot be loaded). The random campaign
// (kvcgen/plugin_campaign.h) runs after them.
struct FixedChecks {
  std::vector<report::CaseResult> results;
  bool loaded = false;
  std::string name;                               // the plugin's own name (or the file's)
  bool has_cache = false, has_attention = false;  // exported and selected
  bool isolated_failure = false;                  // a crash, hang or exit: a random campaign would only repeat it
  std::string first_fault;                        // the id of the first case that failed that way
  int worker_failures = 0;                        // how many cases failed that way (--max-worker-failures)
};
FixedChecks check_fixed(const Target& target, const PluginCheckOptions& options);

}  // namespace kvc::plugin
