// The crash explorer of `wort serve`'s item store (crash/server_explorer.h).
#include "crash/server_explorer.h"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>

#include "crash/oracle.h"
#include "server/store.h"
#include "sync/epoch.h"
#include "wort/alloc.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::crash {

namespace {

using server::Result;
using server::Store;
using server::StoreMode;

// key -> the record's words and data (or the metadata block's flush words), as bytes.
using Raw = std::map<std::string, std::string>;

std::vector<std::string> Universe() {
  std::vector<std::string> k = {"a", "ab", "abc", "\x80", "\xff", "\xff\xfe", "k\x01x", std::string(250, 'L'),
                                "\xc3\xa9t\xc3\xa9"};
  for (int i = 0; k.size() < 20; ++i) k.push_back(fmt::format("key{:03}", i * 37 % 1000));
  return k;
}

// The store's raw state: every index entry (dead items too), each record's cas, exptime, time
// word, flags, length and data; the metadata block's flush_cas and flush_time.
Status ReadRaw(Store& st, Raw* out) {
  out->clear();
  Pool& pool = st.pool();
  Status bad;
  Status s = st.ScanIndexForTest([&](std::string_view key, uint64_t off) {
    if (!bad.ok()) return;
    if (key == server::kMetaKey) {
      if (!pool.contains(off, sizeof(server::Meta))) {
        bad = Status::Corruption("the metadata entry names no block");
        return;
      }
      const auto* m = pool.at<server::Meta>(off);
      const uint64_t sel = m->flush_sel;
      const uint64_t* w = sel == 0 ? &m->flush_cas : m->slot[sel & 1];
      (*out)[std::string(key)] =
          fmt::format("meta magic={:#x} flush_sel={} flush_cas={} flush_time={}", m->magic, sel, w[0], w[1]);
      return;
    }
    if (!pool.contains(off, sizeof(server::Record))) {
      bad = Status::Corruption(fmt::format("{} names no record", KeyToString(key, KeyType::kBytes)));
      return;
    }
    const auto* r = pool.at<server::Record>(off);
    if (!pool.contains(off, sizeof(server::Record) + r->length)) {
      bad = Status::Corruption(fmt::format("{}: record length {} past the pool", KeyToString(key, KeyType::kBytes), r->length));
      return;
    }
    std::string v = fmt::format("cas={} exptime={} time={:#x} flags={} length={} data=", r->cas, server::RecordExptime(r),
                                server::RecordTimeWord(r), r->flags, r->length);
    v.append(r->data(), r->length);
    (*out)[std::string(key)] = std::move(v);
  });
  if (!s.ok()) return s;
  return bad;
}

std::string Diff(const Raw& found, const Raw& want) {
  std::string d;
  int n = 0;
  for (auto& [k, v] : want) {
    auto it = found.find(k);
    if (it == found.end()) d += fmt::format(" missing {};", KeyToString(k, KeyType::kBytes));
    else if (it->second != v)
      d += fmt::format(" {} is [{}], want [{}];", KeyToString(k, KeyType::kBytes), it->second.substr(0, 80), v.substr(0, 80));
    else continue;
    if (++n == 4) break;
  }
  for (auto& [k, v] : found)
    if (!want.count(k) && n++ < 4) d += fmt::format(" extra {};", KeyToString(k, KeyType::kBytes));
  return d;
}

server::StoreOptions Options(const ServerExplorerConfig& cfg, const std::string& path) {
  server::StoreOptions o;
  o.pool_path = path;
  o.index_kind = cfg.explore.index;
  o.pool_size = cfg.pool_size;
  o.max_item_size = cfg.max_item_size;
  o.crawler = false;  // the crawler's pass is an explored operation
  o.evict = cfg.evict ? server::EvictPolicy::kLru : server::EvictPolicy::kNone;
  return o;
}

// Checks 1-5 of the header on the image at `path`.
Status CheckImage(const ServerExplorerConfig& cfg, const std::string& path, const std::vector<const Raw*>& allowed) {
  std::unique_ptr<Store> st;
  Status s = Store::Open(Options(cfg, path), &st);
  if (!s.ok()) return Status(s.code(), "open: " + s.message());
  s = st->pool().WaitForRecovery();
  if (!s.ok()) return Status(s.code(), "recovery: " + s.message());
  st->WaitForCount();
  Raw found;
  s = ReadRaw(*st, &found);
  if (!s.ok()) return Status(s.code(), "read: " + s.message());
  bool match = false;
  for (const Raw* a : allowed) match |= found == *a;
  if (!match)
    return Status::Corruption("the store matches no allowed state: vs before:" + Diff(found, *allowed.front()) +
                              " vs after:" + Diff(found, *allowed.back()));
  const uint64_t entries = found.size() - (found.count(std::string(server::kMetaKey)) ? 1 : 0);
  if (st->curr_items() != entries)
    return Status::Corruption(fmt::format("curr_items {} after the count, {} items in the index", st->curr_items(), entries));
  std::string rep;
  s = CheckReachability(st->pool(), &rep);
  if (!s.ok()) return Status(s.code(), "reachability: " + s.message() + " [" + rep.substr(0, rep.find('\n')) + "]");
  if (cfg.explore.exercise) {
    const std::string fresh = "\xfe" "fresh";
    std::string v;
    if (st->StoreItem(StoreMode::kSet, fresh, 1, 0, std::string(100, 'f'), 0) != Result::kStored ||
        st->StoreItem(StoreMode::kSet, fresh, 2, 0, "g", 0) != Result::kStored ||
        !st->Get(fresh, [&](const server::ItemView& it) { v.assign(it.data); }) || v != "g" ||
        st->Delete(fresh) != Result::kDeleted)
      return Status::Corruption("the recovered store does not work (set/overwrite/get/delete)");
    if (st->curr_items() != entries) return Status::Corruption("curr_items changed by a set and delete of a fresh key");
    st->pool().allocator().epoch().Drain();
    s = CheckReachability(st->pool(), &rep);
    if (!s.ok()) return Status(s.code(), "reachability after use: " + s.message());
  }
  s = st->Close();
  if (!s.ok()) return Status(s.code(), "close: " + s.message());
  return Status::OK();
}

std::string MakeValue(uint64_t r, size_t n) {
  std::string v(n, '\0');
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(r * 0x9e37 + i * 131);
  return v;
}

struct ServerOp {
  std::string desc;
  std::function<Status(Store&)> run;
};

Status Want(bool ok, const char* what) { return ok ? Status::OK() : Status::Corruption(what); }

// The next operation (a closure over the live store) from the generator.
ServerOp NextOp(const ServerExplorerConfig& cfg, const std::vector<std::string>& universe, Rng& rng,
                int64_t* clock_offset) {
  const std::string key = universe[rng.Below(universe.size())];
  const std::string ks = KeyToString(key, KeyType::kBytes);
  const uint64_t r = rng.Next();
  const size_t kSizes[] = {1, 40, 100, 3000, Allocator::kMaxSmall + 100, cfg.max_item_size};
  const size_t n = kSizes[rng.Below(cfg.max_item_size > 0 && rng.Below(4) == 0 ? 6 : 5)];
  const int64_t now = Store::Now();
  const int64_t exptime = rng.Below(4) == 0 ? now + 50 : 0;  // expires at the next clock step
  const uint32_t flags = static_cast<uint32_t>(r >> 40);
  ServerOp op;
  if (cfg.evict) {
    // Large values into a small pool: the store evicts (sampled LRU, whole chunks).
    const size_t big = rng.Below(3) == 0 ? cfg.max_item_size : Allocator::kMaxSmall + 100 + rng.Below(60000);
    const std::string k = fmt::format("ev{:04}\xf0", rng.Below(400));
    op.desc = fmt::format("set (evicting) {} of {} bytes", KeyToString(k, KeyType::kBytes), big);
    op.run = [k, big, r](Store& st) {
      // Refused (kNoMemory) only when eviction could not make room: allowed, the state is kept.
      const Result res = st.StoreItem(StoreMode::kSet, k, 0, 0, MakeValue(r, big), 0);
      return Want(res == Result::kStored || res == Result::kNoMemory, "set with eviction: unexpected result");
    };
    return op;
  }
  switch (rng.Below(24)) {
    case 0: case 1: case 2: case 3:
      op.desc = fmt::format("set {} of {} bytes exptime {}", ks, n, exptime ? "+50" : "0");
      op.run = [=](Store& st) {
        return Want(st.StoreItem(StoreMode::kSet, key, flags, exptime, MakeValue(r, n), 0) == Result::kStored, "set");
      };
      break;
    case 4:
      op.desc = fmt::format("add {} of {} bytes", ks, n);
      op.run = [=](Store& st) { (void)st.StoreItem(StoreMode::kAdd, key, flags, exptime, MakeValue(r, n), 0); return Status::OK(); };
      break;
    case 5:
      op.desc = fmt::format("replace {} of {} bytes", ks, n);
      op.run = [=](Store& st) { (void)st.StoreItem(StoreMode::kReplace, key, flags, 0, MakeValue(r, n), 0); return Status::OK(); };
      break;
    case 6:
    case 7: {
      const bool app = rng.Below(2);
      const size_t m = std::min<size_t>(n, 3000);
      op.desc = fmt::format("{} {} of {} bytes", app ? "append" : "prepend", ks, m);
      op.run = [=](Store& st) {
        (void)st.StoreItem(app ? StoreMode::kAppend : StoreMode::kPrepend, key, 0, 0, MakeValue(r, m), 0);
        return Status::OK();
      };
      break;
    }
    case 8:
      op.desc = fmt::format("set {} to a number", ks);
      op.run = [=](Store& st) {
        return Want(st.StoreItem(StoreMode::kSet, key, 0, 0, std::to_string(r % 1000), 0) == Result::kStored, "set number");
      };
      break;
    case 9:
    case 10: {
      const bool incr = rng.Below(2);
      op.desc = fmt::format("{} {}", incr ? "incr" : "decr", ks);
      op.run = [=](Store& st) {
        uint64_t v = 0;
        (void)st.IncrDecr(key, incr, r % 50, &v);
        return Status::OK();
      };
      break;
    }
    case 11: {
      const bool right = rng.Below(2);
      op.desc = fmt::format("cas {} ({} unique) of {} bytes", ks, right ? "its" : "a wrong", n);
      op.run = [=](Store& st) {
        uint64_t cas = 0;
        st.Get(key, [&](const server::ItemView& it) { cas = it.cas; });
        (void)st.StoreItem(StoreMode::kCas, key, flags, 0, MakeValue(r, n), right ? cas : cas + 1);
        return Status::OK();
      };
      break;
    }
    case 12:
      op.desc = fmt::format("touch {}", ks);
      op.run = [=](Store& st) { (void)st.Touch(key, now + 1000 + static_cast<int64_t>(r % 1000)); return Status::OK(); };
      break;
    case 13:
      op.desc = fmt::format("gat {}", ks);
      op.run = [=](Store& st) {
        (void)st.GetAndTouch(key, static_cast<int64_t>(r % 2) * (now + 5000), [](const server::ItemView&) {});
        return Status::OK();
      };
      break;
    case 14:
      op.desc = fmt::format("delete {}", ks);
      op.run = [=](Store& st) { (void)st.Delete(key); return Status::OK(); };
      break;
    case 15:
      op.desc = fmt::format("get {} (removes it if expired)", ks);
      op.run = [=](Store& st) { (void)st.Get(key, [](const server::ItemView&) {}); return Status::OK(); };
      break;
    case 16: {
      *clock_offset += 100;
      const int64_t off = *clock_offset;
      op.desc = fmt::format("clock +100 s, then a crawler pass");
      op.run = [off](Store& st) {
        Store::SetClockOffsetForTest(off);
        (void)st.CrawlOnce();
        return Status::OK();
      };
      break;
    }
    case 17: {
      const bool delayed = rng.Below(2);
      op.desc = delayed ? "flush_all 30 (delayed)" : "flush_all";
      op.run = [=](Store& st) { st.FlushAll(delayed ? now + 30 : 0); return Status::OK(); };
      break;
    }
    case 18: {
      Store::MetaGetArgs a;
      const int kind = static_cast<int>(rng.Below(3));
      if (kind == 0) a.touch = true, a.exptime = now + 777;
      if (kind == 1) a.vivify = true, a.vivify_exptime = now + 40;
      if (kind == 2) a.recache = true, a.recache_before = now + 100000;
      op.desc = fmt::format("mg {} {}", ks, kind == 0 ? "T" : kind == 1 ? "N" : "R (wins the recache)");
      op.run = [=](Store& st) { (void)st.MetaGet(key, a, [](const server::ItemView&) {}); return Status::OK(); };
      break;
    }
    case 19: {
      op.desc = fmt::format("ms {} I with an older cas", ks);
      op.run = [=](Store& st) {
        uint64_t cas = 0, out = 0;
        st.Get(key, [&](const server::ItemView& it) { cas = it.cas; });
        (void)st.MetaSet(StoreMode::kSet, key, flags, 0, MakeValue(r, std::min<size_t>(n, 3000)), true, cas ? cas - 1 : 0,
                         true, &out);
        return Status::OK();
      };
      break;
    }
    case 20: {
      const std::string k = universe[r % 3];  // the keys case 22 reads
      op.desc = fmt::format("md {} I", KeyToString(k, KeyType::kBytes));
      op.run = [=](Store& st) { (void)st.MetaDelete(k, false, 0, true, true, now + 60); return Status::OK(); };
      break;
    }
    case 21: {
      op.desc = fmt::format("ma {} N", ks);
      op.run = [=](Store& st) {
        Store::ArithArgs a;
        a.vivify = true;
        a.initial = r % 100;
        a.delta = 3;
        Store::ArithOut o;
        (void)st.MetaArith(key, a, &o);
        return Status::OK();
      };
      break;
    }
    case 22: {
      // A plain mg of one of the keys md I marks stale (case 20): it wins the recache.
      const std::string k = universe[r % 3];
      op.desc = fmt::format("mg {} (wins a stale item's recache)", KeyToString(k, KeyType::kBytes));
      op.run = [k](Store& st) {
        (void)st.MetaGet(k, Store::MetaGetArgs{}, [](const server::ItemView&) {});
        return Status::OK();
      };
      break;
    }
    default:
      op.desc = fmt::format("set {} of 1 byte", ks);
      op.run = [=](Store& st) {
        return Want(st.StoreItem(StoreMode::kSet, key, flags, 0, MakeValue(r, 1), 0) == Result::kStored, "set 1 byte");
      };
      break;
  }
  return op;
}

}  // namespace

