// JSONL in and out for `kvg eval`. Each line is one flat JSON object
// (common/json_reader.hpp): strings, and numbers, booleans and null for keys
// it does not use; errors name the file, the line and the column.
#include "cli/eval/eval_items.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include "cli/args.hpp"
#include "cli/eval/eval_verifier.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/utf8.hpp"

namespace kvg::cli {

namespace {

// Bounds checked before anything is parsed.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kMaxItems = 100000;

// The line's string-valued members; numbers, booleans and null are allowed
// for members this harness does not use; nested values are refused.
std::map<std::string, std::string> line_fields(std::string_view line, const std::string& where) {
  const std::string what = where + ": not a JSON object line";
  const nlohmann::json doc = read_json(line, what);
  if (!doc.is_object()) throw Error(ErrorCode::InvalidArgument, what + ": the line is not an object");
  std::map<std::string, std::string> fields;
  for (const auto& [key, value] : doc.items()) {
    if (value.is_string()) fields.emplace(key, value.get<std::string>());
    else if (value.is_structured())
      throw Error(ErrorCode::InvalidArgument, what + ": the value of \"" + key + "\" is not a string, number, boolean or null");
  }
  return fields;
}

const std::string& required(const std::map<std::string, std::string>& fields, const char* key,
                            const std::string& where) {
  const auto it = fields.find(key);
  if (it == fields.end() || it->second.empty())
    throw Error(ErrorCode::InvalidArgument, where + ": \"" + key + "\" is missing or empty");
  return it->second;
}

std::string optional(const std::map<std::string, std::string>& fields, const char* key, std::string fallback = "") {
  const auto it = fields.find(key);
  return it == fields.end() ? fallback : it->second;
}

}  // namespace

std::vector<EvalItem> read_eval_items(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::NotFound, path + ": cannot open the question file");
  std::vector<EvalItem> items;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    if (line.size() > kMaxLineBytes)
      throw Error(ErrorCode::InvalidArgument, where + ": a line of more than " + std::to_string(kMaxLineBytes) +
                                                  " bytes");
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (items.size() == kMaxItems)
      throw Error(ErrorCode::InvalidArgument, where + ": more than " + std::to_string(kMaxItems) + " items");
    const std::map<std::string, std::string> fields = line_fields(line, where);
    EvalItem item;
    item.question = required(fields, "question", where);
    item.answer = required(fields, "answer", where);
    item.verifier = optional(fields, "verifier", "contains");
    item.solution = optional(fields, "solution");
    item.kind = optional(fields, "kind");
    item.family = optional(fields, "family");
    check_verifier(item.verifier, item.answer, where);
    items.push_back(std::move(item));
  }
  if (items.empty()) throw Error(ErrorCode::InvalidArgument, path + ": the file holds no questions (it is empty)");
  return items;
}

std::string eval_items_jsonl(const std::vector<EvalItem>& items) {
  std::ostringstream out;
  for (const EvalItem& item : items) {
    out << "{\"question\": \"" << json_escape(item.question) << "\", \"answer\": \"" << json_escape(item.answer)
        << "\", \"verifier\": \"" << json_escape(item.verifier) << "\"";
    if (!item.solution.empty()) out << ", \"solution\": \"" << json_escape(item.solution) << "\"";
    if (!item.kind.empty()) out << ", \"kind\": \"" << json_escape(item.kind) << "\"";
    if (!item.family.empty()) out << ", \"family\": \"" << json_escape(item.family) << "\"";
    out << "}\n";
  }
  return out.str();
}

}  // namespace kvg::cli
