// Fused CUDA kernels for Hedgehog linear attention (issue 27), Torch-free and Qt-free.
//
// Computes, per (batch b, head h), with phi(x) = [exp(u), exp(-u)], u = clamp(x W_h^T + b_h, +-30)
// (F = 2D features, the same map for queries and keys):
//   forward   y_i = sum_{j<=i} (phi(q_i).phi(k_j)) v_j / (sum_{j<=i} phi(q_i).phi(k_j) + eps)
//   backward  gq, gk, gv, gW, gb of that, recomputing features and chunk states (memory linear in T)
//   step      S += phi(k) v^T, z += phi(k); y = phi(q)^T S / (phi(q).z + eps)   (one decode token)
// The feature map is fused: phi never reaches global memory. Written for sm_80 and sm_90 (no
// wgmma). First run on an H100 on 2026-11-26: correct, and slower than the generic LibTorch path
// unless B * H fills the GPU (docs/gpu.md, "Fused CUDA kernels").
//
// Conventions for every pointer below:
//   - "rows" tensors are [B, H, T, D] (or [B, H, D] for the step) in the given dtype with any
//     element strides for B, H and T, but the last dimension contiguous (stride 1);
//   - weight [H, D, D] (out x in) and bias [H, D] are float32 contiguous (callers convert);
//   - everything lives on the current device; calls are asynchronous on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace hh::cuda {

enum class DType { F32, BF16 };

// cuda != cudaSuccess: a CUDA call failed; message != nullptr: the arguments were refused.
struct Status {
  cudaError_t cuda = cudaSuccess;
  const char* message = nullptr;  // static string
  bool ok() const { return cuda == cudaSuccess && message == nullptr; }
};

// A [B, H, T, D] (or [B, H, D]) view; element (b, h, t, d) at data[b*sb + h*sh + t*st + d].
struct Rows {
  void* data = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
};

struct Problem {
  int batch = 0, heads = 0;
  int64_t length = 0;          // T >= 1
  int headDim = 0;             // D: 32, 64 or 128
  DType dtype = DType::F32;    // q, k, v, y, gy, gq, gk, gv
  float eps = 1e-6f;
  cudaStream_t stream = nullptr;
};

// The kernels' tile height (rows per chunk): 64 for bf16, 32 for fp32 (whatever chunk size the
// engine asks for: the result is the same up to rounding).
int hedgehogCudaChunk(DType dtype);

// Thread blocks the chunked forward runs per (batch, head) and segment: D / N value columns each
// (N = 64 in bf16, 32 in fp32).
int hedgehogCudaBlocksPerHead(DType dtype, int headDim);

// The forward splits each head's sequence into `segments` runs of whole chunks, each walked in
// time order by its own thread blocks (a first pass sums each segment's state, a prefix over the
// segments gives each its starting state): B * H * blocks-per-head * segments blocks in all.
// hedgehogCudaSegments picks enough for two blocks per multiprocessor of `device`, with at least
// four chunks per segment (1: no split); hedgehogCudaForwardWorkspace is what the split needs
// (B * H * segments * (2D * D + 2D) fp32; 0 for one segment).
// With `chunked` (ForwardArgs::chunked) the split serves the chunk-parallel forward's state pass,
// whose B * H * D / 32 blocks set the count, and the workspace holds that forward's records too:
// B * H * chunks * (2D * D elements + 2D floats), plus a bf16 copy of W for bf16 inputs.
int hedgehogCudaSegments(const Problem& p, int device, bool chunked = false);
size_t hedgehogCudaForwardWorkspace(const Problem& p, int segments, bool chunked = false);

// True for D in {32, 64, 128}, fp32 or bf16, T >= 1, 1 <= B*H, and a device of compute capability
// 8.0 or newer with enough shared memory per block for these kernels.
bool hedgehogCudaSupports(DType dtype, int headDim, int device);

