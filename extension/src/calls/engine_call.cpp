#include "extension/src/calls/engine_call.hpp"

#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "engine/prompt.hpp"
#include "engine/request_limits.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"

namespace kvg::pg {

const ProgressCheck kCheckInterrupts = [] { throw_if_interrupted(); };

ModelUse generations_use() { return engine_worker::in_use() ? ModelUse::Prepare : ModelUse::Compute; }

AuditRecord EngineCall::audit(const char* operation) const {
  AuditRecord r;
  r.operation = operation;
  r.model_fingerprint = model->fingerprint_hex();
  r.recipe = options.recipe.name();
  return r;
}

std::string prompt_text_arg(FunctionCallInfoBaseData* fcinfo, int n, const Model& model, const char* name) {
  check_prompt_bytes(model, arg_bytes(fcinfo, n), name, settings::max_context());
  return text_arg(fcinfo, n);
}

ProgressReport progress_notices(const char* what) {
  const int interval_ms = settings::progress_notice_ms();
  if (interval_ms <= 0) return {};
  const auto began = std::chrono::steady_clock::now();
  auto last = began;
  return [what = std::string(what), interval_ms, began, last](int64_t done, int64_t total) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (done == 0 || now - last < std::chrono::milliseconds(interval_ms)) return;
    last = now;
    const double seconds = std::chrono::duration<double>(now - began).count();
    const double rate = seconds > 0 ? double(done) / seconds : 0;
    char detail[128];
    std::snprintf(detail, sizeof(detail), "%.0f tokens/s, about %.1f s left", rate,
                  rate > 0 ? double(total - done) / rate : 0.0);
    notice("kvg " + what + " " + std::to_string(done) + " of " + std::to_string(total) + " tokens", detail);
  };
}

void check_max_tokens(int64_t max_tokens) {
  check_new_tokens(max_tokens, "max_tokens");  // the CLI's -n obeys the same rule (engine/request_limits.hpp)
  if (max_tokens > settings::max_new_tokens())
    throw Error(ErrorCode::OutOfRange, "max_tokens " + std::to_string(max_tokens) + " exceeds kvg.max_new_tokens (" +
                                           std::to_string(settings::max_new_tokens()) + ")");
}

int64_t to_micros(double seconds) { return int64_t(std::llround(seconds * 1e6)); }

int64_t micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

std::string text_sha256(const std::string& text) { return to_hex(sha256(std::string_view(text))); }

}  // namespace kvg::pg
