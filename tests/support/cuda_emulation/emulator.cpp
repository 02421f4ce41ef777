// The fiber scheduler behind cuda_emulation/cuda_runtime.h: one fiber per CUDA thread; warps
// run one at a time as far as they can (their own barriers opened as they go), then the block
// barrier opens, and so on until every thread has returned.
#include <cuda_runtime.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HH_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HH_EMU_ASAN 1
#endif
#if HH_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace hh_emu {
namespace {

// A fiber's saved execution context. On x86-64 a switch saves the callee-saved registers, the
// SSE and x87 control words and the stack pointer (a few nanoseconds); elsewhere ucontext, whose
// swapcontext also makes a system call for the signal mask at every switch.
#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};
extern "C" void hh_emu_switch(void** saveSp, void* loadSp);
asm(R"(
  .text
  .globl hh_emu_switch
  .type hh_emu_switch, @function
hh_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size hh_emu_switch, .-hh_emu_switch
  .section .note.GNU-stack, "", @progbits
  .text
)");
void switchContext(Context& from, const Context& to) { hh_emu_switch(&from.sp, to.sp); }
// A fresh stack whose first switch "returns" into entry (which must never return) with the stack
// aligned as after a call.
void startContext(Context& c, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top) - 9;  // [control words][r15..rbp][entry][pad]
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  frame[0] = uint64_t(mxcsr) | (uint64_t(fpucw) << 32);
  for (int r = 1; r <= 6; ++r) frame[r] = 0;
  frame[7] = reinterpret_cast<uint64_t>(entry);  // rsp after the ret: top - 8, 8 mod 16 as after a call
  frame[8] = 0;
  c.sp = frame;
}
#else
struct Context {
  ucontext_t uc;
};
void switchContext(Context& from, const Context& to) { swapcontext(&from.uc, &to.uc); }
void startContext(Context& c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

// An asynchronous copy (4, 8 or 16 bytes) issued and not yet waited for: the source bytes as they
// were at issue (sources are inputs no kernel writes), landed at asyncWait.
struct PendingCopy {
  void* dst;
  int size;
  unsigned char bytes[16];
};

struct Fiber {
  Context context;
  char* stack = nullptr;  // its lowest address (kStackBytes)
  uint3 index;
  int warp = 0, lane = 0;
  State state = State::Runnable;
  std::vector<PendingCopy> pending;
};

struct Block {
  dim3 grid, dims;
  uint3 index{};
  std::vector<Fiber> fibers;
  std::vector<uint64_t> exchange;  // one slot per thread, for the shuffles
  unsigned char* shared = nullptr;
  const std::function<void()>* body = nullptr;
  Context scheduler;
};

constexpr size_t kStackBytes = size_t(256) << 10;  // per fiber: the kernels' fragments are whole tiles here

Block* gBlock = nullptr;
Fiber* gFiber = nullptr;

// Stacks and shared memory kept between blocks and launches (a block has at most 1024 threads).
std::vector<std::unique_ptr<char[]>>& stacks() {
  static std::vector<std::unique_ptr<char[]>> s;
  return s;
}
std::vector<unsigned char>& sharedArena() {
  static std::vector<unsigned char> s;
  return s;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cuda emulation: %s (block %u,%u,%u)\n", what, gBlock ? gBlock->index.x : 0u,
               gBlock ? gBlock->index.y : 0u, gBlock ? gBlock->index.z : 0u);
  std::abort();
}

// AddressSanitizer follows the stack switches when told (sanitizer/common_interface_defs.h): the
// side that switches names the stack it goes to, the side that arrives confirms. Without it ASan
// takes a fiber's stack for a wild region of the thread's own. The scheduler's stack bounds are
// what a fiber's first arrival reports.
#if HH_EMU_ASAN
const void* gSchedulerStack = nullptr;
size_t gSchedulerStackBytes = 0;
void leaving(const void* stack, size_t bytes) { __sanitizer_start_switch_fiber(nullptr, stack, bytes); }
// A finished fiber never returned through its frames, so their redzones are still poisoned: a stack
// is cleared before the next fiber starts on it.
void freshStack(char* stack, size_t bytes) { __asan_unpoison_memory_region(stack, bytes); }
void arrivedInFiber() { __sanitizer_finish_switch_fiber(nullptr, &gSchedulerStack, &gSchedulerStackBytes); }
void arrivedInScheduler() { __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr); }
#else
void leaving(const void*, size_t) {}
void freshStack(char*, size_t) {}
void arrivedInFiber() {}
void arrivedInScheduler() {}
#endif

// Scheduler -> fiber f, until it yields.
void enter(Fiber& f) {
  leaving(f.stack, kStackBytes);
  switchContext(gBlock->scheduler, f.context);
  arrivedInScheduler();
}

// Fiber -> scheduler (the fiber resumes here unless it is done).
void backToScheduler() {
#if HH_EMU_ASAN
  leaving(gSchedulerStack, gSchedulerStackBytes);
#endif
  switchContext(gFiber->context, gBlock->scheduler);
  arrivedInFiber();
}

void yieldAt(State state) {
  gFiber->state = state;
  backToScheduler();
}

void fiberMain() {
  arrivedInFiber();
  (*gBlock->body)();
  if (!gFiber->pending.empty()) fail("a thread returned with asynchronous copies it never waited for");
  gFiber->state = State::Done;
  backToScheduler();  // never resumed
  std::abort();
}

bool allAt(std::vector<Fiber>::iterator first, std::vector<Fiber>::iterator last, State state) {
  int live = 0, waiting = 0;
  for (auto f = first; f != last; ++f) {
    live += f->state != State::Done;
    waiting += f->state == state;
  }
  return live > 0 && waiting == live;
}

