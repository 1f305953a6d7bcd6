// One JSON Schema check for the file formats that have a schema: scenario cases (cases/schema.json)
// and expectations files (docs/expectations.schema.json). A format's rules are written once, in its
// schema, which editors, Python's jsonschema and this check all read; a loader adds only what a
// schema cannot say (a regular expression that compiles, the size caps, the judge's own kinds).
// valijson is behind this header, so that only json_schema.cpp parses its templates. No LibTorch.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvc {

// The one violation a check reports: the deepest failing value, since valijson lists the enclosing
// failures (allOf, properties, items) before the one that caused them.
struct SchemaViolation {
  std::string pointer;  // JSON pointer of the failing value in the document ("" = the document)
  std::string message;  // what the schema wants there; see JsonSchema::check
};

class JsonSchema {
 public:
  // A draft 7 schema (the keywords valijson implements; $defs and if/then/else/const included).
  // Throws std::invalid_argument when schema_text is not a schema.
  explicit JsonSchema(const std::string& schema_text);
  ~JsonSchema();
  JsonSchema(const JsonSchema&) = delete;
  JsonSchema& operator=(const JsonSchema&) = delete;

  // nullopt when `doc` is valid. The message is valijson's, then the value found there ("got ...",
  // shortened) and the schema's "description" of that place where it has one, so that a reader
  // learns what was expected without opening the schema.
  std::optional<SchemaViolation> check(const nlohmann::json& doc) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// docs/expectations.schema.json, compiled in (as cases/schema.json is): the binary checks an
// expectations file wherever it runs.
const std::string& expectations_schema_text();

}  // namespace kvc
