// Driver for one peer index (scripts/peers.sh builds it once per peer, outside the repository,
// against the peer's own source: nothing of the peers is kept in wort). It reads the key file
// that `wort bench --keys-out` writes (src/bench/bench.h: WriteKeyFile), inserts the keys in
// their order (value = position + 1, as `wort bench`), looks every key up in the search phase's
// order, checks each value, and prints one JSON line: CPU ns per insert and per lookup (this
// thread's CPU time, as `wort bench`'s cpu_ns_per_op), wall ns, and the number of wrong lookups.
//
// An optional second argument PAD adds, after each lookup, PAD iterations of two register adds
// that touch no memory (about 4 * PAD instructions): an experiment on how the time of lookups at
// millions of keys depends on the instructions between them (doc/concurrency.md, "The read path,
// 2026-11-25 (night)"). Without it nothing is added.
//
// With WORT_PERF_CTL (and WORT_PERF_ACK) in the environment, the insert loop, or the lookup loop
// if WORT_PERF_PHASE=search, is bracketed by "enable" / "disable" on perf's control fifo, as
// `wort bench` does (src/bench/bench.cc, PerfWindow; scripts/insert_perf.sh).
//
// P-ART (RECIPE, the ROART paper's baseline; PEER_PART) also runs a scan phase when a third
// argument SCAN_LEN is given: the first min(N, 10000) keys of the search order start one range
// query each (P-ART's lookupRange, up to SCAN_LEN keys, end key = the largest 8-byte key), timed
// like the other phases, reported as scan_cpu_ns per query and scan_keys (keys returned per query).
// P-ART's inserts include creating its leaf (Key::make_leaf, as in RECIPE's own example).
//
// Exactly one of PEER_LIBART, PEER_WORT, PEER_WOART, PEER_CCEH, PEER_FASTFAIR, PEER_PART is
// defined.
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#if defined(PEER_LIBART)
extern "C" {
#include "art.h"
}
#define PEER_NAME "libart"
#elif defined(PEER_WORT)
#include "wort.h"  // declares extern "C" itself
#define PEER_NAME "WORT"
#elif defined(PEER_WOART)
#include "woart.h"
#define PEER_NAME "WOART"
#elif defined(PEER_CCEH)
#include "src/CCEH.h"
#define PEER_NAME "CCEH"
#elif defined(PEER_FASTFAIR)
#include "btree.h"
#define PEER_NAME "FAST_FAIR"
#elif defined(PEER_PART)
#include "Tree.h"
#define PEER_NAME "P-ART"
#else
#error "define one PEER_*"
#endif

namespace {

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

volatile uint64_t g_sink;  // PAD's result goes here, so that the adds are kept

void BigEndian(uint64_t k, unsigned char out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(k >> (56 - 8 * i));
}

// perf's control fifo (see the top of the file): "enable" / "disable", each answered by "ack".
struct PerfWindow {
  FILE* ctl = nullptr;
  FILE* ack = nullptr;
  explicit PerfWindow(const char* phase) {
    const char* c = std::getenv("WORT_PERF_CTL");
    const char* want = std::getenv("WORT_PERF_PHASE");
    if (!c || !*c || std::strcmp(want && *want ? want : "insert", phase) != 0) return;
    ctl = std::fopen(c, "w");
    if (const char* a = std::getenv("WORT_PERF_ACK"); a && *a) ack = std::fopen(a, "r");
    Send("enable");
  }
  PerfWindow(const PerfWindow&) = delete;
  PerfWindow& operator=(const PerfWindow&) = delete;
  ~PerfWindow() {
    Send("disable");
    if (ctl) std::fclose(ctl);
    if (ack) std::fclose(ack);
  }
  void Send(const char* cmd) {
    if (!ctl) return;
    std::fprintf(ctl, "%s\n", cmd);
    std::fflush(ctl);
    char line[16];
    if (ack && !std::fgets(line, sizeof line, ack)) {
      std::fclose(ack);
      ack = nullptr;
    }
  }
};

}  // namespace

#if defined(PEER_PART)
void PartLoadKey(TID, Key&) {}  // never needed: P-ART's leaves hold their whole key
#endif

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s KEYFILE [PAD [SCAN_LEN]]   (KEYFILE: written by wort bench --keys-out)\n", argv[0]);
    return 2;
  }
  const long scan_len = argc == 4 ? std::strtol(argv[3], nullptr, 10) : 0;
  const long pad = argc == 3 ? std::strtol(argv[2], nullptr, 10) : 0;
  FILE* f = std::fopen(argv[1], "rb");
  char magic[8];
  uint64_t n = 0;
  if (!f || std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "WORTKEYS", 8) != 0 || std::fread(&n, 8, 1, f) != 1) {
    std::fprintf(stderr, "%s: not a wort key file: %s\n", argv[0], argv[1]);
    return 2;
  }
  std::vector<uint64_t> keys(n);
  std::vector<uint32_t> order(n);
  if (std::fread(keys.data(), 8, n, f) != n || std::fread(order.data(), 4, n, f) != n) {
    std::fprintf(stderr, "%s: truncated key file: %s\n", argv[0], argv[1]);
    return 2;
  }
  std::fclose(f);

#if defined(PEER_LIBART)
  // libart takes byte strings: the 8-byte big-endian encoding wort uses.
  std::vector<unsigned char> enc(n * 8);
  for (uint64_t i = 0; i < n; ++i) BigEndian(keys[i], &enc[i * 8]);
  art_tree t;
  art_tree_init(&t);
  auto insert = [&](uint64_t i) { art_insert(&t, &enc[i * 8], 8, reinterpret_cast<void*>(i + 1)); };
  auto lookup = [&](uint64_t i) { return reinterpret_cast<uintptr_t>(art_search(&t, &enc[i * 8], 8)); };
