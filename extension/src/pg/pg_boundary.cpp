#include "extension/src/pg/pg_boundary.hpp"

#include <cstring>
#include <new>

#include "common/error.hpp"
#include "extension/src/pg/error_map.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

namespace {

// One backend runs one statement at a time on one thread, so plain globals.
struct BoundaryState {
  MemoryContext context = nullptr;  // the running entry's: outlives the unwinding
  ErrorData* pending = nullptr;     // caught and not yet re-raised
};
BoundaryState state;

// How the body ended. Plain storage in the entry's frame, because it is read
// after every C++ frame (and every C++ string) is gone.
struct Outcome {
  enum class Kind { Returned, Postgres, Kvg, OutOfMemory, Other } kind = Kind::Returned;
  ErrorCode code = ErrorCode::Internal;
  char message[2048] = {};
};

AfterBody after_body{};  // install_boundary's

// Truncates on a UTF-8 character boundary so the client never receives a
// broken sequence.
void copy_message(Outcome& out, const char* text) noexcept {
  size_t n = std::strlen(text);
  if (n >= sizeof(out.message)) {
    n = sizeof(out.message) - 1;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;
  }
  std::memcpy(out.message, text, n);
  out.message[n] = '\0';
}

// Every C++ object the body creates lives in this frame or below it and is
// destroyed before it returns; nothing here may ereport.
__attribute__((noinline)) Datum run_body(FunctionCallInfo fcinfo, Datum (*body)(FunctionCallInfo),
                                         Outcome& out) noexcept {
  try {
    const Datum result = body(fcinfo);
    if (after_body.success) after_body.success();
    return result;
  } catch (const PgError&) {
    out.kind = Outcome::Kind::Postgres;  // the error itself is state.pending
  } catch (const Error& e) {
    out.kind = Outcome::Kind::Kvg;
    out.code = e.code();
    copy_message(out, e.what());
  } catch (const std::bad_alloc& e) {
    out.kind = Outcome::Kind::OutOfMemory;
    copy_message(out, e.what());
  } catch (const std::exception& e) {
    out.kind = Outcome::Kind::Other;
    copy_message(out, e.what());
  } catch (...) {
    out.kind = Outcome::Kind::Other;
    copy_message(out, "exception of unknown type");
  }
  if (after_body.failure) after_body.failure();
  return Datum(0);
}

[[noreturn]] void report(const Outcome& out) {
  switch (out.kind) {
    case Outcome::Kind::Kvg: {
      // Cancellation is PostgreSQL's to report: the user then sees the usual
      // "canceling statement due to user request / statement timeout".
      if (out.code == ErrorCode::Cancelled) CHECK_FOR_INTERRUPTS();
      SqlError e = sql_error_for(out.code);
      ereport(ERROR, (errcode(e.sqlstate), errmsg_internal("%s", out.message),
                      e.hint ? errhint("%s", e.hint) : 0));
      break;
    }
    case Outcome::Kind::OutOfMemory:
      ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
                      errdetail_internal("A C++ allocation in kvg failed (%s).", out.message)));
      break;
    case Outcome::Kind::Postgres:  // unreachable: run_entry re-raised it
    case Outcome::Kind::Other:
    case Outcome::Kind::Returned:
      break;
  }
  ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg_internal("kvg: unexpected C++ exception: %s", out.message),
                  errhint("This is a bug in kvg; please report it with the statement that caused it.")));
  pg_unreachable();
}

// Defence in depth: if an ERROR ever escaped a body without passing through
// run_entry (a PostgreSQL call made without pg::call), the boundary state
// must not outlive the transaction.
void reset_at_transaction_end(XactEvent event, void*) {
  if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
      event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PREPARE)
    state = BoundaryState{};
}

}  // namespace

const char* PgError::what() const noexcept {
  return data_ && data_->message ? data_->message : "PostgreSQL error";
}

namespace detail {

ErrorData* guarded_invoke(void (*fn)(void*), void* ctx) noexcept {
  if (state.pending) return state.pending;
  MemoryContext caller_context = CurrentMemoryContext;
  ErrorData* volatile caught = nullptr;
  PG_TRY();
  {
    fn(ctx);
  }
  PG_CATCH();
  {
    // errfinish longjmps with ErrorContext current; the copy must survive
    // until run_entry re-raises it.
    MemoryContextSwitchTo(state.context ? state.context : caller_context);
    caught = CopyErrorData();
    FlushErrorState();
    MemoryContextSwitchTo(caller_context);
    state.pending = caught;
  }
  PG_END_TRY();
  return caught;
}

Datum run_entry(FunctionCallInfo fcinfo, Datum (*body)(FunctionCallInfo)) {
  // A nested entry (an SPI query calling another kvg function) copies its
  // errors into its own context and hands them back through its own return.
  MemoryContext outer_context = state.context;
  state.context = CurrentMemoryContext;

  Outcome out;
  Datum result = run_body(fcinfo, body, out);

  state.context = outer_context;
  if (ErrorData* error = state.pending) {
    // Whatever else happened while unwinding, the PostgreSQL error came first.
    state.pending = nullptr;
    ReThrowError(error);
  }
  if (out.kind == Outcome::Kind::Returned) return result;
  report(out);
}

}  // namespace detail

bool error_pending() noexcept { return state.pending != nullptr; }

MemoryContext entry_context() noexcept { return state.context ? state.context : CurrentMemoryContext; }

bool interrupt_pending() noexcept { return InterruptPending && (QueryCancelPending || ProcDiePending); }

void throw_if_interrupted() {
  if (interrupt_pending()) throw Error(ErrorCode::Cancelled, "canceling statement due to interrupt");
}

void check_for_interrupts() {
  call([] { CHECK_FOR_INTERRUPTS(); });
}

void install_boundary(AfterBody after) {
  after_body = after;
  RegisterXactCallback(reset_at_transaction_end, nullptr);
}

}  // namespace kvg::pg
