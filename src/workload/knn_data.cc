// Datasets for the kNN index: .fvecs/.bvecs/.ivecs/.npy readers and writers, and the chapter's
// clustered workload generator (knn_data.h).
#include "workload/knn_data.h"

#include <fmt/core.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>

#include "util/splitmix64.h"
#include "wort/knn.h"

namespace wort::knn_data {
namespace {

static_assert(std::endian::native == std::endian::little, "the file formats are little-endian");

// ---- files ---------------------------------------------------------------------------------

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// An input file opened for sequential reads, with its size.
class InFile {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    f_.reset(std::fopen(path.c_str(), "rb"));
    if (!f_) return Status::IOError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (fstat(fileno(f_.get()), &st) != 0) return Status::IOError(fmt::format("{}: fstat: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(fmt::format("{}: not a regular file", path));
    size_ = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }
  uint64_t size() const { return size_; }
  uint64_t offset() const { return off_; }
  uint64_t left() const { return size_ - off_; }
  // Reads exactly `bytes` (the caller checked that the file has them).
  Status Read(void* buf, uint64_t bytes) {
    if (bytes && std::fread(buf, 1, bytes, f_.get()) != bytes)
      return Status::IOError(fmt::format("{}: read of {} bytes at byte {} failed{}", path_, bytes, off_,
                                         std::ferror(f_.get()) ? std::string(": ") + std::strerror(errno) : ""));
    off_ += bytes;
    return Status::OK();
  }

 private:
  std::string path_;
  FilePtr f_;
  uint64_t size_ = 0;
  uint64_t off_ = 0;
};

class OutFile {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    f_.reset(std::fopen(path.c_str(), "wb"));
    if (!f_) return Status::IOError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    return Status::OK();
  }
  Status Write(const void* buf, uint64_t bytes) {
    if (bytes && std::fwrite(buf, 1, bytes, f_.get()) != bytes)
      return Status::IOError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    return Status::OK();
  }
  Status Close() {
    FILE* f = f_.release();
    if (std::fclose(f) != 0) return Status::IOError(fmt::format("{}: close failed: {}", path_, std::strerror(errno)));
    return Status::OK();
  }

