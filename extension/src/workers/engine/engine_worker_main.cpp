// The engine worker's process (engine_worker.hpp): it claims queued
// generations, admits them within kvg.engine_max_batch and
// kvg.engine_kv_memory, and at every step runs one batched forward pass per
// model and recipe over the next part of every running sequence
// (engine/generate.hpp: step_together), then streams each new token to its
// caller without ever waiting for one.
//
// Errors: a request's own failure (a bad chain, a model that changed, no
// room) is sent to its caller, and the worker goes on. A PostgreSQL ERROR in
// the worker's own calls (out of dynamic shared memory, say) ends the process
// (exit 1: the postmaster restarts it); every C++ object here lives for the
// whole process, so ending it skips nothing that would outlive it.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/quiet_thread.hpp"
#include "engine/answer_line.hpp"
#include "engine/generate.hpp"
#include "engine/graft.hpp"
#include "engine/mapped_kv.hpp"
#include "engine/mapped_kv_files.hpp"
#include "engine/positional_compose.hpp"
#include "engine/session.hpp"
#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/artifacts/disk_headroom.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"
#include "extension/src/workers/engine/worker_models.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procsignal.h"
#include "storage/shm_mq.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "extension/src/workers/engine/engine_worker_shmem.hpp"
#include "extension/src/workers/segment/toc_segment.hpp"

namespace kvg::pg::engine_worker {

namespace {

using namespace worker_protocol;

// A reply on its way to a caller: the bytes of an EngineReply
// (protocol/engine_messages.hpp), and whether it only reports progress (the
// sequence admitted, a token, a prefill count, a chunk's logits rows). Those
// need not wake the caller one by one: each wakeup is a signal to its
// backend, and on a small model the worker makes tokens far faster than a
// backend is worth waking for (Worker::flush). A short call wakes its
// caller once, with its Done.
struct Outgoing {
  std::string bytes;
  bool progress = false;
};
template <class Reply>
Outgoing reply_bytes(Reply reply) {
  constexpr bool progress = std::is_same_v<Reply, StartedReply> || std::is_same_v<Reply, TokenReply> ||
                           std::is_same_v<Reply, PrefilledReply> || std::is_same_v<Reply, LogitsReply>;
  return {encode(EngineReply(std::move(reply))), progress};
}

// How long progress replies may wait in a caller's queue unseen, for the
// next reply or the next of these intervals (counted from the call's claim
// at first): what kvg.progress and the progress notices lag by at most.
constexpr auto kProgressFlush = std::chrono::milliseconds(10);

// A device the engine knows (engine/device.hpp), else the request is refused.
void check_device(const GenerationRequest& r) {
  if (int(r.device) < int(Device::Cpu) || int(r.device) > int(Device::Auto))
    throw ProtocolError("names no device (" + std::to_string(int(r.device)) + ")");
}

// Links that start within the prompt, and a parent of their own only when
// nothing is grafted, else the request is refused.
void check_capture(const GenerationRequest& r) {
  if (r.capture_from < 0 || r.capture_from > int64_t(r.prompt.size()))
    throw ProtocolError("captures from position " + std::to_string(r.capture_from) + ", outside its prompt");
  if (r.capture_parent && r.leaf) throw ProtocolError("names a parent for its links and a chain to graft");
  if (!r.positional_blocks.empty() && r.leaf) throw ProtocolError("names blocks to compose and a chain to graft");
}

// A request refused for what it asks, with the SQLSTATE its caller raises.
struct Refusal {
  const char* sqlstate;
  std::string message;
};

// A call's segment, attached once however many generations it holds, and
// detached when the last of their sequences is dropped (never at exit: the
// Worker is not destroyed).
class AttachedSegment {
 public:
  explicit AttachedSegment(dsm_segment* segment) : segment_(segment) {}
  ~AttachedSegment() { dsm_detach(segment_); }
  AttachedSegment(const AttachedSegment&) = delete;
  AttachedSegment& operator=(const AttachedSegment&) = delete;

