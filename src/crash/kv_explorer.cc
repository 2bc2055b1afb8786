// The crash explorer and kill test of the key-value store API (crash/kv_explorer.h).
#include "crash/kv_explorer.h"

#include <fmt/core.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort::crash {

namespace {

constexpr const char* kRoot = "kv";

// Keys over the full byte range (empty, 0x00, >= 0x80, prefix chains, a long key), then plain.
std::vector<std::string> KvUniverse(size_t n) {
  std::vector<std::string> k = {"", std::string(1, '\0'), std::string(2, '\0'), "\x80", "\xff", "\xff\xff",
                                "a", "ab", "abc", std::string(300, 'L')};
  for (size_t i = 0; k.size() < n; ++i) k.push_back(fmt::format("key{:04}", i * 37 % 10000));
  return k;
}

std::string MakeValue(uint64_t r, size_t big_every) {
  static const size_t kSizes[] = {0, 1, 40, 56, 64, 120, 3000};
  const size_t n = big_every && r % big_every == 0 ? Allocator::kMaxSmall + 100 : kSizes[r % 7];
  std::string v(n, '\0');
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(r * 0x9e37 + i * 131);
  return v;
}

struct KvOp {
  enum Type { kPut, kRemove, kBatch } type = kPut;
  std::string key;
  std::string value;
  std::vector<KvOp> batch;  // kBatch: its puts and removes, in order
  std::string Describe() const {
    if (type == kBatch) {
      std::string d = fmt::format("batch of {}:", batch.size());
      for (const KvOp& o : batch) {
        d += ' ';
        d += o.Describe();
        d += ';';
      }
      return d;
    }
    return type == kPut ? fmt::format("put key={} ({} bytes) value of {} bytes", KeyToString(key, KeyType::kBytes),
                                      key.size(), value.size())
                        : fmt::format("remove key={}", KeyToString(key, KeyType::kBytes));
  }
};

// Next operation on a store holding `m`: a put of an absent key, an overwrite or a remove of a
// present one, now and then the remove of an absent key (must change nothing).
KvOp NextOp(const KvContents& m, const std::vector<std::string>& universe, Rng& rng, size_t big_every,
            size_t batch_every = 0) {
  KvOp op;
  // Now and then a batch of 1..6 operations (a key may recur: the last one counts).
  if (batch_every && rng.Below(batch_every) == 0) {
    op.type = KvOp::kBatch;
    const size_t n = 1 + rng.Below(6);
    KvContents sim = m;
    for (size_t i = 0; i < n; ++i) {
      KvOp o = NextOp(sim, universe, rng, big_every, 0);
      if (o.type == KvOp::kPut) sim[o.key] = o.value;
      else sim.erase(o.key);
      op.batch.push_back(std::move(o));
    }
    return op;
  }
  op.key = universe[rng.Below(universe.size())];
  const bool present = m.count(op.key) > 0;
  const uint64_t r = rng.Next();
  op.type = present ? (r % 2 ? KvOp::kPut : KvOp::kRemove) : (r % 10 == 0 ? KvOp::kRemove : KvOp::kPut);
  if (op.type == KvOp::kPut) op.value = MakeValue(rng.Next(), big_every);
  return op;
}

Status RunOp(KvStore& db, const KvOp& op) {
  if (op.type == KvOp::kBatch) {
    KvBatch b;
    for (const KvOp& o : op.batch) o.type == KvOp::kPut ? b.Put(o.key, o.value) : b.Remove(o.key);
    return db.Write(b);
  }
  return op.type == KvOp::kPut ? db.Put(op.key, op.value) : db.Remove(op.key);
}

// Applies op to m; returns the code the store must return.
Code ApplyOp(const KvOp& op, KvContents* m) {
  if (op.type == KvOp::kBatch) {  // all of it (a remove of an absent key is no error in a batch)
    for (const KvOp& o : op.batch) (void)ApplyOp(o, m);
    return Code::kOk;
  }
  if (op.type == KvOp::kPut) {
    (*m)[op.key] = op.value;
    return Code::kOk;
  }
  return m->erase(op.key) ? Code::kOk : Code::kNotFound;
}

Status ReadKv(const KvStore& db, const std::vector<std::string>& universe, KvContents* out) {
  out->clear();
  if (db.Capabilities().ordered)
    return db.Scan("", std::nullopt, [&](std::string_view k, std::string_view v) {
      out->emplace(k, v);
      return true;
    });
  for (const std::string& k : universe) {
    std::string v;
    Status s = db.Get(k, &v);
    if (s.ok()) (*out)[k] = std::move(v);
    else if (!s.IsNotFound()) return s;
  }
  return Status::OK();
}

std::string Diff(const KvContents& found, const KvContents& want) {
  std::string d;
  int n = 0;
  for (auto& [k, v] : want) {
    auto it = found.find(k);
    if (it == found.end()) d += fmt::format(" missing {};", KeyToString(k, KeyType::kBytes));
    else if (it->second != v)
      d += fmt::format(" {} has {} bytes, want {} bytes{};", KeyToString(k, KeyType::kBytes), it->second.size(), v.size(),
                       it->second.size() == v.size() ? " (different)" : "");
    else continue;
    if (++n == 4) break;
  }
  for (auto& [k, v] : found)
    if (!want.count(k) && n++ < 4) d += fmt::format(" extra {};", KeyToString(k, KeyType::kBytes));
  return d;
}

KvConfig StoreConfig(const std::string& path, const std::string& kind) {
  KvConfig c;
  c.path = path;
  c.kind = kind;
  c.name = kRoot;
  c.size = 256ull << 20;
  c.create_if_missing = false;
  return c;
}

}  // namespace

