// Shared parts of the hash tables (see hash_common.h).
#include "index/hash/hash_common.h"

#include <chrono>
#include <cstdlib>
#include <random>

#include "index/root_block.h"

namespace wort::hash {

namespace {
constexpr uint64_t kP1 = 0x9e3779b185ebca87ull;
constexpr uint64_t kP2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kP3 = 0x165667b19e3779f9ull;

inline uint64_t Read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}
}  // namespace

uint64_t HashBytes(const void* data, size_t len, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed ^ (len * kP1) ^ 0x27d4eb2f165667c5ull;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    h ^= Rotl(Read64(p + i) * kP2, 31) * kP1;
    h = Rotl(h, 27) * kP1 + kP3;
  }
  if (i < len) {
    uint64_t t = 0;
    for (size_t j = 0; i + j < len; ++j) t |= uint64_t(p[i + j]) << (8 * j);
    h ^= Rotl(t * kP2, 31) * kP1;
    h = Rotl(h, 27) * kP1 + kP3;
  }
  return Avalanche(h);
}

Status KeyCodec::PrepareSlow(std::string_view key, Probe* p) const {
  p->key = key;
  p->zero = false;
  if (kt_ == KeyType::kU64) {
    if (key.size() != 8) return Status::InvalidArgument("key of a u64 index must be 8 bytes, got " + std::to_string(key.size()));
    p->hash = MixU64(DecodeU64(key), seed_);
    p->word = p->hash;
    p->special = p->hash == 0 ? 0 : (tomb_ != 0 && p->hash == tomb_) ? 1 : -1;
    p->zero = p->special >= 0;
    return Status::OK();
  }
  if (key.size() > kMaxKeyLen)
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds kMaxKeyLen");
  p->hash = HashBytes(key.data(), key.size(), seed_);
  p->word = key.size() <= 7 ? MakeInlineWord(key) : 0;
  p->zero = false;
  p->special = -1;
  return Status::OK();
}

Status KeyCodec::MakeWord(Allocator& a, const Probe& p, uint64_t* w) const {
  if (p.word != 0) {
    *w = p.word;
    return Status::OK();
  }
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(a.Alloc(sizeof(KeyBlock) + p.key.size(), &off));
  if (off >= kMaxKeyBlockOffset) {
    a.Free(off);
    return Status::PoolFull("key block beyond the 32 TiB a key word can address");
  }
  auto* kb = pool_->at<KeyBlock>(off);
  kb->hash = p.hash;
  kb->len = static_cast<uint32_t>(p.key.size());
  kb->pad = 0;
  std::memcpy(kb->bytes(), p.key.data(), p.key.size());
  pm::persist(kb, sizeof(KeyBlock) + p.key.size());
  *w = MakeBlockWord(p.hash, off);
  return Status::OK();
}

bool KeyCodec::CheckWord(uint64_t w, std::string* report) const {
  if (kt_ == KeyType::kU64 || WordIsInline(w)) {
    if (kt_ == KeyType::kBytes && (w & 0xf0) != 0) {
      *report += "inline key word with reserved bits set\n";
      return false;
    }
    return true;
  }
  const uint64_t off = WordBlockOffset(w);
  if (!pool_->contains(off, sizeof(KeyBlock))) {
    *report += "key block offset " + std::to_string(off) + " outside the pool\n";
    return false;
  }
  const KeyBlock* kb = pool_->at<const KeyBlock>(off);
  if (kb->len < 8 || kb->len > kMaxKeyLen || !pool_->contains(off, sizeof(KeyBlock) + kb->len)) {
    *report += "key block at " + std::to_string(off) + " has bad length " + std::to_string(kb->len) + "\n";
    return false;
  }
  if (HashBytes(kb->bytes(), kb->len, seed_) != kb->hash || (kb->hash >> 40) != (w >> 40)) {
    *report += "key block at " + std::to_string(off) + " has a wrong hash or fingerprint\n";
    return false;
  }
  return true;
}

std::string KeyCodec::KeyOf(uint64_t w) const {
  if (kt_ == KeyType::kU64) return "mixed:" + std::to_string(w);
  if (WordIsInline(w)) {
    char b[8];
    InlineBytes(w, b);
    return std::string(b, InlineLen(w));
  }
  const KeyBlock* kb = Block(w);
  if (!kb) return "<damaged key word " + std::to_string(w) + ">";
  return std::string(kb->bytes(), kb->len);
}

Status CreateRoot(Pool& pool, uint32_t type_id, const IndexOptions& opts, uint64_t p0, uint64_t p1, uint64_t p2,
                  uint64_t* root_off) {
  if (opts.key_type != KeyType::kU64 && opts.key_type != KeyType::kBytes)
    return Status::InvalidArgument("unknown key type");
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(HashRoot), &off));
  auto* r = pool.at<HashRoot>(off);
  r->magic = HashRoot::kMagic;
  r->type_id = type_id;
  r->key_type = static_cast<uint8_t>(opts.key_type);
  r->flags = opts.values_are_blocks ? HashRoot::kValuesAreBlocks : 0;
  r->version = HashRoot::kVersion;
  std::random_device rd;
  r->seed = (uint64_t(rd()) << 32) ^ rd() ^ NowNs();
  if (const char* s = std::getenv("WORT_HASH_SEED")) r->seed = std::strtoull(s, nullptr, 0);
  if (opts.hash_seed != 0) r->seed = opts.hash_seed;
  r->param[0] = p0;
  r->param[1] = p1;
  r->param[2] = p2;
  pm::persist(r, sizeof(HashRoot));
  *root_off = off;
  return Status::OK();
}

