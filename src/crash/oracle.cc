// The expected-state oracle and the checks on a crashed pool. See crash/oracle.h.
#include "crash/oracle.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <set>
#include <unordered_set>

#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort::crash {

uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  Rng r(seed ^ 0x6a09e667f3bcc908ull);
  uint64_t h = r.Next();
  for (uint64_t x : {a, b, c}) {
    Rng s(h ^ (x * 0x9e3779b97f4a7c15ull));
    h = s.Next();
  }
  return h;
}

const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kInsert: return "insert";
    case OpType::kUpsert: return "upsert";
    case OpType::kDelete: return "delete";
  }
  return "?";
}

bool ParseOpTypes(const std::string& list, std::vector<OpType>* out) {
  std::vector<OpType> v;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    bool found = false;
    for (OpType t : {OpType::kInsert, OpType::kUpsert, OpType::kDelete}) {
      if (item == OpTypeName(t)) {
        if (std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
        found = true;
      }
    }
    if (!found) return false;
    pos = comma + 1;
  }
  if (v.empty()) return false;
  *out = std::move(v);
  return true;
}

std::string OpTypesName(const std::vector<OpType>& types) {
  std::string s;
  for (OpType t : types) s += (s.empty() ? "" : ",") + std::string(OpTypeName(t));
  return s;
}

std::string KeyToString(std::string_view key, KeyType kt) {
  if (kt == KeyType::kU64 && key.size() == 8) return std::to_string(DecodeU64(key));
  constexpr size_t kShow = 48;
  const std::string_view shown = key.substr(0, std::min(key.size(), kShow));
  const bool printable = std::all_of(shown.begin(), shown.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  std::string s;
  if (printable) {
    s = "\"" + std::string(shown) + "\"";
  } else {
    s = "0x";
    for (unsigned char c : shown) s += fmt::format("{:02x}", c);
  }
  if (key.size() > kShow) s += fmt::format("...({} bytes)", key.size());
  if (key.empty()) s = "\"\" (empty)";
  return s;
}

// ---- the workload ---------------------------------------------------------------------------

namespace {
// Keys that break naive implementations: empty, 0x00 and >= 0x80 bytes (signed-char bugs),
// chains of prefixes (a key ending inside another's path), and long keys up to kMaxKeyLen (past
// any inline prefix limit).
std::vector<std::string> EdgeKeys() {
  std::vector<std::string> v = {
      std::string(),
      std::string(1, '\0'),
      std::string(2, '\0'),
      std::string("\x00\xff", 2),
      std::string("\x00\x80\x00", 3),
      "\x7f",
      "\x80",
      "\xff",
      "\xff\xff",
      std::string(9, '\xff'),
      "p",
      "pr",
      "pre",
      "pref",
      "prefix",
  };
  std::string long1(200, 'L');
  long1[100] = '\x80';
  v.push_back(long1);
  v.push_back(long1 + "x");
  v.push_back(long1.substr(0, 150));
  std::string maxkey(kMaxKeyLen, '\0');
  for (size_t i = 0; i < maxkey.size(); ++i) maxkey[i] = static_cast<char>((i * 7) % 251);
  v.push_back(maxkey);
  v.push_back(maxkey.substr(0, kMaxKeyLen - 1));
  v.push_back(maxkey.substr(0, 1000));
  return v;
}

template <class T>
void ShuffleWith(std::vector<T>& v, Rng& r) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[r.Below(i)]);
}

constexpr size_t kFreshKeys = 8;
}  // namespace

