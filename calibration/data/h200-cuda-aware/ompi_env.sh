# Sourced by measure*.sh, from the repository root: this folder's Open MPI (.ompi/, built by
# build_openmpi.sh and carried there), relocated by OPAL_PREFIX, run as root, and the make
# variables that build against it.
export OPAL_PREFIX=$PWD/.ompi PATH=$PWD/.ompi/bin:$PATH LD_LIBRARY_PATH=$PWD/.ompi/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MAKE=(MPI_HOME="$PWD/.ompi" MPICXX="$PWD/.ompi/bin/mpicxx")