 private:
  std::string path_;
  FilePtr f_;
};

// ---- .fvecs / .bvecs / .ivecs ---------------------------------------------------------------

// Reads a "vecs" file of `Elem` values into `data` (converted to `Out`); see knn_data.h.
template <typename Elem, typename Out>
Status ReadVecs(const std::string& path, const char* kind, std::vector<Out>* data, uint64_t* n_out, uint32_t* dim_out) {
  InFile in;
  WORT_RETURN_IF_ERROR(in.Open(path));
  if (in.size() == 0) return Status::InvalidArgument(fmt::format("{}: empty file (no rows)", path));
  std::vector<Out> out;
  std::vector<Elem> buf;
  uint32_t dim = 0;
  uint64_t row = 0;
  while (in.left() > 0) {
    const uint64_t at = in.offset();
    if (in.left() < sizeof(int32_t))
      return Status::Corruption(fmt::format("{}: truncated: {} trailing bytes at byte {} where row {}'s 4-byte dim should be",
                                            path, in.left(), at, row));
    int32_t d = 0;
    WORT_RETURN_IF_ERROR(in.Read(&d, sizeof d));
    if (row == 0) {
      if (d <= 0 || static_cast<uint32_t>(d) > knn::kMaxDim)
        return Status::InvalidArgument(fmt::format("{}: row 0 (byte 0) has dim {}: a {} file's dim must be 1..{}", path, d,
                                                   kind, knn::kMaxDim));
      dim = static_cast<uint32_t>(d);
      buf.resize(dim);
      out.reserve(in.size() / (sizeof(int32_t) + uint64_t{dim} * sizeof(Elem)) * dim);
    } else if (d < 0 || static_cast<uint32_t>(d) != dim) {
      return Status::Corruption(fmt::format("{}: row {} at byte {} has dim {}, but the first row has dim {}", path, row, at, d, dim));
    }
    const uint64_t bytes = uint64_t{dim} * sizeof(Elem);
    if (in.left() < bytes)
      return Status::Corruption(fmt::format("{}: truncated: row {} at byte {} needs {} bytes of values, the file has {} left",
                                            path, row, at, bytes, in.left()));
    WORT_RETURN_IF_ERROR(in.Read(buf.data(), bytes));
    for (Elem e : buf) out.push_back(static_cast<Out>(e));
    ++row;
  }
  *data = std::move(out);
  *n_out = row;
  *dim_out = dim;
  return Status::OK();
}

template <typename Elem>
Status WriteVecs(const std::string& path, uint64_t n, uint32_t dim, const Elem* data) {
  if (dim == 0 || dim > knn::kMaxDim)
    return Status::InvalidArgument(fmt::format("{}: cannot write dim {} (must be 1..{})", path, dim, knn::kMaxDim));
  OutFile out;
  WORT_RETURN_IF_ERROR(out.Open(path));
  const int32_t d = static_cast<int32_t>(dim);
  for (uint64_t i = 0; i < n; ++i) {
    WORT_RETURN_IF_ERROR(out.Write(&d, sizeof d));
    WORT_RETURN_IF_ERROR(out.Write(data + i * dim, uint64_t{dim} * sizeof(Elem)));
  }
  return out.Close();
}

// ---- .npy ------------------------------------------------------------------------------------

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
  uint64_t data_offset = 0;
};

// The value text after `'key':` in the header dict, or npos.
size_t FindKey(const std::string& h, const char* key) {
  for (const char q : {'\'', '"'}) {
    const std::string k = std::string(1, q) + key + std::string(1, q);
    size_t p = h.find(k);
    if (p == std::string::npos) continue;
    p = h.find(':', p + k.size());
    if (p == std::string::npos) return p;
    p = h.find_first_not_of(" \t", p + 1);
    return p;
  }
  return std::string::npos;
}

bool ParseQuoted(const std::string& h, size_t p, std::string* out) {
  if (p == std::string::npos || (h[p] != '\'' && h[p] != '"')) return false;
  const size_t e = h.find(h[p], p + 1);
  if (e == std::string::npos) return false;
  *out = h.substr(p + 1, e - p - 1);
  return true;
}

// "(1000, 64)" or "(1000,)" or "()".
bool ParseShape(const std::string& h, size_t p, std::vector<uint64_t>* out) {
  if (p == std::string::npos || h[p] != '(') return false;
  const size_t e = h.find(')', p);
  if (e == std::string::npos) return false;
  std::vector<uint64_t> dims;
  size_t i = p + 1;
  while (i < e) {
    while (i < e && (h[i] == ' ' || h[i] == ',')) ++i;
    if (i == e) break;
    if (!std::isdigit(static_cast<unsigned char>(h[i]))) return false;
    uint64_t v = 0;
    int digits = 0;
    while (i < e && std::isdigit(static_cast<unsigned char>(h[i]))) {
      if (++digits > 18) return false;
      v = v * 10 + static_cast<uint64_t>(h[i] - '0');
      ++i;
    }
    if (i < e && h[i] == 'L') ++i;  // Python 2 longs
    dims.push_back(v);
  }
  *out = std::move(dims);
  return true;
}

Status ReadNpyHeader(InFile& in, const std::string& path, NpyHeader* out) {
  if (in.size() == 0) return Status::InvalidArgument(fmt::format("{}: empty file (not a .npy file)", path));
  unsigned char pre[10];
  if (in.size() < sizeof pre)
    return Status::Corruption(fmt::format("{}: truncated: {} bytes, shorter than an npy preamble", path, in.size()));
  WORT_RETURN_IF_ERROR(in.Read(pre, sizeof pre));
  if (std::memcmp(pre, kNpyMagic, kNpyMagicLen) != 0)
    return Status::Corruption(fmt::format("{}: not a .npy file (bad magic at byte 0)", path));
  const unsigned major = pre[6];
  uint64_t header_len = 0;
  if (major == 1) {
    header_len = pre[8] | (uint64_t{pre[9]} << 8);
  } else if (major == 2 || major == 3) {
    unsigned char more[2];
    if (in.left() < sizeof more) return Status::Corruption(fmt::format("{}: truncated npy preamble", path));
    WORT_RETURN_IF_ERROR(in.Read(more, sizeof more));
    header_len = pre[8] | (uint64_t{pre[9]} << 8) | (uint64_t{more[0]} << 16) | (uint64_t{more[1]} << 24);
  } else {
    return Status::InvalidArgument(fmt::format("{}: npy format version {}.{} is not supported (1.0, 2.0, 3.0)", path, major, pre[7]));
  }
  if (in.left() < header_len)
    return Status::Corruption(fmt::format("{}: truncated: the npy header at byte {} says {} bytes, the file has {} left", path,
                                          in.offset(), header_len, in.left()));
  std::string h(header_len, '\0');
  WORT_RETURN_IF_ERROR(in.Read(h.data(), header_len));
  if (!ParseQuoted(h, FindKey(h, "descr"), &out->descr))
    return Status::Corruption(fmt::format("{}: malformed npy header (no 'descr'): {}", path, h));
  const size_t fo = FindKey(h, "fortran_order");
  if (fo == std::string::npos || (h.compare(fo, 4, "True") != 0 && h.compare(fo, 5, "False") != 0))
    return Status::Corruption(fmt::format("{}: malformed npy header (no 'fortran_order'): {}", path, h));
  out->fortran_order = h.compare(fo, 4, "True") == 0;
  if (!ParseShape(h, FindKey(h, "shape"), &out->shape))
    return Status::Corruption(fmt::format("{}: malformed npy header (no 'shape' tuple): {}", path, h));
  out->data_offset = in.offset();
  return Status::OK();
}

// Bytes per element of a supported dtype, or 0.
size_t NpyItemSize(const std::string& descr) {
  if (descr == "<f4") return 4;
  if (descr == "<f8") return 8;
  if (descr == "|u1" || descr == "<u1" || descr == ">u1" || descr == "u1") return 1;
  return 0;
}

Status CheckNpyGeometry(const std::string& path, const NpyHeader& h, uint64_t data_bytes, size_t item) {
  if (NpyItemSize(h.descr) == 0)
    return Status::InvalidArgument(
        fmt::format("{}: npy dtype '{}' is not supported (supported: '<f4' float32, '<f8' float64, '|u1' uint8, little-endian)",
                    path, h.descr));
  if (h.fortran_order)
    return Status::InvalidArgument(fmt::format("{}: npy array in Fortran order is not supported (save it in C order)", path));
  if (h.shape.size() != 2)
    return Status::InvalidArgument(fmt::format("{}: npy array has {} dimension(s); a 2-D array (points x dim) is required", path,
                                               h.shape.size()));
  const uint64_t n = h.shape[0], dim = h.shape[1];
  if (n == 0) return Status::InvalidArgument(fmt::format("{}: empty npy array (shape ({}, {}))", path, n, dim));
  if (dim == 0 || dim > knn::kMaxDim)
    return Status::InvalidArgument(fmt::format("{}: npy array has dim {}; dim must be 1..{}", path, dim, knn::kMaxDim));
  // n * dim * item cannot overflow once n <= data_bytes + 1 (dim and item are small).
  if (n > data_bytes || n * dim * item > data_bytes)
    return Status::Corruption(fmt::format("{}: truncated: shape ({}, {}) of '{}' needs {} bytes of data at byte {}, the file has {}",
                                          path, n, dim, h.descr, n > data_bytes ? 0 : n * dim * item, h.data_offset, data_bytes));
  if (n * dim * item < data_bytes)
    return Status::Corruption(fmt::format("{}: {} bytes after the last element of shape ({}, {}) at byte {}", path,
                                          data_bytes - n * dim * item, n, dim, h.data_offset + n * dim * item));
  return Status::OK();
}

template <typename Elem>
Status ReadNpyData(InFile& in, uint64_t count, float* out) {
  constexpr uint64_t kChunk = 1 << 16;
  std::vector<Elem> buf(std::min(count, kChunk));
  for (uint64_t done = 0; done < count;) {
    const uint64_t m = std::min(count - done, kChunk);
    WORT_RETURN_IF_ERROR(in.Read(buf.data(), m * sizeof(Elem)));
    for (uint64_t i = 0; i < m; ++i) out[done + i] = static_cast<float>(buf[i]);
    done += m;
  }
  return Status::OK();
}

Status WriteNpyRaw(const std::string& path, const char* descr, uint64_t rows, uint32_t cols, const void* data, size_t item) {
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}, {}), }}", descr, rows, cols);
  // Version 1.0: magic (6) + version (2) + length (2) + header, padded with spaces to a multiple
  // of 64 bytes, ending in '\n'.
  const size_t total = (kNpyMagicLen + 4 + h.size() + 1 + 63) / 64 * 64;
  h.append(total - (kNpyMagicLen + 4 + h.size() + 1), ' ');
  h.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(h.size());
  OutFile out;
  WORT_RETURN_IF_ERROR(out.Open(path));
  const unsigned char ver[2] = {1, 0};
  WORT_RETURN_IF_ERROR(out.Write(kNpyMagic, kNpyMagicLen));
  WORT_RETURN_IF_ERROR(out.Write(ver, sizeof ver));
  WORT_RETURN_IF_ERROR(out.Write(&len, sizeof len));
  WORT_RETURN_IF_ERROR(out.Write(h.data(), h.size()));
  WORT_RETURN_IF_ERROR(out.Write(data, rows * cols * item));
  return out.Close();
}

