// Device attributes as the runtime and the driver answer them, and cudaGetDeviceProperties beside
// them. Usage: driver_attributes ID...; prints "ID RUNTIME DRIVER RUNTIME_ERROR DRIVER_ERROR" per
// attribute id (device 0; an argument dID asks the driver alone), then "prop NAME VALUE" for the properties deviceQuery prints. An attribute Orrery does not
// answer stops the run at the runtime's query (tests/native/test_device_attributes.py).
#include <cuda.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  cuInit(0);
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == 'd') {  // dID: the driver's query alone
      int driver = -1;
      CUresult d = cuDeviceGetAttribute(&driver, (CUdevice_attribute)atoi(argv[i] + 1), 0);
      printf("driver %s %d %d\n", argv[i] + 1, driver, (int)d);
      continue;
    }
    int id = atoi(argv[i]), runtime = -1, driver = -1;
    cudaError_t e = cudaDeviceGetAttribute(&runtime, (cudaDeviceAttr)id, 0);
    CUresult d = cuDeviceGetAttribute(&driver, (CUdevice_attribute)id, 0);
    printf("%d %d %d %d %d\n", id, runtime, driver, (int)e, (int)d);
  }
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("prop maxTexture1D %d\n", p.maxTexture1D);
  printf("prop maxTexture2D %d %d\n", p.maxTexture2D[0], p.maxTexture2D[1]);
  printf("prop maxTexture3D %d %d %d\n", p.maxTexture3D[0], p.maxTexture3D[1], p.maxTexture3D[2]);
  printf("prop maxTexture1DLayered %d %d\n", p.maxTexture1DLayered[0], p.maxTexture1DLayered[1]);
  printf("prop maxTexture2DLayered %d %d %d\n", p.maxTexture2DLayered[0], p.maxTexture2DLayered[1],
         p.maxTexture2DLayered[2]);
  printf("prop surfaceAlignment %zu\n", p.surfaceAlignment);
  printf("prop computePreemptionSupported %d\n", p.computePreemptionSupported);
  printf("prop reservedSharedMemPerBlock %zu\n", p.reservedSharedMemPerBlock);
  printf("prop sharedMemPerMultiprocessor %zu\n", p.sharedMemPerMultiprocessor);
  printf("prop memPitch %zu\n", p.memPitch);
  MPI_Finalize();
  return 0;
}
