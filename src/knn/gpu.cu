// The GPU search engines and build steps (wort/knn.h): the tree's upload, the launch of the kernel of
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

#include "knn/build_kernel.h"
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

// ---- the build's steps (src/knn/build_kernel.h) ------------------------------------------------

__global__ void __launch_bounds__(build_kernel::kAssignThreads) AssignKernel(build_kernel::AssignArgs a) {
  __shared__ float tile[build_kernel::kTileFloats];
  build_kernel::AssignBlock(a, tile);
}

__global__ void HilbertKernel(build_kernel::HilbertArgs a) { build_kernel::HilbertThread(a); }

std::string BuildError(const char* what, cudaError_t e) {
  return std::string("knn build on the GPU: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ")";
}

// A device buffer freed at scope exit.
struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  cudaError_t Alloc(uint64_t bytes) {
    if (p) cudaFree(p);
    p = nullptr;
    return cudaMalloc(&p, bytes ? bytes : 1);
  }
};

// The build's steps on the current device. The points of the last two arrays uploaded (the
// build's points and the k-means sample, each read several times) stay on the device for the
// object's life - the build's, whose arrays do not change meanwhile.
class GpuBuildDevice final : public BuildDevice {
 public:
  Status Assign(const float* pts, uint64_t n, uint32_t d, const float* centt, uint32_t k, uint32_t* out) override {
    const float* dp = nullptr;
    WORT_RETURN_IF_ERROR(Points(pts, n * d, &dp));
    DevBuf dc, dout;
    cudaError_t e = dc.Alloc(uint64_t{d} * k * sizeof(float));
    if (e == cudaSuccess) e = dout.Alloc(n * sizeof(uint32_t));
    if (e != cudaSuccess) return Status::IOError(BuildError("cudaMalloc", e));
    e = cudaMemcpy(dc.p, centt, uint64_t{d} * k * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return Status::IOError(BuildError("copying the centroids", e));
    build_kernel::AssignArgs a{dp, n, d, static_cast<const float*>(dc.p), k, static_cast<uint32_t*>(dout.p)};
    const uint64_t blocks = (n + build_kernel::kAssignThreads - 1) / build_kernel::kAssignThreads;
    if (blocks > 0x7fffffffull) return Status::InvalidArgument("knn build on the GPU: too many points");
    AssignKernel<<<static_cast<unsigned>(blocks), build_kernel::kAssignThreads>>>(a);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(out, dout.p, n * sizeof(uint32_t), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return Status::IOError(BuildError("the k-means assignment", e));
    return Status::OK();
  }

  Status HilbertKeys(const float* pts, uint64_t n, uint32_t dim, uint32_t bits, uint32_t words, const double* lo,
                     const double* scale, uint64_t* keys) override {
    const float* dp = nullptr;
    WORT_RETURN_IF_ERROR(Points(pts, n * dim, &dp));
    constexpr uint32_t kThreads = 256;
    // Threads of the grid: enough to fill the device, their scratch (dim words each) <= 64 MiB.
    uint64_t threads = std::clamp<uint64_t>((uint64_t{16} << 20) / dim, kThreads, uint64_t{1} << 18);
    threads = std::min<uint64_t>(threads, (n + kThreads - 1) / kThreads * kThreads);
    const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
    threads = uint64_t{blocks} * kThreads;
    DevBuf dlo, dscale, dkeys, dscratch;
    cudaError_t e = dlo.Alloc(dim * sizeof(double));
    if (e == cudaSuccess) e = dscale.Alloc(dim * sizeof(double));
    if (e == cudaSuccess) e = dkeys.Alloc(n * words * sizeof(uint64_t));
    if (e == cudaSuccess) e = dscratch.Alloc(threads * dim * sizeof(uint32_t));
    if (e != cudaSuccess) return Status::IOError(BuildError("cudaMalloc", e));
    e = cudaMemcpy(dlo.p, lo, dim * sizeof(double), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dscale.p, scale, dim * sizeof(double), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return Status::IOError(BuildError("copying the quantization", e));
    build_kernel::HilbertArgs a{dp,
                                n,
                                dim,
                                bits,
                                words,
                                static_cast<const double*>(dlo.p),
                                static_cast<const double*>(dscale.p),
                                static_cast<uint64_t*>(dkeys.p),
                                static_cast<uint32_t*>(dscratch.p)};
    HilbertKernel<<<blocks, kThreads>>>(a);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(keys, dkeys.p, n * words * sizeof(uint64_t), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return Status::IOError(BuildError("the Hilbert keys", e));
    return Status::OK();
  }

 private:
  struct Cached {
    const float* host = nullptr;
    uint64_t floats = 0;
    DevBuf buf;
  };
  // The device copy of host[0..floats).
  Status Points(const float* host, uint64_t floats, const float** out) {
    for (Cached& c : cache_)
      if (c.host == host && c.floats == floats && c.buf.p) {
        *out = static_cast<const float*>(c.buf.p);
        return Status::OK();
      }
    Cached& c = cache_[next_];
    next_ = (next_ + 1) % 2;
    c.host = nullptr;
    cudaError_t e = c.buf.Alloc(floats * sizeof(float));
    if (e == cudaSuccess) e = cudaMemcpy(c.buf.p, host, floats * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return Status::IOError(BuildError("copying the points to the device", e));
    c.host = host;
    c.floats = floats;
    *out = static_cast<const float*>(c.buf.p);
    return Status::OK();
  }
  Cached cache_[2];
  int next_ = 0;
};

}  // namespace

Status OpenBuildDevice(std::unique_ptr<BuildDevice>* out) {
  std::string why;
  if (!Available(&why)) return Status::NotSupported("knn build on the GPU: " + why);
  *out = std::make_unique<GpuBuildDevice>();
  return Status::OK();
}

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