Status OpenRoot(const Pool& pool, uint64_t root_off, uint32_t type_id, const char* name, HashRoot** out) {
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, root_off, sizeof(HashRoot), name));
  auto* r = pool.at<HashRoot>(root_off);
  WORT_RETURN_IF_ERROR(CheckRootHeader(name, r->magic, HashRoot::kMagic, r->key_type));
  if (r->type_id != type_id)
    return Status::Corruption(std::string(name) + ": root block has type id " + std::to_string(r->type_id));
  if (r->version != HashRoot::kVersion)
    return Status::Corruption(std::string(name) + ": root block has version " + std::to_string(r->version));
  *out = r;
  return Status::OK();
}

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* s = std::getenv(name);
  if (!s || !*s) return def;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  return end && *end == 0 ? v : def;
}

uint64_t InitialCapacity(const IndexOptions& opts) {
  const uint64_t c = opts.hash_capacity != 0 ? opts.hash_capacity : EnvU64("WORT_HASH_CAPACITY", 2048);
  return c < 16 ? 16 : c;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

HashIndexBase::HashIndexBase(Pool& pool, uint64_t root_off, HashRoot* root, const char* kind, bool tombstones)
    : pool_(pool),
      alloc_(pool.allocator()),
      root_off_(root_off),
      root_(root),
      codec_(&pool, static_cast<KeyType>(root->key_type), root->seed, tombstones),
      values_are_blocks_((root->flags & HashRoot::kValuesAreBlocks) != 0),
      kind_(kind) {}

HashCounters HashIndexBase::Counters() const {
  std::lock_guard<std::mutex> g(counters_mu_);
  return counters_;
}
void HashIndexBase::ResetCounters() {
  std::lock_guard<std::mutex> g(counters_mu_);
  counters_ = HashCounters();
}

// The special slots. Insert: store the value word; COMMIT: store8 the present word = 1; persist
// the line (both words share it, and the value is stored first). Upsert of a present key:
// COMMIT: store8 the value word; persist. Remove: COMMIT: store8 the present word = 0; persist.
Status HashIndexBase::ZeroPut(uint64_t value, bool upsert, bool* inserted, int which) {
  uint64_t* present = SpecialPresent(which);
  uint64_t* val = SpecialValue(which);
  if (pm::load8(present)) {
    if (!upsert) return Status::AlreadyExists("key exists");
    pm::store8(val, value);
    pm::persist(val, 8);
    if (inserted) *inserted = false;
    return Status::OK();
  }
  pm::store8(val, value);
  pm::store8(present, 1);
  pm::persist(present < val ? present : val, 16);
  if (inserted) *inserted = true;
  return Status::OK();
}

Status HashIndexBase::ZeroGet(uint64_t* value, int which) const {
  if (!ZeroPresent(which)) return Status::NotFound("key not found");
  *value = pm::load8(SpecialValue(which));
  return Status::OK();
}

Status HashIndexBase::ZeroRemove(int which) {
  if (!ZeroPresent(which)) return Status::NotFound("key not found");
  pm::store8(SpecialPresent(which), 0);
  pm::persist(SpecialPresent(which), 8);
  return Status::OK();
}

HashCounters GetHashCounters(const Index& index) {
  if (const auto* h = dynamic_cast<const HashIndexBase*>(&index)) return h->Counters();
  return HashCounters();
}
void ResetHashCounters(Index& index) {
  if (auto* h = dynamic_cast<HashIndexBase*>(&index)) h->ResetCounters();
}

// ---- unordered iteration -------------------------------------------------------------------

Status HashIndexBase::ForEachRecord(const ScanFn& fn) const {
  Records recs;
  CollectRecords(&recs);
  for (const auto& [k, v] : recs)
    if (!fn(k, v)) break;
  return Status::OK();
}

void HashIndexBase::AppendRecord(uint64_t w, uint64_t value, Records* out) const {
  if (codec_.key_type() == KeyType::kU64) {
    out->emplace_back(EncodeU64(UnmixU64(w, codec_.seed())), value);
  } else if (WordIsInline(w)) {
    char b[8];
    InlineBytes(w, b);
    out->emplace_back(std::string(b, InlineLen(w)), value);
  } else if (const KeyBlock* kb = codec_.Block(w)) {
    out->emplace_back(std::string(kb->bytes(), kb->len), value);
  }  // (a damaged word names no key: Check reports it)
}

void HashIndexBase::AppendSpecialRecords(Records* out) const {
  if (codec_.key_type() != KeyType::kU64) return;
  for (int which = 0; which < 2; ++which)
    if (ZeroPresent(which)) {
      const uint64_t word = which == 0 ? 0 : codec_.tombstone();
      out->emplace_back(EncodeU64(UnmixU64(word, codec_.seed())), pm::load8(SpecialValue(which)));
    }
}

}  // namespace wort::hash
