// What the bench commands share: a temporary directory for their stores and
// files, the --lengths list of context lengths, and the spread of repeated runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvg::cli {

// A private directory for a bench's store and files (`name`-XXXXXX under
// `parent`); removed with all it holds when the bench ends, on error too.
class TempDir {
 public:
  TempDir(const std::string& parent, const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --lengths: comma-separated prefix lengths, each in 1..limit-1 (the context
// holds `limit` positions, one is for the next token).
std::vector<int64_t> parse_lengths(const std::string& text, int64_t limit);

// Mean and sample standard deviation (n - 1; 0 for one value) of repeated
// measurements, as llama-bench reports them.
struct Spread {
  double mean = 0, stddev = 0;
};
Spread spread_of(const std::vector<double>& values);

}  // namespace kvg::cli
