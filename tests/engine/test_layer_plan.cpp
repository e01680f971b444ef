// The layer plan (engine/layer_plan.hpp): every ModelConfig field is either
// a shape the executors size their work by, a fact of the loader, or
// something plan_for() turns into a step (which every executor runs: each
// static_asserts runs_every_entry over the plan's members, and
// tests/compile_fail proves a new entry breaks both until handled). A new
// ModelConfig field fails
// EveryModelConfigFieldHasARole until it is given one here, and a field
// listed as computed that changes no plan fails ChangesThePlan.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "engine/layer_plan.hpp"
#include "engine/model_config.hpp"

namespace kvg {
namespace {

// Four layers, 64 wide, GQA, no family's extras.
ModelConfig base_config() {
  ModelConfig c;
  c.architecture = "llama";
  c.n_layer = 4, c.n_embd = 64, c.n_ff = 128;
  c.n_head = 4, c.n_head_kv = 2, c.head_dim = 16, c.rope_dim = 16, c.attn_scale = 0.25f;
  c.n_vocab = 300, c.n_ctx = 256;
  return c;
}

// A computed field: `prepare` sets what it depends on (in the base and the
// changed config alike), `change` sets the field itself.
struct Computed {
  const char* field;
  std::function<void(ModelConfig&)> prepare, change;
};

const std::vector<Computed>& computed_fields() {
  auto none = [](ModelConfig&) {};
  auto sliding = [](ModelConfig& c) {
    c.sliding_window = 8;
    c.sliding_period = 2;
  };
  auto starcoder = [](ModelConfig& c) {
    c.layer_norm = true;
    c.gated_ffn = false;
  };
  static const std::vector<Computed> fields = {
      {"n_layer", none, [](ModelConfig& c) { c.n_layer = 5; }},
      {"n_embd", [](ModelConfig& c) { c.embed_scale = true; }, [](ModelConfig& c) { c.n_embd = 32; }},
      {"rope_dim", none, [](ModelConfig& c) { c.rope_dim = 8; }},
      {"rope_base", none, [](ModelConfig& c) { c.rope_base = 500000.0; }},
      {"rope_style", none, [](ModelConfig& c) { c.rope_style = RopeStyle::SplitHalves; }},
      {"norm_eps", none, [](ModelConfig& c) { c.norm_eps = 1e-6f; }},
      {"qkv_bias", none, [](ModelConfig& c) { c.qkv_bias = true; }},
      {"rope_freq_factors", none, [](ModelConfig& c) { c.rope_freq_factors.assign(8, 2.0f); }},
      {"rope_freq_scale", none, [](ModelConfig& c) { c.rope_freq_scale = 0.25; }},
      {"rope_base_local", sliding, [](ModelConfig& c) { c.rope_base_local = 10000.0; }},
      {"layer_norm", none, starcoder},
      {"gated_ffn", none, starcoder},
      {"embed_scale", none, [](ModelConfig& c) { c.embed_scale = true; }},
      {"qk_norm", none, [](ModelConfig& c) { c.qk_norm = true; }},
      {"post_norms", none, [](ModelConfig& c) { c.post_norms = true; }},
      {"ffn_activation", none, [](ModelConfig& c) { c.ffn_activation = FfnActivation::GeluTanh; }},
      {"attn_scale", none, [](ModelConfig& c) { c.attn_scale = 0.125f; }},
      {"attn_softcap", none, [](ModelConfig& c) { c.attn_softcap = 50.0f; }},
      {"final_softcap", none, [](ModelConfig& c) { c.final_softcap = 30.0f; }},
      {"sliding_window", none, sliding},
      {"sliding_period", sliding, [](ModelConfig& c) { c.sliding_period = 3; }},
  };
  return fields;
}

// Shapes every executor sizes its buffers and loops by, and facts of the
// loader or of the file: not steps.
const std::set<std::string> kNotSteps = {"architecture", "name",    "n_head", "n_head_kv", "head_dim",
                                         "n_ff",         "n_vocab", "n_ctx",  "tied_output"};

// The data members of struct ModelConfig, read from its header.
std::set<std::string> model_config_fields() {
  std::ifstream in(std::string(KVG_SOURCE_DIR) + "/engine/model_config.hpp");
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();
  const size_t begin = source.find("struct ModelConfig {");
  const size_t end = source.find("\n};", begin);
  std::set<std::string> fields;
  if (begin == std::string::npos || end == std::string::npos) return fields;
  std::istringstream body(source.substr(begin, end - begin));
  const std::regex member(R"(^\s+[A-Za-z_][\w:<>, ]*\s+([a-z_][a-z_0-9]*)\s*(=[^;(]*)?;)");
  std::smatch m;
  for (std::string line; std::getline(body, line);)
    if (std::regex_search(line, m, member)) fields.insert(m[1]);
  return fields;
}

TEST(LayerPlan, EveryModelConfigFieldHasARole) {
  const std::set<std::string> fields = model_config_fields();
  ASSERT_GT(fields.size(), 20u) << "engine/model_config.hpp was not read";
  std::set<std::string> roles = kNotSteps;
  for (const Computed& f : computed_fields()) roles.insert(f.field);
  for (const std::string& field : fields)
    EXPECT_TRUE(roles.count(field)) << "ModelConfig::" << field
                                    << " is neither computed by the plan nor listed as a shape here";
  for (const std::string& role : roles) EXPECT_TRUE(fields.count(role)) << role << " is no longer a ModelConfig field";
}

TEST(LayerPlan, EveryComputedFieldChangesThePlan) {
  for (const Computed& f : computed_fields()) {
    ModelConfig base = base_config();
    f.prepare(base);
    ModelConfig changed = base;
    f.change(changed);
    EXPECT_NE(plan_for(base), plan_for(changed)) << f.field << " changes no step of the plan";
  }
}

TEST(LayerPlan, LayersFollowTheSlidingPattern) {
  ModelConfig c = base_config();
  c.sliding_window = 8;
  c.sliding_period = 2;
  c.rope_base_local = 10000.0;
  c.rope_base = 1000000.0;
  const ForwardPlan plan = plan_for(c);
  ASSERT_EQ(plan.layers.size(), 4u);
  for (int l = 0; l < 4; ++l) {
    const bool slides = l % 2 == 0;
    EXPECT_EQ(plan.layers[size_t(l)].window, slides ? 8 : 0) << l;
    EXPECT_EQ(plan.layers[size_t(l)].local_rope, slides) << l;
  }
  EXPECT_EQ(plan.rope_local.base, 10000.0);
  EXPECT_EQ(plan.rope.base, 1000000.0);
  // Without a local base, sliding layers rotate like the others.
  c.rope_base_local = 0.0;
  for (const LayerPlan& l : plan_for(c).layers) EXPECT_FALSE(l.local_rope);
}

TEST(LayerPlan, MixesNoExecutorRunsAreRefusedByName) {
  ModelConfig c = base_config();
  c.layer_norm = true;  // with the gated FFN
  try {
    (void)plan_for(c);
    FAIL() << "LayerNorm with a gated FFN was planned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("LayerNorm with a gated FFN"), std::string::npos) << e.what();
  }
  c = base_config();
  c.gated_ffn = false;
  EXPECT_THROW((void)plan_for(c), Error);
}

}  // namespace
}  // namespace kvg
