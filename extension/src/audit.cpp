#include "extension/src/audit.hpp"

#include "common/error.hpp"
#include "extension/src/audit_forward.hpp"
#include "extension/src/standby.hpp"
#include "engine/output_text.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_values.hpp"
#include "storage/sha256.hpp"
#include "extension/src/pg_boundary.hpp"
#include "extension/src/postgres.hpp"

extern "C" {
#include "commands/trigger.h"
}

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

int64_t audit_insert_pending(Spi& spi, const std::vector<SqlValue>& values) {
  OwnerRights owner;  // kvg_user cannot insert into kvg.audit itself
  auto rows = spi.run(
      "SELECT kvg.audit_insert($1, $2::name, $3, $4, $5, $6, $7, $8, $9::integer, $10::integer, $11::integer, $12, "
      "$13::bigint, $14::boolean, $15, $16::bigint, $17::bigint, $18::bigint, $19::boolean, "
      "pg_catalog.decode($20, 'hex'))",
      values);
  if (rows.size() != 1 || !rows[0].at(0)) throw Error(ErrorCode::Internal, "kvg.audit_insert returned no id");
  return std::stoll(*rows[0][0]);
}

std::optional<int64_t> audit_append(Spi& spi, const AuditRecord& r) {
  const std::vector<SqlValue> values = audit_values(r, calling_role());
  if (on_standby()) return append_on_primary(r.operation, values);
  return audit_insert_pending(spi, values);
}

void audit_preflight() {
  if (on_standby()) check_primary_reachable();
}

namespace {

// Moves pending row `id` into kvg.audit as the chain's next link. Linkers
// queue on an EXCLUSIVE lock of kvg.audit_head (readers are not blocked) and
// then read and move the head under the latest committed state, so that a
// REPEATABLE READ or SERIALIZABLE transaction links after rows committed
// since it began instead of failing or forking the chain.
void link_pending(int64_t id) {
  Spi spi;
  OwnerRights owner;
  spi.run("LOCK TABLE kvg.audit_head IN EXCLUSIVE MODE");
  auto head = spi.run_latest("SELECT last_seq, last_hash FROM kvg.audit_head");
  // No head: the first row ever, or a deleted head. Continuing after the
  // last seq from 64 zeros keeps a deleted head evident (kvg_audit_verify).
  if (head.empty())
    head = spi.run_latest(
        "INSERT INTO kvg.audit_head (last_id, last_seq, last_hash) "
        "VALUES (NULL, (SELECT max(seq) FROM kvg.audit), repeat('0', 64)) RETURNING last_seq, last_hash");
  const int64_t seq = (head.at(0).at(0) ? std::stoll(*head[0][0]) : 0) + 1;
  const auto moved = spi.run("SELECT kvg.audit_move_pending($1::bigint, $2::bigint, $3)",
                             {std::to_string(id), std::to_string(seq), head[0].at(1).value()});
  spi.run_latest("UPDATE kvg.audit_head SET last_id = $1::bigint, last_seq = $2::bigint, last_hash = $3",
                 {std::to_string(id), std::to_string(seq), moved.at(0).at(0).value()});
}

}  // namespace

}  // namespace kvg::pg

using namespace kvg;
using namespace kvg::pg;

// kvg.audit_link(): the deferred constraint trigger on kvg.audit_pending; it
// fires once per pending row when the inserting transaction commits.
KVG_SQL_FUNCTION(kvg_audit_link) {
  if (!CALLED_AS_TRIGGER(fcinfo)) throw Error(ErrorCode::Internal, "kvg_audit_link must be called as a trigger");
  const auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
  const int64_t id = call([&] {
    bool isnull = true;
    const int attno = SPI_fnumber(trigger->tg_relation->rd_att, "id");
    const Datum d = SPI_getbinval(trigger->tg_trigtuple, trigger->tg_relation->rd_att, attno, &isnull);
    if (isnull) elog(ERROR, "kvg: pending audit row without id");
    return DatumGetInt64(d);
  });
  link_pending(id);
  return PointerGetDatum(nullptr);
}

// kvg_audit_verify(OUT ok, OUT first_bad, OUT reason), the shape of every
// verify function (docs/sql.md): kvg.audit_first_bad() over every row, with
// the owner's rights, whatever rows the caller may read; first_bad is the
// seq of that row (the head's, when the rows after it are gone).
KVG_SQL_FUNCTION(kvg_audit_verify) {
  Spi spi;
  OwnerRights owner;
  const auto rows = spi.run(
      "WITH b AS (SELECT kvg.audit_first_bad() AS id) "
      "SELECT coalesce((SELECT a.seq FROM kvg.audit a WHERE a.id = b.id), "
      "                (SELECT h.last_seq FROM kvg.audit_head h WHERE h.last_id = b.id))::text "
      "FROM b WHERE b.id IS NOT NULL");
  if (rows.empty()) return composite_result(fcinfo, {BoolGetDatum(true), std::nullopt, std::nullopt});
  const std::optional<std::string>& seq = rows.at(0).at(0);
  return composite_result(
      fcinfo, {BoolGetDatum(false), seq ? ResultValue(Int64GetDatum(std::stoll(*seq))) : std::nullopt,
               text_result("the audit chain does not verify from this row on: its hash, its link to the previous "
                           "row, its position or the head disagree (docs/audit-chain.md)")});
}
