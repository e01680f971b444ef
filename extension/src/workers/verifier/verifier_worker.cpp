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

#include "extension/src/workers/reserved/reserved_workers.hpp"
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

// The worker that runs a verification: a pooled one (reserved_workers.hpp)
// or a dynamic one.
struct Runner {
  std::optional<reserved::Handed> pooled;
  BackgroundWorkerHandle* dynamic = nullptr;

  bool stopped() const {
    if (pooled) return !reserved::running(*pooled);
    pid_t pid;
    const BgwHandleStatus status = GetBackgroundWorkerPid(dynamic, &pid);
    return status == BGWH_STOPPED || status == BGWH_POSTMASTER_DIED;
  }
  void terminate() const {
    if (pooled)
      reserved::terminate(*pooled);
    else
      TerminateBackgroundWorker(dynamic);
  }
};

bool timed_out(TimestampTz start, int limit_ms) {
  return TimestampDifferenceExceeds(start, GetCurrentTimestamp(), limit_ms);
}

// Waits 5 ms, or less when the latch is set (a worker's start or stop, with
// bgw_notify_pid); cancel and statement_timeout end the wait.
void wait_a_moment() {
  (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
  ResetLatch(MyLatch);
  CHECK_FOR_INTERRUPTS();
}

Wait wait_for(const Runner& runner, const Answer* answer, TimestampTz start, int limit_ms) {
  for (;;) {
    const bool stopped = runner.stopped();
    if (answer->state == Answer::kAnswered) {
      pg_read_barrier();
      return Wait::Answered;
    }
    if (stopped) {
      pg_read_barrier();  // it may have answered just before it stopped
      return answer->state == Answer::kAnswered ? Wait::Answered : Wait::Stopped;
    }
    if (timed_out(start, limit_ms)) return Wait::TimedOut;
    wait_a_moment();
  }
}

// A worker for the segment: a pooled verifier; when all are busy, a
// dynamic worker; when there is no slot for one either (users' parallel
// queries may hold them all), the next pooled verifier to be free.
std::optional<Runner> start_runner(dsm_segment* segment, TimestampTz start, int limit_ms) {
  const Datum argument = UInt32GetDatum(dsm_segment_handle(segment));
  for (;;) {
    if (const auto pooled = reserved::hand_off(reserved::Pool::Verifier, argument)) return Runner{pooled, nullptr};
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
    worker.bgw_main_arg = argument;
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    if (RegisterDynamicBackgroundWorker(&worker, &handle)) return Runner{std::nullopt, handle};
    if (timed_out(start, limit_ms)) return std::nullopt;
    wait_a_moment();
  }
}

// Starts the worker and waits; a cancel of the asker (an ERROR from
// CHECK_FOR_INTERRUPTS) stops the worker before it is re-raised.
Wait start_and_wait(dsm_segment* segment, const Answer* answer, int limit_ms) {
  const TimestampTz start = GetCurrentTimestamp();
  const std::optional<Runner> runner = start_runner(segment, start, limit_ms);
  if (!runner) return Wait::NoSlot;
  Wait result = Wait::Stopped;
  PG_TRY();
  {
    result = wait_for(*runner, answer, start, limit_ms);
  }
  PG_CATCH();
  {
    runner->terminate();
    PG_RE_THROW();
  }
  PG_END_TRY();
  if (result == Wait::TimedOut) runner->terminate();
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
      return refused("no verifier worker was free to run it in time (kvg.verifier_workers)");
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