Workload::Workload(bench::Dist dist, KeyType kt, size_t setup_keys, size_t insert_keys, bool edge_keys,
                   uint64_t seed, const std::vector<std::string>& extra_setup,
                   const std::vector<std::string>& extra_inserts)
    : kt_(kt) {
  std::vector<std::string> gen = bench::GenerateKeys(dist, setup_keys + insert_keys + kFreshKeys, seed);
  if (!extra_setup.empty() || !extra_inserts.empty()) {
    std::unordered_set<std::string> x(extra_setup.begin(), extra_setup.end());
    x.insert(extra_inserts.begin(), extra_inserts.end());
    std::erase_if(gen, [&](const std::string& k) { return x.count(k) != 0; });
  }
  if (kt == KeyType::kU64) {
    // An integer index takes 8-byte keys only.
    std::erase_if(gen, [](const std::string& k) { return k.size() != 8; });
    edge_keys = false;
  }
  std::vector<std::string> edges;
  if (edge_keys) {
    edges = EdgeKeys();
    const std::unordered_set<std::string> e(edges.begin(), edges.end());
    std::erase_if(gen, [&](const std::string& k) { return e.count(k) != 0; });
  }
  // Fresh keys come off the end of the generated list.
  const size_t nfresh = std::min(kFreshKeys, gen.size());
  fresh_.assign(gen.end() - static_cast<ptrdiff_t>(nfresh), gen.end());
  gen.resize(gen.size() - nfresh);

  Rng r(MixSeed(seed, 0x5e7));
  const size_t gen_setup = std::min(setup_keys, gen.size());
  std::vector<std::string> setup(gen.begin(), gen.begin() + static_cast<ptrdiff_t>(gen_setup));
  std::vector<std::string> inserts(gen.begin() + static_cast<ptrdiff_t>(gen_setup), gen.end());
  // Edge keys: every other one is loaded at setup, the rest are insert candidates.
  for (size_t i = 0; i < edges.size(); ++i) (i % 2 == 0 ? setup : inserts).push_back(edges[i]);
  std::unordered_set<std::string> seen;
  for (const std::string& k : extra_setup)
    if (seen.insert(k).second) setup.push_back(k);
  for (const std::string& k : extra_inserts)
    if (seen.insert(k).second) inserts.push_back(k);
  ShuffleWith(setup, r);
  ShuffleWith(inserts, r);
  setup_ = setup.size();
  keys_ = std::move(setup);
  keys_.insert(keys_.end(), inserts.begin(), inserts.end());
}

Op Workload::Next(const Contents& m, const std::vector<OpType>& types, Rng& rng) const {
  // A key present (or absent) in m, uniformly: by rejection sampling (the universe is small and
  // usually mixed), else by a scan.
  auto choose = [&](bool present, uint32_t* out) {
    const uint64_t n = keys_.size();
    if (n == 0) return false;
    for (int t = 0; t < 64; ++t) {
      const uint32_t k = static_cast<uint32_t>(rng.Below(n));
      if ((m.count(keys_[k]) != 0) == present) {
        *out = k;
        return true;
      }
    }
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < n; ++i)
      if ((m.count(keys_[i]) != 0) == present) v.push_back(i);
    if (v.empty()) return false;
    *out = v[rng.Below(v.size())];
    return true;
  };
  auto pick = [&](bool present_first) {
    uint32_t k = 0;
    if (!choose(present_first, &k)) (void)choose(!present_first, &k);
    return k;
  };
  Op op;
  op.type = types[rng.Below(types.size())];
  const bool miss = rng.Below(10) == 0;
  switch (op.type) {
    case OpType::kInsert: op.key = pick(miss); break;
    case OpType::kUpsert: op.key = pick(!miss); break;
    case OpType::kDelete: op.key = pick(!miss); break;
  }
  op.value = rng.Next();
  auto it = m.find(keys_[op.key]);
  if (it != m.end() && it->second == op.value) ++op.value;  // an upsert always changes the value
  return op;
}

Code Workload::Apply(const Op& op, Contents* m) const {
  const std::string& k = keys_[op.key];
  switch (op.type) {
    case OpType::kInsert:
      return m->emplace(k, op.value).second ? Code::kOk : Code::kAlreadyExists;
    case OpType::kUpsert:
      (*m)[k] = op.value;
      return Code::kOk;
    case OpType::kDelete:
      return m->erase(k) ? Code::kOk : Code::kNotFound;
  }
  return Code::kInvalidArgument;
}

Status Workload::Run(Index& index, const Op& op) const {
  const std::string& k = keys_[op.key];
  switch (op.type) {
    case OpType::kInsert: return index.Insert(std::string_view(k), op.value);
    case OpType::kUpsert: return index.Upsert(std::string_view(k), op.value, nullptr);
    case OpType::kDelete: return index.Remove(std::string_view(k));
  }
  return Status::InvalidArgument("bad op");
}