Status CheckKvPool(const std::string& path, const std::vector<std::string>& universe,
                   const std::vector<const KvContents*>& allowed, bool exercise, int* matched) {
  std::unique_ptr<KvStore> db;
  Status s = KvStore::Open(StoreConfig(path, ""), &db);
  if (!s.ok()) return Status(s.code(), "open: " + s.message());
  s = db->pool().WaitForRecovery();
  if (!s.ok()) return Status(s.code(), "recovery: " + s.message());
  KvContents found;
  s = ReadKv(*db, universe, &found);
  if (!s.ok()) return Status(s.code(), "read: " + s.message());
  *matched = -1;
  for (size_t i = 0; i < allowed.size() && *matched < 0; ++i)
    if (found == *allowed[i]) *matched = static_cast<int>(i);
  if (*matched < 0)
    return Status::Corruption("contents match no allowed state: vs before:" + Diff(found, *allowed.front()) +
                              " vs after:" + Diff(found, *allowed.back()));
  uint64_t n = 0;
  s = db->Count(&n);
  if (!s.ok() || n != found.size())
    return Status::Corruption(fmt::format("Count says {} ({}), the contents have {} keys", n, s.ToString(), found.size()));
  std::string rep;
  s = CheckReachability(db->pool(), &rep);
  if (!s.ok()) return Status(s.code(), "reachability: " + s.message() + " [" + rep.substr(0, rep.find('\n')) + "]");
  s = db->Check(&rep);
  if (!s.ok()) return Status(s.code(), "check: " + s.message() + " [" + rep.substr(0, rep.find('\n')) + "]");
  if (exercise) {
    const std::string fresh = "\xfe" "fresh-key";
    std::string v;
    KvBatch b;
    b.Put(fresh, "h");
    b.Remove(fresh + "2");
    if (!(s = db->Put(fresh, std::string(100, 'f'))).ok() || !(s = db->Put(fresh, "g")).ok() ||
        !(s = db->Get(fresh, &v)).ok() || v != "g" || !(s = db->Write(b)).ok() || !(s = db->Get(fresh, &v)).ok() ||
        v != "h" || !(s = db->Remove(fresh)).ok())
      return Status::Corruption("the recovered store does not work: " + s.ToString());
    if (!found.empty()) {
      const std::string& k = found.begin()->first;
      if (!(s = db->Put(k, "over")).ok() || !(s = db->Get(k, &v)).ok() || v != "over")
        return Status::Corruption("overwrite after recovery failed: " + s.ToString());
    }
    s = CheckReachability(db->pool(), &rep);
    if (!s.ok()) return Status(s.code(), "reachability after use: " + s.message());
  }
  s = db->Close();
  if (!s.ok()) return Status(s.code(), "close: " + s.message());
  return Status::OK();
}

Status RunKvExplorer(const KvExplorerConfig& kcfg, ExplorerResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  const ExplorerConfig& cfg = kcfg.explore;
  ExplorerResult res;
  res.index = cfg.index;
  const std::string live = UniquePoolPath(cfg.dir, "kv-live");
  struct Cleanup {
    std::string path;
    ~Cleanup() { ::unlink(path.c_str()); }
  } cleanup{live};
  KvConfig c = StoreConfig(live, cfg.index);
  c.size = cfg.pool_max_size;
  c.create_if_missing = true;
  std::unique_ptr<KvStore> db;
  WORT_RETURN_IF_ERROR(KvStore::Open(c, &db));
  const std::vector<std::string> universe = KvUniverse(std::max<size_t>(cfg.keys * 2, 16));
  Rng rng(MixSeed(cfg.seed, 0x4b56));
  KvContents model;
  for (size_t i = 0; i < cfg.keys; ++i) {  // setup: not explored
    const std::string& k = universe[i * 2 % universe.size()];
    const std::string v = MakeValue(rng.Next(), kcfg.big_every);
    WORT_RETURN_IF_ERROR(db->Put(k, v));
    model[k] = v;
  }
  PathExplorer px(&db->pool(), cfg);
  for (size_t i = 0; i < cfg.explore_ops && res.violation_count < cfg.max_violations; ++i) {
    const KvOp op = NextOp(model, universe, rng, kcfg.big_every, kcfg.batch_every);
    KvContents post = model;
    const Code want = ApplyOp(op, &post);
    Status st;
    auto check = [&](const std::string& path, bool returned) {
      int matched = -1;
      std::vector<const KvContents*> allowed = returned ? std::vector<const KvContents*>{&post}
                                                        : std::vector<const KvContents*>{&model, &post};
      return CheckKvPool(path, universe, allowed, cfg.exercise, &matched);
    };
    WORT_RETURN_IF_ERROR(px.Explore(i, op.Describe(), [&] { return RunOp(*db, op); }, &st, check, &res));
    if (st.code() != want) {
      ++res.violation_count;
      res.violations.push_back({i, op.Describe(), 0, "no crash (the live store)", "-",
                                fmt::format("returned {}, expected {}", st.ToString(), CodeName(want)), ""});
      break;
    }
    std::string rep;
    Status rs = CheckReachability(db->pool(), &rep);
    if (!rs.ok()) {
      ++res.violation_count;
      res.violations.push_back({i, op.Describe(), 0, "no crash (the live pool)", "-", rs.ToString() + " " + rep, ""});
      break;
    }
    model = std::move(post);
  }
  db.reset();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(res);
  return Status::OK();
}