Status RunServerExplorer(const ServerExplorerConfig& cfg, ExplorerResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  ExplorerResult res;
  res.index = "server:" + cfg.explore.index;
  const std::string live = UniquePoolPath(cfg.explore.dir, "server-live");
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      Store::SetClockOffsetForTest(0);
      ::unlink(path.c_str());
    }
  } cleanup{live};
  Store::SetClockOffsetForTest(0);
  // The pool first (not explored), shadowed; then the store's creation is operation 0.
  PoolOptions po;
  po.max_size = cfg.pool_size;
  po.initial_size = cfg.pool_size;
  std::unique_ptr<Pool> pool;
  WORT_RETURN_IF_ERROR(Pool::Create(live, po, &pool));
  Pool* pp = pool.get();
  std::unique_ptr<Store> st;
  PathExplorer px(pp, cfg.explore);
  Raw before, after;
  auto check = [&](const std::string& path, bool returned) {
    std::vector<const Raw*> allowed = returned ? std::vector<const Raw*>{&after} : std::vector<const Raw*>{&before, &after};
    return CheckImage(cfg, path, allowed);
  };
  // Operation 0: the store's creation (CreateIndex, then the metadata block and its Insert).
  {
    Status op_status;
    std::unique_ptr<Pool> p = std::move(pool);
    // The "before" of the creation: a pool without the store; its image opens as a new store.
    before = {};
    Raw* a = &after;
    auto run = [&] {
      Status s = Store::OpenOnPool(Options(cfg, live), std::move(p), &st);
      if (s.ok()) s = ReadRaw(*st, a);
      return s;
    };
    // The creation's images open as a store that holds only its metadata entry.
    auto check0 = [&](const std::string& path, bool returned) {
      (void)returned;
      return CheckImage(cfg, path, {&after});
    };
    WORT_RETURN_IF_ERROR(px.Explore(0, "create the store (index, metadata block)", run, &op_status, check0, &res));
    if (!op_status.ok()) return op_status;
    for (auto& [site, n] : res.sites) res.first_op.emplace(site, 0);
  }
  const std::vector<std::string> universe = Universe();
  Rng rng(MixSeed(cfg.explore.seed, 0x5e7e));
  int64_t clock_offset = 0;
  for (size_t i = 1; i <= cfg.explore.explore_ops && res.violation_count < cfg.explore.max_violations; ++i) {
    const ServerOp op = NextOp(cfg, universe, rng, &clock_offset);
    before = after;
    Status st_op, rs;
    WORT_RETURN_IF_ERROR(px.Explore(
        i, op.desc,
        [&] {
          Status s = op.run(*st);
          // The "after" state is read inside the hook (a read only: it meets no site).
          rs = ReadRaw(*st, &after);
          return s;
        },
        &st_op, check, &res));
    for (auto& [site, n] : res.sites) res.first_op.emplace(site, i);
    if (!st_op.ok() || !rs.ok()) {
      ++res.violation_count;
      res.violations.push_back({i, op.desc, 0, "no crash (the live store)", "-",
                                !st_op.ok() ? st_op.ToString() : "read: " + rs.ToString(), ""});
      break;
    }
  }
  Status cs = st->Close();
  if (!cs.ok()) return cs;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(res);
  return Status::OK();
}

