// Plugin and --backend-cmd checks with their random campaign: the fixed checks of the harness
// (kvconform/plugin_host.h) followed by a random campaign on the one loop (search.h): the property
// campaign's trace i on one layer of either cache kind and, for kernels, one case in five from the
// numerics generator; shrunk on failure.
#pragma once

#include <string>
#include <vector>

#include "kvconform/plugin_host.h"
#include "kvconform/results.h"

namespace kvc::plugin {

// check_fixed, then options.iterations random cases per part the target exports ("campaign/cache",
// "campaign/kernel"; skipped after a crash, hang or exit, which the campaign would only repeat).
std::vector<report::CaseResult> check_target(const Target& target, const PluginCheckOptions& options);
// A shared library (plugin_abi.h, docs/plugins.md).
std::vector<report::CaseResult> check_plugin(const std::string& path, const PluginCheckOptions& options = {});
// A kernel in a worker process (subprocess_backend.h); options.timeout_s is per call here.
std::vector<report::CaseResult> check_backend_command(const std::string& command, const PluginCheckOptions& options);

}  // namespace kvc::plugin