 private:
  dsm_segment* segment_;
};

struct Sequence {
  Sequence() = default;
  // Its queues detached (their handles freed: in the worker they would
  // otherwise stay in TopMemoryContext for the life of the process, a few
  // hundred bytes per call served), then its hold on the segment let go.
  ~Sequence() {
    if (replies) shm_mq_detach(replies);
    if (supply) shm_mq_detach(supply);
  }
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int slot = 0;
  uint64_t request = 0;
  pid_t caller = 0;  // the caller's backend
  std::shared_ptr<AttachedSegment> segment;
  shm_mq_handle* replies = nullptr;
  shm_mq_handle* supply = nullptr;  // the caller's answers to a Need
  GenerationRequest asked;
  std::map<Digest, VerifiedBytes::Bytes> held;  // the chain's links, verified, this sequence holds
  bool awaiting_bytes = false;                   // a Need sent, its answer not received
  bool maps_chain = false;                       // its chain is attended from the KV files
  bool copies_chain = false;                     // its chain could not be mapped: copied into its cache
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  std::unique_ptr<Generation> generation;
  std::unique_ptr<AnswerLine> line;  // when asked to stop at the answer line's end
  int64_t kv_bytes = 0;  // reserved against kvg.engine_kv_memory
  Done done;
  std::deque<Outgoing> outbox;     // replies the caller's queue had no room for yet
  // When its queue's replies were last made visible, or it was claimed.
  std::chrono::steady_clock::time_point flushed_at = std::chrono::steady_clock::now();
  size_t tokens_sent = 0;          // of generation->result().tokens, put in the outbox
  int64_t prefill_sent = 0;        // prompt tokens done as last reported (PrefilledReply)
  bool ended = false;              // its last reply is in the outbox
  bool gone = false;               // its caller left: drop it
  // Since when its caller's queue has had no room for the outbox's front
  // (a stopped or slow caller); the epoch while it has room.
  std::chrono::steady_clock::time_point blocked_since{};
  bool evicted = false;  // gave its place to waiting calls: only its outbox is left
};

// A sequence whose caller has not read its replies for this long gives its
// place in the batch and its KV reservation to calls that wait for room.
constexpr auto kStalledCaller = std::chrono::seconds(5);

class Worker {
 public:
  void run();

 private:
  void claim();
  void admit();
  int batch_in_use() const;
  bool evict_a_stalled_caller();
  std::string start(Sequence& s);
  std::string start_mapped(Sequence& s, std::unique_ptr<Session> session);
  void begin(Sequence& s, std::unique_ptr<Session> session, int64_t need);
  MappedKvFiles* kv_files();
  void receive_supply(Sequence& s);
  bool reserve_next_part(Sequence& s);
  std::vector<Sequence*> schedule();
  bool any_schedulable() const;
  bool step();
  void queue_replies(Sequence& s);
  void flush(Sequence& s);
  void reap();
  void fail(Sequence& s, FailedReply reply);
  std::vector<std::unique_ptr<Sequence>> attach(int slot, uint64_t request, dsm_handle handle, int generations,
                                                pid_t caller);
  void publish();

