// The persistence module: exact counters, every flush instruction, the hook, latency emulation.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "wort/pm.h"

namespace wort::pm {
namespace {

alignas(64) char buf[64 * 16];

TEST(Pm, CountersCountExactly) {
  const Counters a = ThisThreadCounters();
  flush(buf, 1);            // 1 line
  flush(buf, 64);           // 1 line
  flush(buf, 65);           // 2 lines
  flush(buf + 63, 2);       // straddles: 2 lines
  flush(buf + 10, 0);       // nothing
  fence();
  persist(buf + 128, 200);  // 128..327: lines 2,3,4,5 -> 4 lines, 1 fence
  const Counters d = ThisThreadCounters() - a;
  EXPECT_EQ(d.lines_flushed, 1u + 1 + 2 + 2 + 4);
  EXPECT_EQ(d.fences, 2u);
  EXPECT_EQ(d.bytes_persisted, 1u + 64 + 65 + 2 + 200);
}

TEST(Pm, CountersSumOverThreadsIncludingExited) {
  ResetCounters();
  std::thread t([] {
    for (int i = 0; i < 10; ++i) persist(buf, 64);
  });
  t.join();
  for (int i = 0; i < 5; ++i) persist(buf, 128);
  const Counters c = GetCounters();
  EXPECT_EQ(c.lines_flushed, 10u + 10);
  EXPECT_EQ(c.fences, 15u);
}

TEST(Pm, EveryFlushInstructionRunsHere) {
  const FlushKind before = GetFlushKind();
  for (FlushKind k : {FlushKind::kClwb, FlushKind::kClflushopt, FlushKind::kClflush, FlushKind::kNone}) {
    if (!FlushKindSupported(k)) {
      GTEST_LOG_(INFO) << FlushKindName(k) << " not supported on this CPU";
      continue;
    }
    ASSERT_TRUE(SetFlushKind(k));
    EXPECT_EQ(GetFlushKind(), k);
    const Counters a = ThisThreadCounters();
    for (int i = 0; i < 16; ++i) buf[i * 64] = static_cast<char>(i);
    persist(buf, sizeof(buf));
    const Counters d = ThisThreadCounters() - a;
    EXPECT_EQ(d.lines_flushed, 16u) << FlushKindName(k);
    EXPECT_EQ(d.fences, 1u);
  }
  // This machine has all three (the project's reference machine); say so if not.
  EXPECT_TRUE(FlushKindSupported(FlushKind::kClflush));
  SetFlushKind(before);
}

TEST(Pm, ParseFlushKind) {
  FlushKind k;
  bool is_auto;
  EXPECT_TRUE(ParseFlushKind("clflush", &k, &is_auto));
  EXPECT_EQ(k, FlushKind::kClflush);
  EXPECT_FALSE(is_auto);
  EXPECT_TRUE(ParseFlushKind("auto", &k, &is_auto));
  EXPECT_TRUE(is_auto);
  EXPECT_EQ(k, BestFlushKind());
  EXPECT_FALSE(ParseFlushKind("clflush2", &k, &is_auto));
}

struct RecordingHook : Hook {
  std::vector<const void*> lines;
  std::vector<int> fence_lines;
  int fences = 0;
  void OnFlushLine(const void* line, const std::source_location& where) override { lines.push_back(line); }
  void OnFence(const std::source_location& where) override {
    ++fences;
    fence_lines.push_back(static_cast<int>(where.line()));
  }
};

TEST(Pm, HookSeesEveryLineAndFenceWithItsSourceLocation) {
  RecordingHook h;
  ASSERT_EQ(SetHook(&h), nullptr);
  persist(buf + 60, 10);  // two lines
  const int expected_line = __LINE__ - 1;
  fence();
  SetHook(nullptr);
  ASSERT_EQ(h.lines.size(), 2u);
  EXPECT_EQ(h.lines[0], buf);
  EXPECT_EQ(h.lines[1], buf + 64);
  EXPECT_EQ(h.fences, 2);
  EXPECT_EQ(h.fence_lines[0], expected_line);
}

TEST(Pm, WriteLatencyIsAddedPerFlushedLine) {
  SetWriteLatencyNs(2000);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) flush(buf, 64);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  SetWriteLatencyNs(0);
  EXPECT_EQ(GetWriteLatencyNs(), 0u);
  EXPECT_GE(us, 500 * 2.0 * 0.9);  // at least ~2 us per line
}

}  // namespace
}  // namespace wort::pm
