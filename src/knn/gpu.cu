// The GPU search engines (wort/knn.h): the tree's upload, the launch of the kernel of
// src/knn/gpu_kernel.h (one thread block per query: brute force, stackless branch-and-bound and
// PSB, the same steps and the same bits as the CPU's), the copies back. doc/knn-gpu.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "knn/gpu_kernel.h"
#include "knn/internal.h"
#include "knn/layout.h"

#ifndef WORT_KNN_CUDA
#error "src/knn/gpu.cu is built only with WORT_KNN_CUDA defined (CMakeLists.txt: WORT_CUDA)"
#endif

namespace wort::knn::gpu {

namespace {

using namespace kernel;

__global__ void __launch_bounds__(kMaxThreads) SearchKernel(Launch a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ uint64_t red[32];
  __shared__ uint32_t shared_n, shared_changed;
  SearchBlocks(a, smem, red, &shared_n, &shared_changed);
}

std::string CudaError(const char* what, cudaError_t e) {
  return std::string("knn search on the GPU: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ")";
}

// The tree's copy on one device, freed with the handle (KnnIndex::Impl::gpu_tree).
struct DeviceTree {
  int device = 0;
  DevTree t{};
  void* bufs[5] = {};
  cudaMemPool_t pool = nullptr;  // the searches' buffers (queries, results, counters)
  ~DeviceTree() {
    for (void* b : bufs)
      if (b) cudaFree(b);
    if (pool) cudaMemPoolDestroy(pool);
  }
};

// Makes `device` current for the caller's scope and restores the thread's previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != device && cudaSetDevice(device) == cudaSuccess) set_ = true;
  }
  ~DeviceScope() {
    if (set_) cudaSetDevice(prev_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_ = 0;
  bool set_ = false;
};

Status Upload(const TreeView& v, std::shared_ptr<DeviceTree>* out) {
  auto dt = std::make_shared<DeviceTree>();
  cudaError_t e = cudaGetDevice(&dt->device);
  if (e != cudaSuccess) return Status::IOError(CudaError("cudaGetDevice", e));
  const uint64_t sizes[5] = {LeafPointsBytes(v.leaves, v.dim, v.degree), LeafIdsBytes(v.leaves, v.degree),
                             v.leaves * sizeof(LeafMeta), InnerSpheresBytes(v.inner, v.dim, v.degree),
                             v.inner * sizeof(InnerMeta)};
  const void* src[5] = {v.leaf_points, v.leaf_ids, v.leaf_meta, v.inner_spheres, v.inner_meta};
  for (int i = 0; i < 5; ++i) {
    e = cudaMalloc(&dt->bufs[i], sizes[i]);
    if (e != cudaSuccess) return Status::IOError(CudaError("copying the tree to the device (cudaMalloc)", e));
    e = cudaMemcpy(dt->bufs[i], src[i], sizes[i], cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return Status::IOError(CudaError("copying the tree to the device (cudaMemcpy)", e));
  }
  dt->t.dim = v.dim;
  dt->t.degree = v.degree;
  dt->t.points = v.points;
  dt->t.leaves = v.leaves;
  dt->t.root = v.root;
  dt->t.leaf_points = static_cast<const float*>(dt->bufs[0]);
  dt->t.leaf_ids = static_cast<const uint64_t*>(dt->bufs[1]);
  dt->t.leaf_meta = static_cast<const LeafMeta*>(dt->bufs[2]);
  dt->t.inner_spheres = static_cast<const float*>(dt->bufs[3]);
  dt->t.inner_meta = static_cast<const InnerMeta*>(dt->bufs[4]);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dt->device;
  e = cudaMemPoolCreate(&dt->pool, &props);
  if (e != cudaSuccess) return Status::IOError(CudaError("cudaMemPoolCreate", e));
  uint64_t keep = 256ull << 20;  // kept between searches
  cudaMemPoolSetAttribute(dt->pool, cudaMemPoolAttrReleaseThreshold, &keep);
  *out = std::move(dt);
  return Status::OK();
}

// The buffers and the stream of one search; everything is released at scope exit.
struct SearchBuffers {
  cudaStream_t stream = nullptr;
  void* p[4] = {};
  ~SearchBuffers() {
    if (!stream) return;
    for (void* b : p)
      if (b) cudaFreeAsync(b, stream);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
};

}  // namespace

bool Available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) {
      if (e == cudaErrorInsufficientDriver)
        *why = "no usable NVIDIA driver (none is installed, or it is older than the CUDA runtime wort was built with)";
      else if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
        *why = "no CUDA device";
      else
        *why = std::string("CUDA is unavailable: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    }
    return false;
  }
  if (why) {
    int dev = 0;
    cudaDeviceProp p{};
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess)
      *why = std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", device " +
             std::to_string(dev) + " of " + std::to_string(n) + ")";
    else
      *why = std::to_string(n) + " CUDA device(s)";
  }
  return true;
}

Status Search(const KnnIndex::Impl& impl, const float* queries, uint64_t nq, uint32_t k, Engine e, uint64_t* ids,
              float* dists, Counters* c) {
  if (!Available(nullptr)) {
    std::string why;
    Available(&why);
    return Status::NotSupported("knn search on the GPU: " + why);
  }
  if (k > kMaxGpuK)
    return Status::InvalidArgument("knn search on the GPU: k = " + std::to_string(k) + " above the GPU engines' limit " +
                                   std::to_string(kMaxGpuK));
  const TreeView& v = impl.view;
  std::shared_ptr<DeviceTree> dt;
  {
    std::lock_guard<std::mutex> lock(impl.gpu_mu);
    if (!impl.gpu_tree) {
      std::shared_ptr<DeviceTree> fresh;
      Status s = Upload(v, &fresh);
      if (!s.ok()) return s;
      impl.gpu_tree = fresh;
    }
    dt = std::static_pointer_cast<DeviceTree>(impl.gpu_tree);
  }
  DeviceScope scope(dt->device);

  int optin = 0;
  cudaError_t err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dt->device);
  if (err != cudaSuccess) return Status::IOError(CudaError("cudaDeviceGetAttribute", err));
  const uint64_t static_bytes = 32 * 8 + 8 + 64;  // red, shared_n/changed, and room for alignment
  const bool best_in_shared = SharedBytes(v.dim, v.degree, k, true) + static_bytes <= uint64_t(optin);
  const uint64_t smem = SharedBytes(v.dim, v.degree, k, best_in_shared);
  if (smem + static_bytes > uint64_t(optin))
    return Status::InvalidArgument("knn search on the GPU: the tree's dimension and degree need " +
                                   std::to_string(smem) + " bytes of shared memory per block, above the device's " +
                                   std::to_string(optin));
  if (smem > 48 * 1024) {
    err = cudaFuncSetAttribute(SearchKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return Status::IOError(CudaError("cudaFuncSetAttribute", err));
  }

  SearchBuffers b;
  err = cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    b.stream = nullptr;
    return Status::IOError(CudaError("cudaStreamCreate", err));
  }
  const uint64_t bytes[4] = {nq * v.dim * sizeof(float), nq * k * sizeof(uint64_t), nq * k * sizeof(float),
                             nq * sizeof(DevCounters)};
  for (int i = 0; i < 4; ++i) {
    err = cudaMallocFromPoolAsync(&b.p[i], bytes[i], dt->pool, b.stream);
    if (err != cudaSuccess) return Status::IOError(CudaError("allocating the search's buffers", err));
  }
  err = cudaMemcpyAsync(b.p[0], queries, bytes[0], cudaMemcpyHostToDevice, b.stream);
  if (err != cudaSuccess) return Status::IOError(CudaError("copying the queries", err));

