// The crash explorer. The model is described in crash/explorer.h and doc/crash-model.md.
//
// Structure
//   Tracker     the pm::Hook: keeps the shadow image, the in-flight lines, and records crash
//               points (a seeded reservoir sample of at most max_points per operation).
//   CrashPoint  what one crash point leaves undetermined: the lines persisted during the
//               operation so far, and every in-flight or dirty line with its candidates.
//   RunExplorer the workload loop: for each operation, run it under the hook, then (hook
//               removed) write and check the images of every recorded point.
#include "crash/explorer.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <cstdio>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "index/hash/hash_common.h"
#include "pm/share.h"
#include "util/splitmix64.h"
#include "wort/alloc.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::crash {

std::string Violation::ToString() const {
  return fmt::format("VIOLATION op #{} ({}), crash point {} ({}), image {}: {}\n  replay: wort crashtest {}", op,
                     op_desc, point, point_desc, image, what, replay);
}

std::string ExplorerArgs(const ExplorerConfig& c) {
  std::string s = fmt::format("--index {} --dist {} --keys {} --explore {} --ops {} --seed {} --subsets {} --max-points {}",
                              c.index, bench::DistName(c.dist), c.keys, c.explore_ops, OpTypesName(c.ops), c.seed,
                              c.subsets, c.max_points);
  if (c.torn_lines) s += " --torn";
  if (c.read_only_first) s += " --read-only-first";
  if (c.dirty_free_space) s += " --dirty-free-space";
  if (c.recovery_persists) s += " --recovery-persists";
  if (c.op_persists) s += " --op-persists";
  if (!c.edge_keys) s += " --no-edge-keys";
  if (!c.key_type_from_dist) s += c.index_options.key_type == KeyType::kU64 ? " --key-type u64" : " --key-type bytes";
  if (c.index_options.span_bits != IndexOptions{}.span_bits) s += fmt::format(" --span-bits {}", c.index_options.span_bits);
  if (c.index_options.hash_capacity != 0) s += fmt::format(" --hash-capacity {}", c.index_options.hash_capacity);
  if (c.index_options.cceh_segment_bytes != 0)
    s += fmt::format(" --cceh-segment-bytes {}", c.index_options.cceh_segment_bytes);
  if (c.index_options.hash_seed != 0) s += fmt::format(" --hash-seed {:#x}", c.index_options.hash_seed);
  if (c.index_options.b3_no_rebalance) s += " --b3-no-rebalance";
  if (c.index_options.b3_page_bytes != 0) s += fmt::format(" --b3-page-bytes {}", c.index_options.b3_page_bytes);
  if (!c.cceh_variant.empty()) s += " --cceh-variant " + c.cceh_variant;
  if (c.novel_only) s += " --novel-only";
  if (c.explore_from != 0) s += fmt::format(" --explore-from {}", c.explore_from);
  if (c.explore_recovery) s += " --explore-recovery";
  if (c.explore_lifecycle) s += " --explore-lifecycle";
  if (c.pool_initial_size != ExplorerConfig{}.pool_initial_size) s += fmt::format(" --pool-size {}", c.pool_initial_size);
  if (c.hash_special_keys) s += " --hash-special-keys";
  if (c.hash_skew_keys != 0) s += fmt::format(" --hash-skew-keys {}", c.hash_skew_keys);
  if (c.insert_keys != 0) s += fmt::format(" --insert-keys {}", c.insert_keys);
  if (!c.drop_site.empty()) s += " --drop-site " + c.drop_site;
  if (!c.focus_site.empty()) s += " --focus-site " + c.focus_site;
  if (c.focus_ops != 0) s += fmt::format(" --focus-ops {}", c.focus_ops);
  if (c.single_line_images) s += " --single-line-images";
  return s;
}

namespace {

constexpr uint64_t kLine = pm::kCacheLine;

// ExplorerConfig::dirty_free_space: freed blocks whose persistent content is 0xa5 bytes.
Status DirtyFreeSpace(Pool& pool) {
  std::vector<uint64_t> blocks;
  // Every size class up to 1 KiB (multiples of 64: e.g. FPTree's 576-byte and NV-Tree's 832-byte
  // leaves), then 2 and 4 KiB.
  for (const size_t size : {64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 2048, 4096})
    for (int k = 0; k < 4; ++k) {
      uint64_t off = 0;
      WORT_RETURN_IF_ERROR(pool.allocator().Alloc(size, &off));
      std::memset(pool.at<char>(off), 0xa5, size);
      pm::persist(pool.at<char>(off), size);
      blocks.push_back(off);
    }
  // Freed last-allocated first: the first allocations of each size take the blocks in order.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) pool.allocator().Free(*it);
  return Status::OK();
}
constexpr uint64_t kPage = 4096;
constexpr size_t kWordsPerLine = kLine / 8;
constexpr size_t kMaxSingleLineImages = 32;  // single_line_images: the first open lines of a point
using LineBytes = std::array<char, kLine>;

enum class PointKind : uint8_t { kFlush, kFence, kReturn };

// A line whose persistent content is undetermined at a crash point, with its candidates.
struct OpenLine {
  uint64_t off = 0;
  LineBytes persisted{};       // what the shadow holds
  bool has_inflight = false;   // flushed since the last fence, with content != persisted
  LineBytes inflight{};        // content captured at the flush
  bool has_live = false;       // dirty: live content != persisted and != inflight
  LineBytes live{};
};

struct CrashPoint {
  uint64_t seq = 0;  // ordinal among the operation's crash points (stable: used to replay)
  PointKind kind = PointKind::kFlush;
  const char* file = nullptr;
  uint32_t line = 0;
  uint64_t file_size = 0;  // pool file size at the point
  std::vector<std::pair<uint64_t, LineBytes>> persisted;  // lines persisted during the op so far
  std::vector<OpenLine> open;
  // PathExplorer::SetInterposer: the writes an interposed actor completed at this point.
  std::vector<PathExplorer::Interposed> interposed;

  std::string Describe() const {
    switch (kind) {
      case PointKind::kFlush: return fmt::format("flush at {}:{}", ShortSourcePath(file), line);
      case PointKind::kFence: return fmt::format("fence at {}:{}", ShortSourcePath(file), line);
      case PointKind::kReturn: return "after the operation returned";
    }
    return "?";
  }
};

// FNV-1a, 64-bit.
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void Add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  void Add(uint64_t v) { Add(&v, 8); }
};

uint64_t PointHash(const CrashPoint& p) {
  Hasher h;
  h.Add(p.kind == PointKind::kReturn ? 1 : 0);
  h.Add(p.file_size);
  for (auto& [off, b] : p.persisted) {
    h.Add(off);
    h.Add(b.data(), kLine);
  }
  for (const OpenLine& o : p.open) {
    h.Add(o.off);
    h.Add(o.persisted.data(), kLine);
    h.Add(o.has_inflight);
    if (o.has_inflight) h.Add(o.inflight.data(), kLine);
    h.Add(o.has_live);
    if (o.has_live) h.Add(o.live.data(), kLine);
  }
  return h.h;
}