std::string LowerExtension(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot + 1);
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// ---- generator ------------------------------------------------------------------------------

// Independent streams of one seed: the means, the data points, the queries, the uniform data.
enum class Stream : uint64_t { kMeans = 1, kPoints = 2, kQueries = 3, kUniform = 4 };

std::mt19937_64 StreamRng(uint64_t seed, Stream s) {
  return std::mt19937_64(SplitMix64Mix(seed ^ SplitMix64Mix(static_cast<uint64_t>(s))));
}

// Uniform in [0, 1) from the top 53 bits.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [lo, hi), rounded to float32 (never hi itself).
float UniformIn(std::mt19937_64& rng, double lo, double hi) {
  const float v = static_cast<float>(lo + (hi - lo) * Uniform01(rng));
  return v < static_cast<float>(hi) ? v : std::nextafter(static_cast<float>(hi), static_cast<float>(lo));
}

// Standard normal deviates by the Box-Muller transform (both of each pair are used).
class BoxMuller {
 public:
  explicit BoxMuller(std::mt19937_64* rng) : rng_(rng) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform01(*rng_);  // (0, 1]: log is finite
    const double u2 = Uniform01(*rng_);
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double t = 2.0 * 3.14159265358979323846 * u2;
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  std::mt19937_64* rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Row i of `out` = means[i % clusters] + std * N(0, 1) per coordinate.
void DrawAroundMeans(const Matrix& means, double std, std::mt19937_64* rng, Matrix* out) {
  BoxMuller normal(rng);
  for (uint64_t i = 0; i < out->n; ++i) {
    const float* mu = means.row(i % means.n);
    float* p = out->row(i);
    for (uint32_t d = 0; d < out->dim; ++d) p[d] = static_cast<float>(mu[d] + std * normal.Next());
  }
}

Matrix Shaped(uint64_t n, uint32_t dim) {
  Matrix m;
  m.n = n;
  m.dim = dim;
  m.data.assign(n * dim, 0.0f);
  return m;
}

}  // namespace

