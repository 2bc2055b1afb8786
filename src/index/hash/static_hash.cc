// LINP, CUCK, BCH, LEVL, PATH: see static_hash.h for the designs, invariants and write order.
#include "index/hash/static_hash.h"

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_set>
#include <vector>

#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"

namespace wort::hash {
namespace {

enum class Kind { kLinp, kCuck, kBch, kLevl, kPath };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kLinp: return "linp";
    case Kind::kCuck: return "cuck";
    case Kind::kBch: return "bch";
    case Kind::kLevl: return "levl";
    case Kind::kPath: return "path";
  }
  return "?";
}
constexpr uint32_t KindId(Kind k) {
  switch (k) {
    case Kind::kLinp: return kind_id::kLinp;
    case Kind::kCuck: return kind_id::kCuck;
    case Kind::kBch: return kind_id::kBch;
    case Kind::kLevl: return kind_id::kLevl;
    case Kind::kPath: return kind_id::kPath;
  }
  return 0;
}
bool KindFromId(uint32_t id, Kind* k) {
  for (Kind x : {Kind::kLinp, Kind::kCuck, Kind::kBch, Kind::kLevl, Kind::kPath})
    if (KindId(x) == id) return *k = x, true;
  return false;
}

constexpr unsigned kMaxDisplacements = 16;  // thesis: rehash after 16 failed displacements
constexpr unsigned kPathLevels = 8;         // thesis: path hashing's reserved levels

