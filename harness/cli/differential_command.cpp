// `kvconform fuzz --differential`: random sequences against the real transformers, per version.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <iostream>

#include "commands.h"
#include "kvcgen/differential.h"

namespace kvc::cli {

namespace fs = std::filesystem;

int run_differential(const DifferentialRequest& req) {
  const fs::path root = fs::weakly_canonical(fs::absolute(req.root));
  const std::vector<std::string> versions = req.versions.empty() ? pinned_versions(root.string()) : req.versions;
  if (versions.empty()) throw std::invalid_argument("no golden/requirements-<version>.txt under " + root.string());
  int64_t disagreements = 0;
  const bool tty = isatty(STDERR_FILENO);
  for (const std::string& v : versions) {
    const std::string setup = "bash '" + (root / "golden/setup_env.sh").string() + "' " + v + " >&2";
    if (std::system(setup.c_str()) != 0) throw std::invalid_argument("cannot set up the environment for transformers " + v);
    differential::Options o;
    o.version = v;
    o.python = (root / ("golden/.venv-" + v) / "bin/python").string();
    o.script = (root / "golden/dump.py").string();
    o.seed = req.seed;
    o.iterations = req.iterations;
    o.time_budget_s = req.time_budget_s;
    o.out_dir = req.out_dir;
    o.reference_release = req.reference_release;
    o.mutation = parse_mutation(req.mutant);
    o.shard_index = req.shard_index;
    o.shard_count = req.shard_count;
    o.workers = req.workers > 0 ? req.workers : std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
    if (tty)
      o.progress = [&](int64_t done, int64_t bad) {
        if (done % 50 == 0) std::fprintf(stderr, "\r%s: %lld sequences, %lld disagreements", v.c_str(), (long long)done, (long long)bad);
      };
    const differential::Summary s = differential::run(o);
    if (tty) std::fprintf(stderr, "\n");
    // On stderr: the report itself is the same for any worker count.
    std::fprintf(stderr, "%s: %.2f sequences/s with %d dumper workers\n", v.c_str(),
                 static_cast<double>(s.sequences) / std::max(s.seconds, 1e-9), s.workers);
    std::cout << "differential(transformers=" << v << ",seed=" << req.seed
              << (req.shard_count > 1 ? ",shard=" + std::to_string(req.shard_index) + "/" + std::to_string(req.shard_count) : "")
              << "): " << (s.disagreements ? "FAIL" : "OK")
              << " (" << s.sequences << " sequences, " << s.steps << " steps, " << s.disagreements << " disagreements, "
              << s.deviations << " upstream deviations reproduced, " << static_cast<int64_t>(s.seconds) << " s)\n";
    for (size_t i = 0; i < s.saved.size(); ++i) std::cout << "  " << s.messages[i] << "\n  saved: " << s.saved[i] << "\n";
    disagreements += s.disagreements;
  }
  return disagreements == 0 ? 0 : 1;
}

}  // namespace kvc::cli
