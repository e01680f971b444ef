// Who may change what:
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
//  kvg.max_import_bytes
//                      superuser: the largest artifact one kvg_import takes.
//  kvg.storage_quota   superuser (and per role, ALTER ROLE ... SET): how many
//                      bytes of artifacts one role may have stored, charged
//                      to the session user, so that SET ROLE opens no new
//                      bucket (kvg.storage_usage shows it; docs/security.md).
//  kvg.max_solution_tokens
//                      superuser: the longest solution a library entry may
//                      hold, in tokens, so that nobody's entries crowd
//                      everybody's questions out of the context.
//  kvg.device          any user: cpu, cuda and auto (cuda when a usable GPU
//                      is present) give the same bits under the portable
//                      recipe, so the choice affects speed only.
//  kvg.recipe          any user: the arithmetic of the caller's own calls
//                      (docs/recipe.md). Every artifact and audit row records
//                      it, and artifacts of one recipe are never grafted under
//                      another, so a caller's choice changes nobody else's
//                      results.
//  kvg.knowledge_template  any user: it only lays out the caller's own prompts
//                      (a chat model needs its own format); artifacts are
//                      content-addressed, so prompts of different templates
//                      are stored side by side and never mistaken for each
//                      other. Checked when set, so a broken template fails at
//                      SET rather than at the next answer.
//  kvg.progress_notices  any user: how often long work of the caller's own
//                      calls reports its progress to the caller.
//  kvg.prefix_reuse    any user: grafting is exact, so it changes speed only
//                      (which is why the tests can compare it on and off).
//  kvg.artifact_cache_memory
//                      superuser: memory each backend may keep verified
//                      artifacts in (artifact_cache.hpp), a server's memory
//                      times its backends; 0 turns the cache off. Speed only.
//  kvg.transfer_min_similarity, kvg.transfer_max_entries
//                      any user: how related an entry must be to be used as
//                      context for the caller's question, and how many.
//  kvg.audit_conninfo  superuser, hidden from others (it may hold a password):
//                      how a hot standby reaches the primary to append its
//                      audit rows there (docs/scale-out.md). Checked when set.
//  kvg.audit_connect_timeout
//                      superuser: how long a standby's call waits to connect.
//  kvg.allow_unaudited superuser: a call whose audit row cannot be recorded
//                      (a standby that cannot reach the primary, a primary
//                      whose audit writer is down) returns the answer anyway,
//                      with a WARNING (01V01) and no audit id. Off: it refuses.
//  kvg.audit_writer_idle_timeout
//                      server configuration (SIGHUP): when an idle audit
//                      writer stops (audit_writer.hpp).
//  kvg.require_exact   superuser (and per role or database, ALTER ROLE/DATABASE
//                      ... SET): forbids every non-exact graft (a positional
//                      composition) for regulated use; a role it is set for
//                      cannot switch it off.
//  kvg.min_free_disk   superuser: free space kept on the database's
//                      filesystem for VACUUM; below it new artifacts are
//                      refused (disk_headroom.hpp).
//  kvg.gpu_staging_memory  superuser: page-locked host memory is taken from
//                      the machine's RAM, cannot be swapped, and every
//                      backend that uses the GPU holds its own.
//  kvg.engine          superuser: whether generations run in the caller's
//                      backend or in the engine worker (engine_worker.hpp);
//                      the bits are the same, so it changes speed, memory and
//                      which process holds the model, never an answer.
//  kvg.engine_threads, kvg.engine_max_batch, kvg.engine_kv_memory
//                      server configuration (SIGHUP): the worker's cores, the
//                      most sequences it runs at once, and the KV they may
//                      reserve in all.
// None is PGC_POSTMASTER: kvg is preloaded (module.cpp), but a session that
// loads it without that (to be told to preload it) must not fail FATALly.
#include "extension/src/settings.hpp"

#include <algorithm>
#include <climits>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"

#include "engine/knowledge_prompt.hpp"
#include "engine/request_limits.hpp"
#include "extension/src/disk_headroom.hpp"
#include "extension/src/conninfo.hpp"
#include "extension/src/postgres.hpp"

