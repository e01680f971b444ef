// The verifier worker (verifier_worker.hpp): one background worker per
// verification, started by the asking backend with its request in a dynamic
// shared memory segment (verifier_segment.hpp).
//
// It connects as the bootstrap superuser (PostgreSQL 15 cannot connect a
// background worker as a NOLOGIN role), only to read the catalog: the
// verifier itself runs as kvg_verifier, a security-restricted operation.
// Its one transaction is always rolled back; the whole of it is bounded by
// kvg.verifier_timeout. Written in C style on purpose: the PG_TRY frame
// owns no C++ object, and nothing in it throws (the request is decoded
// before, into views of the segment, and the verdict encoded after).
#include <cstring>
#include <exception>

#include "extension/src/pg/postgres.hpp"

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

#include "extension/src/workers/segment/toc_segment.hpp"
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
};

void refuse(const char* why) {
  verdict.refusal = why;
  verdict.passed = false;
}

// kvg.function_pin of spec(text, text) as this transaction sees it, or NULL
// (in the SPI context) when there is no such function. *fn receives its OID.
char* current_pin(const VerifierRequest& request, Oid* fn) {
  Oid types[1] = {TEXTOID};
  Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(request.spec.data(), int(request.spec.size())))};
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

bool pin_matches(const VerifierRequest& request, const char* pin) {
  return pin != nullptr && std::strlen(pin) == request.pin.size() &&
         std::memcmp(pin, request.pin.data(), request.pin.size()) == 0;
}

void verify(const VerifierRequest& request) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "kvg verifier: SPI_connect failed");
  Oid fn = InvalidOid;
  if (!pin_matches(request, current_pin(request, &fn))) {
    refuse(OidIsValid(fn) ? "it, or something it reaches, changed since the entry was deposited"
                                   : "the function no longer exists (or is not committed)");
    SPI_finish();
    return;
  }
  const Oid verifier_role = get_role_oid("kvg_verifier", true);
  if (!OidIsValid(verifier_role)) {
    refuse("the role kvg_verifier does not exist");
    SPI_finish();
    return;
  }
  if (pg_proc_aclcheck(fn, verifier_role, ACL_EXECUTE) != ACLCHECK_OK) {
    refuse("kvg_verifier may not execute it (GRANT EXECUTE)");
    SPI_finish();
    return;
  }
  const Datum question =
      PointerGetDatum(cstring_to_text_with_len(request.question.data(), int(request.question.size())));
  const Datum candidate =
      PointerGetDatum(cstring_to_text_with_len(request.candidate.data(), int(request.candidate.size())));
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
    refuse("it, or something it reaches, changed while it ran");
    SPI_finish();
    return;
  }
  verdict.passed = passed;
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
  const VerifierOutcome outcome{verdict.passed && !verdict.refusal, verdict.refusal ? verdict.refusal : ""};
  kvg::worker_protocol::encode_framed(outcome, answer->outcome, sizeof(answer->outcome));
  pg_write_barrier();
  answer->state = Answer::kAnswered;
}

}  // namespace

void kvg_verifier_main(Datum main_arg) {
  pqsignal(SIGTERM, die);  // the asker gave up (cancel, its own timeout)
  BackgroundWorkerUnblockSignals();
  dsm_segment* segment = dsm_attach(DatumGetUInt32(main_arg));
  if (segment == nullptr) proc_exit(0);  // the asker is gone already
  VerifierRequest request;
  Answer* answer = nullptr;
  if (!read_request(segment, request, answer)) {
    if (answer) {
      refuse("its request did not reach the verifier whole");
      answer_with_verdict(answer);
    }
    proc_exit(0);
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
      refuse("it ran past kvg.verifier_timeout");
    } else {
      ereport(LOG, (errmsg("kvg verifier: the verifier raised an error: %s", error->message)));
      refuse("it raised an error (the server log says which)");
    }
  }
  PG_END_TRY();
  disable_timeout(STATEMENT_TIMEOUT, false);
  AbortCurrentTransaction();  // whatever it did, nothing of it stays
  answer_with_verdict(answer);
  dsm_detach(segment);
  proc_exit(0);
}
