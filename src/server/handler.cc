// Request execution and reply formatting for `wort serve` (see handler.h).
#include "server/handler.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/core.h>

#include "server/auth.h"
#include "wort/alloc.h"

namespace wort::server {

namespace {

void AppendU64(std::string* out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// The pool's maximum size, or the lower limit cache_memlimit set.
uint64_t MaxBytes(const Pool& p) {
  const uint64_t lim = p.growth_limit();
  return lim != 0 && lim < p.max_size() ? lim : p.max_size();
}

void Line(std::string* out, std::string_view s) {
  out->append(s);
  out->append("\r\n");
}

// "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n": the numbers formatted on the stack, then
// five appends (one growth check each) instead of eleven.
void AppendValue(std::string* out, const ItemView& it, bool with_cas) {
  char nums[3 * 21 + 8];
  char* const end = nums + sizeof(nums) - 3;  // each number leaves room for ' ' or "\r\n" after it
  char* p = nums;
  *p++ = ' ';
  p = std::to_chars(p, end, it.flags).ptr;
  *p++ = ' ';
  p = std::to_chars(p, end, it.data.size()).ptr;
  if (with_cas) {
    *p++ = ' ';
    p = std::to_chars(p, end, it.cas).ptr;
  }
  *p++ = '\r';
  *p++ = '\n';
  out->append("VALUE ", 6);
  out->append(it.key);
  out->append(nums, static_cast<size_t>(p - nums));
  out->append(it.data);
  out->append("\r\n", 2);
}

template <class T>
void Stat(std::string* out, std::string_view name, const T& v) {
  out->append("STAT ");
  out->append(name);
  out->push_back(' ');
  if constexpr (std::is_convertible_v<T, std::string_view>) {
    out->append(std::string_view(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    const int n = std::snprintf(buf, sizeof(buf), "%.6f", static_cast<double>(v));
    out->append(buf, n);
  } else if constexpr (std::is_signed_v<T>) {
    out->append(std::to_string(v));
  } else {
    AppendU64(out, v);
  }
  out->append("\r\n");
}

constexpr std::string_view kNoMemory = "SERVER_ERROR out of memory storing object";
constexpr std::string_view kTooLarge = "SERVER_ERROR object too large for cache";

}  // namespace

unsigned ServerStats::AssignShard() {
  const unsigned s = sync::detail::g_counter_shard_next.fetch_add(1, std::memory_order_relaxed) % kShards + 1;
  sync::detail::t_counter_shard = s;
  return s;
}

void ServerStats::Reset() {
  for (auto* c : {&total_connections, &rejected_connections, &idle_kicks}) c->store(0, std::memory_order_relaxed);
  for (Counters& c : shards_) {
    for (Field f : {&Counters::cmd_get, &Counters::cmd_set, &Counters::cmd_flush, &Counters::cmd_touch,
                    &Counters::get_hits, &Counters::get_misses, &Counters::get_expired, &Counters::get_flushed,
                    &Counters::delete_hits, &Counters::delete_misses, &Counters::incr_hits, &Counters::incr_misses,
                    &Counters::decr_hits, &Counters::decr_misses, &Counters::cas_hits, &Counters::cas_misses,
                    &Counters::cas_badval, &Counters::touch_hits, &Counters::touch_misses, &Counters::store_too_large,
                    &Counters::store_no_memory, &Counters::bytes_read, &Counters::bytes_written, &Counters::auth_cmds,
                    &Counters::auth_errors})
      (c.*f).store(0, std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> g(prefix_mu);  // memcached's stats reset clears them too
    prefixes.clear();
  }
}

Handler::~Handler() {
  if (registered_) {
    std::lock_guard<std::mutex> g(stats_.conns_mu);
    stats_.conns.erase(this);
  }
}

void Handler::SetPeer(int fd, std::string addr, std::string listen_addr) {
  fd_ = fd;
  peer_ = std::move(addr);
  listen_addr_ = std::move(listen_addr);
  last_cmd_.store(CoarseNow(), std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(stats_.conns_mu);
  stats_.conns.insert(this);
  registered_ = true;
}

int64_t Handler::CoarseNow() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return ts.tv_sec;
}

Handler::Step Handler::Execute(const Request& req, std::string* out) {
  const size_t mark = out->size();
  if (registered_) last_cmd_.store(CoarseNow(), std::memory_order_relaxed);
  Step step = Step::kDone;
  const auto relaxed = std::memory_order_relaxed;
  switch (req.cmd) {
    case Command::kGet:
    case Command::kGets:
    case Command::kGat:
    case Command::kGats: {
      // The request is copied for a later Resume only when the reply pauses (kMore).
      next_key_ = 0;
      const Step st = Retrieve(req, out);
      if (st == Step::kMore) pending_ = req;
      return st;
    }

    case Command::kRange:
      if (!store_.ordered()) {
        Line(out, "SERVER_ERROR range needs an ordered index; this server's index (" + std::string(store_.index_kind()) +
                      ") is a hash index");
        return Step::kDone;
      }
      pending_ = req;
      range_next_.assign(req.keys[0]);
      range_left_ = req.limit;
      return RangeStep(out);

    case Command::kSet:
    case Command::kAdd:
    case Command::kReplace:
    case Command::kAppend:
    case Command::kPrepend:
    case Command::kCas: {
      const std::string_view key = req.keys[0];
      StoreMode mode = StoreMode::kSet;
      switch (req.cmd) {
        case Command::kAdd: mode = StoreMode::kAdd; break;
        case Command::kReplace: mode = StoreMode::kReplace; break;
        case Command::kAppend: mode = StoreMode::kAppend; break;
        case Command::kPrepend: mode = StoreMode::kPrepend; break;
        case Command::kCas: mode = StoreMode::kCas; break;
        default: break;
      }
      const Result r = StoreCommand(key, req.cmd == Command::kSet, req.cmd == Command::kCas, req.too_large, [&] {
        return store_.StoreItem(mode, key, req.flags, ToAbsoluteExptime(req.exptime, Store::Now()), req.data,
                                req.cas_unique);
      });
      switch (r) {
        case Result::kStored: Line(out, "STORED"); break;
        case Result::kNotStored: Line(out, "NOT_STORED"); break;
        case Result::kExists: Line(out, "EXISTS"); break;
        case Result::kNotFound: Line(out, "NOT_FOUND"); break;
        case Result::kTooLarge: Line(out, kTooLarge); break;
        case Result::kNoMemory: Line(out, kNoMemory); break;
        default: Line(out, "SERVER_ERROR internal error storing object"); break;
      }
      break;
    }

    case Command::kDelete:
      Line(out, DeleteCommand(req.keys[0], 0) == Result::kDeleted ? "DELETED" : "NOT_FOUND");
      break;

    case Command::kIncr:
    case Command::kDecr: {
      const bool incr = req.cmd == Command::kIncr;
      uint64_t v = 0;
      const Result r = store_.IncrDecr(req.keys[0], incr, req.delta, &v);
      CountArith(incr, r);
      switch (r) {
        case Result::kStored:
          AppendU64(out, v);
          out->append("\r\n");
          break;
        case Result::kNotFound: Line(out, "NOT_FOUND"); break;
        case Result::kNonNumeric: Line(out, "CLIENT_ERROR cannot increment or decrement non-numeric value"); break;
        case Result::kNoMemory: Line(out, kNoMemory); break;
        default: Line(out, "SERVER_ERROR internal error"); break;
      }
      break;
    }

    case Command::kTouch: {
      stats_.Local().cmd_touch.fetch_add(1, relaxed);
      const Result r = store_.Touch(req.keys[0], ToAbsoluteExptime(req.exptime, Store::Now()));
      if (r == Result::kTouched) {
        stats_.Local().touch_hits.fetch_add(1, relaxed);
        Line(out, "TOUCHED");
      } else {
        stats_.Local().touch_misses.fetch_add(1, relaxed);
        Line(out, "NOT_FOUND");
      }
      break;
    }

    case Command::kFlushAll: {
      stats_.Local().cmd_flush.fetch_add(1, relaxed);
      const int64_t when = req.delay > 0 ? ToAbsoluteExptime(req.delay, Store::Now()) : 0;
      store_.FlushAll(when);
      Line(out, "OK");
      break;
    }

    case Command::kVersion:
      out->append("VERSION ");
      Line(out, kVersionString);
      break;

    case Command::kVerbosity:
      stats_.verbosity.store(req.verbosity, relaxed);
      Line(out, "OK");
      break;

    case Command::kCacheMemlimit:
      // memcached's lower bound; the pool cannot grow past its maximum size (-m at creation).
      if (req.limit < 8) {
        Line(out, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
      } else if (req.limit > (store_.pool().max_size() >> 20)) {
        Line(out, fmt::format("SERVER_ERROR cache_memlimit: the pool's maximum size is {} MiB (-m when it was created)",
                              store_.pool().max_size() >> 20));
      } else {
        store_.pool().SetGrowthLimit(req.limit << 20);
        Line(out, "OK");
      }
      break;

    case Command::kStats:
      if (req.arg == "detail") Detail(req.arg2, out);
      else if (req.arg == "cachedump") Cachedump(req, out);
      else Stats(req.arg, out);
      break;

    case Command::kSlabsAutomove:  // no slab classes to move pages between: nothing to do
      Line(out, "OK");
      break;

    case Command::kSlabsReassign:
      Line(out, "CLIENT_ERROR slab reassignment disabled");
      break;

    case Command::kLruMetadump:
      if (req.class_id != 1) {  // wort keeps every item in class 1
        Line(out, "END");
        break;
      }
      if (!store_.ordered()) {
        Line(out, "SERVER_ERROR metadump needs an ordered index; this server's index (" +
                      std::string(store_.index_kind()) + ") is a hash index");
        break;
      }
      pending_ = req;
      range_next_.clear();
      return MetadumpStep(out);

    case Command::kQuit:
      return Step::kClose;

    case Command::kMetaGet:
    case Command::kMetaSet:
    case Command::kMetaDelete:
    case Command::kMetaArith:
    case Command::kMetaDebug:
    case Command::kMetaNoop:
      Meta(req, out);  // q is handled there (req.noreply is never set for meta commands)
      break;
  }
  if (req.noreply) out->resize(mark);
  return step;
}

Result Handler::DeleteCommand(std::string_view key, uint64_t cas) {
  stats_.Detail(key, ServerStats::DetailOp::kDel);
  const Result r = cas == 0 ? store_.Delete(key) : store_.MetaDelete(key, true, cas, false, false, 0);
  if (r == Result::kDeleted) stats_.Local().delete_hits.fetch_add(1, std::memory_order_relaxed);
  else if (r != Result::kExists && r != Result::kNoMemory) stats_.Local().delete_misses.fetch_add(1, std::memory_order_relaxed);
  return r;
}

void Handler::CountArith(bool incr, Result r) {
  const auto relaxed = std::memory_order_relaxed;
  if (r == Result::kStored) (incr ? stats_.Local().incr_hits : stats_.Local().decr_hits).fetch_add(1, relaxed);
  else if (r == Result::kNotFound) (incr ? stats_.Local().incr_misses : stats_.Local().decr_misses).fetch_add(1, relaxed);
  else if (r == Result::kNoMemory) stats_.Local().store_no_memory.fetch_add(1, relaxed);
}

Handler::Step Handler::Resume(std::string* out) {
  if (pending_.cmd == Command::kRange) return RangeStep(out);
  if (pending_.cmd == Command::kLruMetadump) return MetadumpStep(out);
  return Retrieve(pending_, out);
}

Handler::Step Handler::Retrieve(const Request& req, std::string* out) {
  const bool touch = req.cmd == Command::kGat || req.cmd == Command::kGats;
  const bool with_cas = req.cmd == Command::kGets || req.cmd == Command::kGats;
  const auto relaxed = std::memory_order_relaxed;
  ServerStats::Counters& c = stats_.Local();  // this thread's (one lookup per request)
  const int64_t exptime = touch ? ToAbsoluteExptime(req.exptime, Store::Now()) : 0;
  auto emit = [&](const ItemView& it) { AppendValue(out, it, with_cas); };
  while (next_key_ < req.keys.size()) {
    const std::string_view key = req.keys[next_key_++];
    c.cmd_get.fetch_add(1, relaxed);
    bool hit;
    if (touch) {
      c.cmd_touch.fetch_add(1, relaxed);
      hit = store_.GetAndTouch(key, exptime, emit);
      (hit ? c.touch_hits : c.touch_misses).fetch_add(1, relaxed);
    } else {
      bool expired = false;
      hit = store_.Get(key, emit, &expired);
      if (!hit && expired) c.get_expired.fetch_add(1, relaxed);
    }
    (hit ? c.get_hits : c.get_misses).fetch_add(1, relaxed);
    stats_.Detail(key, ServerStats::DetailOp::kGet);
    if (hit) stats_.Detail(key, ServerStats::DetailOp::kHit);
    if (out->size() >= kHighWater && next_key_ < req.keys.size()) return Step::kMore;
  }
  Line(out, "END");
  return Step::kDone;
}

Handler::Step Handler::RangeStep(std::string* out) {
  const Request& req = pending_;
  std::string next;
  uint64_t emitted = 0;
  Status s = store_.Range(
      range_next_, req.keys[1], range_left_,
      [&](const ItemView& it) {
        if (req.with_values) {
          AppendValue(out, it, false);
        } else {
          out->append("KEY ");
          out->append(it.key);
          out->append("\r\n");
        }
        return out->size() < kHighWater;
      },
      &next, &emitted);
  if (!s.ok()) {
    Line(out, "SERVER_ERROR " + s.message());
    return Step::kDone;
  }
  range_left_ -= std::min(range_left_, emitted);
  if (!next.empty() && range_left_ > 0) {
    range_next_ = std::move(next);
    return Step::kMore;
  }
  Line(out, "END");
  return Step::kDone;
}

// stats detail on|off|dump (memcached's replies).
void Handler::Detail(std::string_view what, std::string* out) {
  if (what == "on" || what == "off") {
    stats_.detail.store(what == "on", std::memory_order_relaxed);
    Line(out, "OK");
  } else if (what == "dump") {
    std::lock_guard<std::mutex> g(stats_.prefix_mu);
    for (const auto& [prefix, c] : stats_.prefixes)
      Line(out, fmt::format("PREFIX {} get {} hit {} set {} del {}", prefix, c.get, c.hit, c.set, c.del));
    Line(out, "END");
  } else {
    Line(out, "CLIENT_ERROR usage: stats detail on|off|dump");
  }
}

void Handler::Stats(std::string_view group, std::string* out) {
  const auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const int64_t now = Store::Now();
  if (group.empty()) {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    Stat(out, "pid", static_cast<int64_t>(getpid()));
    Stat(out, "uptime", now - stats_.start_time);
    Stat(out, "time", now);
    Stat(out, "version", kVersionString);
    Stat(out, "pointer_size", static_cast<int64_t>(sizeof(void*) * 8));
    Stat(out, "rusage_user", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
    Stat(out, "rusage_system", ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    Stat(out, "max_connections", uint64_t(config_.max_conns));
    Stat(out, "curr_connections", ld(stats_.curr_connections));
    Stat(out, "total_connections", ld(stats_.total_connections));
    Stat(out, "rejected_connections", ld(stats_.rejected_connections));
    Stat(out, "cmd_get", stats_.Sum(&ServerStats::Counters::cmd_get));
    Stat(out, "cmd_set", stats_.Sum(&ServerStats::Counters::cmd_set));
    Stat(out, "cmd_flush", stats_.Sum(&ServerStats::Counters::cmd_flush));
    Stat(out, "cmd_touch", stats_.Sum(&ServerStats::Counters::cmd_touch));
    Stat(out, "get_hits", stats_.Sum(&ServerStats::Counters::get_hits));
    Stat(out, "get_misses", stats_.Sum(&ServerStats::Counters::get_misses));
    Stat(out, "get_expired", stats_.Sum(&ServerStats::Counters::get_expired));
    Stat(out, "get_flushed", stats_.Sum(&ServerStats::Counters::get_flushed));
    Stat(out, "delete_misses", stats_.Sum(&ServerStats::Counters::delete_misses));
    Stat(out, "delete_hits", stats_.Sum(&ServerStats::Counters::delete_hits));
    Stat(out, "incr_misses", stats_.Sum(&ServerStats::Counters::incr_misses));
    Stat(out, "incr_hits", stats_.Sum(&ServerStats::Counters::incr_hits));
    Stat(out, "decr_misses", stats_.Sum(&ServerStats::Counters::decr_misses));
    Stat(out, "decr_hits", stats_.Sum(&ServerStats::Counters::decr_hits));
    Stat(out, "cas_misses", stats_.Sum(&ServerStats::Counters::cas_misses));
    Stat(out, "cas_hits", stats_.Sum(&ServerStats::Counters::cas_hits));
    Stat(out, "cas_badval", stats_.Sum(&ServerStats::Counters::cas_badval));
    Stat(out, "touch_hits", stats_.Sum(&ServerStats::Counters::touch_hits));
    Stat(out, "touch_misses", stats_.Sum(&ServerStats::Counters::touch_misses));
    Stat(out, "store_too_large", stats_.Sum(&ServerStats::Counters::store_too_large));
    Stat(out, "store_no_memory", stats_.Sum(&ServerStats::Counters::store_no_memory));
    Stat(out, "auth_cmds", stats_.Sum(&ServerStats::Counters::auth_cmds));
    Stat(out, "auth_errors", stats_.Sum(&ServerStats::Counters::auth_errors));
    Stat(out, "idle_kicks", ld(stats_.idle_kicks));
    // wort's input buffer budget (ServerConfig::max_buffered, partial_timeout).
    Stat(out, "wort_buffered_bytes", ld(stats_.buffered_bytes));
    Stat(out, "wort_buffer_refusals", ld(stats_.buffer_refusals));
    Stat(out, "wort_partial_kicks", ld(stats_.partial_kicks));
    Stat(out, "bytes_read", stats_.Sum(&ServerStats::Counters::bytes_read));
    Stat(out, "bytes_written", stats_.Sum(&ServerStats::Counters::bytes_written));
    Stat(out, "limit_maxbytes", MaxBytes(store_.pool()));
    Stat(out, "threads", uint64_t(config_.threads));
    Stat(out, "bytes", store_.bytes_allocated());
    Stat(out, "curr_items", store_.curr_items());
    Stat(out, "total_items", static_cast<uint64_t>(store_.counters().total_items.Sum()));
    Stat(out, "expired_unfetched", ld(store_.counters().expired_unfetched));
    Stat(out, "evictions", ld(store_.counters().evictions));
    Stat(out, "evicted_unfetched", ld(store_.counters().evicted_unfetched));
    Stat(out, "reclaimed", ld(store_.counters().reclaimed));
    Stat(out, "crawler_items_checked", ld(store_.counters().crawler_items_checked));
    // wort's own fields.
    Stat(out, "wort_index", store_.index_kind());
    Stat(out, "wort_pool", store_.pool().path());
    Stat(out, "wort_pool_size", store_.pool().size());
    Stat(out, "wort_pool_generation", store_.pool().generation());
    // 1 while the item count of a reopened store is still being made in the background (the
    // server answers meanwhile; curr_items counts only what the walk has passed): store.h.
    Stat(out, "wort_curr_items_counting", uint64_t(store_.counting_items() ? 1 : 0));
    Stat(out, "wort_opened_clean", uint64_t(store_.pool().opened_clean() ? 1 : 0));
    Stat(out, "wort_open_seconds", store_.open_seconds());
    Stat(out, "wort_recovery_done", uint64_t(store_.pool().recovery_done() ? 1 : 0));
    Stat(out, "wort_evict_refused", ld(store_.counters().evict_failures));
    Stat(out, "wort_evict_chunk_rounds", ld(store_.counters().evict_chunk_rounds));
    if (!config_.durability.empty()) Stat(out, "wort_durability", config_.durability);
  } else if (group == "settings") {
    Stat(out, "maxbytes", MaxBytes(store_.pool()));
    Stat(out, "maxconns", uint64_t(config_.max_conns));
    Stat(out, "tcpport", uint64_t(config_.port));
    Stat(out, "inter", config_.listen);
    Stat(out, "verbosity", uint64_t(stats_.verbosity.load()));
    Stat(out, "evictions", store_.evicting() ? "on" : "off");
    Stat(out, "num_threads", uint64_t(config_.threads));
    Stat(out, "cas_enabled", "yes");
    Stat(out, "item_size_max", config_.limits.max_item_size);
    Stat(out, "flush_enabled", "yes");
    Stat(out, "domain_socket", config_.unix_socket.empty() ? std::string("NULL") : config_.unix_socket);
    char mask[8];
    std::snprintf(mask, sizeof(mask), "%o", config_.unix_mask);
    Stat(out, "umask", std::string_view(mask));
    Stat(out, "idle_timeout", uint64_t(config_.idle_timeout));
    Stat(out, "auth_enabled_ascii", config_.auth ? config_.auth->path() : std::string("no"));
    Stat(out, "ssl_enabled", config_.tls.enabled ? "yes" : "no");
    if (config_.tls.enabled) {
      Stat(out, "ssl_chain_cert", config_.tls.chain_cert);
      Stat(out, "ssl_key", config_.tls.key);
      Stat(out, "ssl_ca_cert", config_.tls.ca_cert.empty() ? std::string("NULL") : config_.tls.ca_cert);
      Stat(out, "ssl_verify_mode", uint64_t(config_.tls.verify_mode));
      Stat(out, "ssl_min_version", uint64_t(config_.tls.min_version));
    }
    Stat(out, "wort_index", store_.index_kind());
  } else if (group == "reset") {
    stats_.Reset();
    Line(out, "RESET");
    return;
  } else if (group == "items" || group == "slabs") {
    ClassStats(group, out);
  } else if (group == "conns") {
    Conns(out);
  } else if (group == "sizes") {
    Stat(out, "sizes_status", "disabled");  // as memcached without -o track_sizes
  } else {
    Line(out, "ERROR");
    return;
  }
  Line(out, "END");
}

// ---- meta commands ---------------------------------------------------------------------------
//
// Reply line: <code>[ <datalen>] <token>*[ b][ Z][ X][ W]\r\n, where the tokens answer the
// request's return flags in request order (c<cas> f<flags> k<key> O<opaque> s<size> t<ttl>).
// On a miss or failure only k and O are answered (and ms's c, as c0), as memcached 1.6.18 does.
// " b" follows the k token when the key was base64. q suppresses: mg's EN; ms's, md's HD;
// ma's HD and VA. Everything else (NS, EX, NF, errors) is always sent.

namespace {

struct MetaReply {
  bool have_item = false;
  uint64_t cas = 0;
  uint32_t flags = 0;
  uint64_t size = 0;
  int64_t exptime = 0;  // absolute, 0 = never
};

void AppendI64(std::string* out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// Remaining TTL as memcached's t flag shows it: -1 = never expires.
int64_t RemainingTtl(int64_t exptime) {
  if (exptime == 0) return -1;
  return std::max<int64_t>(0, exptime - Store::Now());
}

// Appends " <token>" for every return flag of the request (see above).
void AppendMetaTokens(std::string* out, const Request& req, const MetaReply& m, bool cas_zero_on_failure = false) {
  const MetaFlags& f = req.meta;
  for (uint8_t i = 0; i < f.nret; ++i) {
    const char c = f.ret[i];
    if (!m.have_item && c != 'k' && c != 'O' && !(c == 'c' && cas_zero_on_failure)) continue;
    out->push_back(' ');
    out->push_back(c);
    switch (c) {
      case 'c': AppendU64(out, m.have_item ? m.cas : 0); break;
      case 'f': AppendU64(out, m.flags); break;
      case 's': AppendU64(out, m.size); break;
      case 't': AppendI64(out, RemainingTtl(m.exptime)); break;
      case 'k':  // the token as sent; " b" marks it as base64
        out->append(req.keys[0]);
        if (f.base64) out->append(" b");
        break;
      case 'O': out->append(f.opaque); break;
      default: break;
    }
  }
}

int64_t Abs(int64_t ttl) { return ToAbsoluteExptime(ttl, Store::Now()); }

}  // namespace

void Handler::Meta(const Request& req, std::string* out) {
  const auto relaxed = std::memory_order_relaxed;
  const MetaFlags& f = req.meta;
  if (req.cmd == Command::kMetaNoop) {
    Line(out, "MN");
    return;
  }
  const std::string_view key = req.MetaKey();
  if (key == kMetaKey) {  // only reachable through b: the store's own metadata entry
    Line(out, "CLIENT_ERROR bad command line format");
    return;
  }
  // Writes a code line for a miss/failure: "<code> k.. O..", with ms's "c0".
  auto failure = [&](std::string_view code, bool cas_zero = false) {
    out->append(code);
    AppendMetaTokens(out, req, MetaReply(), cas_zero);
    out->append("\r\n");
  };
  switch (req.cmd) {
    case Command::kMetaGet: {
      stats_.Local().cmd_get.fetch_add(1, relaxed);
      if (f.has_ttl) stats_.Local().cmd_touch.fetch_add(1, relaxed);
      Store::MetaGetArgs a;
      a.touch = f.has_ttl;
      a.exptime = f.has_ttl ? Abs(f.ttl) : 0;
      a.vivify = f.vivify;
      a.vivify_exptime = f.vivify ? Abs(f.vivify_ttl) : 0;
      a.recache = f.recache;
      a.recache_before = Store::Now() + f.recache_ttl;
      const bool hit = store_.MetaGet(key, a, [&](const ItemView& it) {
        MetaReply m{true, it.cas, it.flags, it.data.size(), it.exptime};
        if (f.value) {
          out->append("VA ");
          AppendU64(out, it.data.size());
        } else {
          out->append("HD");
        }
        AppendMetaTokens(out, req, m);
        if (it.token_sent) out->append(" Z");
        if (it.stale) out->append(" X");
        if (it.won) out->append(" W");
        out->append("\r\n");
        if (f.value) {
          out->append(it.data);
          out->append("\r\n");
        }
      });
      (hit ? stats_.Local().get_hits : stats_.Local().get_misses).fetch_add(1, relaxed);
      if (f.has_ttl) (hit ? stats_.Local().touch_hits : stats_.Local().touch_misses).fetch_add(1, relaxed);
      if (!hit && !f.quiet) failure("EN");
      return;
    }

    case Command::kMetaSet: {
      stats_.Local().cmd_set.fetch_add(1, relaxed);
      StoreMode mode = StoreMode::kSet;
      switch (f.mode) {
        case 'E': mode = StoreMode::kAdd; break;
        case 'A': mode = StoreMode::kAppend; break;
        case 'P': mode = StoreMode::kPrepend; break;
        case 'R': mode = StoreMode::kReplace; break;
        default: break;
      }
      if (req.too_large) {
        if (mode == StoreMode::kSet) store_.Unlink(key);  // as set: no stale value survives
        stats_.Local().store_too_large.fetch_add(1, relaxed);
        Line(out, kTooLarge);
        return;
      }
      uint64_t cas = 0;
      const Result r = store_.MetaSet(mode, key, f.client_flags, f.has_ttl ? Abs(f.ttl) : 0, req.data, f.has_cas,
                                      f.cas, f.invalidate, &cas);
      if (f.has_cas) {
        if (r == Result::kStored) stats_.Local().cas_hits.fetch_add(1, relaxed);
        else if (r == Result::kExists) stats_.Local().cas_badval.fetch_add(1, relaxed);
        else if (r == Result::kNotFound) stats_.Local().cas_misses.fetch_add(1, relaxed);
      }
      switch (r) {
        case Result::kStored: {
          if (f.quiet) return;
          MetaReply m;
          m.have_item = true;
          m.cas = cas;
          out->append("HD");
          AppendMetaTokens(out, req, m);
          out->append("\r\n");
          return;
        }
        case Result::kNotStored: failure("NS", true); return;
        case Result::kExists: failure("EX", true); return;
        case Result::kNotFound: failure("NF", true); return;
        case Result::kTooLarge:
          stats_.Local().store_too_large.fetch_add(1, relaxed);
          Line(out, kTooLarge);
          return;
        case Result::kNoMemory:
          if (mode == StoreMode::kSet) store_.Unlink(key);
          stats_.Local().store_no_memory.fetch_add(1, relaxed);
          Line(out, kNoMemory);
          return;
        default: Line(out, "SERVER_ERROR internal error storing object"); return;
      }
    }

    case Command::kMetaDelete: {
      const Result r =
          store_.MetaDelete(key, f.has_cas, f.cas, f.invalidate, f.has_ttl, f.has_ttl ? Abs(f.ttl) : 0);
      switch (r) {
        case Result::kDeleted:
          stats_.Local().delete_hits.fetch_add(1, relaxed);
          if (!f.quiet) failure("HD");  // HD carries only k and O too
          return;
        case Result::kNotFound:
          stats_.Local().delete_misses.fetch_add(1, relaxed);
          failure("NF");
          return;
        case Result::kExists: failure("EX"); return;
        case Result::kNoMemory:
          stats_.Local().store_no_memory.fetch_add(1, relaxed);
          Line(out, kNoMemory);
          return;
        default: Line(out, "SERVER_ERROR internal error"); return;
      }
    }

    case Command::kMetaArith: {
      Store::ArithArgs a;
      a.incr = f.mode != '-';
      a.delta = f.delta;
      a.compare = f.has_cas;
      a.cas = f.cas;
      a.vivify = f.vivify;
      a.vivify_exptime = f.vivify ? Abs(f.vivify_ttl) : 0;
      a.initial = f.initial;
      a.touch = f.has_ttl;
      a.exptime = f.has_ttl ? Abs(f.ttl) : 0;
      Store::ArithOut res;
      const Result r = store_.MetaArith(key, a, &res);
      auto& hits = a.incr ? stats_.Local().incr_hits : stats_.Local().decr_hits;
      auto& misses = a.incr ? stats_.Local().incr_misses : stats_.Local().decr_misses;
      switch (r) {
        case Result::kStored: {
          hits.fetch_add(1, relaxed);
          if (f.quiet) return;
          char buf[24];
          const auto num = std::to_chars(buf, buf + sizeof(buf), res.value);
          const std::string_view text(buf, num.ptr - buf);
          MetaReply m{true, res.cas, 0, text.size(), res.exptime};
          if (f.value) {
            out->append("VA ");
            AppendU64(out, text.size());
          } else {
            out->append("HD");
          }
          AppendMetaTokens(out, req, m);
          out->append("\r\n");
          if (f.value) Line(out, text);
          return;
        }
        case Result::kNotFound:
          misses.fetch_add(1, relaxed);
          failure("NF");
          return;
        case Result::kNotStored: failure("NS"); return;
        case Result::kExists: failure("EX"); return;
        case Result::kNonNumeric: Line(out, "CLIENT_ERROR cannot increment or decrement non-numeric value"); return;
        case Result::kNoMemory:
          stats_.Local().store_no_memory.fetch_add(1, relaxed);
          Line(out, kNoMemory);
          return;
        default: Line(out, "SERVER_ERROR internal error"); return;
      }
    }

    case Command::kMetaDebug: {
      // memcached prints exp la cas fetch cls size; wort keeps no last-access time, fetched bit or
      // slab class, so it prints exp (remaining seconds, -1 = never), cas and size (the record's
      // bytes: 32-byte header + value).
      const bool hit = store_.Get(key, [&](const ItemView& it) {
        out->append("ME ");
        out->append(req.keys[0]);
        out->append(" exp=");
        AppendI64(out, RemainingTtl(it.exptime));
        out->append(" cas=");
        AppendU64(out, it.cas);
        out->append(" size=");
        AppendU64(out, sizeof(Record) + it.data.size());
        if (it.stale) out->append(" stale=yes");
        out->append("\r\n");
      });
      if (!hit) Line(out, "EN");
      return;
    }

    default:
      return;
  }
}

}  // namespace wort::server

// ---- memcached's slab-class views ------------------------------------------------------------
//
// wort has no slab classes (the pool's allocator has size classes of its own, not exposed):
// every item is reported in class 1, with memcached's field names, so that tools that walk the
// classes (memcdump, memcached-tool, pymemcache's stats helpers) find the items. Fields wort
// cannot know (LRU segment moves, ages) are 0; the counters it keeps are filled in.

namespace wort::server {

namespace {

// The largest key: the end of a whole-store scan.
const std::string& MaxKey() {
  static const std::string k(kMaxKeyLength, '\xff');
  return k;
}

// memcached's metadump key encoding: bytes outside [A-Za-z0-9-._~] as %XX.
void AppendUriEncoded(std::string* out, std::string_view key) {
  static const char* kHex = "0123456789ABCDEF";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out->push_back(static_cast<char>(c));
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    }
  }
}

constexpr uint64_t kCachedumpMaxBytes = 2 << 20;  // memcached's limit of one cachedump reply
// A Range limit meaning "every item" (Store::Range adds to its limit: no ~0).
constexpr uint64_t kWholeStore = uint64_t{1} << 62;

}  // namespace

void Handler::Cachedump(const Request& req, std::string* out) {
  // "ITEM <key> [<bytes> b; <exptime> s]" per item of class 1 (exptime absolute, 0 = never),
  // in key order, at most `limit` (0 = all) and about 2 MiB, as memcached limits it. A hash index
  // cannot be walked: its dump is empty.
  if (req.class_id == 1 && store_.ordered()) {
    const size_t start = out->size();
    uint64_t emitted = 0;
    const uint64_t limit = req.limit == 0 ? kWholeStore : req.limit;
    const Status s = store_.Range(
        "", MaxKey(), limit,
        [&](const ItemView& it) {
          out->append("ITEM ");
          out->append(it.key);
          out->append(" [");
          AppendU64(out, it.data.size());
          out->append(" b; ");
          AppendU64(out, static_cast<uint64_t>(std::max<int64_t>(it.exptime, 0)));
          out->append(" s]\r\n");
          return out->size() - start < kCachedumpMaxBytes;
        },
        nullptr, &emitted);
    if (!s.ok()) {
      Line(out, "SERVER_ERROR " + s.message());
      return;
    }
  }
  Line(out, "END");
}

Handler::Step Handler::MetadumpStep(std::string* out) {
  // "key=<uri-encoded key> exp=<absolute, -1 = never> la=<time of the last write> cas=<cas>
  // fetch=no cls=1 size=<record bytes>\n" per item (memcached ends these lines with "\n" only),
  // then "END\r\n". wort keeps no access time: la is the last write's time.
  std::string next;
  uint64_t emitted = 0;
  Status s = store_.Range(
      range_next_, MaxKey(), kWholeStore,
      [&](const ItemView& it) {
        out->append("key=");
        AppendUriEncoded(out, it.key);
        out->append(" exp=");
        if (it.exptime == 0) out->append("-1");
        else AppendU64(out, static_cast<uint64_t>(std::max<int64_t>(it.exptime, 0)));
        out->append(" la=");
        AppendU64(out, static_cast<uint64_t>(std::max<int64_t>(it.time, 0)));
        out->append(" cas=");
        AppendU64(out, it.cas);
        out->append(" fetch=no cls=1 size=");
        AppendU64(out, sizeof(Record) + it.data.size());
        out->push_back('\n');
        return out->size() < kHighWater;
      },
      &next, &emitted);
  if (!s.ok()) {
    Line(out, "SERVER_ERROR " + s.message());
    return Step::kDone;
  }
  if (!next.empty()) {
    range_next_ = std::move(next);
    return Step::kMore;
  }
  Line(out, "END");
  return Step::kDone;
}

void Handler::ClassStats(std::string_view group, std::string* out) {
  const uint64_t items = store_.curr_items();
  const auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  if (group == "items") {
    if (items == 0) return;  // memcached lists only classes that hold items
    const StoreCounters& c = store_.counters();
    const std::pair<const char*, uint64_t> fields[] = {
        {"number", items},
        {"number_hot", 0},
        {"number_warm", 0},
        {"number_cold", items},
        {"age_hot", 0},
        {"age_warm", 0},
        {"age", 0},
        {"mem_requested", store_.bytes_allocated()},
        {"evicted", ld(c.evictions)},
        {"evicted_nonzero", 0},
        {"evicted_time", 0},
        {"outofmemory", stats_.Sum(&ServerStats::Counters::store_no_memory)},
        {"tailrepairs", 0},
        {"reclaimed", ld(c.reclaimed)},
        {"expired_unfetched", ld(c.expired_unfetched)},
        {"evicted_unfetched", ld(c.evicted_unfetched)},
        {"evicted_active", 0},
        {"crawler_reclaimed", 0},
        {"crawler_items_checked", ld(c.crawler_items_checked)},
        {"lrutail_reflocked", 0},
        {"moves_to_cold", 0},
        {"moves_to_warm", 0},
        {"moves_within_lru", 0},
        {"direct_reclaims", 0},
        {"hits_to_hot", 0},
        {"hits_to_warm", 0},
        {"hits_to_cold", stats_.Sum(&ServerStats::Counters::get_hits)},
        {"hits_to_temp", 0},
    };
    for (const auto& [name, v] : fields) Stat(out, std::string("items:1:") + name, v);
    return;
  }
  // slabs: class 1 is the pool's heap, in 64-byte chunks (the allocation granule) and 1 MiB
  // pages (the pool's chunks).
  const uint64_t pool = store_.pool().size();
  const uint64_t used = store_.bytes_allocated();
  if (items > 0) {
    constexpr uint64_t kChunk = 64, kPage = 1 << 20;
    const uint64_t pages = (pool + kPage - 1) / kPage;
    const uint64_t total = pages * (kPage / kChunk);
    const uint64_t used_chunks = std::min(total, (used + kChunk - 1) / kChunk);
    const std::pair<const char*, uint64_t> fields[] = {
        {"chunk_size", kChunk},
        {"chunks_per_page", kPage / kChunk},
        {"total_pages", pages},
        {"total_chunks", total},
        {"used_chunks", used_chunks},
        {"free_chunks", total - used_chunks},
        {"free_chunks_end", 0},
        {"get_hits", stats_.Sum(&ServerStats::Counters::get_hits)},
        {"cmd_set", stats_.Sum(&ServerStats::Counters::cmd_set)},
        {"delete_hits", stats_.Sum(&ServerStats::Counters::delete_hits)},
        {"incr_hits", stats_.Sum(&ServerStats::Counters::incr_hits)},
        {"decr_hits", stats_.Sum(&ServerStats::Counters::decr_hits)},
        {"cas_hits", stats_.Sum(&ServerStats::Counters::cas_hits)},
        {"cas_badval", stats_.Sum(&ServerStats::Counters::cas_badval)},
        {"touch_hits", stats_.Sum(&ServerStats::Counters::touch_hits)},
    };
    for (const auto& [name, v] : fields) Stat(out, std::string("1:") + name, v);
  }
  Stat(out, "active_slabs", uint64_t(items > 0 ? 1 : 0));
  Stat(out, "total_malloced", items > 0 ? pool : 0);
}

void Handler::Conns(std::string* out) {
  // One entry per open connection: "<fd>:addr", "<fd>:listen_addr", "<fd>:state" (this one
  // conn_parse_cmd, the others conn_waiting: wort does not track the others' state),
  // "<fd>:secs_since_last_cmd". The listening socket is not listed.
  const int64_t now = CoarseNow();
  std::lock_guard<std::mutex> g(stats_.conns_mu);
  std::vector<const Handler*> conns(stats_.conns.begin(), stats_.conns.end());
  std::sort(conns.begin(), conns.end(), [](const Handler* a, const Handler* b) { return a->fd_ < b->fd_; });
  for (const Handler* h : conns) {
    const std::string p = std::to_string(h->fd_) + ":";
    Stat(out, p + "addr", h->peer_);
    Stat(out, p + "listen_addr", h->listen_addr_);
    Stat(out, p + "state", h == this ? "conn_parse_cmd" : "conn_waiting");
    Stat(out, p + "secs_since_last_cmd", std::max<int64_t>(0, now - h->last_cmd_.load(std::memory_order_relaxed)));
  }
}

}  // namespace wort::server
