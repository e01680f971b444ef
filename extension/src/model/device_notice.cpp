#include "extension/src/model/device_notice.hpp"

#include <string>

#include "engine/device.hpp"
#include "extension/src/spi/sql_values.hpp"

namespace kvg::pg {

void notice_device_fallback() {
  const std::string why = last_device_fallback();
  if (!why.empty())
    notice("kvg: this call ran on the CPU (kvg.device = auto), with the same results", why);
}

void forget_device_fallback() noexcept {
  try {
    (void)last_device_fallback();
  } catch (...) {
  }
}

}  // namespace kvg::pg
