"""The run description: what ``orrery run`` tells the shim about a run (run.json in --out).

Its schema is interpose/core/run_description.json, installed beside the shim that reads it;
the shim's structs and parser are generated from the same file at build time
(interpose/core/gen_run_description.py), and the pydantic model here is built from it at import,
so a field, its type and its default are written once, for both sides. ``describe`` fills it
from a machine, a job layout and the run's options; the machine-wide values appear once, and
every GPU's and rank's place is listed, never left to be recovered from host names.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..machines import platform
from ..machines.description import Machine, step_count

SCHEMA_FILE = "run_description.json"


def _schema() -> dict[str, Any]:
    # installed by the package's build (CMakeLists.txt) beside the libraries
    return json.loads((resources.files("orrery") / "lib" / SCHEMA_FILE).read_text())


SCHEMA = _schema()

_PRIMITIVES: dict[str, Any] = {
    "bool": Annotated[bool, Field(strict=True)],
    "int": Annotated[int, Field(strict=True)],
    "number": Annotated[float, Field(strict=True, allow_inf_nan=False)],
    "limit": Annotated[float, Field(strict=True, allow_inf_nan=False)] | None,  # None: no limit
    "string": Annotated[str, Field(strict=True)],
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # validators built at first use


_models: dict[str, type[BaseModel]] = {}


def _annotation(t: str) -> Any:
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if t.startswith("enum:"):
        return Literal[tuple(SCHEMA["enums"][t[5:]])]
    if t in SCHEMA["types"]:
        return _model(t)
    # built at run time from the schema: a type expression mypy cannot follow, hence Any
    inner: Any = _annotation(t[t.index("<") + 1 : -1])
    if t.startswith("list<"):
        return list[inner]
    if t.startswith("map<"):
        return dict[str, inner]
    if t.startswith("optional<"):
        return inner | None
    raise ValueError(f"{SCHEMA_FILE}: unknown type {t!r}")


def _model(name: str) -> type[BaseModel]:
    if name not in _models:
        fields: dict[str, Any] = {}
        for field, spec in SCHEMA["types"][name]["fields"].items():
            bounds = {k: spec[b] for b, k in (("min", "ge"), ("above", "gt")) if b in spec}
            annotation = _annotation(spec["type"])
            if bounds:
                annotation = Annotated[annotation, Field(**bounds)]
            if "default" not in spec:
                fields[field] = (annotation, ...)
            elif spec["type"] in SCHEMA["types"]:
                fields[field] = (annotation, Field(default_factory=_model(spec["type"])))
            else:
                fields[field] = (annotation, spec["default"])
        _models[name] = create_model(name, __base__=_Strict, __doc__=SCHEMA["types"][name].get("doc"), **fields)
    return _models[name]


RunDescription = _model(SCHEMA["root"])


def default(field: str) -> Any:
    """The schema's default of a top-level field (the one place it is written)."""
    return SCHEMA["types"][SCHEMA["root"]]["fields"][field]["default"]


def choices(enum: str) -> tuple[str, ...]:
    return tuple(SCHEMA["enums"][enum])


def _segments(model) -> list[dict[str, Any]]:
    return [{"up_to": s.up_to, "latency_s": s.latency, "bandwidth": s.bandwidth} for s in model or []]


#: PCIe per-lane rate by generation in NCCL's units (x 100 Mb/s; topo.cc's table of link speeds):
#: a link's bandwidth is lanes x rate / 80 GB/s.
_NCCL_PCIE_LANE = {1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}


def _nccl_nvlink_gbps(sm: int) -> float:
    """NVLink bandwidth per link, GB/s, as NCCL's topology counts it (NVIDIA/nccl src/graph/topo.h
    @5067397c, ncclTopoNVLinkBw: SM100/SM90/SM86/SM80/SM70/SM60_NVLINK_BW)."""
    if sm == 86:
        return 12.0
    for least, gbps in ((100, 40.1), (90, 20.6), (80, 20.0), (70, 20.0), (60, 18.0)):
        if sm >= least:
            return gbps
    return 20.0


