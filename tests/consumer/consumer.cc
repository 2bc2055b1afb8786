// A program that uses wort the way a user outside this repository does: only the installed
// public headers (wort/...) and the library. Built three ways by the consumer tests
// (cmake/consumer_tests.cmake): find_package(wort) against an installed prefix, the same prefix
// through pkg-config, and add_subdirectory(wort). Creates a pool, a WORT index with keys over the
// full byte range (the empty key, 0x00, >= 0x80, a key and its prefix), reopens it and checks
// every key and the order of a scan. Exit 0 on success, 1 with a message otherwise.
// Usage: wort_consumer [pool path] (default /dev/shm/wort-consumer-<pid>.pool).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "wort/index.h"
#include "wort/pool.h"
#if __has_include("wort/version.h")
#include "wort/version.h"
#endif

static int Fail(const char* what, const wort::Status& s) {
  std::fprintf(stderr, "wort_consumer: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "/dev/shm/wort-consumer-" + std::to_string(::getpid()) + ".pool";
  ::unlink(path.c_str());
  const std::map<std::string, uint64_t> want = {
      {std::string(), 1}, {std::string(1, '\0'), 2}, {std::string("\x00\x01", 2), 3}, {"\x7f", 4},
      {"\x80", 5},        {"\xff\xff", 6},           {"key", 7},                        {"key-longer", 8}};
  wort::PoolOptions po;
  po.initial_size = 8ull << 20;
  po.max_size = 256ull << 20;
  {
    std::unique_ptr<wort::Pool> pool;
    wort::Status s = wort::Pool::Create(path, po, &pool);
    if (!s.ok()) return Fail("create pool", s);
    std::unique_ptr<wort::Index> idx;
    if (!(s = wort::CreateIndex(*pool, "data", "wort", wort::IndexOptions{}, &idx)).ok()) return Fail("create index", s);
    for (const auto& [k, v] : want)
      if (!(s = idx->Insert(k, v)).ok()) return Fail("insert", s);
    if (!(s = pool->Close()).ok()) return Fail("close", s);
  }
  std::unique_ptr<wort::Pool> pool;
  wort::Status s = wort::Pool::Open(path, po, &pool);
  if (!s.ok()) return Fail("reopen pool", s);
  std::unique_ptr<wort::Index> idx;
  if (!(s = wort::OpenIndex(*pool, "data", &idx)).ok()) return Fail("open index", s);
  std::map<std::string, uint64_t> got;
  s = idx->Scan("", nullptr, 100, [&](std::string_view k, uint64_t v) {
    got.emplace(std::string(k), v);
    return true;
  });
  if (!s.ok()) return Fail("scan", s);
  if (got != want) return Fail("scan after reopen differs from what was written", wort::Status::OK());
  if (!(s = pool->Close()).ok()) return Fail("close", s);
  ::unlink(path.c_str());
#ifdef WORT_VERSION_STRING
  std::printf("wort %s: %zu keys written, reopened and scanned\n", wort::Version(), got.size());
#else
  std::printf("wort: %zu keys written, reopened and scanned\n", got.size());
#endif
  return 0;
}
