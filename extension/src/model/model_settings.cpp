// The settings of the model and of every engine call (the other concerns
// define their own: artifacts/artifact_settings, knowledge/knowledge_settings,
// replica/replica_settings, and each worker; module.cpp defines them all
// before it reserves the prefix). Who may change what:
//  kvg.model           superuser (PGC_SUSET): it names a file the server opens,
//                      and weights are the trust root of every answer.
//  kvg.max_new_tokens  superuser: a hard cap an administrator sets so one
//                      call cannot monopolise a backend; callers ask for less
//                      with the max_tokens argument.
//  kvg.threads         any user, up to kvg.max_threads; 0 (the default) is
//                      kvg.max_threads itself: the cores, unless an
//                      administrator allows fewer.
//  kvg.max_threads     superuser: the cap on kvg.threads (default: the cores
//                      this server has), so that no session takes more cores
//                      than an administrator allows.
//  kvg.device          any user: cpu, cuda and auto (cuda when a usable GPU
//                      is present) give the same bits under the portable
//                      recipe, so the choice affects speed only.
//  kvg.recipe          any user: the arithmetic of the caller's own calls
//                      (docs/recipe.md). Every artifact and audit row records
//                      it, and artifacts of one recipe are never grafted under
//                      another, so a caller's choice changes nobody else's
//                      results.
//  kvg.progress_notices  any user: how often long work of the caller's own
//                      calls reports its progress to the caller.
//  kvg.prefix_reuse    any user: grafting is exact, so it changes speed only
//                      (which is why the tests can compare it on and off).
//  kvg.max_kv_memory   superuser: the KV cache one call may allocate.
//  kvg.max_context     superuser: positions past the model's trained context
//                      give what the model gives there, which may be nonsense.
//  kvg.require_exact   superuser (and per role or database, ALTER ROLE/DATABASE
//                      ... SET): forbids every non-exact graft (a positional
//                      composition) for regulated use; a role it is set for
//                      cannot switch it off.
//  kvg.gpu_staging_memory  superuser: page-locked host memory is taken from
//                      the machine's RAM, cannot be swapped, and every
//                      backend that uses the GPU holds its own.
// None is PGC_POSTMASTER: kvg is preloaded (module.cpp), but a session that
// loads it without that (to be told to preload it) must not fail FATALly.
#include "extension/src/model/model_settings.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"

#include "engine/request_limits.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg::settings {

namespace {

char* model_value = nullptr;
int threads_value = 0;  // 0: kvg.max_threads
int max_threads_value = 1;
int max_kv_memory_kb_value = 1 << 20;  // 1 GB
// 3 x CudaForward::kDefaultStagingBytes: the engine's default split.
int gpu_staging_kb_value = 3 * 64 * 1024;  // 192 MB
int device_value = static_cast<int>(Device::Auto);
int max_new_tokens_value = 256;
int max_context_value = 0;  // 0: the model's context_length
int progress_notice_ms_value = 0;
bool prefix_reuse_value = true;
bool require_exact_value = false;

// kvg.recipe's values: every recipe the engine computes (engine/recipe.hpp),
// by name; the names must outlive the GUC.
const std::vector<std::string> kRecipeNames = [] {
  std::vector<std::string> names;
  for (const Recipe& r : all_recipes()) names.push_back(r.name());
  return names;
}();
const std::vector<config_enum_entry> recipe_options = [] {
  std::vector<config_enum_entry> entries;
  for (size_t i = 0; i < kRecipeNames.size(); ++i) entries.push_back({kRecipeNames[i].c_str(), int(i), false});
  entries.push_back({nullptr, 0, false});
  return entries;
}();
int recipe_value = 0;  // index into all_recipes(); 0 is kDefaultRecipe

const struct config_enum_entry device_options[] = {
    {device_name(Device::Cpu), static_cast<int>(Device::Cpu), false},
    {device_name(Device::Cuda), static_cast<int>(Device::Cuda), false},
    {device_name(Device::Auto), static_cast<int>(Device::Auto), false},
    {nullptr, 0, false},
};

}  // namespace