uint64_t Pow2Ceil(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
unsigned Log2(uint64_t v) { return 63 - __builtin_clzll(v); }
inline uint64_t H2(uint64_t h) { return MixU64(h, 0x5bd1e9955bd1e995ull); }

// Slots per bucket of a kind.
unsigned Spb(Kind k) { return k == Kind::kBch || k == Kind::kLevl ? 4 : 1; }

// The geometry of a table of size n (see TableHeader::n).
void Geometry(Kind k, uint64_t n, uint64_t slots[2], uint32_t* levels) {
  slots[0] = slots[1] = 0;
  *levels = 1;
  switch (k) {
    case Kind::kLinp:
    case Kind::kCuck: slots[0] = n; break;
    case Kind::kBch: slots[0] = 4 * n; break;
    case Kind::kLevl:
      slots[0] = 4 * n;
      slots[1] = 2 * n;
      break;
    case Kind::kPath: {
      *levels = std::min<uint32_t>(kPathLevels, Log2(n) + 1);
      for (uint32_t l = 0; l < *levels; ++l) slots[0] += n >> l;
      break;
    }
  }
}

uint64_t InitialN(Kind k, uint64_t cap) {
  switch (k) {
    case Kind::kLinp:
    case Kind::kCuck: return std::max<uint64_t>(16, Pow2Ceil(cap));
    case Kind::kBch: return std::max<uint64_t>(4, Pow2Ceil((cap + 3) / 4));
    case Kind::kLevl: return std::max<uint64_t>(4, Pow2Ceil((cap + 5) / 6));
    case Kind::kPath: return std::max<uint64_t>(16, Pow2Ceil((cap + 1) / 2));
  }
  return 16;
}

// A DRAM view of a table.
struct View {
  uint64_t off = 0;  // header offset
  TableHeader* h = nullptr;
  HSlot* a[2] = {nullptr, nullptr};
  uint64_t slots[2] = {0, 0};
  uint64_t n = 0;
  uint32_t levels = 1;
};

class StaticHash;
std::mutex g_reg_mu;
std::map<std::pair<const Pool*, uint64_t>, StaticHash*>& Registry() {
  static std::map<std::pair<const Pool*, uint64_t>, StaticHash*> m;
  return m;
}

class StaticHash final : public HashIndexBase {
 public:
  StaticHash(Pool& pool, uint64_t root_off, HashRoot* root, Kind kind)
      : HashIndexBase(pool, root_off, root, KindName(kind), kind == Kind::kLinp),
        type_(kind),
        spb_(Spb(kind)),
        rng_(root->seed | 1) {
    std::lock_guard<std::mutex> g(g_reg_mu);
    Registry()[{&pool, root_off}] = this;
  }
  ~StaticHash() override {
    std::lock_guard<std::mutex> g(g_reg_mu);
    Registry().erase({&pool_, root_off_});
  }

  Status Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) override;
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  uint64_t Size() const override {
    std::lock_guard<std::mutex> g(mu_);
    EnsureCount();
    return count_;
  }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;
  void CollectRecords(Records* out) const override;
  using HashIndexBase::Lookup;
  using HashIndexBase::Remove;

  // Removes the duplicates an interrupted displacement leaves (Open after an unclean stop).
  void DuplicateSweep();
  std::mutex& mu() const { return mu_; }

 private:
  View Current() const { return ViewOf(pool_, pm::load8(&root_->table)); }
 public:
  static View ViewOf(const Pool& pool, uint64_t off) {
    View v;
    v.off = off;
    v.h = pool.at<TableHeader>(off);
    for (int i = 0; i < 2; ++i) {
      v.slots[i] = v.h->slots[i];
      v.a[i] = v.slots[i] ? pool.at<HSlot>(v.h->array[i]) : nullptr;
    }
    v.n = v.h->n;
    v.levels = v.h->levels;
    return v;
  }

 private:
  uint64_t RecordHash(uint64_t w) const { return codec_.FullHash(w); }
  HSlot* Bucket(const View& v, int arr, uint64_t b) const { return v.a[arr] + b * spb_; }

  // Calls fn(slot) for each candidate slot of a hash, in the canonical order, until fn returns
  // true; returns whether it did. Not for LINP (its probe sequence depends on the contents).
  template <class Fn>
  bool ForEachCandidate(const View& v, uint64_t h, Fn&& fn) const {
    const uint64_t g = H2(h);
    switch (type_) {
      case Kind::kLinp: return false;
      case Kind::kCuck: {
        const uint64_t p1 = h & (v.n - 1), p2 = g & (v.n - 1);
        if (fn(&v.a[0][p1])) return true;
        return p2 != p1 && fn(&v.a[0][p2]);
      }
      case Kind::kBch:
      case Kind::kLevl: {
        const uint64_t b1 = h & (v.n - 1), b2 = g & (v.n - 1);
        const uint64_t nb[2] = {v.n, v.n / 2};
        for (int arr = 0; arr < (type_ == Kind::kLevl ? 2 : 1); ++arr) {
          const uint64_t x = b1 & (nb[arr] - 1), y = b2 & (nb[arr] - 1);
          for (unsigned j = 0; j < spb_; ++j)
            if (fn(&Bucket(v, arr, x)[j])) return true;
          if (y != x)
            for (unsigned j = 0; j < spb_; ++j)
              if (fn(&Bucket(v, arr, y)[j])) return true;
        }
        return false;
      }
      case Kind::kPath: {
        const uint64_t p1 = h & (v.n - 1), p2 = g & (v.n - 1);
        uint64_t base = 0;
        for (uint32_t l = 0; l < v.levels; ++l) {
          const uint64_t x = p1 >> l, y = p2 >> l;
          if (fn(&v.a[0][base + x])) return true;
          if (y != x && fn(&v.a[0][base + y])) return true;
          base += v.n >> l;
        }
        return false;
      }
    }
    return false;
  }

  HSlot* Find(const View& v, const Probe& p) const {
    HSlot* found = nullptr;
    if (type_ == Kind::kLinp) {
      uint64_t i = p.hash & (v.n - 1);
      for (uint64_t k = 0; k < v.n; ++k, i = (i + 1) & (v.n - 1)) {
        const uint64_t w = v.a[0][i].key;
        if (w == 0) return nullptr;
        if (w != codec_.tombstone() && codec_.Matches(w, p)) return &v.a[0][i];
      }
      return nullptr;
    }
    ForEachCandidate(v, p.hash, [&](HSlot* s) {
      const uint64_t w = s->key;
      if (w != 0 && codec_.Matches(w, p)) return found = s, true;
      return false;
    });
    return found;
  }

  // Writes a record into a slot that holds nothing or something that is not (or no longer) needed
  // there; see "Displacement" in static_hash.h. With persist == false the table is private (a
  // rehash in progress) and is persisted as a whole later.
  static void WriteSlot(HSlot* s, uint64_t word, uint64_t value, bool persist) {
    if (!persist) {
      s->value = value;
      s->key = word;
      return;
    }
    pm::store8(&s->key, 0);
    pm::store8(&s->value, value);
    pm::store8(&s->key, word);  // COMMIT of an insert (or the arrival of a displaced record)
    pm::persist(s, sizeof(HSlot));
  }

  unsigned Empties(const HSlot* b) const {
    unsigned n = 0;
    for (unsigned j = 0; j < spb_; ++j) n += b[j].key == 0;
    return n;
  }
  HSlot* EmptyIn(HSlot* b) const {
    for (unsigned j = 0; j < spb_; ++j)
      if (b[j].key == 0) return &b[j];
    return nullptr;
  }

  bool Place(View& v, uint64_t h, uint64_t word, uint64_t value, bool live);
  bool PlaceLinp(View& v, uint64_t h, uint64_t word, uint64_t value, bool live);
  bool PlaceCuckoo(View& v, uint64_t h, uint64_t word, uint64_t value, bool live);
  bool PlaceLevel(View& v, uint64_t h, uint64_t word, uint64_t value, bool live, bool allow_moves);
  bool PlacePath(View& v, uint64_t h, uint64_t word, uint64_t value, bool live);

  Status BuildTable(uint64_t n, View* out);
  void FreeTable(const View& v, bool free_array1);
  void Commit(const View& old, const View& nv, bool free_old_array0, bool free_old_array1);
  Status Rehash();
  Status LevelResize();
  void EnsureCount() const;
  uint64_t NextRandom() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  const Kind type_;
  const unsigned spb_;
  uint64_t rng_;
  mutable std::mutex mu_;
  mutable bool count_known_ = false;
  mutable uint64_t count_ = 0;  // records + occupied special slots
  mutable uint64_t used_ = 0;   // LINP: slots holding records or tombstones
};

