// A small CPU emulation of the CUDA built-ins that src/knn/gpu_kernel.h uses, so that the kNN
// kernel's own code runs on machines without a GPU (tests/knn/knn_gpu_emu_test.cc): each CUDA
// thread of a block is a fiber (ucontext) of the calling thread, blocks run one after another;
// __syncthreads is a barrier of the block's fibers, and each warp operation (__syncwarp,
// __shfl_sync, __shfl_xor_sync, __ballot_sync) a barrier of the warp's 32 fibers around an
// exchange through a slot per lane. A fiber runs until it waits at a barrier, then the next one
// runs (round robin), so a barrier costs a few context switches, not OS-thread wake-ups.
// The rounded float operations are the plain C++ ones (the test is compiled with
// -ffp-contract=off, as the CPU engines are).
//
// What it checks: the kernel's logic - its walk, reductions, insertion of the k best, barriers
// placed so that every thread reaches them (a missed one deadlocks, which the emulation
// reports), counters - against the CPU engines. What it cannot: nvcc's code generation, races
// that a GPU's timing would expose (fibers switch only at barriers), shared memory limits.
// Include it before gpu_kernel.h, in one source file only.
#pragma once

#include <ucontext.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline

namespace cuda_emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  bool done = false;
};

struct Scheduler {
  ucontext_t main;
  std::vector<Fiber> fibers;
  unsigned cur = 0;
  Dim3 block_idx, block_dim, grid_dim;
  const std::function<void()>* fn = nullptr;
  // Barriers: arrivals and a generation number (a waiter leaves when the generation moves on).
  unsigned block_arrived = 0;
  uint64_t block_gen = 0;
  std::vector<unsigned> warp_arrived;
  std::vector<uint64_t> warp_gen;
  std::vector<uint64_t> slots;  // 32 per warp
  bool progress = false;        // some fiber started, got past a barrier or ended in this round
};
inline Scheduler* sched = nullptr;

// swapcontext behind a call that is not itself "returns twice" (no -Wclobbered in the callers).
[[gnu::noinline]] inline void Switch(ucontext_t* from, const ucontext_t* to) { swapcontext(from, to); }

inline void Yield() { Switch(&sched->fibers[sched->cur].ctx, &sched->main); }

inline void BlockBarrier() {
  Scheduler& s = *sched;
  const uint64_t g = s.block_gen;
  if (++s.block_arrived == s.block_dim.x) {
    s.block_arrived = 0;
    ++s.block_gen;
    s.progress = true;
    return;
  }
  while (s.block_gen == g) Yield();
  s.progress = true;
}

inline void WarpBarrier() {
  Scheduler& s = *sched;
  const unsigned w = s.cur / 32;
  const uint64_t g = s.warp_gen[w];
  if (++s.warp_arrived[w] == 32) {
    s.warp_arrived[w] = 0;
    ++s.warp_gen[w];
    s.progress = true;
    return;
  }
  while (s.warp_gen[w] == g) Yield();
  s.progress = true;
}

inline void Entry() {
  sched->progress = true;
  (*sched->fn)();
  sched->fibers[sched->cur].done = true;
  sched->progress = true;
}  // returns to uc_link: the scheduler

inline unsigned Lane() { return sched->cur & 31; }
inline uint64_t* Slots() { return &sched->slots[(sched->cur / 32) * 32]; }

// Puts this lane's value in its slot, waits for the warp, reads lane `src`'s, waits again.
template <typename T>
T Exchange(T v, unsigned src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  Slots()[Lane()] = bits;
  WarpBarrier();
  T r;
  bits = Slots()[src & 31];
  std::memcpy(&r, &bits, sizeof r);
  WarpBarrier();
  return r;
}

// A fiber that runs Entry on a stack of its own, then returns to `main`.
[[gnu::noinline]] inline void MakeFiber(Fiber* f, ucontext_t* main) {
  constexpr size_t kStack = 256 * 1024;
  f->stack.reset(new char[kStack]);
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack.get();
  f->ctx.uc_stack.ss_size = kStack;
  f->ctx.uc_link = main;
  makecontext(&f->ctx, &Entry, 0);
}

// Runs fn() as a grid of `blocks` blocks of `threads` threads (a multiple of 32), one block at a
// time. Static "shared" variables of fn are therefore shared by the block's threads, as on a GPU.
inline void Launch(unsigned blocks, unsigned threads, const std::function<void()>& fn) {
  Scheduler s;
  sched = &s;
  s.fn = &fn;
  s.block_dim = Dim3{threads, 1, 1};
  s.grid_dim = Dim3{blocks, 1, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    s.block_idx = Dim3{b, 0, 0};
    s.fibers = std::vector<Fiber>(threads);
    s.warp_arrived.assign(threads / 32, 0);
    s.warp_gen.assign(threads / 32, 0);
    s.slots.assign(threads, 0);
    s.block_arrived = 0;
    for (Fiber& f : s.fibers) MakeFiber(&f, &s.main);
    for (;;) {
      bool all_done = true;
      s.progress = false;
      for (unsigned t = 0; t < threads; ++t) {
        if (s.fibers[t].done) continue;
        all_done = false;
        s.cur = t;
        Switch(&s.main, &s.fibers[t].ctx);
      }
      if (all_done) break;
      if (!s.progress) {  // every fiber still waits where it waited: a barrier some thread skips
        std::fprintf(stderr, "cuda_emu: deadlock in block %u (a barrier not reached by every thread)\n", b);
        std::abort();
      }
    }
  }
  sched = nullptr;
}

inline Dim3 ThreadIdx() { return Dim3{sched->cur, 0, 0}; }

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::ThreadIdx())
#define blockIdx (::cuda_emu::sched->block_idx)
#define blockDim (::cuda_emu::sched->block_dim)
#define gridDim (::cuda_emu::sched->grid_dim)

inline void __syncthreads() { cuda_emu::BlockBarrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { cuda_emu::WarpBarrier(); }
template <typename T>
T __shfl_sync(unsigned, T v, int src) {
  return cuda_emu::Exchange(v, static_cast<unsigned>(src));
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return cuda_emu::Exchange(v, cuda_emu::Lane() ^ static_cast<unsigned>(mask));
}
inline unsigned __ballot_sync(unsigned, bool pred) {
  uint64_t* slot = cuda_emu::Slots();
  slot[cuda_emu::Lane()] = pred ? 1 : 0;
  cuda_emu::WarpBarrier();
  unsigned m = 0;
  for (unsigned i = 0; i < 32; ++i) m |= static_cast<unsigned>(slot[i]) << i;
  cuda_emu::WarpBarrier();
  return m;
}
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
