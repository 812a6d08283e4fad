#!/usr/bin/env bash
# One-time set-up of Orrery on Debian 12 (bookworm): SimGrid with SMPI and a
# C++ toolchain from Debian, then a virtual environment (.venv) holding the
# orrery package, whose build compiles the CUDA stand-in (interpose/).
# Safe to run again: it installs only what is missing and rebuilds the package.
set -euo pipefail
cd "$(dirname "$0")/.."

# nlohmann-json3-dev: the JSON reader of the shim's run description (header-only)
# autoconf automake libtool: tests/native/test_autotools.py generates its project's configure;
# gfortran: SMPI's smpif90 (orrery-mpif90) compiles Fortran with it
# libmimalloc2.0: the allocator orrery run gives SMPI's launcher (orrery/run/launch.py, ALLOCATOR)
# libzstd-dev: the shim reads nvcc's zstd-compressed fat binary entries (interpose/core/cubin.cpp)
packages=(libsimgrid-dev nlohmann-json3-dev g++ cmake pkg-config make python3 python3-venv python3-dev
          autoconf automake libtool gfortran libmimalloc2.0 libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[test,calibration,whatif]"

# NCCL's public headers, for NCCL programs built for Orrery (tests, calibration/bench/nccl_sweep,
# the nccl-tests, whose common.h also includes nccl_device.h from NCCL 2.28 on): the
# nvidia-nccl-cu13 wheel's include/ folder (nccl.h, nccl_device.h, nccl_device/), kept in
# .venv/nccl/include; the rest of the wheel (its libnccl.so.2, which Orrery's stand-in replaces) is
# not kept
nccl_include=.venv/nccl/include
if [[ ! -f $nccl_include/nccl.h || ! -f $nccl_include/nccl_device.h ]]; then
  tmp=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-nccl-cu13==2.30.7"
  .venv/bin/python - "$tmp" "$nccl_include" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
out = pathlib.Path(sys.argv[2])
prefix = "nvidia/nccl/include/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = out / name[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
PY
  rm -rf "$tmp"
fi

# NVML's public header, for programs that include <nvml.h> (a full CUDA toolkit has it; the
# toolkit Orrery is tested with does not): the nvidia-nvml-dev-cu12 wheel's nvml.h, kept in
# .venv/nvml/include. Orrery's libnvidia-ml.so.1 stands in for the library (interpose/nvml/).
nvml_include=.venv/nvml/include
if [[ ! -f $nvml_include/nvml.h ]]; then
  tmp=$(mktemp -d)
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-nvml-dev-cu12==12.9.79"
  .venv/bin/python - "$tmp" "$nvml_include" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    (out / "nvml.h").write_bytes(z.read("nvidia/nvml_dev/include/nvml.h"))
PY
  rm -rf "$tmp"
fi

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: warning: nvcc not found. Building CUDA programs for Orrery needs the CUDA toolkit's" >&2
  echo "       compiler (no GPU, no driver): NVIDIA's cuda-toolkit packages or Debian's nvidia-cuda-toolkit." >&2
fi
echo "setup: done ($(.venv/bin/orrery --version), SimGrid $(pkg-config --modversion simgrid))"
