// The kNN tools: the dataset readers and writers (every bad file refused with a named error),
// the chapter's workload generator (seeded, deterministic), and `wort knn` build/query/bench
// through the CLI binary, checked against a brute-force reference in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "workload/knn_data.h"
#include "wort/knn.h"

namespace {

namespace kd = wort::knn_data;
using kd::Matrix;
using wort::Code;
using wort::Status;
using namespace std::string_literals;

// A fresh directory under /dev/shm, removed at the end.
class TempDir {
 public:
  TempDir() {
    static int n = 0;
    path_ = "/dev/shm/wort-knn-tools-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& f) const { return path_ + "/" + f; }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename T>
void Append(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// One .fvecs row of `dim` (the stored dim field may differ: `stored_dim`).
std::string FvecsRow(int32_t stored_dim, std::vector<float> values) {
  std::string s;
  Append(&s, stored_dim);
  for (float v : values) Append(&s, v);
  return s;
}

// An npy file: version 1.0 (2-byte length) or 2.0 (4-byte), the header dict as given, then data.
std::string NpyFile(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  const size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  std::string s = "\x93NUMPY";
  s.push_back(static_cast<char>(major));
  s.push_back(0);
  if (major == 1) {
    Append(&s, static_cast<uint16_t>(h.size()));
  } else {
    Append(&s, static_cast<uint32_t>(h.size()));
  }
  return s + h + data;
}

Matrix Sample(uint64_t n, uint32_t dim) {
  Matrix m;
  m.n = n;
  m.dim = dim;
  for (uint64_t i = 0; i < n * dim; ++i) m.data.push_back(static_cast<float>(i) * 0.5f - 3.25f);
  return m;
}

// Reads `path` expecting failure with `code` and a message containing every one of `parts`.
template <typename ReadFn>
void ExpectRefused(ReadFn read, const std::string& path, Code code, std::vector<std::string> parts) {
  Matrix m;
  m.n = 77;  // untouched on failure
  const Status s = read(path, &m);
  ASSERT_FALSE(s.ok()) << path;
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << "the message names the file: " << s.ToString();
  for (const auto& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' in: " << s.ToString();
  EXPECT_EQ(m.n, 77u) << "output written on failure";
}

// ---- formats ---------------------------------------------------------------------------------

TEST(KnnData, FvecsRoundTrip) {
  TempDir d;
  const Matrix m = Sample(37, 5);
  ASSERT_TRUE(kd::WriteFvecs(d / "a.fvecs", m).ok());
  EXPECT_EQ(ReadBytes(d / "a.fvecs").size(), 37u * (4 + 5 * 4));
  Matrix r;
  ASSERT_TRUE(kd::ReadFvecs(d / "a.fvecs", &r).ok());
  EXPECT_EQ(r.n, 37u);
  EXPECT_EQ(r.dim, 5u);
  EXPECT_EQ(r.data, m.data);
  Matrix p;
  ASSERT_TRUE(kd::ReadPoints(d / "a.fvecs", &p).ok());
  EXPECT_EQ(p.data, m.data);
}

TEST(KnnData, NpyRoundTripAndHeader) {
  TempDir d;
  const Matrix m = Sample(11, 7);
  ASSERT_TRUE(kd::WriteNpy(d / "a.npy", m).ok());
  const std::string bytes = ReadBytes(d / "a.npy");
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t header_end = bytes.find('\n') + 1;
  EXPECT_EQ(header_end % 64, 0u) << "header padded to 64 bytes";
  EXPECT_NE(bytes.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (11, 7)"), std::string::npos);
  EXPECT_EQ(bytes.size() - header_end, 11u * 7 * 4);
  Matrix r;
  ASSERT_TRUE(kd::ReadNpy(d / "a.npy", &r).ok());
  EXPECT_EQ(r.n, 11u);
  EXPECT_EQ(r.dim, 7u);
  EXPECT_EQ(r.data, m.data);
}

TEST(KnnData, NpyInt64Ids) {
  TempDir d;
  const std::vector<int64_t> ids = {5, 1ll << 40, 7, 0};
  ASSERT_TRUE(kd::WriteNpyInt64(d / "i.npy", 2, 2, ids.data()).ok());
  const std::string bytes = ReadBytes(d / "i.npy");
  EXPECT_NE(bytes.find("'descr': '<i8'"), std::string::npos);
  int64_t last = -1;
  std::memcpy(&last, bytes.data() + bytes.size() - 8, 8);
  EXPECT_EQ(last, 0);
  std::memcpy(&last, bytes.data() + bytes.size() - 24, 8);
  EXPECT_EQ(last, 1ll << 40);
}

TEST(KnnData, NpyReadsFloat64AndUint8AndVersion2) {
  TempDir d;
  std::string f8;
  for (double v : {1.5, -2.0, 3.25, 1e3, 0.0, 7.0}) Append(&f8, v);
  WriteBytes(d / "f8.npy", NpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", f8, 2));
  Matrix m;
  ASSERT_TRUE(kd::ReadNpy(d / "f8.npy", &m).ok());
  EXPECT_EQ(m.n, 3u);
  EXPECT_EQ(m.dim, 2u);
  EXPECT_EQ(m.data, (std::vector<float>{1.5f, -2.0f, 3.25f, 1e3f, 0.0f, 7.0f}));
  WriteBytes(d / "u1.npy", NpyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", "\x00\x01\xff\x10\x20\x30"s));
  ASSERT_TRUE(kd::ReadNpy(d / "u1.npy", &m).ok());
  EXPECT_EQ(m.data, (std::vector<float>{0, 1, 255, 16, 32, 48}));
}

TEST(KnnData, BvecsAndIvecs) {
  TempDir d;
  std::string b;
  for (int r = 0; r < 3; ++r) {
    Append(&b, int32_t{4});
    for (int j = 0; j < 4; ++j) b.push_back(static_cast<char>(r * 100 + j * 40));
  }
  WriteBytes(d / "a.bvecs", b);
  Matrix m;
  ASSERT_TRUE(kd::ReadBvecs(d / "a.bvecs", &m).ok());
  EXPECT_EQ(m.n, 3u);
  EXPECT_EQ(m.dim, 4u);
  EXPECT_EQ(m.data[4 * 2 + 3], 64.0f);  // byte 320 mod 256
  kd::IntMatrix im;
  im.n = 2;
  im.dim = 3;
  im.data = {1, -2, 3, 4, 5, 2147483647};
  ASSERT_TRUE(kd::WriteIvecs(d / "a.ivecs", im).ok());
  kd::IntMatrix ir;
  ASSERT_TRUE(kd::ReadIvecs(d / "a.ivecs", &ir).ok());
  EXPECT_EQ(ir.n, 2u);
  EXPECT_EQ(ir.dim, 3u);
  EXPECT_EQ(ir.data, im.data);
}

TEST(KnnData, FormatByExtension) {
  EXPECT_EQ(kd::FormatOfPath("/x/a.FVECS"), kd::FileFormat::kFvecs);
  EXPECT_EQ(kd::FormatOfPath("a.bvecs"), kd::FileFormat::kBvecs);
  EXPECT_EQ(kd::FormatOfPath("a.npy"), kd::FileFormat::kNpy);
  EXPECT_EQ(kd::FormatOfPath("a.ivecs"), kd::FileFormat::kIvecs);
  EXPECT_EQ(kd::FormatOfPath("dir.npy/a"), kd::FileFormat::kUnknown);
  TempDir d;
  WriteBytes(d / "a.csv", "1,2\n");
  ExpectRefused(kd::ReadPoints, d / "a.csv", Code::kInvalidArgument, {"format"});
  EXPECT_EQ(kd::WritePoints(d / "b.csv", Sample(1, 1)).code(), Code::kInvalidArgument);
}

// ---- bad files ---------------------------------------------------------------------------------

TEST(KnnDataBadFiles, Vecs) {
  TempDir d;
  WriteBytes(d / "f0.fvecs", "");
  ExpectRefused(kd::ReadFvecs, d / "f0.fvecs", Code::kInvalidArgument, {"empty"});
  ExpectRefused(kd::ReadFvecs, d / "absent.fvecs", Code::kIOError, {"cannot open"});
  // Truncated inside row 2's values.
  std::string t = FvecsRow(3, {1, 2, 3}) + FvecsRow(3, {4, 5, 6}) + FvecsRow(3, {7, 8, 9});
  WriteBytes(d / "f14.fvecs", t.substr(0, t.size() - 5));
  ExpectRefused(kd::ReadFvecs, d / "f14.fvecs", Code::kCorruption, {"truncated", "row 2", "byte 32"});
  // Truncated inside row 1's dim field.
  WriteBytes(d / "f17.fvecs", FvecsRow(3, {1, 2, 3}) + "\x03\x00"s);
  ExpectRefused(kd::ReadFvecs, d / "f17.fvecs", Code::kCorruption, {"truncated", "row 1", "byte 16"});
  // A row of another dim mid-file.
  WriteBytes(d / "f18.fvecs", FvecsRow(3, {1, 2, 3}) + FvecsRow(3, {1, 2, 3}) + FvecsRow(2, {1, 2}) + FvecsRow(3, {1, 2, 3}));
  ExpectRefused(kd::ReadFvecs, d / "f18.fvecs", Code::kCorruption, {"row 2", "byte 32", "dim 2", "dim 3"});
  WriteBytes(d / "f13.fvecs", FvecsRow(0, {}));
  ExpectRefused(kd::ReadFvecs, d / "f13.fvecs", Code::kInvalidArgument, {"dim 0", "row 0"});
  WriteBytes(d / "f19.fvecs", FvecsRow(-4, {1, 2, 3, 4}));
  ExpectRefused(kd::ReadFvecs, d / "f19.fvecs", Code::kInvalidArgument, {"dim -4"});
  WriteBytes(d / "f20.fvecs", FvecsRow(static_cast<int32_t>(wort::knn::kMaxDim + 1), {1}));
  ExpectRefused(kd::ReadFvecs, d / "f20.fvecs", Code::kInvalidArgument, {"dim 4097", "4096"});
  // .bvecs: one byte per value; truncated in row 1.
  std::string b;
  Append(&b, int32_t{4});
  b += "abcd";
  Append(&b, int32_t{4});
  b += "ab";
  WriteBytes(d / "f14.bvecs", b);
  ExpectRefused(kd::ReadBvecs, d / "f14.bvecs", Code::kCorruption, {"truncated", "row 1", "byte 8"});
  EXPECT_EQ(kd::ReadFvecs(d.str(), nullptr).code(), Code::kInvalidArgument) << "a directory";
}

TEST(KnnDataBadFiles, Npy) {
  TempDir d;
  const std::string data8(8 * 4, '\0');  // 2 x 4 float32
  auto npy = [&](const std::string& name, const std::string& bytes) {
    WriteBytes(d / name, bytes);
    return d / name;
  };
  ExpectRefused(kd::ReadNpy, npy("f0.npy", ""), Code::kInvalidArgument, {"empty"});
  ExpectRefused(kd::ReadNpy, npy("f1.npy", "\x93NUMPZ\x01\x00\x10\x00{}              \n"s), Code::kCorruption, {"magic"});
  ExpectRefused(kd::ReadNpy, npy("f2.npy", "\x93NU"), Code::kCorruption, {"truncated"});
  ExpectRefused(kd::ReadNpy, npy("f3.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data8, 9)),
                Code::kInvalidArgument, {"version 9"});
  std::string hdr_cut = NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", "");
  ExpectRefused(kd::ReadNpy, npy("f4.npy", hdr_cut.substr(0, 40)), Code::kCorruption, {"truncated", "header"});
  ExpectRefused(kd::ReadNpy, npy("f5.npy", NpyFile("{'fortran_order': False, 'shape': (2, 4), }", data8)),
                Code::kCorruption, {"malformed", "descr"});
  ExpectRefused(kd::ReadNpy, npy("f6.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, }", data8)),
                Code::kCorruption, {"malformed", "shape"});
  ExpectRefused(kd::ReadNpy, npy("f7.npy", NpyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 4), }", data8)),
                Code::kInvalidArgument, {"dtype '<i4'", "not supported"});
  ExpectRefused(kd::ReadNpy, npy("f8.npy", NpyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 4), }", data8)),
                Code::kInvalidArgument, {"dtype '>f4'"});
  ExpectRefused(kd::ReadNpy, npy("f9.npy", NpyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4), }", data8)),
                Code::kInvalidArgument, {"Fortran"});
  ExpectRefused(kd::ReadNpy, npy("f10.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", data8)),
                Code::kInvalidArgument, {"1 dimension", "2-D"});
  ExpectRefused(kd::ReadNpy, npy("f11.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2), }", data8)),
                Code::kInvalidArgument, {"3 dimension"});
  ExpectRefused(kd::ReadNpy, npy("f12.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", "")),
                Code::kInvalidArgument, {"empty"});
  ExpectRefused(kd::ReadNpy, npy("f13.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", "")),
                Code::kInvalidArgument, {"dim 0"});
  ExpectRefused(kd::ReadNpy,
                npy("f14.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data8.substr(0, 30))),
                Code::kCorruption, {"truncated", "needs 32 bytes", "has 30"});
  ExpectRefused(kd::ReadNpy, npy("f15.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999, 4), }", data8)),
                Code::kCorruption, {"truncated"});
  ExpectRefused(kd::ReadNpy, npy("f16.npy", NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data8 + "xy")),
                Code::kCorruption, {"2 bytes after the last element"});
}