// The hook. All members are guarded by mu_ (flushes may come from any thread, although the
// explorer's workload is single-threaded).
class Tracker final : public pm::Hook {
 public:
  Tracker(Pool* pool, std::string drop_site)
      : pool_(pool), base_(pool->base()), reserved_(pool->capacity()), drop_site_(std::move(drop_site)) {}
  // A tracker of the recovery of a crash image: the pool is not open yet, so its mapping is
  // found at the first flush or fence (the mapping of `path` in /proc/self/maps). The shadow
  // is the image file's content. The sites met so far are kept (novelty spans images).
  explicit Tracker(std::string drop_site) : pool_(nullptr), base_(nullptr), reserved_(0), drop_site_(std::move(drop_site)) {}
  // Focus (ExplorerConfig::focus_site): an operation is explored from its first meeting of this
  // site, or of a new one, on.
  void SetFocus(const std::string& site) { focus_site_ = site; }
  // Whether the last operation met the focus site.
  bool FocusSeen() {
    std::lock_guard<std::mutex> g(mu_);
    return focus_seen_;
  }
  Status AttachImage(const std::string& path) {
    std::lock_guard<std::mutex> g(mu_);
    image_path_ = path;
    base_ = nullptr;
    reserved_ = 0;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError("cannot open crash image " + path);
    struct stat st {};
    ::fstat(fd, &st);
    shadow_.assign(static_cast<size_t>(st.st_size), 0);
    size_t got = 0;
    while (got < shadow_.size()) {
      const ssize_t r = ::pread(fd, shadow_.data() + got, shadow_.size() - got, static_cast<off_t>(got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    if (got != shadow_.size()) return Status::IOError("cannot read crash image " + path);
    const uint64_t size = shadow_.size();
    page_used_.assign((size + kPage - 1) / kPage, 0);
    static const char kZero[kPage] = {};
    for (uint64_t p = 0; p * kPage < size; ++p)
      page_used_[p] = std::memcmp(shadow_.data() + p * kPage, kZero, std::min(kPage, size - p * kPage)) != 0;
    inflight_.clear();
    op_persisted_.clear();
    return Status::OK();
  }

  std::vector<std::pair<std::string, uint64_t>> Sites() {
    std::lock_guard<std::mutex> g(mu_);
    return {sites_.begin(), sites_.end()};
  }
  // Distinct sites met so far (grows when an operation meets a new one).
  size_t SiteCount() {
    std::lock_guard<std::mutex> g(mu_);
    return sites_.size();
  }

  // The shadow := the live pool (setup is taken as persistent).
  void Snapshot() {
    std::lock_guard<std::mutex> g(mu_);
    const uint64_t size = pool_->size();
    shadow_.assign(base_, base_ + size);
    page_used_.assign((size + kPage - 1) / kPage, 0);
    static const char kZero[kPage] = {};
    for (uint64_t p = 0; p * kPage < size; ++p)
      page_used_[p] = std::memcmp(base_ + p * kPage, kZero, std::min(kPage, size - p * kPage)) != 0;
    inflight_.clear();
    op_persisted_.clear();
  }

  // Starts recording an operation: at most max_points points (a reservoir sample seeded by
  // `seed`); only point `only_point` when it is >= 0; none when max_points == 0.
  void BeginOp(size_t max_points, int64_t only_point, uint64_t seed, bool novel_only = false) {
    std::lock_guard<std::mutex> g(mu_);
    in_op_ = true;
    novel_only_ = novel_only && only_point < 0;
    novel_seen_ = false;
    focus_seen_ = false;
    max_points_ = max_points;
    only_point_ = only_point;
    rng_ = Rng(seed);
    eligible_ = 0;
    points_.clear();
    prev_flush_file_ = nullptr;
  }

  // Ends the operation: records the return point, returns the recorded points in order. The
  // shadow still holds the state of the operation's start until Commit().
  std::vector<CrashPoint> EndOp(bool capture_return = true) {
    std::lock_guard<std::mutex> g(mu_);
    in_op_ = false;
    if (novel_only_ && !novel_seen_) points_.clear();
    if (capture_return && max_points_ > 0 && (!novel_only_ || novel_seen_) &&
        (only_point_ < 0 || only_point_ == static_cast<int64_t>(eligible_))) {
      CrashPoint p;
      Capture(&p, PointKind::kReturn, nullptr, 0);
      p.seq = eligible_;
      points_.push_back(std::move(p));
    }
    std::sort(points_.begin(), points_.end(), [](const CrashPoint& a, const CrashPoint& b) { return a.seq < b.seq; });
    return std::move(points_);
  }

  // The lines open (in flight or dirty) right now, in offset order.
  std::vector<OpenLine> OpenLinesNow() {
    std::lock_guard<std::mutex> g(mu_);
    CrashPoint p;
    Capture(&p, PointKind::kReturn, nullptr, 0);
    return std::move(p.open);
  }

  // Crash points met in the last operation, including its return.
  uint64_t PointsSeen() {
    std::lock_guard<std::mutex> g(mu_);
    return eligible_ + 1;
  }

  // Folds the lines persisted during the operation into the shadow.
  void Commit() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [off, b] : op_persisted_) WriteShadow(off, b);
    op_persisted_.clear();
  }

  void OnFlushLine(const void* line, const std::source_location& where) override {
    std::unique_lock<std::mutex> g(mu_);
    const char* l = static_cast<const char*>(line);
    if (!base_) ResolveImageMapping(l);
    if (l < base_ || l >= base_ + reserved_) return;  // not this pool
    GrowShadow();
    const uint64_t off = static_cast<uint64_t>(l - base_);
    if (off >= shadow_.size()) return;
    if (interposing_) {  // the interposer's flush: its line, not a crash point
      std::memcpy(interposed_lines_[off].data(), base_ + off, kLine);
      return;
    }
    if (Site(where)) return;  // a dropped site: the flush does not exist
    // The lines of one flush() call form one crash point.
    const bool same_call = prev_flush_file_ == where.file_name() && prev_flush_line_ == where.line() &&
                           prev_flush_col_ == where.column() && off == prev_flush_off_ + kLine;
    if (!same_call) Interpose(g, MaybeRecord(PointKind::kFlush, where.file_name(), where.line()), where);
    prev_flush_file_ = where.file_name();
    prev_flush_line_ = where.line();
    prev_flush_col_ = where.column();
    prev_flush_off_ = off;
    std::memcpy(inflight_[off].data(), base_ + off, kLine);
  }

  void OnFence(const std::source_location& where) override {
    std::unique_lock<std::mutex> g(mu_);
    GrowShadow();
    if (interposing_) return;  // the interposer's fence: orders its own flushes only
    if (Site(where)) return;   // a dropped site: the fence does not exist
    Interpose(g, MaybeRecord(PointKind::kFence, where.file_name(), where.line()), where);
    prev_flush_file_ = nullptr;
    for (auto& [off, b] : inflight_) {
      if (in_op_) op_persisted_[off] = b;
      else WriteShadow(off, b);
    }
    inflight_.clear();
  }

  // The content line `off` has in the image of `p` with `patch` (the last patch entry for it, else
  // what was persisted during the operation, else the shadow).
  LineBytes ImageLine(const CrashPoint& p, const std::vector<std::pair<uint64_t, LineBytes>>& patch, uint64_t off) const {
    for (auto it = patch.rbegin(); it != patch.rend(); ++it)
      if (it->first == off) return it->second;
    for (auto& [o, b] : p.persisted)
      if (o == off) return b;
    LineBytes b{};
    if (off + kLine <= shadow_.size()) std::memcpy(b.data(), shadow_.data() + off, kLine);
    return b;
  }

  // Writes the crash image of `p` with `patch` (the chosen content of its open lines) to a new
  // file at `path`.
  Status WriteImage(const std::string& path, const CrashPoint& p,
                    const std::vector<std::pair<uint64_t, LineBytes>>& patch) const {
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError("cannot create crash image " + path + ": " + std::strerror(errno));
    auto fail = [&](const char* what) {
      const std::string m = std::string(what) + " crash image " + path + ": " + std::strerror(errno);
      ::close(fd);
      return Status::IOError(m);
    };
    if (::ftruncate(fd, static_cast<off_t>(p.file_size)) != 0) return fail("cannot size");
    auto write_at = [&](uint64_t off, const char* src, uint64_t n) {
      while (n > 0) {
        const ssize_t w = ::pwrite(fd, src, n, static_cast<off_t>(off));
        if (w <= 0) return false;
        off += static_cast<uint64_t>(w);
        src += w;
        n -= static_cast<uint64_t>(w);
      }
      return true;
    };
    // The shadow: only pages that were ever non-zero (the rest of the file is zero already).
    const uint64_t limit = std::min<uint64_t>(shadow_.size(), p.file_size);
    for (uint64_t pg = 0; pg * kPage < limit;) {
      if (!page_used_[pg]) {
        ++pg;
        continue;
      }
      uint64_t end = pg;
      while (end * kPage < limit && page_used_[end]) ++end;
      const uint64_t a = pg * kPage, b = std::min(end * kPage, limit);
      if (!write_at(a, shadow_.data() + a, b - a)) return fail("cannot write");
      pg = end;
    }
    for (auto& [off, b] : p.persisted)
      if (!write_at(off, b.data(), kLine)) return fail("cannot write");
    for (auto& [off, b] : patch)
      if (!write_at(off, b.data(), kLine)) return fail("cannot write");
    if (::close(fd) != 0) return Status::IOError("cannot close crash image " + path);
    return Status::OK();
  }

 private:
  // Counts the site of a flush or fence met in an operation; true iff it is the dropped one.
  bool Site(const std::source_location& where) {
    if (!in_op_ && drop_site_.empty()) return false;
    auto it = site_names_.find(where.file_name());
    if (it == site_names_.end()) it = site_names_.emplace(where.file_name(), ShortSourcePath(where.file_name())).first;
    std::string site = it->second + ":" + std::to_string(where.line());
    const bool drop = site == drop_site_;
    if (in_op_ && (where.line() != last_site_line_ || where.file_name() != last_site_file_)) {
      uint64_t& n = sites_[site];
      // The first meeting of a site in the run (novel), or a meeting of the focus site.
      if (n == 0) novel_seen_ = true;
      if (!focus_site_.empty() && site == focus_site_) novel_seen_ = focus_seen_ = true;
      ++n;
    }
    last_site_line_ = where.line();
    last_site_file_ = where.file_name();
    return drop;
  }

  // Recovery tracker: the mapping of the image file that holds `addr`, from /proc/self/maps.
  void ResolveImageMapping(const char* addr) {
    if (image_path_.empty()) return;
    FILE* f = std::fopen("/proc/self/maps", "r");
    if (!f) return;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), f)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(buf, "%lx-%lx", &lo, &hi) != 2) continue;
      const char* slash = std::strchr(buf, '/');
      if (!slash) continue;
      std::string file(slash);
      while (!file.empty() && (file.back() == '\n' || file.back() == ' ')) file.pop_back();
      if (file != image_path_) continue;
      if (reinterpret_cast<uintptr_t>(addr) < lo || reinterpret_cast<uintptr_t>(addr) >= hi) continue;
      base_ = reinterpret_cast<const char*>(lo);
      reserved_ = hi - lo;
      break;
    }
    std::fclose(f);
  }

  void GrowShadow() {
    if (!pool_) return;  // recovery does not grow the pool
    const uint64_t size = pool_->size();
    if (size > shadow_.size()) {
      // A grown file is zero (posix_fallocate) and durable before the size is published.
      shadow_.resize(size, 0);
      page_used_.resize((size + kPage - 1) / kPage, 0);
    }
  }

  void WriteShadow(uint64_t off, const LineBytes& b) {
    if (off + kLine > shadow_.size()) return;
    std::memcpy(shadow_.data() + off, b.data(), kLine);
    page_used_[off / kPage] = 1;
  }

  const char* PersistedOf(uint64_t off) const {
    auto it = op_persisted_.find(off);
    return it != op_persisted_.end() ? it->second.data() : shadow_.data() + off;
  }

  // Records the crash point if it is sampled; returns its index in points_, or -1.
  int64_t MaybeRecord(PointKind kind, const char* file, uint32_t line) {
    if (!in_op_ || max_points_ == 0) return -1;
    const uint64_t seq = eligible_++;
    // novel_only: points are recorded from the first new site of the operation on (the ones
    // before it were all explored where they were first met).
    if (novel_only_ && !novel_seen_) return -1;
    if (only_point_ >= 0) {
      if (seq != static_cast<uint64_t>(only_point_)) return -1;
      points_.emplace_back();
      Capture(&points_.back(), kind, file, line);
      points_.back().seq = seq;
      return static_cast<int64_t>(points_.size() - 1);
    }
    size_t slot;
    if (points_.size() < max_points_) {
      slot = points_.size();
      points_.emplace_back();
    } else {
      const uint64_t j = rng_.Below(seq + 1);  // reservoir sampling (Algorithm R)
      if (j >= max_points_) return -1;
      slot = static_cast<size_t>(j);
    }
    Capture(&points_[slot], kind, file, line);
    points_[slot].seq = seq;
    return static_cast<int64_t>(slot);
  }

 public:
  void SetInterposer(PathExplorer::InterposeFn fn) {
    std::lock_guard<std::mutex> g(mu_);
    interposer_ = std::move(fn);
  }
  std::vector<std::pair<uint64_t, LineBytes>> TakeInterposedLines() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::pair<uint64_t, LineBytes>> v(interposed_lines_.begin(), interposed_lines_.end());
    interposed_lines_.clear();
    return v;
  }

 private:
  // Runs the interposer (PathExplorer::SetInterposer) at the crash point just recorded in
  // points_[slot] (captured already: the image is the state at the point), with mu_ released -
  // its own flushes and fences come back into this hook, as the interposer's.
  void Interpose(std::unique_lock<std::mutex>& g, int64_t slot, const std::source_location& where) {
    if (slot < 0 || !interposer_) return;
    const uint64_t seq = points_[static_cast<size_t>(slot)].seq;
    std::string site = ShortSourcePath(where.file_name()) + ":" + std::to_string(where.line());
    interposing_ = true;
    interposed_lines_.clear();
    g.unlock();
    std::vector<PathExplorer::Interposed> v = interposer_(site);
    g.lock();
    interposing_ = false;
    interposed_lines_.clear();
    // (Reservoir sampling may not replace a point while its interposer runs: nothing else flushes.)
    if (static_cast<size_t>(slot) < points_.size() && points_[static_cast<size_t>(slot)].seq == seq)
      points_[static_cast<size_t>(slot)].interposed = std::move(v);
  }

  // Records what a crash right now leaves undetermined.
  void Capture(CrashPoint* p, PointKind kind, const char* file, uint32_t line) {
    p->kind = kind;
    p->interposed.clear();
    p->file = file;
    p->line = line;
    p->file_size = shadow_.size();
    p->persisted.assign(op_persisted_.begin(), op_persisted_.end());
    std::sort(p->persisted.begin(), p->persisted.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::map<uint64_t, OpenLine> open;
    for (auto& [off, b] : inflight_) {
      if (std::memcmp(b.data(), PersistedOf(off), kLine) == 0) continue;
      OpenLine& o = open[off];
      o.has_inflight = true;
      o.inflight = b;
    }
    auto dirty = [&](uint64_t off) {
      OpenLine& o = open[off];
      const char* live = base_ + off;
      if (o.has_inflight && std::memcmp(live, o.inflight.data(), kLine) == 0) return;
      o.has_live = true;
      std::memcpy(o.live.data(), live, kLine);
    };
    const uint64_t size = base_ ? shadow_.size() : 0;  // recovery before the pool is mapped: nothing changed
    if (base_)
      for (auto& [off, b] : op_persisted_)
        if (std::memcmp(base_ + off, b.data(), kLine) != 0) dirty(off);
    for (uint64_t a = 0; a < size; a += kPage) {
      const uint64_t n = std::min(kPage, size - a);
      if (std::memcmp(base_ + a, shadow_.data() + a, n) == 0) continue;
      for (uint64_t l = a; l < a + n; l += kLine) {
        if (op_persisted_.count(l)) continue;
        // The header page's shared area (src/pm/share.h: the writer's pid, write lanes, reader
        // table) is process state in the mapping, never persisted by design: a crash may leave
        // any value there and every open resets or validates it. Not a line that can be lost.
        if (l >= share::kAreaOff && l < share::kAreaEnd) continue;
        if (std::memcmp(base_ + l, shadow_.data() + l, kLine) != 0) dirty(l);
      }
    }
    p->open.clear();
    p->open.reserve(open.size());
    for (auto& [off, o] : open) {
      if (!o.has_inflight && !o.has_live) continue;
      o.off = off;
      std::memcpy(o.persisted.data(), PersistedOf(off), kLine);
      p->open.push_back(o);
    }
  }

  std::mutex mu_;
  Pool* pool_;  // null: a recovery tracker (AttachImage)
  const char* base_;
  uint64_t reserved_;
  std::string image_path_;
  std::vector<char> shadow_;        // persistent content at the start of the current operation
  std::vector<uint8_t> page_used_;  // per 4 KiB page of the shadow: may be non-zero
  std::unordered_map<uint64_t, LineBytes> inflight_;      // flushed since the last fence
  std::unordered_map<uint64_t, LineBytes> op_persisted_;  // reached memory during the operation
  bool in_op_ = false;
  bool novel_only_ = false;  // record points only once the operation met a new site
  bool novel_seen_ = false;
  bool focus_seen_ = false;
  size_t max_points_ = 0;
  int64_t only_point_ = -1;
  Rng rng_{0};
  uint64_t eligible_ = 0;
  std::vector<CrashPoint> points_;
  const char* prev_flush_file_ = nullptr;
  uint32_t prev_flush_line_ = 0, prev_flush_col_ = 0;
  uint64_t prev_flush_off_ = 0;
  std::string drop_site_;
  std::string focus_site_;
  std::unordered_map<const char*, std::string> site_names_;
  std::map<std::string, uint64_t> sites_;
  const char* last_site_file_ = nullptr;
  uint32_t last_site_line_ = 0;
  PathExplorer::InterposeFn interposer_;
  bool interposing_ = false;
  std::map<uint64_t, LineBytes> interposed_lines_;  // flushed by the interposer (content at its flush)
};

