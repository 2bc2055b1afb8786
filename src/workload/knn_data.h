// Datasets for the kNN index (wort/knn.h): the standard ANN file formats and a seeded generator
// of the clustered workload of the thesis's chapter V (../shared/papers/004, section 5.3).
//
// Formats (every integer and float little-endian):
//   .fvecs  per row: int32 dim, then dim float32
//   .bvecs  per row: int32 dim, then dim uint8 (converted to float)
//   .ivecs  per row: int32 dim, then dim int32
//   .npy    NumPy format 1.0, 2.0 or 3.0: "\x93NUMPY", version, header length, a Python dict
//           header {'descr', 'fortran_order', 'shape'}; read: 2-D, C order, '<f4', '<f8' or
//           '|u1' (converted to float32); written: '<f4' (points) and '<i8' (ids)
// Every row of a .?vecs file must have the first row's dim, 1 <= dim <= knn::kMaxDim.
// Errors name the file and the row or byte offset: IOError (cannot open/read/write),
// InvalidArgument (an empty file, a dim out of range, an npy dtype/order/shape not supported),
// Corruption (a truncated file, a row whose dim differs from the first, a malformed npy header,
// bytes after the last npy element). A reader never returns part of a file.
//
// Generator (ClusterSpec): `clusters` normal clusters; each mean coordinate is uniform in
// [lo, hi) (default [0, 10000): the chapter does not give the range, this is our choice, so that
// std 40 gives tight clusters and std 10240 is close to uniform); point i belongs to cluster
// i % clusters (n points split evenly) and is mean + std * N(0, 1) per coordinate. Queries are
// drawn the same way (same means, same std) from another seed. Randomness: std::mt19937_64 and
// our own uniform and Box-Muller normal transforms, so that the bytes do not depend on the
// standard library's distributions (they do use log/sqrt/cos/sin of the C library, rounded to
// float32 at the end).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wort/status.h"

namespace wort::knn_data {

// n x dim, row-major.
struct Matrix {
  uint64_t n = 0;
  uint32_t dim = 0;
  std::vector<float> data;
  const float* row(uint64_t i) const { return data.data() + i * dim; }
  float* row(uint64_t i) { return data.data() + i * dim; }
};

struct IntMatrix {
  uint64_t n = 0;
  uint32_t dim = 0;
  std::vector<int32_t> data;
};

enum class FileFormat { kUnknown, kFvecs, kBvecs, kIvecs, kNpy };
// From the file name's extension (case-insensitive).
FileFormat FormatOfPath(const std::string& path);
const char* FormatName(FileFormat f);

Status ReadFvecs(const std::string& path, Matrix* out);
Status ReadBvecs(const std::string& path, Matrix* out);
Status ReadIvecs(const std::string& path, IntMatrix* out);
Status ReadNpy(const std::string& path, Matrix* out);
// By extension: .fvecs, .bvecs, .npy (InvalidArgument for any other).
Status ReadPoints(const std::string& path, Matrix* out);

Status WriteFvecs(const std::string& path, const Matrix& m);
Status WriteIvecs(const std::string& path, const IntMatrix& m);
Status WriteNpy(const std::string& path, const Matrix& m);  // '<f4'
Status WriteNpyInt64(const std::string& path, uint64_t rows, uint32_t cols, const int64_t* data);  // '<i8'
// By extension: .fvecs or .npy.
Status WritePoints(const std::string& path, const Matrix& m);

struct ClusterSpec {
  uint64_t n = 0;
  uint32_t dim = 0;
  uint32_t clusters = 100;
  double std = 160;
  double lo = 0, hi = 10000;  // range of the means' coordinates (and of the uniform data)
  uint64_t seed = 1;
};
// InvalidArgument for n = 0, dim outside [1, kMaxDim], clusters = 0, std < 0 or lo >= hi.
Status ValidateSpec(const ClusterSpec& s);

// The clusters' means (clusters x dim): a function of (seed, clusters, dim, lo, hi) only.
Status ClusterMeans(const ClusterSpec& s, Matrix* out);
// The chapter's clustered data set: n points.
Status GenerateClustered(const ClusterSpec& s, Matrix* out);
// nq queries that follow the data: the means of `s` (its seed), the std of `s`, points drawn
// from `query_seed`; query i belongs to cluster i % clusters.
Status GenerateClusteredQueries(const ClusterSpec& s, uint64_t nq, uint64_t query_seed, Matrix* out);
// n points uniform in [lo, hi)^dim (clusters and std ignored).
Status GenerateUniform(const ClusterSpec& s, Matrix* out);
// nq queries uniform in [lo, hi)^dim from `query_seed` (a stream apart from the data's).
Status GenerateUniformQueries(const ClusterSpec& s, uint64_t nq, uint64_t query_seed, Matrix* out);

}  // namespace wort::knn_data
