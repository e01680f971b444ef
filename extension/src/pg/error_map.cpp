#include "extension/src/pg/error_map.hpp"

#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

SqlError sql_error_for(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return {ERRCODE_INVALID_PARAMETER_VALUE, nullptr};
    case ErrorCode::Io:
      return {ERRCODE_IO_ERROR, "Check that the server's operating-system user can read the file, and that nobody rewrites it in place."};
    case ErrorCode::Corrupt:
      return {ERRCODE_DATA_CORRUPTED,
              "The bytes are not a valid kvgraft artifact or do not hash to their identity; "
              "take the artifact again from a copy that kvg_artifact_verify() accepts."};
    case ErrorCode::Unsupported:
      return {ERRCODE_FEATURE_NOT_SUPPORTED, nullptr};
    // Class 22 (data exception) with implementation-defined subclasses, so a
    // client can tell the three apart without parsing the message and still
    // catch them all as a data exception.
    case ErrorCode::ModelMismatch:
      return {MAKE_SQLSTATE('2', '2', 'V', '0', '1'),
              "The model kvg.model names now is not the one the artifact was captured with (another "
              "path, or the same path holding other bytes); compare kvg_model_info() with "
              "kvg.artifacts.model_fingerprint and set kvg.model to the model whose fingerprint matches."};
    case ErrorCode::RecipeMismatch:
      return {MAKE_SQLSTATE('2', '2', 'V', '0', '2'),
              "An artifact grafts only under the arithmetic recipe that produced it (kvg.artifacts.recipe)."};
    case ErrorCode::TokenMismatch:
      return {MAKE_SQLSTATE('2', '2', 'V', '0', '3'),
              "The prompt must begin with exactly the text the artifact was captured from."};
    case ErrorCode::NotFound:
      return {ERRCODE_UNDEFINED_OBJECT, nullptr};
    case ErrorCode::OutOfRange:
      return {ERRCODE_PROGRAM_LIMIT_EXCEEDED, nullptr};
    case ErrorCode::Cancelled:
      return {ERRCODE_QUERY_CANCELED, nullptr};
    case ErrorCode::Internal:
      break;
  }
  return {ERRCODE_INTERNAL_ERROR, "This is a bug in kvg; please report it with the statement that caused it."};
}

}  // namespace kvg::pg
