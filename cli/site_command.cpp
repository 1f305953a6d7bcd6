// `kvconform site REPORT_DIR... [--out DIR]`: the results of runs as a static site. The site is
// written by the Python package's kvconform.site (python/kvconform/site.py), which this command
// runs with every argument as given: one implementation, reachable from the binary and from
// `python -m kvconform site`. No LibTorch.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli_util.h"
#include "commands.h"

namespace kvc::cli {

Runner add_site_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "site",
      "Write the results of report folders as a static site: matrix with filters, a page per failure and "
      "deviation, findings, kernel and family-coverage tables (kvconform site --help: python3 -m kvconform.site)");
  // Every argument, --help included, goes to the Python module, whose argparse documents them.
  cmd->set_help_flag();
  cmd->prefix_command();
  cmd->allow_extras();
  return [cmd] {
    std::vector<std::string> args = cmd->remaining();
    const char* env_python = std::getenv("KVC_PYTHON");
    const std::string python = env_python && *env_python ? env_python : "python3";
    // The checkout's python/ (or the installed share/kvconform/python) first on the module path; an
    // installed kvconform package is found without it.
    const std::string package = data_folder("python", false, "python");
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(package) / "kvconform" / "site.py", ec)) {
      const char* old = std::getenv("PYTHONPATH");
      const std::string path = std::filesystem::absolute(package).string() + (old && *old ? ":" + std::string(old) : "");
      ::setenv("PYTHONPATH", path.c_str(), 1);
    }
    std::vector<std::string> words = {python, "-m", "kvconform.site"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    std::cout.flush();
    ::execvp(argv[0], argv.data());
    std::cerr << "kvconform site: cannot run " << python << " (" << std::strerror(errno)
              << "): the site is written by the Python package kvconform.site (KVC_PYTHON names another interpreter)\n";
    return 2;
  };
}

}  // namespace kvc::cli