// ---- the kill test --------------------------------------------------------------------------

Status RunKvKillTest(const KvKillConfig& cfg, KvKillResult* out) {
  KvKillResult res;
  const std::string path = UniquePoolPath(cfg.dir, "kv-kill");
  const std::string copy = path + ".check";
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      ::unlink(a.c_str());
      ::unlink(b.c_str());
    }
  } cleanup{path, copy};
  const std::vector<std::string> universe = KvUniverse(cfg.keys);
  {
    KvConfig c = StoreConfig(path, cfg.kind);
    c.create_if_missing = true;
    std::unique_ptr<KvStore> db;
    WORT_RETURN_IF_ERROR(KvStore::Open(c, &db));
    WORT_RETURN_IF_ERROR(db->Close());
  }
  KvContents model;
  for (int round = 1; round <= cfg.rounds; ++round) {
    int fds[2];
    if (::pipe(fds) != 0) return Status::IOError("pipe failed");
    const uint64_t seed = MixSeed(cfg.seed, 0x6b11, static_cast<uint64_t>(round));
    const pid_t pid = ::fork();
    if (pid < 0) return Status::IOError("fork failed");
    if (pid == 0) {
      // The child: open the crashed pool, rebuild the model from it, run operations until killed.
      ::close(fds[0]);
      std::unique_ptr<KvStore> db;
      if (!KvStore::Open(StoreConfig(path, cfg.kind), &db).ok()) ::_exit(3);
      KvContents m;
      if (!ReadKv(*db, universe, &m).ok()) ::_exit(4);
      Rng rng(seed);
      if (::write(fds[1], "R", 1) != 1) ::_exit(5);
      for (;;) {
        const KvOp op = NextOp(m, universe, rng, 16, cfg.batch_every);
        if (::write(fds[1], "B", 1) != 1) ::_exit(5);
        if (RunOp(*db, op).code() != ApplyOp(op, &m)) ::_exit(6);
        if (::write(fds[1], "A", 1) != 1) ::_exit(5);
      }
    }
    ::close(fds[1]);
    char ch = 0;
    const bool ready = ::read(fds[0], &ch, 1) == 1 && ch == 'R';
    Rng krng(seed ^ 0x6b);
    if (ready) std::this_thread::sleep_for(std::chrono::microseconds(krng.Below(cfg.max_delay_us + 1)));
    ::kill(pid, SIGKILL);
    int wst = 0;
    ::waitpid(pid, &wst, 0);
    if (!ready || !(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL)) {
      ::close(fds[0]);
      res.violations.push_back(fmt::format("round {}: the writer died before it was killed (status {:#x})", round, wst));
      break;
    }
    // Replay the child's operations on the model: acknowledged ones are applied, the last one
    // begun and not acknowledged is pending.
    Rng rng(seed);
    bool pending = false;
    KvOp pending_op;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == 'B') {
          pending_op = NextOp(model, universe, rng, 16, cfg.batch_every);
          pending = true;
        } else if (buf[i] == 'A') {
          (void)ApplyOp(pending_op, &model);
          pending = false;
          ++res.acked_ops;
        }
      }
    ::close(fds[0]);
    KvContents after = model;
    if (pending) (void)ApplyOp(pending_op, &after);
    std::error_code ec;
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("cannot copy " + path + ": " + ec.message());
    int matched = -1;
    Status s = CheckKvPool(copy, universe, {&model, &after}, true, &matched);
    ++res.rounds;
    if (cfg.log)
      std::fprintf(cfg.log, "round %d: %llu acked, pending %s: %s\n", round,
                   static_cast<unsigned long long>(res.acked_ops), pending ? pending_op.Describe().c_str() : "none",
                   s.ToString().c_str());
    if (!s.ok()) {
      res.violations.push_back(fmt::format("round {} (pending: {}): {}", round,
                                           pending ? pending_op.Describe() : "none", s.ToString()));
      break;
    }
    if (pending) ++(matched == 1 ? res.pending_applied : res.pending_absent);
    if (matched == 1) model = std::move(after);
  }
  *out = std::move(res);
  return Status::OK();
}

}  // namespace wort::crash
