// Linked against the static library libwort.a alone (target wort_static): every index kind is in
// the program - the kinds are listed in one table, not registered by static initialisation, so
// the linker cannot drop one. For each kind: create it in a pool, write keys over the full byte
// range of 8-byte keys, close the pool, reopen it and read them back (the volatile kinds, which
// keep nothing across a close, must come back empty). Exit 0 when all of it holds, 1 otherwise.
// Usage: wort_static_kinds [pool path] (default /dev/shm/wort-static-kinds-<pid>.pool).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "wort/index.h"
#include "wort/pool.h"

namespace {
int failures = 0;
void Fail(const std::string& what, const wort::Status& s) {
  std::fprintf(stderr, "FAIL %s: %s\n", what.c_str(), s.ToString().c_str());
  ++failures;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : "/dev/shm/wort-static-kinds-" + std::to_string(::getpid()) + ".pool";
  ::unlink(path.c_str());
  // The kinds of this release; a kind added later must be here too (and in the table).
  const std::set<std::string> expected = {"b3tree", "fastfair", "fptree", "nvtree", "wbtree", "wbtree-slot",
                                          "cceh",   "cceh-cow", "linp",   "cuck",   "bch",    "levl",
                                          "path",   "artcow",   "woart",  "roart",  "wort",   "vart",   "vbptree",
                                          "vradix"};
  std::set<std::string> linked;
  for (const wort::IndexKind* k : wort::IndexKinds()) linked.insert(k->name);
  for (const std::string& n : expected)
    if (!linked.count(n)) Fail("kind " + n + " is not in the statically linked program", wort::Status::OK());

  const std::vector<uint64_t> keys = {0, 1, 0x7f, 0x80, 0xff, 0x0100, 0x8000000000000000ull, 0xffffffffffffffffull};
  wort::PoolOptions po;
  po.initial_size = 64ull << 20;
  po.max_size = 1ull << 30;
  {
    std::unique_ptr<wort::Pool> pool;
    wort::Status s = wort::Pool::Create(path, po, &pool);
    if (!s.ok()) return Fail("create pool " + path, s), 1;
    for (const wort::IndexKind* k : wort::IndexKinds()) {
      wort::IndexOptions io;
      io.key_type = wort::KeyType::kU64;
      std::unique_ptr<wort::Index> idx;
      if (!(s = wort::CreateIndex(*pool, k->name, k->name, io, &idx)).ok()) {
        Fail(std::string("create ") + k->name, s);
        continue;
      }
      for (uint64_t key : keys)
        if (!(s = idx->Insert(key, key ^ 0x5a5a)).ok()) Fail(std::string("insert into ") + k->name, s);
      if (idx->Size() != keys.size()) Fail(std::string("size of ") + k->name, wort::Status::OK());
    }
    if (!(s = pool->Close()).ok()) Fail("close", s);
  }
  {
    std::unique_ptr<wort::Pool> pool;
    wort::Status s = wort::Pool::Open(path, po, &pool);
    if (!s.ok()) return Fail("reopen pool", s), 1;
    for (const wort::IndexKind* k : wort::IndexKinds()) {
      std::unique_ptr<wort::Index> idx;
      if (!(s = wort::OpenIndex(*pool, k->name, &idx)).ok()) {
        Fail(std::string("open ") + k->name, s);
        continue;
      }
      const bool is_volatile = k->name[0] == 'v';
      if (is_volatile) {
        if (idx->Size() != 0) Fail(std::string(k->name) + " (volatile) kept keys across a close", wort::Status::OK());
        continue;
      }
      for (uint64_t key : keys) {
        uint64_t v = 0;
        if (!(s = idx->Lookup(key, &v)).ok() || v != (key ^ 0x5a5a))
          Fail(std::string("lookup in ") + k->name + " after reopen", s);
      }
    }
    if (!(s = pool->Close()).ok()) Fail("close", s);
  }
  ::unlink(path.c_str());
  std::printf("%zu kinds linked statically, %d failures\n", linked.size(), failures);
  return failures == 0 ? 0 : 1;
}