  Launch a{};
  a.t = dt->t;
  a.queries = static_cast<const float*>(b.p[0]);
  a.nq = nq;
  a.k = k;
  a.engine = e;
  a.best_in_shared = best_in_shared;
  a.out_ids = static_cast<uint64_t*>(b.p[1]);
  a.out_dists = static_cast<float*>(b.p[2]);
  a.counters = static_cast<DevCounters*>(b.p[3]);
  const uint32_t threads = std::max<uint32_t>(32, (std::min<uint32_t>(v.degree, kMaxThreads) + 31) / 32 * 32);
  const uint32_t blocks = static_cast<uint32_t>(std::min<uint64_t>(nq, kMaxBlocks));
  SearchKernel<<<blocks, threads, smem, b.stream>>>(a);
  err = cudaGetLastError();
  if (err != cudaSuccess) return Status::IOError(CudaError("launching the kernel", err));

  std::vector<DevCounters> per(nq);
  err = cudaMemcpyAsync(ids, b.p[1], bytes[1], cudaMemcpyDeviceToHost, b.stream);
  if (err == cudaSuccess) err = cudaMemcpyAsync(dists, b.p[2], bytes[2], cudaMemcpyDeviceToHost, b.stream);
  if (err == cudaSuccess) err = cudaMemcpyAsync(per.data(), b.p[3], bytes[3], cudaMemcpyDeviceToHost, b.stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(b.stream);
  if (err != cudaSuccess) return Status::IOError(CudaError("running the search", err));
  if (c) {
    Counters sum;
    sum.queries = nq;
    for (const DevCounters& x : per) {
      sum.inner_visits += x.inner_visits;
      sum.leaf_visits += x.leaf_visits;
      sum.sphere_bytes += x.sphere_bytes;
      sum.point_bytes += x.point_bytes;
    }
    *c = sum;
  }
  return Status::OK();
}

}  // namespace wort::knn::gpu
