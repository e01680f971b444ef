// Flag parsing for the `kvg` command: `--name value` and boolean `--name`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvg::cli {

class Args {
 public:
  // `booleans` lists the flags that take no value; every other flag takes one.
  Args(int argc, char** argv, int first, const std::set<std::string>& booleans);

  bool has(const std::string& name) const;
  std::string get(const std::string& name) const;  // throws when missing
  std::optional<std::string> opt(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;
  // Throws InvalidArgument naming the first flag not in `known`.
  void allow_only(const std::set<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
};

// "1,2,3" or "1 2 3" -> ids.
std::vector<int32_t> parse_token_list(const std::string& text);
std::string join_tokens(const std::vector<int32_t>& ids, const char* separator = " ");
std::string json_escape(const std::string& text);

}  // namespace kvg::cli
