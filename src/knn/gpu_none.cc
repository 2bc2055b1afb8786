// The GPU engines where wort is built without CUDA (src/knn/gpu.cu replaces this file when
// CMake finds a CUDA compiler: CMakeLists.txt, WORT_CUDA).
#include "knn/internal.h"

#ifndef WORT_KNN_CUDA
namespace wort::knn::gpu {

bool Available(std::string* why) {
  if (why) *why = "wort was built without CUDA (no CUDA compiler was found at configure time; see doc/knn.md)";
  return false;
}

Status Search(const KnnIndex::Impl&, const float*, uint64_t, uint32_t, Engine, uint64_t*, float*, Counters*) {
  std::string why;
  Available(&why);
  return Status::NotSupported("knn search on the GPU: " + why);
}

Status OpenBuildDevice(std::unique_ptr<BuildDevice>*) {
  std::string why;
  Available(&why);
  return Status::NotSupported("knn build on the GPU: " + why);
}

}  // namespace wort::knn::gpu
#endif
