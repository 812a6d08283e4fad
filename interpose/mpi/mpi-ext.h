/* Orrery's mpi-ext.h: the CUDA-aware MPI checks of Open MPI 5's mpi-ext.h, for programs built
 * with `orrery mpicc`, `orrery mpicxx` and `orrery nvcc`, which put this folder on the include
 * path after SMPI's (SMPI has no mpi-ext.h). Installed with the package in orrery/include.
 *
 * Programs that can pass GPU buffers to MPI calls check it at compile time
 *   #if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
 * and at run time with MPIX_Query_cuda_support(). Orrery simulates MPI calls on device buffers
 * along the machine's GPU paths (GPUDirect, NVLink, or staged through the host, as the machine
 * description says), so it answers as a CUDA-aware Open MPI does: 1. ROCm is not simulated: the
 * ROCm extension is present, as in an Open MPI built without ROCm, and answers 0.
 *
 * The functions are rows of interpose/mpi/mpi_api.def (family `extension`), defined in
 * libcudart.so.13 (interpose/mpi/mpi.cpp), which every program the wrappers link is linked
 * against. Nothing here needs SMPI's mpi.h: a program may include this header before or after it.
 * docs/building.md (CUDA-aware MPI checks) says more. */
#ifndef ORRERY_MPI_EXT_H
#define ORRERY_MPI_EXT_H 1

#ifdef __cplusplus
extern "C" {
#endif

/* the extensions this header provides, named as Open MPI's mpi-ext.h names its enabled ones */
#define OMPI_HAVE_MPI_EXT 1
#define OMPI_HAVE_MPI_EXT_CUDA 1
#define OMPI_HAVE_MPI_EXT_ROCM 1

/* CUDA-aware: device buffers may be passed to MPI calls. MPIX_Query_cuda_support() returns 1. */
#define MPIX_CUDA_AWARE_SUPPORT 1
int MPIX_Query_cuda_support(void);

/* ROCm-aware: no. MPIX_Query_rocm_support() returns 0. */
#define MPIX_ROCM_AWARE_SUPPORT 0
int MPIX_Query_rocm_support(void);

#ifdef __cplusplus
}
#endif

#endif /* ORRERY_MPI_EXT_H */
