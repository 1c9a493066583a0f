"""The CUDA C of lesson 09's GPU ladder: one small kernel per rung, in teaching order.

Every kernel computes ``C (M×N) = A (M×K) · B (K×N)``, all row-major.  The tile sizes are not typed in
here: each kernel's ``constexpr`` line is filled from :data:`course.gemm.ladder.GPU_RUNG_SPECS`
(``$BM``, ``$BN``, ...), the same numbers the stand-in twins, the per-thread emulation
(:mod:`course.gemm.emulate`) and the counts (:mod:`course.gemm.counts`) read.  Apart from ``naive`` and
``coalesced`` (which check their bounds) a kernel needs ``M``, ``N``, ``K`` to be multiples of its tile;
:func:`course.gemm.ladder.gpu_matmul` pads into zero-filled buffers when they are not.

The CUDA C of a rung reads side by side with its emulation, in the same order: index formulas first,
then the loads of a k-tile, the barrier, the inner products, the barrier, the stores.
"""

from __future__ import annotations

__all__ = ["COMMON", "RUNG_SOURCES", "TO_BF16_SOURCE"]

#: Helpers every rung may use: cp.async (sm_80+, a plain 16-byte copy before), ldmatrix, mma.sync, TF32.
COMMON = r"""
#define DEVICE __device__ __forceinline__
typedef unsigned short bf16;                        // bfloat16, as its 16 bits

// 16 bytes global -> shared.  sm_80+: cp.async, which does not wait (copy_wait does); before: a plain copy.
DEVICE void copy16(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem) : "memory");
#else
    *reinterpret_cast<float4*>(smem) = *reinterpret_cast<const float4*>(gmem);
#endif
}
DEVICE void copy_commit() {                         // close this thread's group of copies
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int PENDING> DEVICE void copy_wait() {    // wait until at most PENDING groups are in flight
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#endif
}
#if __CUDA_ARCH__ >= 800
DEVICE unsigned tf32(float x) {                     // round to TF32 (10 mantissa bits), nearest, ties away
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
DEVICE void mma_tf32(float d[4], const unsigned a[4], const unsigned b[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
DEVICE void mma_bf16(float d[4], const unsigned a[4], const unsigned b[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
DEVICE void ldmatrix_x4(unsigned r[4], const void* smem, bool trans) {  // four 8x8 b16 matrices
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}
#endif
"""

#: float32 -> bfloat16 bits, round to nearest even (NaN stays NaN): the bf16 rung's inputs.
TO_BF16_SOURCE = r"""
extern "C" __global__ void gemm_to_bf16(const float* __restrict__ x, bf16* __restrict__ y, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const unsigned u = __float_as_uint(x[i]);
        y[i] = (u & 0x7fffffffu) > 0x7f800000u ? (bf16)0x7fc0 : (bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}
"""

NAIVE = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    // one thread per output; threadIdx.x walks the ROWS, so the 32 threads of a warp read 32 rows of A
    // (K floats apart) and write 32 rows of C: a memory transaction for every thread
    const int row = blockIdx.x * $BM + threadIdx.x;
    const int col = blockIdx.y * $BN + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int i = 0; i < K; ++i) acc += A[row * K + i] * B[i * N + col];
        C[row * N + col] = acc;
    }
}
"""

COALESCED = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_coalesced(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
               int M, int N, int K) {
    // threadIdx.x walks the COLUMNS: a warp reads one float of A (a broadcast) and 32 neighbouring floats
    // of B, and writes 32 neighbouring floats of C: one 128-byte transaction each
    const int col = blockIdx.x * $BN + threadIdx.x;
    const int row = blockIdx.y * $BM + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int i = 0; i < K; ++i) acc += A[row * K + i] * B[i * N + col];
        C[row * N + col] = acc;
    }
}
"""

