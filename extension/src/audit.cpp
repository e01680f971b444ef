#include "extension/src/audit.hpp"

#include <charconv>

#include "common/error.hpp"
#include "extension/src/audit_forward.hpp"
#include "extension/src/audit_writer.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/sql_raise.hpp"
#include "extension/src/standby.hpp"
#include "engine/output_text.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_values.hpp"
#include "storage/sha256.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/postgres.hpp"


namespace kvg::pg {

namespace {

template <typename N>
SqlValue number(const std::optional<N>& n) {
  return n ? SqlValue(std::to_string(*n)) : std::nullopt;
}

SqlValue boolean(const std::optional<bool>& b) { return b ? SqlValue(*b ? "true" : "false") : std::nullopt; }

}  // namespace

void AuditRecord::set_output(const std::string& raw) {
  output_text = kvg::output_text(raw);
  output_bytes = *output_text == raw ? std::nullopt : std::optional<std::string>(raw);
  output_sha256 = to_hex(sha256(std::string_view(raw)));
}

std::vector<SqlValue> audit_values(const AuditRecord& r, const std::string& role) {
  return {r.operation, role, r.model_fingerprint, r.recipe, r.input_sha256, r.artifact_sha256, r.output_sha256,
          r.logits_sha256, number(r.tokens_in), number(r.tokens_out), number(r.tokens_grafted), r.mode,
          number(r.knowledge_id), boolean(r.verified), r.output_text, number(r.graft_us), number(r.prefill_us),
          number(r.decode_us), boolean(r.kv_proven), r.output_bytes ? SqlValue(to_hex(*r.output_bytes)) : std::nullopt};
}

namespace {

// The shortest decimal that reads back as the same float.
SqlValue real(const std::optional<float>& x) {
  if (!x) return std::nullopt;
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), *x).ptr;
  return SqlValue(std::string(text, end));
}

// The (sub)transaction of the call, made to have an id, so pg_xact_status
// tells later whether it committed: a subtransaction's says 'aborted' once
// rolled back to its savepoint, and 'committed' once its top transaction
// commits. And the session's user.
std::string caller_xid() {
  const uint64_t xid = call([] { return U64FromFullTransactionId(GetCurrentFullTransactionId()); });
  return std::to_string(xid);
}

std::string session_role() {
  const char* name = call([] { return GetUserNameFromId(GetSessionUserId(), false); });
  return name;
}

}  // namespace

void warn_unaudited(const std::string& operation, const std::string& why) {
  const std::string message = "kvg: the result of this " + operation + " call is NOT audited: " + why;
  call([&] {
    ereport(WARNING, (errcode(MAKE_SQLSTATE('0', '1', 'V', '0', '1')), errmsg_internal("%s", message.c_str()),
                      errdetail("kvg.allow_unaudited is on: a superuser allowed results whose audit row could not "
                                "be recorded.")));
  });
}

std::optional<int64_t> append_through_writer(const std::string& operation, std::vector<SqlValue> values,
                                             const AuditRecord* r) {
  values.push_back(r ? SqlValue(caller_xid()) : std::nullopt);
  values.push_back(r ? SqlValue(session_role()) : std::nullopt);
  const AuditRecord none;
  const AuditRecord& x = r ? *r : none;
  for (SqlValue v : {real(x.temperature), real(x.top_p), number(x.seed), number(x.max_tokens), x.stop_reason,
                     x.prompt_tokens_sha256, x.template_sha256, x.artifact_chain})
    values.push_back(std::move(v));
  try {
    return audit_writer::append(values);
  } catch (const audit_writer::Failure& f) {
    if (!settings::allow_unaudited()) raise_sqlstate(f.sqlstate.c_str(), f.what(), f.hint);
    warn_unaudited(operation, f.what());
    return std::nullopt;
  }
}

std::optional<int64_t> audit_append(Spi&, const AuditRecord& r) {
  const std::vector<SqlValue> values = audit_values(r, calling_role());
  if (on_standby()) return append_on_primary(r.operation, values);
  return append_through_writer(r.operation, values, &r);
}

void audit_preflight() {
  if (on_standby()) {
    check_primary_reachable();
    return;
  }
  try {
    audit_writer::ensure_running();
  } catch (const audit_writer::Failure& f) {
    if (!settings::allow_unaudited()) raise_sqlstate(f.sqlstate.c_str(), f.what(), f.hint);
  }
}

}  // namespace kvg::pg

using namespace kvg;
using namespace kvg::pg;

// kvg_audit_verify(OUT ok, OUT first_bad, OUT reason), the shape of every
// verify function (docs/sql.md): kvg.audit_first_bad() over every row, with
// the owner's rights, whatever rows the caller may read; first_bad is the
// seq of the first chain position that does not verify.
KVG_SQL_FUNCTION(kvg_audit_verify) {
  Spi spi;
  OwnerRights owner;
  const auto rows = spi.run("SELECT seq::text, reason FROM kvg.audit_first_bad()");
  if (rows.empty()) return composite_result(fcinfo, {BoolGetDatum(true), std::nullopt, std::nullopt});
  const std::optional<std::string>& seq = rows.at(0).at(0);
  const std::optional<std::string>& reason = rows.at(0).at(1);
  return composite_result(fcinfo, {BoolGetDatum(false),
                                   seq ? ResultValue(Int64GetDatum(std::stoll(*seq))) : std::nullopt,
                                   text_result(reason.value_or("the audit chain does not verify"))});
}
