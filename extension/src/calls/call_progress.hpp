// The progress of each backend's generation, for the view kvg.progress, in
// the manner of pg_stat_progress_*: its phase (queued for the engine worker,
// prefilling the prompt, decoding) and how far, by pid. A backend writes only
// its own slot (one per PGPROC), without a lock: a change count, odd while it
// writes, lets a reader take a consistent copy. Writing never fails and never
// calls into PostgreSQL, so a destructor may clear the slot.
#pragma once

#include <cstdint>

namespace kvg::pg::call_progress {

// From _PG_init under shared_preload_libraries.
void setup_at_preload();

enum class Phase : int32_t { Idle = 0, Queued, Prefill, Decode };

// The slot of this backend while one generation runs; cleared when it ends,
// however it ends (a backend that exits inside it clears it on its way
// out). Does nothing when kvg was not preloaded.
class Tracker {
 public:
  Tracker(int64_t prompt_tokens, int64_t max_tokens, Phase first);
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  void phase(Phase phase);
  void prefilled(int64_t tokens);  // of the prompt's, computed or grafted
  void decoded(int64_t tokens);    // of max_tokens

 private:
  struct Slot* slot_;
};

}  // namespace kvg::pg::call_progress
