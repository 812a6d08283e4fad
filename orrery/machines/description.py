"""Machine descriptions: what a simulated cluster is made of.

A machine is a TOML file (built-ins live in ``orrery/machines/``) validated
against the schema below, with quantities in units (``53.8GB/s``, ``2.5us``).
Parameters can be overridden (``--set pcie.bandwidth=64GB/s``) before
validation, so an override is checked exactly as the file is. This module does
not know about SimGrid: ``platform.py`` turns a Machine into a platform.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import schema
from ..errors import InputError
from ..schema import Bandwidth, Flops, Problems, SignedTime, Size, Time, input_error

#: A count the shim keeps in a C int.
Count = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
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
    model_config = ConfigDict(extra="forbid", frozen=True)


class Node(_Section):
    gpus: Annotated[Count, Field(le=MAX_GPUS_PER_NODE)]
    cpu_sockets: Annotated[Count, Field(le=MAX_CPU_SOCKETS)]
    host_memory_bandwidth: Bandwidth
    host_memcpy_bandwidth: Bandwidth
    # The link between two CPU sockets (xGMI, UPI) as PCIe traffic crosses it, per direction.
    # Set both to give each socket its own root complex and host memory, the PCIe switches
    # spread over the sockets in order; unset, the node has one root complex.
    socket_link_bandwidth: Bandwidth | None = None
    socket_link_latency: Time | None = None

    @property
    def sockets_modelled(self) -> int:
        """How many root complexes the platform gives the node."""
        return self.cpu_sockets if self.socket_link_bandwidth is not None else 1


class Gpu(_Section):
    model: Name
    sm_count: Count
    memory: Size
    hbm_bandwidth: Bandwidth
    peak_fp64: Flops
    peak_fp32: Flops
    peak_bf16: Flops
    compute_capability: Annotated[str, Field(pattern=r"^\d+\.\d+$")]
    l2_cache: Size
    memory_bus_width: Count
    max_threads_per_sm: Count
    max_blocks_per_sm: Count
    shared_per_block: Size
    shared_per_block_optin: Size
    shared_per_sm: Size
    copy_engines: Count
    d2d_bandwidth: Bandwidth
    d2d_latency: Time
    memset_bandwidth: Bandwidth


class Overheads(_Section):
    launch: Time
    memcpy: Time
    sync: Time


class HostLink(_Section):
    """How a GPU reaches host memory: through its PCIe switch, or a direct
    CPU-GPU link (NVLink-C2C on Grace Hopper)."""

    kind: Literal["pcie", "nvlink-c2c"]
    bandwidth: Bandwidth | None = None  # nvlink-c2c only: per direction
    latency: Time | None = None         # nvlink-c2c only


class Pcie(_Section):
    generation: Count
    lanes: Count
    bandwidth: Bandwidth
    latency: Time
    gpus_per_switch: Count  # GPUs (with their rails' NICs) sharing one PCIe switch and its uplink


class NvLink(_Section):
    topology: Literal["mesh", "nvswitch", "none"]
    links_per_pair: Count | None = None  # mesh: links between two GPUs
    links_per_gpu: Count | None = None   # nvswitch: links of one GPU
    link_bandwidth: Bandwidth | None = None  # per link and direction
    latency: Time | None = None              # GPU to GPU


class Nic(_Section):
    per_node: Count
    bandwidth: Bandwidth
    latency: Time


class Fabric(_Section):
    topology: Literal["fat-tree", "rail-optimized", "dragonfly"]
    switch_latency: Time
    # nodes under one leaf (fat-tree), one rail switch per rail (rail-optimized) or one router (dragonfly)
    nodes_per_leaf: Count
    # a switch's downlink over uplink bandwidth (fat-tree): a finite ratio, a plain number
    oversubscription: Annotated[float, Field(strict=True, ge=1, allow_inf_nan=False)]
    # fat-tree (and rail-optimized) levels: 2, leaves under one spine; 3, leaves grouped in pods
    # of leaves_per_pod under a pod spine each, the pod spines under one core
    levels: Literal[2, 3] = 2
    leaves_per_pod: Count | None = None
    # dragonfly: routers per group, all-to-all within it over local links; one global link
    # between every two groups (minimal routing: at most local, global, local)
    routers_per_group: Count | None = None
    local_bandwidth: Bandwidth | None = None   # per local link and direction
    global_bandwidth: Bandwidth | None = None  # per global link and direction


class Mpi(_Section):
    """MPI protocol per path: host buffers, or device buffers (CUDA-aware MPI)."""

    eager_threshold_host: Size    # messages this large or larger use rendezvous (the sender waits for the receiver)
    eager_threshold_device: Size
    send_overhead_host: Time      # software time of the sender per message
    recv_overhead_host: Time      # software time of the receiver per message
    send_overhead_device: Time
    recv_overhead_device: Time
    # the same for messages within a node, where the library may take another transport
    # (unset: as between nodes)
    send_overhead_host_intra: Time | None = None
    recv_overhead_host_intra: Time | None = None
    send_overhead_device_intra: Time | None = None
    recv_overhead_device_intra: Time | None = None
    # which MPI library's choice of collective algorithms SMPI reproduces
    collective_selector: Literal["default", "ompi", "mpich", "mvapich2", "impi"]

    # how messages between two ranks of one node travel: "direct" (NVLink, PCIe peer to peer,
    # shared memory) or "nic" (out through the NIC and back, as with only a network provider,
    # e.g. libfabric CXI without its shared-memory and GPU IPC paths)
    intra_node: Literal["direct", "nic"] = "direct"
    # host time of one MPI_Test, MPI_Testall, MPI_Iprobe call, or one poll of a blocking MPI_Probe:
    # a library's progress poll (tens to hundreds of nanoseconds). A polled completion is seen
    # at the first poll after it, so this also bounds how late a polling loop sees it
    poll_time: Annotated[Time, Field(gt=0)] = 1e-7

    def overhead(self, side: str, kind: str, intra: bool) -> float:
        """Per-message software time of the sender (side "send") or receiver ("recv") for
        host or device buffers (kind), within a node or between nodes."""
        within = getattr(self, f"{side}_overhead_{kind}_intra") if intra else None
        return getattr(self, f"{side}_overhead_{kind}") if within is None else within


class GpuDirect(_Section):
    rdma: Flag  # NICs read and write GPU memory; off: device-buffer messages are staged through host memory
    staging_chunk: Size  # without RDMA, the MPI library copies a message through host memory in chunks this large


class Segment(_Section):
    up_to: Annotated[Size, Field(ge=0)] | None = None  # the largest copy or message (bytes) it covers; not the last
    # may be negative on a segment after the first, where the time grows faster than the size
    # (buffers falling out of a cache), so long as the time stays >= 0 over the sizes it covers
    latency: SignedTime
    bandwidth: Annotated[Bandwidth, Field(gt=0)]


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
                problems.append((f"{key}.{len(model) - 1}.up_to", last.up_to,
                                 "no up_to on the last segment: it covers every larger size"))
            bounds = [seg.up_to for seg in inner]
            if None in bounds or any(b <= a for a, b in zip(bounds, bounds[1:])):
                problems.append((key, bounds, "up_to on every segment but the last, increasing"))
                continue
            for i, (seg, start) in enumerate(zip(model, [0.0, *bounds])):
                if isinstance(seg, Segment) and seg.latency + start / seg.bandwidth < 0:
                    least = "a non-negative latency" if not start else (
                        f"a latency of at least {-start / seg.bandwidth!r} s, no negative time above {start:g} B")
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
    H2D: Piecewise | None = None
    D2H: Piecewise | None = None
    D2D: Piecewise | None = None
    peer: Piecewise | None = None


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
    device_intra: Piecewise | None = None
    device_inter: Piecewise | None = None
    host_intra: Piecewise | None = None
    host_inter: Piecewise | None = None


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
    device_intra: Piecewise | None = None
    device_inter: Piecewise | None = None
    host_intra: Piecewise | None = None
    host_inter: Piecewise | None = None


class CorrectionSegment(_Section):
    up_to: Annotated[Size, Field(ge=0)] | None = None  # the largest message (bytes) it covers; not the last
    extra: Annotated[Time, Field(ge=0)]                # added to each call of the collective in this range


Corrections = Annotated[list[CorrectionSegment], Field(min_length=1)]


class Collectives(_Measured):
    """Measured corrections per (collective, message size range), fitted by
    ``orrery calibrate`` where the point-to-point model misses a collective:
    each rank's blocking call takes `extra` seconds longer than simulated when
    its message size (count x type size, OSU's figure) falls in the range. An
    added time (not a factor) leaves the ranks' relative timing alone, so it
    does not compound over iterations. It can only add time: a collective the
    model makes too slow stays so, and calibration reports it. A key NAME_device
    or NAME_host applies to calls on device or host buffers (an MPI library's
    collectives take other ways for each: staging, CUDA IPC, GPUDirect) and
    stands before NAME, which applies to both."""

    section = "collectives"
    bcast: Corrections | None = None
    bcast_device: Corrections | None = None
    bcast_host: Corrections | None = None
    reduce: Corrections | None = None
    reduce_device: Corrections | None = None
    reduce_host: Corrections | None = None
    allreduce: Corrections | None = None
    allreduce_device: Corrections | None = None
    allreduce_host: Corrections | None = None
    gather: Corrections | None = None
    gather_device: Corrections | None = None
    gather_host: Corrections | None = None
    scatter: Corrections | None = None
    scatter_device: Corrections | None = None
    scatter_host: Corrections | None = None
    allgather: Corrections | None = None
    allgather_device: Corrections | None = None
    allgather_host: Corrections | None = None
    alltoall: Corrections | None = None
    alltoall_device: Corrections | None = None
    alltoall_host: Corrections | None = None
    reduce_scatter: Corrections | None = None
    reduce_scatter_device: Corrections | None = None
    reduce_scatter_host: Corrections | None = None
    reduce_scatter_block: Corrections | None = None
    reduce_scatter_block_device: Corrections | None = None
    reduce_scatter_block_host: Corrections | None = None


class Machine(_Section):
    name: Name
    description: str
    node: Node
    gpu: Gpu
    overheads: Overheads
    host_link: HostLink
    pcie: Pcie
    nvlink: NvLink
    nic: Nic
    fabric: Fabric
    gpudirect: GpuDirect
    mpi: Mpi
    copies: Copies = Copies()
    messages: Messages = Messages()
    gaps: Gaps = Gaps()
    collectives: Collectives = Collectives()
    sources: dict[str, str] = {}

    @model_validator(mode="after")
    def _semantics(self) -> Machine:
        problems: list[tuple[str, object, str]] = []
        known = [f"{name}.{field}" for name, section in self if isinstance(section, _Section)
                 for field in type(section).model_fields]
        for key in self.sources:
            if key not in known:
                near = schema.closest(key, known)
                problems.append(("sources", key, "keys that name machine parameters" +
                                 (f" (did you mean '{near}'?)" if near else " (e.g. 'pcie.bandwidth')")))
        if self.nic.per_node > self.node.gpus:
            problems.append(("nic.per_node", self.nic.per_node, f"at most node.gpus ({self.node.gpus}): a NIC per GPU"))
        needs = {"mesh": ("links_per_pair", "link_bandwidth", "latency"),
                 "nvswitch": ("links_per_gpu", "link_bandwidth", "latency"), "none": ()}
        for field in needs[self.nvlink.topology]:
            if getattr(self.nvlink, field) is None:
                topology = self.nvlink.topology
                problems.append((f"nvlink.{field}", None, f"a value: nvlink.topology = '{topology}' needs it"))
        if self.fabric.topology == "dragonfly":
            for field in ("routers_per_group", "local_bandwidth", "global_bandwidth"):
                if getattr(self.fabric, field) is None:
                    problems.append((f"fabric.{field}", None, "a value: fabric.topology = 'dragonfly' needs it"))
        if self.fabric.levels == 3 and self.fabric.topology == "dragonfly":
            problems.append(("fabric.levels", 3, ("2 with fabric.topology = 'dragonfly' (3 levels are for fat-tree "
                                                  "and rail-optimized fabrics)")))
        if self.fabric.levels == 3 and self.fabric.leaves_per_pod is None:
            problems.append(("fabric.leaves_per_pod", None, "a value: fabric.levels = 3 needs it"))
        link = {"socket_link_bandwidth": self.node.socket_link_bandwidth,
                "socket_link_latency": self.node.socket_link_latency}
        for field, other in (("socket_link_bandwidth", "socket_link_latency"),
                             ("socket_link_latency", "socket_link_bandwidth")):
            if link[field] is None and link[other] is not None:
                problems.append((f"node.{field}", None, f"a value with node.{other} (set both or neither)"))
        if self.node.socket_link_bandwidth is not None and self.host_link.kind != "pcie":
            problems.append(("node.socket_link_bandwidth", self.node.socket_link_bandwidth,
                             (f"no value with host_link.kind = '{self.host_link.kind}': it is for GPUs on PCIe, "
                              "an NVLink-C2C superchip has its own CPU")))
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
            return self.nvlink.links_per_pair * self.nvlink.link_bandwidth
        if self.nvlink.topology == "nvswitch":
            return self.nvlink.links_per_gpu * self.nvlink.link_bandwidth
        raise ValueError(f"{self.name} has no NVLink")

    def parameters(self) -> dict[str, object]:
        """Every parameter the description sets, by dotted key."""
        return {f"{name}.{field}": value
                for name, section in self if isinstance(section, _Section)
                for field, value in section if value is not None}


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in resources.files("orrery.machines.builtin").iterdir()
                  if p.name.endswith(".toml"))


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
    return [f"{name}.{field}" for name, info in Machine.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, _Section)
            for field in info.annotation.model_fields]


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


def load(name_or_path: str, overrides: Mapping[str, object] = {}, measured_models: bool = True,
         calibration: tuple[str, Mapping[str, object]] | None = None) -> Machine:
    """Load a built-in machine by name or a description file, applying overrides (dotted key ->
    value as a description writes it, quantities with their units: parse_overrides makes them of
    `--set KEY=VALUE` strings); without `measured_models`, the description's copies, messages,
    gaps and collectives sections are left out first (what a calibration starts from). A
    `calibration` (its file, its overrides, alike) applies before the overrides, and a problem
    with one of its values is blamed on that file."""
    if isinstance(overrides, str) or not isinstance(overrides, Mapping):
        raise TypeError(f"overrides: a mapping of key -> value (parse_overrides reads --set strings), "
                        f"not {type(overrides).__name__}")
    path = Path(name_or_path)
    if name_or_path in builtin_names():
        source = f"built-in machine {name_or_path}"
        text = resources.files("orrery.machines.builtin").joinpath(f"{name_or_path}.toml").read_text()
    elif path.suffix == ".toml" and path.is_file():
        source = str(path)
        text = schema.read_text(path, "a machine description")
    else:
        raise InputError("--machine", None, name_or_path,
                         f"a built-in machine ({', '.join(builtin_names())}) or a .toml file")
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


def validate(data: dict, source: str, overridden: dict[str, str] | set[str] = frozenset()) -> Machine:
    """A description's data as a Machine, or an InputError naming every problem; `overridden`
    maps each key set from outside the file to where it came from ("--set" or a calibration
    file; a set of keys: all from --set)."""
    if not isinstance(overridden, dict):
        overridden = dict.fromkeys(overridden, "--set")
    try:
        return Machine.model_validate(data)
    except ValidationError as e:
        raise input_error(e, source, Machine, overridden=overridden) from None
