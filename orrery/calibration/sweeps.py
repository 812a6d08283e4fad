"""The sweep catalogue: which measured sweeps exist per machine, and how Orrery reproduces each.

A sweep is rows of the shared measurements (calibration/data/measured/, unchanged, shipped with
the package) and the calibration/bench microbenchmark run that reproduces them on the simulated
machine. The catalogue is data: ``catalogue/MACHINE.toml`` holds a machine's sets of sweeps, one
system and MPI stack each (``default`` is the set used without ``--sweeps``)::

    [sets.NAME]
    description = {"mpi.intra_node" = "direct"}  # what the set's stack does differently (optional)
    same_as = "h100-ib200"                       # or: the same sweeps as another machine's set

    [[sets.NAME.sweeps]]
    name = "osu_bw D D inter-node (...)"         # as reports and plots name it
    file = "p2p_mpi.csv"                         # in calibration/data/measured/
    select = {system = "santis", metric = "=bw"} # column -> text the row's cell contains ("=...": equals)
    size_column = "message_bytes"
    value_column = "bandwidth_MBps"
    unit = "MB/s"                                # of the value column: a benchmark unit (UNITS)
    metric = "bandwidth"                         # latency, bandwidth, bibw, copy_bandwidth, collective_latency
    path = "inter-node"                          # inter-/intra-node, a copy's direction or the collective
    buffers = "D D"                              # D D, H H, D H (point to point), D or H (collectives), pinned
    iterations = 3                               # of the benchmark run
    nodes = 2                                    # collectives only: the layout the sweep was measured on
    gpus_per_node = 4
    measured_scale = 0.5                         # applied to measured values, to compare like with like
    fit = false                                  # compared after calibration, not a fit input (note says why)
    note = "..."

NCCL sweeps (nccl-tests rows, reproduced by calibration/bench/nccl_sweep) have ``metric =
"nccl_time"``, the collective as nccl-tests names it for ``path`` (allreduce, allgather,
broadcast, reducescatter, reduce, alltoall) and its placement for ``buffers`` (out-of-place,
in-place), the value in ``us`` (time_us), and say how the run was laid out::

    gpus_per_process = 8                         # nccl-tests -g: one process drives 8 GPUs
    env = {NCCL_ALGO = "NVLS"}                   # NCCL's environment as measured (optional)
    sizes_from = 8                               # smaller sizes are left out (nccl-tests' 0 B rows)
    value_from = "busbw"                         # the row gives busbw only: its time is derived (below)

``value_from = "busbw"`` takes ``value_column``'s bus bandwidth (GB/s) and derives the time
nccl-tests would have printed beside it: time = size x factor / busbw, with nccl-tests' bus
factor of the collective on the sweep's ranks (``NCCL_BUS_FACTOR``); rows whose busbw rounds
to 0 are left out.

The metric, path and buffers (a sweep's ``kind``) say which benchmark reproduces it
(``reproduction``) and what the fits turn it into (orrery.calibration.derive). Measured files
given with ``orrery calibrate --input`` become sweeps the same way (``sweep_for``).

Units, in one place: a sweep's points are in its benchmark's unit (``UNITS``: what
calibration/bench prints, what validation compares and reports), converted from a measurement
file's SI values by ``from_si`` and into seconds per transfer, what the fits model, by
``seconds_per_transfer``.
"""

from __future__ import annotations

import csv
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import InputError, OrreryError
from . import measurements

#: The shared measurements as the repository (and calibration files' provenance) names them.
MEASURED = "calibration/data/measured"
#: A benchmark unit -> (its factor to SI, the factor from SI), both written out so that each
#: conversion is the one multiplication it always was (1e-6 and 1e6 are not each other's exact inverse).
UNITS = {"us": (1e-6, 1e6), "MB/s": (1e6, 1e-6), "GB/s": (1e9, 1e-9)}
TIME_UNITS = ("us",)  # the others are rates (bytes/s)
#: How closely a calibrated machine must reproduce each sweep, on |relative error|: its median and
#: its 95th percentile (a sweep that misses either is reported NOT MATCHED).
MEDIAN_TOLERANCE, P95_TOLERANCE = 0.05, 0.15


