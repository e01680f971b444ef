// The progress line of long commands (capture, bench, bench-graft, synth):
// "label: done/total unit (p%), rate unit/s, time left", on stderr, redrawn
// in place at most ten times a second, and only when stderr is a terminal
// (a pipe or a log file gets nothing). The engine reports progress through
// callbacks (engine/progress.hpp); only this file draws it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "engine/progress.hpp"

namespace kvg::cli {

class ProgressLine {
 public:
  // On stderr when it is a terminal. `scale` divides counts for display
  // (1e6 with unit "MB" for bytes).
  ProgressLine(std::string label, std::string unit, double scale = 1);
  // For tests: any stream, any clock (seconds).
  ProgressLine(std::string label, std::string unit, double scale, std::FILE* out, bool enabled,
               std::function<double()> clock);
  ~ProgressLine();  // erases the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Draws when a tenth of a second has passed since the last drawing (and
  // always on the first call); the rate counts from the first call.
  void update(int64_t done, int64_t total);
  // A new phase: another label, rate and time left counted afresh.
  void restart(std::string label);
  // Erases the line (before printing to the same terminal); the next
  // update() draws it again.
  void clear();
  // update() as an engine callback.
  ProgressReport reporter() {
    return [this](int64_t done, int64_t total) { update(done, total); };
  }
  bool enabled() const { return enabled_; }
  int redraws() const { return redraws_; }

 private:

  std::string label_, unit_;
  double scale_;
  std::FILE* out_;
  bool enabled_;
  std::function<double()> clock_;
  double start_ = -1, last_draw_ = -1;
  int64_t start_done_ = 0;
  int redraws_ = 0;
};

}  // namespace kvg::cli
