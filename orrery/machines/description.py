"""Machine descriptions: what a simulated cluster is made of.

A machine is a TOML file (built-ins live in ``orrery/machines/``) validated
against the schema below, with quantities in units (``53.8GB/s``, ``2.5us``).
Parameters can be overridden (``--set pcie.bandwidth=64GB/s``) before
validation, so an override is checked exactly as the file is. This module does
not know about SimGrid: ``platform.py`` turns a Machine into a platform.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Mapping, Sequence, Set
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import schema
from ..errors import InputError
from ..schema import Bandwidth, Flops, Frequency, Problems, SignedTime, Size, Time, input_error

#: A count the shim keeps in a C int.
Count = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
_T = TypeVar("_T")


def required(value: _T | None, key: str) -> _T:
    """A key that a validated Machine has whenever it is read: the validators demand it where the
    description's other keys need it (nvlink.links_per_gpu with an NVSwitch, ...)."""
    if value is None:
        raise ValueError(f"machine key {key} is unset where its validation requires it (an Orrery bug)")
    return value


#: The platform has a host per GPU and, on a mesh, a link per pair of GPUs of a node.
MAX_GPUS_PER_NODE = 256
MAX_CPU_SOCKETS = 16
Flag = Annotated[bool, Field(strict=True)]  # true or false, not "yes" or 1


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("expected a name (not empty or blank)")
    return text


Name = Annotated[str, AfterValidator(_not_blank)]


class _Section(BaseModel):
    # defer_build: each section's validator is built when first used, not as `orrery` imports
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Node(_Section):
    gpus: Annotated[Count, Field(le=MAX_GPUS_PER_NODE)] = Field(description="GPUs per node.")
    cpu_sockets: Annotated[Count, Field(le=MAX_CPU_SOCKETS)] = Field(description="CPU sockets per node.")
    host_memory_bandwidth: Bandwidth = Field(
        description=(
            "Host memory bandwidth: the link between a socket's root complex and its memory, which host copies "
            "and the NIC's DMA of host buffers cross."
        )
    )
    host_memcpy_bandwidth: Bandwidth = Field(
        description=(
            "Rate of a copy within host memory: host-to-host copies, and MPI messages between host buffers of "
            "two ranks of a node (shared memory). `orrery calibrate` fits it from shared-memory windows."
        )
    )
    socket_link_bandwidth: Bandwidth | None = Field(
        None,
        description=(
            "The link between two CPU sockets (xGMI, UPI) as PCIe traffic crosses it, per direction. Set it and "
            "socket_link_latency (both or neither) to give each socket its own root complex and host memory, the "
            "PCIe switches spread over the sockets in order, a GPU copying to and from its own socket's memory and "
            "a rank's process on its GPU's socket; unset, the node has one root complex."
        ),
    )
    socket_link_latency: Time | None = Field(
        None, description="Latency of the link between two CPU sockets (with socket_link_bandwidth)."
    )

    @property
    def sockets_modelled(self) -> int:
        """How many root complexes the platform gives the node."""
        return self.cpu_sockets if self.socket_link_bandwidth is not None else 1


class Gpu(_Section):
    model: Name = Field(description="The GPU's name, as cudaGetDeviceProperties reports it.")
    sm_count: Count = Field(description="Streaming multiprocessors (a device property).")
    memory: Size = Field(description="Device memory: cudaMalloc beyond it fails with cudaErrorMemoryAllocation.")
    hbm_bandwidth: Bandwidth = Field(
        description=(
            "HBM bandwidth, for the record: skeleton mode's kernel times come from the cost file, and device-to-device "
            "copies take d2d_bandwidth."
        )
    )
    peak_fp64: Flops = Field(description="Peak FP64 rate, for the record (kernel times come from the cost file).")
    peak_fp32: Flops = Field(description="Peak FP32 rate, for the record (kernel times come from the cost file).")
    peak_bf16: Flops = Field(description="Peak BF16 rate, for the record (kernel times come from the cost file).")
    compute_capability: Annotated[str, Field(pattern=r"^\d+\.\d+$")] = Field(
        description="Compute capability, MAJOR.MINOR (a device property)."
    )
    clock_rate: Frequency | None = Field(
        None,
        description=(
            "The SMs' highest clock (cudaDevAttrClockRate, deviceQuery's 'GPU Max Clock rate'), for the record: "
            "kernel times come from the cost file. Unset: a program that asks for it stops, naming this key."
        ),
    )
    memory_clock_rate: Frequency | None = Field(
        None,
        description=(
            "The memory's clock (cudaDevAttrMemoryClockRate, deviceQuery's 'Memory Clock rate'); its data moves "
            "twice per cycle, so 2 x this x memory_bus_width / 8 is the peak bandwidth. Unset: a program that asks "
            "for it stops, naming this key."
        ),
    )
    l2_cache: Size = Field(description="L2 cache size (a device property).")
    memory_bus_width: Count = Field(description="Memory bus width in bits (a device property).")
    max_threads_per_sm: Count = Field(description="Threads per multiprocessor at most (a device property).")
    max_blocks_per_sm: Count = Field(description="Blocks per multiprocessor at most (a device property).")
    shared_per_block: Size = Field(description="Shared memory per block (a device property).")
    shared_per_block_optin: Size = Field(description="Shared memory per block with opt-in (a device property).")
    shared_per_sm: Size = Field(description="Shared memory per multiprocessor (a device property).")
    copy_engines: Count = Field(
        description=(
            "Copy engines: with 2, one for host-to-device, one for device-to-host and outgoing peer copies; with 1, "
            "all copies share it. A copy overlaps kernels and copies in the other direction, and waits for the copy "
            "ahead of it in its own direction."
        )
    )
    d2d_bandwidth: Bandwidth = Field(
        description=(
            "Rate of a device-to-device copy (work of the GPU, sharing it with its kernels), and of messages between "
            "ranks that share one GPU."
        )
    )
    d2d_latency: Time = Field(
        description="Fixed time of a device-to-device copy (and of messages between ranks that share one GPU)."
    )
    memset_bandwidth: Bandwidth = Field(description="Rate of a memset (work of the GPU).")