  std::deque<std::unique_ptr<Sequence>> waiting_;  // claimed, not admitted yet
  std::vector<std::unique_ptr<Sequence>> running_;
  WorkerModels models_;  // by kvg.model path: the files callers loaded (worker_models.hpp)
  ArtifactCache cache_;  // verified artifacts of every database, for every backend's grafts
  std::unique_ptr<MappedKvFiles> kv_files_;  // chains attended in place (kvg.engine_kv_files)
  // The threads every sequence's passes run on (kvg.engine_threads): one
  // pool for all, not threads started and stopped with each call.
  std::shared_ptr<ThreadPool> pool_;
  bool kv_files_failed_ = false;
  int64_t kv_in_use_ = 0;
  uint64_t turn_ = 0;  // rotates who comes first in a pass's shares
  int batch_peak_ = 0;
  uint64_t passes_ = 0, rows_ = 0, served_ = 0, failed_ = 0;
};

// Ends `s` with a Failed reply.
void Worker::fail(Sequence& s, FailedReply reply) {
  s.outbox.clear();
  s.outbox.push_back(reply_bytes(std::move(reply)));
  s.ended = true;
  ++failed_;
}

// Takes every queued request: attaches its segment, reads it, and attaches
// as the sender of its reply queue.
void Worker::claim() {
  Shared* sh = shared();
  struct Taken {
    int slot;
    uint64_t request;
    dsm_handle handle;
    int generations;
    pid_t caller;
  };
  std::vector<Taken> taken;
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  for (int i = 0; i < sh->slot_count; ++i) {
    Slot& slot = sh->slots[i];
    const std::optional<uint64_t> request = slot.request.claim();
    if (!request) continue;
    slot.claimed_by = sh->starts;  // this worker's: a restart tells its callers it is gone
    taken.push_back({i, *request, slot.segment, slot.generations, slot.caller});
  }
  LWLockRelease(sh->lock);
  for (const Taken& t : taken)
    for (auto& s : attach(t.slot, t.request, t.handle, t.generations, t.caller)) waiting_.push_back(std::move(s));
}

// A claimed call's sequences, one per generation: its segment (shm_toc,
// engine_worker_shmem.hpp), their queues, their requests; none when the
// caller is gone already. A request that does not decode is failed, to its
// caller.
std::vector<std::unique_ptr<Sequence>> Worker::attach(int slot, uint64_t request, dsm_handle handle,
                                                      int generations, pid_t caller) {
  dsm_segment* attached = dsm_attach(handle);
  if (!attached) return {};
  auto segment = std::make_shared<AttachedSegment>(attached);
  std::vector<std::unique_ptr<Sequence>> sequences;
  for (int i = 0; i < std::max(generations, 1); ++i) {
    auto* replies = static_cast<shm_mq*>(toc_segment::find(attached, kCallMagic, call_key(kReplyQueueKey, i)));
    auto* supply = static_cast<shm_mq*>(toc_segment::find(attached, kCallMagic, call_key(kSupplyQueueKey, i)));
    // Not a call's segment: without its queues there is no one to tell.
    if (!replies || !supply) elog(ERROR, "kvg engine worker: a call's segment is not laid out as a call's");
    auto s = std::make_unique<Sequence>();
    s->slot = slot;
    s->request = request;
    s->caller = caller;
    s->segment = segment;
    shm_mq_set_sender(replies, MyProc);
    s->replies = shm_mq_attach(replies, attached, nullptr);
    shm_mq_set_receiver(supply, MyProc);
    s->supply = shm_mq_attach(supply, attached, nullptr);
    try {
      s->asked = toc_segment::read_framed<GenerationRequest>(attached, kCallMagic, call_key(kRequestKey, i));
      check_device(s->asked);
      check_capture(s->asked);
    } catch (const Error& e) {
      fail(*s, FailedReply::of(e));
    }
    sequences.push_back(std::move(s));
  }
  return sequences;
}

// The request's positional blocks placed in `session` (empty): the
// positions they fill. The prompt must begin with their tokens.
int64_t compose_positionally(Session& session, const GenerationRequest& r, const ArtifactOpener& open) {
  const int64_t n = graft_positional(session, r.positional_blocks, open).n_tokens;
  const std::vector<int32_t>& composed = session.tokens();
  if (composed.size() > r.prompt.size() || !std::equal(composed.begin(), composed.end(), r.prompt.begin()))
    throw Error(ErrorCode::TokenMismatch, "the prompt does not begin with the composed blocks' tokens");
  return n;
}

// The session of a claimed request, its graft, its generation, and the KV it
// may take; "" when started, else why it cannot start yet (no room).
std::string Worker::start(Sequence& s) {
  const GenerationRequest& r = s.asked;
  s.model = models_.for_request(r, s.caller);
  EngineOptions options;
  options.recipe = parse_recipe(r.recipe);
  options.device = r.device;  // resolved here: the worker's own GPU, its one context
  options.gpu_staging_bytes = size_t(r.gpu_staging_bytes);
  options.threads = std::max(1, threads());
  if (!pool_ || pool_->size() != options.threads) pool_ = std::make_shared<ThreadPool>(options.threads);
  options.pool = pool_;
  options.small_passes_inline = true;  // engine/pass_threads.hpp
  // The context this generation can reach: what the worker reserves for it.
  options.max_context = int64_t(r.prompt.size()) + std::max<int64_t>(r.max_new_tokens, 1);
  options.max_kv_bytes = r.max_kv_bytes;
  options.context_limit = r.context_limit;
  options.kv_limit_name = r.max_kv_is_share ? kKvShareLimitName : kKvLimitName;
  auto session = std::make_unique<Session>(s.model, options);
  if (!s.copies_chain && maps_chain_of(r) && session->runs_on() == Device::Cpu && kv_files())
    return start_mapped(s, std::move(session));
  const int64_t need = session->kv_cache().bytes_for(session->max_context());
  if (need > kv_memory_bytes()) throw Refusal{"53200", never_fits_message(need)};
  if (kv_in_use_ + need > kv_memory_bytes()) return "kvg.engine_kv_memory";
  if (r.leaf || !r.positional_blocks.empty()) {
    std::vector<Digest> missing;
    for (const auto& link : r.links) {
      if (s.held.count(link.id)) continue;
      if (auto bytes = cache_.find(ArtifactCacheKey{r.database, link.id, link.loid})) {
        s.held[link.id] = std::move(bytes);
        continue;
      }
      cache_.count_miss();
      missing.push_back(link.id);
    }
    if (!missing.empty()) {
      if (s.awaiting_bytes) return "the caller's artifacts";
      s.outbox.push_back(reply_bytes(NeedReply{std::move(missing)}));
      s.awaiting_bytes = true;
      return "the caller's artifacts";
    }
    const auto began = std::chrono::steady_clock::now();
    // Verified by the caller's backend, as its own cache verifies them
    // (artifact_cache.hpp: verified_artifact_bytes): not hashed again.
    const ArtifactOpener open = [&s](const Digest& id) -> std::unique_ptr<ByteSource> {
      auto it = s.held.find(id);
      if (it == s.held.end()) throw Error(ErrorCode::NotFound, "artifact " + to_hex(id) + " is not in the chain sent");
      return std::make_unique<VerifiedBytes>(VerifiedBytes::vouched(it->second, id));
    };
    // graft() checks every link again: its hash, model, recipe, positions
    // and that the prompt begins with its tokens; graft_positional() each
    // block's links, and compose_positionally() the prompt.
    s.done.grafted_tokens = r.leaf ? graft(*session, *r.leaf, open, std::span<const int32_t>(r.prompt)).n_tokens
                                   : compose_positionally(*session, r, open);
    s.done.graft_micros =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began).count();
  }
  begin(s, std::move(session), need);
  return {};
}

// A chain attended in place from the worker's KV files (engine/mapped_kv.hpp):
// the links it lacks are asked for and written there, the chain is mapped
// (and checked, as a graft checks it), and only the positions after it are
// reserved against kvg.engine_kv_memory. A chain whose files cannot be
// written (a full disk, or one that would leave less than kvg.min_free_disk)
// is copied instead, as without KV files.
std::string Worker::start_mapped(Sequence& s, std::unique_ptr<Session> session) {
  const GenerationRequest& r = s.asked;
  s.maps_chain = true;
  std::vector<Digest> chain;
  for (const auto& link : r.links) chain.push_back(link.id);
  for (auto& [id, bytes] : s.held) {
    try {
      if (!disk_headroom::room_for_file(kv_files_dir(), bytes->size()))
        throw Error(ErrorCode::Io, "writing it would leave less than kvg.min_free_disk free");
      kv_files()->put(id, *bytes, chain);
    } catch (const Error& e) {
      elog(LOG, "kvg engine worker: copying a chain instead of mapping it: %s", e.what());
      s.maps_chain = false;
      s.copies_chain = true;
      return start(s);
    }
  }
  s.held.clear();
  if (std::vector<Digest> missing = kv_files()->missing(chain); !missing.empty()) {
    if (s.awaiting_bytes) return "the caller's artifacts";
    s.outbox.push_back(reply_bytes(NeedReply{std::move(missing)}));
    s.awaiting_bytes = true;
    return "the caller's artifacts";
  }
  const auto began = std::chrono::steady_clock::now();
  MappedKvFiles& files = *kv_files();
  s.done.grafted_tokens =
      graft_mapped(*session, *r.leaf, [&files](const Digest& id) { return files.path_of(id); },
                   std::span<const int32_t>(r.prompt), files.vouched())
          .n_tokens;
  s.done.graft_micros =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began).count();
  // What the session holds itself: its positions after the chain.
  const int64_t need = session->kv_cache().bytes_for(session->max_context() - session->mapped_end());
  if (need > kv_memory_bytes()) throw Refusal{"53200", never_fits_message(need)};
  if (kv_in_use_ + need > kv_memory_bytes()) return "kvg.engine_kv_memory";
  begin(s, std::move(session), need);
  return {};
}