SHARED = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_shared(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK;
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BM + ty, col = blockIdx.x * BN + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[ty][tx] = A[row * K + k0 + tx];          // each thread loads one float of each tile
        Bs[ty][tx] = B[(k0 + ty) * N + col];
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) acc += As[ty][kk] * Bs[kk][tx];   // BK FMAs from shared memory
        __syncthreads();
    }
    C[row * N + col] = acc;
}
"""

BLOCKTILE_1D = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_blocktile_1d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                  int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, TM = $TM;
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int t = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tr = t / BN, tc = t % BN;             // this thread: rows tr*TM .. tr*TM+TM-1 of column tc
    const int ar = t / BK, ac = t % BK;             // the float of A it loads
    const int br = t / BN, bc = t % BN;             // the float of B it loads
    float acc[TM] = {0.f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[ar * BK + ac] = A[(row0 + ar) * K + k0 + ac];
        Bs[br * BN + bc] = B[(k0 + br) * N + col0 + bc];
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float b = Bs[kk * BN + tc];       // one B value kept in a register for TM FMAs
            #pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[(tr * TM + i) * BK + kk] * b;
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) C[(row0 + tr * TM + i) * N + col0 + tc] = acc[i];
}
"""

BLOCKTILE_2D = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_blocktile_2d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                  int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, TM = $TM, TN = $TN, THREADS = $THREADS;
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int t = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tr = t / (BN / TN), tc = t % (BN / TN);   // this thread: a TM x TN patch
    const int ar = t / BK, ac = t % BK;                 // A: rows ar, ar + THREADS/BK, ...
    const int br = t / BN, bc = t % BN;                 // B: rows br, br + THREADS/BN, ...
    float acc[TM][TN] = {{0.f}};
    float rm[TM], rn[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        #pragma unroll
        for (int r = 0; r < BM; r += THREADS / BK) As[(ar + r) * BK + ac] = A[(row0 + ar + r) * K + k0 + ac];
        #pragma unroll
        for (int r = 0; r < BK; r += THREADS / BN) Bs[(br + r) * BN + bc] = B[(k0 + br + r) * N + col0 + bc];
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            #pragma unroll
            for (int i = 0; i < TM; ++i) rm[i] = As[(tr * TM + i) * BK + kk];
            #pragma unroll
            for (int j = 0; j < TN; ++j) rn[j] = Bs[kk * BN + tc * TN + j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];   // TM*TN FMAs per TM+TN loads
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) C[(row0 + tr * TM + i) * N + col0 + tc * TN + j] = acc[i][j];
}
"""

VECTORIZED = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_vectorized(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, TM = $TM, TN = $TN;
    __shared__ __align__(16) float As[BK * BM];         // TRANSPOSED: As[k * BM + m], so a thread's TM values
    __shared__ __align__(16) float Bs[BK * BN];         // of one k are neighbours (float4 loads)
    const int t = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tr = t / (BN / TN), tc = t % (BN / TN);
    const int ar = t / (BK / 4), ac = t % (BK / 4);     // one float4 of A: row ar, columns 4ac .. 4ac+3
    const int br = t / (BN / 4), bc = t % (BN / 4);     // one float4 of B: row br, columns 4bc .. 4bc+3
    float acc[TM][TN] = {{0.f}};
    float rm[TM], rn[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 a = *reinterpret_cast<const float4*>(&A[(row0 + ar) * K + k0 + 4 * ac]);
        As[(4 * ac + 0) * BM + ar] = a.x;
        As[(4 * ac + 1) * BM + ar] = a.y;
        As[(4 * ac + 2) * BM + ar] = a.z;
        As[(4 * ac + 3) * BM + ar] = a.w;
        *reinterpret_cast<float4*>(&Bs[br * BN + 4 * bc]) =
            *reinterpret_cast<const float4*>(&B[(k0 + br) * N + col0 + 4 * bc]);
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            #pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[kk * BM + tr * TM + i]);
                rm[i] = v.x; rm[i + 1] = v.y; rm[i + 2] = v.z; rm[i + 3] = v.w;
            }
            #pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[kk * BN + tc * TN + j]);
                rn[j] = v.x; rn[j + 1] = v.y; rn[j + 2] = v.z; rn[j + 3] = v.w;
            }
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; j += 4)
            *reinterpret_cast<float4*>(&C[(row0 + tr * TM + i) * N + col0 + tc * TN + j]) =
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}
"""