class Overheads(_Section):
    launch: Time = Field(description="Host time of a kernel launch.")
    memcpy: Time = Field(
        description="Host time of issuing a copy or memset (and of each chunk a staged message copies)."
    )
    sync: Time = Field(description="Host time of returning from a synchronisation.")


class HostLink(_Section):
    """How a GPU reaches host memory: through its PCIe switch, or a direct
    CPU-GPU link (NVLink-C2C on Grace Hopper)."""

    kind: Literal["pcie", "nvlink-c2c"] = Field(
        description=(
            "pcie: through the GPU's PCIe switch and the root complex; nvlink-c2c: a direct CPU-GPU link (Grace "
            "Hopper)."
        )
    )
    bandwidth: Bandwidth | None = Field(None, description="nvlink-c2c only (and needed there): per direction.")
    latency: Time | None = Field(None, description="nvlink-c2c only (and needed there).")


class Pcie(_Section):
    generation: Count = Field(description="PCIe generation, for the record (the bandwidth is given).")
    lanes: Count = Field(description="Lanes of a GPU's link, for the record (the bandwidth is given).")
    bandwidth: Bandwidth = Field(
        description=(
            "Per direction, of each PCIe link (a device's x16 link, a switch's uplink); also the rate of a staged "
            "message's chunk copies."
        )
    )
    latency: Time = Field(description="Latency per PCIe hop.")
    gpus_per_switch: Count = Field(description="GPUs (with their rails' NICs) sharing one PCIe switch and its uplink.")


class NvLink(_Section):
    topology: Literal["mesh", "nvswitch", "none"] = Field(
        description=(
            "mesh: links between every two GPUs of a node; nvswitch: each GPU's links to one switch; none: GPUs of a "
            "node reach each other over PCIe."
        )
    )
    links_per_pair: Count | None = Field(None, description="mesh: links between two GPUs (needed there).")
    links_per_gpu: Count | None = Field(None, description="nvswitch: links of one GPU (needed there).")
    link_bandwidth: Bandwidth | None = Field(None, description="Per link and direction (needed with NVLink).")
    latency: Time | None = Field(None, description="GPU to GPU (needed with NVLink).")


class Nic(_Section):
    per_node: Count = Field(description="NICs per node, at most node.gpus: GPU g uses NIC g * nics / gpus (its rail).")
    bandwidth: Bandwidth = Field(description="Per NIC and direction.")
    latency: Time = Field(description="Of the NIC's link into the fabric.")


class Fabric(_Section):
    topology: Literal["fat-tree", "rail-optimized", "dragonfly"] = Field(
        description=(
            "fat-tree: leaves under spines; rail-optimized: one switch per rail; dragonfly: groups of routers, "
            "minimal routes (local, global, local)."
        )
    )
    switch_latency: Time = Field(description="Crossing a switch, spread over the links around it.")
    nodes_per_leaf: Count = Field(
        description=(
            "Nodes under one leaf (fat-tree), one rail switch per rail (rail-optimized) or one router (dragonfly)."
        )
    )
    oversubscription: Annotated[float, Field(strict=True, ge=1, allow_inf_nan=False)] = Field(
        description=("A switch's downlink over uplink bandwidth, each level's uplinks: a finite ratio, a plain number.")
    )
    levels: Literal[2, 3] = Field(
        2,
        description=(
            "Fat-tree (and rail-optimized) levels: 2, leaves under one spine; 3, leaves grouped in pods of "
            "leaves_per_pod under a pod spine each, the pod spines under one core. 2 with a dragonfly."
        ),
    )
    leaves_per_pod: Count | None = Field(None, description="Leaves per pod (needed with levels = 3).")
    routers_per_group: Count | None = Field(
        None,
        description=(
            "dragonfly (needed there): routers per group, all-to-all within it over local links; one global link "
            "between every two groups (router b mod R of group a to router a mod R of group b)."
        ),
    )
    local_bandwidth: Bandwidth | None = Field(
        None, description="dragonfly (needed there): per local link and direction."
    )
    global_bandwidth: Bandwidth | None = Field(
        None, description="dragonfly (needed there): per global link and direction."
    )


