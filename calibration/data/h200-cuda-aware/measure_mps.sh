#!/bin/bash
# measure.sh's device-buffer point-to-point sweeps again under CUDA MPS (one GPU context for
# both ranks' processes), to tell how much of their time was the GPU switching between the
# two processes' contexts. Same setup as measure.sh; writes into $OUT.
set -u
OUT=${OUT:-out/h200-cuda-aware-mps}
mkdir -p "$OUT"
exec > >(tee "$OUT/log_mps.txt") 2>&1
date -u
source calibration/data/h200-cuda-aware/ompi_env.sh
command -v nvidia-cuda-mps-control || { echo "no nvidia-cuda-mps-control here"; exit 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d; echo "mps daemon rc=$?"
make -s -C calibration/bench -j8 "${OMPI_MAKE[@]}" osu_p2p || exit 1
RUN="mpiexec -n 2 --bind-to none"
for t in latency bw bibw; do
  timeout 120 $RUN ./calibration/bench/osu_p2p $t D D -m 1:4194304 > "$OUT/osu_${t}_dd_mps.txt"; echo "osu_p2p $t D D (MPS) rc=$?"
done
echo quit | nvidia-cuda-mps-control
tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log 2>/dev/null
date -u
