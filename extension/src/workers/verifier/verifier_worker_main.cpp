// The verifier worker (verifier_worker.hpp): one background worker per
// request, started by the asking backend with its request in a dynamic
// shared memory segment (verifier_segment.hpp): a deposit's freeze
// (verifier_freeze.hpp), committed, or an answer's verification of the
// frozen copy, always rolled back.
//
// It connects as the bootstrap superuser (PostgreSQL 15 cannot connect a
// background worker as a NOLOGIN role), only to read the catalog and, for a
// freeze, to write the copy: a verification runs with kvg_verifier as its
// session and current user, a security-restricted operation. The whole of
// its one transaction is bounded by kvg.verifier_timeout. Written in C style
// on purpose: the PG_TRY frame owns no C++ object, and nothing in it throws
// (the request is decoded before, into views of the segment, and the verdict
// encoded after).
#include <cstring>
#include <exception>

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

PGDLLEXPORT void kvg_verifier_main(Datum main_arg);
}

#include "extension/src/workers/reserved/reserved_workers.hpp"
#include "extension/src/workers/segment/toc_segment.hpp"
#include "extension/src/workers/verifier/verifier_freeze.hpp"
#include "extension/src/workers/verifier/verifier_segment.hpp"

namespace {

using kvg::pg::verifier_worker::Answer;
using kvg::worker_protocol::VerifierOutcome;
using kvg::worker_protocol::VerifierRequest;

// The verdict, kept in static storage: PG_TRY's longjmp returns into the
// frame that set it up, whose locals it may not keep.
struct Verdict {
  bool passed = false;
  const char* refusal = nullptr;  // a literal: why it failed closed
  bool committed = false;         // a freeze's transaction
  char frozen[NAMEDATALEN * 2] = "";  // a freeze's copy, qualified
  char pin[65] = "";                  // and its kvg.function_pin
} verdict;

// The same for every verification, on a primary and on a standby, whatever
// the database's or the role's defaults: the verdict and the pin depend on
// the catalog and the request only.
const char* const kFixedSettings[][2] = {
    {"search_path", "pg_catalog, pg_temp"},
    {"quote_all_identifiers", "off"},
    {"extra_float_digits", "1"},
    {"DateStyle", "ISO, MDY"},
    {"IntervalStyle", "postgres"},
    {"TimeZone", "UTC"},
    {"bytea_output", "hex"},
    {"standard_conforming_strings", "on"},
    {"lc_monetary", "C"},
    {"xmloption", "content"},
    {"default_transaction_isolation", "read committed"},
    // What to_tsvector(text) and its kin use: a built-in configuration,
    // whatever the database's default.
    {"default_text_search_config", "pg_catalog.english"},
};

void refuse(const char* why) {
  verdict.refusal = why;
  verdict.passed = false;
}

// The frozen copy `frozen`(text, text) in kvg_frozen, or InvalidOid.
Oid frozen_copy(const VerifierRequest& request) {
  Oid types[1] = {TEXTOID};
  Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(request.spec.data(), int(request.spec.size())))};
  const int rc = SPI_execute_with_args(
      "SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.oid = pg_catalog.to_regprocedure($1 || '(text, text)') "
      "AND p.pronamespace = 'kvg_frozen'::pg_catalog.regnamespace",
      1, types, values, nullptr, false, 1);  // not read_only: a fresh snapshot
  if (rc != SPI_OK_SELECT) elog(ERROR, "kvg verifier: finding the frozen copy failed (%d)", rc);
  if (SPI_processed == 0) return InvalidOid;
  bool isnull;
  return DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

// Whether the copy is what was deposited: each copy it runs is what its
// name (a content hash) says; or, where that does not hold (a copy restored
// from a dump is parsed anew), its kvg.function_pin is the deposited one.
bool copy_as_deposited(const VerifierRequest& request, Oid fn) {
  if (kvg::pg::verifier_worker::frozen_intact(fn)) return true;
  Oid types[1] = {OIDOID};
  Datum values[1] = {ObjectIdGetDatum(fn)};
  if (SPI_execute_with_args("SELECT kvg.function_pin($1)", 1, types, values, nullptr, false, 1) != SPI_OK_SELECT ||
      SPI_processed != 1)
    elog(ERROR, "kvg verifier: reading the pin failed");
  const char* pin = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
  return pin != nullptr && std::strlen(pin) == request.pin.size() &&
         std::memcmp(pin, request.pin.data(), request.pin.size()) == 0;
}