class Mpi(_Section):
    """MPI protocol per path: host buffers, or device buffers (CUDA-aware MPI)."""

    eager_threshold_host: Size = Field(
        description=("Host buffers: messages this large or larger use rendezvous (the sender waits for the receiver).")
    )
    eager_threshold_device: Size = Field(description="The same for device buffers.")
    send_overhead_host: Time = Field(description="Software time of the sender per message, host buffers.")
    recv_overhead_host: Time = Field(description="Software time of the receiver per message, host buffers.")
    send_overhead_device: Time = Field(description="Software time of the sender per message, device buffers.")
    recv_overhead_device: Time = Field(description="Software time of the receiver per message, device buffers.")
    send_overhead_host_intra: Time | None = Field(
        None,
        description=(
            "send_overhead_host for messages within a node, where the library may take another transport (unset: as "
            "between nodes)."
        ),
    )
    recv_overhead_host_intra: Time | None = Field(
        None, description="recv_overhead_host within a node (unset: as between nodes)."
    )
    send_overhead_device_intra: Time | None = Field(
        None, description="send_overhead_device within a node (unset: as between nodes)."
    )
    recv_overhead_device_intra: Time | None = Field(
        None, description="recv_overhead_device within a node (unset: as between nodes)."
    )
    collective_selector: Literal["default", "ompi", "mpich", "mvapich2", "impi"] = Field(
        description=("Whose choice of collective algorithms SMPI reproduces.")
    )
    intra_node: Literal["direct", "nic"] = Field(
        "direct",
        description=(
            "How messages between two ranks of one node travel: direct (NVLink or PCIe peer to peer for device "
            "buffers, shared memory for host buffers) or nic (out through the NIC and back, as with a library that "
            "has only a network provider, e.g. Open MPI over libfabric CXI without its shared-memory and GPU IPC "
            "paths)."
        ),
    )
    ipc_setup: Time | None = Field(
        None,
        description=(
            "CUDA IPC set-up of a device-buffer message within a node at or above eager_threshold_device (a "
            "rendezvous, which CUDA-aware libraries move by CUDA IPC): the first such message from a device "
            "allocation to a peer rank pays it, once (cuIpcGetMemHandle and cuIpcOpenMemHandle); later ones from "
            "the same allocation to the same peer hit the library's cache; a freed and reallocated buffer misses "
            "again. Charged in the send call before the message is posted. Unset (the default): no set-up "
            "modelled; no measurement quantifies it on a built-in (docs/simulation.md)."
        ),
    )
    device_sync: Literal["none", "legacy", "device"] | None = Field(
        None,
        description=(
            "What a point-to-point send of a device buffer waits for before the library reads it: none (as "
            "unset, the default; Open MPI + UCX: the program must have synchronised), legacy (the library's copy is "
            "ordered as one on the legacy default stream: the pending work of the rank's blocking streams and "
            "the legacy default stream of the buffer's device) or device (all of the rank's work on that device, "
            "as a cudaDeviceSynchronize). The wait is host time of the send call, with overheads.sync."
        ),
    )
    progress: Literal["asynchronous", "in_calls"] = Field(
        "asynchronous",
        description=(
            "When a non-blocking collective that runs on the blocking call's algorithm (MPI_Iallreduce, MPI_Ireduce, "
            "MPI_Ibcast, MPI_Ibarrier, MPI_Iallgather: docs/simulation.md) advances: asynchronous (the default: on its "
            "own while the rank computes, as with a progress thread or offload) or in_calls (only inside MPI calls, as "
            "Open MPI's libnbc and MPICH without MPICH_ASYNC_PROGRESS: the call posts its first messages, and each next "
            "step waits for the rank's next MPI call, MPI_Test included, or goes on while it waits in one)."
        ),
    )
    poll_time: Annotated[Time, Field(gt=0)] = Field(
        1e-7,
        description=(
            "Host time of one MPI_Test, MPI_Testall (per pending request), MPI_Iprobe call, or one poll of a blocking "
            "MPI_Probe: a library's progress poll (tens to hundreds of nanoseconds). A polled completion is seen at "
            "the first poll after it, so this also bounds how late a polling loop sees it."
        ),
    )

    def overhead(self, side: str, kind: str, intra: bool) -> float:
        """Per-message software time of the sender (side "send") or receiver ("recv") for
        host or device buffers (kind), within a node or between nodes."""
        within = getattr(self, f"{side}_overhead_{kind}_intra") if intra else None
        return getattr(self, f"{side}_overhead_{kind}") if within is None else within


class GpuDirect(_Section):
    rdma: Flag = Field(
        description=("NICs read and write GPU memory; false: device-buffer messages are staged through host memory.")
    )
    staging_chunk: Size = Field(
        description=(
            "Without RDMA (or above rdma_limit), the MPI library copies a message through host memory in chunks "
            "this large, each a copy that pays overheads.memcpy."
        )
    )
    rdma_limit: Size | None = Field(
        None,
        description=(
            "With rdma: the largest device-buffer message between nodes sent by GPUDirect RDMA; larger ones are "
            "staged through host memory in chunks of staging_chunk, as without RDMA (MVAPICH2-GDR's "
            "MV2_GPUDIRECT_LIMIT: a hybrid of GPUDirect RDMA and pipelining). Unset (the default): no limit."
        ),
    )