// ---- placement -----------------------------------------------------------------------------

bool StaticHash::Place(View& v, uint64_t h, uint64_t word, uint64_t value, bool live) {
  switch (type_) {
    case Kind::kLinp: return PlaceLinp(v, h, word, value, live);
    case Kind::kCuck:
    case Kind::kBch: return PlaceCuckoo(v, h, word, value, live);
    case Kind::kLevl: return PlaceLevel(v, h, word, value, live, true);
    case Kind::kPath: return PlacePath(v, h, word, value, live);
  }
  return false;
}

bool StaticHash::PlaceLinp(View& v, uint64_t h, uint64_t word, uint64_t value, bool live) {
  uint64_t i = h & (v.n - 1);
  HSlot* tomb = nullptr;
  for (uint64_t k = 0; k < v.n; ++k, i = (i + 1) & (v.n - 1)) {
    const uint64_t w = v.a[0][i].key;
    if (w == 0) {
      HSlot* d = tomb ? tomb : &v.a[0][i];
      if (!tomb) ++used_;
      WriteSlot(d, word, value, live);
      return true;
    }
    if (w == codec_.tombstone() && !tomb) tomb = &v.a[0][i];
  }
  if (!tomb) return false;
  WriteSlot(tomb, word, value, live);
  return true;
}

// Cuckoo insertion with a path of at most kMaxDisplacements moves, found first by a random walk
// (no writes), then executed from its end so that every record stays reachable throughout.
bool StaticHash::PlaceCuckoo(View& v, uint64_t h, uint64_t word, uint64_t value, bool live) {
  const uint64_t mask = v.n - 1;  // CUCK: cells; BCH: buckets
  const uint64_t b[2] = {h & mask, H2(h) & mask};
  for (uint64_t x : b)
    if (HSlot* e = EmptyIn(Bucket(v, 0, x))) {
      WriteSlot(e, word, value, live);
      return true;
    }
  const uint64_t t0 = live ? NowNs() : 0;
  std::vector<HSlot*> path;  // path[i + 1] lies in the other bucket of path[i]'s record
  uint64_t cur = b[NextRandom() & 1];
  HSlot* empty = nullptr;
  for (unsigned d = 0; d < kMaxDisplacements && !empty; ++d) {
    // A victim in the current bucket that is not on the path yet and can move elsewhere.
    HSlot* victim = nullptr;
    uint64_t alt = 0;
    const uint64_t start = NextRandom();
    for (unsigned t = 0; t < spb_ && !victim; ++t) {
      HSlot* c = &Bucket(v, 0, cur)[(start + t) % spb_];
      if (std::find(path.begin(), path.end(), c) != path.end()) continue;
      const uint64_t vh = RecordHash(c->key);
      const uint64_t v1 = vh & mask, v2 = H2(vh) & mask;
      const uint64_t a = v1 == cur ? v2 : v1;
      if (a == cur) continue;
      victim = c;
      alt = a;
    }
    if (!victim) break;
    path.push_back(victim);
    empty = EmptyIn(Bucket(v, 0, alt));
    cur = alt;
  }
  if (!empty) return false;
  HSlot* dest = empty;
  for (size_t i = path.size(); i-- > 0;) {
    WriteSlot(dest, path[i]->key, path[i]->value, live);
    dest = path[i];
  }
  WriteSlot(dest, word, value, live);  // the insert's COMMIT (live)
  if (live) AddDisplacement(path.size(), NowNs() - t0);
  return true;
}

