#include "cli/args.hpp"

#include <cstdio>
#include <stdexcept>

#include "common/error.hpp"

namespace kvg::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& booleans) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) throw Error(ErrorCode::InvalidArgument, "unexpected argument '" + arg + "'");
    std::string name = arg.substr(2);
    if (booleans.count(name)) {
      values_[name] = "1";
    } else {
      if (i + 1 >= argc) throw Error(ErrorCode::InvalidArgument, "--" + name + " needs a value");
      values_[name] = argv[++i];
    }
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw Error(ErrorCode::InvalidArgument, "--" + name + " is required");
  return it->second;
}

std::optional<std::string> Args::opt(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

int64_t Args::get_int(const std::string& name, int64_t fallback) const {
  auto v = opt(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long parsed = std::stoll(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing");
    return parsed;
  } catch (const std::exception&) {
    throw Error(ErrorCode::InvalidArgument, "--" + name + " expects an integer, got '" + *v + "'");
  }
}

double Args::get_double(const std::string& name, double fallback) const {
  auto v = opt(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double parsed = std::stod(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing");
    return parsed;
  } catch (const std::exception&) {
    throw Error(ErrorCode::InvalidArgument, "--" + name + " expects a number, got '" + *v + "'");
  }
}

void Args::allow_only(const std::set<std::string>& known) const {
  for (const auto& [name, value] : values_)
    if (!known.count(name)) throw Error(ErrorCode::InvalidArgument, "unknown flag --" + name);
}

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  std::string current;
  auto flush = [&] {
    if (current.empty()) return;
    try {
      size_t used = 0;
      const long long v = std::stoll(current, &used);
      if (used != current.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("range");
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error(ErrorCode::InvalidArgument, "bad token id '" + current + "' in --tokens");
    }
    current.clear();
  };
  for (char ch : text) {
    if (ch == ',' || ch == ' ') flush();
    else current += ch;
  }
  flush();
  return ids;
}

std::string join_tokens(const std::vector<int32_t>& ids, const char* separator) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += separator;
    out += std::to_string(ids[i]);
  }
  return out;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (unsigned char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += char(ch);
        }
    }
  }
  return out;
}

}  // namespace kvg::cli