@dataclass(frozen=True)
class Sweep:
    """A measured sweep and the microbenchmark run that reproduces it."""

    name: str
    file: str  # in calibration/data/measured/
    select: tuple[tuple[str, str], ...]  # (column, text it must contain; "=text": it must equal)
    size_column: str
    value_column: str
    unit: str  # of the value column and of the benchmark's output (UNITS)
    program: tuple[str, ...]  # calibration/bench program and its arguments (sizes follow as -l)
    nodes: int = 1
    gpus_per_node: int = 1
    measured_scale: float = 1.0  # applied to measured values to compare like with like
    note: str = ""
    kind: tuple[str, str, str] = ("", "", "")  # metric, path, buffers: what the fits turn into parameters
    fit: bool = True  # False: compared after calibration, not a fit input (note says why)
    ranks_per_node: int | None = None  # processes per node (None: one per GPU)
    env: tuple[tuple[str, str], ...] = ()  # the program's environment beyond Orrery's (NCCL_ALGO, ...)
    sizes_from: int = 0  # measured sizes below this are left out
    value_from: str = ""  # "busbw": the time is derived from value_column's bus bandwidth (GB/s)

    @property
    def gpus(self) -> int:
        """The GPUs of the run: an NCCL communicator's ranks, however many processes drive them."""
        return self.nodes * self.gpus_per_node


#: nccl-tests' bus bandwidth factor per collective on n ranks: busbw = algbw x factor (its
#: doc/PERFORMANCE.md), algbw = size / time
NCCL_BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


_OSU_TEST = {"latency": "latency", "bandwidth": "bw", "bibw": "bibw"}  # fitted metric -> osu_p2p's test


def reproduction(
    metric: str, path: str, buffers: str, iterations: int, gpus_per_process: int = 1
) -> tuple[tuple[str, ...], dict[str, int]]:
    """The calibration/bench command (sizes follow as -l) and layout that reproduce a sweep of
    this kind (metric, path, buffers); a collective's layout is the sweep's own. An NCCL sweep's
    nccl_sweep prints both placements; `gpus_per_process` is its -g."""
    if metric == "nccl_time":
        if path not in NCCL_BUS_FACTOR:
            raise ValueError(f"nccl_sweep runs no collective {path}")
        return ("nccl_sweep", path, "-g", str(gpus_per_process), "-n", str(iterations), "-w", "1"), {}
    i = ("-i", str(iterations))
    if metric in _OSU_TEST:
        program = (
            "osu_p2p",
            _OSU_TEST[metric],
            *(("-d", "cuda") if "D" in buffers else ()),
            *buffers.split(),
            *i,
            "-x",
            "1",
        )
        return program, ({"nodes": 2} if path == "inter-node" else {"gpus_per_node": 2})
    if metric == "copy_bandwidth":
        return ("memcpy_sweep", path.lower(), *i), ({"gpus_per_node": 2} if path == "peer" else {})
    if metric == "collective_latency":
        return ("coll_sweep", path, buffers, *i), {}
    if metric == "api_time":
        return ("api_overheads", *i), {}
    raise ValueError(f"no benchmark reproduces {metric}")


def _sweep(entry: dict) -> Sweep:
    kind = (entry["metric"], entry["path"], entry["buffers"])
    per_process = entry.get("gpus_per_process", 1)
    program, layout = reproduction(*kind, entry["iterations"], per_process)
    layout.update({k: entry[k] for k in ("nodes", "gpus_per_node") if k in entry})
    if kind[0] == "nccl_time":
        layout["ranks_per_node"] = layout.get("gpus_per_node", 1) // per_process
    return Sweep(
        entry["name"],
        entry["file"],
        tuple(entry["select"].items()),
        entry["size_column"],
        entry["value_column"],
        entry["unit"],
        program,
        measured_scale=entry.get("measured_scale", 1.0),
        note=entry.get("note", ""),
        kind=kind,
        fit=entry.get("fit", True),
        env=tuple(sorted(entry.get("env", {}).items())),
        sizes_from=entry.get("sizes_from", 0),
        value_from=entry.get("value_from", ""),
        **layout,
    )


@functools.cache
def catalogue() -> dict[str, dict[str, tuple[dict[str, object], list[Sweep]]]]:
    """machine -> set -> (the set's description changes, its sweeps), from catalogue/*.toml."""
    files = resources.files("orrery.calibration") / "catalogue"
    raw = {
        f.name.removesuffix(".toml"): tomllib.loads(f.read_text()) for f in files.iterdir() if f.name.endswith(".toml")
    }
    out: dict[str, dict[str, tuple[dict[str, object], list[Sweep]]]] = {}
    for machine in sorted(raw):
        out[machine] = {}
        for name, s in raw[machine]["sets"].items():
            source = raw[s["same_as"]]["sets"][name] if "same_as" in s else s
            out[machine][name] = (dict(s.get("description", {})), [_sweep(e) for e in source["sweeps"]])
    return out


