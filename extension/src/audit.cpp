#include "extension/src/audit.hpp"

#include "common/error.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/spi.hpp"

namespace kvg::pg {

namespace {

SqlValue number(const std::optional<int32_t>& n) { return n ? SqlValue(std::to_string(*n)) : std::nullopt; }

}  // namespace

int64_t audit_append(Spi& spi, const AuditRecord& r) {
  const std::string role = calling_role();
  OwnerRights owner;  // kvg_user cannot insert into kvg.audit itself
  auto rows = spi.run(
      "SELECT kvg.audit_insert($1, $2::name, $3, $4, $5, $6, $7, $8, $9::integer, $10::integer)",
      {r.operation, role, r.model_fingerprint, r.recipe, r.input_sha256, r.artifact_sha256, r.output_sha256,
       r.logits_sha256, number(r.tokens_in), number(r.tokens_out)});
  if (rows.size() != 1 || !rows[0].at(0)) throw Error(ErrorCode::Internal, "kvg.audit_insert returned no id");
  return std::stoll(*rows[0][0]);
}

}  // namespace kvg::pg
