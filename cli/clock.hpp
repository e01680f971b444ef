// The benchmarks' clock, and generate's timings: seconds on the monotonic clock.
#pragma once

#include <chrono>

namespace kvg::cli {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kvg::cli
