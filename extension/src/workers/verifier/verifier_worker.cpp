// The asking side of a verification (verifier_worker.hpp): the request goes
// into a dynamic shared memory segment (verifier_segment.hpp), a background
// worker is started for it (verifier_worker_main.cpp), and the asker waits on
// its latch until the worker has answered or stopped.
#include "extension/src/workers/verifier/verifier_worker.hpp"

#include <cstring>
#include <utility>

#include "extension/src/pg/pg_boundary.hpp"

#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/workers/segment/toc_segment.hpp"
#include "extension/src/workers/verifier/verifier_segment.hpp"

namespace kvg::pg::verifier_worker {

namespace {

// Question and answer are bounded long before this (kvg_answer's question,
// the answer's tokens); the bound keeps one request's segment small.
constexpr size_t kMaxRequestBytes = size_t(64) << 20;
int timeout_setting_ms = 5000;
// Beyond the verifier's own time: a worker's start (fork, connection).
constexpr int kStartSlackMs = 10000;

enum class Wait { Answered, NoSlot, Stopped, TimedOut };

Wait wait_for(BackgroundWorkerHandle* handle, const Answer* answer, int limit_ms) {
  const TimestampTz start = GetCurrentTimestamp();
  for (;;) {
    pid_t pid;
    const BgwHandleStatus status = GetBackgroundWorkerPid(handle, &pid);
    if (answer->state == Answer::kAnswered) {
      pg_read_barrier();
      return Wait::Answered;
    }
    if (status == BGWH_STOPPED || status == BGWH_POSTMASTER_DIED) {
      pg_read_barrier();  // it may have answered just before it stopped
      return answer->state == Answer::kAnswered ? Wait::Answered : Wait::Stopped;
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
Wait start_and_wait(dsm_segment* segment, const Answer* answer, int limit_ms) {
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
    result = wait_for(handle, answer, limit_ms);
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

// The segment of one verification (verifier_segment.hpp): the request, and
// its answer, pending. Plain C calls on what the caller made: run under
// pg::call.
struct VerificationSegment {
  dsm_segment* segment;
  Answer* answer;
};

VerificationSegment create_segment(const worker_protocol::VerifierRequest& request) {
  const toc_segment::Chunk chunks[] = {{kRequestKey, worker_protocol::framed_size(request)},
                                       {kAnswerKey, sizeof(Answer)}};
  void* places[2];
  dsm_segment* segment = toc_segment::create(kVerifierMagic, chunks, places);
  worker_protocol::encode_framed(request, static_cast<char*>(places[0]), chunks[0].bytes);  // sized for it
  auto* answer = static_cast<Answer*>(places[1]);
  std::memset(static_cast<void*>(answer), 0, sizeof(Answer));
  answer->state = Answer::kPending;
  pg_write_barrier();  // the request is complete before the worker can read it
  return {segment, answer};
}

}  // namespace

void define_settings() {
  DefineCustomIntVariable("kvg.verifier_timeout",
                          "How long a function verifier may run, in its worker, before it fails closed.",
                          "The worker's whole transaction: pin, call, pin again (docs/security.md).",
                          &timeout_setting_ms, 5000, 1, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr,
                          nullptr);
}

namespace {

Outcome refused(std::string why) { return {false, std::move(why), "", ""}; }

// One request to one worker, and its answer.
Outcome ask(const worker_protocol::VerifierRequest& request) {
  if (worker_protocol::framed_size(request) > kMaxRequestBytes)
    return refused("the question and answer are too large for a verifier");
  const VerificationSegment made = call([&request] { return create_segment(request); });
  // Detached here on success; after an ERROR the transaction's abort does it.
  struct Detach {
    dsm_segment* segment;
    ~Detach() {
      cleanup([this] { dsm_detach(segment); });
    }
  } detach{made.segment};

  const Wait wait = call([&] { return start_and_wait(made.segment, made.answer, request.timeout_ms + kStartSlackMs); });
  switch (wait) {
    case Wait::NoSlot:
      return refused("no background worker slot was free to run it (max_worker_processes)");
    case Wait::Stopped:
      return refused("its worker stopped without a verdict (see the server log)");
    case Wait::TimedOut:
      return refused("its worker did not answer within kvg.verifier_timeout");
    case Wait::Answered:
      break;
  }
  worker_protocol::VerifierOutcome outcome;
  try {
    outcome = worker_protocol::decode_framed<worker_protocol::VerifierOutcome>(made.answer->outcome,
                                                                               sizeof(made.answer->outcome));
  } catch (const worker_protocol::ProtocolError&) {
    return refused("its worker's answer did not read as one");  // fails closed
  }
  if (!outcome.refusal.empty()) return refused(std::string(outcome.refusal));
  return {outcome.passed, std::nullopt, std::string(outcome.frozen), std::string(outcome.pin)};
}

}  // namespace

Outcome run(const std::string& frozen, const std::string& pin, const std::string& question,
            const std::string& candidate) {
  return ask({call([] { return MyDatabaseId; }), timeout_setting_ms, false, frozen, pin, question, candidate});
}

Outcome freeze(const std::string& spec) {
  const Outcome made = ask({call([] { return MyDatabaseId; }), timeout_setting_ms, true, spec, "", "", ""});
  if (!made.refusal && (made.frozen.empty() || made.pin.empty()))
    return refused("its worker froze nothing");  // fails closed
  return made;
}

}  // namespace kvg::pg::verifier_worker