constexpr float kPinnedMean0 = 1261.1165771484375f;
constexpr float kPinnedMeanLast = 8874.7822265625f;

// ---- generator -----------------------------------------------------------------------------------

kd::ClusterSpec Spec(uint64_t n, uint32_t dim, double std, uint64_t seed) {
  kd::ClusterSpec s;
  s.n = n;
  s.dim = dim;
  s.std = std;
  s.seed = seed;
  return s;
}

TEST(KnnGenerator, SameSeedSameBytesOtherSeedDiffers) {
  TempDir d;
  Matrix a, b, c;
  ASSERT_TRUE(kd::GenerateClustered(Spec(3000, 16, 160, 7), &a).ok());
  ASSERT_TRUE(kd::GenerateClustered(Spec(3000, 16, 160, 7), &b).ok());
  ASSERT_TRUE(kd::GenerateClustered(Spec(3000, 16, 160, 8), &c).ok());
  ASSERT_TRUE(kd::WriteFvecs(d / "a.fvecs", a).ok());
  ASSERT_TRUE(kd::WriteFvecs(d / "b.fvecs", b).ok());
  ASSERT_TRUE(kd::WriteFvecs(d / "c.fvecs", c).ok());
  EXPECT_EQ(ReadBytes(d / "a.fvecs"), ReadBytes(d / "b.fvecs"));
  EXPECT_NE(ReadBytes(d / "a.fvecs"), ReadBytes(d / "c.fvecs"));
  size_t equal = 0;
  for (size_t i = 0; i < a.data.size(); ++i) equal += a.data[i] == c.data[i];
  EXPECT_LT(equal, a.data.size() / 100);
  Matrix u1, u2;
  ASSERT_TRUE(kd::GenerateUniform(Spec(500, 4, 0, 3), &u1).ok());
  ASSERT_TRUE(kd::GenerateUniform(Spec(500, 4, 0, 3), &u2).ok());
  EXPECT_EQ(u1.data, u2.data);
}

