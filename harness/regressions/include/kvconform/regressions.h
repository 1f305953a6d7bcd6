// The found-case corpus (docs/cli.md, "Regressions"): every failure a campaign shrinks is saved as one
// file regressions/<suite>/<target>/<hash>.json, named by a hash of its bytes (the same case saved
// twice is one file), written atomically; `run` and `engine` replay the folder by default, so a found
// bug becomes a permanent case by committing that one file. No LibTorch here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvc::regressions {

// The suites that save and replay found cases: "engine" (plans, target = the model), "plugin"
// (kernel case files, target = the kernel), "property" (scenario files of the property campaign and
// of `kvconform fuzz`, target = the property), "differential" (scenario files of `kvconform fuzz
// --differential`, target = the transformers release).
const std::vector<std::string>& suites();

// Throws std::invalid_argument unless `suite` is one of suites() and `target` is a folder name
// (letters, digits, '.', '_', '-'; not starting with '.'; at most 100 characters).
void check_names(const std::string& suite, const std::string& target);

// `name` as a target folder name: every character outside letters, digits, '.', '_', '-' becomes '_'
// (and a leading '.' too). A plugin's folder is target_name(its name).
std::string target_name(const std::string& name);

// 16 lowercase hex digits: FNV-1a 64 of the bytes. A file's name is the hash of its content.
std::string content_hash(std::string_view bytes);

// The bytes a saved document is written as: two-space JSON and a newline.
std::string canonical_bytes(const nlohmann::ordered_json& doc);

struct Saved {
  std::string path;      // <root>/<suite>/<target>/<hash>.json
  std::string id;        // regressions/<suite>/<target>/<hash>
  bool existed = false;  // the same bytes were already there: nothing was written
};
// Writes `doc` under `root` as <hash>.json, the hash of its canonical bytes; a scenario file (every
// suite but "engine") gets the hash as its "name" too (a case file's name is its stem), the hash then
// taken with the name left empty, so `kvconform replay` and `kvconform golden` read it as any case. (folders created as needed; a temporary file and a rename, so a reader
// never sees half a case). Throws std::invalid_argument for a bad suite or target and
// std::runtime_error naming the path when the folder or the file cannot be written.
Saved save(const std::string& root, const std::string& suite, const std::string& target, const nlohmann::ordered_json& doc);

// One saved case as read back. `error` is set (and `text` may be empty) when the file cannot be read
// or is not JSON: the caller reports that entry as a FAIL naming `path`, never stops the run.
struct Entry {
  std::string suite, target, hash, path, text, error;
  nlohmann::ordered_json doc;  // the parsed document (null when `error` is set)
  std::string id() const { return "regressions/" + suite + "/" + target + "/" + hash; }
};
// The entries of <root>/<suite>/<target>/ (every target of the suite when `target` is empty), in
// sorted order of target then file name; only *.json files. A missing folder is no entries.
std::vector<Entry> load(const std::string& root, const std::string& suite, const std::string& target = "");

// The corpus folder a command reads: `given` when set; else ./regressions when it is a folder; else
// the installed copy next to the binary (<prefix>/share/kvconform/regressions); else the checkout the
// binary was built from (kvc::paths::source_dir()); else "regressions" (then empty).
std::string resolve_root(const std::string& given = "");

}  // namespace kvc::regressions
