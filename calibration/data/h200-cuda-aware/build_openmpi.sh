#!/bin/bash
# A CUDA-aware Open MPI for measure.sh, built where CUDA's headers are (no GPU needed):
# Debian bookworm's Open MPI 4.1.4 source, configured --with-cuda (libcuda is opened at run
# time), installed into .ompi/ at the repository root (git ignores it; measure.sh carries it).
set -eu
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=${WORK:-/tmp/ompisrc}
mkdir -p "$WORK/lists/partial" && cd "$WORK"
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > src.sources
apt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$WORK" -o Dir::State::Lists="$WORK/lists")
apt-get "${apt[@]}" update
apt-get "${apt[@]}" source --download-only openmpi=4.1.4-3
tar xf openmpi_4.1.4.orig.tar.xz && cd openmpi-4.1.4
./configure --prefix=/opt/orrery-ompi --with-cuda=/usr/local/cuda --disable-mpi-fortran --without-ucx \
  --without-verbs --without-ofi --without-psm2 --with-hwloc=internal --with-libevent=internal \
  --with-pmix=internal --disable-static --enable-shared --disable-oshmem --disable-mpi-java
make -j"$(nproc)" && make install
rm -rf "$REPO/.ompi" && cp -a /opt/orrery-ompi "$REPO/.ompi"   # relocated at run time by OPAL_PREFIX
