#include <cstdio>
#include <string>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"

namespace kvg::cli {

int cmd_info(const Args& args) {
  auto model = load_model(args);
  const ModelConfig& c = model->config();
  // Where an engine command with the same --device would really run; none
  // when it would be refused (cuda without a usable GPU).
  const DeviceChoice device = resolve_device(device_flag(args));
  const char* runs_on = device.runs_on ? device_name(*device.runs_on) : nullptr;
  const std::string recipe = parse_recipe(args.opt("recipe").value_or(kDefaultRecipe.name())).name();
  if (args.has("json")) {
    std::printf(
        "{\"architecture\":\"%s\",\"name\":\"%s\",\"layers\":%d,\"embedding\":%d,\"heads\":%d,\"kv_heads\":%d,"
        "\"head_dim\":%d,\"feed_forward\":%d,\"vocabulary\":%d,\"context_length\":%d,\"rope_dim\":%d,"
        "\"rope_base\":%.17g,\"norm_eps\":%.9g,\"tied_output\":%s,\"parameters\":%llu,\"weight_bytes\":%llu,"
        "\"recipe\":\"%s\",\"fingerprint\":\"%s\",\"device\":%s,\"device_detail\":\"%s\"}\n",
        json_escape(c.architecture).c_str(), json_escape(c.name).c_str(), c.n_layer, c.n_embd, c.n_head,
        c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab, c.n_ctx, c.rope_dim, c.rope_base, double(c.norm_eps),
        c.tied_output ? "true" : "false", (unsigned long long)model->parameter_count(),
        (unsigned long long)model->weight_bytes(), recipe.c_str(), model->fingerprint_hex().c_str(),
        runs_on ? ("\"" + std::string(runs_on) + "\"").c_str() : "null", json_escape(device.detail).c_str());
    return 0;
  }
  std::printf("architecture    %s\n", c.architecture.c_str());
  std::printf("name            %s\n", c.name.c_str());
  std::printf("layers          %d\n", c.n_layer);
  std::printf("embedding       %d\n", c.n_embd);
  std::printf("heads           %d\n", c.n_head);
  std::printf("kv heads        %d\n", c.n_head_kv);
  std::printf("head dim        %d\n", c.head_dim);
  std::printf("feed forward    %d\n", c.n_ff);
  std::printf("vocabulary      %d\n", c.n_vocab);
  std::printf("context length  %d\n", c.n_ctx);
  std::printf("rope            dim %d, base %g%s%s\n", c.rope_dim, c.rope_base,
              c.rope_freq_factors.empty() ? "" : ", Llama 3.1 frequency factors",
              c.rope_freq_scale != 1.0 ? (", linear scale " + std::to_string(c.rope_freq_scale)).c_str() : "");
  if (c.sliding_window > 0)
    std::printf("sliding window  %d positions (%s)\n", c.sliding_window,
                c.sliding_period <= 1 ? "every layer"
                                      : (std::to_string(c.sliding_period - 1) + " layers of " +
                                         std::to_string(c.sliding_period)).c_str());
  if (c.attn_softcap > 0 || c.final_softcap > 0)
    std::printf("soft-capping    attention %g, final %g\n", double(c.attn_softcap), double(c.final_softcap));
  std::printf("output head     %s\n", c.tied_output ? "tied to token_embd" : "separate");
  std::printf("parameters      %llu (%llu bytes)\n", (unsigned long long)model->parameter_count(),
              (unsigned long long)model->weight_bytes());
  std::printf("recipe          %s (computed: %s)\n", recipe.c_str(), known_recipe_names().c_str());
  std::printf("fingerprint     %s\n", model->fingerprint_hex().c_str());
  std::printf("device          %s%s%s%s\n", runs_on ? runs_on : "none: engine commands are refused",
              device.detail.empty() ? "" : " (", device.detail.c_str(), device.detail.empty() ? "" : ")");
  return 0;
}

}  // namespace kvg::cli