// Level hashing insertion (see static_hash.h). allow_moves = false during a resize.
bool StaticHash::PlaceLevel(View& v, uint64_t h, uint64_t word, uint64_t value, bool live, bool allow_moves) {
  const uint64_t g = H2(h);
  const uint64_t nb[2] = {v.n, v.n / 2};
  for (int arr = 0; arr < 2; ++arr) {
    HSlot* x = Bucket(v, arr, h & (nb[arr] - 1));
    HSlot* y = Bucket(v, arr, g & (nb[arr] - 1));
    HSlot* first = Empties(y) > Empties(x) ? y : x;
    HSlot* second = first == x ? y : x;
    HSlot* e = EmptyIn(first);
    if (!e) e = EmptyIn(second);
    if (e) {
      WriteSlot(e, word, value, live);
      return true;
    }
  }
  if (!allow_moves) return false;
  // One movement: a record of a candidate bucket to its other bucket of the same level.
  const uint64_t t0 = live ? NowNs() : 0;
  for (int arr = 0; arr < 2; ++arr) {
    const uint64_t mask = nb[arr] - 1;
    for (uint64_t bk : {h & mask, g & mask}) {
      HSlot* b = Bucket(v, arr, bk);
      for (unsigned j = 0; j < spb_; ++j) {
        const uint64_t rh = RecordHash(b[j].key);
        const uint64_t r1 = rh & mask, r2 = H2(rh) & mask;
        const uint64_t alt = r1 == bk ? r2 : r1;
        if (alt == bk) continue;
        if (HSlot* e = EmptyIn(Bucket(v, arr, alt))) {
          WriteSlot(e, b[j].key, b[j].value, live);
          WriteSlot(&b[j], word, value, live);  // the insert's COMMIT (live)
          if (live) AddDisplacement(1, NowNs() - t0);
          return true;
        }
      }
    }
  }
  return false;
}

bool StaticHash::PlacePath(View& v, uint64_t h, uint64_t word, uint64_t value, bool live) {
  HSlot* e = nullptr;
  ForEachCandidate(v, h, [&](HSlot* s) { return s->key == 0 ? (e = s, true) : false; });
  if (!e) return false;
  WriteSlot(e, word, value, live);
  return true;
}

// ---- tables --------------------------------------------------------------------------------

Status StaticHash::BuildTable(uint64_t n, View* out) {
  uint64_t slots[2];
  uint32_t levels;
  Geometry(type_, n, slots, &levels);
  uint64_t hoff = 0;
  WORT_RETURN_IF_ERROR(alloc_.AllocZeroed(sizeof(TableHeader), &hoff));
  auto* th = pool_.at<TableHeader>(hoff);
  th->magic = TableHeader::kMagic;
  th->type_id = KindId(type_);
  th->levels = levels;
  th->n = n;
  for (int i = 0; i < 2; ++i) {
    th->slots[i] = slots[i];
    if (!slots[i]) continue;
    Status s = alloc_.AllocZeroed(slots[i] * sizeof(HSlot), &th->array[i]);
    if (!s.ok()) {
      if (i == 1) alloc_.Free(th->array[0]);
      alloc_.Free(hoff);
      return s;
    }
  }
  *out = ViewOf(pool_, hoff);
  return Status::OK();
}

void StaticHash::FreeTable(const View& v, bool free_array1) {
  if (v.slots[0]) alloc_.Free(v.h->array[0]);
  if (v.slots[1] && free_array1) alloc_.Free(v.h->array[1]);
  alloc_.Free(v.off);
}

// Persists a new table built off to the side; COMMIT: root.table := its header; then frees the
// old header and the old arrays the new table does not reuse.
void StaticHash::Commit(const View& old, const View& nv, bool free_old_array0, bool free_old_array1) {
  for (int i = 0; i < 2; ++i)
    if (nv.slots[i] && nv.h->array[i] != old.h->array[0] && nv.h->array[i] != old.h->array[1])
      pm::flush(nv.a[i], nv.slots[i] * sizeof(HSlot));
  pm::flush(nv.h, sizeof(TableHeader));
  pm::fence();
  pm::store8(&root_->table, nv.off);
  pm::persist(&root_->table, 8);
  const uint64_t a0 = old.h->array[0], a1 = old.h->array[1];
  alloc_.Free(old.off);
  if (old.slots[0] && free_old_array0) alloc_.Free(a0);
  if (old.slots[1] && free_old_array1) alloc_.Free(a1);
}

