// Who may change what:
//  kvg.model           superuser (PGC_SUSET): it names a file the server opens,
//                      and weights are the trust root of every answer.
//  kvg.max_new_tokens  superuser: a hard cap an administrator sets so one
//                      call cannot monopolise a backend; callers ask for less
//                      with the max_tokens argument.
//  kvg.threads         any user, bounded 1..64 like work_mem is per session.
//  kvg.device          any user: cpu, cuda and auto (cuda when a usable GPU
//                      is present) give the same bits under the portable
//                      recipe, so the choice affects speed only.
// None is PGC_POSTMASTER, because the module is not preloaded: defining such a
// parameter outside shared_preload_libraries is FATAL.
#include "extension/src/settings.hpp"

#include "extension/src/postgres.hpp"

namespace kvg::pg::settings {

namespace {

char* model_value = nullptr;
int threads_value = 1;
int device_value = static_cast<int>(Device::Auto);
int max_new_tokens_value = 256;

const struct config_enum_entry device_options[] = {
    {"cpu", static_cast<int>(Device::Cpu), false},
    {"cuda", static_cast<int>(Device::Cuda), false},
    {"auto", static_cast<int>(Device::Auto), false},
    {nullptr, 0, false},
};

}  // namespace

void define() {
  DefineCustomStringVariable("kvg.model", "Path of the GGUF model file kvg loads.",
                             "Loaded lazily by each backend on first use and reloaded when this changes.",
                             &model_value, "", PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.threads", "CPU threads one kvg call may use.", nullptr, &threads_value, 1, 1, 64,
                          PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomEnumVariable("kvg.device", "Where the engine runs: cpu, cuda, or auto (cuda when available).",
                           nullptr, &device_value, static_cast<int>(Device::Auto), device_options, PGC_USERSET, 0,
                           nullptr, nullptr, nullptr);
  DefineCustomIntVariable("kvg.max_new_tokens", "Hard cap on the tokens one kvg call generates.", nullptr,
                          &max_new_tokens_value, 256, 1, 1 << 20, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("kvg");
}

const char* model_path() { return model_value ? model_value : ""; }
int threads() { return threads_value; }
Device device() { return static_cast<Device>(device_value); }
int max_new_tokens() { return max_new_tokens_value; }

}  // namespace kvg::pg::settings
