// Checks a plugin (plugin_abi.h, docs/plugins.md): its cache layer against the C++ reference
// (make_layer) and the positions:: rules after every step, its attention kernel against the float64
// oracle with the backends' tolerance policy. Every case runs in a forked child (plugin_runner.h),
// so a crash or a hang fails that case with the signal or timeout named and the run goes on.
// No LibTorch in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvconform/plugin_runner.h"
#include "kvconform/results.h"

namespace kvc::plugin {

struct PluginCheckOptions {
  uint64_t seed = 20250917;
  int iterations = 25;     // RapidCheck cases of the random campaign per part (cache, kernel); 0 = none
  int max_size = 50;       // RapidCheck size
  double timeout_s = 10;   // per case (one child process runs one case's whole step sequence)
  bool cache = true;       // check the cache layer (when the plugin exports one)
  bool kernel = true;      // check the attention kernel (when the plugin exports one)
  // Scenario files (cases/*.json) whose step sequences are replayed on every layer type they list,
  // beside the built-in step_patterns(); empty = none. Cases limited to releases of the
  // cache_position API are skipped (plugins implement the query_length API, behaviours.h).
  std::string cases_dir;
};

// One CaseResult per case: suite "plugin", backend = the plugin's name, name
// "cache/<pattern>/<static|dynamic>", "kernel/<pattern>/<static|dynamic>", "golden-cache/<case>/<layer type>",
// "golden-kernel/<case>/<layer type>", "campaign/cache",
// "campaign/kernel" (or "load" when the plugin cannot be loaded). A failure message names the first
// wrong step and field: "step 3 (Decode after 8 tokens): stored row 2 holds token 5, expected 6".
std::vector<report::CaseResult> check_plugin(const std::string& path, const PluginCheckOptions& options = {});

// Where the checks send their calls: a forked child loading a shared library (check_plugin), or a
// worker process speaking the subprocess protocol (subprocess_backend.h). `run` executes one case's
// ops like plugin_runner's execute; `reproduce` is the command line that repeats the checks.
struct Target {
  std::string label;      // the path or command, for messages
  std::string reproduce;  // "kvconform run --plugin PATH"
  std::function<Trace(const std::vector<Op>&, double timeout_s)> run;
};
std::vector<report::CaseResult> check_target(const Target& target, const PluginCheckOptions& options);

}  // namespace kvc::plugin