struct ForwardArgs {
  Problem p;
  Rows q, k, v;          // [B, H, T, D] dtype
  const float* weight;   // [H, D, D] fp32
  const float* bias;     // [H, D] fp32
  Rows y;                // [B, H, T, D] dtype, written
  float* den = nullptr;  // optional [B, H, T] fp32 contiguous: sum_{j<=i} phi(q_i).phi(k_j) + eps
  int segments = 1;      // 1 .. number of chunks (hedgehogCudaSegments)
  void* workspace = nullptr;  // hedgehogCudaForwardWorkspace(p, segments) bytes, 256-byte aligned
  // The pipelined kernel (hh_forward_pipelined.cu: the head's map kept in shared memory, the next
  // chunk fetched while this one is computed, four barriers a chunk) instead of the sequential one;
  // the same result up to rounding and the same workspace. Where its shared memory does not fit
  // the device (bf16 D = 128 before sm_90) the sequential kernel runs. Not yet run on a GPU.
  bool pipelined = false;
  // The chunk-parallel forward (hh_forward_chunked.cu; takes precedence over `pipelined`): a pass
  // that walks each head's chunks carrying only the state, writing it out before every chunk, then
  // every chunk's output at once. Needs its workspace (hedgehogCudaForwardWorkspace(p, segments,
  // true)) whatever `segments` is. The same result up to rounding. Not yet run on a GPU.
  bool chunked = false;
};
Status hedgehogCudaForward(const ForwardArgs& a);

struct BackwardArgs {
  Problem p;
  Rows q, k, v;            // [B, H, T, D] dtype, the forward's inputs
  const float* weight;     // [H, D, D] fp32
  const float* bias;       // [H, D] fp32
  Rows y, gy;              // [B, H, T, D] dtype: the forward's output and its gradient
  const float* den;        // [B, H, T] fp32 contiguous, written by the forward
  Rows gq, gk, gv;         // [B, H, T, D] dtype, written
  float* gweight;          // [H, D, D] fp32 contiguous, written (sum over batch and time)
  float* gbias;            // [H, D] fp32 contiguous, written
  void* workspace;         // hedgehogCudaBackwardWorkspace(p, segments) bytes, 256-byte aligned
  int segments = 1;        // as the forward's (hedgehogCudaSegments): the scans split the same way
  // The pipelined scans (hh_backward_pipelined.cu: the map's rows kept in shared memory, the next
  // chunk's rows fetched while this one is computed; where their shared memory fits the device),
  // and for bf16 gq, gk and gW on tensor cores (hh_backward_params_mma.cu: gu rounded to bf16,
  // fp32 sums; gb stays fp32) instead of fp32 FMA. The same result up to rounding. Not yet run on
  // a GPU.
  bool pipelined = false;
  // The chunk-parallel scans (hh_backward_chunked.cu; with `pipelined`'s weight gradient): two
  // passes walk each head's chunks carrying only the states that cross chunk boundaries (forward
  // and reverse) and write them before every chunk; one pass then does every chunk at once. Where
  // their shared memory does not fit the device, the pipelined scans run. Needs the workspace of
  // hedgehogCudaBackwardWorkspace(p, segments, true) and segments as hedgehogCudaSegments(p,
  // device, true) gives them. The same result up to rounding. Not yet run on a GPU.
  bool chunked = false;
};
// The backward's scratch: gu of q and k (2 B*H*T*D fp32), the weight gradient's partial sums and,
// with segments, the three scans' segment states (B*H*segments*(2D*D + 2(D+16)*2D) fp32); with
// `chunked` also the chunked scans' records, 2 B*H*chunks*2D*(D+16) elements, their segment
// states (as many floats per segment) and a bf16 copy of W.
size_t hedgehogCudaBackwardWorkspace(const Problem& p, int segments = 1, bool chunked = false);
Status hedgehogCudaBackward(const BackwardArgs& a);

struct StepArgs {
  Problem p;             // length ignored (one token); batch 1..any
  Rows q, k, v;          // [B, H, D] dtype (Rows::st unused)
  const float* weight;   // [H, D, D] fp32
  const float* bias;     // [H, D] fp32
  float* S;              // [B, H, 2D, D] fp32 contiguous, updated in place
  float* z;              // [B, H, 2D] fp32 contiguous, updated in place
  Rows y;                // [B, H, D] dtype, written
};
Status hedgehogCudaStep(const StepArgs& a);

}  // namespace hh::cuda
