// The engine worker's Failed reply (engine_messages.hpp): made from a kvg
// error or a SQLSTATE, and checked when read, so that a backend never
// throws an error code or raises a SQLSTATE that is not one.
#include "extension/src/workers/protocol/engine_messages.hpp"

#include "extension/src/workers/protocol/sqlstate.hpp"

namespace kvg::worker_protocol {

FailedReply FailedReply::of(const Error& error) {
  FailedReply reply;
  reply.error_code = int32_t(error.code());
  reply.message = std::string(std::string_view(error.what()).substr(0, kMaxMessageBytes));
  return reply;
}

FailedReply FailedReply::of(std::string_view sqlstate, std::string_view message) {
  FailedReply reply;
  reply.sqlstate = std::string(sqlstate);
  reply.message = std::string(message.substr(0, kMaxMessageBytes));
  return reply;
}

std::optional<ErrorCode> FailedReply::code() const {
  if (error_code < 0) return std::nullopt;
  return ErrorCode(error_code);
}

void FailedReply::validate() const {
  if (error_code < -1 || error_code > int32_t(ErrorCode::Internal))
    throw ProtocolError("names an error code that is none (" + std::to_string(error_code) + ")");
  if (!is_sqlstate(sqlstate)) throw ProtocolError("names a SQLSTATE that is none");
  if (message.size() > kMaxMessageBytes) throw ProtocolError("carries an error message longer than any sent");
}

}  // namespace kvg::worker_protocol