// The files of kvg.engine_kv_files, made on first use; nothing when it is
// off or its directory cannot be made (chains are then copied).
MappedKvFiles* Worker::kv_files() {
  if (kv_files_bytes() == 0) return nullptr;
  if (!kv_files_ && !kv_files_failed_) {
    try {
      kv_files_ = std::make_unique<MappedKvFiles>(kv_files_dir(), kv_files_bytes());
    } catch (const Error& e) {
      kv_files_failed_ = true;
      elog(WARNING, "kvg engine worker: no KV files, chains are copied into memory: %s", e.what());
    }
  }
  if (kv_files_) kv_files_->set_max_bytes(kv_files_bytes());
  return kv_files_.get();
}

// The sequence's generation after its graft: KV `need` reserved, and the
// worker told the caller it runs.
void Worker::begin(Sequence& s, std::unique_ptr<Session> session, int64_t need) {
  const GenerationRequest& r = s.asked;
  const auto rest = std::span<const int32_t>(r.prompt).subspan(size_t(session->n_past()));
  GenerateOptions options_for_generation = generate_options(r);
  if (r.answer_line) {
    s.line = std::make_unique<AnswerLine>(s.model->tokenizer(), r.prompt.back());
    options_for_generation.on_token = [line = s.line.get()](int32_t token) { return line->feed(token); };
  }
  if (r.prompt_logits_from >= 0)
    options_for_generation.prompt_logits = [&outbox = s.outbox](std::span<const float> rows) {
      outbox.push_back(reply_bytes(LogitsReply{std::vector<float>(rows.begin(), rows.end())}));
    };
  s.generation = std::make_unique<Generation>(*session, rest, std::move(options_for_generation));
  s.session = std::move(session);
  s.held.clear();  // grafted: the cache keeps what it may
  s.kv_bytes = need;
  kv_in_use_ += need;
  s.outbox.push_back(reply_bytes(StartedReply{}));
}