def machines_with_defaults() -> list[str]:
    """The machines with a default set of sweeps (what `orrery validate --machine` takes alone)."""
    return sorted(m for m, sets in catalogue().items() if "default" in sets)


def other_sets() -> dict[str, list[str]]:
    """Each machine's sets of sweeps besides its default one (--sweeps NAME)."""
    return {
        m: [s for s in sets if s != "default"] for m, sets in catalogue().items() if any(s != "default" for s in sets)
    }


def set_description(machine_name: str, sweep_set: str | None) -> dict[str, object]:
    """A sweep set's changes to the machine's description (key -> value)."""
    if not sweep_set:
        return {}
    return dict(catalogue().get(machine_name, {}).get(sweep_set, ({}, []))[0])


def sweeps_for(machine_name: str, sweep_set: str | None = None) -> list[Sweep]:
    """The measured sweeps of a built-in machine: its default set, or the set named by --sweeps."""
    sets = catalogue().get(machine_name, {})
    if sweep_set is None:
        if sets and "default" not in sets:
            raise InputError(
                "--machine",
                None,
                machine_name,
                f"--sweeps SET with it (it has no default sweeps): {', '.join(sorted(sets))}",
            )
        if not sets:
            raise InputError(
                "--machine",
                None,
                machine_name,
                f"a machine with measured sweeps to compare against: {', '.join(machines_with_defaults())}",
            )
        return sets["default"][1]
    others = sorted(s for s in sets if s != "default")
    if sweep_set not in others:
        raise InputError(
            "--sweeps", None, sweep_set, f"a sweep set of {machine_name}: {', '.join(others) or 'it has none'}"
        )
    return sets[sweep_set][1]


def measured_dir(repo: Path | None = None) -> Path:
    """The shared measurements: those installed with the package, or a checkout's (--repo)."""
    if repo is not None:
        return repo / "calibration" / "data" / "measured"
    return Path(str(resources.files("orrery.calibration") / "data" / "measured"))


def bench_dir(repo: Path | None = None) -> Path:
    """calibration/bench's sources: those installed with the package, or a checkout's (--repo)."""
    return (
        repo / "calibration" / "bench"
        if repo is not None
        else Path(str(resources.files("orrery.calibration") / "bench"))
    )


def check_sources(repo: Path | None) -> None:
    """An InputError where the measurements or benchmark sources are not there."""
    for d, what in ((measured_dir(repo), "the shared measurements"), (bench_dir(repo), "calibration/bench")):
        if not d.is_dir():
            raise InputError(
                "--repo" if repo is not None else "orrery",
                None,
                str(d),
                f"a folder with {what}" + ("" if repo is not None else " (installed with the package: reinstall it)"),
            )


def selects(sweep: Sweep, row: dict[str, str]) -> bool:
    """Whether a measured row belongs to a sweep."""
    return all(row[col] == text[1:] if text.startswith("=") else text in row[col] for col, text in sweep.select)


def measured_points(sweep: Sweep, repo: Path | None = None) -> list[tuple[int, float]]:
    """A catalogue sweep's measured points (size, value in the sweep's unit), the first run of each size."""
    path = measured_dir(repo) / sweep.file
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if selects(sweep, r)]
    points: dict[int, float] = {}
    for r in rows:
        size = int(float(r[sweep.size_column]))
        if size < sweep.sizes_from:
            continue
        value = float(r[sweep.value_column])
        if sweep.value_from == "busbw":
            if value <= 0:
                continue  # a bus bandwidth printed as 0.00: no time to derive
            algbw = value / NCCL_BUS_FACTOR[sweep.kind[1]](sweep.gpus)  # GB/s
            value = from_si(sweep.unit, size / (algbw * 1e9))
        points.setdefault(size, value * sweep.measured_scale)  # first run of a size
    if not points:
        raise OrreryError(f"{path}: no rows match the sweep '{sweep.name}' ({dict(sweep.select)})")
    return sorted(points.items())


def from_si(unit: str, value: float) -> float:
    """A value in SI units (seconds, bytes/s; a measurement file's, as measurements reads it) in a
    benchmark unit."""
    return value * UNITS[unit][1]


def to_si(unit: str, value: float) -> float:
    """A value in a benchmark unit in SI units (seconds, bytes/s)."""
    return value * UNITS[unit][0]