FileFormat FormatOfPath(const std::string& path) {
  const std::string e = LowerExtension(path);
  if (e == "fvecs") return FileFormat::kFvecs;
  if (e == "bvecs") return FileFormat::kBvecs;
  if (e == "ivecs") return FileFormat::kIvecs;
  if (e == "npy") return FileFormat::kNpy;
  return FileFormat::kUnknown;
}

const char* FormatName(FileFormat f) {
  switch (f) {
    case FileFormat::kFvecs: return "fvecs";
    case FileFormat::kBvecs: return "bvecs";
    case FileFormat::kIvecs: return "ivecs";
    case FileFormat::kNpy: return "npy";
    case FileFormat::kUnknown: break;
  }
  return "unknown";
}

Status ReadFvecs(const std::string& path, Matrix* out) {
  Matrix m;
  WORT_RETURN_IF_ERROR((ReadVecs<float, float>(path, "fvecs", &m.data, &m.n, &m.dim)));
  *out = std::move(m);
  return Status::OK();
}

Status ReadBvecs(const std::string& path, Matrix* out) {
  Matrix m;
  WORT_RETURN_IF_ERROR((ReadVecs<uint8_t, float>(path, "bvecs", &m.data, &m.n, &m.dim)));
  *out = std::move(m);
  return Status::OK();
}