// The caller's answer to a Need: the artifacts, copied out of the segment
// it sent, kept for this sequence and in the cache.
void Worker::receive_supply(Sequence& s) {
  Size n = 0;
  void* data = nullptr;
  const shm_mq_result got = shm_mq_receive(s.supply, &n, &data, true);
  if (got == SHM_MQ_DETACHED) s.gone = true;
  if (got != SHM_MQ_SUCCESS) return;
  const SupplyNotice notice = decode<SupplyNotice>(std::string_view(static_cast<const char*>(data), n));
  dsm_segment* segment = dsm_attach(notice.segment);
  if (!segment)
    return fail(s, FailedReply::of("XX000", "kvg: the artifacts sent to the engine worker were gone before it read them"));
  SuppliedArtifacts supplied;
  try {
    supplied = toc_segment::read_framed<SuppliedArtifacts>(segment, kSupplyMagic, kSuppliedKey);
  } catch (const Error&) {
    dsm_detach(segment);
    throw;
  }
  dsm_detach(segment);
  for (auto& [id, bytes] : supplied.artifacts) {
    const auto link = std::find_if(s.asked.links.begin(), s.asked.links.end(), [&](auto& l) { return l.id == id; });
    if (link == s.asked.links.end()) continue;
    // A mapped chain's links go to the KV files, not into memory.
    if (!s.maps_chain) cache_.insert(ArtifactCacheKey{s.asked.database, id, link->loid}, bytes, cache_bytes());
    s.held[id] = std::move(bytes);
  }
  s.awaiting_bytes = false;
}

// Running sequences that hold a place in the batch (an evicted one holds none).
int Worker::batch_in_use() const {
  return int(std::count_if(running_.begin(), running_.end(), [](const auto& s) { return !s->evicted; }));
}

// Ends the first running sequence whose caller has not read its replies for
// kStalledCaller: its KV is freed and its place given up, and a Failed reply
// (53000) follows the replies it has not read, so the caller learns why
// when it reads again. True when there was one.
bool Worker::evict_a_stalled_caller() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& s : running_) {
    if (s->evicted || s->ended || s->gone || s->outbox.empty() || s->blocked_since == decltype(now){} ||
        now - s->blocked_since < kStalledCaller)
      continue;
    s->generation.reset();  // before the session and the answer line it uses
    s->line.reset();
    s->session.reset();
    kv_in_use_ -= s->kv_bytes;
    s->kv_bytes = 0;
    // After the replies already queued: a message partly sent must be sent on whole.
    s->outbox.push_back(reply_bytes(FailedReply::of(
        "53000", "kvg: this call did not read its replies for " + std::to_string(kStalledCaller.count()) +
                     " s while other calls waited for room in the engine worker, which gave them its place")));
    s->ended = true;
    s->evicted = true;
    ++failed_;
    return true;
  }
  return false;
}

// Starts waiting requests in the order they came while there is room; one
// waiting for its caller's artifacts lets the ones behind it go first. When
// there is no room, a running sequence whose caller stopped reading gives
// its place (evict_a_stalled_caller).
void Worker::admit() {
  // Roles with fewer sequences running come first, each in the order its
  // calls came: one role's many sessions do not keep another's out.
  std::map<uint32_t, int> running_of_role;
  for (const auto& s : running_)
    if (!s->evicted) ++running_of_role[s->asked.role];
  std::stable_sort(waiting_.begin(), waiting_.end(), [&running_of_role](const auto& a, const auto& b) {
    return running_of_role[a->asked.role] < running_of_role[b->asked.role];
  });
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (batch_in_use() >= max_batch() && !(evict_a_stalled_caller() && batch_in_use() < max_batch())) break;
    Sequence& s = **it;
    if (s.awaiting_bytes && !s.ended && !s.gone) {
      try {
        receive_supply(s);
      } catch (const Error& e) {
        fail(s, FailedReply::of(e));
      }
      if (s.awaiting_bytes && !s.gone) {
        ++it;
        continue;
      }
    }
    if (!s.ended && !s.gone) {
      std::string no_room;
      try {
        no_room = start(s);
      } catch (const Refusal& r) {
        fail(s, FailedReply::of(r.sqlstate, r.message));
      } catch (const Error& e) {
        fail(s, FailedReply::of(e));
      } catch (const std::bad_alloc&) {
        fail(s, FailedReply::of("53200", "kvg: the engine worker is out of memory for this generation"));
      }
      if (s.awaiting_bytes) {
        ++it;
        continue;
      }
      if (!no_room.empty()) {
        if (evict_a_stalled_caller()) continue;  // try again in the room it gave up
        break;  // the first in line waits; the rest wait behind it
      }
    }
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
}

