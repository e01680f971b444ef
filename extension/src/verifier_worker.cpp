// The asking side of a verification (verifier_worker.hpp): the request goes
// into a dynamic shared memory segment, a background worker is started for
// it (verifier_worker_main.cpp), and the asker waits on its latch until the
// worker has answered or stopped.
#include "extension/src/verifier_worker.hpp"

#include <cstring>

#include "extension/src/pg_boundary.hpp"
#include "extension/src/settings.hpp"
#include "extension/src/verifier_request.hpp"

#include "extension/src/postgres.hpp"

extern "C" {
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

namespace kvg::pg::verifier_worker {

namespace {

// Question and answer are bounded long before this (kvg_answer's question,
// the answer's tokens); the bound keeps one request's segment small.
constexpr size_t kMaxRequestBytes = size_t(64) << 20;
// Beyond the verifier's own time: a worker's start (fork, connection).
constexpr int kStartSlackMs = 10000;

enum class Wait { Answered, NoSlot, Stopped, TimedOut };

Wait wait_for(BackgroundWorkerHandle* handle, const VerifierRequest* request, int limit_ms) {
  const TimestampTz start = GetCurrentTimestamp();
  for (;;) {
    pid_t pid;
    const BgwHandleStatus status = GetBackgroundWorkerPid(handle, &pid);
    if (request->state == VerifierRequest::kAnswered) {
      pg_read_barrier();
      return Wait::Answered;
    }
    if (status == BGWH_STOPPED || status == BGWH_POSTMASTER_DIED) {
      pg_read_barrier();  // it may have answered just before it stopped
      return request->state == VerifierRequest::kAnswered ? Wait::Answered : Wait::Stopped;
    }
    if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), limit_ms)) return Wait::TimedOut;
    // The worker's start and stop set this latch (bgw_notify_pid); the
    // timeout only bounds how late an answer without a stop is seen.
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
}

// Starts the worker and waits; a cancel of the asker (an ERROR from
// CHECK_FOR_INTERRUPTS) stops the worker before it is re-raised.
Wait start_and_wait(dsm_segment* segment, const VerifierRequest* request, int limit_ms) {
  BackgroundWorker worker;
  std::memset(&worker, 0, sizeof worker);
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  // A hot standby's verifiers run too (read-only, like everything there).
  worker.bgw_start_time = BgWorkerStart_ConsistentState;
  worker.bgw_restart_time = BGW_NEVER_RESTART;
  strlcpy(worker.bgw_library_name, "kvg", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "kvg_verifier_main", BGW_MAXLEN);
  snprintf(worker.bgw_name, BGW_MAXLEN, "kvg verifier for backend %d", MyProcPid);
  strlcpy(worker.bgw_type, "kvg verifier", BGW_MAXLEN);
  worker.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(segment));
  worker.bgw_notify_pid = MyProcPid;
  BackgroundWorkerHandle* handle = nullptr;
  if (!RegisterDynamicBackgroundWorker(&worker, &handle)) return Wait::NoSlot;
  Wait result = Wait::Stopped;
  PG_TRY();
  {
    result = wait_for(handle, request, limit_ms);
  }
  PG_CATCH();
  {
    TerminateBackgroundWorker(handle);
    PG_RE_THROW();
  }
  PG_END_TRY();
  if (result == Wait::TimedOut) TerminateBackgroundWorker(handle);
  return result;
}

}  // namespace

Outcome run(const std::string& spec, const std::string& pin, const std::string& question,
            const std::string& candidate) {
  const size_t bytes = sizeof(VerifierRequest) + spec.size() + pin.size() + question.size() + candidate.size();
  if (bytes > kMaxRequestBytes) return {false, "the question and answer are too large for a verifier"};
  const int timeout_ms = settings::verifier_timeout_ms();
  dsm_segment* segment = call([&] { return dsm_create(bytes, 0); });
  // Detached here on success; after an ERROR the transaction's abort does it.
  struct Detach {
    dsm_segment* segment;
    ~Detach() {
      cleanup([this] { dsm_detach(segment); });
    }
  } detach{segment};
  auto* request = static_cast<VerifierRequest*>(call([&] { return dsm_segment_address(segment); }));
  std::memset(request, 0, sizeof *request);
  request->database = call([] { return MyDatabaseId; });
  request->timeout_ms = timeout_ms;
  request->spec_len = uint32_t(spec.size());
  request->pin_len = uint32_t(pin.size());
  request->question_len = uint32_t(question.size());
  request->candidate_len = uint32_t(candidate.size());
  char* p = request->text();
  for (const std::string* s : {&spec, &pin, &question, &candidate}) {
    std::memcpy(p, s->data(), s->size());
    p += s->size();
  }
  request->state = VerifierRequest::kPending;

  const Wait wait = call([&] {
    pg_write_barrier();  // the request is complete before the worker can read it
    return start_and_wait(segment, request, timeout_ms + kStartSlackMs);
  });
  switch (wait) {
    case Wait::NoSlot:
      return {false, "no background worker slot was free to run it (max_worker_processes)"};
    case Wait::Stopped:
      return {false, "its worker stopped without a verdict (see the server log)"};
    case Wait::TimedOut:
      return {false, "its worker did not answer within kvg.verifier_timeout"};
    case Wait::Answered:
      break;
  }
  if (request->refusal[0] != '\0')
    return {false, std::string(request->refusal, strnlen(request->refusal, sizeof request->refusal))};
  return {request->passed, std::nullopt};
}

}  // namespace kvg::pg::verifier_worker