void define_model() {
  DefineCustomStringVariable("kvg.model", "Path of the GGUF model file kvg loads.",
                             "Loaded lazily by each backend on first use and reloaded when this changes.",
                             &model_value, "", PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.threads", "CPU threads one kvg call may use (0: kvg.max_threads).",
                          "At most kvg.max_threads.", &threads_value, 0, 0, 1024, PGC_USERSET, 0, nullptr, nullptr,
                          nullptr);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  DefineCustomIntVariable("kvg.max_threads", "The most CPU threads any kvg call may use.",
                          "Defaults to the cores of this server.", &max_threads_value, cores, 1, 1024, PGC_SUSET, 0,
                          nullptr, nullptr, nullptr);
  DefineCustomEnumVariable("kvg.device", "Where the engine runs: cpu, cuda, or auto (cuda when available).",
                           nullptr, &device_value, static_cast<int>(Device::Auto), device_options, PGC_USERSET, 0,
                           nullptr, nullptr, nullptr);
  DefineCustomEnumVariable("kvg.recipe", "The arithmetic recipe of this session's engine calls (docs/recipe.md).",
                           "Artifacts graft only under the recipe that produced them.", &recipe_value, 0,
                           recipe_options.data(), PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_new_tokens", "Hard cap on the tokens one kvg call generates.", nullptr,
                          &max_new_tokens_value, 256, 1, int(kvg::kMaxNewTokens), PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.progress_notices",
                          "Report long kvg work (prefill, decoding) as NOTICEs, at most one per this interval.",
                          "0 (the default) sends none.", &progress_notice_ms_value, 0, 0, INT_MAX, PGC_USERSET,
                          GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("kvg.prefix_reuse",
                           "Graft the longest stored artifact chain that begins a prompt, and store knowledge "
                           "compositions as new chain links.",
                           "Exact either way: it changes what is computed, never the output.", &prefix_reuse_value,
                           true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_context",
                          "The most positions one kvg call's context may reach (0: the model's context_length).",
                          "Above the model's context_length the positions are past what it was trained on.",
                          &max_context_value, 0, 0, 1 << 30, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_kv_memory", "The most memory one kvg call's KV cache may take (0: unbounded).",
                          "A context that would need more is refused (54000) before it is allocated.",
                          &max_kv_memory_kb_value, 1 << 20, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomBoolVariable("kvg.require_exact", "Refuse every graft that is not exact (positional composition).",
                           "For regulated use: set by a superuser, per role or database.", &require_exact_value,
                           false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.gpu_staging_memory",
                          "The most page-locked host memory a backend's GPU transfers may stage through.",
                          "Split over the engine's staging buffers; larger transfers go in chunks. A backend's "
                          "buffers only grow: a lower value applies to backends that have not used the GPU yet.",
                          &gpu_staging_kb_value, 3 * 64 * 1024, 3 * 1024, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr,
                          nullptr, nullptr);
}

const char* model_path() { return model_value ? model_value : ""; }

// pg_reload_conf() only signals the postmaster, which re-reads the files and
// then signals every backend; a client that sends its next statement at once
// (the quickstart's ALTER SYSTEM ...; SELECT pg_reload_conf(); then a call)
// usually reaches it before that signal does. Reading the files here is what
// the main loop does before the next statement (PostgreSQL's own VACUUM does
// it inside a transaction too). ConfigReloadPending is left as it is: when
// the signal comes, the main loop reads the files again, which changes
// nothing.
const char* model_path_after_reload() {
  if (!model_value || !*model_value) kvg::pg::call([] { ProcessConfigFile(PGC_SIGHUP); });
  return model_path();
}
int64_t max_kv_bytes() { return int64_t(max_kv_memory_kb_value) * 1024; }
size_t gpu_staging_bytes() { return size_t(gpu_staging_kb_value) * 1024; }
int threads() {
  if (threads_value == 0) return max_threads_value;
  if (threads_value > max_threads_value)
    throw Error(ErrorCode::InvalidArgument, "kvg.threads = " + std::to_string(threads_value) +
                                                " exceeds kvg.max_threads (" + std::to_string(max_threads_value) +
                                                "), which a superuser sets");
  return threads_value;
}
int max_threads() { return max_threads_value; }
kvg::Device device() { return static_cast<kvg::Device>(device_value); }
Recipe recipe() { return all_recipes().at(size_t(recipe_value)); }
int max_new_tokens() { return max_new_tokens_value; }
int64_t max_context() { return max_context_value; }
int progress_notice_ms() { return progress_notice_ms_value; }
bool prefix_reuse() { return prefix_reuse_value; }
bool require_exact() { return require_exact_value; }

}  // namespace kvg::pg::settings