// Full-table rehash into a table of twice the size (LINP: the same size when at most 45% of the
// slots hold records; CUCK/BCH/PATH/LEVL fallback: doubling again if a record cannot be placed).
Status StaticHash::Rehash() {
  const uint64_t t0 = NowNs();
  const View old = Current();
  uint64_t n = old.n * 2;
  if (type_ == Kind::kLinp && (count_ + 1) * 100 <= old.n * 45) n = old.n;
  for (int attempt = 0; attempt < 6; ++attempt, n *= 2) {
    View nv;
    WORT_RETURN_IF_ERROR(BuildTable(n, &nv));
    bool ok = true;
    uint64_t placed = 0;
    const uint64_t saved_rng = rng_;
    for (int i = 0; i < 2 && ok; ++i)
      for (uint64_t k = 0; k < old.slots[i] && ok; ++k) {
        const HSlot& s = old.a[i][k];
        if (!codec_.IsRecord(s.key)) continue;
        ok = Place(nv, RecordHash(s.key), s.key, s.value, false);
        ++placed;
      }
    if (!ok) {
      rng_ = saved_rng;
      FreeTable(nv, true);
      continue;
    }
    if (type_ == Kind::kLinp) used_ = placed;
    Commit(old, nv, true, true);
    AddRehash(NowNs() - t0, false, false, true);
    return Status::OK();
  }
  return Status::PoolFull(std::string(kind_) + ": rehash could not place every record");
}

// LEVL: a new top of twice the buckets receives the bottom level's records; the old top becomes
// the bottom. Falls back to a full rehash if a record does not fit.
Status StaticHash::LevelResize() {
  const uint64_t t0 = NowNs();
  const View old = Current();
  uint64_t top = 0, hoff = 0;
  const uint64_t n = old.n * 2;
  WORT_RETURN_IF_ERROR(alloc_.AllocZeroed(4 * n * sizeof(HSlot), &top));
  Status s = alloc_.AllocZeroed(sizeof(TableHeader), &hoff);
  if (!s.ok()) {
    alloc_.Free(top);
    return s;
  }
  auto* th = pool_.at<TableHeader>(hoff);
  th->magic = TableHeader::kMagic;
  th->type_id = KindId(type_);
  th->levels = 1;
  th->n = n;
  th->slots[0] = 4 * n;
  th->array[0] = top;
  th->slots[1] = old.slots[0];
  th->array[1] = old.h->array[0];
  View nv = ViewOf(pool_, hoff);
  bool ok = true;
  for (uint64_t k = 0; k < old.slots[1] && ok; ++k) {
    const HSlot& r = old.a[1][k];
    if (!r.key) continue;
    const uint64_t h = RecordHash(r.key), g = H2(h);
    HSlot* x = Bucket(nv, 0, h & (n - 1));
    HSlot* y = Bucket(nv, 0, g & (n - 1));
    HSlot* e = EmptyIn(Empties(y) > Empties(x) ? y : x);
    if (!e) e = EmptyIn(Empties(y) > Empties(x) ? x : y);
    if (!e) ok = false;
    else WriteSlot(e, r.key, r.value, false);
  }
  if (!ok) {
    alloc_.Free(hoff);
    alloc_.Free(top);
    return Rehash();
  }
  Commit(old, nv, /*free_old_array0=*/false, /*free_old_array1=*/true);
  AddRehash(NowNs() - t0, false, false, true);
  return Status::OK();
}

void StaticHash::EnsureCount() const {
  if (count_known_) return;
  const View v = Current();
  uint64_t c = 0, used = 0;
  for (int i = 0; i < 2; ++i)
    for (uint64_t k = 0; k < v.slots[i]; ++k) {
      const uint64_t w = v.a[i][k].key;
      c += codec_.IsRecord(w);
      used += w != 0;
    }
  count_ = c + ZeroPresent(0) + ZeroPresent(1);
  used_ = used;
  count_known_ = true;
}

void StaticHash::DuplicateSweep() {
  if (type_ == Kind::kLinp || type_ == Kind::kPath) return;  // these never move records
  std::lock_guard<std::mutex> g(mu_);
  const View v = Current();
  for (int i = 0; i < 2; ++i)
    for (uint64_t k = 0; k < v.slots[i]; ++k) {
      HSlot* s = &v.a[i][k];
      const uint64_t w = s->key;
      if (!w) continue;
      HSlot* first = nullptr;
      ForEachCandidate(v, RecordHash(w), [&](HSlot* c) { return c->key == w ? (first = c, true) : false; });
      if (first && first != s) {
        pm::store8(&s->key, 0);
        pm::persist(&s->key, 8);
      }
    }
  count_known_ = false;
}

// ---- operations ----------------------------------------------------------------------------

