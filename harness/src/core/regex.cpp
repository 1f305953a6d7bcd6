#include "kvconform/regex.h"

#include <regex>

namespace kvc {

struct Regex::Impl {
  std::regex re;
};

namespace {

// Each group of a match (none after a failed one) and where it lies in the searched text.
std::vector<RegexMatch::Group> groups_of(const std::smatch& m, const std::string& text) {
  std::vector<RegexMatch::Group> out;
  for (const std::ssub_match& g : m) {
    RegexMatch::Group group;
    group.matched = g.matched;
    if (g.matched) {
      group.position = static_cast<size_t>(g.first - text.begin());
      group.text = g.str();
    }
    out.push_back(std::move(group));
  }
  return out;
}

}  // namespace

std::string RegexMatch::str(size_t i) const { return matched(i) ? groups_[i].text : std::string(); }

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->re = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw RegexError(e.what());
  }
}

Regex::Regex(const Regex& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Regex& Regex::operator=(const Regex& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Regex::Regex(Regex&& other) noexcept = default;
Regex& Regex::operator=(Regex&& other) noexcept = default;
Regex::~Regex() = default;

bool Regex::search(const std::string& text) const { return std::regex_search(text, impl_->re); }

bool Regex::search(const std::string& text, RegexMatch& match) const { return find(text, match, false); }

bool Regex::matches(const std::string& text) const { return std::regex_match(text, impl_->re); }

bool Regex::matches(const std::string& text, RegexMatch& match) const { return find(text, match, true); }

bool Regex::find(const std::string& text, RegexMatch& match, bool whole) const {
  std::smatch m;
  const bool found = whole ? std::regex_match(text, m, impl_->re) : std::regex_search(text, m, impl_->re);
  match.groups_ = groups_of(m, text);
  return found;
}

std::vector<RegexMatch> Regex::find_all(const std::string& text) const {
  std::vector<RegexMatch> out;
  for (std::sregex_iterator it(text.begin(), text.end(), impl_->re), end; it != end; ++it) {
    out.emplace_back();
    out.back().groups_ = groups_of(*it, text);
  }
  return out;
}

std::string Regex::replace(const std::string& text, const std::string& format) const {
  return std::regex_replace(text, impl_->re, format);
}

}  // namespace kvc