// The means are uniform draws only (no libm): pinned, so that a change of the generator - or of
// the standard library under it - shows.
TEST(KnnGenerator, MeansArePinnedAndInRange) {
  Matrix means;
  ASSERT_TRUE(kd::ClusterMeans(Spec(1, 64, 160, 1), &means).ok());
  ASSERT_EQ(means.n, 100u);
  ASSERT_EQ(means.dim, 64u);
  double sum = 0;
  for (float v : means.data) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 10000.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / means.data.size(), 5000, 150) << "uniform over [0, 10000)";
  EXPECT_EQ(means.data[0], kPinnedMean0) << means.data[0];
  EXPECT_EQ(means.data[6399], kPinnedMeanLast) << means.data[6399];
  // n does not change the means.
  Matrix other;
  ASSERT_TRUE(kd::ClusterMeans(Spec(12345, 64, 10240, 1), &other).ok());
  EXPECT_EQ(other.data, means.data);
}

TEST(KnnGenerator, PointsFollowTheirClusters) {
  const uint32_t dim = 8, clusters = 10;
  kd::ClusterSpec s = Spec(20000, dim, 40, 5);
  s.clusters = clusters;
  Matrix means, pts;
  ASSERT_TRUE(kd::ClusterMeans(s, &means).ok());
  ASSERT_TRUE(kd::GenerateClustered(s, &pts).ok());
  // Point i belongs to cluster i % clusters: mean and std of its offsets.
  double sum = 0, sum2 = 0;
  for (uint64_t i = 0; i < pts.n; ++i)
    for (uint32_t d = 0; d < dim; ++d) {
      const double off = pts.row(i)[d] - means.row(i % clusters)[d];
      sum += off;
      sum2 += off * off;
    }
  const double cnt = static_cast<double>(pts.n * dim);
  EXPECT_NEAR(sum / cnt, 0, 1.0);
  EXPECT_NEAR(std::sqrt(sum2 / cnt), 40, 1.0);
  // Queries: the same means and std, another seed, not the data's points.
  Matrix q;
  ASSERT_TRUE(kd::GenerateClusteredQueries(s, 200, 99, &q).ok());
  ASSERT_EQ(q.n, 200u);
  double qsum2 = 0;
  for (uint64_t i = 0; i < q.n; ++i)
    for (uint32_t d = 0; d < dim; ++d) {
      const double off = q.row(i)[d] - means.row(i % clusters)[d];
      qsum2 += off * off;
      EXPECT_LT(std::fabs(off), 40 * 7);
    }
  EXPECT_NEAR(std::sqrt(qsum2 / (200.0 * dim)), 40, 5.0);
  EXPECT_NE(std::vector<float>(q.data.begin(), q.data.begin() + dim), std::vector<float>(pts.data.begin(), pts.data.begin() + dim));
  Matrix q2;
  ASSERT_TRUE(kd::GenerateClusteredQueries(s, 200, 100, &q2).ok());
  EXPECT_NE(q.data, q2.data);
}

