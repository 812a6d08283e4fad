# CMake toolchain file for building a program for Orrery:
#   cmake -DCMAKE_TOOLCHAIN_FILE=$(orrery toolchain cmake) -S . -B build && cmake --build build
# Installed with the orrery package (orrery/cmake/orrery.cmake); the docs' CMake section says
# what it sets and why. Tested with CMake 3.18 and 3.25.
#
# SMPI runs a program as a shared object, one copy per rank, so everything is compiled
# position-independent for a shared object and linked by SimGrid's smpicc/smpicxx, through
# Orrery's wrappers, against Orrery's stand-in CUDA runtime.

# This file lies in <prefix>/lib/pythonX.Y/site-packages/orrery/cmake; the wrappers are installed
# in <prefix>/bin (a virtual environment, a --user install, /usr/local alike), and Orrery's
# libraries in orrery/lib.
get_filename_component(ORRERY_LIB_DIR "${CMAKE_CURRENT_LIST_DIR}/../lib" ABSOLUTE)
get_filename_component(_orrery_prefix "${CMAKE_CURRENT_LIST_DIR}/../../../../.." ABSOLUTE)
foreach(_orrery_tool IN ITEMS nvcc mpicc mpicxx)
  string(TOUPPER "ORRERY_${_orrery_tool}" _orrery_var)
  find_program(${_orrery_var} orrery-${_orrery_tool} HINTS "${_orrery_prefix}/bin" DOC "Orrery's ${_orrery_tool} wrapper")
  if(NOT ${_orrery_var})
    message(FATAL_ERROR "orrery-${_orrery_tool} not found in ${_orrery_prefix}/bin or on PATH: install orrery with pip")
  endif()
endforeach()

set(CMAKE_C_COMPILER "${ORRERY_MPICC}")
set(CMAKE_CXX_COMPILER "${ORRERY_MPICXX}")
# FindMPI: the compilers are SMPI's own wrappers, so MPI programs build with no flag of FindMPI's
# (it checks that, and MPI::MPI_C / MPI::MPI_CXX stay empty). Naming them keeps it from picking
# another MPI's mpicc found on PATH. CUDA sources get SMPI's mpi.h from orrery-nvcc.
set(MPI_C_COMPILER "${ORRERY_MPICC}" CACHE FILEPATH "MPI compiler for C (Orrery's)")
set(MPI_CXX_COMPILER "${ORRERY_MPICXX}" CACHE FILEPATH "MPI compiler for C++ (Orrery's)")

# CUDA: CMake identifies the real nvcc (CMAKE_CUDA_COMPILER, found as CMake finds it: CUDACXX or
# PATH), reading what `nvcc -v` says it runs, which orrery-nvcc's split compile and link could
# not show. Its rules then compile CUDA sources with orrery-nvcc (against the shared runtime, as
# position-independent code, with mpi.h) and link with orrery-mpicxx. CMake 3.18 names its
# compile rules by mode; later versions use one with <CUDA_COMPILE_MODE>. No runtime of CMake's:
# Static and Shared both add -lcudadevrt from the toolkit's folder, which the wrappers' link does
# not search, and the wrappers link Orrery's runtime themselves.
set(CMAKE_CUDA_RUNTIME_LIBRARY None)
set(_orrery_nvcc "${ORRERY_NVCC}")
if(CMAKE_CUDA_HOST_COMPILER OR DEFINED ENV{CUDAHOSTCXX})
  string(APPEND _orrery_nvcc " -ccbin=<CMAKE_CUDA_HOST_COMPILER>")
endif()
set(CMAKE_CUDA_COMPILE_OBJECT
  "${_orrery_nvcc} <DEFINES> <INCLUDES> <FLAGS> -x cu <CUDA_COMPILE_MODE> <SOURCE> -o <OBJECT>")
set(CMAKE_CUDA_COMPILE_WHOLE_COMPILATION "${_orrery_nvcc} <DEFINES> <INCLUDES> <FLAGS> -x cu -c <SOURCE> -o <OBJECT>")
set(CMAKE_CUDA_COMPILE_SEPARABLE_COMPILATION "${_orrery_nvcc} <DEFINES> <INCLUDES> <FLAGS> -x cu -dc <SOURCE> -o <OBJECT>")
set(CMAKE_CUDA_LINK_EXECUTABLE "${ORRERY_MPICXX} <LINK_FLAGS> <OBJECTS> -o <TARGET> <LINK_LIBRARIES>")
set(CMAKE_CUDA_CREATE_SHARED_LIBRARY
  "${ORRERY_MPICXX} <CMAKE_SHARED_LIBRARY_CUDA_FLAGS> <LINK_FLAGS> <CMAKE_SHARED_LIBRARY_CREATE_CUDA_FLAGS> <SONAME_FLAG><TARGET_SONAME> -o <TARGET> <OBJECTS> <LINK_LIBRARIES>")
set(CMAKE_CUDA_CREATE_SHARED_MODULE "${CMAKE_CUDA_CREATE_SHARED_LIBRARY}")

# FindCUDAToolkit: CUDA::cudart (and CUDA::cudart_static, which would link NVIDIA's runtime in)
# are Orrery's stand-in, CUDA::cuda_driver Orrery's driver library where the package has one.
# (CUDA_CUDART, from which FindCUDAToolkit finds the toolkit's other libraries, stays NVIDIA's.)
set(CUDA_cudart_LIBRARY "${ORRERY_LIB_DIR}/libcudart.so" CACHE FILEPATH "CUDA runtime (Orrery's)")
set(CUDA_cudart_static_LIBRARY "${ORRERY_LIB_DIR}/libcudart.so" CACHE FILEPATH "CUDA runtime (Orrery's)")
if(EXISTS "${ORRERY_LIB_DIR}/libcuda.so")
  set(CUDA_cuda_driver_LIBRARY "${ORRERY_LIB_DIR}/libcuda.so" CACHE FILEPATH "CUDA driver (Orrery's)")
endif()
