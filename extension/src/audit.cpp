#include "extension/src/audit.hpp"

#include "common/error.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/spi.hpp"
#include "storage/sha256.hpp"

namespace kvg::pg {

namespace {

template <typename N>
SqlValue number(const std::optional<N>& n) {
  return n ? SqlValue(std::to_string(*n)) : std::nullopt;
}

SqlValue boolean(const std::optional<bool>& b) { return b ? SqlValue(*b ? "true" : "false") : std::nullopt; }

}  // namespace

void AuditRecord::set_output(const std::string& text) {
  output_text = text;
  output_sha256 = to_hex(sha256(std::string_view(text)));
}

int64_t audit_append(Spi& spi, const AuditRecord& r) {
  const std::string role = calling_role();
  OwnerRights owner;  // kvg_user cannot insert into kvg.audit itself
  auto rows = spi.run(
      "SELECT kvg.audit_insert($1, $2::name, $3, $4, $5, $6, $7, $8, $9::integer, $10::integer, $11::integer, $12, "
      "$13::bigint, $14::boolean, $15, $16::bigint, $17::bigint, $18::bigint)",
      {r.operation, role, r.model_fingerprint, r.recipe, r.input_sha256, r.artifact_sha256, r.output_sha256,
       r.logits_sha256, number(r.tokens_in), number(r.tokens_out), number(r.tokens_grafted), r.mode,
       number(r.knowledge_id), boolean(r.verified), r.output_text, number(r.graft_us), number(r.prefill_us),
       number(r.decode_us)});
  if (rows.size() != 1 || !rows[0].at(0)) throw Error(ErrorCode::Internal, "kvg.audit_insert returned no id");
  return std::stoll(*rows[0][0]);
}

}  // namespace kvg::pg