class Segment(_Section):
    """One segment of a measured model (copies, messages, gaps): a size up to `up_to` takes
    ``latency + size / bandwidth``."""

    up_to: Annotated[Size, Field(ge=0)] | None = Field(
        None, description=("The largest copy or message it covers; on every segment but the last, increasing.")
    )
    latency: SignedTime = Field(
        description=(
            "Fixed time; may be negative on a segment after the first, where the time grows faster than the size "
            "(buffers falling out of a cache), so long as the time stays 0 or more over the sizes it covers."
        )
    )
    bandwidth: Annotated[Bandwidth, Field(gt=0)] = Field(description="The size term: latency + size / bandwidth.")


Piecewise = Annotated[list[Segment], Field(min_length=1)]


class _Measured(_Section):
    """A section of measured models (written by ``orrery calibrate``): per key a list of
    segments by size, each but the last with its `up_to`, increasing."""

    section: ClassVar[str]

    @model_validator(mode="after")
    def _ordered(self) -> _Measured:
        problems = []
        for key, model in self:
            if model is None:
                continue
            *inner, last = model
            if last.up_to is not None:
                problems.append(
                    (
                        f"{key}.{len(model) - 1}.up_to",
                        last.up_to,
                        "no up_to on the last segment: it covers every larger size",
                    )
                )
            bounds = [seg.up_to for seg in inner]
            if None in bounds or any(b <= a for a, b in itertools.pairwise(bounds)):
                problems.append((key, bounds, "up_to on every segment but the last, increasing"))
                continue
            for i, (seg, start) in enumerate(zip(model, [0.0, *bounds])):
                if isinstance(seg, Segment) and seg.latency + start / seg.bandwidth < 0:
                    least = (
                        "a non-negative latency"
                        if not start
                        else (f"a latency of at least {-start / seg.bandwidth!r} s, no negative time above {start:g} B")
                    )
                    problems.append((f"{key}.{i}.latency", seg.latency, f"segment {i + 1} {least}"))
        if problems:
            raise Problems(problems)
        return self


class Copies(_Measured):
    """Measured copy times, piecewise in the copy's size (``orrery calibrate``
    writes them): a copy of s bytes occupies its copy engine for
    ``latency + s / bandwidth`` of the first segment with ``up_to >= s``
    (still sharing the links of its route with other traffic; a latency
    below the route's own is raised to it); the API
    overheads are charged as without a model. A direction without a model
    takes its route's latency and bandwidth (H2D, D2H, peer) or
    gpu.d2d_latency and gpu.d2d_bandwidth (D2D)."""

    section = "copies"
    H2D: Piecewise | None = Field(None, description="Host-to-device copies.")
    D2H: Piecewise | None = Field(None, description="Device-to-host copies.")
    D2D: Piecewise | None = Field(None, description="Device-to-device copies within one GPU.")
    peer: Piecewise | None = Field(None, description="Peer copies between two GPUs.")
    peer_staged: Piecewise | None = Field(
        None,
        description="Peer copies between two GPUs of a rank that has not enabled peer access between "
        "them (cudaDeviceEnablePeerAccess, either way): the driver stages them through host memory, "
        "each half (source GPU to host memory, host memory to destination GPU) taking "
        "latency + size / bandwidth, the two at once; unset: each half at its route's own rate.",
    )


class Messages(_Measured):
    """Measured MPI point-to-point times per path, piecewise in the message size
    (``orrery calibrate`` writes them from osu_latency sweeps): a lone message of
    s bytes takes ``latency + s / bandwidth`` from the send call to the
    receive's return (osu_latency's one-way figure), the per-message
    overheads mpi.send_overhead_* and mpi.recv_overhead_* included. The
    simulator keeps those overheads and the route's bandwidth, and makes the
    rest the route's latency for that message (SimGrid's latency factor): the
    MPI library's protocol time, which overlaps between concurrent messages
    (osu_bw's window) instead of holding links. A segment faster than the
    route is held to the route. Paths: device or host buffers, within a node
    or between nodes."""

    section = "messages"
    device_intra: Piecewise | None = Field(None, description="Device buffers, within a node.")
    device_inter: Piecewise | None = Field(None, description="Device buffers, between nodes.")
    host_intra: Piecewise | None = Field(None, description="Host buffers, within a node.")
    host_inter: Piecewise | None = Field(None, description="Host buffers, between nodes.")


class Gaps(_Measured):
    """Measured gaps per path, piecewise in the message size (``orrery calibrate``
    writes them from the osu_bw and osu_bibw windows where a per-message overhead
    cannot give them): LogGP's g and G (Alexandrov et al., 1995). After a rank's
    send of s bytes starts on the path, its next send there starts no sooner than
    ``latency + s / bandwidth`` later; a send issued sooner waits in the call, as
    a LogP sender stalls. A lone message is not delayed (its time is messages.*
    or the route's), so a gap can be longer than a lone message's whole time, as
    MPI libraries whose windows of small messages run slower than their one-way
    latency show. Applies to MPI_Send, MPI_Isend and MPI_Sendrecv (the calls with
    the per-path protocol)."""

    section = "gaps"
    device_intra: Piecewise | None = Field(None, description="Device buffers, within a node.")
    device_inter: Piecewise | None = Field(None, description="Device buffers, between nodes.")
    host_intra: Piecewise | None = Field(None, description="Host buffers, within a node.")
    host_inter: Piecewise | None = Field(None, description="Host buffers, between nodes.")


