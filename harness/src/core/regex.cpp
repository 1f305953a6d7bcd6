#include "kvconform/regex.h"

#include <regex>

namespace kvc {

struct Regex::Impl {
  std::regex re;
};

namespace {

RegexMatch::Group group_of(const std::ssub_match& m, const std::string& text) {
  RegexMatch::Group g;
  g.matched = m.matched;
  if (m.matched) {
    g.position = static_cast<size_t>(m.first - text.begin());
    g.text = m.str();
  }
  return g;
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

bool Regex::search(const std::string& text, RegexMatch& match) const {
  std::smatch m;
  match.groups_.clear();
  if (!std::regex_search(text, m, impl_->re)) return false;
  for (const std::ssub_match& g : m) match.groups_.push_back(group_of(g, text));
  return true;
}

bool Regex::matches(const std::string& text) const { return std::regex_match(text, impl_->re); }

bool Regex::matches(const std::string& text, RegexMatch& match) const {
  std::smatch m;
  match.groups_.clear();
  if (!std::regex_match(text, m, impl_->re)) return false;
  for (const std::ssub_match& g : m) match.groups_.push_back(group_of(g, text));
  return true;
}

std::vector<RegexMatch> Regex::find_all(const std::string& text) const {
  std::vector<RegexMatch> out;
  for (std::sregex_iterator it(text.begin(), text.end(), impl_->re), end; it != end; ++it) {
    RegexMatch match;
    for (const std::ssub_match& g : *it) match.groups_.push_back(group_of(g, text));
    out.push_back(std::move(match));
  }
  return out;
}

std::string Regex::replace(const std::string& text, const std::string& format) const {
  return std::regex_replace(text, impl_->re, format);
}

}  // namespace kvc