std::vector<ServerExplorerConfig> ServerPlan(const std::string& dir) {
  std::vector<ServerExplorerConfig> plan;
  ServerExplorerConfig c;
  c.explore.index = "woart";
  c.explore.dir = dir;
  c.explore.explore_ops = 400;
  c.explore.subsets = 2;
  c.explore.max_points = 12;
  c.explore.novel_only = true;
  c.explore.seed = 1;
  // 8-byte write-back units: the store relies on 8-byte atomic stores and persist order only
  // (the flush state's slot and its selector share a cache line: only torn lines can tell
  // whether the slot is persisted before the selector is stored).
  c.explore.torn_lines = true;
  plan.push_back(c);
  ServerExplorerConfig e = c;
  e.explore.torn_lines = false;
  e.evict = true;
  e.pool_size = 8ull << 20;
  e.explore.explore_ops = 40;
  e.explore.seed = 2;
  plan.push_back(e);
  // Every operation explored (not only those that meet a new site), fewer points each.
  ServerExplorerConfig all = c;
  all.explore.novel_only = false;
  all.explore.explore_ops = 40;
  all.explore.max_points = 6;
  all.explore.subsets = 1;
  all.explore.seed = 3;
  plan.push_back(all);
  return plan;
}

}  // namespace wort::crash