namespace kvg::pg::settings {

namespace {

char* model_value = nullptr;
int threads_value = 0;  // 0: kvg.max_threads
int max_threads_value = 1;
int max_import_kb_value = 1 << 20;      // 1 GB
int storage_quota_kb_value = 10 << 20;  // 10 GB
int max_kv_memory_kb_value = 1 << 20;  // 1 GB
// 3 x CudaForward::kDefaultStagingBytes: the engine's default split.
int gpu_staging_kb_value = 3 * 64 * 1024;  // 192 MB
int device_value = static_cast<int>(Device::Auto);
int max_new_tokens_value = 256;
int max_solution_tokens_value = 1024;
int progress_notice_ms_value = 0;
char* knowledge_template_value = nullptr;
bool prefix_reuse_value = true;
int artifact_cache_kb_value = 128 << 10;  // 128 MB
double transfer_min_similarity_value = 0.5;
int transfer_max_entries_value = 2;
char* audit_conninfo_value = nullptr;
int audit_connect_timeout_ms_value = 5000;
bool allow_unaudited_value = false;
bool require_exact_value = false;
int audit_writer_idle_ms_value = 60000;
int verifier_timeout_ms_value = 5000;

// engine/knowledge_prompt.hpp: on a model with a chat template, this default
// is laid out in the model's chat format.
constexpr const char* kDefaultTemplate = kDefaultKnowledgeTemplate;

// A GUC check hook is called from C: nothing may be thrown out of it, and
// PostgreSQL is called (GUC_check_errdetail may palloc, so longjmp) only once
// every C++ object and exception is gone.
bool check_knowledge_template(char** newval, void**, GucSource) {
  static char problem[512];
  problem[0] = '\0';
  try {
    KnowledgeTemplate::parse(*newval ? *newval : "");
  } catch (const std::exception& e) {
    strlcpy(problem, e.what(), sizeof(problem));
  } catch (...) {
    strlcpy(problem, "unexpected error", sizeof(problem));
  }
  if (problem[0] == '\0') return true;
  GUC_check_errdetail("%s", problem);
  return false;
}

// libpq parses the string as it will when connecting, so a typo fails at
// SET, not at the first answer on the standby. As check_knowledge_template:
// nothing thrown out, PostgreSQL called once the C++ objects are gone.
bool check_audit_conninfo(char** newval, void**, GucSource) {
  static char problem[512];
  problem[0] = '\0';
  try {
    if (auto why = conninfo_problem(*newval ? *newval : "")) strlcpy(problem, why->c_str(), sizeof(problem));
  } catch (...) {
    strlcpy(problem, "unexpected error", sizeof(problem));
  }
  if (problem[0] == '\0') return true;
  GUC_check_errdetail("%s", problem);
  return false;
}

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

void define() {
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
  DefineCustomIntVariable("kvg.max_import_bytes", "The largest artifact kvg_import accepts.", nullptr,
                          &max_import_kb_value, 1 << 20, 1, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("kvg.storage_quota", "Bytes of artifacts one role may have stored.",
                          "Charged to the session user; set per role with ALTER ROLE ... SET kvg.storage_quota; "
                          "see kvg.storage_usage.",
                          &storage_quota_kb_value, 10 << 20, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomEnumVariable("kvg.device", "Where the engine runs: cpu, cuda, or auto (cuda when available).",
                           nullptr, &device_value, static_cast<int>(Device::Auto), device_options, PGC_USERSET, 0,
                           nullptr, nullptr, nullptr);
  DefineCustomEnumVariable("kvg.recipe", "The arithmetic recipe of this session's engine calls (docs/recipe.md).",
                           "Artifacts graft only under the recipe that produced them.", &recipe_value, 0,
                           recipe_options.data(), PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_new_tokens", "Hard cap on the tokens one kvg call generates.", nullptr,
                          &max_new_tokens_value, 256, 1, int(kvg::kMaxNewTokens), PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_solution_tokens", "The most tokens a library entry's solution may hold.",
                          "kvg_learn and kvg_solve refuse longer ones (54000).", &max_solution_tokens_value, 1024, 1,
                          INT_MAX, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.progress_notices",
                          "Report long kvg work (prefill, decoding) as NOTICEs, at most one per this interval.",
                          "0 (the default) sends none.", &progress_notice_ms_value, 0, 0, INT_MAX, PGC_USERSET,
                          GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomStringVariable("kvg.knowledge_template",
                             "How a knowledge prompt is laid out: {solution}, then {question}, then the answer cue.",
                             "kvg_learn, kvg_solve and kvg_answer build every prompt from it.",
                             &knowledge_template_value, kDefaultTemplate, PGC_USERSET, 0, check_knowledge_template,
                             nullptr, nullptr);
  DefineCustomBoolVariable("kvg.prefix_reuse",
                           "Graft the longest stored artifact chain that begins a prompt, and store knowledge "
                           "compositions as new chain links.",
                           "Exact either way: it changes what is computed, never the output.", &prefix_reuse_value,
                           true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.artifact_cache_memory",
                          "Memory each backend may keep verified artifacts in, so a recurring graft does not read "
                          "and hash them again (0: off).",
                          "Least recently used first out; the view kvg.artifact_cache shows its use.",
                          &artifact_cache_kb_value, 128 << 10, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomRealVariable("kvg.transfer_min_similarity",
                           "Share of a question's words an entry must contain to serve as its context.", nullptr,
                           &transfer_min_similarity_value, 0.5, 0.0, 1.0, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.transfer_max_entries", "Most entries put before a question in transfer mode.", nullptr,
                          &transfer_max_entries_value, 2, 1, 16, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_kv_memory", "The most memory one kvg call's KV cache may take (0: unbounded).",
                          "A context that would need more is refused (54000) before it is allocated.",
                          &max_kv_memory_kb_value, 1 << 20, 0, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr, nullptr,
                          nullptr);
  DefineCustomStringVariable("kvg.audit_conninfo",
                             "On a hot standby: libpq connection string of the primary, where audit rows are appended.",
                             "Its role must be a member of kvg_audit_writer; empty: a standby refuses audited calls.",
                             &audit_conninfo_value, "", PGC_SUSET, GUC_SUPERUSER_ONLY, check_audit_conninfo, nullptr,
                             nullptr);
  DefineCustomIntVariable("kvg.audit_connect_timeout", "How long a standby waits to connect to the primary.", nullptr,
                          &audit_connect_timeout_ms_value, 5000, 1, 600000, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr,
                          nullptr);
  DefineCustomBoolVariable("kvg.allow_unaudited",
                           "On a hot standby: return answers whose audit row the primary could not record.",
                           "Each such answer says so with a WARNING (SQLSTATE 01V01) and has no audit id.",
                           &allow_unaudited_value, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("kvg.require_exact", "Refuse every graft that is not exact (positional composition).",
                           "For regulated use: set by a superuser, per role or database.", &require_exact_value,
                           false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.gpu_staging_memory",
                          "The most page-locked host memory a backend's GPU transfers may stage through.",
                          "Split over the engine's staging buffers; larger transfers go in chunks. A backend's "
                          "buffers only grow: a lower value applies to backends that have not used the GPU yet.",
                          &gpu_staging_kb_value, 3 * 64 * 1024, 3 * 1024, INT_MAX, PGC_SUSET, GUC_UNIT_KB, nullptr,
                          nullptr, nullptr);
  DefineCustomIntVariable("kvg.audit_writer_idle_timeout",
                          "How long a database's audit writer waits for rows before it stops (docs/audit-chain.md).",
                          "The next audited call starts it again.", &audit_writer_idle_ms_value, 60000, 100,
                          INT_MAX, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.verifier_timeout",
                          "How long a function verifier may run, in its worker, before it fails closed.",
                          "The worker's whole transaction: pin, call, pin again (docs/security.md).",
                          &verifier_timeout_ms_value, 5000, 1, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr,
                          nullptr);
  disk_headroom::define_setting();
  MarkGUCPrefixReserved("kvg");
}

const char* model_path() { return model_value ? model_value : ""; }
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
uint64_t max_import_bytes() { return uint64_t(max_import_kb_value) * 1024; }
uint64_t storage_quota_bytes() { return uint64_t(storage_quota_kb_value) * 1024; }
kvg::Device device() { return static_cast<kvg::Device>(device_value); }
Recipe recipe() { return all_recipes().at(size_t(recipe_value)); }
int max_new_tokens() { return max_new_tokens_value; }
int max_solution_tokens() { return max_solution_tokens_value; }
int progress_notice_ms() { return progress_notice_ms_value; }
const char* knowledge_template() { return knowledge_template_value ? knowledge_template_value : kDefaultTemplate; }
bool prefix_reuse() { return prefix_reuse_value; }
uint64_t artifact_cache_bytes() { return uint64_t(artifact_cache_kb_value) * 1024; }
double transfer_min_similarity() { return transfer_min_similarity_value; }
int transfer_max_entries() { return transfer_max_entries_value; }
const char* audit_conninfo() { return audit_conninfo_value ? audit_conninfo_value : ""; }
int audit_connect_timeout_ms() { return audit_connect_timeout_ms_value; }
bool allow_unaudited() { return allow_unaudited_value; }
bool require_exact() { return require_exact_value; }
int audit_writer_idle_ms() { return audit_writer_idle_ms_value; }
int verifier_timeout_ms() { return verifier_timeout_ms_value; }

}  // namespace kvg::pg::settings