Status ReadIvecs(const std::string& path, IntMatrix* out) {
  IntMatrix m;
  WORT_RETURN_IF_ERROR((ReadVecs<int32_t, int32_t>(path, "ivecs", &m.data, &m.n, &m.dim)));
  *out = std::move(m);
  return Status::OK();
}

Status ReadNpy(const std::string& path, Matrix* out) {
  InFile in;
  WORT_RETURN_IF_ERROR(in.Open(path));
  NpyHeader h;
  WORT_RETURN_IF_ERROR(ReadNpyHeader(in, path, &h));
  const size_t item = NpyItemSize(h.descr);
  WORT_RETURN_IF_ERROR(CheckNpyGeometry(path, h, in.left(), item));
  Matrix m = Shaped(h.shape[0], static_cast<uint32_t>(h.shape[1]));
  const uint64_t count = m.n * m.dim;
  if (item == 4) {
    WORT_RETURN_IF_ERROR(ReadNpyData<float>(in, count, m.data.data()));
  } else if (item == 8) {
    WORT_RETURN_IF_ERROR(ReadNpyData<double>(in, count, m.data.data()));
  } else {
    WORT_RETURN_IF_ERROR(ReadNpyData<uint8_t>(in, count, m.data.data()));
  }
  *out = std::move(m);
  return Status::OK();
}

Status ReadPoints(const std::string& path, Matrix* out) {
  switch (FormatOfPath(path)) {
    case FileFormat::kFvecs: return ReadFvecs(path, out);
    case FileFormat::kBvecs: return ReadBvecs(path, out);
    case FileFormat::kNpy: return ReadNpy(path, out);
    default: break;
  }
  return Status::InvalidArgument(fmt::format("{}: unknown point file format (use .fvecs, .bvecs or .npy)", path));
}

Status WriteFvecs(const std::string& path, const Matrix& m) { return WriteVecs<float>(path, m.n, m.dim, m.data.data()); }

Status WriteIvecs(const std::string& path, const IntMatrix& m) { return WriteVecs<int32_t>(path, m.n, m.dim, m.data.data()); }

Status WriteNpy(const std::string& path, const Matrix& m) {
  return WriteNpyRaw(path, "<f4", m.n, m.dim, m.data.data(), sizeof(float));
}

Status WriteNpyInt64(const std::string& path, uint64_t rows, uint32_t cols, const int64_t* data) {
  return WriteNpyRaw(path, "<i8", rows, cols, data, sizeof(int64_t));
}

