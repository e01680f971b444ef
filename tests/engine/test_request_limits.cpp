// engine/request_limits.hpp: the one rule the CLI's flags and the SQL
// functions' arguments are checked against. NaN and the infinities are the
// values a careless `x < lo || x > hi` lets through.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "engine/request_limits.hpp"

namespace kvg {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string refusal(void (*check)(double, std::string_view), double value) {
  try {
    check(value, "--x");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(RequestLimits, TemperatureRefusesNaNInfinitiesNegativesAndTheHuge) {
  for (double t : {kNaN, -kNaN, kInf, -kInf, -1.0, -1e-300, 100.0001, 1e308})
    EXPECT_EQ(refusal(check_temperature, t), "--x must be between 0 and 100 (0 is greedy)") << t;
  for (double t : {0.0, -0.0, 1e-30, 0.8, 100.0}) EXPECT_EQ(refusal(check_temperature, t), "") << t;
}

TEST(RequestLimits, TopPIsAboveZeroAndAtMostOne) {
  for (double p : {kNaN, kInf, -kInf, 0.0, -0.0, -0.5, 1.0000001}) EXPECT_NE(refusal(check_top_p, p), "") << p;
  for (double p : {1e-9, 0.5, 1.0}) EXPECT_EQ(refusal(check_top_p, p), "") << p;
}

TEST(RequestLimits, CountsHaveBothBounds) {
  EXPECT_THROW(check_new_tokens(0, "max_tokens"), Error);
  EXPECT_THROW(check_new_tokens(-1, "max_tokens"), Error);
  EXPECT_THROW(check_new_tokens(kMaxNewTokens + 1, "max_tokens"), Error);
  EXPECT_NO_THROW(check_new_tokens(1, "max_tokens"));
  EXPECT_NO_THROW(check_new_tokens(kMaxNewTokens, "max_tokens"));
  try {
    check_new_tokens(0, "max_tokens");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "max_tokens must be at least 1");  // SQL's words (expected/engine.out)
  }
  EXPECT_THROW(check_top_k(-1, "--top-k"), Error);
  EXPECT_THROW(check_top_k(kMaxTopK + 1, "--top-k"), Error);
  EXPECT_NO_THROW(check_top_k(0, "--top-k"));
  EXPECT_NO_THROW(check_top_k(kMaxTopK, "--top-k"));
}

}  // namespace
}  // namespace kvg
