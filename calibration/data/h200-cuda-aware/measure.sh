#!/bin/bash
# Orrery's measurement tools with a CUDA-aware MPI on one real GPU: two ranks sharing it
# exchange device buffers (Open MPI's smcuda transport, CUDA IPC), as the harness's
# device-buffer sweeps and osu_p2p D D do on a cluster node. Run from the repository root with
# .ompi/ (build_openmpi.sh) and the mpi4py wheel in .whl/; writes into $OUT.
set -u
OUT=${OUT:-out/h200-cuda-aware}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
source calibration/data/h200-cuda-aware/ompi_env.sh
ompi_info --parsable --all | grep -E "mpi_built_with_cuda_support:value|^ompi:version:full"
# mpi4py alone (not the MPICH wheel), so that it loads this Open MPI; the image's CuPy
python3 -m venv /tmp/v && /tmp/v/bin/pip install -q --no-index --no-deps .whl/mpi4py-*.whl || exit 1
python3 -c "import site; print(site.getsitepackages()[0])" > "$(/tmp/v/bin/python -c 'import site; print(site.getsitepackages()[0])')/base.pth"
export PYTHONPATH=calibration/harness PYTHONUNBUFFERED=1
RUN="mpiexec -n 2 --bind-to none"
$RUN /tmp/v/bin/python -c "import cupy, mpi4py; from mpi4py import MPI; print(MPI.COMM_WORLD.rank, 'cupy', cupy.__version__, 'mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])"

echo "== microbenchmarks, real compilers"
make -s -C calibration/bench -j8 "${OMPI_MAKE[@]}" osu_p2p coll_sweep || exit 1
for t in latency bw bibw; do
  for b in "D D" "H H"; do
    f="$OUT/osu_${t}_$(echo $b | tr -d ' ' | tr DH dh).txt"
    timeout 120 $RUN ./calibration/bench/osu_p2p $t $b -m 1:4194304 > "$f"; echo "osu_p2p $t $b rc=$?"
  done
done
timeout 120 $RUN ./calibration/bench/coll_sweep allreduce D > "$OUT/coll_allreduce_d.txt"; echo "coll_sweep allreduce D rc=$?"

echo "== the bundled Jacobi example, real compilers, one rank on the GPU"
make -s -C examples/jacobi "${OMPI_MAKE[@]}" || exit 1
for nx in 8192 16384; do
  timeout 120 mpiexec -n 1 ./examples/jacobi/jacobi -nx $nx -ny $nx -niter 1000; echo "jacobi -nx $nx rc=$?"
done
timeout 120 $RUN ./examples/jacobi/jacobi -nx 8192 -ny 8192 -niter 1000; echo "jacobi 2 ranks, one GPU rc=$?"

echo "== harness, device buffers through MPI"
timeout 300 $RUN /tmp/v/bin/python calibration/harness/orrery_harness.py --out "$OUT/harness.csv" \
  --sizes 1:4194304 --iters 50 --warmup 5
echo "harness rc=$?"
date -u
