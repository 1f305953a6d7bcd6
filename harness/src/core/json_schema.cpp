#include "kvconform/json_schema.h"

#include <stdexcept>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>
#include <vector>

namespace kvc {

using nlohmann::json;
// The schema as written, in its own key order, for the messages (valijson reads a json).
using ojson = nlohmann::ordered_json;

namespace {

// valijson names the path as ["<root>", "[steps]", "[0]", ...]; a report prints JSON pointers.
std::vector<std::string> path_of(const std::vector<std::string>& context) {
  std::vector<std::string> out;
  for (const std::string& c : context) {
    if (c == "<root>" || c.size() < 2 || c.front() != '[') continue;
    std::string part = c.substr(1, c.size() - 2);
    if (!part.empty() && part.front() == '"') part = part.substr(1, part.size() - 2);
    out.push_back(part);
  }
  return out;
}

// A local "$ref" ("#/$defs/entry") followed, once per step: the schemas here reference only their
// own definitions.
const ojson* deref(const ojson& root, const ojson* node) {
  for (int hops = 0; node && node->is_object() && node->contains("$ref") && hops < 8; ++hops) {
    const ojson& ref = node->at("$ref");
    if (!ref.is_string() || ref.get_ref<const std::string&>().rfind("#", 0) != 0) return nullptr;
    try {
      node = &root.at(ojson::json_pointer(ref.get<std::string>().substr(1)));
    } catch (const ojson::exception&) {
      return nullptr;
    }
  }
  return node;
}

// The schema node for the place `path` names, through properties, items and local $refs (the
// referenced node itself), or nullptr where the schema says nothing of it.
const ojson* node_at(const ojson& root, const std::vector<std::string>& path) {
  const ojson* node = deref(root, &root);
  for (const std::string& part : path) {
    if (!node || !node->is_object()) return nullptr;
    if (node->contains("properties") && node->at("properties").contains(part)) node = &node->at("properties").at(part);
    else if (node->contains("items") && !part.empty() && part.find_first_not_of("0123456789") == std::string::npos)
      node = &node->at("items");
    else return nullptr;
    // A property may give its own description beside a $ref: that one is the more specific.
    if (node->is_object() && node->contains("description") && node->contains("$ref")) return node;
    node = deref(root, node);
  }
  return node;
}

std::string field_of(const ojson* node, const char* key) {
  return node && node->is_object() && node->contains(key) && node->at(key).is_string() ? node->at(key).get<std::string>() : "";
}

// "a, b, c" of a node's property names, in the schema's order.
std::string property_list(const ojson& root, const ojson* node) {
  node = deref(root, node);
  std::string out;
  if (node && node->is_object() && node->contains("properties"))
    for (const auto& [key, value] : node->at("properties").items()) out += (out.empty() ? "" : ", ") + key;
  return out;
}

std::string shortened(const json& value) {
  std::string text = value.dump();
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

}  // namespace

struct JsonSchema::Impl {
  ojson document;
  valijson::Schema schema;
};

JsonSchema::JsonSchema(const std::string& schema_text) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->document = ojson::parse(schema_text);
    const json plain = json::parse(schema_text);
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(plain), impl_->schema);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("not a JSON Schema: ") + e.what());
  }
}

JsonSchema::~JsonSchema() = default;

// valijson's descriptions say what failed in the schema's terms ("Failed to match against any enum
// values."); a reader wants the field and what it must be. The common keywords are phrased from the
// schema itself (its property names, enum values, const, description); others keep valijson's text.
std::optional<SchemaViolation> JsonSchema::check(const json& doc) const {
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  if (validator.validate(impl_->schema, valijson::adapters::NlohmannJsonAdapter(doc), &results)) return std::nullopt;
  valijson::ValidationResults::Error error, deepest;
  while (results.popError(error))
    if (deepest.context.empty() || error.context.size() > deepest.context.size()) deepest = error;
  std::vector<std::string> path = path_of(deepest.context);
  const ojson& root = impl_->document;
  const std::string& raw = deepest.description;
  const auto quoted = [&] {  // the name in "... 'name'."
    const size_t close = raw.rfind('\'');
    const size_t open = close == std::string::npos || close == 0 ? std::string::npos : raw.rfind('\'', close - 1);
    return open == std::string::npos ? std::string() : raw.substr(open + 1, close - open - 1);
  };
  const ojson* parent = node_at(root, path);
  std::string message;
  bool show_value = true;
  if (raw.rfind("Missing required property '", 0) == 0) {
    path.push_back(quoted());
    message = "missing, and required";
    show_value = false;
  } else if (raw.rfind("Object contains a property that could not be validated", 0) == 0) {
    path.push_back(quoted());
    message = "unknown field (" + property_list(root, parent) + ")";
    show_value = false;
  } else {
    const ojson* node = deref(root, parent);
    const std::string d =
        field_of(parent, "description").empty() ? field_of(node, "description") : field_of(parent, "description");
    if (node && (node->contains("oneOf") || node->contains("anyOf"))) {
      // An alternative's own failure (an enum inside the first form) says less than the choice does.
      message = "has none of the forms the format allows" + (d.empty() ? "" : " (" + d + ")");
    } else if (node && node->contains("enum") && raw.rfind("Failed to match against any enum", 0) == 0) {
      std::string values;
      for (const ojson& v : node->at("enum")) values += (values.empty() ? "" : ", ") + v.dump();
      message = node->at("enum").size() > 8
                    ? "must be one of the " + std::to_string(node->at("enum").size()) + " values the schema lists"
                    : "must be one of " + values;
    } else if (node && node->contains("const") && raw.rfind("Failed to match expected value set by 'const'", 0) == 0) {
      message = "must be " + node->at("const").dump() + (d.empty() ? "" : " (" + d + ")");
    } else if (node && node->contains("minLength") && node->at("minLength") == 1 &&
               raw.rfind("String should be no fewer", 0) == 0) {
      message = "must be a non-empty string";
    } else if (node && node->contains("type") && raw.rfind("Value type not permitted", 0) == 0) {
      message = "must be " + (node->at("type").is_string() ? "of type " + node->at("type").get<std::string>()
                                                           : "of type " + node->at("type").dump());
    } else if (node && node->contains("pattern") && raw.rfind("Failed to match regex", 0) == 0) {
      message = "must match " + node->at("pattern").get<std::string>() + (d.empty() ? "" : " (" + d + ")");
    } else if (raw.rfind("Target should not validate", 0) == 0 || raw.rfind("Failed to validate against a conditional", 0) == 0) {
      // The schema's "not" and if/then rules tie fields together: the node's description states them.
      message = "breaks a rule of the format" + (d.empty() ? "" : ": " + d);
      show_value = false;
    } else {
      message = raw;
      while (!message.empty() && (message.back() == '.' || message.back() == ' ')) message.pop_back();
    }
  }
  SchemaViolation v;
  for (const std::string& part : path) v.pointer += "/" + part;
  v.message = message;
  if (show_value) {
    try {
      v.message += ", got " + shortened(doc.at(json::json_pointer(v.pointer)));
    } catch (const json::exception&) {
    }
  }
  return v;
}

}  // namespace kvc