std::string Workload::Describe(const Op& op) const {
  std::string s = std::string(OpTypeName(op.type)) + " key=" + KeyToString(keys_[op.key], kt_);
  if (op.type != OpType::kDelete) s += fmt::format(" value={:#x}", op.value);
  return s;
}

// ---- reading and comparing contents ---------------------------------------------------------

Status ReadContents(const Index& index, const IndexKind& kind, const Workload& wl, Contents* out) {
  Contents c;
  if (kind.ordered) {
    const std::string start = wl.key_type() == KeyType::kU64 ? EncodeU64(0) : std::string();
    std::string prev;
    bool first = true, order_ok = true;
    Status s = index.Scan(start, nullptr, std::numeric_limits<size_t>::max(), [&](std::string_view k, uint64_t v) {
      if (!first && CompareKeys(prev, k) >= 0) order_ok = false;
      prev.assign(k.data(), k.size());
      first = false;
      c.emplace(std::string(k), v);
      return true;
    });
    WORT_RETURN_IF_ERROR(s);
    if (!order_ok) return Status::Corruption("Scan returned keys out of order or twice");
  } else {
    auto look = [&](const std::string& k) -> Status {
      uint64_t v = 0;
      Status s = index.Lookup(std::string_view(k), &v);
      if (s.ok()) c.emplace(k, v);
      else if (!s.IsNotFound()) return Status(s.code(), "Lookup(" + KeyToString(k, wl.key_type()) + "): " + s.message());
      return Status::OK();
    };
    for (const std::string& k : wl.keys()) WORT_RETURN_IF_ERROR(look(k));
    for (const std::string& k : wl.fresh()) WORT_RETURN_IF_ERROR(look(k));
  }
  *out = std::move(c);
  return Status::OK();
}

namespace {
std::string ValueText(const Contents& c, const std::string& k) {
  auto it = c.find(k);
  return it == c.end() ? "absent" : fmt::format("{:#x}", it->second);
}

// Keys where `a` and `b` differ, in order.
std::vector<std::string> DiffKeys(const Contents& a, const Contents& b) {
  std::vector<std::string> d;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() || j != b.end()) {
    if (j == b.end() || (i != a.end() && i->first < j->first)) {
      d.push_back(i->first);
      ++i;
    } else if (i == a.end() || j->first < i->first) {
      d.push_back(j->first);
      ++j;
    } else {
      if (i->second != j->second) d.push_back(i->first);
      ++i;
      ++j;
    }
  }
  return d;
}
}  // namespace

int MatchContents(const Contents& found, const std::vector<const Contents*>& allowed, KeyType kt, std::string* diff) {
  for (size_t i = 0; i < allowed.size(); ++i)
    if (found == *allowed[i]) return static_cast<int>(i);
  if (diff) {
    const Contents& before = *allowed.front();
    const Contents& after = *allowed.back();
    std::string s = fmt::format("the index holds {} keys, ", found.size());
    s += allowed.size() == 1 ? fmt::format("expected {} (the operation completed)", after.size())
                             : fmt::format("expected {} (before the operation) or {} (after it)", before.size(), after.size());
    // Keys that differ from every allowed state first; then, if none, the partial mixes.
    std::set<std::string> keys;
    for (const Contents* a : allowed)
      for (auto& k : DiffKeys(found, *a)) keys.insert(k);
    size_t shown = 0;
    for (const std::string& k : keys) {
      if (shown == 5) {
        s += fmt::format("; and {} more keys differ", keys.size() - shown);
        break;
      }
      s += "; key " + KeyToString(k, kt) + ": found " + ValueText(found, k);
      if (allowed.size() == 1) s += ", expected " + ValueText(after, k);
      else s += ", before " + ValueText(before, k) + ", after " + ValueText(after, k);
      ++shown;
    }
    *diff = s;
  }
  return -1;
}

