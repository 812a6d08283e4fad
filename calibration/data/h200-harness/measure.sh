#!/bin/bash
# Orrery's measurement tools on one real GPU: the microbenchmarks of calibration/bench,
# built unchanged with the real compilers, and the harness with CuPy device buffers.
# Run from the repository root with the MPICH and mpi4py wheels of the test extra in
# .whl/ (no network there); writes into $OUT (default out/h200-harness).
set -u
OUT=${OUT:-out/h200-harness}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max,clocks.max.sm \
  --format=csv
nproc
# A venv with the test extra's MPI (MPICH wheel + mpi4py) that also sees the image's CuPy.
python3 -m venv /tmp/v && /tmp/v/bin/pip install -q --no-index --no-deps .whl/*.whl || exit 1
python3 -c "import site; print(site.getsitepackages()[0])" > "$(/tmp/v/bin/python -c 'import site; print(site.getsitepackages()[0])')/base.pth"
export PATH=/tmp/v/bin:$PATH PYTHONPATH=calibration/harness PYTHONUNBUFFERED=1
python -c "import cupy, mpi4py; from mpi4py import MPI; print('cupy', cupy.__version__, 'mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])"

echo "== microbenchmarks, real compilers"
make -s -C calibration/bench -j8 MPI_HOME=/tmp/v MPICXX=/tmp/v/bin/mpicxx || exit 1
for k in h2d d2h d2d; do
  iters=20; [ $k = d2d ] && iters=100
  timeout 120 ./calibration/bench/memcpy_sweep $k -m 1024:268435456 -i $iters > "$OUT/memcpy_$k.txt"; echo "memcpy_sweep $k rc=$?"
done
timeout 60 ./calibration/bench/memcpy_sweep peer -m 1024:1024; echo "memcpy_sweep peer (one GPU) rc=$?"
timeout 60 ./calibration/bench/api_overheads -i 10000 > "$OUT/api_overheads.csv"; echo "api_overheads rc=$?"
timeout 120 mpiexec -n 2 ./calibration/bench/osu_p2p latency H H > "$OUT/osu_latency_hh.txt"; echo "osu_p2p latency H H rc=$?"

echo "== harness"
timeout 300 mpiexec -n 2 python calibration/harness/orrery_harness.py --out "$OUT/harness.csv" \
  --sizes 1:4194304 --iters 50 --warmup 5 --kernel example_kernels:saxpy
echo "harness rc=$?"
date -u
