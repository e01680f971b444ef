// How long engine work talks to its caller while it runs. The engine never
// prints: the CLI draws a progress line from these, the extension checks for
// cancellation.
#pragma once

#include <cstdint>
#include <functional>

namespace kvg {

// Called between chunks of work on the caller's thread; throw (e.g. a
// kvg::Error with ErrorCode::Cancelled) to stop. The work stays consistent:
// a session keeps the positions already evaluated.
using ProgressCheck = std::function<void()>;

// Calls a ProgressCheck once every `every` steps of a loop too fine-grained
// to check at each step (tokenizer merges, pre-tokenized words).
class PollEvery {
 public:
  PollEvery(const ProgressCheck& check, uint32_t every) : check_(check), every_(every) {}
  void step() {
    if (check_ && ++steps_ % every_ == 0) check_();
  }

 private:
  const ProgressCheck& check_;
  uint32_t every_;
  uint32_t steps_ = 0;
};

// Called like a ProgressCheck with `done` of `total` units of work (tokens,
// bytes), once before the first chunk (done = 0) and after each.
using ProgressReport = std::function<void(int64_t done, int64_t total)>;

}  // namespace kvg
