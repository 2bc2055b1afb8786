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
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

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
  if (!c.edge_keys) s += " --no-edge-keys";
  if (!c.key_type_from_dist) s += c.index_options.key_type == KeyType::kU64 ? " --key-type u64" : " --key-type bytes";
  if (c.index_options.span_bits != IndexOptions{}.span_bits) s += fmt::format(" --span-bits {}", c.index_options.span_bits);
  if (!c.drop_site.empty()) s += " --drop-site " + c.drop_site;
  return s;
}

namespace {

constexpr uint64_t kLine = pm::kCacheLine;
constexpr uint64_t kPage = 4096;
constexpr size_t kWordsPerLine = kLine / 8;
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
      : pool_(pool), base_(pool->base()), reserved_(pool->max_size()), drop_site_(std::move(drop_site)) {}

  std::vector<std::pair<std::string, uint64_t>> Sites() {
    std::lock_guard<std::mutex> g(mu_);
    return {sites_.begin(), sites_.end()};
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
  void BeginOp(size_t max_points, int64_t only_point, uint64_t seed) {
    std::lock_guard<std::mutex> g(mu_);
    in_op_ = true;
    max_points_ = max_points;
    only_point_ = only_point;
    rng_ = Rng(seed);
    eligible_ = 0;
    points_.clear();
    prev_flush_file_ = nullptr;
  }

  // Ends the operation: records the return point, returns the recorded points in order. The
  // shadow still holds the state of the operation's start until Commit().
  std::vector<CrashPoint> EndOp() {
    std::lock_guard<std::mutex> g(mu_);
    in_op_ = false;
    if (max_points_ > 0 && (only_point_ < 0 || only_point_ == static_cast<int64_t>(eligible_))) {
      CrashPoint p;
      Capture(&p, PointKind::kReturn, nullptr, 0);
      p.seq = eligible_;
      points_.push_back(std::move(p));
    }
    std::sort(points_.begin(), points_.end(), [](const CrashPoint& a, const CrashPoint& b) { return a.seq < b.seq; });
    return std::move(points_);
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
    std::lock_guard<std::mutex> g(mu_);
    const char* l = static_cast<const char*>(line);
    if (l < base_ || l >= base_ + reserved_) return;  // not this pool
    GrowShadow();
    const uint64_t off = static_cast<uint64_t>(l - base_);
    if (off >= shadow_.size()) return;
    if (Site(where)) return;  // a dropped site: the flush does not exist
    // The lines of one flush() call form one crash point.
    const bool same_call = prev_flush_file_ == where.file_name() && prev_flush_line_ == where.line() &&
                           prev_flush_col_ == where.column() && off == prev_flush_off_ + kLine;
    if (!same_call) MaybeRecord(PointKind::kFlush, where.file_name(), where.line());
    prev_flush_file_ = where.file_name();
    prev_flush_line_ = where.line();
    prev_flush_col_ = where.column();
    prev_flush_off_ = off;
    std::memcpy(inflight_[off].data(), base_ + off, kLine);
  }

  void OnFence(const std::source_location& where) override {
    std::lock_guard<std::mutex> g(mu_);
    GrowShadow();
    if (Site(where)) return;  // a dropped site: the fence does not exist
    MaybeRecord(PointKind::kFence, where.file_name(), where.line());
    prev_flush_file_ = nullptr;
    for (auto& [off, b] : inflight_) {
      if (in_op_) op_persisted_[off] = b;
      else WriteShadow(off, b);
    }
    inflight_.clear();
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
    if (in_op_ && (where.line() != last_site_line_ || where.file_name() != last_site_file_)) ++sites_[site];
    last_site_line_ = where.line();
    last_site_file_ = where.file_name();
    return drop;
  }

  void GrowShadow() {
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

  void MaybeRecord(PointKind kind, const char* file, uint32_t line) {
    if (!in_op_ || max_points_ == 0) return;
    const uint64_t seq = eligible_++;
    if (only_point_ >= 0) {
      if (seq != static_cast<uint64_t>(only_point_)) return;
      points_.emplace_back();
      Capture(&points_.back(), kind, file, line);
      points_.back().seq = seq;
      return;
    }
    size_t slot;
    if (points_.size() < max_points_) {
      slot = points_.size();
      points_.emplace_back();
    } else {
      const uint64_t j = rng_.Below(seq + 1);  // reservoir sampling (Algorithm R)
      if (j >= max_points_) return;
      slot = static_cast<size_t>(j);
    }
    Capture(&points_[slot], kind, file, line);
    points_[slot].seq = seq;
  }

  // Records what a crash right now leaves undetermined.
  void Capture(CrashPoint* p, PointKind kind, const char* file, uint32_t line) {
    p->kind = kind;
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
    for (auto& [off, b] : op_persisted_)
      if (std::memcmp(base_ + off, b.data(), kLine) != 0) dirty(off);
    const uint64_t size = shadow_.size();
    for (uint64_t a = 0; a < size; a += kPage) {
      const uint64_t n = std::min(kPage, size - a);
      if (std::memcmp(base_ + a, shadow_.data() + a, n) == 0) continue;
      for (uint64_t l = a; l < a + n; l += kLine) {
        if (op_persisted_.count(l)) continue;
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
  Pool* pool_;
  const char* base_;
  uint64_t reserved_;
  std::vector<char> shadow_;        // persistent content at the start of the current operation
  std::vector<uint8_t> page_used_;  // per 4 KiB page of the shadow: may be non-zero
  std::unordered_map<uint64_t, LineBytes> inflight_;      // flushed since the last fence
  std::unordered_map<uint64_t, LineBytes> op_persisted_;  // reached memory during the operation
  bool in_op_ = false;
  size_t max_points_ = 0;
  int64_t only_point_ = -1;
  Rng rng_{0};
  uint64_t eligible_ = 0;
  std::vector<CrashPoint> points_;
  const char* prev_flush_file_ = nullptr;
  uint32_t prev_flush_line_ = 0, prev_flush_col_ = 0;
  uint64_t prev_flush_off_ = 0;
  std::string drop_site_;
  std::unordered_map<const char*, std::string> site_names_;
  std::map<std::string, uint64_t> sites_;
  const char* last_site_file_ = nullptr;
  uint32_t last_site_line_ = 0;
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

// The content of the open lines for one image: mode 0 = nothing, 1 = all, 2 = random (seed).
std::vector<std::pair<uint64_t, LineBytes>> MakePatch(const CrashPoint& p, int mode, uint64_t seed, bool torn) {
  Rng r(seed);
  auto pick = [&](const OpenLine& o) -> uint8_t {
    if (mode == 0) return kPersisted;
    if (mode == 1) return o.has_live ? kLive : o.has_inflight ? kInflight : kPersisted;
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
  const IndexKind* kind = FindIndexKind(cfg.index);
  if (!kind) return Status::InvalidArgument("unknown index kind '" + cfg.index + "'");
  if (cfg.ops.empty()) return Status::InvalidArgument("no operation types to explore");
  IndexOptions iopts = cfg.index_options;
  if (cfg.key_type_from_dist) iopts.key_type = bench::IsIntegerDist(cfg.dist) ? KeyType::kU64 : KeyType::kBytes;
  if (iopts.key_type == KeyType::kU64 && !bench::IsIntegerDist(cfg.dist))
    return Status::InvalidArgument("an integer key type needs an integer distribution (dense, sparse, clustered)");

  const Workload wl(cfg.dist, iopts.key_type, cfg.keys, cfg.explore_ops + 8, cfg.edge_keys, cfg.seed);
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
  std::unique_ptr<Index> index;
  WORT_RETURN_IF_ERROR(CreateIndex(*pool, root, cfg.index, iopts, &index));

  // Setup: not explored.
  Contents model;
  for (size_t i = 0; i < wl.setup_count(); ++i) {
    const Op op{OpType::kInsert, static_cast<uint32_t>(i), MixSeed(cfg.seed, 0x5e70, i)};
    Status s = wl.Run(*index, op);
    if (!s.ok()) return Status(s.code(), "setup, " + wl.Describe(op) + ": " + s.message());
    (void)wl.Apply(op, &model);
  }

  Tracker tracker(pool.get(), cfg.drop_site);
  tracker.Snapshot();
  CheckTarget target{kind, root, &wl, cfg.exercise};
  Rng op_rng(MixSeed(cfg.seed, 0x0b5));
  const std::string args = ExplorerArgs(cfg);

  auto add_violation = [&](Violation v) {
    ++res.violation_count;
    if (cfg.log) std::fprintf(cfg.log, "%s\n", v.ToString().c_str());
    if (res.violations.size() < cfg.max_violations) res.violations.push_back(std::move(v));
  };

  bool live_leak_reported = false;
  for (size_t i = 0; i < cfg.explore_ops && res.violation_count < cfg.max_violations; ++i) {
    if (cfg.replay_op >= 0 && static_cast<int64_t>(i) > cfg.replay_op) break;
    const Op op = wl.Next(model, cfg.ops, op_rng);
    Contents post = model;
    const Code want = wl.Apply(op, &post);
    const bool explore = cfg.replay_op < 0 || static_cast<int64_t>(i) == cfg.replay_op;

    tracker.BeginOp(explore ? std::max<size_t>(cfg.max_points, 1) : 0, explore ? cfg.replay_point : -1,
                    MixSeed(cfg.seed, 0x5a3, i));
    Status s;
    {
      HookGuard hook(&tracker);
      s = wl.Run(*index, op);
    }
    std::vector<CrashPoint> points = tracker.EndOp();
    ++res.ops_run;
    res.points_seen += tracker.PointsSeen();

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
    if (!live_leak_reported) {
      std::string rep;
      Status rs = CheckReachability(*pool, &rep);
      if (!rs.ok()) {
        live_leak_reported = true;
        Violation v{i, wl.Describe(op), 0, "no crash (the live pool after the operation)", "-",
                    rs.ToString() + " [" + rep.substr(0, rep.find('\n')) + "]", args};
        add_violation(std::move(v));
      }
    }

    std::unordered_set<uint64_t> seen_points;
    for (const CrashPoint& p : points) {
      if (res.violation_count >= cfg.max_violations) break;
      if (!seen_points.insert(PointHash(p)).second) continue;
      ++res.crash_points;
      const std::vector<const Contents*> allowed =
          p.kind == PointKind::kReturn ? std::vector<const Contents*>{&post} : std::vector<const Contents*>{&model, &post};
      std::unordered_set<uint64_t> seen_images;
      for (int img = 0; img < 2 + cfg.subsets; ++img) {
        const int mode = img < 2 ? img : 2;
        const uint64_t seed = MixSeed(cfg.seed, i, p.seq, static_cast<uint64_t>(img));
        auto patch = MakePatch(p, mode, seed, cfg.torn_lines);
        if (!seen_images.insert(PatchHash(patch)).second) continue;
        const std::string image_desc = mode == 0   ? "nothing (no in-flight or dirty line)"
                                       : mode == 1 ? "all (every in-flight and dirty line)"
                                                   : fmt::format("subset seed={:#x}", seed);
        const std::string path = UniquePoolPath(cfg.dir, "crash-img");
        Status ws = tracker.WriteImage(path, p, patch);
        if (!ws.ok()) {
          ::unlink(path.c_str());
          return ws;
        }
        ++res.images;
        int matched = -1;
        bool fatal = false;
        Status cs = cfg.isolate ? CheckCrashedPoolIsolated(path, target, allowed, &matched, cfg.check_timeout_s)
                                : CheckCrashedPoolGuarded(path, target, allowed, &matched, &fatal, cfg.check_timeout_s);
        ::unlink(path.c_str());
        if (!cs.ok()) {
          Violation v{i,
                      wl.Describe(op),
                      p.seq,
                      p.Describe() + fmt::format(", {} line(s) in flight or dirty", p.open.size()),
                      image_desc,
                      cs.message(),
                      args + fmt::format(" --replay-op {} --replay-point {}", i, p.seq)};
          add_violation(std::move(v));
          if (fatal) {
            res.stopped_early = "the check of an image crashed or hung; the run stopped (use --isolate to go on)";
            res.violation_count = std::max(res.violation_count, cfg.max_violations);
          }
          if (res.violation_count >= cfg.max_violations) break;
        }
      }
    }
    tracker.Commit();
    model = std::move(post);
  }

  res.sites = tracker.Sites();
  index.reset();
  Status cs = pool->Close();
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
};

PathExplorer::PathExplorer(Pool* pool, const ExplorerConfig& cfg) : impl_(std::make_unique<Impl>(pool, cfg)) {
  impl_->tracker.Snapshot();
}

PathExplorer::~PathExplorer() = default;

Status PathExplorer::Explore(size_t op_index, const std::string& op_desc, const std::function<Status()>& op,
                             Status* op_status, const CheckFn& check, ExplorerResult* res) {
  const ExplorerConfig& cfg = impl_->cfg;
  Tracker& tracker = impl_->tracker;
  tracker.BeginOp(std::max<size_t>(cfg.max_points, 1), -1, MixSeed(cfg.seed, 0x5a3, op_index));
  {
    HookGuard hook(&tracker);
    *op_status = op();
  }
  std::vector<CrashPoint> points = tracker.EndOp();
  ++res->ops_run;
  res->points_seen += tracker.PointsSeen();
  std::unordered_set<uint64_t> seen_points;
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
      const std::string path = UniquePoolPath(cfg.dir, "path-img");
      Status ws = tracker.WriteImage(path, p, patch);
      if (!ws.ok()) {
        ::unlink(path.c_str());
        return ws;
      }
      ++res->images;
      Status cs = check(path, p.kind == PointKind::kReturn);
      ::unlink(path.c_str());
      if (cs.ok()) continue;
      ++res->violation_count;
      Violation v{op_index, op_desc, p.seq, p.Describe() + fmt::format(", {} line(s) in flight or dirty", p.open.size()),
                  mode == 0 ? "nothing" : mode == 1 ? "all" : fmt::format("subset seed={:#x}", seed), cs.message(), ""};
      if (cfg.log) std::fprintf(cfg.log, "%s\n", v.ToString().c_str());
      if (res->violations.size() < cfg.max_violations) res->violations.push_back(std::move(v));
      if (res->violation_count >= cfg.max_violations) break;
    }
  }
  tracker.Commit();
  res->sites = tracker.Sites();
  return Status::OK();
}

}  // namespace wort::crash