Status StaticHash::Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  std::lock_guard<std::mutex> g(mu_);
  EnsureCount();
  if (p.zero) {
    bool ins = false;
    WORT_RETURN_IF_ERROR(ZeroPut(value, upsert, &ins, p.special));
    count_ += ins;
    if (inserted) *inserted = ins;
    return Status::OK();
  }
  View v = Current();
  if (HSlot* s = Find(v, p)) {
    if (!upsert) return Status::AlreadyExists("key exists");
    pm::store8(&s->value, value);  // COMMIT
    pm::persist(&s->value, 8);
    if (inserted) *inserted = false;
    return Status::OK();
  }
  if (type_ == Kind::kLinp && (used_ + 1) * 100 > v.n * 95) {
    WORT_RETURN_IF_ERROR(Rehash());
    v = Current();
  }
  uint64_t word = 0;
  WORT_RETURN_IF_ERROR(codec_.MakeWord(alloc_, p, &word));
  while (!Place(v, p.hash, word, value, true)) {
    const Status s = type_ == Kind::kLevl ? LevelResize() : Rehash();
    if (!s.ok()) {
      codec_.FreeWord(alloc_, word);
      return s;
    }
    v = Current();
  }
  ++count_;
  if (inserted) *inserted = true;
  return Status::OK();
}

Status StaticHash::Lookup(std::string_view key, uint64_t* value) const {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  std::lock_guard<std::mutex> g(mu_);
  if (p.zero) return ZeroGet(value, p.special);
  const HSlot* s = Find(Current(), p);
  if (!s) return Status::NotFound("key not found");
  *value = s->value;
  return Status::OK();
}

Status StaticHash::Remove(std::string_view key) {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  std::lock_guard<std::mutex> g(mu_);
  EnsureCount();
  if (p.zero) {
    WORT_RETURN_IF_ERROR(ZeroRemove(p.special));
    --count_;
    return Status::OK();
  }
  HSlot* s = Find(Current(), p);
  if (!s) return Status::NotFound("key not found");
  const uint64_t w = s->key;
  // COMMIT: the key word := empty (LINP: tombstone, so that probe sequences stay unbroken).
  pm::store8(&s->key, type_ == Kind::kLinp ? codec_.tombstone() : 0);
  pm::persist(&s->key, 8);
  --count_;
  codec_.FreeWord(alloc_, w);
  return Status::OK();
}

// ---- check, stats --------------------------------------------------------------------------

Status StaticHash::Check(std::string* report) const {
  std::lock_guard<std::mutex> g(mu_);
  std::string r;
  size_t problems = 0;
  auto bad = [&](const std::string& m) {
    if (problems++ < 20) r += std::string(kind_) + ": " + m + "\n";
  };
  const uint64_t off = pm::load8(&root_->table);
  if (off == 0 || !pool_.contains(off, sizeof(TableHeader))) {
    bad("S1: root.table outside the pool");
  } else {
    const View v = Current();
    uint64_t slots[2];
    uint32_t levels;
    Geometry(type_, v.n, slots, &levels);
    if (v.h->magic != TableHeader::kMagic || v.h->type_id != KindId(type_) || (v.n & (v.n - 1)) != 0 ||
        slots[0] != v.slots[0] || slots[1] != v.slots[1] || levels != v.levels) {
      bad("S1: malformed table header");
    } else {
      for (int i = 0; i < 2; ++i)
        if (v.slots[i] && !pool_.contains(v.h->array[i], v.slots[i] * sizeof(HSlot))) bad("S1: array outside the pool");
      if (problems == 0) {
        std::unordered_set<std::string> keys;
        uint64_t records = 0;
        for (int i = 0; i < 2; ++i)
          for (uint64_t k = 0; k < v.slots[i]; ++k) {
            HSlot* s = &v.a[i][k];
            const uint64_t w = s->key;
            if (w == 0) continue;
            if (type_ == Kind::kLinp && w == codec_.tombstone()) continue;
            ++records;
            if (!codec_.CheckWord(w, &r)) {
              ++problems;
              continue;
            }
            const uint64_t h = RecordHash(w);
            bool at_candidate = false;
            if (type_ == Kind::kLinp) {
              at_candidate = true;
              for (uint64_t j = h & (v.n - 1); j != k; j = (j + 1) & (v.n - 1))
                if (v.a[0][j].key == 0) at_candidate = false;
            } else {
              ForEachCandidate(v, h, [&](HSlot* c) { return at_candidate = c == s; });
            }
            if (!at_candidate) bad("S2: record at array " + std::to_string(i) + " slot " + std::to_string(k) + " not reachable from its hash");
            if (!keys.insert(codec_.KeyOf(w)).second) bad("S2: duplicate key " + codec_.KeyOf(w));
          }
        records += ZeroPresent(0) + ZeroPresent(1);
        if (codec_.key_type() == KeyType::kBytes && (ZeroPresent(0) || ZeroPresent(1))) bad("special slot used by a byte-key table");
        EnsureCount();
        if (records != count_) bad("S3: Size() is " + std::to_string(count_) + " but the table holds " + std::to_string(records));
      }
    }
  }
  if (problems > 20) r += std::string(kind_) + ": ... " + std::to_string(problems - 20) + " more\n";
  if (report) *report += r;
  return problems == 0 ? Status::OK() : Status::Corruption(std::string(kind_) + " check failed");
}

