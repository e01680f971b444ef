#include "cli/progress_line.hpp"

#include <unistd.h>

#include <cmath>

#include "cli/clock.hpp"

namespace kvg::cli {

namespace {

constexpr double kRedrawSeconds = 0.1;

std::string duration(double seconds) {
  char buf[32];
  const long s = long(std::lround(seconds));
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace

ProgressLine::ProgressLine(std::string label, std::string unit, double scale)
    : ProgressLine(std::move(label), std::move(unit), scale, stderr, ::isatty(STDERR_FILENO) == 1, now_seconds) {}

ProgressLine::ProgressLine(std::string label, std::string unit, double scale, std::FILE* out, bool enabled,
                           std::function<double()> clock)
    : label_(std::move(label)), unit_(std::move(unit)), scale_(scale), out_(out), enabled_(enabled),
      clock_(std::move(clock)) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::restart(std::string label) {
  label_ = std::move(label);
  start_ = -1;
  last_draw_ = -1;
}

void ProgressLine::update(int64_t done, int64_t total) {
  if (!enabled_) return;
  const double now = clock_();
  if (start_ < 0) {
    start_ = now;
    start_done_ = done;
  } else if (last_draw_ >= 0 && now - last_draw_ < kRedrawSeconds && done < total) {
    return;
  }
  last_draw_ = now;
  const double elapsed = now - start_;
  const double rate = elapsed > 0 ? double(done - start_done_) / elapsed : 0;
  std::string speed = "", left = "";
  if (rate > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", %.1f %s/s", rate / scale_, unit_.c_str());
    speed = buf;
    left = ", " + duration(double(total - done) / rate) + " left";
  }
  const double pct = total > 0 ? 100.0 * double(done) / double(total) : 100.0;
  // \r and erase-to-end-of-line: redrawn in place, never scrolling.
  std::fprintf(out_, "\r%s: %.*f/%.*f %s (%.0f%%)%s%s\033[K", label_.c_str(), scale_ == 1 ? 0 : 1,
               double(done) / scale_, scale_ == 1 ? 0 : 1, double(total) / scale_, unit_.c_str(), pct, speed.c_str(),
               left.c_str());
  std::fflush(out_);
  ++redraws_;
}

void ProgressLine::clear() {
  if (!enabled_ || last_draw_ < 0) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  last_draw_ = -1;
}

}  // namespace kvg::cli