class CorrectionSegment(_Section):
    """One segment of a collective's correction: calls whose message size is up to `up_to` take
    `extra` longer, on `ranks` ranks; on a communicator of another size P the extra scales with
    the number of steps the collective's algorithm takes (`steps`): a per-step cost times the
    steps, so a correction measured at 8 ranks does not stay a constant at 1024."""

    up_to: Annotated[Size, Field(ge=0)] | None = Field(
        None,
        description=("The largest message (count x type size) it covers; on every segment but the last, increasing."),
    )
    extra: Annotated[Time, Field(ge=0)] = Field(
        description="Added to each call of the collective in this range on `ranks` ranks (at every rank count if steps is constant)."
    )
    steps: Literal["constant", "log2", "linear"] = Field(
        "constant",
        description=(
            "How the extra grows with the communicator's size P: constant (the same at every P), log2 (x "
            "ceil(log2 P) / ceil(log2 ranks): recursive doubling or halving, binomial trees, Bruck), linear (x "
            "(P - 1) / (ranks - 1): one step per peer, as rings and pairwise or linear exchanges take)."
        ),
    )
    ranks: Annotated[int, Field(strict=True, ge=2, le=2**31 - 1)] | None = Field(
        None, description="The communicator size the extra was measured on; required unless steps is constant."
    )

    @model_validator(mode="after")
    def _measured_somewhere(self) -> CorrectionSegment:
        if self.steps != "constant" and self.ranks is None:
            raise Problems([("ranks", None, f"the rank count the extra was measured on (steps = {self.steps!r})")])
        return self

    def extra_at(self, ranks: int) -> float:
        """The extra time of a call on a communicator of `ranks` ranks."""
        return self.extra * step_count(self.steps, ranks) / step_count(self.steps, self.ranks or ranks)


def step_count(steps: str, ranks: int) -> float:
    """The steps a collective's algorithm takes on `ranks` ranks, by CorrectionSegment.steps: what
    a correction's per-step cost is multiplied by (the shim's collective_correction computes the same)."""
    if steps == "log2":
        return float(max(math.ceil(math.log2(ranks)), 1))
    if steps == "linear":
        return float(max(ranks - 1, 1))
    return 1.0


Corrections = Annotated[list[CorrectionSegment], Field(min_length=1)]


class Collectives(_Measured):
    """Measured corrections per (collective, message size range), fitted by
    ``orrery calibrate`` where the point-to-point model misses a collective:
    each rank's blocking call takes `extra` seconds longer than simulated when
    its message size (count x type size, OSU's figure; in place, the receive
    block's) falls in the range. An added time (not a factor) leaves the ranks'
    relative timing alone, so it does not compound over iterations. It can only add time: a collective the
    model makes too slow stays so, and calibration reports it. A key NAME_device
    or NAME_host applies to calls on device or host buffers (an MPI library's
    collectives take other ways for each: staging, CUDA IPC, GPUDirect) and
    stands before NAME, which applies to both."""

    section = "collectives"
    bcast: Corrections | None = Field(None, description="MPI_Bcast on any buffers.")
    bcast_device: Corrections | None = Field(None, description="MPI_Bcast on device buffers (before bcast).")
    bcast_host: Corrections | None = Field(None, description="MPI_Bcast on host buffers (before bcast).")
    reduce: Corrections | None = Field(None, description="MPI_Reduce on any buffers.")
    reduce_device: Corrections | None = Field(None, description="MPI_Reduce on device buffers (before reduce).")
    reduce_host: Corrections | None = Field(None, description="MPI_Reduce on host buffers (before reduce).")
    allreduce: Corrections | None = Field(None, description="MPI_Allreduce on any buffers.")
    allreduce_device: Corrections | None = Field(
        None, description="MPI_Allreduce on device buffers (before allreduce)."
    )
    allreduce_host: Corrections | None = Field(None, description="MPI_Allreduce on host buffers (before allreduce).")
    gather: Corrections | None = Field(None, description="MPI_Gather on any buffers.")
    gather_device: Corrections | None = Field(None, description="MPI_Gather on device buffers (before gather).")
    gather_host: Corrections | None = Field(None, description="MPI_Gather on host buffers (before gather).")
    scatter: Corrections | None = Field(None, description="MPI_Scatter on any buffers.")
    scatter_device: Corrections | None = Field(None, description="MPI_Scatter on device buffers (before scatter).")
    scatter_host: Corrections | None = Field(None, description="MPI_Scatter on host buffers (before scatter).")
    allgather: Corrections | None = Field(None, description="MPI_Allgather on any buffers.")
    allgather_device: Corrections | None = Field(
        None, description="MPI_Allgather on device buffers (before allgather)."
    )
    allgather_host: Corrections | None = Field(None, description="MPI_Allgather on host buffers (before allgather).")
    alltoall: Corrections | None = Field(None, description="MPI_Alltoall on any buffers.")
    alltoall_device: Corrections | None = Field(None, description="MPI_Alltoall on device buffers (before alltoall).")
    alltoall_host: Corrections | None = Field(None, description="MPI_Alltoall on host buffers (before alltoall).")
    reduce_scatter: Corrections | None = Field(None, description="MPI_Reduce_scatter on any buffers.")
    reduce_scatter_device: Corrections | None = Field(
        None, description="MPI_Reduce_scatter on device buffers (before reduce_scatter)."
    )
    reduce_scatter_host: Corrections | None = Field(
        None, description="MPI_Reduce_scatter on host buffers (before reduce_scatter)."
    )
    reduce_scatter_block: Corrections | None = Field(None, description="MPI_Reduce_scatter_block on any buffers.")
    reduce_scatter_block_device: Corrections | None = Field(
        None, description="MPI_Reduce_scatter_block on device buffers (before reduce_scatter_block)."
    )
    reduce_scatter_block_host: Corrections | None = Field(
        None, description="MPI_Reduce_scatter_block on host buffers (before reduce_scatter_block)."
    )


