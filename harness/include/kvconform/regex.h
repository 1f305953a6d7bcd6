// ECMAScript regular expressions (std::regex's) compiled in one translation unit (regex.cpp).
// std::regex's templates (its compiler and executor) cost 2 to 3 s of compile time in every unit
// that searches with them, about as much as parsing CLI11; behind this class they are compiled once
// (docs/performance.md, "Build"). The semantics are std::regex's, ECMAScript grammar.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvc {

// A pattern that is not a regular expression: what() is std::regex_error's.
class RegexError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One match of a search: the whole match (group 0) and each group's place in the searched text.
class RegexMatch {
 public:
  struct Group {
    bool matched = false;
    size_t position = 0;
    std::string text;
  };
  size_t size() const { return groups_.size(); }
  // Group i's text; "" where the group took no part (std::smatch::str).
  std::string str(size_t i = 0) const;
  bool matched(size_t i) const { return i < groups_.size() && groups_[i].matched; }
  size_t position() const { return groups_.empty() ? 0 : groups_[0].position; }
  size_t length() const { return groups_.empty() ? 0 : groups_[0].text.size(); }

 private:
  friend class Regex;
  std::vector<Group> groups_;
};

class Regex {
 public:
  // Throws RegexError when `pattern` is not an ECMAScript regular expression.
  explicit Regex(const std::string& pattern);
  Regex(const Regex& other);
  Regex& operator=(const Regex& other);
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  ~Regex();

  // std::regex_search: somewhere in `text`; with `match`, where (and the groups).
  bool search(const std::string& text) const;
  bool search(const std::string& text, RegexMatch& match) const;
  // std::regex_match: the whole of `text`.
  bool matches(const std::string& text) const;
  bool matches(const std::string& text, RegexMatch& match) const;
  // Every non-overlapping match, left to right (std::sregex_iterator).
  std::vector<RegexMatch> find_all(const std::string& text) const;
  // std::regex_replace: every match replaced by `format` ($&, $1, ... as ECMAScript's replace).
  std::string replace(const std::string& text, const std::string& format) const;

 private:
  // search (whole: false) or matches (true), the groups recorded in `match`.
  bool find(const std::string& text, RegexMatch& match, bool whole) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvc
