/* The simulated GPUs: each a platform host, described by the run description's gpu (what it is)
 * and gpus (where it is), built on first use and shared by the ranks of its node. */
#include "core/gpus.hpp"

#include <cstdio>
#include <map>
#include <memory>

namespace orrery {

/* ---------------- GPUs, described by the run description ---------------- */

sg4::Host* host_by_name(const std::string& name) {
  sg4::Host* h = sg4::Host::by_name_or_null(name);
  if (!h)
    fatal("the platform has no host '%s'", name.c_str());
  return h;
}

Gpu* gpu_of_host(sg4::Host* host) {
  static std::map<std::string, std::unique_ptr<Gpu>> gpus;
  auto it = gpus.find(host->get_name());
  if (it != gpus.end())
    return it->second.get();
  // Built completely before it is published: creating SimGrid objects may let
  // other ranks run, and they must not see a half-described GPU.
  auto built = std::make_unique<Gpu>();
  Gpu& g = *built;
  g.host = host;
  const RunDescription& d = run_description();
  const GpuHost& place = gpu_place(host);
  const GpuModel& model = d.gpu;
  g.cpu = host_by_name(place.cpu);
  g.node = (int)place.node;
  g.index = (int)place.index;
  g.speed = host->get_speed();
  g.launch_overhead_s = model.launch_overhead_s;
  g.copy_overhead_s = model.copy_overhead_s;
  g.sync_overhead_s = model.sync_overhead_s;
  g.memset_bandwidth = model.memset_bandwidth;
  g.d2d_bandwidth = model.d2d_bandwidth;
  g.d2d_latency_s = model.d2d_latency_s;
  g.host_memcpy_bandwidth = d.host_memcpy_bandwidth;

  g.copy_model[(int)CopyKind::H2D] = d.copies.H2D;
  g.copy_model[(int)CopyKind::D2H] = d.copies.D2H;
  g.copy_model[(int)CopyKind::D2D] = d.copies.D2D;
  g.copy_model[(int)CopyKind::Peer] = d.copies.peer;
  g.staged_peer_model = d.copies.peer_staged;
  g.copy_engine = host_by_name(place.copy_engine);
  g.message_end = place.message_end ? host_by_name(*place.message_end) : host;
  g.staged_end = place.staged_end ? host_by_name(*place.staged_end) : nullptr;

  int engines = (int)model.copy_engines;
  g.h2d_engine = new CopyEngines{engines >= 2 ? engines / 2 : 1, {}};  // as long as the GPU: never freed
  g.d2h_engine = engines >= 2 ? new CopyEngines{engines - engines / 2, {}} : g.h2d_engine;

  cudaDeviceProp& p = g.prop;
  snprintf(p.name, sizeof p.name, "%s", model.name.c_str());
  p.totalGlobalMem = (size_t)model.memory_bytes;
  p.sharedMemPerBlock = (size_t)model.shared_per_block;
  p.sharedMemPerBlockOptin = (size_t)model.shared_per_block_optin;
  p.sharedMemPerMultiprocessor = (size_t)model.shared_per_sm;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.totalConstMem = 65536;
  p.major = (int)model.cc_major;
  p.minor = (int)model.cc_minor;
  p.textureAlignment = 512;
  p.texturePitchAlignment = 32;
  p.multiProcessorCount = (int)model.sm_count;
  // The texture limits of every compute capability CUDA 13 builds for (7.5 and later), as the
  // H100 SXM5 and A100 deviceQuery that the built-in machines cite print them.
  p.maxTexture1D = 131072;
  p.maxTexture2D[0] = 131072;
  p.maxTexture2D[1] = 65536;
  p.maxTexture3D[0] = p.maxTexture3D[1] = p.maxTexture3D[2] = 16384;
  p.maxTexture1DLayered[0] = 32768;
  p.maxTexture1DLayered[1] = 2048;
  p.maxTexture2DLayered[0] = p.maxTexture2DLayered[1] = 32768;
  p.maxTexture2DLayered[2] = 2048;
  p.surfaceAlignment = 512;  // deviceQuery's "Alignment requirement for Surfaces: Yes"
  p.canMapHostMemory = 1;
  p.concurrentKernels = 1;
  p.ECCEnabled = 1;
  p.pciBusID = (int)place.pci_bus_id;
  // A UUID of its own per GPU (a real GPU's is unique and fixed), the same in every run: "ORRY",
  // then its node and its index in the node, big-endian. Programs match devices by it (NVML's
  // nvmlDeviceGetHandleByUUID, NCCL, nvbandwidth); all zeros made every GPU one.
  const unsigned char tag[4] = {'O', 'R', 'R', 'Y'};
  for (int i = 0; i < 4; i++) {
    p.uuid.bytes[i] = (char)tag[i];
    p.uuid.bytes[4 + i] = (char)((uint32_t)place.node >> (24 - 8 * i));
    p.uuid.bytes[8 + i] = (char)((uint32_t)place.index >> (24 - 8 * i));
  }
  p.asyncEngineCount = engines;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = (int)model.memory_bus_width;
  p.l2CacheSize = (int)model.l2_bytes;
  p.maxThreadsPerMultiProcessor = (int)model.max_threads_per_sm;
  p.maxBlocksPerMultiProcessor = (int)model.max_blocks_per_sm;
  p.streamPrioritiesSupported = 1;
  p.globalL1CacheSupported = 1;
  p.localL1CacheSupported = 1;
  p.managedMemory = 1;
  p.concurrentManagedAccess = 1;  // Linux, compute capability 6.0 and later
  p.computePreemptionSupported = 1;
  p.canUseHostPointerForRegisteredMem = 1;
  p.hostRegisterSupported = 1;
  // What a block may not use of its multiprocessor's shared memory: 1 KiB on 8.0 and 9.0 alike
  // (228 - 227 KiB, 164 - 163 KiB in the CUDA C++ Programming Guide's tables).
  p.reservedSharedMemPerBlock = model.shared_per_sm > model.shared_per_block_optin
                                    ? (size_t)(model.shared_per_sm - model.shared_per_block_optin)
                                    : 0;
  p.cooperativeLaunch = 1;
  // The runtime's stream-ordered allocation (cudaMallocAsync, its pools) is simulated; the
  // driver's (cuMemAllocAsync, cuMemPool*) is not, and its CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
  // reads 0 (driver/device.cpp). No pool is shareable between processes (handle types: none).
  p.memoryPoolsSupported = 1;
  p.memoryPoolSupportedHandleTypes = 0;
  p.gpuDirectRDMASupported = 1;
  p.clusterLaunch = p.major >= 9;
  auto& slot = gpus[host->get_name()];
  if (!slot)
    slot = std::move(built);
  return slot.get();
}

Gpu& current_gpu(Rank& r) { return *r.gpus.at(r.device); }

const char* copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::H2H: return "H2H";
    case CopyKind::H2D: return "H2D";
    case CopyKind::D2H: return "D2H";
    case CopyKind::D2D: return "D2D";
    case CopyKind::Peer: return "peer";
  }
  return "?";
}

}  // namespace orrery