#: NCCL's default constants, the [nccl] section's defaults (NVIDIA/nccl src/graph/tuning.cc at
#: commit 5067397c: ncclTunerConstantsDefaults.baseLatencies, nvlsEfficiency for Hopper).
NCCL_BASE_LATENCY_US = {
    "tree_ll": 6.8,
    "tree_ll128": 14.0,
    "tree_simple": 8.4,
    "ring_ll": 6.6,
    "ring_ll128": 14.0,
    "ring_simple": 8.4,
    "nvls_simple": 0.0,
    "nvls_tree_simple": 0.0,
    "pat_simple": 8.0,
}
NCCL_NVLS_EFFICIENCY = 0.85
#: s: NCCL's per-step latency of NVLS (and NVLSTree) on NVLink, Simple (tuning.cc @5067397c,
#: hwLatencies[NCCL_HW_NVLINK][NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] = 25 us).
NCCL_NVLS_STEP_LATENCY = 25e-6
Fraction = Annotated[float, Field(strict=False, gt=0, le=1)]


def _nccl_latency(combination: str) -> Any:
    algo, proto = combination.rsplit("_", 1)
    return Field(
        NCCL_BASE_LATENCY_US[combination] * 1e-6,
        description=(
            f"Fixed time of one NCCL {algo.replace('_', ' ')} collective with protocol {proto}, beyond its steps' "
            "transfers on the platform's routes (default NCCL's baseLatencies)."
        ),
    )


class Nccl(_Section):
    """What a simulated NCCL collective takes beyond the platform's routes. Flat keys, one per
    algorithm and protocol NCCL uses (``base_latency_<algo>_<proto>``), so that each has its own
    source and ``--set``. NCCL's choice of algorithm and protocol does not read them: it follows
    NCCL's own tuning model with NCCL's constants (interpose/nccl/tuning.cpp)."""

    base_latency_tree_ll: Time = _nccl_latency("tree_ll")
    base_latency_tree_ll128: Time = _nccl_latency("tree_ll128")
    base_latency_tree_simple: Time = _nccl_latency("tree_simple")
    base_latency_ring_ll: Time = _nccl_latency("ring_ll")
    base_latency_ring_ll128: Time = _nccl_latency("ring_ll128")
    base_latency_ring_simple: Time = _nccl_latency("ring_simple")
    base_latency_nvls_simple: Time = _nccl_latency("nvls_simple")
    base_latency_nvls_tree_simple: Time = _nccl_latency("nvls_tree_simple")
    base_latency_pat_simple: Time = _nccl_latency("pat_simple")
    step_latency_nvls: Time = Field(
        NCCL_NVLS_STEP_LATENCY,
        description=(
            "Latency of one NVLS step on NVLink (the NVSwitch's reduction and multicast), which every NVLS and "
            "NVLSTree transfer within a node waits beyond its route's latency (default NCCL's hwLatencies for "
            "NVLS on NVLink; NCCL's choice of algorithm keeps NCCL's value)."
        ),
    )
    efficiency_nvlink: Fraction = Field(
        1.0, description="Fraction of an NVLink route's bandwidth NCCL's transfers get (1: all of it)."
    )
    efficiency_pcie: Fraction = Field(1.0, description="The same for PCIe routes.")
    efficiency_net: Fraction = Field(1.0, description="The same for routes through the NICs and the fabric.")
    nvls_efficiency: Fraction = Field(
        NCCL_NVLS_EFFICIENCY,
        description=(
            "Fraction of the NVLink bandwidth an NVLS (NVSwitch multicast) collective gets (default NCCL's "
            "nvlsEfficiency for Hopper)."
        ),
    )

    def base_latencies(self) -> dict[str, float]:
        """Seconds by `<algo>_<proto>` (the run description's nccl.base_latency_s)."""
        return {c: getattr(self, f"base_latency_{c}") for c in NCCL_BASE_LATENCY_US}