#elif defined(PEER_WORT) || defined(PEER_WOART)
  art_tree t;
  art_tree_init(&t);
  auto insert = [&](uint64_t i) { art_insert(&t, keys[i], sizeof(uint64_t), reinterpret_cast<void*>(i + 1)); };
  auto lookup = [&](uint64_t i) { return reinterpret_cast<uintptr_t>(art_search(&t, keys[i], sizeof(uint64_t))); };
#elif defined(PEER_CCEH)
  // The authors' test: CCEH(initialTableSize / Segment::kNumSlot) with initialTableSize = 16K.
  Hash* t = new CCEH(16 * 1024 / Segment::kNumSlot);
  auto insert = [&](uint64_t i) {
    Key_t k = keys[i];
    t->Insert(k, reinterpret_cast<Value_t>(i + 1));
  };
  auto lookup = [&](uint64_t i) {
    Key_t k = keys[i];
    return reinterpret_cast<uintptr_t>(t->Get(k));
  };
#elif defined(PEER_FASTFAIR)
  btree* t = new btree();
  auto insert = [&](uint64_t i) { t->btree_insert(static_cast<entry_key_t>(keys[i]), reinterpret_cast<char*>(i + 1)); };
  auto lookup = [&](uint64_t i) { return reinterpret_cast<uintptr_t>(t->btree_search(static_cast<entry_key_t>(keys[i]))); };
#elif defined(PEER_PART)
  // 8-byte keys, stored big-endian by Key::make_leaf (so byte order is key order); the value is
  // kept in the leaf and returned by lookup as a pointer to it.
  ART_ROWEX::Tree t(PartLoadKey);
  auto ti = t.getThreadInfo();
  std::vector<Key*> leaf(n);
  auto insert = [&](uint64_t i) {
    leaf[i] = leaf[i]->make_leaf(keys[i], sizeof(uint64_t), i + 1);
    t.insert(leaf[i], ti);
  };
  auto lookup = [&](uint64_t i) {
    auto* v = static_cast<uint64_t*>(t.lookup(leaf[i], ti));
    return v ? static_cast<uintptr_t>(*v) : uintptr_t(0);
  };
#endif

  auto w0 = std::chrono::steady_clock::now();
  double c0 = CpuSeconds();
  {
    PerfWindow perf("insert");
    for (uint64_t i = 0; i < n; ++i) insert(i);
  }
  const double insert_cpu = CpuSeconds() - c0;
  const double insert_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();

  uint64_t wrong = 0;
  w0 = std::chrono::steady_clock::now();
  c0 = CpuSeconds();
  std::optional<PerfWindow> perf_search(std::in_place, "search");
  for (uint64_t j = 0; j < n; ++j) {
    const uint32_t i = order[j];
    wrong += lookup(i) != i + 1;
    if (pad > 0) {
      uint64_t a = j, b = j + 1;
      for (long q = 0; q < pad; ++q) {
        asm volatile("add %1, %0" : "+r"(a) : "r"(b));
        asm volatile("add %1, %0" : "+r"(b) : "r"(a));
      }
      g_sink = a;  // keeps the adds
    }
  }
  perf_search.reset();
  const double lookup_cpu = CpuSeconds() - c0;
  const double lookup_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  std::string scan_json;
#if defined(PEER_PART)
  if (scan_len > 0 && n > 0) {
    const uint64_t scans = n < 10000 ? n : 10000;
    std::vector<Key*> result(static_cast<size_t>(scan_len));
    Key* end = end->make_leaf(~uint64_t(0), sizeof(uint64_t), 0);
    Key* cont = cont->make_leaf(uint64_t(0), sizeof(uint64_t), 0);
    uint64_t got = 0, sum = 0;
    w0 = std::chrono::steady_clock::now();
    c0 = CpuSeconds();
    for (uint64_t j = 0; j < scans; ++j) {
      size_t found = 0;
      t.lookupRange(leaf[order[j]], end, cont, result.data(), result.size(), found, ti);
      got += found;
      for (size_t q = 0; q < found; ++q) sum += result[q]->value;  // reads each leaf, as a scan's user would
    }
    const double scan_cpu = CpuSeconds() - c0;
    const double scan_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    g_sink = sum;
    char buf[256];
    std::snprintf(buf, sizeof buf, ",\"scan_len\":%ld,\"scans\":%llu,\"scan_keys\":%.2f,\"scan_cpu_ns\":%.1f,\"scan_ns\":%.1f",
                  scan_len, static_cast<unsigned long long>(scans), double(got) / scans, scan_cpu * 1e9 / scans,
                  scan_wall * 1e9 / scans);
    scan_json = buf;
  }
#else
  (void)scan_len;
#endif
  std::printf(
      "{\"bench\":\"peer\",\"peer\":\"%s\",\"keys\":%llu,\"insert_cpu_ns\":%.1f,\"insert_ns\":%.1f,"
      "\"lookup_cpu_ns\":%.1f,\"lookup_ns\":%.1f,\"errors\":%llu%s}\n",
      PEER_NAME, static_cast<unsigned long long>(n), insert_cpu * 1e9 / n, insert_wall * 1e9 / n, lookup_cpu * 1e9 / n,
      lookup_wall * 1e9 / n, static_cast<unsigned long long>(wrong), scan_json.c_str());
  return wrong ? 1 : 0;
}