// Removes the hook when leaving a scope.
struct HookGuard {
  explicit HookGuard(pm::Hook* h) { pm::SetHook(h); }
  ~HookGuard() { pm::SetHook(nullptr); }
};

enum Choice : uint8_t { kPersisted = 0, kInflight = 1, kLive = 2 };

const char* ChoiceBytes(const OpenLine& o, uint8_t c) {
  return c == kLive ? o.live.data() : c == kInflight ? o.inflight.data() : o.persisted.data();
}

// The content of the open lines for one image: mode 0 = nothing, 1 = all, 2 = random (seed),
// 3 = only open line #only (its newest content), the others as persisted; 4 = every open line
// (newest content) but #only.
std::vector<std::pair<uint64_t, LineBytes>> MakePatch(const CrashPoint& p, int mode, uint64_t seed, bool torn,
                                                      int only = -1) {
  Rng r(seed);
  const OpenLine* single = mode >= 3 && only >= 0 && static_cast<size_t>(only) < p.open.size() ? &p.open[only] : nullptr;
  auto pick = [&](const OpenLine& o) -> uint8_t {
    if (mode == 0 || (mode == 3 && &o != single) || (mode == 4 && &o == single)) return kPersisted;
    if (mode == 1 || mode >= 3) return o.has_live ? kLive : o.has_inflight ? kInflight : kPersisted;
    const bool d = o.has_live && r.Bit();
    const bool f = o.has_inflight && r.Bit();
    return d ? kLive : f ? kInflight : kPersisted;
  };
  std::vector<std::pair<uint64_t, LineBytes>> patch;
  patch.reserve(p.open.size());
  for (const OpenLine& o : p.open) {
    LineBytes b;
    if (torn && mode == 2) {
      for (size_t w = 0; w < kWordsPerLine; ++w) std::memcpy(b.data() + 8 * w, ChoiceBytes(o, pick(o)) + 8 * w, 8);
    } else {
      std::memcpy(b.data(), ChoiceBytes(o, pick(o)), kLine);
    }
    patch.emplace_back(o.off, b);
  }
  return patch;
}