Status WritePoints(const std::string& path, const Matrix& m) {
  switch (FormatOfPath(path)) {
    case FileFormat::kFvecs: return WriteFvecs(path, m);
    case FileFormat::kNpy: return WriteNpy(path, m);
    default: break;
  }
  return Status::InvalidArgument(fmt::format("{}: cannot write this format (use .fvecs or .npy)", path));
}

Status ValidateSpec(const ClusterSpec& s) {
  if (s.n == 0) return Status::InvalidArgument("the number of points must be at least 1");
  if (s.dim == 0 || s.dim > knn::kMaxDim)
    return Status::InvalidArgument(fmt::format("dim {} out of range (1..{})", s.dim, knn::kMaxDim));
  if (s.clusters == 0) return Status::InvalidArgument("clusters must be at least 1");
  if (!(s.std >= 0) || !std::isfinite(s.std)) return Status::InvalidArgument(fmt::format("std {} must be finite and >= 0", s.std));
  if (!(s.lo < s.hi) || !std::isfinite(s.lo) || !std::isfinite(s.hi))
    return Status::InvalidArgument(fmt::format("range [{}, {}) is empty", s.lo, s.hi));
  return Status::OK();
}

Status ClusterMeans(const ClusterSpec& s, Matrix* out) {
  ClusterSpec one = s;
  one.n = 1;  // the means do not depend on n
  WORT_RETURN_IF_ERROR(ValidateSpec(one));
  std::mt19937_64 rng = StreamRng(s.seed, Stream::kMeans);
  Matrix m = Shaped(s.clusters, s.dim);
  for (float& v : m.data) v = UniformIn(rng, s.lo, s.hi);
  *out = std::move(m);
  return Status::OK();
}

Status GenerateClustered(const ClusterSpec& s, Matrix* out) {
  WORT_RETURN_IF_ERROR(ValidateSpec(s));
  Matrix means;
  WORT_RETURN_IF_ERROR(ClusterMeans(s, &means));
  std::mt19937_64 rng = StreamRng(s.seed, Stream::kPoints);
  Matrix m = Shaped(s.n, s.dim);
  DrawAroundMeans(means, s.std, &rng, &m);
  *out = std::move(m);
  return Status::OK();
}

Status GenerateClusteredQueries(const ClusterSpec& s, uint64_t nq, uint64_t query_seed, Matrix* out) {
  if (nq == 0) return Status::InvalidArgument("the number of queries must be at least 1");
  Matrix means;
  WORT_RETURN_IF_ERROR(ClusterMeans(s, &means));
  std::mt19937_64 rng = StreamRng(query_seed, Stream::kQueries);
  Matrix m = Shaped(nq, s.dim);
  DrawAroundMeans(means, s.std, &rng, &m);
  *out = std::move(m);
  return Status::OK();
}

Status GenerateUniform(const ClusterSpec& s, Matrix* out) {
  WORT_RETURN_IF_ERROR(ValidateSpec(s));
  std::mt19937_64 rng = StreamRng(s.seed, Stream::kUniform);
  Matrix m = Shaped(s.n, s.dim);
  for (float& v : m.data) v = UniformIn(rng, s.lo, s.hi);
  *out = std::move(m);
  return Status::OK();
}

Status GenerateUniformQueries(const ClusterSpec& s, uint64_t nq, uint64_t query_seed, Matrix* out) {
  if (nq == 0) return Status::InvalidArgument("the number of queries must be at least 1");
  ClusterSpec q = s;
  q.n = nq;
  WORT_RETURN_IF_ERROR(ValidateSpec(q));
  std::mt19937_64 rng = StreamRng(query_seed, Stream::kQueries);
  Matrix m = Shaped(nq, s.dim);
  for (float& v : m.data) v = UniformIn(rng, s.lo, s.hi);
  *out = std::move(m);
  return Status::OK();
}

}  // namespace wort::knn_data
