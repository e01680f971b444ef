// Flag parsing for the `kvg` command: `--name value` and boolean `--name`,
// checked against the command's declared flags (cli/commands.cpp), which
// also make its --help.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvg::cli {

// One flag a command takes, with its one line of help.
struct Flag {
  std::string name;   // without the leading "--"
  std::string value;  // what the value is, e.g. "N" or "FILE"; empty: a boolean flag
  std::string help;
  std::string alias = {};  // a short spelling, e.g. "-n"
  // More spellings of the same flag: other tools' names for it (llama.cpp's
  // --ctx-size), so their users' habits work; --help names them after the help.
  std::vector<std::string> also = {};
  // Not empty: another tool's flag that means nothing here, refused with this
  // reason after the spelling given ("-ngl is llama.cpp's ..."), rather than
  // "did you mean" a flag it has nothing to do with. --help leaves it out.
  std::string refused = {};
};
using Flags = std::vector<Flag>;

// Every spelling that names `flag`: --name, the alias, then the others.
std::vector<std::string> spellings(const Flag& flag);

class Args {
 public:
  // Parses argv[first..] as `flags` (InvalidArgument for an unknown flag or a
  // missing value) plus at most `max_positional` bare arguments. `--help` or
  // `-h` where a flag may stand makes help_requested() true and nothing else
  // is checked.
  Args(int argc, char** argv, int first, const Flags& flags, int max_positional = 0);

  bool help_requested() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const;
  std::string get(const std::string& name) const;  // throws when missing
  std::optional<std::string> opt(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  // A given value outside lo..hi is refused, naming the range (the fallback is not checked).
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  double get_double(const std::string& name, double fallback) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// "1,2,3" or "1 2 3" -> ids.
std::vector<int32_t> parse_token_list(const std::string& text);
std::string join_tokens(const std::vector<int32_t>& ids, const char* separator = " ");
std::string json_escape(const std::string& text);

}  // namespace kvg::cli
