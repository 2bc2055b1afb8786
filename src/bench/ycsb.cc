// YCSB generators (see ycsb.h for the formulas and where they come from).
#include "bench/ycsb.h"

#include <algorithm>
#include <cctype>

namespace wort::bench {

namespace {
struct WorkloadInfo {
  YcsbWorkload w;
  const char* name;
  YcsbMix mix;
};
// The mixes of YCSB's workloads/workloada..workloadf (read, update, insert, scan, rmw, latest).
constexpr WorkloadInfo kWorkloads[] = {
    {YcsbWorkload::kLoad, "load", {0, 0, 1, 0, 0, false}},
    {YcsbWorkload::kA, "a", {0.5, 0.5, 0, 0, 0, false}},
    {YcsbWorkload::kB, "b", {0.95, 0.05, 0, 0, 0, false}},
    {YcsbWorkload::kC, "c", {1, 0, 0, 0, 0, false}},
    {YcsbWorkload::kD, "d", {0.95, 0, 0.05, 0, 0, true}},
    {YcsbWorkload::kE, "e", {0, 0, 0.05, 0.95, 0, false}},
    {YcsbWorkload::kF, "f", {0.5, 0, 0, 0, 0.5, false}},
};
}  // namespace

const char* YcsbName(YcsbWorkload w) {
  for (const auto& i : kWorkloads)
    if (i.w == w) return i.name;
  return "?";
}

bool ParseYcsbWorkload(const std::string& name, YcsbWorkload* out) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.rfind("ycsb-", 0) == 0) n = n.substr(5);
  if (n == "insert") n = "load";
  for (const auto& i : kWorkloads) {
    if (n == i.name) {
      *out = i.w;
      return true;
    }
  }
  return false;
}

YcsbMix YcsbSpec(YcsbWorkload w) {
  for (const auto& i : kWorkloads)
    if (i.w == w) return i.mix;
  return {};
}

const char* RequestDistName(RequestDist d) {
  switch (d) {
    case RequestDist::kUniform: return "uniform";
    case RequestDist::kZipfian: return "zipfian";
    case RequestDist::kLatest: return "latest";
  }
  return "?";
}

bool ParseRequestDist(const std::string& name, RequestDist* out) {
  if (name == "uniform") *out = RequestDist::kUniform;
  else if (name == "zipfian") *out = RequestDist::kZipfian;
  else return false;
  return true;
}

const char* YcsbOpName(YcsbOp op) {
  switch (op) {
    case YcsbOp::kRead: return "read";
    case YcsbOp::kUpdate: return "update";
    case YcsbOp::kInsert: return "insert";
    case YcsbOp::kScan: return "scan";
    case YcsbOp::kReadModifyWrite: return "rmw";
  }
  return "?";
}

uint64_t FnvHash64(uint64_t v) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= v & 0xff;
    h *= 1099511628211ull;
    v >>= 8;
  }
  const int64_t s = static_cast<int64_t>(h);  // Java's Math.abs (Long.MIN_VALUE stays negative)
  return static_cast<uint64_t>(s < 0 ? -static_cast<uint64_t>(s) : s);
}

double Zeta(uint64_t from, uint64_t to, double theta, double initial) {
  double sum = initial;
  for (uint64_t i = from; i < to; ++i) sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
  return sum;
}
double Zeta(uint64_t n, double theta) { return Zeta(0, n, theta, 0); }

ZipfianGenerator::ZipfianGenerator(uint64_t items, double theta)
    : ZipfianGenerator(items, theta, Zeta(std::max<uint64_t>(items, 1), theta)) {}

ZipfianGenerator::ZipfianGenerator(uint64_t items, double theta, double zetan)
    : theta_(theta), zeta2_(Zeta(2, theta)), alpha_(1.0 / (1.0 - theta)) {
  SetItems(std::max<uint64_t>(items, 1), zetan);
}