// Reserves the KV rows `s`'s part of the next pass adds, so that a
// sequence beyond its caller's kvg.max_kv_memory fails alone, before the
// pass, as it would in its backend (the same error), instead of failing the
// pass it shares with other callers' sequences. False when it failed.
bool Worker::reserve_next_part(Sequence& s) {
  try {
    const ForwardRequest part = s.generation->next();
    s.session->kv_cache().reserve(s.session->n_past() + int64_t(part.tokens.size()));
    return true;
  } catch (const Error& e) {
    fail(s, FailedReply::of(e));
  } catch (const std::bad_alloc&) {
    fail(s, FailedReply::of("53200", "kvg: the engine worker is out of memory for this generation"));
  }
  return false;
}

// A sequence may take part in the next pass: it runs, and its replies so
// far are in its caller's queue.
bool schedulable(const Sequence& s) { return s.generation && !s.ended && !s.gone && s.outbox.empty(); }

// The sequences of the next pass, within kvg.engine_pass_tokens: every
// decoding sequence's row (never held back), then the tokens left shared
// equally among the roles with prompts to prefill (at least one token),
// each role's share going to its sessions in turn; a share a role cannot
// use goes to the others.
// Who comes first rotates from pass to pass. A prefill's chunk is capped
// at what it is given (Generation::cap_chunk: the same bits at any size);
// one given nothing sits the pass out. Only sequences whose caller has
// room for their replies take part.
std::vector<Sequence*> Worker::schedule() {
  std::vector<Sequence*> chosen;
  std::map<uint32_t, std::vector<Sequence*>> prefilling;  // by role, in running order
  for (auto& s : running_) {
    if (!schedulable(*s)) continue;
    if (s->generation->prefill_left() == 0) chosen.push_back(s.get());
    else prefilling[s->asked.role].push_back(s.get());
  }
  const int64_t budget = pass_tokens();
  const uint64_t turn = turn_++;
  if (budget <= 0) {  // no bound: every prefill's next chunk, as options.prefill_chunk says
    for (auto& [role, members] : prefilling)
      for (Sequence* s : members) {
        s->generation->cap_chunk(0);
        chosen.push_back(s);
      }
    return chosen;
  }
  // What each prefill would take at most: its next chunk uncapped.
  std::map<Sequence*, int64_t> wants, given;
  std::vector<std::vector<Sequence*>> roles;  // in this pass's turn order, each rotated too
  for (auto& [role, members] : prefilling) {
    for (Sequence* s : members) {
      s->generation->cap_chunk(0);
      wants[s] = int64_t(s->generation->next().tokens.size());
    }
    std::rotate(members.begin(), members.begin() + ptrdiff_t(turn % members.size()), members.end());
    roles.push_back(members);
  }
  if (!roles.empty()) std::rotate(roles.begin(), roles.begin() + ptrdiff_t(turn % roles.size()), roles.end());
  // At least one prompt token a pass, so prefills advance under any load.
  int64_t left = std::max<int64_t>(budget - int64_t(chosen.size()), roles.empty() ? 0 : 1);
  // Rounds of equal shares until the tokens or the wants run out.
  while (left > 0) {
    std::vector<std::vector<Sequence*>*> hungry;
    for (auto& members : roles)
      for (Sequence* s : members)
        if (given[s] < wants[s]) {
          hungry.push_back(&members);
          break;
        }
    if (hungry.empty()) break;
    const int64_t share = std::max<int64_t>(1, left / int64_t(hungry.size()));
    for (auto* members : hungry) {
      int64_t quota = std::min(share, left);
      for (Sequence* s : *members) {
        const int64_t take = std::min(quota, wants[s] - given[s]);
        given[s] += take;
        quota -= take;
        left -= take;
      }
      if (left == 0) break;
    }
  }
  for (auto& members : roles)
    for (Sequence* s : members)
      if (given[s] > 0) {
        s->generation->cap_chunk(given[s]);
        chosen.push_back(s);
      }
  return chosen;
}

