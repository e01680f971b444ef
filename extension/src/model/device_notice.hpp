// Under kvg.device = auto a GPU that could not be set up (out of device
// memory with other backends on it, a failed stream) costs speed, not the
// call: the engine runs on the CPU with the same bits and records why
// (engine/device.hpp). This tells the caller, once per SQL call.
#pragma once

namespace kvg::pg {

// A NOTICE with the reason when the engine fell back to the CPU since the
// last check; nothing otherwise. Calls into PostgreSQL (pg::call).
void notice_device_fallback();
// Drops a recorded fallback unreported (the call failed anyway).
void forget_device_fallback() noexcept;

}  // namespace kvg::pg