Status CheckReachability(const Pool& pool, std::string* report) {
  std::set<uint64_t> reach;
  bool ok = true;
  auto bad = [&](const std::string& m) {
    ok = false;
    if (report) *report += m + "\n";
  };
  for (const RootInfo& r : pool.Roots()) {
    // The post-crash GC's lookup: index kinds, and roots of other layers (RegisterRootVisitor).
    const RootVisitorLookup lookup = GetRootVisitorLookup();
    const RootVisitFn visit = lookup ? lookup(r.type) : nullptr;
    if (!visit) {
      bad(fmt::format("root '{}' has kind id {} with no visit function", r.name, r.type));
      continue;
    }
    visit(pool, r.off, [&](uint64_t off) { reach.insert(off); });
  }
  std::vector<std::pair<uint64_t, size_t>> allocated;
  pool.allocator().ForEachAllocated([&](uint64_t off, size_t size) { allocated.emplace_back(off, size); });
  std::sort(allocated.begin(), allocated.end());
  std::set<uint64_t> alloc_set;
  for (auto& a : allocated) alloc_set.insert(a.first);
  size_t leaks = 0, dangling = 0;
  std::string leak_list, dangling_list;
  for (auto& [off, size] : allocated) {
    if (reach.count(off)) continue;
    if (leaks++ < 5) leak_list += fmt::format(" {:#x}({}B)", off, size);
  }
  for (uint64_t off : reach) {
    if (alloc_set.count(off)) continue;
    if (dangling++ < 5) dangling_list += fmt::format(" {:#x}", off);
  }
  if (leaks) bad(fmt::format("{} allocated block(s) unreachable from every root (leak):{}{}", leaks, leak_list, leaks > 5 ? " ..." : ""));
  if (dangling)
    bad(fmt::format("{} reachable block(s) not allocated (free or never allocated):{}{}", dangling, dangling_list,
                    dangling > 5 ? " ..." : ""));
  // The writer rule (wort/alloc.h): a Retire outside an epoch can race the post-crash GC into a
  // double free that this run of the check happened not to see.
  if (const uint64_t n = pool.allocator().Stats().retired_outside_epoch)
    bad(fmt::format("{} Retire call(s) outside an epoch (the writer rule of wort/alloc.h)", n));
  return ok ? Status::OK()
            : Status::Corruption(fmt::format("reachability contract broken: {} reachable, {} allocated", reach.size(),
                                             allocated.size()));
}

// ---- the checks on a crashed pool -----------------------------------------------------------