void ZipfianGenerator::SetItems(uint64_t items, double zetan) {
  items_ = items;
  zetan_ = zetan;
  // For one or two items eta's formula degenerates (the first two cases of Next cover them).
  eta_ = items > 2 ? (1 - std::pow(2.0 / static_cast<double>(items), 1 - theta_)) / (1 - zeta2_ / zetan_) : 0;
}

uint64_t ZipfianGenerator::Next(YcsbRng& rng, uint64_t items) {
  items = std::max<uint64_t>(items, 1);
  if (items > items_) SetItems(items, Zeta(items_, items, theta_, zetan_));
  else if (items < items_) SetItems(items, Zeta(items, theta_));
  const double u = rng.NextDouble();
  const double uz = u * zetan_;
  if (uz < 1.0 || items == 1) return 0;
  if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
  const auto r = static_cast<uint64_t>(static_cast<double>(items) * std::pow(eta_ * u - eta_ + 1, alpha_));
  return std::min(r, items - 1);
}

AcknowledgedCounter::AcknowledgedCounter(uint64_t start, uint64_t capacity)
    : start_(start), next_(start), limit_(start), done_(capacity) {}

void AcknowledgedCounter::Acknowledge(uint64_t n) {
  const uint64_t i = n - start_;
  if (i < done_.size()) done_[i].store(1, std::memory_order_release);
  // Whoever gets the lock advances the limit over every acknowledged number; a thread that
  // finds it taken leaves its number to the holder or to a later acknowledger.
  std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
  if (!g.owns_lock()) return;
  uint64_t lim = limit_.load(std::memory_order_relaxed);
  while (lim - start_ < done_.size() && done_[lim - start_].load(std::memory_order_acquire)) ++lim;
  limit_.store(lim, std::memory_order_release);
}

YcsbOpGenerator::YcsbOpGenerator(YcsbWorkload w, RequestDist request, uint64_t records, uint64_t expected_inserts,
                                 uint64_t seed, double zetan_n)
    : mix_(YcsbSpec(w)),
      dist_(mix_.latest ? RequestDist::kLatest : request),
      records_(std::max<uint64_t>(records, 1)),
      rng_(seed),
      latest_(dist_ == RequestDist::kLatest ? records_ : 1, kZipfianTheta,
              dist_ == RequestDist::kLatest ? (zetan_n > 0 ? zetan_n : Zeta(records_, kZipfianTheta)) : 1.0),
      scrambled_(records_ + 2 * expected_inserts) {}

YcsbOp YcsbOpGenerator::NextOp() {
  double u = rng_.NextDouble();
  if ((u -= mix_.read) < 0) return YcsbOp::kRead;
  if ((u -= mix_.update) < 0) return YcsbOp::kUpdate;
  if ((u -= mix_.insert) < 0) return YcsbOp::kInsert;
  if ((u -= mix_.scan) < 0) return YcsbOp::kScan;
  if (mix_.rmw > 0) return YcsbOp::kReadModifyWrite;
  // Rounding left u a hair above the sum: the last operation with a share.
  if (mix_.scan > 0) return YcsbOp::kScan;
  if (mix_.insert > 0) return YcsbOp::kInsert;
  if (mix_.update > 0) return YcsbOp::kUpdate;
  return YcsbOp::kRead;
}

uint64_t YcsbOpGenerator::NextRecord(uint64_t limit) {
  limit = std::max<uint64_t>(limit, 1);
  switch (dist_) {
    case RequestDist::kUniform: return rng_.Below(std::min(records_, limit));
    case RequestDist::kZipfian: {
      // CoreWorkload.nextKeynum: redraw a record not inserted yet (bounded: with very few
      // records inserted so far, fall back to a uniform draw over them).
      for (int i = 0; i < 1000; ++i) {
        const uint64_t r = scrambled_.Next(rng_);
        if (r < limit) return r;
      }
      return rng_.Below(limit);
    }
    case RequestDist::kLatest: {
      const uint64_t max = limit - 1;  // the last acknowledged record
      return max == 0 ? 0 : max - latest_.Next(rng_, max);
    }
  }
  return 0;
}

}  // namespace wort::bench