// One pass per model and recipe over the sequences schedule() chose; false
// when none could take part.
bool Worker::step() {
  std::map<std::pair<const Model*, std::string>, std::vector<Sequence*>> groups;
  for (Sequence* s : schedule())
    if (reserve_next_part(*s))
      groups[{s->model.get(), s->asked.recipe + "@" + device_name(s->session->runs_on())}].push_back(s);
  for (auto& [key, members] : groups) {
    std::vector<Generation*> generations;
    for (Sequence* s : members) generations.push_back(s->generation.get());
    try {
      step_together(generations);
    } catch (const Error& e) {
      for (Sequence* s : members) fail(*s, FailedReply::of(e));
      continue;
    } catch (const std::bad_alloc&) {
      for (Sequence* s : members)
        fail(*s, FailedReply::of("53200", "kvg: the engine worker ran out of memory in a forward pass"));
      continue;
    }
    ++passes_;
    rows_ += members.size();
    batch_peak_ = std::max(batch_peak_, int(members.size()));
    for (Sequence* s : members) {
      s->done.batch_peak = std::max(s->done.batch_peak, int32_t(members.size()));
      try {
        queue_replies(*s);
      } catch (const Error& e) {
        fail(*s, FailedReply::of(e));
      } catch (const std::bad_alloc&) {
        fail(*s, FailedReply::of("53200", "kvg: the engine worker ran out of memory capturing a chain link"));
      }
    }
  }
  return !groups.empty();
}

void Worker::queue_replies(Sequence& s) {
  const Generation& g = *s.generation;
  if (const int64_t prefilled = g.prompt_tokens() - g.prefill_left(); prefilled > s.prefill_sent) {
    s.outbox.push_back(reply_bytes(PrefilledReply{prefilled, g.prompt_tokens()}));
    s.prefill_sent = prefilled;
  }
  const GenerateResult& result = g.result();
  for (; s.tokens_sent < result.tokens.size(); ++s.tokens_sent)
    s.outbox.push_back(reply_bytes(TokenReply{result.tokens[s.tokens_sent]}));
  if (!s.generation->finished()) return;
  // The links the caller stores, as store_segment_links() walks them.
  std::optional<Digest> parent = s.asked.capture_parent ? s.asked.capture_parent : s.asked.leaf;
  int64_t from = std::max(s.done.grafted_tokens, s.asked.capture_from);
  for (const int64_t end : s.asked.capture_ends) {
    if (end <= from) continue;
    MemorySink artifact;
    parent = capture(*s.session, from, end, parent, artifact);
    s.outbox.push_back(reply_bytes(LinkReply{artifact.bytes()}));
    from = end;
  }
  s.done.stopped_at_eos = result.stopped_at_eos;
  s.done.prefill_seconds = result.prefill_seconds;
  s.done.decode_seconds = result.decode_seconds;
  s.outbox.push_back(reply_bytes(s.done));
  s.ended = true;
  ++served_;
}

// Sends what fits; never waits for the caller, but notes since when it
// has not made room. A reply that matters (Need, Link, Done, Failed) is
// made visible at once, with every reply before it; progress
// alone at most every kProgressFlush (shm_mq_send's force_flush: without
// it, the bytes are in the queue but neither counted as written nor
// signalled until a later send forces them or a quarter of the queue fills).
void Worker::flush(Sequence& s) {
  const auto now = std::chrono::steady_clock::now();
  while (!s.outbox.empty() && !s.gone) {
    const Outgoing& m = s.outbox.front();
    const bool visible = !m.progress || now - s.flushed_at >= kProgressFlush;
    const shm_mq_result sent = shm_mq_send(s.replies, m.bytes.size(), m.bytes.data(), true, visible);
    if (sent == SHM_MQ_WOULD_BLOCK) break;
    if (visible) s.flushed_at = now;
    if (sent == SHM_MQ_DETACHED) s.gone = true;
    else s.outbox.pop_front();
  }
  if (s.outbox.empty() || s.gone) s.blocked_since = {};
  else if (s.blocked_since == decltype(s.blocked_since){}) s.blocked_since = std::chrono::steady_clock::now();
}

// Drops the sequences whose caller left and those whose last reply went; a
// call's slot is free again when the last of its sequences is dropped.
void Worker::reap() {
  Shared* sh = shared();
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->gone || (s->ended && s->outbox.empty()); };
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  std::set<std::pair<int, uint64_t>> live;  // calls with a sequence still going
  auto check = [&](std::unique_ptr<Sequence>& s) {
    if (!sh->slots[s->slot].request.holds(s->request)) s->gone = true;
    if (!done(s)) live.insert({s->slot, s->request});
  };
  for (auto& s : running_) check(s);
  for (auto& s : waiting_) check(s);
  auto give_back = [&](const std::unique_ptr<Sequence>& s) {
    if (!done(s)) return;
    kv_in_use_ -= s->kv_bytes;
    if (!live.count({s->slot, s->request})) (void)sh->slots[s->slot].request.release(s->request);
  };
  for (auto& s : waiting_) give_back(s);
  for (auto& s : running_) give_back(s);
  LWLockRelease(sh->lock);
  // The segment is detached with the last sequence that holds it.
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), done), waiting_.end());
  running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
}