namespace {
Status Fail(const std::string& step, const Status& s, const std::string& report = "") {
  std::string m = step + ": " + s.ToString();
  if (!report.empty() && s.message().find(report.substr(0, report.find('\n'))) == std::string::npos) {
    std::string r = report;
    while (!r.empty() && r.back() == '\n') r.pop_back();
    if (r.size() > 2000) r = r.substr(0, 2000) + " ...";
    m += " [" + r + "]";
  }
  return Status(s.ok() ? Code::kCorruption : s.code(), m);
}

// Steps 2-4 on an open pool: Check, contents against `allowed`, Size, reachability, Pool::Check.
Status CheckOpenPool(Pool& pool, Index& idx, const CheckTarget& t, const std::vector<const Contents*>& allowed,
                     int* matched, Contents* found, const std::string& when) {
  std::string rep;
  Status s = idx.Check(&rep);
  if (!s.ok()) return Fail(when + "Index::Check", s, rep);
  s = ReadContents(idx, *t.kind, *t.workload, found);
  if (!s.ok()) return Fail(when + "reading the contents", s);
  std::string diff;
  const int m = MatchContents(*found, allowed, t.workload->key_type(), &diff);
  if (m < 0) return Status::Corruption(when + "contents: " + diff);
  if (idx.Size() != found->size())
    return Status::Corruption(fmt::format("{}Size() is {}, the index holds {} keys", when, idx.Size(), found->size()));
  rep.clear();
  s = CheckReachability(pool, &rep);
  if (!s.ok()) return Fail(when + "allocator", s, rep);
  rep.clear();
  s = pool.Check(&rep);
  if (!s.ok()) return Fail(when + "Pool::Check", s, rep);
  if (matched) *matched = m;
  return Status::OK();
}

// Step 0 (CheckTarget::read_only_first): the crashed pool read-only, as it is.
Status CheckReadOnly(const std::string& path, const CheckTarget& t, const std::vector<const Contents*>& allowed) {
  PoolOptions po;
  po.read_only = true;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  Status s = Pool::Open(path, po, &pool);
  if (!s.ok()) return Fail("read-only: Pool::Open", s);
  std::unique_ptr<Index> idx;
  s = OpenIndex(*pool, t.root, &idx);
  if (!s.ok() && s.IsNotFound() && t.may_be_absent) return Status::OK();
  if (!s.ok()) return Fail("read-only: OpenIndex", s);
  Contents found;
  s = ReadContents(*idx, *t.kind, *t.workload, &found);
  if (!s.ok()) return Fail("read-only: reading the contents", s);
  std::string diff;
  const int m = MatchContents(found, allowed, t.workload->key_type(), &diff);
  if (m < 0) return Status::Corruption("read-only (before recovery): contents: " + diff);
  const KeyType kt = t.workload->key_type();
  auto look = [&](const std::string& k) -> Status {
    uint64_t v = 0;
    const Status ls = idx->Lookup(std::string_view(k), &v);
    if (!ls.ok() && !ls.IsNotFound())
      return Fail("read-only: Lookup(" + KeyToString(k, kt) + ")", ls);
    auto it = allowed[m]->find(k);
    if (ls.ok() && (it == allowed[m]->end() || it->second != v))
      return Status::Corruption(fmt::format("read-only (before recovery): Lookup({}) found {}, the contents read hold {}",
                                            KeyToString(k, kt), v, ValueText(*allowed[m], k)));
    if (!ls.ok() && it != allowed[m]->end())
      return Status::Corruption(fmt::format("read-only (before recovery): Lookup({}) found nothing, the contents read "
                                            "hold {}",
                                            KeyToString(k, kt), it->second));
    return Status::OK();
  };
  for (const std::string& k : t.workload->keys()) WORT_RETURN_IF_ERROR(look(k));
  for (const std::string& k : t.workload->fresh()) WORT_RETURN_IF_ERROR(look(k));
  idx.reset();
  s = pool->Close();
  if (!s.ok()) return Fail("read-only: Pool::Close", s);
  return Status::OK();
}

// Step 5: the recovered index still works.
Status Exercise(Pool& pool, Index& idx, const CheckTarget& t, const Contents& found) {
  const Workload& wl = *t.workload;
  const KeyType kt = wl.key_type();
  Contents m = found;
  const auto& fresh = wl.fresh();
  auto expect = [&](const std::string& what, const Status& s, Code want) -> Status {
    if (s.code() == want) return Status::OK();
    return Status::Corruption(fmt::format("after recovery, {}: returned {}, expected {}", what, s.ToString(),
                                          CodeName(want)));
  };
  const size_t n_ins = std::min<size_t>(3, fresh.size());
  for (size_t i = 0; i < n_ins; ++i) {
    const uint64_t v = 0xC0FFEE00 + i;
    WORT_RETURN_IF_ERROR(expect("insert " + KeyToString(fresh[i], kt), idx.Insert(std::string_view(fresh[i]), v), Code::kOk));
    m[fresh[i]] = v;
  }
  for (size_t i = 0; i < n_ins; ++i) {
    uint64_t v = 0;
    WORT_RETURN_IF_ERROR(expect("lookup " + KeyToString(fresh[i], kt), idx.Lookup(std::string_view(fresh[i]), &v), Code::kOk));
    if (v != m[fresh[i]])
      return Status::Corruption(fmt::format("after recovery, lookup {}: value {:#x}, expected {:#x}",
                                            KeyToString(fresh[i], kt), v, m[fresh[i]]));
  }
  if (n_ins > 0) {
    WORT_RETURN_IF_ERROR(expect("insert of a present key " + KeyToString(fresh[0], kt),
                                idx.Insert(std::string_view(fresh[0]), 1), Code::kAlreadyExists));
  }
  // Upsert and delete keys that survived the crash (the first ones, in key order).
  std::vector<std::string> old;
  for (auto& [k, v] : found) {
    if (old.size() == 3) break;
    old.push_back(k);
  }
  if (!old.empty()) {
    WORT_RETURN_IF_ERROR(expect("upsert " + KeyToString(old[0], kt), idx.Upsert(std::string_view(old[0]), 0xFEED, nullptr), Code::kOk));
    m[old[0]] = 0xFEED;
  }
  for (size_t i = 1; i < old.size(); ++i) {
    WORT_RETURN_IF_ERROR(expect("delete " + KeyToString(old[i], kt), idx.Remove(std::string_view(old[i])), Code::kOk));
    m.erase(old[i]);
    uint64_t v = 0;
    WORT_RETURN_IF_ERROR(expect("lookup of the deleted key " + KeyToString(old[i], kt), idx.Lookup(std::string_view(old[i]), &v),
                                Code::kNotFound));
  }
  if (n_ins > 1) {
    WORT_RETURN_IF_ERROR(expect("delete " + KeyToString(fresh[1], kt), idx.Remove(std::string_view(fresh[1])), Code::kOk));
    m.erase(fresh[1]);
  }
  if (fresh.size() > n_ins) {
    WORT_RETURN_IF_ERROR(expect("delete of an absent key " + KeyToString(fresh[n_ins], kt),
                                idx.Remove(std::string_view(fresh[n_ins])), Code::kNotFound));
  }
  Contents after;
  return CheckOpenPool(pool, idx, t, {&m}, nullptr, &after, "after recovery and further operations, ");
}
}  // namespace

