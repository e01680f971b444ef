#include "cli/bench/bench_support.hpp"

#include <stdlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "common/error.hpp"

namespace kvg::cli {

TempDir::TempDir(const std::string& parent, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) throw Error(ErrorCode::Io, "cannot create directory '" + parent + "': " + ec.message());
  std::string tmpl = parent + "/" + name + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw Error(ErrorCode::Io, "cannot create a temporary directory in '" + parent + "'");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<int64_t> parse_lengths(const std::string& text, int64_t limit) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, n);
    if (ec != std::errc() || ptr != text.data() + end)
      throw Error(ErrorCode::InvalidArgument, "--lengths must be comma-separated integers, got '" + text + "'");
    if (n < 1 || n > limit - 1)
      throw Error(ErrorCode::InvalidArgument, "prefix length " + std::to_string(n) + " is outside 1.." +
                                                  std::to_string(limit - 1) + " (the context holds " +
                                                  std::to_string(limit) + " positions, one is for the next token)");
    out.push_back(n);
    pos = end + 1;
  }
  return out;
}

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  if (values.empty()) return s;
  for (double v : values) s.mean += v;
  s.mean /= double(values.size());
  if (values.size() < 2) return s;
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(squares / double(values.size() - 1));
  return s;
}

}  // namespace kvg::cli
