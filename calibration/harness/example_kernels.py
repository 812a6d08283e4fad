"""A user kernel for the harness's ``--kernel`` option, as a model for your own.

``--kernel example_kernels:saxpy`` times ``saxpy(size_bytes)`` on the GPU for each
size of the sweep (CUDA events around repeated calls). A callable takes the size in
bytes, launches its work on the current stream and returns without synchronising;
it should allocate once per size, not per call, or the allocation is timed too.
"""

from __future__ import annotations

import functools

import cupy

SAXPY = cupy.RawKernel(
    r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}""",
    "saxpy",
)
BLOCK = 256


@functools.cache
def _vectors(n: int) -> tuple[cupy.ndarray, cupy.ndarray]:
    return cupy.ones(n, dtype=cupy.float32), cupy.zeros(n, dtype=cupy.float32)


def saxpy(size_bytes: int) -> None:
    """y = 2 x + y over size_bytes / 4 floats, one thread per element."""
    n = max(size_bytes // 4, 1)
    x, y = _vectors(n)
    SAXPY(((n + BLOCK - 1) // BLOCK,), (BLOCK,), (cupy.float32(2.0), x, y, cupy.uint64(n)))
