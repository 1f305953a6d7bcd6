// Attention kernels in another process (Python, anything with stdin/stdout): `kvconform run
// --backend-cmd 'python adapter.py'` starts the command as a worker and sends it every kernel call
// of the plugin checks (plugin_host.h) over a length-prefixed protocol on stdin/stdout
// (docs/plugins.md, "Kernels in another process"). Tensors travel as raw little-endian bytes after a
// small JSON header. The worker lives across cases; a call that crashes it, hangs past the timeout
// or breaks the protocol fails that case with the reason (and the worker's stderr tail), the
// worker is restarted for the next case, and the run goes on. No LibTorch here.
#pragma once

#include <string>
#include <vector>

#include "kvconform/plugin_host.h"
#include "kvconform/plugin_runner.h"

namespace kvc::plugin {

constexpr int kProtocolVersion = 1;
// Starting a worker (interpreter start, `import torch`) is allowed this long beside the per-call timeout.
constexpr double kStartupTimeoutS = 120;

// Runs the attention ops of `ops` on the worker of `command` (started on first use, restarted after
// a failure), each call bounded by `timeout_s`. Cache ops are answered KVC_ERR_UNSUPPORTED: the
// protocol carries kernels only. With no ops it only starts the worker (its name and description).
PluginRun execute_command(const std::string& command, const std::vector<Op>& ops, double timeout_s);

// The target the plugin kernel checks (plugin_host.h, kvcgen/plugin_campaign.h) send their calls to:
// the worker of `command`. Cache ops are answered KVC_ERR_UNSUPPORTED.
Target backend_command_target(const std::string& command);
// Stops the worker of `command`: the next check starts afresh.
void stop_worker(const std::string& command);

// Stops every worker this process started (closes its stdin, then kills what is left).
void stop_workers();

}  // namespace kvc::plugin