void StaticHash::CollectRecords(Records* out) const {
  std::lock_guard<std::mutex> g(mu_);  // every operation of the table holds it (special slots too)
  const View v = Current();
  for (int i = 0; i < 2; ++i)
    for (uint64_t k = 0; k < v.slots[i]; ++k) {
      const uint64_t w = v.a[i][k].key;
      if (codec_.IsRecord(w)) AppendRecord(w, v.a[i][k].value, out);
    }
  AppendSpecialRecords(out);
}

IndexStats StaticHash::Stats() const {
  std::lock_guard<std::mutex> g(mu_);
  EnsureCount();
  IndexStats st;
  st.keys = count_;
  const View v = Current();
  st.inner_nodes = (v.slots[0] != 0) + (v.slots[1] != 0);
  st.bytes_allocated = alloc_.UsableSize(root_off_) + alloc_.UsableSize(v.off);
  for (int i = 0; i < 2; ++i) {
    if (!v.slots[i]) continue;
    st.bytes_allocated += alloc_.UsableSize(v.h->array[i]);
    for (uint64_t k = 0; k < v.slots[i]; ++k)
      if (codec_.IsRecord(v.a[i][k].key))
        if (const uint64_t kb = codec_.BlockOf(v.a[i][k].key)) {
          ++st.leaves;
          st.bytes_allocated += alloc_.UsableSize(kb);
        }
  }
  return st;
}

// ---- kind functions ------------------------------------------------------------------------

Status CreateStatic(Pool& pool, const IndexOptions& opts, uint64_t* root_off, Kind kind) {
  if (pool.max_size() > kMaxKeyBlockOffset) return Status::NotSupported("hash tables address pools up to 32 TiB");
  uint64_t root = 0;
  WORT_RETURN_IF_ERROR(CreateRoot(pool, KindId(kind), opts, 0, 0, 0, &root));
  Allocator& a = pool.allocator();
  uint64_t slots[2];
  uint32_t levels;
  const uint64_t n = InitialN(kind, InitialCapacity(opts));
  Geometry(kind, n, slots, &levels);
  uint64_t hoff = 0, arr[2] = {0, 0};
  Status s = a.AllocZeroed(sizeof(TableHeader), &hoff);
  for (int i = 0; i < 2 && s.ok(); ++i)
    if (slots[i]) s = a.AllocZeroed(slots[i] * sizeof(HSlot), &arr[i]);
  if (!s.ok()) {
    for (uint64_t o : {arr[0], arr[1], hoff, root})
      if (o) a.Free(o);
    return s;
  }
  auto* th = pool.at<TableHeader>(hoff);
  th->magic = TableHeader::kMagic;
  th->type_id = KindId(kind);
  th->levels = levels;
  th->n = n;
  for (int i = 0; i < 2; ++i) {
    th->slots[i] = slots[i];
    th->array[i] = arr[i];
    // The new slot arrays are AllocZeroed (zero in the cache only): needed over reused space; the
    // plans' first step creates the table over non-zero free space (--dirty-free-space) and
    // catches its removal.
    if (slots[i]) pm::flush(pool.at<void>(arr[i]), slots[i] * sizeof(HSlot));
  }
  pm::persist(th, sizeof(TableHeader));
  auto* r = pool.at<HashRoot>(root);
  pm::store8(&r->table, hoff);
  pm::persist(&r->table, 8);
  *root_off = root;
  return Status::OK();
}

bool HeaderSane(const Pool& pool, uint64_t off, Kind kind) {
  if (off == 0 || !pool.contains(off, sizeof(TableHeader))) return false;
  const auto* th = pool.at<const TableHeader>(off);
  if (th->magic != TableHeader::kMagic || th->type_id != KindId(kind) || th->n == 0 || (th->n & (th->n - 1))) return false;
  // The slot counts and levels are the geometry of n (the probes index the arrays by it), and
  // each array lies inside the pool (bounded first: a huge count must not wrap the product).
  if (th->n > pool.size() / sizeof(HSlot)) return false;
  uint64_t slots[2];
  uint32_t levels = 1;
  Geometry(kind, th->n, slots, &levels);
  if (th->levels != levels) return false;
  for (int i = 0; i < 2; ++i) {
    if (th->slots[i] != slots[i]) return false;
    if (th->slots[i] && (th->slots[i] > pool.size() / sizeof(HSlot) || !pool.contains(th->array[i], th->slots[i] * sizeof(HSlot))))
      return false;
  }
  return true;
}

