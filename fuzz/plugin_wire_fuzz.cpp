// libFuzzer: the host's decoding of what a plugin's child process sends back (plugin_runner.h,
// decode_run). The plugin runs in that process and can scribble over the pipe: any bytes must
// decode into a trace (possibly ended as Exited), never a crash, a hang or a read past the data.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvconform/plugin_runner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::plugin::PluginRun t;
  kvc::plugin::decode_run(std::string(reinterpret_cast<const char*>(data), size), t);
  // Every string and buffer came out of the data (a load error's detail too; other details are the
  // host's own words): the trace cannot hold more bytes than were sent.
  size_t bytes = t.name.size() + t.description.size() + (t.end == kvc::plugin::PluginRun::End::LoadFailed ? t.detail.size() : 0);
  for (const auto& r : t.results) bytes += r.error.size() + r.out1.size() + r.out2.size() + r.guard.size();
  if (bytes > size) __builtin_trap();
  return 0;
}