// Whether kvg_verifier holds anything: a privilege or default privilege on
// any object (pg_shdepend records each role an ACL names), an object of its
// own, or a membership in another role. A depositor may GRANT on her own
// table TO kvg_verifier; a verifier must not run with that.
bool verifier_holds_rights(Oid verifier_role) {
  Oid types[2] = {OIDOID, OIDOID};
  Datum values[2] = {ObjectIdGetDatum(verifier_role), ObjectIdGetDatum(MyDatabaseId)};
  const int rc = SPI_execute_with_args(
      "SELECT EXISTS (SELECT FROM pg_catalog.pg_shdepend d "
      "               WHERE d.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND d.refobjid = $1 "
      "                 AND d.dbid IN (0, $2)) "
      "    OR EXISTS (SELECT FROM pg_catalog.pg_auth_members m WHERE m.member = $1)",
      2, types, values, nullptr, false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "kvg verifier: reading kvg_verifier's rights failed");
  bool isnull;
  return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

void verify(const VerifierRequest& request) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg verifier: SPI_connect failed");
  const Oid fn = frozen_copy(request);
  if (!OidIsValid(fn) || !copy_as_deposited(request, fn)) {
    refuse(OidIsValid(fn) ? "its frozen copy changed since the entry was deposited"
                          : "its frozen copy no longer exists (or is not committed)");
    SPI_finish();
    return;
  }
  const Oid verifier_role = get_role_oid("kvg_verifier", true);
  if (!OidIsValid(verifier_role)) {
    refuse("the role kvg_verifier does not exist");
    SPI_finish();
    return;
  }
  if (verifier_holds_rights(verifier_role)) {
    refuse("kvg_verifier holds privileges or memberships someone granted it; a verifier runs with none");
    SPI_finish();
    return;
  }
  if (pg_proc_aclcheck(fn, verifier_role, ACL_EXECUTE) != ACLCHECK_OK) {
    refuse("kvg_verifier may not execute its frozen copy");
    SPI_finish();
    return;
  }
  const Datum question =
      PointerGetDatum(cstring_to_text_with_len(request.question.data(), int(request.question.size())));
  const Datum candidate =
      PointerGetDatum(cstring_to_text_with_len(request.candidate.data(), int(request.candidate.size())));
  // From here on this session is kvg_verifier's: session_user too, so that
  // nothing keyed on the session user (a policy, a default) sees the
  // bootstrap superuser. The session ends with this request.
  SetSessionAuthorization(verifier_role, false);
  int security;
  Oid session;
  GetUserIdAndSecContext(&session, &security);
  SetUserIdAndSecContext(verifier_role, security | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
  // By OID, after the pin: no overload or search_path can stand in for it.
  // No pin check after: only a superuser can change a frozen copy.
  verdict.passed = DatumGetBool(OidFunctionCall2Coll(fn, DEFAULT_COLLATION_OID, question, candidate));
  SPI_finish();
}

// Copies the depositor's function into kvg_frozen (verifier_freeze.hpp),
// checks that the copy reaches nothing a verifier may not, and says its name
// and pin. The caller commits.
void freeze(const VerifierRequest& request) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg verifier: SPI_connect failed");
  Oid types[1] = {TEXTOID};
  Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(request.spec.data(), int(request.spec.size())))};
  if (SPI_execute_with_args("SELECT pg_catalog.to_regprocedure($1 || '(text, text)')::pg_catalog.oid", 1, types,
                            values, nullptr, false, 1) != SPI_OK_SELECT)
    elog(ERROR, "kvg verifier: resolving the function failed");
  bool isnull = true;
  const Datum fn = SPI_processed == 1 ? SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : 0;
  if (isnull) {
    refuse("the function does not exist (or is not committed)");
    SPI_finish();
    return;
  }
  const char* refusal = nullptr;
  const Oid copy = kvg::pg::verifier_worker::freeze_function(DatumGetObjectId(fn), &refusal);
  if (!OidIsValid(copy)) {
    refuse(refusal);
    SPI_finish();
    return;
  }
  Oid copy_types[1] = {OIDOID};
  Datum copy_values[1] = {ObjectIdGetDatum(copy)};
  if (SPI_execute_with_args(
          "SELECT NOT EXISTS (SELECT FROM kvg.verifier_reach($1) WHERE NOT allowed) "
          "   AND NOT EXISTS (SELECT FROM kvg.verifier_copies($1) c JOIN pg_catalog.pg_proc p ON p.oid = c.function "
          "                   WHERE p.pronamespace <> 'kvg_frozen'::pg_catalog.regnamespace), "
          "       pg_catalog.format('%I.%I', n.nspname, p.proname), kvg.function_pin($1) "
          "FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = $1",
          1, copy_types, copy_values, nullptr, false, 1) != SPI_OK_SELECT ||
      SPI_processed != 1)
    elog(ERROR, "kvg verifier: reading the frozen copy failed");
  HeapTuple row = SPI_tuptable->vals[0];
  if (!DatumGetBool(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull))) {
    refuse("its frozen copy reaches what a verifier may not (it changed while it was frozen)");
    SPI_finish();
    return;
  }
  strlcpy(verdict.frozen, SPI_getvalue(row, SPI_tuptable->tupdesc, 2), sizeof verdict.frozen);
  strlcpy(verdict.pin, SPI_getvalue(row, SPI_tuptable->tupdesc, 3), sizeof verdict.pin);
  SPI_finish();
}

}  // namespace