def nccl_model(machine: Machine) -> dict[str, Any]:
    """The run description's nccl field: the [nccl] keys, and what NCCL's topology detection
    would see of one node (what its tuning model reads; the execution uses the platform's routes)."""
    m = machine
    major, minor = m.gpu.compute_capability.split(".")
    sm = int(major) * 10 + int(minor)
    pcie = m.pcie.lanes * _NCCL_PCIE_LANE.get(m.pcie.generation, 60) / 80.0 * 1e9
    topology = m.nvlink.topology
    if topology == "nvswitch":
        intra = (m.nvlink.links_per_gpu or 0) * _nccl_nvlink_gbps(sm) * 1e9
    elif topology == "mesh":
        intra = (m.nvlink.links_per_pair or 0) * (m.node.gpus - 1) * _nccl_nvlink_gbps(sm) * 1e9
    else:
        intra = pcie
    nic = m.nic.bandwidth  # bytes/s; NCCL reads a NIC's rate in Mb/s and counts Mb/s / 8000 GB/s: the same
    inter = min(nic, pcie) * m.nic.per_node / m.node.gpus
    n = m.nccl
    return {
        "base_latency_s": n.base_latencies(),
        "efficiency": {"nvlink": n.efficiency_nvlink, "pcie": n.efficiency_pcie, "net": n.efficiency_net},
        "nvls_efficiency": n.nvls_efficiency,
        "nvls_step_latency_s": n.step_latency_nvls,
        "sm": sm,
        "intra_nvlink": topology != "none",
        "nvswitch": topology == "nvswitch",
        "intra_bandwidth": intra,
        "inter_bandwidth": inter,
    }


def describe(
    machine: Machine,
    layout: platform.Layout,
    *,
    report: Path,
    options: dict[str, Any],
    kernels: dict[str, tuple[float, float]],
) -> BaseModel:
    """The run description of a job: `options` are the run's own top-level fields (strict,
    d2h_fill, ...; absent ones take the schema's defaults), `kernels` the cost file's
    (alpha, beta) by kernel name."""
    m, g, o = machine, machine.gpu, machine.overheads
    major, minor = g.compute_capability.split(".")
    mpi = m.mpi
    return RunDescription(
        report=str(report),
        **options,
        kernels={name: {"alpha_s": a, "beta_s_per_thread": b} for name, (a, b) in sorted(kernels.items())},
        gpu={
            "name": g.model,
            "memory_bytes": int(g.memory),
            "sm_count": g.sm_count,
            "cc_major": int(major),
            "cc_minor": int(minor),
            "clock_khz": None if g.clock_rate is None else round(g.clock_rate / 1e3),
            "memory_clock_khz": None if g.memory_clock_rate is None else round(g.memory_clock_rate / 1e3),
            "l2_bytes": int(g.l2_cache),
            "memory_bus_width": g.memory_bus_width,
            "max_threads_per_sm": g.max_threads_per_sm,
            "max_blocks_per_sm": g.max_blocks_per_sm,
            "shared_per_block": int(g.shared_per_block),
            "shared_per_block_optin": int(g.shared_per_block_optin),
            "shared_per_sm": int(g.shared_per_sm),
            "copy_engines": g.copy_engines,
            "launch_overhead_s": o.launch,
            "copy_overhead_s": o.memcpy,
            "sync_overhead_s": o.sync,
            "memset_bandwidth": g.memset_bandwidth,
            "d2d_bandwidth": g.d2d_bandwidth,
            "d2d_latency_s": g.d2d_latency,
        },
        host_memcpy_bandwidth=m.node.host_memcpy_bandwidth,
        copies={direction: _segments(model) for direction, model in m.copies},
        mpi={
            "eager_host": mpi.eager_threshold_host,
            "eager_device": mpi.eager_threshold_device,
            "poll_time_s": mpi.poll_time,
            "ipc_setup_s": mpi.ipc_setup or 0.0,
            "device_sync": mpi.device_sync or "none",
            "progress": mpi.progress,
            **{
                kind: {
                    f"{side}{'_intra' if intra else ''}_s": mpi.overhead(side, kind, intra)
                    for side in ("send", "recv")
                    for intra in (False, True)
                }
                for kind in ("host", "device")
            },
            "messages": {path: _segments(model) for path, model in m.messages},
            "gaps": {path: _segments(model) for path, model in m.gaps},
            "collectives": {
                name: [
                    {"up_to": s.up_to, "per_step_s": s.extra / step_count(s.steps, s.ranks or 2), "steps": s.steps}
                    for s in model
                ]
                for name, model in m.collectives
                if model is not None
            },
        },
        nccl=nccl_model(m),
        staging=None
        if m.gpudirect.rdma and m.gpudirect.rdma_limit is None
        else {
            "chunk": m.gpudirect.staging_chunk,
            "bandwidth": m.pcie.bandwidth,
            "overhead_s": m.overheads.memcpy,
            "links": platform.staging_links(m, layout),
            "rdma_limit": m.gpudirect.rdma_limit if m.gpudirect.rdma else None,
        },
        gpus=platform.gpu_places(m, layout),
        ranks=[
            {"node": r // layout.ranks_per_node, "cpu": host} for r, host in enumerate(platform.rank_cpu_hosts(layout))
        ],
    )


def to_json(description: BaseModel) -> str:
    # Python's own float repr (the shortest that reads back exactly): the shim sees the very values
    return json.dumps(description.model_dump(), indent=1) + "\n"