TEST(KnnGenerator, RefusesBadSpecs) {
  Matrix m;
  EXPECT_EQ(kd::GenerateClustered(Spec(0, 4, 1, 1), &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(kd::GenerateClustered(Spec(10, 0, 1, 1), &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(kd::GenerateClustered(Spec(10, wort::knn::kMaxDim + 1, 1, 1), &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(kd::GenerateClustered(Spec(10, 4, -1, 1), &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(kd::GenerateClustered(Spec(10, 4, NAN, 1), &m).code(), Code::kInvalidArgument);
  kd::ClusterSpec s = Spec(10, 4, 1, 1);
  s.clusters = 0;
  EXPECT_EQ(kd::GenerateClustered(s, &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(kd::GenerateClusteredQueries(Spec(10, 4, 1, 1), 0, 2, &m).code(), Code::kInvalidArgument);
  EXPECT_EQ(m.n, 0u);
}

// ---- the CLI -------------------------------------------------------------------------------------

int RunCli(const std::string& args, std::string* out) {
  return wort::test::RunShell(std::string(WORT_CLI_PATH) + " " + args, out);
}

struct Neighbor {
  uint64_t id;
  double dist;
};

// The k nearest of each query by exhaustive search in double precision.
std::vector<std::vector<Neighbor>> Reference(const Matrix& pts, const Matrix& q, uint32_t k) {
  std::vector<std::vector<Neighbor>> out(q.n);
  for (uint64_t i = 0; i < q.n; ++i) {
    std::vector<Neighbor> all(pts.n);
    for (uint64_t j = 0; j < pts.n; ++j) {
      double s = 0;
      for (uint32_t d = 0; d < pts.dim; ++d) {
        const double t = static_cast<double>(q.row(i)[d]) - pts.row(j)[d];
        s += t * t;
      }
      all[j] = {j, s};
    }
    std::partial_sort(all.begin(), all.begin() + k, all.end(),
                      [](const Neighbor& a, const Neighbor& b) { return a.dist < b.dist || (a.dist == b.dist && a.id < b.id); });
    out[i].assign(all.begin(), all.begin() + k);
  }
  return out;
}

double ExactDist(const Matrix& pts, const Matrix& q, uint64_t qi, uint64_t id) {
  double s = 0;
  for (uint32_t d = 0; d < pts.dim; ++d) {
    const double t = static_cast<double>(q.row(qi)[d]) - pts.row(id)[d];
    s += t * t;
  }
  return s;
}

// `wort knn query` text: "query rank id dist" lines (and '#' lines).
std::vector<std::vector<Neighbor>> ParseQueryOutput(const std::string& out, uint64_t nq, uint32_t k) {
  std::vector<std::vector<Neighbor>> r(nq, std::vector<Neighbor>(k, {~0ull, -1}));
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream l(line);
    uint64_t qi = 0, rank = 0, id = 0;
    double dist = 0;
    if (!(l >> qi >> rank >> id >> dist) || qi >= nq || rank >= k) {
      ADD_FAILURE() << "unexpected line: " << line;
      continue;
    }
    r[qi][rank] = {id, dist};
  }
  return r;
}

// The answer is exact: k distinct ids, each reported distance that of its id, ascending, and the
// i-th distance equal to the reference's i-th (all within float rounding).
void ExpectExact(const Matrix& pts, const Matrix& q, const std::vector<std::vector<Neighbor>>& got,
                 const std::vector<std::vector<Neighbor>>& ref, const std::string& what) {
  for (uint64_t i = 0; i < q.n; ++i) {
    std::set<uint64_t> ids;
    for (size_t r = 0; r < ref[i].size(); ++r) {
      const Neighbor& g = got[i][r];
      ASSERT_LT(g.id, pts.n) << what << " query " << i << " rank " << r;
      ids.insert(g.id);
      const double exact = ExactDist(pts, q, i, g.id);
      EXPECT_NEAR(g.dist, exact, 1e-5 * exact + 1e-3) << what << " query " << i << " rank " << r;
      EXPECT_NEAR(exact, ref[i][r].dist, 1e-5 * ref[i][r].dist + 1e-3)
          << what << " query " << i << " rank " << r << ": id " << g.id << " vs reference id " << ref[i][r].id;
      if (r > 0) {
        EXPECT_LE(got[i][r - 1].dist, g.dist) << what;
      }
    }
    EXPECT_EQ(ids.size(), ref[i].size()) << what << " query " << i << ": repeated ids";
  }
}

class KnnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    kd::ClusterSpec s = Spec(3000, 8, 160, 11);
    s.clusters = 20;
    ASSERT_TRUE(kd::GenerateClustered(s, &pts_).ok());
    ASSERT_TRUE(kd::GenerateClusteredQueries(s, 25, 12, &q_).ok());
    ASSERT_TRUE(kd::WriteFvecs(dir_ / "data.fvecs", pts_).ok());
    ASSERT_TRUE(kd::WriteNpy(dir_ / "queries.npy", q_).ok());
    pool_ = dir_ / "k.pool";
  }
  std::string Build(const std::string& extra = "") {
    std::string out;
    EXPECT_EQ(RunCli("knn build --pool " + pool_ + " --name t --input " + (dir_ / "data.fvecs") + " --degree 16 --threads 2 " + extra, &out), 0) << out;
    return out;
  }
  TempDir dir_;
  Matrix pts_, q_;
  std::string pool_;
};

TEST_F(KnnCli, BuildAndQueryEveryEngineMatchBruteForce) {
  const std::string b = Build();
  EXPECT_NE(b.find("points:      3000"), std::string::npos) << b;
  EXPECT_NE(b.find("degree:      16"), std::string::npos) << b;
  for (uint32_t k : {1u, 10u, 40u}) {
    const auto ref = Reference(pts_, q_, k);
    for (const char* engine : {"psb", "bnb", "brute"}) {
      std::string out;
      ASSERT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --k " + std::to_string(k) +
                           " --engine " + engine,
                       &out),
                0)
          << out;
      EXPECT_NE(out.find("# per query: nodes visited"), std::string::npos) << out;
      ExpectExact(pts_, q_, ParseQueryOutput(out, q_.n, k), ref, std::string(engine) + " k " + std::to_string(k));
    }
  }
  std::string out;
  EXPECT_EQ(RunCli("knn info --pool " + pool_ + " --name t", &out), 0) << out;
  EXPECT_NE(out.find("dim:         8"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunCli("knn check --pool " + pool_ + " --name t", &out), 0) << out;
  EXPECT_NE(out.find("check passed"), std::string::npos) << out;
}

TEST_F(KnnCli, HilbertBuildAndFileOutputs) {
  Build("--method hilbert");
  const uint32_t k = 5;
  std::string text, out;
  ASSERT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --k 5 --threads 1", &text), 0);
  ExpectExact(pts_, q_, ParseQueryOutput(text, q_.n, k), Reference(pts_, q_, k), "hilbert psb");
  ASSERT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --k 5 --out " + (dir_ / "r.ivecs"), &out), 0) << out;
  kd::IntMatrix ids;
  Matrix dists;
  ASSERT_TRUE(kd::ReadIvecs(dir_ / "r.ivecs", &ids).ok());
  ASSERT_TRUE(kd::ReadFvecs(dir_ / "r.dist.fvecs", &dists).ok());
  ASSERT_EQ(ids.n, q_.n);
  ASSERT_EQ(ids.dim, k);
  const auto parsed = ParseQueryOutput(text, q_.n, k);
  for (uint64_t i = 0; i < q_.n; ++i)
    for (uint32_t r = 0; r < k; ++r) {
      EXPECT_EQ(static_cast<uint64_t>(ids.data[i * k + r]), parsed[i][r].id);
      EXPECT_NEAR(dists.row(i)[r], parsed[i][r].dist, 1e-6 * parsed[i][r].dist + 1e-6);
    }
  out.clear();
  ASSERT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --k 5 --out " + (dir_ / "r.npy"), &out), 0) << out;
  const std::string npy = ReadBytes(dir_ / "r.npy");
  EXPECT_NE(npy.find("'descr': '<i8'"), std::string::npos);
  int64_t first = -1;
  std::memcpy(&first, npy.data() + npy.find('\n') + 1, 8);
  EXPECT_EQ(static_cast<uint64_t>(first), parsed[0][0].id);
  Matrix nd;
  ASSERT_TRUE(kd::ReadNpy(dir_ / "r.dist.npy", &nd).ok());
  EXPECT_EQ(nd.data, dists.data);
}

TEST_F(KnnCli, BadInputIsRefusedAndTheTreeStays) {
  Build();
  std::string out;
  // A truncated data file: refused (exit 2), naming the file; the tree t is still there.
  const std::string bytes = ReadBytes(dir_ / "data.fvecs");
  WriteBytes(dir_ / "cut.fvecs", bytes.substr(0, bytes.size() - 7));
  EXPECT_EQ(RunCli("knn build --pool " + pool_ + " --name t --input " + (dir_ / "cut.fvecs"), &out), 2) << out;
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  EXPECT_NE(out.find("cut.fvecs"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunCli("knn info --pool " + pool_ + " --name t", &out), 0) << out;
  EXPECT_NE(out.find("points:      3000"), std::string::npos) << out;
  // Queries of another dim.
  Matrix q4 = Sample(3, 4);
  ASSERT_TRUE(kd::WriteFvecs(dir_ / "q4.fvecs", q4).ok());
  out.clear();
  EXPECT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "q4.fvecs") + " --k 3", &out), 2) << out;
  EXPECT_NE(out.find("4 dims"), std::string::npos) << out;
  // k larger than n; an unknown engine; a tree that does not exist; an empty file.
  out.clear();
  EXPECT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --k 3001", &out), 2) << out;
  out.clear();
  EXPECT_EQ(RunCli("knn query --pool " + pool_ + " --name t --queries " + (dir_ / "queries.npy") + " --engine kd", &out), 2) << out;
  out.clear();
  EXPECT_NE(RunCli("knn info --pool " + pool_ + " --name nosuch", &out), 0) << out;
  WriteBytes(dir_ / "empty.npy", "");
  out.clear();
  EXPECT_EQ(RunCli("knn build --pool " + pool_ + " --name u --input " + (dir_ / "empty.npy"), &out), 2) << out;
  EXPECT_NE(out.find("empty"), std::string::npos) << out;
}

// --device gpu builds the CPU's tree where a GPU is present; elsewhere it is refused, saying why,
// before the pool is created (no pool file) or an existing tree is touched.
TEST_F(KnnCli, BuildOnTheGpuIsTheSameTreeOrRefused) {
  std::string out;
  EXPECT_EQ(RunCli("knn build --pool " + pool_ + " --name t --input " + (dir_ / "data.fvecs") + " --device tpu", &out), 2)
      << out;
  EXPECT_NE(out.find("--device"), std::string::npos) << out;
  std::string why;
  if (!wort::knn::GpuAvailable(&why)) {
    out.clear();
    const std::string fresh = dir_ / "fresh.pool";
    EXPECT_NE(RunCli("knn build --pool " + fresh + " --name t --input " + (dir_ / "data.fvecs") + " --device gpu", &out), 0)
        << out;
    EXPECT_NE(out.find(why), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(fresh)) << out;
    return;
  }
  const std::string b = Build("--device gpu");
  EXPECT_NE(b.find("on the GPU: Hilbert keys and k-means assignments"), std::string::npos) << b;
  out.clear();
  EXPECT_EQ(RunCli("knn check --pool " + pool_ + " --name t", &out), 0) << out;
}

TEST(KnnCliGen, WritesTheGeneratorsBytes) {
  TempDir d;
  std::string out;
  ASSERT_EQ(RunCli("knn gen --out " + (d / "g.fvecs") + " --n 500 --dim 6 --clusters 7 --std 40 --seed 3 --queries 9 --queries-out " +
                       (d / "q.npy"),
                   &out),
            0)
      << out;
  kd::ClusterSpec s = Spec(500, 6, 40, 3);
  s.clusters = 7;
  Matrix want, got, q, qwant;
  ASSERT_TRUE(kd::GenerateClustered(s, &want).ok());
  ASSERT_TRUE(kd::ReadFvecs(d / "g.fvecs", &got).ok());
  EXPECT_EQ(got.data, want.data);
  ASSERT_TRUE(kd::GenerateClusteredQueries(s, 9, 1003, &qwant).ok());
  ASSERT_TRUE(kd::ReadNpy(d / "q.npy", &q).ok());
  EXPECT_EQ(q.data, qwant.data);
  out.clear();
  EXPECT_EQ(RunCli("knn gen --out " + (d / "g.txt") + " --n 5 --dim 2", &out), 2) << out;
  out.clear();
  EXPECT_EQ(RunCli("knn gen --out " + (d / "h.fvecs") + " --n 5 --dim 2 --queries-out " + (d / "hq.fvecs"), &out), 2) << out;
  out.clear();
  EXPECT_EQ(RunCli("knn gen --out " + (d / "h.fvecs") + " --n 5 --dim 2 --queries 3", &out), 2) << out;
}

TEST(KnnCliBench, TinyRunsEveryExperimentWithNoWrongRecord) {
  TempDir d;
  std::string out;
  ASSERT_EQ(RunCli("knn bench --scale tiny --threads 2 --no-report --out " + d.str(), &out), 0) << out;
  std::ifstream in(d / "results.jsonl");
  ASSERT_TRUE(in) << out;
  std::set<std::string> experiments, engines;
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    ++records;
    experiments.insert(j.at("experiment").get<std::string>());
    EXPECT_NE(j.at("status"), "WRONG") << line;
    if (j.value("skipped", false)) continue;
    engines.insert(j.at("engine").get<std::string>());
    if (j.at("engine") == "faiss-flat") {
      EXPECT_GE(j.at("recall").get<double>(), 0.99) << "faiss's ids against wort's brute force: " << line;
      continue;
    }
    for (const char* f : {"n", "dim", "std", "k", "degree", "method", "device", "threads", "ns_per_query", "nproc", "cpu", "git_commit"})
      EXPECT_TRUE(j.contains(f)) << f << " in " << line;
    if (j.at("engine") == "psb" || j.at("engine") == "bnb") {
      EXPECT_GT(j.at("nodes_visited_per_query").get<double>(), 0) << line;
    }
  }
  EXPECT_GT(records, 40);
  for (const char* e : {"fig28", "fig30", "fig31", "fig32", "fig33", "faiss"}) EXPECT_TRUE(experiments.count(e)) << e;
  for (const char* e : {"brute", "bnb", "psb"}) EXPECT_TRUE(engines.count(e)) << e;
  EXPECT_TRUE(std::filesystem::exists(d / "config.json"));
  out.clear();
  EXPECT_EQ(RunCli("knn bench --scale tiny --only fig99 --out " + (d / "x"), &out), 2) << out;
  EXPECT_NE(out.find("fig99"), std::string::npos) << out;
}

}  // namespace