namespace {

// The request and the place of its answer in the segment (shm_toc,
// verifier_segment.hpp); false when the request does not read as one. C++
// that may throw, so it runs before any PG_TRY, and catches all it throws.
bool read_request(dsm_segment* segment, VerifierRequest& request, Answer*& answer) noexcept {
  using namespace kvg::pg;
  answer = static_cast<Answer*>(toc_segment::find(segment, verifier_worker::kVerifierMagic, verifier_worker::kAnswerKey));
  try {
    request = toc_segment::read_framed<VerifierRequest>(segment, verifier_worker::kVerifierMagic,
                                                         verifier_worker::kRequestKey);
    return answer != nullptr;
  } catch (const std::exception& e) {
    ereport(LOG, (errmsg("kvg verifier: its request does not read as one: %s", e.what())));
    return false;
  }
}

// The verdict, where the asker reads it; then `state` says it is there.
void answer_with_verdict(Answer* answer) noexcept {
  // Never too long: every refusal is one of this file's literals.
  const bool frozen = verdict.committed && !verdict.refusal;
  const VerifierOutcome outcome{verdict.passed && !verdict.refusal && !frozen, verdict.refusal ? verdict.refusal : "",
                                frozen ? verdict.frozen : "", frozen ? verdict.pin : ""};
  kvg::worker_protocol::encode_framed(outcome, answer->outcome, sizeof(answer->outcome));
  pg_write_barrier();
  answer->state = Answer::kAnswered;
}

}  // namespace

void kvg_verifier_main(Datum main_arg) {
  pqsignal(SIGTERM, die);  // the asker gave up (cancel, its own timeout)
  BackgroundWorkerUnblockSignals();
  dsm_segment* segment = dsm_attach(DatumGetUInt32(main_arg));
  if (segment == nullptr) proc_exit(kvg::pg::reserved::exit_status());  // the asker is gone already
  VerifierRequest request;
  Answer* answer = nullptr;
  if (!read_request(segment, request, answer)) {
    if (answer) {
      refuse("its request did not reach the verifier whole");
      answer_with_verdict(answer);
    }
    proc_exit(kvg::pg::reserved::exit_status());
  }
  BackgroundWorkerInitializeConnectionByOid(request.database, BOOTSTRAP_SUPERUSERID, 0);
  pgstat_report_appname("kvg verifier");
  for (const auto& setting : kFixedSettings)
    SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_SESSION);

  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  MemoryContext context = CurrentMemoryContext;
  enable_timeout_after(STATEMENT_TIMEOUT, request.timeout_ms);
  PG_TRY();
  {
    if (request.freeze) {
      freeze(request);
      if (!verdict.refusal) {
        PopActiveSnapshot();
        CommitTransactionCommand();  // the copy outlives this session and the depositor's transaction
        verdict.committed = true;
        pgstat_report_stat(true);  // a background worker reports its catalog changes itself
      }
    } else {
      verify(request);
    }
  }
  PG_CATCH();
  {
    disable_timeout(STATEMENT_TIMEOUT, false);
    MemoryContextSwitchTo(context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    // The verifier's own words stay here (the server log): only a verdict
    // leaves this session.
    if (error->sqlerrcode == ERRCODE_QUERY_CANCELED) {
      refuse("it ran past kvg.verifier_timeout");
    } else {
      ereport(LOG, (errmsg("kvg verifier: the verifier raised an error: %s", error->message)));
      refuse("it raised an error (the server log says which)");
    }
  }
  PG_END_TRY();
  disable_timeout(STATEMENT_TIMEOUT, false);
  if (!verdict.committed) AbortCurrentTransaction();  // whatever a verifier did, nothing of it stays
  answer_with_verdict(answer);
  dsm_detach(segment);
  proc_exit(kvg::pg::reserved::exit_status());
}
