#!/usr/bin/env bash
# The demo: build the bundled Jacobi solver with Orrery's compiler wrappers,
# exactly as its own Makefile builds it, and run it on 2 nodes x 4 simulated
# H100 (the built-in h100-ib200 machine), with kernel costs fitted on measured
# single-GPU runs (examples/jacobi/costs.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:/usr/local/cuda/bin:$PATH"
make -s -C examples/jacobi NVCC="orrery nvcc" MPICXX="orrery mpicxx"
orrery run --machine h100-ib200 --nodes 2 --costs examples/jacobi/costs.toml --out out/demo \
  -- examples/jacobi/jacobi -nx 16384 -ny 16384 -niter 1000