Status OpenStatic(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out, Kind kind) {
  HashRoot* r = nullptr;
  WORT_RETURN_IF_ERROR(OpenRoot(pool, root_off, KindId(kind), KindName(kind), &r));
  if (!HeaderSane(pool, r->table, kind)) return Status::Corruption(std::string(KindName(kind)) + " table header is malformed");
  std::shared_ptr<void> token;  // one handle per index (registry.h)
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, KindName(kind), &token));
  auto idx = std::make_unique<StaticHash>(pool, root_off, r, kind);
  idx->KeepSoleHandle(std::move(token));
  if (!pool.read_only() && !pool.opened_clean()) idx->DuplicateSweep();
  *out = std::move(idx);
  return Status::OK();
}

void VisitTable(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  if (root_off == 0 || !pool.contains(root_off, sizeof(HashRoot))) return;
  mark(root_off);
  const auto* r = pool.at<const HashRoot>(root_off);
  Kind kind;
  if (r->magic != HashRoot::kMagic || !KindFromId(r->type_id, &kind)) return;
  const KeyType kt = static_cast<KeyType>(r->key_type);
  const KeyCodec codec(&pool, kt, r->seed, kind == Kind::kLinp);
  const bool vab = (r->flags & HashRoot::kValuesAreBlocks) != 0;
  const uint64_t off = pm::load8(&r->table);
  if (HeaderSane(pool, off, kind)) {
    mark(off);
    const View v = StaticHash::ViewOf(pool, off);
    for (int i = 0; i < 2; ++i) {
      if (!v.slots[i]) continue;
      mark(v.h->array[i]);
      for (uint64_t k = 0; k < v.slots[i]; ++k) {
        const uint64_t w = pm::load8(&v.a[i][k].key);
        if (!codec.IsRecord(w)) continue;
        const uint64_t kb = codec.BlockOf(w);
        if (kb && pool.contains(kb, sizeof(KeyBlock))) mark(kb);
        if (vab) {
          const uint64_t val = pm::load8(&v.a[i][k].value);
          if (val && pool.contains(val, 1)) mark(val);
        }
      }
    }
  }
  if (vab && kt == KeyType::kU64)
    for (int which = 0; which < 2; ++which) {
      const uint64_t* present = which == 0 ? &r->zero_present : &r->aux_present;
      const uint64_t* value = which == 0 ? &r->zero_value : &r->aux_value;
      if (pm::load8(present)) {
        const uint64_t val = pm::load8(value);
        if (val && pool.contains(val, 1)) mark(val);
      }
    }
}

// Visit holds the table's mutex if the table is open in this process (see static_hash.h).
void VisitStatic(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  std::lock_guard<std::mutex> g(g_reg_mu);
  auto it = Registry().find({&pool, root_off});
  if (it == Registry().end()) return VisitTable(pool, root_off, mark);
  std::lock_guard<std::mutex> t(it->second->mu());
  VisitTable(pool, root_off, mark);
}

#define WORT_STATIC_KIND(K, NAME, DESC)                                                                  \
  Status Create##K(Pool& p, const IndexOptions& o, uint64_t* r) { return CreateStatic(p, o, r, Kind::k##K); } \
  Status Open##K(Pool& p, uint64_t r, std::unique_ptr<Index>* out) { return OpenStatic(p, r, out, Kind::k##K); } \
  constinit const IndexKind k##K##Kind = {NAME, KindId(Kind::k##K), DESC, false, &Create##K, &Open##K, &VisitStatic};

WORT_STATIC_KIND(Linp, "linp", "LINP: linear probing, tombstones, full rehash at 95% load (single-threaded)")
WORT_STATIC_KIND(Cuck, "cuck", "CUCK: cuckoo hashing, 2 hash functions, 16 displacements, full rehash (single-threaded)")
WORT_STATIC_KIND(Bch, "bch", "BCH: bucketized cuckoo hashing, 4-slot cache-line buckets (single-threaded)")
WORT_STATIC_KIND(Levl, "levl", "LEVL: level hashing with cache-line buckets, two levels, one movement (single-threaded)")
WORT_STATIC_KIND(Path, "path", "PATH: path hashing, 8 reserved levels, full rehash (single-threaded)")

}  // namespace
}  // namespace wort::hash

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Linp() { return &wort::hash::kLinpKind; }
const wort::IndexKind* wort::builtin_kinds::Cuck() { return &wort::hash::kCuckKind; }
const wort::IndexKind* wort::builtin_kinds::Bch() { return &wort::hash::kBchKind; }
const wort::IndexKind* wort::builtin_kinds::Levl() { return &wort::hash::kLevlKind; }
const wort::IndexKind* wort::builtin_kinds::Path() { return &wort::hash::kPathKind; }
