// The verifier worker (verifier_worker.hpp): one background worker per
// verification, started by the asking backend with its request in a dynamic
// shared memory segment (verifier_request.hpp).
//
// It connects as the bootstrap superuser (PostgreSQL 15 cannot connect a
// background worker as a NOLOGIN role), only to read the catalog: the
// verifier itself runs as kvg_verifier, a security-restricted operation.
// Its one transaction is always rolled back; the whole of it is bounded by
// kvg.verifier_timeout. Written in C style on purpose: the PG_TRY frame
// owns no C++ object, and nothing here throws.
#include <cstring>

#include "extension/src/verifier_request.hpp"

#include "extension/src/postgres.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
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

namespace {

using kvg::pg::VerifierRequest;

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
};

void refuse(VerifierRequest* request, const char* why) {
  strlcpy(request->refusal, why, sizeof request->refusal);
  request->passed = false;
}

// kvg.function_pin of spec(text, text) as this transaction sees it, or NULL
// (in the SPI context) when there is no such function. *fn receives its OID.
char* current_pin(const VerifierRequest* request, Oid* fn) {
  Oid types[1] = {TEXTOID};
  Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(request->text(), int(request->spec_len)))};
  const int rc = SPI_execute_with_args(
      "SELECT p.oid, kvg.function_pin(p.oid) FROM pg_catalog.pg_proc p "
      "WHERE p.oid = pg_catalog.to_regprocedure($1 || '(text, text)')",
      1, types, values, nullptr, false, 1);  // not read_only: a fresh snapshot each time
  if (rc != SPI_OK_SELECT) elog(ERROR, "kvg verifier: reading the pin failed (%d)", rc);
  if (SPI_processed == 0) return nullptr;
  bool isnull;
  *fn = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
}

bool pin_matches(const VerifierRequest* request, const char* pin) {
  const char* expected = request->text() + request->spec_len;
  return pin != nullptr && std::strlen(pin) == request->pin_len && std::memcmp(pin, expected, request->pin_len) == 0;
}

void verify(VerifierRequest* request) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg verifier: SPI_connect failed");
  Oid fn = InvalidOid;
  if (!pin_matches(request, current_pin(request, &fn))) {
    refuse(request, OidIsValid(fn) ? "it, or something it reaches, changed since the entry was deposited"
                                   : "the function no longer exists (or is not committed)");
    SPI_finish();
    return;
  }
  const Oid verifier_role = get_role_oid("kvg_verifier", true);
  if (!OidIsValid(verifier_role)) {
    refuse(request, "the role kvg_verifier does not exist");
    SPI_finish();
    return;
  }
  if (pg_proc_aclcheck(fn, verifier_role, ACL_EXECUTE) != ACLCHECK_OK) {
    refuse(request, "kvg_verifier may not execute it (GRANT EXECUTE)");
    SPI_finish();
    return;
  }
  const char* text = request->text() + request->spec_len + request->pin_len;
  const Datum question = PointerGetDatum(cstring_to_text_with_len(text, int(request->question_len)));
  const Datum candidate =
      PointerGetDatum(cstring_to_text_with_len(text + request->question_len, int(request->candidate_len)));
  Oid superuser;
  int security;
  GetUserIdAndSecContext(&superuser, &security);
  SetUserIdAndSecContext(verifier_role, security | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
  // By OID, after the pin: no overload or search_path can stand in for it.
  const bool passed = DatumGetBool(OidFunctionCall2Coll(fn, DEFAULT_COLLATION_OID, question, candidate));
  SetUserIdAndSecContext(superuser, security);
  // A change committed while it ran may have been seen by part of it.
  Oid after = InvalidOid;
  if (!pin_matches(request, current_pin(request, &after)) || after != fn) {
    refuse(request, "it, or something it reaches, changed while it ran");
    SPI_finish();
    return;
  }
  request->passed = passed;
  SPI_finish();
}

}  // namespace

void kvg_verifier_main(Datum main_arg) {
  pqsignal(SIGTERM, die);  // the asker gave up (cancel, its own timeout)
  BackgroundWorkerUnblockSignals();
  dsm_segment* segment = dsm_attach(DatumGetUInt32(main_arg));
  if (segment == nullptr) proc_exit(0);  // the asker is gone already
  auto* request = static_cast<VerifierRequest*>(dsm_segment_address(segment));
  BackgroundWorkerInitializeConnectionByOid(request->database, BOOTSTRAP_SUPERUSERID, 0);
  pgstat_report_appname("kvg verifier");
  for (const auto& setting : kFixedSettings)
    SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_SESSION);

  SetCurrentStatementStartTimestamp();
  StartTransactionCommand();
  PushActiveSnapshot(GetTransactionSnapshot());
  MemoryContext context = CurrentMemoryContext;
  enable_timeout_after(STATEMENT_TIMEOUT, request->timeout_ms);
  PG_TRY();
  {
    verify(request);
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
      refuse(request, "it ran past kvg.verifier_timeout");
    } else {
      ereport(LOG, (errmsg("kvg verifier: the verifier raised an error: %s", error->message)));
      refuse(request, "it raised an error (the server log says which)");
    }
  }
  PG_END_TRY();
  disable_timeout(STATEMENT_TIMEOUT, false);
  AbortCurrentTransaction();  // whatever it did, nothing of it stays
  pg_write_barrier();
  request->state = VerifierRequest::kAnswered;
  dsm_detach(segment);
  proc_exit(0);
}