uint64_t PatchHash(const std::vector<std::pair<uint64_t, LineBytes>>& patch) {
  Hasher h;
  for (auto& [off, b] : patch) {
    h.Add(off);
    h.Add(b.data(), kLine);
  }
  return h.h;
}

}  // namespace

Status RunExplorer(const ExplorerConfig& cfg, ExplorerResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  ExplorerResult res;
  res.index = cfg.index;
  IndexOptions iopts;
  WORT_RETURN_IF_ERROR(ResolveRunIndex(cfg.index, cfg.ops, cfg.index_options, cfg.key_type_from_dist, cfg.dist, &iopts));
  const IndexKind* kind = FindIndexKind(cfg.index);
  // The cceh directory variant of this run (IndexOptions::cceh_variant; empty: the kind's default).
  if (!cfg.cceh_variant.empty() && !hash::ParseCcehVariant(cfg.cceh_variant, &iopts.cceh_variant))
    return Status::InvalidArgument("cceh variant must be msb, lsb or exth, not '" + cfg.cceh_variant + "'");
  // The hash tables' hash seed comes from the run's seed too: the same run meets the same
  // crash points, and a replay line reproduces its violation.
  if (iopts.hash_seed == 0) iopts.hash_seed = MixSeed(cfg.seed, 0x4a5e) | 1;

  std::vector<std::string> extra_setup, extra_inserts;
  if (iopts.key_type == KeyType::kU64) {
    for (uint64_t w = 0; w < 2 && cfg.hash_special_keys; ++w) extra_inserts.push_back(EncodeU64(hash::UnmixU64(w, iopts.hash_seed)));
    SplitMix64 skew(MixSeed(cfg.seed, 0x5ce7));
    for (size_t i = 0; i < cfg.hash_skew_keys; ++i)
      extra_setup.push_back(EncodeU64(hash::UnmixU64((skew.Next() >> 5) | 2, iopts.hash_seed)));  // never 0 or 1
  }
  const Workload wl(cfg.dist, iopts.key_type, cfg.keys, cfg.insert_keys ? cfg.insert_keys : cfg.explore_ops + 8,
                    cfg.edge_keys, cfg.seed, extra_setup, extra_inserts);
  const std::string root = "crash";
  const std::string live_path = UniquePoolPath(cfg.dir, "crash-live");
  struct Cleanup {
    std::string path;
    ~Cleanup() { ::unlink(path.c_str()); }
  } cleanup{live_path};

  PoolOptions po;
  po.initial_size = cfg.pool_initial_size;
  po.max_size = cfg.pool_max_size;
  std::unique_ptr<Pool> pool;
  WORT_RETURN_IF_ERROR(Pool::Create(live_path, po, &pool));
  if (cfg.dirty_free_space) WORT_RETURN_IF_ERROR(DirtyFreeSpace(*pool));
  std::unique_ptr<Index> index;
  Contents model;
  // Setup: not explored.
  auto setup = [&]() -> Status {
    for (size_t i = 0; i < wl.setup_count(); ++i) {
      const Op op{OpType::kInsert, static_cast<uint32_t>(i), MixSeed(cfg.seed, 0x5e70, i)};
      Status s = wl.Run(*index, op);
      if (!s.ok()) return Status(s.code(), "setup, " + wl.Describe(op) + ": " + s.message());
      (void)wl.Apply(op, &model);
    }
    return Status::OK();
  };
  if (!cfg.explore_lifecycle) {
    WORT_RETURN_IF_ERROR(CreateIndex(*pool, root, cfg.index, iopts, &index));
    WORT_RETURN_IF_ERROR(setup());
  }

  // novel_only (or focus_site): an operation's points are recorded from its first new site (or
  // its first meeting of the focus site) on.
  const bool gate_points = cfg.novel_only || !cfg.focus_site.empty();
  Tracker tracker(pool.get(), cfg.drop_site);
  tracker.SetFocus(cfg.focus_site);
  tracker.Snapshot();
  CheckTarget target{kind, root, &wl, cfg.exercise};
  target.read_only_first = cfg.read_only_first;
  Rng op_rng(MixSeed(cfg.seed, 0x0b5));
  const std::string args = ExplorerArgs(cfg);

  auto add_violation = [&](Violation v) {
    ++res.violation_count;
    if (cfg.log) std::fprintf(cfg.log, "%s\n", v.ToString().c_str());
    if (res.violations.size() < cfg.max_violations) res.violations.push_back(std::move(v));
  };

  // Writes the image of point `p` of tracker `tr` with `patch` and checks it; a failed check is a
  // violation (of operation i at point `seq`, described by `where` and `image_desc`), and an
  // image that crashed or hung the check ends the run. *ok: whether the image passed.
  auto check_image = [&](Tracker& tr, const CrashPoint& p, const std::vector<std::pair<uint64_t, LineBytes>>& patch,
                         const CheckTarget& t, const std::vector<const Contents*>& allowed, size_t i,
                         const std::string& op_desc, uint64_t seq, const std::string& where,
                         const std::string& image_desc, bool* ok) -> Status {
    const std::string path = UniquePoolPath(cfg.dir, "crash-img");
    Status ws = tr.WriteImage(path, p, patch);
    if (!ws.ok()) {
      ::unlink(path.c_str());
      return ws;
    }
    ++res.images;
    int matched = -1;
    bool fatal = false;
    Status cs = cfg.isolate ? CheckCrashedPoolIsolated(path, t, allowed, &matched, cfg.check_timeout_s)
                            : CheckCrashedPoolGuarded(path, t, allowed, &matched, &fatal, cfg.check_timeout_s);
    ::unlink(path.c_str());
    *ok = cs.ok();
    if (cs.ok()) return Status::OK();
    add_violation(Violation{i, op_desc, seq, where, image_desc, cs.message(),
                            args + fmt::format(" --replay-op {} --replay-point {}", i, seq)});
    if (fatal) {
      res.stopped_early = "the check of an image crashed or hung; the run stopped (use --isolate to go on)";
      res.violation_count = std::max(res.violation_count, cfg.max_violations);
    }
    return Status::OK();
  };

  // Crash during recovery: the recovery of a crash image (Pool::Open with its post-crash GC,
  // and OpenIndex with the kind's repair at open) runs under a second tracker, and each of its
  // crash points gives images that are checked like the others (same allowed contents).
  Tracker rtracker(cfg.drop_site);
  rtracker.SetFocus(cfg.focus_site);
  auto explore_recovery = [&](size_t i, const std::string& op_desc, const CrashPoint& p,
                              const std::vector<std::pair<uint64_t, LineBytes>>& patch, const std::string& image_desc,
                              const std::vector<const Contents*>& allowed, const CheckTarget& target) -> Status {
    const std::string path = UniquePoolPath(cfg.dir, "crash-img");
    Cleanup rm{path};
    WORT_RETURN_IF_ERROR(tracker.WriteImage(path, p, patch));
    WORT_RETURN_IF_ERROR(rtracker.AttachImage(path));
    rtracker.BeginOp(std::max<size_t>(cfg.max_points, 1), -1, MixSeed(cfg.seed, 0x7ec, i, p.seq), gate_points);
    std::unique_ptr<Pool> rpool;
    std::unique_ptr<Index> ridx;
    Status rs;
    {
      HookGuard hook(&rtracker);
      PoolOptions rpo;
      rpo.background_recovery = false;
      rs = Pool::Open(path, rpo, &rpool);
      if (rs.ok()) rs = rpool->WaitForRecovery();
      if (rs.ok()) rs = OpenIndex(*rpool, root, &ridx);
    }
    std::vector<CrashPoint> rpoints = rtracker.EndOp();
    res.recovery_points_seen += rtracker.PointsSeen();
    ridx.reset();
    if (rpool) (void)rpool->Close();
    rpool.reset();
    if (!rs.ok()) return Status::OK();  // the image's own check passed: cannot happen; reported there
    // A recovery persists what it writes before it returns (ExplorerConfig::recovery_persists):
    // the operations after it build on its writes, and a crash can still lose a line left
    // dirty or in flight - after they have reused what it freed (a page, a leaf it unlinked).
    if (cfg.recovery_persists) {
      for (const CrashPoint& rp : rpoints) {
        if (rp.kind != PointKind::kReturn || rp.open.empty()) continue;
        std::string lines;
        for (size_t k = 0; k < rp.open.size() && k < 4; ++k) lines += fmt::format(" {:#x}", rp.open[k].off);
        add_violation(Violation{i, op_desc, p.seq,
                                p.Describe() + fmt::format(", {} line(s) in flight or dirty; then its recovery returned",
                                                           p.open.size()),
                                image_desc,
                                fmt::format("recovery returned with {} line(s) it wrote not yet persistent (at{}{}): a crash "
                                            "after the next operations can lose them",
                                            rp.open.size(), lines, rp.open.size() > 4 ? " ..." : ""),
                                args + fmt::format(" --replay-op {} --replay-point {}", i, p.seq)});
      }
    }
    std::unordered_set<uint64_t> seen;
    for (const CrashPoint& rp : rpoints) {
      if (res.violation_count >= cfg.max_violations) break;
      if (rp.kind == PointKind::kReturn || !seen.insert(PointHash(rp)).second) continue;
      ++res.recovery_crash_points;
      std::unordered_set<uint64_t> seen_images;
      for (int img = 0; img < 2 + cfg.subsets; ++img) {
        const int mode = img < 2 ? img : 2;
        const uint64_t seed = MixSeed(cfg.seed, 0x7ec0 + i, p.seq * 1000003 + rp.seq, static_cast<uint64_t>(img));
        auto rpatch = MakePatch(rp, mode, seed, cfg.torn_lines);
        if (!seen_images.insert(PatchHash(rpatch)).second) continue;
        const std::string rdesc = mode == 0 ? "nothing" : mode == 1 ? "all" : fmt::format("subset seed={:#x}", seed);
        bool ok = false;
        WORT_RETURN_IF_ERROR(check_image(rtracker, rp, rpatch, target, allowed, i, op_desc, p.seq,
                                         p.Describe() + fmt::format(", {} line(s) in flight or dirty; then a crash during "
                                                                    "recovery, recovery point {} ({}), image {}",
                                                                    p.open.size(), rp.seq, rp.Describe(), rdesc),
                                         image_desc, &ok));
        if (res.violation_count >= cfg.max_violations) break;
      }
    }
    return Status::OK();
  };
  // Checks the images of an operation's crash points: the contents must be `before` or
  // `after` (`after` at the return point); `may_be_absent`: the index may not exist (its creation).
  auto check_points = [&](size_t i, const std::string& op_desc, const std::vector<CrashPoint>& points,
                          const Contents* before, const Contents* after, bool may_be_absent) -> Status {
    CheckTarget t = target;
    std::unordered_set<uint64_t> seen_points;
    for (const CrashPoint& p : points) {
      if (res.violation_count >= cfg.max_violations) break;
      if (!seen_points.insert(PointHash(p)).second) continue;
      ++res.crash_points;
      t.may_be_absent = may_be_absent && p.kind != PointKind::kReturn;  // created once it returned
      const std::vector<const Contents*> allowed =
          p.kind == PointKind::kReturn ? std::vector<const Contents*>{after} : std::vector<const Contents*>{before, after};
      std::unordered_set<uint64_t> seen_images;
      const int singles = cfg.single_line_images ? static_cast<int>(std::min<size_t>(p.open.size(), kMaxSingleLineImages)) : 0;
      for (int img = 0; img < 2 + cfg.subsets + 2 * singles; ++img) {
        const int mode = img < 2 ? img : img < 2 + cfg.subsets ? 2 : img < 2 + cfg.subsets + singles ? 3 : 4;
        const int only = mode == 3 ? img - 2 - cfg.subsets : mode == 4 ? img - 2 - cfg.subsets - singles : -1;
        const uint64_t seed = MixSeed(cfg.seed, i, p.seq, static_cast<uint64_t>(img));
        auto patch = MakePatch(p, mode, seed, cfg.torn_lines, only);
        if (!seen_images.insert(PatchHash(patch)).second) continue;
        const std::string image_desc = mode == 0   ? "nothing (no in-flight or dirty line)"
                                       : mode == 1 ? "all (every in-flight and dirty line)"
                                       : mode == 3 ? fmt::format("only the line at {:#x}", p.open[only].off)
                                       : mode == 4 ? fmt::format("all but the line at {:#x}", p.open[only].off)
                                                   : fmt::format("subset seed={:#x}", seed);
        bool ok = false;
        WORT_RETURN_IF_ERROR(check_image(tracker, p, patch, t, allowed, i, op_desc, p.seq,
                                         p.Describe() + fmt::format(", {} line(s) in flight or dirty", p.open.size()),
                                         image_desc, &ok));
        if (ok && cfg.explore_recovery) WORT_RETURN_IF_ERROR(explore_recovery(i, op_desc, p, patch, image_desc, allowed, t));
        if (res.violation_count >= cfg.max_violations) break;
      }
    }
    return Status::OK();
  };
  size_t site_total = 0;
  auto note_first_sites = [&](size_t i) {
    if (tracker.SiteCount() + rtracker.SiteCount() == site_total) return;
    site_total = tracker.SiteCount() + rtracker.SiteCount();
    for (auto* t : {&tracker, &rtracker})
      for (auto& [site, n] : t->Sites())
        if (!res.first_op.count(site)) res.first_op[site] = i;
  };

  // The index's creation, explored as operation #explore_ops: a crash leaves no index (and no
  // block allocated) or an empty one.
  const size_t create_op = cfg.explore_ops, close_op = cfg.explore_ops + 1;
  const Contents empty;
  if (cfg.explore_lifecycle) {
    const bool explore = cfg.replay_op < 0 ? cfg.explore_from == 0 || cfg.explore_from == create_op
                                           : static_cast<int64_t>(create_op) == cfg.replay_op;
    tracker.BeginOp(explore ? std::max<size_t>(cfg.max_points, 1) : 0, explore ? cfg.replay_point : -1,
                    MixSeed(cfg.seed, 0xc4ea7e), gate_points && cfg.replay_op < 0);
    Status s;
    {
      HookGuard hook(&tracker);
      s = CreateIndex(*pool, root, cfg.index, iopts, &index);
    }
    std::vector<CrashPoint> points = tracker.EndOp();
    WORT_RETURN_IF_ERROR(s);
    res.points_seen += tracker.PointsSeen();
    if (!points.empty()) ++res.ops_explored;
    WORT_RETURN_IF_ERROR(check_points(create_op, "create the index", points, &empty, &empty, true));
    tracker.Commit();
    note_first_sites(create_op);
    WORT_RETURN_IF_ERROR(setup());
    tracker.Snapshot();
  }

  bool live_leak_reported = false;
  // op_persists: the blocks allocated when the last operation returned (offset -> size), and the
  // open lines it exempted (AllocZeroed fill, free space).
  std::map<uint64_t, size_t> blocks_before;
  std::set<uint64_t> exempt_lines;
  if (cfg.op_persists) pool->allocator().ForEachInUse([&](uint64_t b, size_t n) { blocks_before.emplace(b, n); });
  size_t focus_ops_met = 0;
  for (size_t i = 0; i < cfg.explore_ops && res.violation_count < cfg.max_violations; ++i) {
    if (cfg.replay_op >= 0 && static_cast<int64_t>(i) > cfg.replay_op) break;
    if (cfg.progress) cfg.progress(i, cfg.explore_ops, res.images, res.violation_count);
    const Op op = wl.Next(model, cfg.ops, op_rng);
    Contents post = model;
    const Code want = wl.Apply(op, &post);
    const bool explore = cfg.replay_op < 0 ? i >= cfg.explore_from : static_cast<int64_t>(i) == cfg.replay_op;
    const size_t sites_before = tracker.SiteCount();

    tracker.BeginOp(explore ? std::max<size_t>(cfg.max_points, 1) : 0, explore ? cfg.replay_point : -1,
                    MixSeed(cfg.seed, 0x5a3, i), gate_points && cfg.replay_op < 0);
    Status s;
    {
      HookGuard hook(&tracker);
      s = wl.Run(*index, op);
    }
    std::vector<CrashPoint> points = tracker.EndOp();
    ++res.ops_run;
    (void)sites_before;
    if (!points.empty()) ++res.ops_explored;
    res.points_seen += tracker.PointsSeen();
    focus_ops_met += tracker.FocusSeen();
    const bool focus_done = !cfg.focus_site.empty() && cfg.focus_ops != 0 && focus_ops_met >= cfg.focus_ops;

    // The live operation itself must behave as the oracle says.
    std::string live_problem;
    if (s.code() != want) {
      live_problem = fmt::format("the operation returned {}, expected {}", s.ToString(), CodeName(want));
    } else {
      uint64_t v = 0;
      Status ls = index->Lookup(std::string_view(wl.keys()[op.key]), &v);
      auto it = post.find(wl.keys()[op.key]);
      if (it == post.end() ? !ls.IsNotFound() : (!ls.ok() || v != it->second))
        live_problem = fmt::format("after the operation, Lookup of its key returned {} (value {:#x})", ls.ToString(), v);
    }
    if (!live_problem.empty()) {
      Violation v{i, wl.Describe(op), 0, "no crash (the live index)", "-", live_problem, args};
      add_violation(std::move(v));
      tracker.Commit();
      break;  // the oracle no longer describes the index
    }
    // Without any crash, the live pool must keep the reachability contract too: a block the
    // operation orphaned would only be reclaimed by a post-crash GC (a leak until then).
    // (novel_only runs - long plans - check it after the explored operations and every 64th.)
    if (!live_leak_reported && (!cfg.novel_only || !points.empty() || i % 64 == 63 || i + 1 == cfg.explore_ops)) {
      std::string rep;
      Status rs = CheckReachability(*pool, &rep);
      if (!rs.ok()) {
        live_leak_reported = true;
        Violation v{i, wl.Describe(op), 0, "no crash (the live pool after the operation)", "-",
                    rs.ToString() + " [" + rep.substr(0, rep.find('\n')) + "]", args};
        add_violation(std::move(v));
      }
    }

    // Every line the operation wrote is persistent when it returns (ExplorerConfig::op_persists).
    if (cfg.op_persists) {
      std::map<uint64_t, size_t> blocks;  // allocated now: offset -> size
      pool->allocator().ForEachInUse([&](uint64_t b, size_t n) { blocks.emplace(b, n); });
      auto block_of = [&](uint64_t line) -> std::pair<uint64_t, size_t> {
        auto it = blocks.upper_bound(line + kLine - 1);
        if (it == blocks.begin()) return {0, 0};
        --it;
        if (line >= it->first + it->second) return {0, 0};
        return {it->first, it->second};
      };
      auto block_before_of = [&](uint64_t line) {
        auto it = blocks_before.upper_bound(line + kLine - 1);
        return it != blocks_before.begin() && line < std::prev(it)->first + std::prev(it)->second;
      };
      // Lines exempt from the rule: their content is never read, so whether it persists does
      // not matter. Whether the index truly never reads them is what the crash images judge
      // (and --dirty-free-space for a creation).
      //   - An AllocZeroed block's fill: zeroed in the cache and not written since. Taken as any
      //     line of an allocated block that is all zero (the explorer does not see allocations:
      //     a block freed and handed out again within one operation looks like an old one). So
      //     a line an operation clears to all zeros and leaves dirty escapes this rule; the
      //     crash images still judge what it leaves.
      //   - Free space: a line in no allocated block that was in an allocated block at the last
      //     return (a block this operation freed: e.g. ROART's obsolete mark on a retired node)
      //     or exempt then. Allocator metadata is never exempt: it lies in no block, ever.
      std::set<uint64_t> exempt;
      std::vector<uint64_t> open;
      std::vector<std::string> changed;  // of each open line: the words not yet persistent
      static const char kZeroLine[kLine] = {};
      for (const OpenLine& ol : tracker.OpenLinesNow()) {
        const uint64_t l = ol.off;
        const size_t n = block_of(l).second;
        const bool was_exempt = exempt_lines.count(l) != 0;
        bool ok;
        if (n != 0) {
          ok = std::memcmp(pool->base() + l, kZeroLine, kLine) == 0;
        } else {
          ok = was_exempt || block_before_of(l);
        }
        if (ok) {
          exempt.insert(l);
          continue;
        }
        open.push_back(l);
        std::string w;
        for (size_t k = 0; k < kWordsPerLine; ++k)
          if (std::memcmp(pool->base() + l + 8 * k, ol.persisted.data() + 8 * k, 8) != 0)
            w += fmt::format("{}{}", w.empty() ? "" : ",", k);
        changed.push_back(w);
      }
      if (!open.empty()) {
        std::string lines;
        for (size_t k = 0; k < open.size() && k < 4; ++k) {
          const auto [b, n] = block_of(open[k]);
          lines += n ? fmt::format(" {:#x} (block {:#x} of {} bytes, +{:#x}, words {})", open[k], b, n, open[k] - b,
                                   changed[k])
                     : fmt::format(" {:#x} (not in an allocated block, words {})", open[k], changed[k]);
        }
        add_violation(Violation{i, wl.Describe(op), 0, "no crash (the live pool after the operation)", "-",
                                fmt::format("the operation returned with {} line(s) not yet persistent (at{}{}): a "
                                            "crash after later operations can lose them",
                                            open.size(), lines, open.size() > 4 ? " ..." : ""),
                                args + fmt::format(" --replay-op {}", i)});
      }
      exempt_lines = std::move(exempt);
      blocks_before = std::move(blocks);
    }
    WORT_RETURN_IF_ERROR(check_points(i, wl.Describe(op), points, &model, &post, false));
    tracker.Commit();
    model = std::move(post);
    note_first_sites(i);  // the sites this operation met first (in it, or in its images' recovery)
    if (focus_done) break;
  }
  if (cfg.progress) cfg.progress(cfg.explore_ops, cfg.explore_ops, res.images, res.violation_count);

  // The pool's close, explored as operation #explore_ops + 1: a crash leaves the contents whole.
  Status close_status;
  bool closed = false;
  if (cfg.explore_lifecycle && res.violation_count < cfg.max_violations &&
      (cfg.replay_op < 0 || static_cast<int64_t>(close_op) == cfg.replay_op)) {
    tracker.BeginOp(std::max<size_t>(cfg.max_points, 1), cfg.replay_point, MixSeed(cfg.seed, 0xc105e),
                    gate_points && cfg.replay_op < 0);
    const char* base = pool->base();
    const uint64_t mapped = pool->size();
    std::vector<CrashPoint> points;
    {
      HookGuard hook(&tracker);
      index.reset();
      close_status = pool->Close();
      // The return point reads the pool, which Close unmapped: map the file again where it was
      // (MAP_SHARED: the page cache holds what the closed pool left), just for the capture.
      void* m = MAP_FAILED;
      const int fd = ::open(live_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        m = ::mmap(const_cast<char*>(base), mapped, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
        ::close(fd);
      }
      if (m != MAP_FAILED && m != base) {
        ::munmap(m, mapped);
        m = MAP_FAILED;
      }
      points = tracker.EndOp(/*capture_return=*/m != MAP_FAILED);
      if (m != MAP_FAILED) ::munmap(m, mapped);
    }
    closed = true;
    res.points_seen += tracker.PointsSeen();
    if (!points.empty()) ++res.ops_explored;
    WORT_RETURN_IF_ERROR(check_points(close_op, "close the pool", points, &model, &model, false));
    note_first_sites(close_op);
  }

  {
    std::map<std::string, uint64_t> all;
    for (auto* t : {&tracker, &rtracker})
      for (auto& [site, n] : t->Sites()) all[site] += n;
    res.sites.assign(all.begin(), all.end());
  }
  index.reset();
  Status cs = closed ? close_status : pool->Close();
  pool.reset();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(res);
  return cs;
}

}  // namespace wort::crash

