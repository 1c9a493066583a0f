"""The course's own answer to each kernel exercise: what :func:`course.kernels.show` draws by default,
and what the ``gpu`` tests run with ``numba.cuda.jit``.

Each is a plain Python function using the CUDA API through the global ``cuda``, so the simulator
can swap it (:mod:`course.kernels.simulator`) and ``numba.cuda.jit`` can compile it.  The block
sizes are module constants because shared arrays need a size fixed at compile time.
"""

from __future__ import annotations

import math

from numba import cuda, float32

#: Threads per block of the block reduction and the two block scans; tile side of the matrix product.
TPB = 8
TILE = 2
#: Lesson 08's attention tile: query rows per block = keys per shared tile = threads per block, and the head size.
ATT_TILE = 8
ATT_D = 4
#: Lesson 09's register-blocked product: each thread computes a TM x TN tile of c, a block a BM x BN tile
#: (BM = TM * blockDim.y, BN = TN * blockDim.x), walking k in steps of BK through shared memory.
TM, TN, BM, BN, BK = 2, 2, 4, 4, 2


def relu_map(out, a):
    i = cuda.grid(1)
    out[i] = max(a[i], 0.0)


def relu_guard(out, a, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = max(a[i], 0.0)


def fma_zip(out, w, x, b, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = w[i] * x[i] + b[i]


def block_sum(out, a, n):
    cache = cuda.shared.array(TPB, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    cache[t] = a[i] if i < n else 0.0
    cuda.syncthreads()
    stride = TPB // 2
    while stride > 0:
        if t < stride:
            cache[t] = cache[t] + cache[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = cache[0]


def hillis_steele(out, a):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = a[t]
    cuda.syncthreads()
    d = 1
    while d < TPB:
        left = cache[t - d] if t >= d else 0.0
        cuda.syncthreads()              # everyone has read before anyone writes
        cache[t] = cache[t] + left
        cuda.syncthreads()
        d *= 2
    out[t] = cache[t]


def blelloch(out, a):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = a[t]
    cuda.syncthreads()
    d = 1
    while d < TPB:                      # up-sweep: partial sums of 2, 4, 8 ... elements
        if (t + 1) % (2 * d) == 0:
            cache[t] = cache[t - d] + cache[t]
        cuda.syncthreads()
        d *= 2
    if t == TPB - 1:
        cache[t] = 0.0
    cuda.syncthreads()
    d = TPB // 2
    while d > 0:                        # down-sweep: hand each left child its prefix
        if (t + 1) % (2 * d) == 0:
            left = cache[t - d]
            cache[t - d] = cache[t]
            cache[t] = cache[t] + left
        cuda.syncthreads()
        d //= 2
    out[t] = cache[t]


def scale_rows(out, a, s):
    col, row = cuda.grid(2)              # x, the fastest index of a warp, walks along a row
    out[row, col] = a[row, col] * s[row]


def matmul_tiled(c, a, b, n):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    col, row = cuda.grid(2)                         # x, the fastest index of a warp, walks along a row
    tc, tr = cuda.threadIdx.x, cuda.threadIdx.y     # this thread's column and row in the tile
    acc = 0.0
    for k0 in range(0, n, TILE):
        sa[tr, tc] = a[row, k0 + tc]
        sb[tr, tc] = b[k0 + tr, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[tr, k] * sb[k, tc]
        cuda.syncthreads()
    c[row, col] = acc


def online_softmax_tile(out, lse, q, k, v, n_k, scale):
    sk = cuda.shared.array((ATT_TILE, ATT_D), float32)
    sv = cuda.shared.array((ATT_TILE, ATT_D), float32)
    qr = cuda.local.array(ATT_D, float32)
    acc = cuda.local.array(ATT_D, float32)
    s = cuda.local.array(ATT_TILE, float32)
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x * ATT_TILE + t            # one thread, one query row
    for c in range(ATT_D):
        qr[c] = q[row, c] * scale
        acc[c] = 0.0
    m = -math.inf
    total = 0.0
    for k0 in range(0, n_k, ATT_TILE):
        for e in range(t, ATT_TILE * ATT_D, ATT_TILE):   # neighbouring threads load neighbouring floats
            sk[e // ATT_D, e % ATT_D] = k[k0 + e // ATT_D, e % ATT_D]
            sv[e // ATT_D, e % ATT_D] = v[k0 + e // ATT_D, e % ATT_D]
        cuda.syncthreads()
        tile_max = -math.inf
        for j in range(ATT_TILE):
            dot = 0.0
            for c in range(ATT_D):
                dot += qr[c] * sk[j, c]
            s[j] = dot
            tile_max = max(tile_max, dot)
        new_m = max(m, tile_max)
        rescale = math.exp(m - new_m)               # the old sum and output, moved to the new maximum
        total *= rescale
        for c in range(ATT_D):
            acc[c] *= rescale
        for j in range(ATT_TILE):
            p = math.exp(s[j] - new_m)
            total += p
            for c in range(ATT_D):
                acc[c] += p * sv[j, c]
        m = new_m
        cuda.syncthreads()                          # everyone is done with the tile before the next load
    for c in range(ATT_D):
        out[row, c] = acc[c] / total
    lse[row] = m + math.log(total)


def matmul_register_tile(c, a, b, n):
    sa = cuda.shared.array((BM, BK), float32)
    sb = cuda.shared.array((BK, BN), float32)
    acc = cuda.local.array((TM, TN), float32)       # this thread's TM x TN tile of c, in registers
    ra = cuda.local.array(TM, float32)
    rb = cuda.local.array(TN, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y     # x, the fastest index of a warp, walks along a row
    t, nt = ty * cuda.blockDim.x + tx, cuda.blockDim.x * cuda.blockDim.y
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    for k0 in range(0, n, BK):
        for e in range(t, BM * BK, nt):             # neighbouring threads copy neighbouring floats
            sa[e // BK, e % BK] = a[row0 + e // BK, k0 + e % BK]
        for e in range(t, BK * BN, nt):
            sb[e // BN, e % BN] = b[k0 + e // BN, col0 + e % BN]
        cuda.syncthreads()
        for k in range(BK):
            for i in range(TM):                     # TM values of a and TN of b into registers, once per k ...
                ra[i] = sa[ty * TM + i, k]
            for j in range(TN):
                rb[j] = sb[k, tx * TN + j]
            for i in range(TM):                     # ... then TM x TN multiply-adds from registers alone
                for j in range(TN):
                    acc[i, j] += ra[i] * rb[j]
        cuda.syncthreads()
    for i in range(TM):
        for j in range(TN):
            c[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i, j]