void Worker::publish() {
  Shared* sh = shared();
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  if (sh->forget_batch_peak) batch_peak_ = 0;
  sh->forget_batch_peak = false;
  Figures& f = sh->figures;
  f.sequences = int32_t(batch_in_use());
  f.queued = int32_t(waiting_.size());
  f.batch_peak = batch_peak_;
  f.kv_bytes = kv_in_use_;
  f.passes = passes_;
  f.rows = rows_;
  f.served = served_;
  f.failed = failed_;
  const ArtifactCacheStats cache = cache_.stats(cache_bytes());
  f.cache_entries = cache.entries;
  f.cache_bytes = cache.bytes;
  f.cache_hits = cache.hits;
  f.cache_misses = cache.misses;
  f.gpu_weight_uploads = CudaForward::weight_uploads();
  strlcpy(f.model, models_.last_path().c_str(), sizeof(f.model));
  LWLockRelease(sh->lock);
}

void Worker::run() {
  for (;;) {
    ResetLatch(MyLatch);
    if (ShutdownRequestPending) proc_exit(1);  // restarted unless the server is stopping
    // As the audit writer's loop (writer_main.cpp): DROP DATABASE waits for
    // every process to absorb its barrier, which no step here would do.
    if (ProcSignalBarrierPending) ProcessProcSignalBarrier();
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    cache_.shrink_to(cache_bytes());
    claim();
    admit();
    for (auto& s : waiting_) flush(*s);  // refusals
    const bool stepped = step();
    // Replies, reaping and the next claims come before the next pass: the
    // pool's threads sleep meanwhile rather than spin on the cores the
    // callers' backends need (docs/engine-worker.md, a small model).
    if (pool_) pool_->park();
    for (auto& s : running_) flush(*s);
    reap();
    publish();
    // A sequence admitted in this round, or whose replies went out only
    // now, is ready for a pass: nobody would set the latch for it.
    if (!stepped && !any_schedulable())
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000, PG_WAIT_EXTENSION);
  }
}

bool Worker::any_schedulable() const {
  return std::any_of(running_.begin(), running_.end(), [](const auto& s) { return schedulable(*s); });
}

// Whatever way the worker exits, it is no longer there to take calls: the
// ones it held see their queues detached.
void leave_at_exit(int, Datum) {
  Shared* sh = shared();
  if (!sh) return;
  LWLockReleaseAll();
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  if (sh->pid == MyProcPid) {
    sh->pid = 0;
    sh->latch = nullptr;
    sh->figures.sequences = 0;
    sh->figures.queued = 0;
    sh->figures.kv_bytes = 0;
  }
  LWLockRelease(sh->lock);
}

}  // namespace

}  // namespace kvg::pg::engine_worker

using namespace kvg::pg::engine_worker;

extern "C" {

PGDLLEXPORT void kvg_engine_worker_main(Datum main_arg);

void kvg_engine_worker_main(Datum) {
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  BackgroundWorkerUnblockSignals();
  Shared* sh = shared();
  if (!sh) proc_exit(0);
  before_shmem_exit(leave_at_exit, Datum(0));
  LWLockAcquire(sh->lock, LW_EXCLUSIVE);
  sh->pid = MyProcPid;
  sh->latch = MyLatch;
  ++sh->starts;
  sh->reset_base = {};  // its counters start from zero
  // Calls claimed by a worker before this one were failed by their callers
  // seeing it gone; their slots are free again.
  for (int i = 0; i < sh->slot_count; ++i)
    (void)sh->slots[i].request.forget_claim();
  LWLockRelease(sh->lock);
  pg_atomic_write_u64(&sh->heartbeat_ms, monotonic_ms());
  // The heartbeat: callers stop waiting for a worker whose process has not
  // run for kStallMs (SIGSTOP, a frozen machine), while a long pass, which
  // runs, keeps them waiting. It touches nothing but the atomic.
  kvg::start_quiet_thread([sh] {
    for (;;) {
      pg_atomic_write_u64(&sh->heartbeat_ms, monotonic_ms());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }).detach();
  pgstat_report_appname("kvg engine worker");
  // Never destroyed: it lives until the process ends (see the file's
  // comment), and at exit() its sequences' segments are already detached by
  // PostgreSQL's exit callbacks, which a destructor would detach again.
  Worker* worker = new Worker;
  worker->run();
}

}
