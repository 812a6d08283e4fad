"""The CUDA driver stand-in, libcuda.so.1 (interpose/driver/): programs linked with -lcuda and
compiled against the real cuda.h (tests/native/programs/driver_calls.cu) get the devices, contexts
and pointers the runtime stand-in has, working entry points by name, virtual memory management on
the simulated GPU's memory, and a stop naming any driver call Orrery does not simulate."""

from __future__ import annotations

import pytest
from derivations import REL

pytestmark = pytest.mark.native

CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_FOUND = 1, 2, 500
CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_CONTEXT = 101, 201
CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE = 1, 2
TWO_GPUS = ("--gpus-per-node", "2", "--ranks-per-node", "1")


def run(run_program, programs, *args: str, options=TWO_GPUS):
    r = run_program(programs["driver_calls"], *args, options=options)
    assert r.returncode == 0, r.stderr
    return r


def lines(stdout: str) -> dict[str, str]:
    """The program's "name: text" lines."""
    return dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)


def test_start_up_and_pointer_queries_answer_as_the_runtime_and_the_machine(run_program, programs, h100):
    r = run(run_program, programs, "startup")
    v, text = r.values(), lines(r.stdout)
    g = h100.gpu
    major, minor = (int(x) for x in g.compute_capability.split("."))
    assert v["driver_version"] == 13000 and v["count"] == 2
    for dev in (0, 1):
        assert text[f"name{dev}"] == g.model
        assert v[f"dev{dev}_total_mem"] == g.memory
        assert (v[f"dev{dev}_cc_major"], v[f"dev{dev}_cc_minor"]) == (major, minor)
        assert v[f"dev{dev}_sm_count"] == g.sm_count and v[f"dev{dev}_l2_bytes"] == g.l2_cache
        assert v[f"dev{dev}_unified_addressing"] == 1
        for key in ("cc_major", "cc_minor", "sm_count", "pci_bus_id", "l2_bytes", "unified_addressing"):
            assert v[f"dev{dev}_{key}"] == v[f"dev{dev}_{key}_runtime"], key
        # virtual memory management is simulated, multicast is refused: say so to the program
        assert (v[f"dev{dev}_vmm_supported"], v[f"dev{dev}_multicast_supported"]) == (1, 0)
    assert v["dev0_pci_bus_id"] != v["dev1_pci_bus_id"]
    assert v["device_get_past_end"] == CUDA_ERROR_INVALID_DEVICE
    # OSU's start-up on the last device: its primary context, made current, is the runtime's device
    assert v["retained_active"] == 1
    assert v["runtime_device_after_set_current"] == 1 and v["ctx_device"] == 1
    assert v["current_is_retained"] == 1
    # and cudaSetDevice(0) makes device 0's primary context current, another one
    assert v["current_after_cudaSetDevice0_is_primary0"] == 1 and v["primary0_differs"] == 1
    assert v["current_after_set_null"] == 0
    assert v["released_active"] == 0 and v["release_unretained"] == CUDA_ERROR_INVALID_CONTEXT
    # cudaMalloc'd memory, allocated on the current device (1), queried 100 bytes in
    assert v["device_type"] == CU_MEMORYTYPE_DEVICE and v["device_ordinal"] == 1
    assert v["device_context_is_chosen"] == 1 and v["device_managed"] == 0
    assert v["device_pointer_offset"] == 100
    assert (v["range_start_offset"], v["range_size"]) == (0, 1 << 20)
    assert (v["address_range_offset"], v["address_range_size"]) == (0, 1 << 20)
    assert v["address_range_of_pinned"] == CUDA_ERROR_NOT_FOUND
    assert v["host_pointer_of_device"] == CUDA_ERROR_INVALID_VALUE
    # pageable memory is unknown to CUDA; pinned memory is host memory at its own address
    assert v["pageable_type_error"] == CUDA_ERROR_INVALID_VALUE
    assert (v["pageable_attrs_type"], v["pageable_attrs_ordinal"], v["pageable_attrs_context_null"]) == (0, -2, 1)
    assert v["pinned_type"] == CU_MEMORYTYPE_HOST and v["pinned_host_pointer_offset"] == 10
    assert v["freed_type_error"] == CUDA_ERROR_INVALID_VALUE
    assert (text["error_name"], text["error_text"]) == ("CUDA_ERROR_INVALID_VALUE", "invalid argument")


def test_the_driver_says_managed_memory_is_managed_device_memory_the_host_reaches(run_program, programs):
    r = run(run_program, programs, "managed", options=(*TWO_GPUS, "--managed", "resident"))
    v = r.values()
    assert v["managed_is_managed"] == 1 and v["managed_type"] == CU_MEMORYTYPE_DEVICE
    assert v["managed_host_pointer_offset"] == 8  # its host address is its own


def test_each_rank_has_its_own_current_context(run_program, programs):
    r = run(run_program, programs, "ranks", options=("--gpus-per-node", "2", "--ranks-per-node", "2"))
    v = r.values()
    for rank in (0, 1):
        assert v[f"rank{rank}_ctx_device"] == v[f"rank{rank}_runtime_device"] == rank
        assert v[f"rank{rank}_current_is_own"] == 1