def seconds_per_transfer(unit: str, points: list[tuple[int, float]], metric: str) -> tuple[list[int], list[float]]:
    """Seconds per transfer (what the fits model) from a sweep's points in its benchmark unit:
    a time as it is, a rate as the time its size takes (osu_bibw's twice the size: both ways)."""
    sizes = [s for s, _ in points]
    if unit in TIME_UNITS:
        return sizes, [to_si(unit, v) for _, v in points]
    both = 2 if metric == "bibw" else 1
    return sizes, [both * s / to_si(unit, v) for s, v in points]


def collective_layout(series: measurements.Series, layout: tuple[int, int] | None) -> dict[str, int]:
    """Nodes and GPUs (ranks) per node of a collective series: what its file says (the harness's
    CSV, coll_sweep's title), else `layout` (orrery calibrate --collective-layout NODESxGPUS)."""
    where = series.source + (f":{series.lines[0]}" if series.lines else "")
    if series.ranks is not None and series.nodes is not None:
        nodes, ranks = series.nodes, series.ranks
    elif layout is None:
        raise InputError(
            where,
            None,
            series.benchmark,
            "--collective-layout NODESxGPUS (e.g. 2x4): the output does not say how many ranks ran "
            "the collective on how many nodes",
        )
    else:
        nodes, ranks = layout[0], layout[0] * layout[1]
        if series.ranks is not None and series.ranks != ranks:
            raise InputError(
                where, "ranks", series.ranks, f"{ranks} ranks, as --collective-layout {layout[0]}x{layout[1]} says"
            )
    if nodes < 1 or ranks % nodes:
        raise InputError(where, "nodes", nodes, f"a number of nodes that divides the {ranks} ranks evenly")
    return {"nodes": nodes, "gpus_per_node": ranks // nodes}


def sweep_for(
    series: measurements.Series, layout: tuple[int, int] | None = None
) -> tuple[Sweep, list[tuple[int, float]]] | None:
    """The microbenchmark that reproduces a measured series (orrery.calibration.measurements.Series),
    with its points in the benchmark's unit; None where calibration/bench has no counterpart yet. A
    collective's layout is the file's, or `layout` (nodes, GPUs per node); coll_sweep's name for
    it is also its machine key (collectives.NAME_*)."""
    metric, path, buffers = series.metric, series.path, series.buffers
    source = Path(series.source).name
    if metric == "collective_latency":
        coll = measurements.collective_of(series.benchmark)
        if coll is None or buffers not in ("H", "D"):
            return None
        where = collective_layout(series, layout)
        kind = "device" if buffers == "D" else "host"
        program, _ = reproduction(metric, coll, buffers, 3)
        sweep = Sweep(
            f"{series.benchmark}, {kind} buffers, {where['nodes'] * where['gpus_per_node']} ranks on "
            f"{where['nodes']} nodes ({source})",
            "",
            (),
            "",
            "",
            "us",
            program,
            kind=(metric, coll, buffers),
            nodes=where["nodes"],
            gpus_per_node=where["gpus_per_node"],
        )
        return sweep, [(s, from_si("us", v)) for s, v in zip(series.sizes, series.values)]
    fit, note = True, ""
    if metric in _OSU_TEST and path in ("intra-node", "inter-node") and buffers in ("H H", "D D", "D H", "H D"):
        program, where = reproduction(metric, path, buffers, 5)
        unit = "us" if metric == "latency" else "MB/s"
        if buffers in ("D H", "H D"):
            fit, note = (
                False,
                (
                    "compared, not fitted: a device buffer on one side and a host buffer on the "
                    "other; the message paths are fitted on D D and H H sweeps"
                ),
            )
    elif metric == "api_time" and path in ("launch", "sync", "memcpy"):
        (program, where), unit = reproduction(metric, path, buffers, 100), "us"
    elif metric == "copy_bandwidth" and path in ("H2D", "D2H", "D2D", "peer"):
        # copies between device buffers queue on the GPU: enough of them to amortise their issue
        (program, where), unit = reproduction(metric, path, buffers, 5 if path in ("H2D", "D2H") else 100), "GB/s"
    else:
        return None
    sweep = Sweep(
        f"{series.benchmark} {metric} {path} {buffers} ({source})",
        "",
        (),
        "",
        "",
        unit,
        program,
        note=note,
        kind=(metric, path, buffers),
        fit=fit,
        nodes=where.get("nodes", 1),
        gpus_per_node=where.get("gpus_per_node", 1),
    )
    return sweep, [(s, from_si(unit, v)) for s, v in zip(series.sizes, series.values)]
