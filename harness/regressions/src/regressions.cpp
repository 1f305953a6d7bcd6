#include "kvconform/regressions.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "kvconform/report.h"
#include "build_paths.h"

namespace kvc::regressions {

namespace fs = std::filesystem;

const std::vector<std::string>& suites() {
  static const std::vector<std::string> all = {"differential", "engine", "plugin", "property"};
  return all;
}

namespace {
bool folder_name(const std::string& s) {
  if (s.empty() || s.size() > 100 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

std::string read_all(const fs::path& p, std::string& error) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    error = "cannot be read";
    return "";
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

void check_names(const std::string& suite, const std::string& target) {
  if (std::find(suites().begin(), suites().end(), suite) == suites().end()) {
    std::string names;
    for (const std::string& s : suites()) names += (names.empty() ? "" : ", ") + s;
    throw std::invalid_argument("regressions: unknown suite '" + suite + "' (expected one of: " + names + ")");
  }
  if (!folder_name(target))
    throw std::invalid_argument("regressions: target '" + target + "' of suite " + suite +
                                " is not a folder name (letters, digits, '.', '_', '-', not starting with '.')");
}

std::string target_name(const std::string& name) {
  std::string out = name.substr(0, 100);
  for (char& c : out)
    if (c != '.' && !folder_name(std::string(1, c))) c = '_';
  if (out.empty()) out = "_";
  if (out[0] == '.') out[0] = '_';
  return out;
}

std::string content_hash(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = digits[h & 0xf];
  return out;
}

std::string canonical_bytes(const nlohmann::ordered_json& doc) { return doc.dump(2) + "\n"; }

Saved save(const std::string& root, const std::string& suite, const std::string& target, const nlohmann::ordered_json& doc) {
  check_names(suite, target);
  // A scenario file's name must equal its file stem (cases/schema.json): it is the hash, taken over
  // the document with the name left empty. A plan keeps its own name (known deviations match it).
  nlohmann::ordered_json named = doc;
  const bool scenario = suite != "engine" && named.is_object();
  if (scenario) named["name"] = "";
  const std::string hash = content_hash(canonical_bytes(named));
  if (scenario) named["name"] = hash;
  const std::string bytes = canonical_bytes(named);
  const fs::path dir = fs::path(root) / suite / target;
  Saved out;
  out.path = (dir / (hash + ".json")).string();
  out.id = "regressions/" + suite + "/" + target + "/" + hash;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw std::runtime_error("cannot create " + dir.string() + (ec ? ": " + ec.message() : ""));
  if (fs::exists(out.path, ec)) {
    std::string error;
    if (read_all(out.path, error) == bytes && error.empty()) {
      out.existed = true;
      return out;
    }
    throw std::runtime_error(out.path + " exists with other bytes than the case saved under its hash");
  }
  report::write_file_atomically(out.path, bytes);
  return out;
}

std::vector<Entry> load(const std::string& root, const std::string& suite, const std::string& target) {
  check_names(suite, target.empty() ? std::string("any") : target);
  std::vector<Entry> out;
  const fs::path base = fs::path(root) / suite;
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return out;
  std::vector<std::string> targets;
  if (!target.empty()) {
    targets.push_back(target);
  } else {
    for (const auto& e : fs::directory_iterator(base, ec))
      if (e.is_directory() && folder_name(e.path().filename().string())) targets.push_back(e.path().filename().string());
    std::sort(targets.begin(), targets.end());
  }
  for (const std::string& t : targets) {
    const fs::path dir = base / t;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      Entry e;
      e.suite = suite;
      e.target = t;
      e.hash = f.stem().string();
      e.path = f.string();
      e.text = read_all(f, e.error);
      if (e.error.empty()) {
        try {
          e.doc = nlohmann::ordered_json::parse(e.text);
        } catch (const nlohmann::json::parse_error& p) {
          e.error = std::string("not JSON: ") + p.what();
        }
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::string resolve_root(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  if (fs::is_directory("regressions", ec)) return "regressions";
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = self.parent_path().parent_path() / "share" / "kvconform" / "regressions";
    if (fs::is_directory(installed, ec)) return installed.lexically_normal().string();
  }
  const std::string source = kvc::paths::source_dir();  // empty in a wheel's binary
  const fs::path checkout = fs::path(source) / "regressions";
  if (!source.empty() && fs::is_directory(checkout, ec)) return checkout.lexically_normal().string();
  return "regressions";
}

}  // namespace kvc::regressions
