"""Results of a run: the shim's per-rank report turned into results.json and a summary.

The shim (interpose/engine.cpp, write_report) writes one tab-separated row per
(rank, category, name) under the header REPORT_COLUMNS; this module is the
only reader. Times are simulated seconds.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import SimulationError

REPORT_COLUMNS = ("rank", "category", "name", "count", "bytes", "time_s")


@dataclass
class Tally:
    count: int
    time_s: float
    bytes: int = 0


@dataclass
class RankResult:
    rank: int
    host: str
    end_s: float          # when the rank finished (MPI_Finalize or exit)
    host_s: float         # neither in MPI nor waiting for its GPU: API overheads and its own code
    host_api_s: float     # of which: modelled CUDA API overheads
    gpu_wait_s: float     # blocked in a CUDA synchronisation
    mpi_s: float          # inside MPI calls
    idle_s: float         # finished, waiting for the last rank
    kernel_s: float       # device time of its kernels (summed over streams)
    engines: dict[str, float]  # time each engine of its GPU was busy with its work: compute, H2D, D2H
    comm_s: float         # communication: blocking MPI calls, non-blocking requests from post to completion
    comm_hidden_s: float  # of which overlapped by its GPU computing
    comm_exposed_s: float  # of which not overlapped
    hidden_fraction: float  # comm_hidden_s / comm_s (0 without communication)
    # collectives over host and device buffers: their messages all leave from next to the GPU,
    # so their host data took the GPU's route (interpose/mpi.cpp)
    mixed_placement_calls: int
    kernels: dict[str, Tally] = field(default_factory=dict)
    copies: dict[str, Tally] = field(default_factory=dict)
    mpi: dict[str, Tally] = field(default_factory=dict)


@dataclass
class Results:
    makespan_s: float
    ranks: list[RankResult]
    kernels_without_cost: dict[str, int]
    run: dict

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"


def read_report(path: Path, run: dict) -> Results:
    if not path.is_file():
        raise SimulationError(f"the simulation wrote no report ({path}): it ended before the program did")
    with path.open(newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        header = tuple(next(reader, ()))
        if header != REPORT_COLUMNS:
            raise SimulationError(f"{path}: report header {header} is not {REPORT_COLUMNS}")
        rows = [dict(zip(header, r)) for r in reader]
    makespan = 0.0
    per_rank: dict[int, dict] = {}
    uncosted: dict[str, int] = {}
    for row in rows:
        rank, cat, name = int(row["rank"]), row["category"], row["name"]
        t = Tally(int(row["count"]), float(row["time_s"]), int(row["bytes"]))
        if cat == "run":
            makespan = t.time_s
            continue
        d = per_rank.setdefault(rank, {"kernel": {}, "copy": {}, "mpi": {}, "rank": {}, "engine": {},
                                       "overlap": {}, "host": "?"})
        if cat == "placement":
            d["host"] = name
        elif cat == "mixed":
            d["mixed"] = t.count
        elif cat == "uncosted":
            uncosted[name] = uncosted.get(name, 0) + t.count
        else:
            d[cat][name] = t
    ranks = []
    for rank in sorted(per_rank):
        d = per_rank[rank]
        scalars = {k: v.time_s for k, v in d["rank"].items()}
        mpi_s = math.fsum(t.time_s for t in d["mpi"].values())
        end_s = scalars["end"]
        comm = d["overlap"]["communication"].time_s
        hidden = d["overlap"]["hidden"].time_s
        ranks.append(RankResult(
            rank=rank, host=d["host"], end_s=end_s,
            host_s=end_s - mpi_s - scalars["gpu_wait"], host_api_s=scalars["host_api"],
            gpu_wait_s=scalars["gpu_wait"], mpi_s=mpi_s, idle_s=makespan - end_s,
            kernel_s=math.fsum(t.time_s for t in d["kernel"].values()),
            engines={k: v.time_s for k, v in d["engine"].items()},
            comm_s=comm, comm_hidden_s=hidden, comm_exposed_s=comm - hidden,
            hidden_fraction=hidden / comm if comm > 0 else 0.0,
            mixed_placement_calls=d.get("mixed", 0),
            kernels={k: Tally(v.count, v.time_s) for k, v in d["kernel"].items()},
            copies=d["copy"], mpi=d["mpi"],
        ))
    return Results(makespan, ranks, dict(sorted(uncosted.items())), run)


def _fmt(seconds: float) -> str:
    if seconds == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def summary(results: Results) -> str:
    """A short table of where simulated time went, per rank (or min/mean/max beyond 16 ranks)."""
    cols = ("end_s", "kernel_s", "mpi_s", "gpu_wait_s", "host_s", "idle_s", "comm_exposed_s", "hidden_fraction")
    heads = ("finished", "GPU kernels", "MPI", "GPU wait", "host", "idle", "comm exposed", "comm hidden")
    lines = [f"orrery: simulated makespan {_fmt(results.makespan_s)} "
             f"({len(results.ranks)} ranks on {results.run.get('machine', '?')})"]
    if len(results.ranks) <= 16:
        rows = [(f"rank {r.rank}", *(getattr(r, c) for c in cols)) for r in results.ranks]
    else:
        rows = []
        for label, fn in (("min", min), ("mean", lambda v: math.fsum(v) / len(v)), ("max", max)):
            rows.append((label, *(fn([getattr(r, c) for r in results.ranks]) for c in cols)))
    widths = [max(len(h), 11) for h in heads]
    lines.append("          " + "  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for label, *vals in rows:
        cells = [_fmt(v) for v in vals[:-1]] + [f"{100 * vals[-1]:.1f}%"]
        lines.append(f"{label:<10}" + "  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    mixed = [r for r in results.ranks if r.mixed_placement_calls]
    if mixed:
        calls = sum(r.mixed_placement_calls for r in mixed)
        lines.append(f"warning: {calls} MPI calls on {len(mixed)} ranks had collectives over host and device "
                     "buffers: a collective's messages all leave from next to the GPU, so its host data took the "
                     "GPU's route (results.json: mixed_placement_calls)")
    if results.kernels_without_cost:
        lines.append("kernels without a cost (given the default time; --strict makes this an error):")
        for name, n in results.kernels_without_cost.items():
            lines.append(f"  {n:>8} launches  {name}")
    return "\n".join(lines)
