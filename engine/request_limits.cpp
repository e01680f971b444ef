#include "engine/request_limits.hpp"

#include <string>

#include "common/error.hpp"

namespace kvg {

namespace {

[[noreturn]] void refuse(std::string_view name, const std::string& rule) {
  throw Error(ErrorCode::InvalidArgument, std::string(name) + " " + rule);
}

}  // namespace

// Each test is written so that NaN fails it: every comparison with NaN is false.
void check_temperature(double temperature, std::string_view name) {
  if (!(temperature >= 0 && temperature <= kMaxTemperature))
    refuse(name, "must be between 0 and " + std::to_string(int(kMaxTemperature)) + " (0 is greedy)");
}

void check_top_p(double top_p, std::string_view name) {
  if (!(top_p > 0 && top_p <= 1)) refuse(name, "must be greater than 0 and at most 1 (1 keeps every token)");
}

void check_top_k(int64_t top_k, std::string_view name) {
  if (top_k < 0 || top_k > kMaxTopK)
    refuse(name, "must be between 0 and " + std::to_string(kMaxTopK) + " (0 keeps every token)");
}

void check_new_tokens(int64_t count, std::string_view name) {
  if (count < 1) refuse(name, "must be at least 1");
  if (count > kMaxNewTokens) refuse(name, "must be at most " + std::to_string(kMaxNewTokens));
}

}  // namespace kvg
