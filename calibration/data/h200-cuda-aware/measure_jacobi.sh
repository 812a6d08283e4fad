#!/bin/bash
# The bundled Jacobi example on one real GPU, one rank: its kernel (the norm summed per warp,
# then per block, as CUB's BlockReduce in the measured code's "make cub" build) against the
# former one (a shared-memory atomic add per thread, in .jold/jacobi_atomic.cu, otherwise the
# same file), at the grid sizes of the single-GPU rows examples/jacobi/fit.toml fits, printing
# each run's time and final l2 norm. Same setup as measure.sh; writes into $OUT.
# Before the run, here (with git): `measure_jacobi.sh --prepare` writes .jold/jacobi_atomic.cu,
# the example with its kernel replaced by the one of commit 4ca5074; carry .jold with .ompi.
set -u
if [ "${1:-}" = --prepare ]; then
  mkdir -p .jold && python3 - <<'PY'
import re, subprocess
kernel = re.compile(r"__global__ void jacobi_kernel\(.*?\n}\n", re.S)
former = kernel.search(subprocess.run(["git", "show", "4ca5074:examples/jacobi/jacobi.cu"], capture_output=True,
                                      text=True, check=True).stdout).group(0)
now = open("examples/jacobi/jacobi.cu").read()
open(".jold/jacobi_atomic.cu", "w").write(kernel.sub(lambda _: former, now, count=1))
PY
  exit
fi
OUT=${OUT:-out/h200-jacobi}
mkdir -p "$OUT"
exec > >(tee "$OUT/jacobi.txt") 2>&1
date -u
source calibration/data/h200-cuda-aware/ompi_env.sh
make -s -C examples/jacobi "${OMPI_MAKE[@]}" || exit 1
nvcc -O3 -std=c++17 -arch=sm_90 -I"$PWD/.ompi/include" -c -o /tmp/jacobi_atomic.o .jold/jacobi_atomic.cu &&
  mpicxx -o /tmp/jacobi_atomic /tmp/jacobi_atomic.o -L/usr/local/cuda/lib64 -lcudart || exit 1
for nx in 8192 16384 32768; do
  for program in ./examples/jacobi/jacobi /tmp/jacobi_atomic; do
    echo "== $program -nx $nx"
    timeout 120 mpiexec -n 1 $program -nx $nx -ny $nx -niter 1000 -norm; echo "rc=$?"
  done
done
date -u