Status CheckCrashedPool(const std::string& path, const CheckTarget& t, const std::vector<const Contents*>& allowed,
                        int* matched) {
  if (t.read_only_first) WORT_RETURN_IF_ERROR(CheckReadOnly(path, t, allowed));
  PoolOptions po;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  Status s = Pool::Open(path, po, &pool);
  if (!s.ok()) return Fail("Pool::Open", s);
  s = pool->WaitForRecovery();
  if (!s.ok()) return Fail("recovery", s);
  std::unique_ptr<Index> idx;
  s = OpenIndex(*pool, t.root, &idx);
  if (!s.ok() && s.IsNotFound() && t.may_be_absent) {
    // Crashed before the creation's commit (the root entry): no index, and nothing leaked.
    std::string rep;
    s = CheckReachability(*pool, &rep);
    if (!s.ok()) return Fail("no index yet: allocator", s, rep);
    rep.clear();
    s = pool->Check(&rep);
    if (!s.ok()) return Fail("no index yet: Pool::Check", s, rep);
    s = pool->Close();
    if (!s.ok()) return Fail("Pool::Close", s);
    if (matched) *matched = 0;
    return Status::OK();
  }
  if (!s.ok()) return Fail("OpenIndex", s);
  Contents found;
  int m = -1;
  WORT_RETURN_IF_ERROR(CheckOpenPool(*pool, *idx, t, allowed, &m, &found, ""));
  if (t.exercise) WORT_RETURN_IF_ERROR(Exercise(*pool, *idx, t, found));
  idx.reset();
  s = pool->Close();
  if (!s.ok()) return Fail("Pool::Close", s);
  if (matched) *matched = m;
  return Status::OK();
}