class Machine(_Section):
    name: Name = Field(description="The machine's name (a built-in's is its file's).")
    description: str = Field(description="One line, shown by `orrery machine list`.")
    node: Node = Field(description="A node: its GPUs, CPU sockets and host memory.")
    gpu: Gpu = Field(
        description=("Each GPU: model, memory, device properties, copy engines, device-to-device and memset rates.")
    )
    overheads: Overheads = Field(description="Host time of the CUDA calls (simulated time of the calling rank).")
    host_link: HostLink = Field(description="How a GPU reaches host memory.")
    pcie: Pcie = Field(description="The PCIe links and switches of a node.")
    nvlink: NvLink = Field(description="How the GPUs of a node are joined.")
    nic: Nic = Field(description="The NICs of a node.")
    fabric: Fabric = Field(description="The network between the nodes' NICs.")
    gpudirect: GpuDirect = Field(description="Whether NICs reach GPU memory (GPUDirect RDMA).")
    mpi: Mpi = Field(description="The MPI library's protocol and costs.")
    nccl: Nccl = Field(Nccl(), description="What NCCL's collectives take beyond the platform's routes.")
    copies: Copies = Field(Copies(), description="Measured copy models (optional; written by `orrery calibrate`).")
    messages: Messages = Field(
        Messages(), description=("Measured message models (optional; written by `orrery calibrate`).")
    )
    gaps: Gaps = Field(Gaps(), description="Measured gaps between sends (optional; written by `orrery calibrate`).")
    collectives: Collectives = Field(
        Collectives(), description=("Measured collective corrections (optional; written by `orrery calibrate`).")
    )
    sources: dict[str, str] = Field(
        {},
        description=(
            'Where each value comes from, by dotted key (`"pcie.bandwidth" = "measured: ..."`): shown by '
            "`orrery machine show`; a key that names no parameter is an error."
        ),
    )

    @model_validator(mode="after")
    def _semantics(self) -> Machine:
        problems: list[tuple[str, object, str]] = []
        known = [
            f"{name}.{field}"
            for name, section in self
            if isinstance(section, _Section)
            for field in type(section).model_fields
        ]
        for key in self.sources:
            if key not in known:
                near = schema.closest(key, known)
                problems.append(
                    (
                        "sources",
                        key,
                        "keys that name machine parameters"
                        + (f" (did you mean '{near}'?)" if near else " (e.g. 'pcie.bandwidth')"),
                    )
                )
        if self.nic.per_node > self.node.gpus:
            problems.append(("nic.per_node", self.nic.per_node, f"at most node.gpus ({self.node.gpus}): a NIC per GPU"))
        needs = {
            "mesh": ("links_per_pair", "link_bandwidth", "latency"),
            "nvswitch": ("links_per_gpu", "link_bandwidth", "latency"),
            "none": (),
        }
        for field in needs[self.nvlink.topology]:
            if getattr(self.nvlink, field) is None:
                topology = self.nvlink.topology
                problems.append((f"nvlink.{field}", None, f"a value: nvlink.topology = '{topology}' needs it"))
        if self.fabric.topology == "dragonfly":
            for field in ("routers_per_group", "local_bandwidth", "global_bandwidth"):
                if getattr(self.fabric, field) is None:
                    problems.append((f"fabric.{field}", None, "a value: fabric.topology = 'dragonfly' needs it"))
        if self.fabric.levels == 3 and self.fabric.topology == "dragonfly":
            problems.append(
                (
                    "fabric.levels",
                    3,
                    ("2 with fabric.topology = 'dragonfly' (3 levels are for fat-tree and rail-optimized fabrics)"),
                )
            )
        if self.fabric.levels == 3 and self.fabric.leaves_per_pod is None:
            problems.append(("fabric.leaves_per_pod", None, "a value: fabric.levels = 3 needs it"))
        link = {
            "socket_link_bandwidth": self.node.socket_link_bandwidth,
            "socket_link_latency": self.node.socket_link_latency,
        }
        for field, other in (
            ("socket_link_bandwidth", "socket_link_latency"),
            ("socket_link_latency", "socket_link_bandwidth"),
        ):
            if link[field] is None and link[other] is not None:
                problems.append((f"node.{field}", None, f"a value with node.{other} (set both or neither)"))
        if self.node.socket_link_bandwidth is not None and self.host_link.kind != "pcie":
            problems.append(
                (
                    "node.socket_link_bandwidth",
                    self.node.socket_link_bandwidth,
                    (
                        f"no value with host_link.kind = '{self.host_link.kind}': it is for GPUs on PCIe, "
                        "an NVLink-C2C superchip has its own CPU"
                    ),
                )
            )
        if self.host_link.kind == "nvlink-c2c":
            for field in ("bandwidth", "latency"):
                if getattr(self.host_link, field) is None:
                    problems.append((f"host_link.{field}", None, "a value: host_link.kind = 'nvlink-c2c' needs it"))
        if problems:
            raise Problems(problems)
        return self

    @property
    def nvlink_pair_bandwidth(self) -> float:
        """Bytes/s between two GPUs of a node over NVLink, per direction."""
        if self.nvlink.topology == "mesh":
            return required(self.nvlink.links_per_pair, "nvlink.links_per_pair") * required(
                self.nvlink.link_bandwidth, "nvlink.link_bandwidth"
            )
        if self.nvlink.topology == "nvswitch":
            return required(self.nvlink.links_per_gpu, "nvlink.links_per_gpu") * required(
                self.nvlink.link_bandwidth, "nvlink.link_bandwidth"
            )
        raise ValueError(f"{self.name} has no NVLink")

    def parameters(self) -> dict[str, object]:
        """Every parameter the description sets, by dotted key."""
        return {
            f"{name}.{field}": value
            for name, section in self
            if isinstance(section, _Section)
            for field, value in section
            if value is not None
        }