def test_entry_points_by_name_are_the_driver_functions_and_work(run_program, programs):
    v = run(run_program, programs, "entry").values()
    # cuGetProcAddress picks the newest version at or before the one asked for, per-thread on request
    assert v["total_mem_13000_is_v2"] == 1 and v["status_found"] == 0
    assert v["total_mem_3000_is_v1"] == 1
    assert v["memcpy_per_thread_is_ptds"] == 1 and v["init_per_thread_is_init"] == 1
    assert (v["not_a_call_result"], v["not_a_call_status"], v["not_a_call_null"]) == (CUDA_ERROR_NOT_FOUND, 1, 1)
    assert (v["too_old_result"], v["too_old_status"]) == (CUDA_ERROR_NOT_FOUND, 2)  # cuMemMap came in 10.2
    assert v["proc_count"] == v["runtime_count"] == 2
    # the runtime's cudaGetDriverEntryPoint returns the very function the program links
    assert (v["entry_point_count"], v["entry_point_status"], v["entry_point_is_linked"]) == (2, 0, 1)
    assert v["by_version_type"] == CU_MEMORYTYPE_DEVICE
    assert (v["entry_point_missing_status"], v["entry_point_missing_null"]) == (1, 1)


def test_virtual_memory_is_device_memory_of_its_gpu(run_program, programs, h100):
    v = run(run_program, programs, "vmm", "1").values()
    granularity = 2 << 20
    size = 4 * granularity
    assert v["granularity"] == granularity and v["reserve_aligned"] == 1
    assert v["created_bytes"] == size  # cudaMemGetInfo counts it at cuMemCreate
    # mapped but not yet made accessible: no memory the runtime copies to
    assert v["copy_before_access"] == 1  # cudaErrorInvalidValue
    # one allocation mapped twice is one memory
    assert v["alias"] == 42 and v["retained_same_handle"] == 1
    assert (v["mapped_type"], v["mapped_ordinal"]) == (CU_MEMORYTYPE_DEVICE, 1)
    assert (v["mapped_range_start_offset"], v["mapped_range_size"]) == (size, size)
    assert (v["runtime_type"], v["runtime_device"]) == (2, 1)  # cudaMemoryTypeDevice on device 1
    # the runtime's copies and memsets treat it as device memory of GPU 1: its PCIe route, its memset rate
    o, p = h100.overheads, h100.pcie
    assert v["h2d"] == pytest.approx(o.memcpy + 2 * p.latency + size / p.bandwidth + o.sync, rel=REL)
    assert v["d2h"] == pytest.approx(o.memcpy + 2 * p.latency + size / p.bandwidth + o.sync, rel=REL)
    assert v["memset"] == pytest.approx(o.memcpy + size / h100.gpu.memset_bandwidth + o.sync, rel=REL)
    assert v["cudaFree_of_mapping"] == 1  # cudaErrorInvalidValue: cuMemUnmap ends a mapping
    # one granule more than the GPU has left is out of memory, as for cudaMalloc
    assert v["too_big"] == CUDA_ERROR_OUT_OF_MEMORY
    # released while mapped, the memory stays in use until its last mapping is unmapped
    assert v["held_after_release"] == size and v["held_after_unmap"] == 0
    assert v["unmapped_type_error"] == CUDA_ERROR_INVALID_VALUE
    assert v["release_twice"] == CUDA_ERROR_INVALID_VALUE


@pytest.mark.parametrize("name", ["cuMemAllocPitch_v2", "cuMulticastCreate", "cuMulticastBindMem"])
def test_a_refused_driver_call_stops_the_run_naming_it(run_program, programs, name):
    # cuMemAllocPitch_v2: a generated stub (no row); cuMulticast*: rows refused by name
    r = run_program(programs["driver_calls"], "refused", name, options=("--gpus-per-node", "1"))
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"orrery: error: the program called {name}, which Orrery does not simulate (actor 0); "
        "docs/supported-calls.md lists the calls it does"
    )
    assert f"refused: {name} returned" not in r.stdout
    assert r.results["failure"]["ranks"] == [0]


def test_work_through_the_driver_is_the_runtime_s_work(run_program, programs, h100):
    """driver_work.cu: each driver copy, memset and event is timed as the runtime's call for the
    same work (the same path, the same time), allocations count in the device's memory, and the
    driver's errors (not ready, peer access already enabled, no context) are its own, leaving
    the runtime's last error alone."""
    r = run_program(programs["driver_work"], options=TWO_GPUS)
    assert r.returncode == 0, r.stderr
    v, text = r.values(), lines(r.stdout) | dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    n = 64 << 20
    assert v["alloc_zero"] == CUDA_ERROR_INVALID_VALUE  # the driver refuses an empty allocation
    assert v["alloc_used"] == n and v["freed_used"] == 0
    assert v["host_alloc_type"] == CU_MEMORYTYPE_HOST and v["stream_ctx_is_primary"] == 1
    assert v["driver_h2d_ms"] == v["runtime_h2d_ms"] > 0
    # the copy crosses the GPU's PCIe link, and no faster than it
    assert n / (v["driver_h2d_ms"] * 1e-3) <= h100.pcie.bandwidth * (1 + 1e-6)
    assert v["driver_d2h_ms"] > 0
    assert v["driver_memset_ms"] == v["runtime_memset_ms"] > 0
    assert text["query_running"] == "600 600" and text["query_done"] == "0 0"  # CUDA_ERROR_NOT_READY
    assert text["not_ready_name"] == "CUDA_ERROR_NOT_READY"
    assert v["enable_peer"] == 0 and v["enable_peer_again"] == 704  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    assert v["runtime_last_error"] == 0
    # before peer access the copy is staged through host memory (slower), after it direct
    assert v["driver_peer_ms"] == v["runtime_peer_ms"] < v["staged_peer_ms"]
    assert v["disable_peer"] == 0
    assert text["no_context"] == f"{CUDA_ERROR_INVALID_CONTEXT} {CUDA_ERROR_INVALID_CONTEXT}"
