#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

#include "kvconform/report.h"

namespace kvc::report {

namespace fs = std::filesystem;

std::vector<std::string> report_files() { return {"junit.xml", "summary.json", "summary.md", "report.html"}; }

namespace {
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one code point at text[i]; returns its length, or 0 for an invalid sequence.
size_t decode(std::string_view text, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = b(0);
  size_t len;
  uint32_t min;
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
    min = 0x10000;
  } else return 0;
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}
}  // namespace

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = decode(text, i, cp);
    if (n == 0) {
      append_utf8(out, 0xFFFD);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string xml_escape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = decode(text, i, cp);
    if (n == 0) {  // invalid UTF-8 byte
      cp = 0xFFFD;
      n = 1;
    }
    const std::string_view raw = text.substr(i, n);
    i += n;
    switch (cp) {
      case '&': out += "&amp;"; continue;
      case '<': out += "&lt;"; continue;
      case '>': out += "&gt;"; continue;
      case '"': out += attribute ? "&quot;" : "\""; continue;
      case '\'': out += attribute ? "&apos;" : "'"; continue;
      case '\n': out += attribute ? "&#10;" : "\n"; continue;
      case '\r': out += "&#13;"; continue;
      case '\t': out += attribute ? "&#9;" : "\t"; continue;
      default: break;
    }
    // Characters XML 1.0 forbids even as references: C0 controls, surrogates (already rejected),
    // U+FFFE and U+FFFF. They become U+FFFD so that the document stays well formed.
    if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF || cp == 0xFFFD) {
      append_utf8(out, 0xFFFD);
      continue;
    }
    out.append(raw);
  }
  return out;
}

std::string bound_text(double bound) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", bound);
  return buf;
}

std::string measured_text(const CaseResult& c) {
  if (c.error < 0) return "";
  std::string out = "error " + bound_text(c.error);
  if (c.bound >= 0) out += ", bound " + bound_text(c.bound);
  if (has_margin(c)) out += ", margin " + bound_text(margin(c));
  return out;
}

std::string case_title(const CaseResult& c) { return c.name + "(" + c.params + ") [" + c.backend + ", " + c.dtype + "]"; }

std::vector<std::string> backends_in_order(const RunSummary& run) {
  std::vector<std::string> out;
  for (const CaseResult& c : run.cases)
    if (std::find(out.begin(), out.end(), c.backend) == out.end()) out.push_back(c.backend);
  return out;
}

namespace {
fs::path temp_path(const fs::path& target) {
  return target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
}

// Writes the temporary file next to `target`; removes it and throws on failure.
fs::path write_temp(const fs::path& target, std::string_view content) {
  const fs::path tmp = temp_path(target);
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (out) out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error("cannot write " + tmp.string());
  }
  return tmp;
}

void move_into_place(const fs::path& tmp, const fs::path& target) {
  std::error_code ec;
  fs::rename(tmp, target, ec);  // atomic on POSIX: readers see the old file or the new one
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error("cannot move " + tmp.string() + " to " + target.string() + ": " + ec.message());
  }
}
}  // namespace

void write_file_atomically(const std::string& path, std::string_view content) {
  move_into_place(write_temp(path, content), path);
}

std::vector<std::string> write_reports(const RunSummary& run, const std::string& dir, const ReportOptions& options) {
  // Render everything first: an exception here leaves the folder untouched.
  const std::vector<std::string> names = report_files();
  const std::vector<std::string> contents = {junit_xml(run, options), summary_json(run, options), summary_markdown(run, options),
                                             report_html(run, options)};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::runtime_error("cannot create report folder " + dir + (ec ? ": " + ec.message() : ""));
  // Every temporary first, then the renames: a failed write leaves the previous reports intact.
  std::vector<fs::path> temps, targets;
  try {
    for (size_t i = 0; i < names.size(); ++i) {
      targets.push_back(fs::path(dir) / names[i]);
      temps.push_back(write_temp(targets.back(), contents[i]));
    }
  } catch (...) {
    std::error_code ignored;
    for (const fs::path& t : temps) fs::remove(t, ignored);
    throw;
  }
  std::vector<std::string> written;
  for (size_t i = 0; i < targets.size(); ++i) {
    move_into_place(temps[i], targets[i]);
    written.push_back(targets[i].string());
  }
  return written;
}

}  // namespace kvc::report
