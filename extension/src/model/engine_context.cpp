#include "extension/src/model/engine_context.hpp"

#include <string>

#include "common/error.hpp"
#include "extension/src/model/model_fingerprints.hpp"
#include "extension/src/model/model_settings.hpp"

namespace kvg::pg {

namespace {

using model_fingerprints::FileIdentity;
using model_fingerprints::HeldModel;
using model_fingerprints::identify;

struct LoadedModel {
  std::string path;
  HeldModel held;
};

LoadedModel loaded;  // one per backend

}  // namespace

std::shared_ptr<const Model> current_model(ModelUse use) {
  const std::string path = settings::model_path_after_reload();
  if (path.empty())
    throw Error(ErrorCode::InvalidArgument,
                "kvg.model is not set: a superuser must set it to the path of a GGUF model file "
                "(SET kvg.model = '/path/model.gguf', or in postgresql.conf)");
  const FileIdentity identity = identify(path);
  const std::shared_ptr<const Model>& model = loaded.held.model;
  // A mapping cut under an earlier call holds zeros now: map the file again
  // even if it was restored to the same size and time.
  if (!model || loaded.path != path || !(loaded.held.file == identity) || !model->weights_intact() ||
      (use == ModelUse::Compute && !model->has_weights())) {
    loaded = {};  // drop the old mapping before mapping the new file
    loaded = {path, model_fingerprints::load_held(path, use)};
  }
  return loaded.held.model;
}

std::optional<HeldModelFile> held_file_of(const Model& model) {
  if (loaded.held.model.get() != &model || loaded.held.held->fd() < 0) return std::nullopt;
  return HeldModelFile{loaded.held.file, loaded.held.held->fd()};
}

EngineOptions current_engine_options() {
  EngineOptions options;
  options.threads = settings::threads();
  options.small_passes_inline = true;  // engine/pass_threads.hpp
  options.max_kv_bytes = settings::max_kv_bytes();
  options.context_limit = settings::max_context();
  options.kv_limit_name = "kvg.max_kv_memory";
  options.device = settings::device();
  options.recipe = settings::recipe();
  options.gpu_staging_bytes = settings::gpu_staging_bytes() / CudaForward::kStagingBuffers;
  return options;
}

DeviceChoice current_device() { return resolve_device(current_engine_options().device); }

}  // namespace kvg::pg
