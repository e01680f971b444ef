// What a caller may ask of generation: the one rule the `kvg` command's flags
// and the SQL functions' arguments are both checked against, so that neither
// accepts a value the other refuses (NaN, a negative or infinite temperature,
// a top-p outside (0, 1], no tokens at all). Each check names the value the
// way its caller spells it ("temperature" in SQL, "--temperature" in the CLI)
// and throws kvg::Error(InvalidArgument).
#pragma once

#include <cstdint>
#include <string_view>

namespace kvg {

// Temperatures beyond this only flatten the distribution further; the bound
// keeps every value finite as the float the sampler uses (1e308 is finite as
// a double only). 0 is greedy.
inline constexpr double kMaxTemperature = 100;
// The most new tokens one request may ask for: kvg.max_new_tokens's ceiling,
// and the CLI's own (a context this long does not exist to decode into).
inline constexpr int64_t kMaxNewTokens = int64_t(1) << 20;
// top-k counts candidate tokens; no vocabulary has more.
inline constexpr int64_t kMaxTopK = int64_t(1) << 24;

void check_temperature(double temperature, std::string_view name);  // 0..kMaxTemperature
void check_top_p(double top_p, std::string_view name);              // (0, 1]
void check_top_k(int64_t top_k, std::string_view name);             // 0 (all) .. kMaxTopK
void check_new_tokens(int64_t count, std::string_view name);        // 1..kMaxNewTokens

}  // namespace kvg
