// cli/progress_line.cpp: the progress line is throttled, says done/total, rate
// and time left, and stays silent when disabled (stderr not a terminal).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cli/progress_line.hpp"
#include "engine/session.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg::cli {
namespace {

// The text a ProgressLine wrote, through open_memstream.
struct Captured {
  char* data = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&data, &size);
  ~Captured() { std::free(data); }
  std::string text() {
    std::fflush(f);
    return std::string(data, size);
  }
};

TEST(ProgressLine, DisabledWritesNothing) {
  Captured out;
  double t = 0;
  {
    ProgressLine p("x", "tokens", 1, out.f, false, [&] { return t; });
    for (int i = 0; i <= 100; ++i, t += 1) p.update(i, 100);
    EXPECT_EQ(p.redraws(), 0);
  }
  EXPECT_EQ(out.text(), "");
  std::fclose(out.f);
}

TEST(ProgressLine, RedrawsAtMostTenTimesASecond) {
  Captured out;
  double t = 0;
  ProgressLine p("x", "tokens", 1, out.f, true, [&] { return t; });
  for (int i = 0; i < 1000; ++i, t += 0.01) p.update(i, 1000);  // 10 s of updates, 100 per second
  EXPECT_LE(p.redraws(), 101);
  EXPECT_GE(p.redraws(), 90);
  p.update(1000, 1000);  // the end is always drawn
  EXPECT_NE(out.text().rfind("1000/1000 tokens (100%)"), std::string::npos);
  std::fclose(out.f);
}

TEST(ProgressLine, SaysDoneTotalRateAndTimeLeft) {
  Captured out;
  double t = 100;
  ProgressLine p("capture: prefill", "tokens", 1, out.f, true, [&] { return t; });
  p.update(0, 100);
  t += 5;
  p.update(50, 100);
  const std::string text = out.text();
  EXPECT_NE(text.find("\rcapture: prefill: 50/100 tokens (50%), 10.0 tokens/s, 5s left\033[K"), std::string::npos)
      << text;
  p.clear();
  EXPECT_EQ(out.text().substr(out.text().size() - 4), "\r\033[K");
  std::fclose(out.f);
}

TEST(ProgressLine, ScaledUnits) {
  Captured out;
  double t = 0;
  ProgressLine p("synth", "MB", 1e6, out.f, true, [&] { return t; });
  p.update(0, 4000000);
  t += 1;
  p.update(2000000, 4000000);
  EXPECT_NE(out.text().find("synth: 2.0/4.0 MB (50%), 2.0 MB/s, 1s left"), std::string::npos) << out.text();
  std::fclose(out.f);
}

// The engine's side: what it reports, and that reporting changes no bit.
TEST(EngineProgress, PrefillReportsEachChunkAndSynthReportsBytes) {
  const SynthOptions o = test::tiny_synth_options();
  const std::string path = test::temp_dir("progress") + "/model.gguf";
  std::vector<std::pair<int64_t, int64_t>> bytes;
  write_synth_model(o, path, [&](int64_t done, int64_t total) { bytes.emplace_back(done, total); });
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(bytes.front().first, 0);
  EXPECT_EQ(bytes.back().first, bytes.back().second);
  for (size_t i = 1; i < bytes.size(); ++i) EXPECT_GE(bytes[i].first, bytes[i - 1].first);

  const auto model = Model::load(path);
  std::vector<int32_t> tokens(20);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + i);
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::vector<float> chunked, whole;
  Session(model, EngineOptions{})
      .prefill(tokens, 7, LogitsFor::All, &chunked, {}, [&](int64_t d, int64_t t) { seen.emplace_back(d, t); });
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 20}, {7, 20}, {14, 20}, {20, 20}};
  EXPECT_EQ(seen, want);
  Session(model, EngineOptions{}).prefill(tokens, 0, LogitsFor::All, &whole);
  EXPECT_EQ(chunked, whole);
}

}  // namespace
}  // namespace kvg::cli