WARPTILE = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_warptile(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, TM = $TM, TN = $TN, WM = $WM, WN = $WN, THREADS = $THREADS;
    constexpr int PAD = $PAD_A, ROW_STEP = WM / TM, COL_STEP = WN / (TN / 4);
    __shared__ __align__(16) float As[2][BM][BK + PAD];  // two stages; +PAD: rows ROW_STEP apart, other banks
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;   // this warp's tile
    const int lr = lane / (COL_STEP / 4), lc = lane % (COL_STEP / 4);
    // this thread: rows wm + lr + ROW_STEP*i (i < TM), columns wn + COL_STEP*j + 4*lc + q (j < TN/4, q < 4)
    auto load_tiles = [&](int s, int k0) {              // 16-byte pieces, neighbouring threads on neighbours
        for (int c = t; c < BM * BK / 4; c += THREADS) {
            const int r = c / (BK / 4), q = c % (BK / 4);
            copy16(&As[s][r][4 * q], &A[(row0 + r) * K + k0 + 4 * q]);
        }
        for (int c = t; c < BK * BN / 4; c += THREADS) {
            const int r = c / (BN / 4), q = c % (BN / 4);
            copy16(&Bs[s][r][4 * q], &B[(k0 + r) * N + col0 + 4 * q]);
        }
        copy_commit();
    };
    float acc[TM][TN] = {{0.f}};
    float rm[TM], rn[TN];
    const int tiles = K / BK;
    load_tiles(0, 0);
    for (int tile = 0; tile < tiles; ++tile) {
        const int s = tile & 1;
        if (tile + 1 < tiles) { load_tiles(s ^ 1, (tile + 1) * BK); copy_wait<1>(); }   // next tile in flight
        else copy_wait<0>();
        __syncthreads();                                 // stage s is whole, for every thread
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            #pragma unroll
            for (int i = 0; i < TM; ++i) rm[i] = As[s][wm + lr + ROW_STEP * i][kk];
            #pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[s][kk][wn + COL_STEP * j + 4 * lc]);
                rn[4 * j] = v.x; rn[4 * j + 1] = v.y; rn[4 * j + 2] = v.z; rn[4 * j + 3] = v.w;
            }
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
        }
        __syncthreads();                                 // everyone is done with stage s before it is refilled
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN / 4; ++j)
            *reinterpret_cast<float4*>(&C[(row0 + wm + lr + ROW_STEP * i) * N + col0 + wn + COL_STEP * j + 4 * lc]) =
                make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
}
"""

MMA_TF32 = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_mma_tf32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, WM = $WM, WN = $WN, THREADS = $THREADS;
    constexpr int PAD_A = $PAD_A, PAD_B = $PAD_B, MI = WM / 16, NI = WN / 8;   // m16n8k8 tiles per warp
#if __CUDA_ARCH__ >= 800
    __shared__ __align__(16) float As[2][BM][BK + PAD_A];   // padded: a fragment's 32 loads, 32 banks
    __shared__ __align__(16) float Bs[2][BK][BN + PAD_B];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;                  // the PTX ISA's groupID, threadID_in_group
    auto load_tiles = [&](int s, int k0) {
        for (int c = t; c < BM * BK / 4; c += THREADS) {
            const int r = c / (BK / 4), p = c % (BK / 4);
            copy16(&As[s][r][4 * p], &A[(row0 + r) * K + k0 + 4 * p]);
        }
        for (int c = t; c < BK * BN / 4; c += THREADS) {
            const int r = c / (BN / 4), p = c % (BN / 4);
            copy16(&Bs[s][r][4 * p], &B[(k0 + r) * N + col0 + 4 * p]);
        }
        copy_commit();
    };
    float acc[MI][NI][4] = {{{0.f}}};
    const int tiles = K / BK;
    load_tiles(0, 0);
    for (int tile = 0; tile < tiles; ++tile) {
        const int s = tile & 1;
        if (tile + 1 < tiles) { load_tiles(s ^ 1, (tile + 1) * BK); copy_wait<1>(); }
        else copy_wait<0>();
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned a[MI][4], b[NI][2];
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {               // A fragment: (g, q) (g+8, q) (g, q+4) (g+8, q+4)
                const int r = wm + 16 * mi + g;
                a[mi][0] = tf32(As[s][r][kk + q]);
                a[mi][1] = tf32(As[s][r + 8][kk + q]);
                a[mi][2] = tf32(As[s][r][kk + q + 4]);
                a[mi][3] = tf32(As[s][r + 8][kk + q + 4]);
            }
            #pragma unroll
            for (int ni = 0; ni < NI; ++ni) {               // B fragment: (k = q, n = g) (k = q+4, n = g)
                const int c = wn + 8 * ni + g;
                b[ni][0] = tf32(Bs[s][kk + q][c]);
                b[ni][1] = tf32(Bs[s][kk + q + 4][c]);
            }
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi)
                #pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_tf32(acc[mi][ni], a[mi], b[ni]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi)
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {                   // C fragment: (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1)
            const int r = row0 + wm + 16 * mi + g, c = col0 + wn + 8 * ni + 2 * q;
            *reinterpret_cast<float2*>(&C[r * N + c]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(&C[(r + 8) * N + c]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
        }
#else
    for (int i = threadIdx.x; i < BM * BN; i += THREADS)    // no tensor-core TF32 before sm_80: NaN, never a guess
        C[(blockIdx.y * BM + i / BN) * N + blockIdx.x * BN + i % BN] = __int_as_float(0x7fc00000);
#endif
}
"""