namespace wort::crash {

// ---- PathExplorer: RunExplorer's point and image loop for a driver's own operations ---------
struct PathExplorer::Impl {
  Impl(Pool* pool, const ExplorerConfig& c) : cfg(c), tracker(pool, c.drop_site) {}
  ExplorerConfig cfg;
  Tracker tracker;
  InterposedCheckFn interposed_check;
};

PathExplorer::PathExplorer(Pool* pool, const ExplorerConfig& cfg) : impl_(std::make_unique<Impl>(pool, cfg)) {
  impl_->tracker.Snapshot();
}

PathExplorer::~PathExplorer() = default;

void PathExplorer::SetInterposer(InterposeFn interpose, InterposedCheckFn check) {
  impl_->tracker.SetInterposer(std::move(interpose));
  impl_->interposed_check = std::move(check);
}

std::vector<std::pair<uint64_t, std::array<char, 64>>> PathExplorer::TakeInterposedLines() {
  return impl_->tracker.TakeInterposedLines();
}

Status PathExplorer::Explore(size_t op_index, const std::string& op_desc, const std::function<Status()>& op,
                             Status* op_status, const CheckFn& check, ExplorerResult* res) {
  const ExplorerConfig& cfg = impl_->cfg;
  Tracker& tracker = impl_->tracker;
  tracker.BeginOp(std::max<size_t>(cfg.max_points, 1), -1, MixSeed(cfg.seed, 0x5a3, op_index), cfg.novel_only);
  {
    HookGuard hook(&tracker);
    *op_status = op();
  }
  std::vector<CrashPoint> points = tracker.EndOp();
  ++res->ops_run;
  res->points_seen += tracker.PointsSeen();
  std::unordered_set<uint64_t> seen_points;
  // Writes the crash image `patch` of point p to a fresh file, runs judge(path) on it into *verdict
  // and removes the file. Returns an error only when the image could not be written.
  auto judge_image = [&](const CrashPoint& p, const auto& patch, const auto& judge, Status* verdict) -> Status {
    const std::string path = UniquePoolPath(cfg.dir, "path-img");
    Status ws = tracker.WriteImage(path, p, patch);
    if (!ws.ok()) {
      ::unlink(path.c_str());
      return ws;
    }
    ++res->images;
    *verdict = judge(path);
    ::unlink(path.c_str());
    return Status::OK();
  };
  for (const CrashPoint& p : points) {
    if (res->violation_count >= cfg.max_violations) break;
    if (!seen_points.insert(PointHash(p)).second) continue;
    ++res->crash_points;
    std::unordered_set<uint64_t> seen_images;
    for (int img = 0; img < 2 + cfg.subsets; ++img) {
      const int mode = img < 2 ? img : 2;
      const uint64_t seed = MixSeed(cfg.seed, op_index, p.seq, static_cast<uint64_t>(img));
      auto patch = MakePatch(p, mode, seed, cfg.torn_lines);
      if (!seen_images.insert(PatchHash(patch)).second) continue;
      Status cs;
      WORT_RETURN_IF_ERROR(judge_image(
          p, patch, [&](const std::string& path) { return check(path, p.kind == PointKind::kReturn); }, &cs));
      if (cs.ok()) continue;
      ++res->violation_count;
      Violation v{op_index, op_desc, p.seq, p.Describe() + fmt::format(", {} line(s) in flight or dirty", p.open.size()),
                  mode == 0 ? "nothing" : mode == 1 ? "all" : fmt::format("subset seed={:#x}", seed), cs.message(), ""};
      if (cfg.log) std::fprintf(cfg.log, "%s\n", v.ToString().c_str());
      if (res->violations.size() < cfg.max_violations) res->violations.push_back(std::move(v));
      if (res->violation_count >= cfg.max_violations) break;
    }
    // The writes an interposed actor completed at this point: each with the point's images, its
    // persisted lines on top (written last: they were written back after everything the point
    // left undetermined was stored - the actor saw those stores).
    if (!p.interposed.empty()) ++res->interposed_points;
    for (size_t w = 0; w < p.interposed.size() && res->violation_count < cfg.max_violations; ++w) {
      const PathExplorer::Interposed& ip = p.interposed[w];
      ++res->interposed_writes;
      std::unordered_set<uint64_t> seen_w;
      // Unpersisted lines (a write the crash cut): each 8-byte word from the image or from the
      // actor, independently - besides nothing and all, the random mixes, "only the last word"
      // and "all but the first word" (a write whose words land in any order).
      const int cuts = ip.unpersisted.empty() ? 0 : 2;
      for (int img = 0; img < 2 + cfg.subsets + cuts; ++img) {
        const int mode = img < 2 ? img : 2;
        const uint64_t seed = MixSeed(cfg.seed, op_index, p.seq, static_cast<uint64_t>(img));
        auto patch = MakePatch(p, img < 2 + cfg.subsets ? mode : 0, seed, cfg.torn_lines);
        for (auto& l : ip.lines) patch.push_back(l);
        Rng wr(seed ^ 0xc07);
        for (auto& [off, actor] : ip.unpersisted) {
          LineBytes b = tracker.ImageLine(p, patch, off);
          for (size_t k = 0; k < kWordsPerLine; ++k) {
            const bool take = img == 1 || (img >= 2 && img < 2 + cfg.subsets && wr.Bit()) ||
                              (img == 2 + cfg.subsets && k == kWordsPerLine - 1) || (img == 3 + cfg.subsets && k > 0);
            if (take) std::memcpy(b.data() + 8 * k, actor.data() + 8 * k, 8);
          }
          patch.emplace_back(off, b);
        }
        if (!seen_w.insert(PatchHash(patch)).second) continue;
        Status cs;
        WORT_RETURN_IF_ERROR(judge_image(
            p, patch,
            [&](const std::string& path) {
              return impl_->interposed_check ? impl_->interposed_check(path, ip.tag) : Status::OK();
            },
            &cs));
        ++res->interposed_images;
        if (cs.ok()) continue;
        ++res->violation_count;
        Violation v{op_index, op_desc, p.seq,
                    p.Describe() + fmt::format(", {} line(s) in flight or dirty; interposed: {}", p.open.size(), ip.tag),
                    img == 0                   ? "nothing"
                    : img == 1                 ? "all"
                    : img < 2 + cfg.subsets    ? fmt::format("subset seed={:#x}", seed)
                    : img == 2 + cfg.subsets ? "nothing, the cut write's last word only"
                                               : "nothing, the cut write but its first word",
                    cs.message(), ""};
        if (cfg.log) std::fprintf(cfg.log, "%s\n", v.ToString().c_str());
        if (res->violations.size() < cfg.max_violations) res->violations.push_back(std::move(v));
        if (res->violation_count >= cfg.max_violations) break;
      }
    }
  }
  tracker.Commit();
  res->sites = tracker.Sites();
  return Status::OK();
}

}  // namespace wort::crash
