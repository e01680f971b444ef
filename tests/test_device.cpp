// engine/device.hpp: what the extension and the CLI report as "the device"
// must be what a Session really does with the same request.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/device.hpp"
#include "engine/session.hpp"
#include "engine/synth_model.hpp"
#include "tests/synth_fixture.hpp"

namespace kvg {
namespace {

std::shared_ptr<const Model> tiny_model() {
  static std::shared_ptr<const Model> model = test::load_synth(test::tiny_synth_options(), "device");
  return model;
}

TEST(Device, NamesRoundTrip) {
  for (Device d : {Device::Cpu, Device::Cuda, Device::Auto}) EXPECT_EQ(parse_device(device_name(d)), d);
  EXPECT_FALSE(parse_device("gpu"));
  EXPECT_FALSE(parse_device("CPU"));
}

TEST(Device, CpuIsAlwaysCompiledAndAvailable) {
  EXPECT_TRUE(device_compiled(Device::Cpu));
  EXPECT_TRUE(device_available(Device::Cpu));
  const DeviceChoice choice = resolve_device(Device::Cpu);
  EXPECT_EQ(choice.runs_on, Device::Cpu);
  EXPECT_EQ(choice.detail, "");
}

TEST(Device, CudaIsUsableOnlyWhenCompiledAndPresent) {
  std::string why;
  const bool available = device_available(Device::Cuda, &why);
  EXPECT_FALSE(why.empty());  // the GPU's name, or why there is none
  if (!device_compiled(Device::Cuda)) {
    EXPECT_FALSE(available);
  }
  const DeviceChoice cuda = resolve_device(Device::Cuda);
  EXPECT_EQ(cuda.runs_on.has_value(), available);
  if (available) {
    EXPECT_EQ(*cuda.runs_on, Device::Cuda);
  }
  EXPECT_EQ(cuda.detail, why);
  // auto never refuses: the GPU when usable, else the CPU.
  EXPECT_EQ(resolve_device(Device::Auto).runs_on, available ? Device::Cuda : Device::Cpu);
}

// The report and the behaviour agree: a Session refuses exactly the requests
// resolve_device refuses, with its reason.
TEST(Device, SessionFollowsTheResolution) {
  for (Device requested : {Device::Cpu, Device::Cuda, Device::Auto}) {
    SCOPED_TRACE(device_name(requested));
    const DeviceChoice choice = resolve_device(requested);
    EngineOptions options;
    options.device = requested;
    try {
      Session session(tiny_model(), options);
      EXPECT_TRUE(choice.runs_on.has_value()) << "a session ran where resolve_device said it would be refused";
    } catch (const Error& e) {
      EXPECT_FALSE(choice.runs_on.has_value()) << e.what();
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find(choice.detail), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvg
