// Generations stepped together the way the engine worker steps them
// (engine/generate.hpp: step_together), for the tests that compare each
// with the same generation run alone (tests/engine/test_generation.cpp on the CPU,
// tests/cuda/test_05_server.cpp on CUDA sessions).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/generate.hpp"
#include "engine/session.hpp"

namespace kvg::test {

struct SteppedJob {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  int joins_at = 0;  // the step it starts at
};

// Runs job i on sessions[i]: it starts at its step; at each step a running
// job takes part in the pass when takes_part(i, step) says so (the others
// wait: a client not reading, say), and order(pass) may reorder the pass
// (whoever leads it). Returns each job's tokens.
inline std::vector<std::vector<int32_t>> step_jobs_together(
    const std::vector<std::unique_ptr<Session>>& sessions, const std::vector<SteppedJob>& jobs,
    const std::function<bool(size_t job, int step)>& takes_part,
    const std::function<void(std::vector<Generation*>& pass)>& order = {}) {
  std::vector<std::unique_ptr<Generation>> generations(jobs.size());
  for (int step = 0;; ++step) {
    bool pending = false;
    std::vector<Generation*> pass;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!generations[i] && jobs[i].joins_at <= step)
        generations[i] = std::make_unique<Generation>(*sessions[i], jobs[i].prompt, jobs[i].options);
      if (!generations[i] || !generations[i]->finished()) pending = true;
      if (generations[i] && !generations[i]->finished() && takes_part(i, step)) pass.push_back(generations[i].get());
    }
    if (!pending) break;
    if (order) order(pass);
    step_together(pass);
  }
  std::vector<std::vector<int32_t>> tokens;
  for (const auto& g : generations) tokens.push_back(g->result().tokens);
  return tokens;
}

}  // namespace kvg::test
