// The calls' side of the engine worker (engine_worker.hpp): its settings and
// shared memory, its registration, and one generation handed over and waited
// for.
#include "extension/src/workers/engine/engine_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/pg/shared_struct.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "catalog/pg_authid.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/workers/engine/engine_worker_shmem.hpp"
#include "extension/src/workers/protocol/wire.hpp"
#include "extension/src/workers/segment/toc_segment.hpp"

namespace kvg::pg::engine_worker {

namespace {

using worker_protocol::SlotState;

constexpr const char* kTranche = "kvg_engine";
// How long a call waits for a worker that is (re)starting before refusing.
constexpr int kStartWaitMs = 10000;
constexpr const char* kDownState = "57V02";
constexpr const char* kDownHint =
    "The engine worker is a background worker of kvg (see kvg_engine_worker() and the server log); the postmaster "
    "restarts it. SET kvg.engine = backend runs calls in their own backend meanwhile (a superuser's setting).";

enum EngineMode { kBackend, kWorker };
const struct config_enum_entry engine_modes[] = {
    {"backend", kBackend, false},
    {"worker", kWorker, false},
    {nullptr, 0, false},
};
int engine_mode = kBackend;
int engine_threads = 0;
int engine_max_batch = 32;
int engine_pass_tokens = 64;
int engine_kv_memory_kb = 4 << 20;
int engine_cache_memory_kb = 1 << 20;
int engine_kv_files_mb = 4096;

Shared* shared_memory = nullptr;
// One request slot per process (shared_struct.hpp).
const SharedStruct kSharedMemory = per_process_struct("kvg engine worker", kTranche, &shared_memory);

void register_worker() {
  BackgroundWorker worker{};
  // No database: it reads nothing but what calls hand it.
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
  worker.bgw_start_time = BgWorkerStart_ConsistentState;
  worker.bgw_restart_time = 1;  // seconds after it exits with an error
  strlcpy(worker.bgw_library_name, "kvg", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "kvg_engine_worker_main", BGW_MAXLEN);
  strlcpy(worker.bgw_name, "kvg engine worker", BGW_MAXLEN);
  strlcpy(worker.bgw_type, "kvg engine worker", BGW_MAXLEN);
  RegisterBackgroundWorker(&worker);
}

[[noreturn]] void worker_down(const std::string& why) { raise_sqlstate(kDownState, "kvg: " + why, kDownHint); }

// A backend that exits while its call is queued or running (terminated,
// say) gives its slot up, so the worker drops the sequence at once.
void abandon_at_exit(int, Datum) {
  if (!shared_memory || !MyProc) return;
  LWLockReleaseAll();
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Slot& s = shared_memory->slots[MyProc->pgprocno];
  if (s.caller == MyProcPid) (void)s.request.abandon(s.request.request);
  LWLockRelease(shared_memory->lock);
}

// The segment of one call (engine_worker_shmem.hpp: CallKey): each
// generation's request, and its two queues attached from this side.
struct CallSegment {
  dsm_segment* segment;
  std::vector<shm_mq_handle*> replies;
  std::vector<shm_mq_handle*> supply;
};

// The reply queue of a generation of a call of `count`: links come back on
// a larger one.
size_t reply_queue_bytes(const GenerationRequest& request, size_t count) {
  if (request.capture_ends.empty()) return kReplyQueueBytes;
  return std::max((kLinkReplyQueueBytes / count) & ~size_t(1023), kMinGroupLinkReplyQueueBytes);
}

// The chunks of a call's segment: each generation's request and queues.
std::vector<toc_segment::Chunk> call_chunks(const std::vector<GenerationRequest>& requests) {
  std::vector<toc_segment::Chunk> chunks;
  for (size_t i = 0; i < requests.size(); ++i) {
    chunks.push_back({call_key(kRequestKey, i), worker_protocol::framed_size(requests[i])});
    chunks.push_back({call_key(kReplyQueueKey, i), reply_queue_bytes(requests[i], requests.size())});
    chunks.push_back({call_key(kSupplyQueueKey, i), kSupplyQueueBytes});
  }
  return chunks;
}

// Plain C calls on what the caller made (`made`'s queues sized for every
// generation, `places` for every chunk): run under pg::call.
dsm_segment* create_call_segment(const std::vector<GenerationRequest>& requests,
                                 const std::vector<toc_segment::Chunk>& chunks, void** places, CallSegment& made) {
  dsm_segment* segment = toc_segment::create(kCallMagic, chunks, places);
  for (size_t i = 0; i < requests.size(); ++i) {
    worker_protocol::encode_framed(requests[i], static_cast<char*>(places[3 * i]), chunks[3 * i].bytes);
    shm_mq* replies = shm_mq_create(places[3 * i + 1], chunks[3 * i + 1].bytes);
    shm_mq_set_receiver(replies, MyProc);
    shm_mq* supply = shm_mq_create(places[3 * i + 2], kSupplyQueueBytes);
    shm_mq_set_sender(supply, MyProc);
    made.replies[i] = shm_mq_attach(replies, segment, nullptr);
    made.supply[i] = shm_mq_attach(supply, segment, nullptr);
  }
  return segment;
}

// A call in flight: its segment and slot. Leaving before the end (an error,
// an interrupt) gives the slot back, or marks it abandoned if the worker has
// it; the transaction's abort detaches the segment.
class Call {
 public:
  Call(const CallSegment& segment, int slot, uint64_t request) : segment_(segment), slot_(slot), request_(request) {}
  ~Call() {
    // Plain C calls that do not raise: this may run while an error unwinds.
    LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
    (void)shared_memory->slots[slot_].request.abandon(request_);
    LWLockRelease(shared_memory->lock);
    if (!finished_) return;
    for (dsm_segment* supplied : supplied_) cleanup([supplied] { dsm_detach(supplied); });
    cleanup([this] { dsm_detach(segment_.segment); });
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  shm_mq_handle* replies(size_t index) const { return segment_.replies[index]; }
  void finished() { finished_ = true; }

  // Answers generation `index`'s Need: the artifacts in a segment of their
  // own, its handle on the generation's supply queue. The segment lives
  // until the call ends (the worker copies from it before it grafts).
  void send_supply(size_t index, const std::vector<std::pair<Digest, VerifiedBytes::Bytes>>& artifacts) {
    worker_protocol::SuppliedArtifacts supplied;
    for (const auto& [id, bytes] : artifacts) supplied.artifacts.push_back({id, bytes});
    const toc_segment::Chunk chunk{kSuppliedKey, worker_protocol::framed_size(supplied)};
    void* place = nullptr;
    supplied_.push_back(call([&chunk, &place] { return toc_segment::create(kSupplyMagic, {&chunk, 1}, &place); }));
    dsm_segment* segment = supplied_.back();
    worker_protocol::encode_framed(supplied, static_cast<char*>(place), chunk.bytes);
    const std::string notice = worker_protocol::encode(worker_protocol::SupplyNotice{dsm_segment_handle(segment)});
    const shm_mq_result sent =
        call([&] { return shm_mq_send(segment_.supply[index], notice.size(), notice.data(), false, true); });
    if (sent != SHM_MQ_SUCCESS) worker_down("the engine worker stopped while it ran this call");
  }

  // Why no worker will answer, or "" while one may: one runs, or has not
  // been waited for kStartWaitMs, while the call is queued; the one that
  // claimed it runs still, once claimed; and either way its heartbeat is
  // not older than kStallMs (a stopped or frozen worker takes no call on).
  std::string worker_gone() const {
    LWLockAcquire(shared_memory->lock, LW_SHARED);
    const Slot& s = shared_memory->slots[slot_];
    const bool running = shared_memory->pid != 0;
    const bool alive = s.request.state == SlotState::Queued
                           ? running || !TimestampDifferenceExceeds(s.queued_at, GetCurrentTimestamp(), kStartWaitMs)
                           : running && shared_memory->starts == s.claimed_by;
    LWLockRelease(shared_memory->lock);
    if (!alive)
      return "the engine worker is not running (it did not take this call within " +
             std::to_string(kStartWaitMs / 1000) + " s, or stopped after taking it)";
    const uint64_t beat = pg_atomic_read_u64(&shared_memory->heartbeat_ms);
    if (running && beat != 0 && monotonic_ms() > beat + kStallMs)
      return "the engine worker has not run for " + std::to_string((monotonic_ms() - beat) / 1000) +
             " s (stopped, or frozen): this call stops waiting for it";
    return {};
  }

  // A worker that started after this call was queued has not seen the
  // queue: wake it.
  void wake_worker_if_queued() const {
    LWLockAcquire(shared_memory->lock, LW_SHARED);
    Latch* latch = shared_memory->slots[slot_].request.state == SlotState::Queued ? shared_memory->latch : nullptr;
    LWLockRelease(shared_memory->lock);
    if (latch) SetLatch(latch);
  }

 private:
  CallSegment segment_;
  int slot_;
  uint64_t request_;
  bool finished_ = false;
  std::vector<dsm_segment*> supplied_;
};

// Queues the call in this backend's slot and wakes the worker.
uint64_t queue_call(const CallSegment& segment, size_t generations) {
  static worker_protocol::RequestIds request_ids;
  const uint64_t request_id = request_ids.next(MyProcPid);
  LWLockAcquire(shared_memory->lock, LW_EXCLUSIVE);
  Slot& s = shared_memory->slots[MyProc->pgprocno];
  (void)s.request.queue(request_id);  // a fresh id: always queued
  s.segment = dsm_segment_handle(segment.segment);
  s.generations = int32_t(generations);
  s.caller = MyProcPid;
  s.queued_at = GetCurrentTimestamp();
  s.claimed_by = 0;
  Latch* worker_latch = shared_memory->latch;
  const bool running = shared_memory->pid != 0;
  LWLockRelease(shared_memory->lock);
  if (running && worker_latch) SetLatch(worker_latch);
  return request_id;
}

// One reply to generation `index` taken into `out`: true at its end (Done),
// after raising the worker's error for Failed.
bool take_reply(worker_protocol::EngineReply reply, Call& in_flight, size_t index, const Supply& supply,
                const Progress& progress, bool& started, WorkerGeneration& out) {
  using namespace worker_protocol;
  if (auto* token = std::get_if<TokenReply>(&reply)) {
    out.result.tokens.push_back(token->token);
    if (progress.decoded) progress.decoded(index, int64_t(out.result.tokens.size()));
    return false;
  }
  if (auto* prefilled = std::get_if<PrefilledReply>(&reply)) {
    if (progress.prefilled) progress.prefilled(index, prefilled->done, prefilled->total);
    return false;
  }
  if (std::holds_alternative<StartedReply>(reply)) {
    if (!started && progress.started) progress.started();
    started = true;
    return false;
  }
  if (auto* need = std::get_if<NeedReply>(&reply)) {
    in_flight.send_supply(index, supply(need->ids));
    return false;
  }
  if (auto* logits = std::get_if<LogitsReply>(&reply)) {
    out.prompt_logits.insert(out.prompt_logits.end(), logits->rows.begin(), logits->rows.end());
    return false;
  }
  if (auto* link = std::get_if<LinkReply>(&reply)) {
    out.links.push_back(std::move(link->artifact));
    return false;
  }
  if (auto* failed = std::get_if<FailedReply>(&reply)) {
    in_flight.finished();
    if (const auto code = failed->code()) throw Error(*code, failed->message);
    raise_sqlstate(failed->sqlstate.c_str(), failed->message, {});
  }
  out.done = std::get<DoneReply>(reply);
  out.result.stopped_at_eos = out.done.stopped_at_eos;
  out.result.prefill_seconds = out.done.prefill_seconds;
  out.result.decode_seconds = out.done.decode_seconds;
  return true;
}

}  // namespace

Shared* shared() { return shared_memory; }

uint64_t monotonic_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

void setup_at_preload() {
  request_shared_struct(kSharedMemory);
  register_worker();
}

void define_settings() {
  // The worker exists only when the postmaster loaded kvg: the default there.
  const int by_default = process_shared_preload_libraries_in_progress ? kWorker : kBackend;
  DefineCustomEnumVariable("kvg.engine", "Where generations run: in the caller's backend, or in kvg's engine worker.",
                           "worker (the default when kvg is preloaded): one process runs every session's "
                           "generations in shared batched passes, with the same bits.",
                           &engine_mode, by_default, engine_modes, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.engine_threads", "CPU threads the engine worker's passes use (0: kvg.max_threads).",
                          nullptr, &engine_threads, 0, 0, 1024, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.engine_max_batch", "The most sequences the engine worker runs at once.",
                          "Requests beyond it wait for a sequence to end.", &engine_max_batch, 32, 1, 4096,
                          PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.engine_pass_tokens",
                          "The most tokens one engine worker pass carries: decode rows, then prefill chunks shared "
                          "equally among the roles that wait (0: no bound).",
                          "Decode rows are never held back; a role's share goes to its sessions in turn.",
                          &engine_pass_tokens, 64, 0, 1 << 20, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.engine_kv_memory", "KV cache memory all the engine worker's sequences may reserve.",
                          "A request waits for room; one that could never fit is refused (53200).",
                          &engine_kv_memory_kb, 4 << 20, 1024, INT_MAX, PGC_SIGHUP, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("kvg.engine_cache_memory",
                          "Memory the engine worker keeps verified artifacts in, for every backend's grafts (0: off).",
                          "Least recently used first out; kvg_engine_worker() shows its use.",
                          &engine_cache_memory_kb, 1 << 20, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("kvg.engine_kv_files",
                          "Disk the engine worker's KV files may take: verified artifacts whose KV it attends in "
                          "place, so a chain's KV is never copied into memory (0: off, chains are copied).",
                          "In the data directory's pgsql_tmp_kvg_kv, which base backups skip: it is rebuilt from "
                          "the large objects. Least recently used first out.",
                          &engine_kv_files_mb, 4096, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_MB, nullptr, nullptr, nullptr);
}

bool in_use() { return engine_mode == kWorker; }
int threads() { return engine_threads > 0 ? engine_threads : settings::max_threads(); }
int max_batch() { return engine_max_batch; }
int pass_tokens() { return engine_pass_tokens; }
int64_t kv_memory_bytes() { return int64_t(engine_kv_memory_kb) * 1024; }
uint64_t cache_bytes() { return uint64_t(engine_cache_memory_kb) * 1024; }
int64_t kv_files_bytes() { return int64_t(engine_kv_files_mb) << 20; }
std::string kv_files_dir() { return std::string(DataDir) + "/" + kKvFilesDir; }
bool maps_chain_of(const GenerationRequest& r) {
  return kv_files_bytes() > 0 && r.leaf && r.chain_tokens < int64_t(r.prompt.size());
}

std::string never_fits_message(int64_t need_bytes) {
  return "kvg: this generation needs " + std::to_string(need_bytes >> 10) +
         " kB of KV cache, more than kvg.engine_kv_memory (" + std::to_string(kv_memory_bytes() >> 10) +
         " kB) allows the engine worker in all";
}

GenerateOptions generate_options(const GenerationRequest& r) {
  GenerateOptions options;
  options.max_new_tokens = r.max_new_tokens;
  options.sampling.temperature = r.temperature;
  options.sampling.top_k = r.top_k;
  options.sampling.top_p = r.top_p;
  options.sampling.seed = r.seed;
  options.stop_at_eos = r.stop_at_eos;
  options.stop_tokens = r.stop_tokens;
  options.prefill_chunk = r.prefill_chunk;
  options.continuations = r.continuations;
  options.prompt_logits_from = r.prompt_logits_from;
  return options;
}

WorkerGeneration generate(const GenerationRequest& request, const Supply& supply, const Progress& progress) {
  return std::move(generate_together({request}, supply, progress).front());
}

std::vector<WorkerGeneration> generate_together(const std::vector<GenerationRequest>& requests, const Supply& supply,
                                                const Progress& progress) {
  if (!shared_memory)
    raise_sqlstate("55000", "kvg: kvg.engine = worker needs kvg loaded at server start",
                   "Add to postgresql.conf: shared_preload_libraries = 'kvg' and restart the server.");
  if (requests.empty()) return {};
  std::vector<GenerationRequest> here = requests;
  for (GenerationRequest& r : here) {
    r.database = MyDatabaseId;     // the key of the chain's links in the worker's cache
    r.role = GetSessionUserId();  // whose share of the worker it takes (SET ROLE changes nothing)
  }
  static bool exit_hook = false;
  const std::vector<toc_segment::Chunk> chunks = call_chunks(here);
  std::vector<void*> places(chunks.size());
  CallSegment segment{nullptr, std::vector<shm_mq_handle*>(here.size()), std::vector<shm_mq_handle*>(here.size())};
  segment.segment = call([&] {
    if (!exit_hook) {
      before_shmem_exit(abandon_at_exit, 0);
      exit_hook = true;
    }
    return create_call_segment(here, chunks, places.data(), segment);
  });
  Call in_flight(segment, MyProc->pgprocno, queue_call(segment, here.size()));

  std::vector<WorkerGeneration> out(here.size());
  std::vector<bool> ended(here.size(), false);
  size_t running = here.size();
  bool started = false;  // the first of its sequences the worker admitted
  for (;;) {
    bool heard = false;
    for (size_t i = 0; i < here.size(); ++i) {
      if (ended[i]) continue;
      Size n = 0;
      void* data = nullptr;
      const shm_mq_result got = call([&] { return shm_mq_receive(in_flight.replies(i), &n, &data, true); });
      if (got == SHM_MQ_DETACHED) worker_down("the engine worker stopped while it ran this call");
      if (got != SHM_MQ_SUCCESS) continue;
      heard = true;
      auto reply = worker_protocol::decode<worker_protocol::EngineReply>(
          std::string_view(static_cast<const char*>(data), n));
      if (take_reply(std::move(reply), in_flight, i, supply, progress, started, out[i])) {
        ended[i] = true;
        --running;
      }
    }
    if (running == 0) {
      in_flight.finished();
      return out;
    }
    if (heard) continue;
    if (const std::string gone = in_flight.worker_gone(); !gone.empty()) worker_down(gone);
    // The worker sets this latch with every reply (shm_mq); the timeout
    // only bounds how soon a stopped worker is noticed.
    call([] {
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000, PG_WAIT_EXTENSION);
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
    });
    in_flight.wake_worker_if_queued();
  }
}

}  // namespace kvg::pg::engine_worker

using namespace kvg::pg::engine_worker;

extern "C" {

// kvg_engine_worker(): the worker's state and figures, one row. Plain C:
// nothing to unwind. Its figures sum every user's calls (a graft of a
// private artifact grows cache_bytes by that artifact's size), so, as
// pg_stat_activity shows other sessions' queries, they are shown only to
// roles that see statistics of every user: pg_read_all_stats, kvg_auditor
// and superusers; to others they are NULL.
PG_FUNCTION_INFO_V1(kvg_engine_worker);
Datum kvg_engine_worker(PG_FUNCTION_ARGS) {
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (!shared()) return Datum(0);
  LWLockAcquire(shared()->lock, LW_SHARED);
  const pid_t pid = shared()->pid;
  const uint64_t starts = shared()->starts;
  Figures f = shared()->figures;
  const Figures& base = shared()->reset_base;
  const TimestampTz reset_at = shared()->reset_at;
  // Counted since the last kvg_engine_worker_reset() (or the worker's start).
  for (auto [figure, at_reset] : {std::pair{&f.passes, base.passes}, {&f.rows, base.rows}, {&f.served, base.served},
                                  {&f.failed, base.failed}, {&f.cache_hits, base.cache_hits},
                                  {&f.cache_misses, base.cache_misses},
                                  {&f.gpu_weight_uploads, base.gpu_weight_uploads}})
    *figure = *figure >= at_reset ? *figure - at_reset : 0;
  LWLockRelease(shared()->lock);
  Datum values[17] = {Int32GetDatum(pid),
                      Int64GetDatum(int64(starts)),
                      CStringGetTextDatum(f.model),
                      Int32GetDatum(f.sequences),
                      Int32GetDatum(f.queued),
                      Int32GetDatum(f.batch_peak),
                      Int64GetDatum(f.kv_bytes),
                      Int64GetDatum(int64(f.passes)),
                      Int64GetDatum(int64(f.rows)),
                      Int64GetDatum(int64(f.served)),
                      Int64GetDatum(int64(f.failed)),
                      Int64GetDatum(int64(f.cache_entries)),
                      Int64GetDatum(int64(f.cache_bytes)),
                      Int64GetDatum(int64(f.cache_hits)),
                      Int64GetDatum(int64(f.cache_misses)),
                      Int64GetDatum(int64(f.gpu_weight_uploads)),
                      TimestampTzGetDatum(reset_at)};
  const Oid auditor = get_role_oid("kvg_auditor", true);
  const bool sees_figures = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) ||
                            (OidIsValid(auditor) && has_privs_of_role(GetUserId(), auditor));
  bool nulls[17] = {};
  nulls[0] = pid == 0;
  nulls[2] = f.model[0] == '\0';
  constexpr int kFirstFigure = 3;  // pid, starts and model are everyone's to see
  if (!sees_figures)
    for (int i = kFirstFigure; i < 16; ++i) nulls[i] = true;
  nulls[16] = reset_at == 0;  // never reset (when is everyone's to see)
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  return Datum(0);
}

// kvg_engine_worker_reset(): the worker's cumulative figures (passes, rows,
// served, failed, cache hits and misses, GPU uploads) count from now on, and
// its batch peak from its next pass; returns when. EXECUTE is the owner's,
// as pg_stat_reset()'s is the superuser's. Plain C: nothing to unwind.
PG_FUNCTION_INFO_V1(kvg_engine_worker_reset);
Datum kvg_engine_worker_reset(PG_FUNCTION_ARGS) {
  if (!shared()) PG_RETURN_NULL();
  const TimestampTz now = GetCurrentTimestamp();
  LWLockAcquire(shared()->lock, LW_EXCLUSIVE);
  shared()->reset_base = shared()->figures;
  shared()->figures.batch_peak = 0;
  shared()->forget_batch_peak = true;
  shared()->reset_at = now;
  LWLockRelease(shared()->lock);
  PG_RETURN_TIMESTAMPTZ(now);
}

}
