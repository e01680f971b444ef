// The C++/PostgreSQL boundary. Two kinds of non-local exit meet here and must
// never cross: a C++ exception unwinding into PostgreSQL's C frames ends the
// process, and PostgreSQL's ERROR (a siglongjmp) skips C++ destructors.
//
//  * KVG_SQL_FUNCTION defines an SQL entry point whose body is plain C++. A
//    wrapper catches everything the body throws and only after every C++ frame
//    is gone reports it: kvg::Error as a SQLSTATE with message and hint
//    (error_map.cpp), std::bad_alloc as out_of_memory, a caught PostgreSQL
//    error as itself, unchanged.
//  * pg::call(f) runs f (which calls into PostgreSQL) under its own sigsetjmp,
//    in a frame deeper than any RAII object, and turns an ERROR into PgError.
//    f must own nothing with a destructor: it is skipped if f longjmps.
//
// After PostgreSQL raised an ERROR the backend is only fit for transaction
// abort (locks, buffer pins and the like may still be held), so once an error
// is caught every later pg::call refuses to enter PostgreSQL and throws the
// same PgError again, and destructors use pg::cleanup, which then does
// nothing: the abort that follows releases what they would have released.
// Catching a PgError and carrying on is therefore never possible; catching a
// kvg::Error is (PostgreSQL state is intact).
#pragma once

#include <cstdint>
#include <exception>
#include <type_traits>

struct ErrorData;                 // utils/elog.h
struct FunctionCallInfoBaseData;  // fmgr.h
struct MemoryContextData;         // utils/palloc.h
typedef uintptr_t Datum;          // postgres.h (same definition)

namespace kvg::pg {

// A PostgreSQL ERROR on its way to the entry wrapper, which re-raises it.
class PgError final : public std::exception {
 public:
  explicit PgError(ErrorData* data) noexcept : data_(data) {}
  const char* what() const noexcept override;
  ErrorData* data() const noexcept { return data_; }

 private:
  ErrorData* data_;
};

namespace detail {

// Runs fn(ctx) under sigsetjmp. Returns the caught error (copied out of
// ErrorContext into the entry's memory context), or nullptr. Refuses to run fn
// and returns the earlier error if one is already caught. fn must not throw.
ErrorData* guarded_invoke(void (*fn)(void*), void* ctx) noexcept;

// The wrapper behind KVG_SQL_FUNCTION.
Datum run_entry(FunctionCallInfoBaseData* fcinfo, Datum (*body)(FunctionCallInfoBaseData*));

template <typename F, typename R>
struct CallFrame {
  F* fn;
  R* result;
  std::exception_ptr thrown;
};

// The C++ exception of a lambda is caught here, in a frame below the
// sigsetjmp, so it never unwinds through the guard's frame.
template <typename F, typename R>
void trampoline(void* p) noexcept {
  auto* frame = static_cast<CallFrame<F, R>*>(p);
  try {
    if constexpr (std::is_void_v<R>)
      (*frame->fn)();
    else
      *frame->result = (*frame->fn)();
  } catch (...) {
    frame->thrown = std::current_exception();
  }
}

}  // namespace detail

// Calls into PostgreSQL. Returns what f returns (a trivially copyable value:
// a pointer, a Datum, a number), throws PgError if PostgreSQL raised ERROR.
template <typename F>
auto call(F&& f) {
  using R = std::invoke_result_t<F&>;
  static_assert(std::is_void_v<R> || std::is_trivially_copyable_v<R>,
                "pg::call returns plain values; build C++ objects outside the guard");
  using Fn = std::remove_reference_t<F>;
  if constexpr (std::is_void_v<R>) {
    detail::CallFrame<Fn, void> frame{&f, nullptr, {}};
    if (ErrorData* error = detail::guarded_invoke(&detail::trampoline<Fn, void>, &frame)) throw PgError(error);
    if (frame.thrown) std::rethrow_exception(frame.thrown);
  } else {
    R result{};
    detail::CallFrame<Fn, R> frame{&f, &result, {}};
    if (ErrorData* error = detail::guarded_invoke(&detail::trampoline<Fn, R>, &frame)) throw PgError(error);
    if (frame.thrown) std::rethrow_exception(frame.thrown);
    return result;
  }
}

// For destructors: runs f unless a PostgreSQL error is already pending; an
// ERROR raised by f is kept for the entry wrapper instead of thrown.
template <typename F>
void cleanup(F&& f) noexcept {
  detail::CallFrame<std::remove_reference_t<F>, void> frame{&f, nullptr, {}};
  detail::guarded_invoke(&detail::trampoline<std::remove_reference_t<F>, void>, &frame);
}

// True once a PostgreSQL error has been caught in this entry (see above).
bool error_pending() noexcept;

// The memory context that was current when the running entry began: results
// (text, bytea) go there, since SPI switches CurrentMemoryContext to one it
// frees at SPI_finish.
MemoryContextData* entry_context() noexcept;

// Whether the user asked to stop this statement (cancel, statement_timeout,
// termination). Only reads PostgreSQL's signal flags: it never longjmps, so
// the engine may poll it from its progress callback.
bool interrupt_pending() noexcept;

// throws kvg::Error(Cancelled) when interrupt_pending(); the entry wrapper
// then lets CHECK_FOR_INTERRUPTS() report the real reason.
void throw_if_interrupted();

// CHECK_FOR_INTERRUPTS() for loops on the backend thread (large-object I/O).
void check_for_interrupts();

// What runs after every SQL function's C++ body: `success` when it returned
// (it may call into PostgreSQL through call(); what it throws is the call's
// error), `failure` when it threw (it must not call PostgreSQL). The boundary
// knows no feature; the module says which (module.cpp: the device notice).
struct AfterBody {
  void (*success)() = nullptr;
  void (*failure)() noexcept = nullptr;
};

// From _PG_init: sets the hooks above and resets the boundary's state at
// every transaction end.
void install_boundary(AfterBody after);

}  // namespace kvg::pg

// Defines the SQL-callable C function `name` (declare it in the SQL script
// with AS 'MODULE_PATHNAME', 'name') and opens its C++ body. Use in a .cpp
// that includes postgres.hpp.
#define KVG_SQL_FUNCTION(name)                                                         \
  static Datum name##_body(FunctionCallInfo fcinfo);                                   \
  extern "C" {                                                                         \
  PG_FUNCTION_INFO_V1(name);                                                           \
  Datum name(PG_FUNCTION_ARGS) { return kvg::pg::detail::run_entry(fcinfo, name##_body); } \
  }                                                                                    \
  static Datum name##_body(FunctionCallInfo fcinfo)
