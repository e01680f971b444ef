#include "cli/args.hpp"

#include <cstdio>
#include <stdexcept>

#include "cli/suggest.hpp"
#include "common/error.hpp"

namespace kvg::cli {

namespace {

const Flag* find_flag(const Flags& flags, const std::string& arg) {
  for (const Flag& f : flags)
    for (const std::string& s : spellings(f))
      if (arg == s) return &f;
  return nullptr;
}

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// "unknown flag --temprature; did you mean --temperature?"
Error unknown_flag(const Flags& flags, const std::string& arg) {
  std::vector<std::string> known = {"--help"};
  for (const Flag& f : flags) {
    // A refused flag is no suggestion: "-ng; did you mean -ngl?" leads nowhere.
    if (!f.refused.empty()) continue;
    const std::vector<std::string> s = spellings(f);
    known.insert(known.end(), s.begin(), s.end());
  }
  const std::string near = nearest_spelling(arg, known);
  return Error(ErrorCode::InvalidArgument, "unknown flag " + arg +
                                               (near.empty() ? " (--help lists this command's flags)"
                                                             : "; did you mean " + near + "?"));
}

}  // namespace

std::vector<std::string> spellings(const Flag& flag) {
  std::vector<std::string> all = {"--" + flag.name};
  if (!flag.alias.empty()) all.push_back(flag.alias);
  all.insert(all.end(), flag.also.begin(), flag.also.end());
  return all;
}

Args::Args(int argc, char** argv, int first, const Flags& flags, int max_positional) {
  // "--name=value" is "--name value" (GNU style, as many tools accept).
  std::vector<std::string> words;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      words.push_back(arg.substr(0, eq));
      words.push_back(arg.substr(eq + 1));
    } else {
      words.push_back(arg);
    }
  }
  // Help first, so that `kvg capture --model M --help` helps rather than
  // complaining that --out is missing or a flag is misspelt.
  for (size_t i = 0; i < words.size(); ++i) {
    if (is_help(words[i])) {
      help_ = true;
      return;
    }
    if (const Flag* f = find_flag(flags, words[i]); f && !f->value.empty()) ++i;  // skip its value
  }
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& arg = words[i];
    const Flag* f = find_flag(flags, arg);
    if (!f) {
      if (arg.size() > 1 && arg[0] == '-') throw unknown_flag(flags, arg);
      if (int(positional_.size()) >= max_positional)
        throw Error(ErrorCode::InvalidArgument, "unexpected argument '" + arg + "'");
      positional_.push_back(arg);
    } else if (!f->refused.empty()) {
      throw Error(ErrorCode::InvalidArgument, arg + " " + f->refused);
    } else if (f->value.empty()) {
      values_[f->name] = "1";
    } else {
      if (i + 1 >= words.size()) throw Error(ErrorCode::InvalidArgument, "--" + f->name + " needs a value");
      values_[f->name] = words[++i];
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

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  const int64_t v = get_int(name, fallback);
  if (has(name) && (v < lo || v > hi))
    throw Error(ErrorCode::InvalidArgument,
                "--" + name + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " + std::to_string(v));
  return v;
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
