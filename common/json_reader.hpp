// Reading JSON the project accepts from users (chat messages, kvg eval's
// question lines, kvg reproduce's manifest row): nlohmann::json's parser,
// made strict where kvg needs it to be. A member name that appears twice in
// one object is refused (nlohmann keeps the last, which would let a second
// "role" silently win); errors are kvg::Error(InvalidArgument) that begin
// with what was being read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace kvg {

// `what` names the text in errors ("chat messages JSON", "file.jsonl:3").
inline nlohmann::json read_json(std::string_view text, const std::string& what) {
  // The member names seen so far in each open object, innermost last.
  std::vector<std::vector<std::string>> names;
  const nlohmann::json::parser_callback_t refuse_duplicates = [&](int, nlohmann::json::parse_event_t event,
                                                                  nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) names.emplace_back();
    if (event == Event::object_end && !names.empty()) names.pop_back();
    if (event == Event::key && !names.empty()) {
      const std::string& name = parsed.get_ref<const std::string&>();
      for (const std::string& seen : names.back())
        if (seen == name) throw Error(ErrorCode::InvalidArgument, what + ": \"" + name + "\" appears twice");
      names.back().push_back(name);
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), refuse_duplicates);
  } catch (const nlohmann::json::exception& e) {
    // Every error of the parser (a syntax error, and also a number too large
    // for a double: out_of_range.406), as "[json.exception.<kind>.<id>] ..."
    // without that prefix.
    std::string message = e.what();
    if (const size_t at = message.find("] "); message.rfind("[json.exception.", 0) == 0 && at != std::string::npos)
      message = message.substr(at + 2);
    throw Error(ErrorCode::InvalidArgument, what + ": " + message);
  }
}

}  // namespace kvg