def builtin_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".toml")
        for p in resources.files("orrery.machines.builtin").iterdir()
        if p.name.endswith(".toml")
    )


def _parse_override(text: str, source: str = "--set") -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise InputError(source, None, text, "KEY=VALUE, e.g. pcie.bandwidth=64GB/s")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.strip(), value


def parameter_keys() -> list[str]:
    """Every parameter a description may set, by dotted key."""
    return [
        f"{name}.{field}"
        for name, info in Machine.model_fields.items()
        if isinstance(info.annotation, type) and issubclass(info.annotation, _Section)
        for field in info.annotation.model_fields
    ]


def _apply_override(data: dict, key: str, value: object, source: str) -> None:
    section, _, field = key.partition(".")
    info = Machine.model_fields.get(section)
    model = info.annotation if info else None
    if not (isinstance(model, type) and issubclass(model, _Section) and field in model.model_fields):
        near = schema.closest(key, parameter_keys())
        expected = "a parameter of the machine" + (f" (did you mean '{near}'?)" if near else " (e.g. pcie.bandwidth)")
        if source == "--set":
            raise InputError(source, key, value, expected)
        raise InputError(source, f"overrides.{key}", value, expected)
    data.setdefault(section, {})[field] = value


def with_units(key: str, value: object) -> object:
    """A parameter's value in SI units (as calibration files hold them) with its unit written out."""
    return schema.with_units(schema.type_at(Machine, tuple(key.split("."))), value)


#: Sections that hold measured models, written by `orrery calibrate` (which fits them afresh).
MEASURED_MODELS = ("copies", "messages", "gaps", "collectives")


def load(
    name_or_path: str,
    overrides: Mapping[str, object] = {},
    measured_models: bool = True,
    calibration: tuple[str, Mapping[str, object]] | None = None,
) -> Machine:
    """Load a built-in machine by name or a description file, applying overrides (dotted key ->
    value as a description writes it, quantities with their units: parse_overrides makes them of
    `--set KEY=VALUE` strings); without `measured_models`, the description's copies, messages,
    gaps and collectives sections are left out first (what a calibration starts from). A
    `calibration` (its file, its overrides, alike) applies before the overrides, and a problem
    with one of its values is blamed on that file."""
    if isinstance(overrides, str) or not isinstance(overrides, Mapping):
        raise TypeError(
            f"overrides: a mapping of key -> value (parse_overrides reads --set strings), "
            f"not {type(overrides).__name__}"
        )
    path = Path(name_or_path)
    if name_or_path in builtin_names():
        source = f"built-in machine {name_or_path}"
        text = resources.files("orrery.machines.builtin").joinpath(f"{name_or_path}.toml").read_text()
    elif path.suffix == ".toml" and path.is_file():
        source = str(path)
        text = schema.read_text(path, "a machine description")
    else:
        raise InputError(
            "--machine", None, name_or_path, f"a built-in machine ({', '.join(builtin_names())}) or a .toml file"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(source, None, "invalid TOML", f"valid TOML ({e})") from None
    if not measured_models:
        for section in MEASURED_MODELS:
            data.pop(section, None)
    overridden: dict[str, str] = {}
    layers = [calibration] if calibration else []
    for where, values in [*layers, ("--set", overrides)]:
        for key, value in values.items():
            _apply_override(data, key, value, where)
            overridden[key] = where
    return validate(data, source, overridden)


def parse_overrides(texts: Sequence[str], source: str = "--set") -> dict[str, object]:
    """`--set KEY=VALUE` strings as overrides (key -> value): a VALUE TOML reads (a number, a
    quoted string, a table of a measured model's segments) as TOML, anything else as its text;
    a later string for a key wins."""
    return dict(_parse_override(text, source) for text in texts)


def validate(data: dict, source: str, overridden: Mapping[str, str] | Set[str] = frozenset()) -> Machine:
    """A description's data as a Machine, or an InputError naming every problem; `overridden`
    maps each key set from outside the file to where it came from ("--set" or a calibration
    file; a set of keys: all from --set)."""
    if not isinstance(overridden, Mapping):
        overridden = dict.fromkeys(overridden, "--set")
    try:
        return Machine.model_validate(data)
    except ValidationError as e:
        raise input_error(e, source, Machine, overridden=overridden) from None
