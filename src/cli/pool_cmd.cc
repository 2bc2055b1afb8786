// `wort pool create|info|check`.
#include <fmt/core.h>

#include <memory>
#include <unordered_set>

#include "cli/command.h"
#include "cli/options.h"
#include "index/kind_ids.h"
#include "index/radix/roart.h"
#include "knn/internal.h"
#include "kv/batch_log.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/kv.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::cli {
namespace {

[[noreturn]] void Fail(const Status& s) { cli::Fail("wort pool", s); }

void AddPool(CLI::App& app) {
  auto* pool = app.add_subcommand("pool", "Create, inspect and check pool files");
  pool->require_subcommand(1);

  struct CreateOpts {
    std::string path;
    uint64_t initial_size = PoolOptions{}.initial_size, max_size = PoolOptions{}.max_size;
  };
  auto co = std::make_shared<CreateOpts>();
  auto* create = pool->add_subcommand("create", "Create a new pool file");
  create->add_option("path", co->path, "Pool file (e.g. /dev/shm/my.pool)")->required();
  AddSizeOption(create, "--initial-size", &co->initial_size, "Size of the file at creation");
  AddSizeOption(create, "--pool-size", &co->max_size, "Size limit of the pool (0: none, it grows to its capacity: 16 times the limit or 1 TiB)");
  create->callback([co] {
    PoolOptions o;
    o.initial_size = co->initial_size;
    o.max_size = co->max_size;
    std::unique_ptr<Pool> p;
    Status s = Pool::Create(co->path, o, &p);
    if (!s.ok()) Fail(s);
    fmt::print("created pool {}: {} bytes, may grow to {} bytes\n", co->path, p->size(), p->max_size());
    s = p->Close();
    if (!s.ok()) Fail(s);
  });

  struct InfoOpts {
    std::string path;
    bool write = false;
  };
  auto io = std::make_shared<InfoOpts>();
  auto* info = pool->add_subcommand("info", "Print a pool's header, roots and space use");
  info->add_option("path", io->path, "Pool file")->required();
  info->add_flag("--write", io->write, "Open for writing (runs crash recovery if needed)");
  info->callback([io] {
    PoolOptions o;
    o.read_only = !io->write;
    o.background_recovery = false;
    std::unique_ptr<Pool> p;
    Status s = Pool::Open(io->path, o, &p);
    if (!s.ok()) Fail(s);
    fmt::print("pool:           {}\n", io->path);
    fmt::print("size:           {} bytes (max {})\n", p->size(), p->max_size());
    fmt::print("generation:     {}\n", p->generation());
    fmt::print("last shutdown:  {}\n", p->opened_clean() ? "clean" : "NOT clean (crashed, or open in a writer now)");
    fmt::print("durability:     {} - {}\n", DurabilityName(p->durability()), DurabilityDescription(p->durability()));
    if (io->write && !p->opened_clean()) fmt::print("recovery:       {:.3f} s\n", p->recovery_seconds());
    const auto roots = p->Roots();
    fmt::print("roots:          {}\n", roots.size());
    for (const auto& r : roots) {
      const IndexKind* k = FindIndexKindById(r.type);
      std::string extra;
      if (k) {
        std::unique_ptr<Index> idx;
        if (OpenIndex(*p, r.name, &idx).ok()) extra = fmt::format(", {} keys", idx->Size());
      }
      const char* kind = k ? k->name : r.type == kind_id::kKnn ? "knn" : "unknown";
      if (r.type == kind_id::kKnn) {
        std::unique_ptr<knn::KnnIndex> t;
        if (knn::KnnIndex::Open(*p, r.name, &t).ok())
          extra = fmt::format(", {} points of {} dimensions, degree {}", t->info().points, t->info().dim, t->info().degree);
      }
      fmt::print("  {:<24} kind {} (id {}), root block at {}{}\n", r.name, kind, r.type, r.off, extra);
      // roart (issue 34): where its bytes go, by what holds them.
      if (r.type == kind_id::kRoart && (p->opened_clean() || io->write)) {
        std::unique_ptr<Index> idx;
        if (OpenIndex(*p, r.name, &idx).ok())
          if (const auto* t = dynamic_cast<const roart::RoartTree*>(idx.get())) fmt::print("{}", t->SpaceReport());
      }
    }
    if (p->opened_clean() || io->write) {
      const AllocStats a = p->allocator().Stats();
      fmt::print("chunks:         {} total, {} free, {} small, {} large\n", a.chunks_total, a.chunks_free, a.chunks_small,
                 a.chunks_large);
      fmt::print("allocated:      {} blocks, {} bytes\n", a.blocks_allocated, a.bytes_allocated);
    } else {
      fmt::print("space use:      unknown until recovery (use --write)\n");
    }
    s = p->Close();
    if (!s.ok()) Fail(s);
  });

  struct CheckOpts {
    std::string path;
    bool repair = false;
  };
  auto ko = std::make_shared<CheckOpts>();
  auto* check = pool->add_subcommand(
      "check",
      "Verify a pool: header, allocator, every index's invariants, and no leak. Read-only: the file is not "
      "changed; a pool that was not closed cleanly is recovered in a private copy-on-write mapping and that is "
      "checked");
  check->add_option("path", ko->path, "Pool file")->required();
  check->add_flag("--repair", ko->repair,
                  "Open for writing: run crash recovery on the pool itself (writes the file; the generation advances)");
  check->callback([ko] {
    PoolOptions o;
    o.private_copy = !ko->repair;
    o.background_recovery = false;
    std::unique_ptr<Pool> p;
    Status s = Pool::Open(ko->path, o, &p);
    if (!s.ok()) Fail(s);
    fmt::print("checking {} ({})\n", ko->path,
               ko->repair ? "--repair: opened for writing" : "read-only: nothing is written to the file");
    int problems = 0;
    if (!p->opened_clean())
      fmt::print("pool was not closed cleanly: recovered in {:.3f} s{}\n", p->recovery_seconds(),
                 ko->repair ? "" : " (in a private copy; the file is unchanged - --repair recovers the file)");
    if (Status r = p->WaitForRecovery(); !r.ok()) {
      fmt::print("recovery: {}\n", r.ToString());
      ++problems;
    }
    std::string report;
    if (!p->Check(&report).ok()) {
      fmt::print("pool: FAILED\n{}", report);
      ++problems;
    } else {
      fmt::print("pool header and allocator: ok\n");
    }
    // Every index's invariants, and reachability == allocation (no leak, nothing reachable free).
    std::unordered_set<uint64_t> reached;
    bool all_visited = true;
    for (const auto& r : p->Roots()) {
      const IndexKind* k = FindIndexKindById(r.type);
      if (r.type == kind_id::kKnn) {  // a kNN SS-tree (wort/knn.h): not an index kind
        std::unique_ptr<knn::KnnIndex> t;
        Status os = knn::KnnIndex::Open(*p, r.name, &t);
        std::string ir;
        Status cs = os.ok() ? t->Check(&ir) : os;
        fmt::print("root {} (knn, {} points of {} dimensions): {}\n", r.name, os.ok() ? t->info().points : 0,
                   os.ok() ? t->info().dim : 0, cs.ok() ? "ok" : "FAILED " + cs.ToString());
        if (!cs.ok()) {
          fmt::print("{}", ir);
          ++problems;
        }
        knn::VisitRoot(*p, r.off, [&](uint64_t off) { reached.insert(off); });
        continue;
      }
      if (r.type == kind_id::kKvBatch) {  // a key-value store's batch log (src/kv/batch_log.h)
        const uint64_t* h = p->contains(r.off, kv::kHeadSize) ? p->at<uint64_t>(r.off) : nullptr;
        const bool whole = h && pm::load8(&h[0]) == kv::kHeadMagic;
        const uint64_t rec = whole ? pm::load8(&h[1]) : 0;
        fmt::print("root {} (batch log of a key-value store): {}\n", r.name,
                   !whole ? "FAILED: not a batch log head"
                          : rec ? "a committed batch not yet applied (the store's next open applies it)" : "ok");
        if (!whole) ++problems;
        kv::VisitBatchLog(*p, r.off, [&](uint64_t off) { reached.insert(off); });
        continue;
      }
      if (!k) {
        fmt::print("root {}: unknown index kind id {}\n", r.name, r.type);
        all_visited = false;
        ++problems;
        continue;
      }
      std::unique_ptr<Index> idx;
      Status os = OpenIndex(*p, r.name, &idx);
      if (!os.ok()) {
        fmt::print("root {}: cannot open: {}\n", r.name, os.ToString());
        ++problems;
        continue;
      }
      std::string ir;
      Status cs = idx->Check(&ir);
      fmt::print("root {} ({}, {} keys): {}\n", r.name, k->name, idx->Size(), cs.ok() ? "ok" : "FAILED");
      if (!cs.ok()) {
        fmt::print("{}", ir);
        ++problems;
      }
      // A key-value store's values: every value block and its checksum (wort/kv.h).
      uint64_t values = 0;
      bool is_store = false;
      std::string vr;
      Status vs = KvStore::CheckValues(*p, r.name, *idx, r.type, r.off, &vr, &values, &is_store);
      if (is_store || !vs.ok()) {
        fmt::print("root {} values: {} value blocks checked: {}\n", r.name, values, vs.ok() ? "ok" : "FAILED " + vs.ToString());
        if (!vs.ok()) {
          fmt::print("{}", vr);
          ++problems;
        }
      }
      k->visit(*p, r.off, [&](uint64_t off) { reached.insert(off); });
    }
    if (all_visited) {
      uint64_t leaked = 0, allocated = 0;
      p->allocator().ForEachAllocated([&](uint64_t off, size_t) {
        ++allocated;
        if (!reached.count(off)) ++leaked;
      });
      const uint64_t unallocated = reached.size() + leaked - allocated;
      fmt::print("blocks: {} allocated, {} reachable, {} leaked, {} reachable but free\n", allocated, reached.size(), leaked,
                 unallocated);
      if (leaked || unallocated) ++problems;
    }
    s = p->Close();
    if (!s.ok()) Fail(s);
    if (problems) {
      fmt::print("check FAILED: {} problem(s)\n", problems);
      throw CLI::RuntimeError(kExitCorruption);
    }
    fmt::print("check passed\n");
  });
}

const bool kRegistered = RegisterCommand(&AddPool, {"pool"});

}  // namespace
}  // namespace wort::cli