MMA_BF16 = r"""
extern "C" __global__ void __launch_bounds__($THREADS)
gemm_mma_bf16(const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = $BM, BN = $BN, BK = $BK, WM = $WM, WN = $WN, THREADS = $THREADS;
    constexpr int PAD_A = $PAD_A, PAD_B = $PAD_B, MI = WM / 16, NI = WN / 8;   // m16n8k16 tiles per warp
#if __CUDA_ARCH__ >= 800
    __shared__ __align__(16) bf16 As[2][BM][BK + PAD_A];    // padded: the 8 rows of an ldmatrix, 32 banks
    __shared__ __align__(16) bf16 Bs[2][BK][BN + PAD_B];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    auto load_tiles = [&](int s, int k0) {                   // 16 bytes = 8 bf16 per copy
        for (int c = t; c < BM * BK / 8; c += THREADS) {
            const int r = c / (BK / 8), p = c % (BK / 8);
            copy16(&As[s][r][8 * p], &A[(row0 + r) * K + k0 + 8 * p]);
        }
        for (int c = t; c < BK * BN / 8; c += THREADS) {
            const int r = c / (BN / 8), p = c % (BN / 8);
            copy16(&Bs[s][r][8 * p], &B[(k0 + r) * N + col0 + 8 * p]);
        }
        copy_commit();
    };
    float acc[MI][NI][4] = {{{0.f}}};
    const int tiles = K / BK;
    load_tiles(0, 0);
    for (int tile = 0; tile < tiles; ++tile) {
        const int s = tile & 1;
        if (tile + 1 < tiles) { load_tiles(s ^ 1, (tile + 1) * BK); copy_wait<1>(); }
        else copy_wait<0>();
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi)                  // lane l points at row l%16, column 8*(l/16)
                ldmatrix_x4(a[mi], &As[s][wm + 16 * mi + lane % 16][kk + 8 * (lane / 16)], false);
            #pragma unroll
            for (int ni = 0; ni < NI; ni += 2) {             // transposed: two n8 tiles' (k, n) fragments
                unsigned r[4];
                ldmatrix_x4(r, &Bs[s][kk + lane % 16][wn + 8 * ni + 8 * (lane / 16)], true);
                b[ni][0] = r[0]; b[ni][1] = r[1]; b[ni + 1][0] = r[2]; b[ni + 1][1] = r[3];
            }
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi)
                #pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_bf16(acc[mi][ni], a[mi], b[ni]);
        }
        __syncthreads();
    }
    const int g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi)
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int r = row0 + wm + 16 * mi + g, c = col0 + wn + 8 * ni + 2 * q;
            *reinterpret_cast<float2*>(&C[r * N + c]) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<float2*>(&C[(r + 8) * N + c]) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
        }
#else
    for (int i = threadIdx.x; i < BM * BN; i += THREADS)    // no bf16 mma.sync before sm_80: NaN
        C[(blockIdx.y * BM + i / BN) * N + blockIdx.x * BN + i % BN] = __int_as_float(0x7fc00000);
#endif
}
"""

#: rung -> its kernel's CUDA C template (``$NAME`` filled from the rung's spec).
RUNG_SOURCES = {"naive": NAIVE, "coalesced": COALESCED, "shared": SHARED, "blocktile_1d": BLOCKTILE_1D,
                "blocktile_2d": BLOCKTILE_2D, "vectorized": VECTORIZED, "warptile": WARPTILE, "mma_tf32": MMA_TF32,
                "mma_bf16": MMA_BF16}