void release(std::vector<Fiber>::iterator first, std::vector<Fiber>::iterator last, State state) {
  for (auto f = first; f != last; ++f)
    if (f->state == state) f->state = State::Runnable;
}

// Runs warp w as far as it can go: its lanes in turn until each waits, its own barrier opened as
// soon as every live lane reached it, until every lane waits at the block barrier or is done.
void runWarp(Block& b, int w) {
  const auto first = b.fibers.begin() + w * 32;
  const auto last = b.fibers.begin() + std::min<size_t>(b.fibers.size(), size_t(w) * 32 + 32);
  for (;;) {
    bool ran = false;
    for (auto f = first; f != last; ++f) {
      if (f->state != State::Runnable) continue;
      gFiber = &*f;
      enter(*f);
      ran = true;
    }
    if (allAt(first, last, State::AtWarpBarrier)) {
      release(first, last, State::AtWarpBarrier);
      continue;
    }
    if (!ran) return;
  }
}

WarpOrder gOrder = WarpOrder::FirstToLast;

// Warps one at a time, each as far as it can go, then the block barrier; until all have returned.
void runBlock(Block& b) {
  const size_t threads = size_t(b.dims.x) * b.dims.y * b.dims.z;
  if (threads == 0 || threads > 1024) fail("a block has 1 to 1024 threads");
  while (stacks().size() < threads) stacks().push_back(std::make_unique<char[]>(kStackBytes));
  b.fibers.assign(threads, Fiber{});
  b.exchange.assign(threads, 0);
  for (size_t t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    f.index = {unsigned(t % b.dims.x), unsigned(t / b.dims.x % b.dims.y), unsigned(t / (size_t(b.dims.x) * b.dims.y))};
    f.warp = int(t / 32);
    f.lane = int(t % 32);
    f.stack = stacks()[t].get();
    freshStack(f.stack, kStackBytes);
    startContext(f.context, f.stack, kStackBytes, fiberMain);
  }
  const int warps = int((threads + 31) / 32);
  for (;;) {
    for (int i = 0; i < warps; ++i) runWarp(b, gOrder == WarpOrder::FirstToLast ? i : warps - 1 - i);
    gFiber = nullptr;
    if (std::all_of(b.fibers.begin(), b.fibers.end(), [](const Fiber& f) { return f.state == State::Done; })) return;
    if (!allAt(b.fibers.begin(), b.fibers.end(), State::AtBlockBarrier))
      fail("deadlock: threads wait at barriers that can never open (a warp split between __syncwarp and __syncthreads?)");
    release(b.fibers.begin(), b.fibers.end(), State::AtBlockBarrier);
  }
}

}  // namespace

void setWarpOrder(WarpOrder order) { gOrder = order; }

const uint3& threadIndex() { return gFiber->index; }
const uint3& blockIndex() { return gBlock->index; }
const dim3& blockDimension() { return gBlock->dims; }
const dim3& gridDimension() { return gBlock->grid; }

void syncThreads() { yieldAt(State::AtBlockBarrier); }
void syncWarp() { yieldAt(State::AtWarpBarrier); }

uint64_t shuffleXor(uint64_t x, int mask) {
  const size_t self = size_t(gFiber->warp) * 32 + gFiber->lane;
  const size_t other = size_t(gFiber->warp) * 32 + (gFiber->lane ^ mask);
  if (mask < 0 || mask > 31 || other >= gBlock->fibers.size()) fail("shuffle to a lane outside the warp");
  gBlock->exchange[self] = x;
  syncWarp();  // every lane has put its value
  const uint64_t r = gBlock->exchange[other];
  syncWarp();  // every lane has read before the next shuffle overwrites
  return r;
}

unsigned char* dynamicShared() { return gBlock->shared; }

void copyAsync(void* dst, const void* src, int size) {
  if (size != 4 && size != 8 && size != 16) fail("cp.async copies 4, 8 or 16 bytes");
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % size) fail("cp.async on a misaligned address");
  PendingCopy c;
  c.dst = dst;
  c.size = size;
  std::memcpy(c.bytes, src, size);
  std::memset(dst, 0xff, size);  // NaN until it lands: a read before asyncWait (or before the barrier after it) fails
  gFiber->pending.push_back(c);
}

void asyncWait() {
  for (const PendingCopy& c : gFiber->pending) std::memcpy(c.dst, c.bytes, c.size);
  gFiber->pending.clear();
}

void runGrid(dim3 grid, dim3 block, size_t sharedBytes, const std::function<void()>& body) {
  if (gBlock) fail("a kernel launched from inside a kernel");
  // A guard zone of NaN bytes after the block's shared memory: a read past its end reads NaN, and a
  // write there is found when the block ends (on a GPU both fault).
  constexpr size_t kGuardBytes = 4096;
  auto& arena = sharedArena();
  arena.resize(sharedBytes + 128 + kGuardBytes);
  unsigned char* aligned = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(arena.data()) + 127) & ~uintptr_t(127));
  unsigned char* guard = aligned + sharedBytes;
  Block b;
  b.grid = grid;
  b.dims = block;
  b.body = &body;
  b.shared = aligned;
  gBlock = &b;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.index = {x, y, z};
        std::memset(aligned, 0xff, sharedBytes + kGuardBytes);  // NaN everywhere a thread reads before anyone wrote
        runBlock(b);
        if (std::any_of(guard, guard + kGuardBytes, [](unsigned char c) { return c != 0xff; }))
          fail("a thread wrote past the end of the block's dynamic shared memory");
      }
  gBlock = nullptr;
}

}  // namespace hh_emu