Status CheckCrashedPoolIsolated(const std::string& path, const CheckTarget& target,
                                const std::vector<const Contents*>& allowed, int* matched, int timeout_s) {
  int fds[2];
  int pid = 0;
  WORT_RETURN_IF_ERROR(ForkWithPipe(fds, &pid));
  if (pid == 0) {
    ::close(fds[0]);
    int m = -1;
    const Status s = CheckCrashedPool(path, target, allowed, &m);
    // Reply: code (4 bytes), matched (4 bytes), then the message.
    std::string reply(8, '\0');
    const int32_t code = static_cast<int32_t>(s.code()), mm = m;
    std::memcpy(reply.data(), &code, 4);
    std::memcpy(reply.data() + 4, &mm, 4);
    reply += s.message();
    const char* p = reply.data();
    size_t left = reply.size();
    while (left > 0) {
      const ssize_t w = ::write(fds[1], p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      p += w;
      left -= static_cast<size_t>(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string reply;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pf{fds[0], POLLIN, 0};
    const int r = ::poll(&pf, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // re-check the deadline
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Status::Corruption(fmt::format("the check did not finish within {} s (a hang?)", timeout_s));
  if (WIFSIGNALED(st))
    return Status::Corruption(fmt::format("the check crashed: signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st))));
  if (reply.size() < 8 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return Status::Corruption(fmt::format("the check ended without a verdict (exit status {})",
                                          WIFEXITED(st) ? WEXITSTATUS(st) : -1));
  int32_t code = 0, m = -1;
  std::memcpy(&code, reply.data(), 4);
  std::memcpy(&m, reply.data() + 4, 4);
  if (code == 0) {
    if (matched) *matched = m;
    return Status::OK();
  }
  return Status(static_cast<Code>(code), reply.substr(8));
}

namespace {
sigjmp_buf g_guard_jmp;
volatile sig_atomic_t g_guard_signal = 0;
void GuardHandler(int sig) {
  g_guard_signal = sig;
  siglongjmp(g_guard_jmp, 1);
}
}  // namespace

Status CheckCrashedPoolGuarded(const std::string& path, const CheckTarget& target,
                               const std::vector<const Contents*>& allowed, int* matched, bool* fatal,
                               int timeout_s) {
  *fatal = false;
  // An alternate stack, so that a stack overflow (runaway recursion) is caught too.
  static std::vector<char> alt_stack(1 << 16);
  stack_t ss{}, old_ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, &old_ss);
  constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGALRM};
  struct sigaction sa {}, old[5];
  sa.sa_handler = GuardHandler;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 5; ++i) ::sigaction(kSignals[i], &sa, &old[i]);
  g_guard_signal = 0;
  Status s;
  int m = -1;
  if (sigsetjmp(g_guard_jmp, 1) == 0) {
    ::alarm(static_cast<unsigned>(timeout_s));
    s = CheckCrashedPool(path, target, allowed, &m);
    ::alarm(0);
  } else {
    ::alarm(0);
    *fatal = true;
    const int sig = g_guard_signal;
    s = sig == SIGALRM ? Status::Corruption(fmt::format("the check did not finish within {} s (a hang?)", timeout_s))
                       : Status::Corruption(fmt::format("the check crashed: signal {} ({})", sig, strsignal(sig)));
  }
  for (int i = 0; i < 5; ++i) ::sigaction(kSignals[i], &old[i], nullptr);
  ::sigaltstack(&old_ss, nullptr);
  if (s.ok() && matched) *matched = m;
  return s;
}

std::string UniquePoolPath(const std::string& dir, const std::string& tag) {
  static std::atomic<uint64_t> n{0};
  std::string p = fmt::format("{}/wort-{}-{}-{}.pool", dir, tag, ::getpid(), n++);
  ::unlink(p.c_str());
  return p;
}

Status ResolveRunIndex(const std::string& index, const std::vector<OpType>& ops, const IndexOptions& opts,
                       bool key_type_from_dist, bench::Dist dist, IndexOptions* iopts) {
  if (!FindIndexKind(index)) return Status::InvalidArgument("unknown index kind '" + index + "'");
  if (ops.empty()) return Status::InvalidArgument("no operation types");
  IndexOptions o = opts;
  if (key_type_from_dist) o.key_type = bench::IsIntegerDist(dist) ? KeyType::kU64 : KeyType::kBytes;
  if (o.key_type == KeyType::kU64 && !bench::IsIntegerDist(dist))
    return Status::InvalidArgument("an integer key type needs an integer distribution (dense, sparse, clustered)");
  *iopts = o;
  return Status::OK();
}

Status ForkWithPipe(int fds[2], int* pid) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  *pid = ::fork();
  if (*pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError(std::string("fork: ") + std::strerror(err));
  }
  return Status::OK();
}

std::string ShortSourcePath(const char* file) {
  const std::string f = file ? file : "?";
  size_t best = std::string::npos;
  for (const char* dir : {"/src/", "/tests/", "/include/", "/tools/"}) {
    const size_t p = f.rfind(dir);
    if (p != std::string::npos && (best == std::string::npos || p > best)) best = p;
  }
  return best == std::string::npos ? f : f.substr(best + 1);
}

}  // namespace wort::crash
