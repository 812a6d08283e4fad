"""Results of a run: the shim's per-rank report turned into results.json and a summary.

The shim (interpose/core/report.cpp, write_report) writes one tab-separated row per
(rank, category, name) under the header REPORT_COLUMNS, its first rows saying how
the run ended; this module is the only reader. It also decides what a run's
outcome is (``status``) and what ``orrery run`` exits with. Times are simulated
seconds.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import signal
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic_core

from ..errors import InputError, SimulationError
from ..machines import platform
from ..schema import read_text
from .run_description import SCHEMA

if TYPE_CHECKING:
    import pandas as pd

#: The report's header, written by the shim from the same schema (run_description.json report_columns)
REPORT_COLUMNS = tuple(SCHEMA["report_columns"])

#: A run's status (results.json `status`) and what `orrery run` exits with for it (docs/running.md,
#: "How a run ends"): the program's own status where it has one, Orrery's otherwise.
#: Bad input (exit 2) stops before a run and writes no results.json.
STATUSES = (
    "completed",
    "exited",
    "aborted",
    "crashed",
    "deadlock",
    "pending_gpu_work",
    "sim_time_limit",
    "wall_time_limit",
    "orrery_error",
)
EXIT_BAD_INPUT = 2
EXIT_ORRERY_ERROR = 3
EXIT_DEADLOCK = 4
EXIT_PENDING_GPU_WORK = 5
EXIT_SIM_TIME_LIMIT = 6
EXIT_WALL_TIME_LIMIT = 124  # as timeout(1) exits for a command that ran out of time

# the shim's internal statuses for Orrery's own limits, reported as orrery_error
_EXIT_AFTER_FINALIZE = "exit_after_finalize"
_SIMULATOR_CRASHED = "orrery_crashed"
_NO_PEER, _ANY_PEER = -1, -2  # interpose/core/runtime.hpp, Rank::kNoPeer, Rank::kAnyPeer


#: the report's managed rows that are allocations: cudaMallocManaged's, and __managed__ variables'
MANAGED_ALLOCATIONS = ("cudaMallocManaged", "__managed__")


@dataclass
class Tally:
    count: int
    time_s: float
    bytes: int = 0


@dataclass
class Terms:
    """A rank's time in the terms that partition it (docs/running.md, "The terms"): every instant
    of its host's timeline from 0 to its end in exactly one of the first six, so that they add up
    to its ``end_s``; ``idle_s`` (finished, waiting for the last rank) brings it to the makespan.
    The same fields hold a mean over ranks, or a run's terms divided by its iterations."""

    kernels_s: float = 0.0  # waiting (for its GPU, in MPI) while its GPU ran its kernels
    exposed_p2p_s: float = 0.0  # in MPI point-to-point calls and waits, no kernel running; NCCL sends, receives
    exposed_collectives_s: float = 0.0  # in MPI collectives, no kernel running; NCCL collectives waited for
    copies_sync_s: float = 0.0  # waiting for its GPU's copies, memsets, or its GPU's own waits
    host_overheads_s: float = 0.0  # modelled CUDA API overheads (launch, copy, synchronisation)
    host_s: float = 0.0  # the program's own host code
    idle_s: float = 0.0  # finished, waiting for the last rank

    def total_s(self) -> float:
        """The terms' sum: the rank's end time and its idle time, the makespan."""
        return math.fsum(getattr(self, name) for name in TERMS)

    def divided(self, n: float) -> Terms:
        return Terms(**{name: getattr(self, name) / n for name in TERMS})


#: Terms' fields, in the order tables show them; their headings in the summary and report.md
TERMS = tuple(f.name for f in fields(Terms))
TERM_HEADINGS = ("kernels", "exposed p2p", "exposed coll.", "copies+sync", "host overheads", "host", "idle")


@dataclass
class TermSummary:
    """A run's terms (results.json ``terms``): those of its critical rank (the last to finish,
    the lowest of ties: its end is the makespan) and their mean over its ranks, for the whole run
    and, given its ``iterations`` (``--iterations``), per iteration (each divided by them)."""

    iterations: int | None
    critical_rank: int
    critical: Terms
    mean: Terms
    critical_per_iteration: Terms | None
    mean_per_iteration: Terms | None


def term_summary(ranks: list[RankResult], iterations: int | None = None) -> TermSummary | None:
    """The run's terms from its ranks' (None without ranks); ``iterations`` divides them."""
    if not ranks:
        return None
    critical = min(ranks, key=lambda r: (-r.end_s, r.rank))
    mean = Terms(**{name: math.fsum(getattr(r.terms, name) for r in ranks) / len(ranks) for name in TERMS})
    return TermSummary(
        iterations,
        critical.rank,
        critical.terms,
        mean,
        critical.terms.divided(iterations) if iterations else None,
        mean.divided(iterations) if iterations else None,
    )


def check_iterations(value: object, name: str = "--iterations") -> int | None:
    """``--iterations``: None, or a positive whole number (InputError naming ``name`` otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(name, None, value, "a positive whole number (the iterations the run's terms are divided by)")
    return value


@dataclass
class RankResult:
    rank: int
    host: str
    finished: bool  # it reached MPI_Finalize (else the run ended before it did, at end_s)
    end_s: float  # when the rank finished (MPI_Finalize or exit), or the run ended
    host_s: float  # neither in MPI nor waiting for its GPU: API overheads and its own code
    host_api_s: float  # of which: modelled CUDA API overheads
    gpu_wait_s: float  # blocked in a CUDA synchronisation
    mpi_s: float  # inside MPI calls
    idle_s: float  # finished, waiting for the last rank
    kernel_s: float  # device time of its kernels (summed over streams)
    engines: dict[str, float]  # time each engine of its GPU was busy with its work: compute, H2D, D2H
    comm_s: float  # communication: blocking MPI calls, non-blocking requests from post to completion
    comm_hidden_s: float  # of which overlapped by its GPU computing
    comm_exposed_s: float  # of which not overlapped
    hidden_fraction: float  # comm_hidden_s / comm_s (0 without communication)
    # collectives over host and device buffers: their messages all leave from next to the GPU,
    # so their host data took the GPU's route (interpose/mpi/mpi.cpp)
    mixed_placement_calls: int
    kernels: dict[str, Tally] = field(default_factory=dict)
    copies: dict[str, Tally] = field(default_factory=dict)
    mpi: dict[str, Tally] = field(default_factory=dict)
    # NCCL operations by call and NCCL's algorithm/protocol ("ncclAllReduce Ring/LL128"): count,
    # bytes per rank, device time on their streams (from the stream reaching each to its end)
    nccl: dict[str, Tally] = field(default_factory=dict)
    nccl_s: float = 0.0  # their device time, summed
    # managed memory under --managed resident (docs/skeleton-mode.md, "Managed memory"), by call:
    # cudaMallocManaged and __managed__ (variables) (allocations, bytes), cudaMemPrefetchAsync, cudaMemAdvise,
    # cudaStreamAttachMemAsync (calls, bytes they named); time 0: nothing migrates
    managed: dict[str, Tally] = field(default_factory=dict)
    terms: Terms = field(default_factory=Terms)  # its time, partitioned (docs/running.md, "The terms")


@dataclass
class LinkResult:
    """What one direction of one platform link carried over the run (SPLITDUPLEX: each direction
    has its own capacity): ``name`` (the platform's link id and direction, e.g. ``n0-nic0_UP``),
    ``kind`` (what it models: nvlink, pcie, nic, fabric level...), ``capacity_Bps`` (its
    bandwidth), ``bytes`` carried and ``busy_s`` (simulated seconds it carried anything)."""

    name: str
    kind: str
    capacity_Bps: float
    bytes: float
    busy_s: float


@dataclass
class Failure:
    """What ended a run that did not complete: `ranks` concerned, when (`time_s`), a `code`
    (exit status, MPI_Abort's error code, signal), and for a deadlock the MPI call each
    unfinished rank is `blocked` in, for GPU work left at a rank's end what is `pending`, for a
    run stopped at a limit (--sim-time-limit, --wall-time-limit) where each unfinished rank was
    `running` (its MPI call, as `blocked`'s)."""

    message: str
    ranks: list[int]
    time_s: float | None
    code: int | None = None
    blocked: list[dict] = field(default_factory=list)
    pending: list[dict] = field(default_factory=list)
    running: list[dict] = field(default_factory=list)


@dataclass
class Results:
    status: str  # one of STATUSES
    failure: Failure | None  # None for a completed run
    makespan_s: float | None  # when the last rank finished, or the run ended; None: no report
    ranks: list[RankResult]
    kernels_without_cost: dict[str, int]
    run: dict
    # copies faster than the platform allows (orrery/physics.py): a bug of the simulator, never a result
    physics_violations: list[str] = field(default_factory=list)
    # every link direction that carried traffic, busiest (bytes) first
    links: list[LinkResult] = field(default_factory=list)
    # the terms of the critical rank and their mean over ranks (None: no ranks reported)
    terms: TermSummary | None = None
    # not in results.json: the run's folder and the program's standard output (when kept)
    out: Path | None = field(default=None, compare=False)
    stdout: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        """results.json's text: keys sorted, one space per level, ASCII. pydantic's JSON encoder
        (Rust) writes each float as the shortest text that reads back to it, as json.dumps does
        (in other notation: 5.3e-05 becomes 0.000053), and keeps the order _plain sorted: the
        standard library's indenting encoder, pure Python, took 0.18 s at 1024 GPUs, this 0.02 s."""
        data = _plain(self)
        for local in _LOCAL_FIELDS:
            del data[local]
        return pydantic_core.to_json(data, indent=1, inf_nan_mode="constants", ensure_ascii=True).decode() + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "results.json") -> Results:
        """Results as to_json wrote them (``source`` names them in errors)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(source, None, "invalid JSON", f"results.json written by orrery run ({e})") from None
        try:
            return typing.cast(Results, _from_dict(cls, data))
        except KeyError as e:  # an older Orrery's, or not Orrery's at all
            raise InputError(source, str(e.args[0]), None, "results.json written by this orrery run") from None
        except (TypeError, AttributeError) as e:
            raise InputError(source, None, type(e).__name__, f"results.json written by orrery run ({e})") from None

    @classmethod
    def read(cls, path: Path) -> Results:
        """A run's results.json; ``out`` is its folder."""
        res = cls.from_json(read_text(path, "results.json written by orrery run"), str(path))
        res.out = path.resolve().parent
        return res

    def to_frame(self, kind: str = "ranks") -> pd.DataFrame:
        """A table of the run as a pandas DataFrame: ``ranks`` (one row per rank, its times and
        the time each engine of its GPU was busy, ``engine_<name>_s``), ``kernels`` (rank,
        kernel, count, time_s), ``mpi`` (rank, call, count, time_s, bytes), ``copies`` (rank,
        kind, count, time_s, bytes), ``nccl`` (rank, operation: the NCCL call and its
        algorithm/protocol, count, time_s, bytes), ``terms`` (rank, end_s, each term of
        :class:`Terms`, total_s: the makespan), ``links`` (link, kind, capacity_Bps, bytes, busy_s, and
        over the makespan busy_fraction and utilisation, bytes / (capacity x makespan)). Times
        are simulated seconds."""
        import pandas as pd

        if kind not in FRAME_KINDS:
            raise InputError("to_frame", None, kind, f"one of {', '.join(FRAME_KINDS)}")
        if kind == "ranks":
            rows = []
            for r in self.ranks:
                row = {k: v for k, v in asdict(r).items() if k not in _PER_NAME}
                row.update({f"engine_{e}_s": t for e, t in sorted(r.engines.items())})
                rows.append(row)
            columns = [f.name for f in fields(RankResult) if f.name not in _PER_NAME]
            frame = pd.DataFrame(rows, columns=columns + sorted({c for row in rows for c in row} - set(columns)))
            return frame
        if kind == "terms":
            columns = ["rank", "end_s", *TERMS, "total_s"]
            table = [[r.rank, r.end_s, *(getattr(r.terms, t) for t in TERMS), r.terms.total_s()] for r in self.ranks]
            return pd.DataFrame(table, columns=columns)
        if kind == "links":
            span = self.makespan_s or 0.0
            frame = pd.DataFrame(
                [asdict(link) for link in self.links], columns=[f.name for f in fields(LinkResult)]
            ).rename(columns={"name": "link"})
            # the share of the run the link was busy, and of its capacity over the run it used
            frame["busy_fraction"] = frame["busy_s"] / span if span > 0 else 0.0
            frame["utilisation"] = frame["bytes"] / (frame["capacity_Bps"] * span) if span > 0 else 0.0
            return frame
        label = {"kernels": "kernel", "mpi": "call", "copies": "kind", "nccl": "operation"}[kind]
        rows = [
            {"rank": r.rank, label: name, "count": t.count, "time_s": t.time_s, "bytes": t.bytes}
            for r in self.ranks
            for name, t in getattr(r, kind).items()
        ]
        frame = pd.DataFrame(rows, columns=["rank", label, "count", "time_s", "bytes"])
        return frame.drop(columns="bytes") if kind == "kernels" else frame


#: What Results.to_frame gives
FRAME_KINDS = ("ranks", "kernels", "mpi", "copies", "nccl", "links", "terms")
_PER_NAME = ("engines", "kernels", "copies", "mpi", "nccl", "terms")  # RankResult's tables, not columns
_LOCAL_FIELDS = ("out", "stdout")


@functools.cache
def _field_types(tp: type) -> tuple[tuple[str, object], ...]:
    """A dataclass's fields that results.json holds and their types, resolved once per class:
    resolving the string annotations is most of a read otherwise (1.3 s for 1024 ranks)."""
    hints = typing.get_type_hints(tp)
    return tuple((f.name, hints[f.name]) for f in fields(tp) if f.name not in _LOCAL_FIELDS)


_DATACLASS_FIELDS: dict[type, tuple[str, ...] | None] = {}  # by type: its fields' names; None: no dataclass


def _plain(value: typing.Any) -> typing.Any:
    """asdict's output, every dict's keys sorted, without asdict's deep copy of every value, which
    took longer than the rest of writing results.json (thousands of ranks and links: 0.11 s against
    0.03 s at 1024 GPUs): the results hold plain values, dicts, lists and dataclasses of this
    module."""
    kind = type(value)
    if kind is dict:
        return {k: _plain(value[k]) for k in sorted(value)}
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    if kind not in _DATACLASS_FIELDS:
        is_dataclass = dataclasses.is_dataclass(value) and not isinstance(value, type)
        _DATACLASS_FIELDS[kind] = tuple(sorted(f.name for f in fields(value))) if is_dataclass else None
    names = _DATACLASS_FIELDS[kind]
    return value if names is None else {name: _plain(getattr(value, name)) for name in names}


def _from_dict(tp: type, data: typing.Any) -> object:
    """A dataclass of this module (and the dataclasses in its fields) from asdict's output."""
    return tp(**{name: _value(hint, data[name]) for name, hint in _field_types(tp)})


def _value(tp: object, v: typing.Any) -> object:
    if v is None:
        return None
    origin, params = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _from_dict(tp, v)
    if origin in (types.UnionType, typing.Union):
        return _value(next(p for p in params if p is not type(None)), v)
    if origin is list:
        return [_value(params[0], x) for x in v]
    if origin is dict:
        return {k: _value(params[1], x) for k, x in v.items()}
    return v


def _read_rows(path: Path) -> list[dict] | None:
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        header = tuple(next(reader, ()))
        if header != REPORT_COLUMNS:
            return None
        return [dict(zip(header, r)) for r in reader]


def _killed(returncode: int) -> bool:
    """Whether SMPI's launcher exited as a shell does for a process a signal killed (128 + the
    signal's number), rather than with a status main returned: 255, main's -1, is no signal."""
    return 1 <= returncode - 128 < signal.NSIG


def _signal_name(number: int) -> str:
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    return f"signal {number} ({sig.name}: {signal.strsignal(sig)})"


def _peer(value: int) -> str | int | None:
    return "any" if value == _ANY_PEER else None if value == _NO_PEER else value


def _blocked(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        if row["category"] != "blocked":
            continue
        out.append(
            {
                "rank": int(row["rank"]),
                "call": row["name"] or None,
                "peer": _peer(int(row["count"])),
                "tag": _peer(int(row["bytes"])),
                "since_s": float(row["time_s"]),
            }
        )
    return out


def _where(running: list[dict]) -> str:
    """Where the unfinished ranks of a run stopped at a limit were, by MPI call: "ranks 0 and 1 in
    MPI_Allreduce, rank 2 outside MPI"."""
    by_call: dict[str, list[int]] = {}
    for r in running:
        by_call.setdefault(f"in {r['call']}" if r["call"] else "outside MPI", []).append(r["rank"])
    if not by_call:
        return "every rank finished"
    return ", ".join(f"{_rank_span(ranks)} {where}" for where, ranks in by_call.items())


def _rank_span(ranks: list[int]) -> str:
    """Ranks, runs of three or more consecutive ones as spans: "rank 3", "ranks 0-7, 9 and 10"."""
    spans: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        if prev - start >= 2:
            spans.append(f"{start}-{prev}")
        else:  # two in a row are two ranks: "ranks 0 and 1"
            spans += [str(x) for x in range(start, prev + 1)]
        if r is not None:
            start = prev = r
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + (spans[0] if len(spans) == 1 else ", ".join(spans[:-1]) + " and " + spans[-1])


def _pending(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        if row["category"] != "pending":
            continue
        number, device = int(row["count"]), int(row["bytes"])
        stream = "the legacy default stream" if number == 0 else f"stream {number}"
        out.append({"rank": int(row["rank"]), "stream": f"{stream} of device {device}", "work": row["name"]})
    return out


def _failure(
    status: str,
    rank: int,
    code: int,
    when: float,
    rows: list[dict],
    unfinished: list[int],
    limit: float = 0.0,
) -> tuple[str, int, Failure | None]:
    """The run's status, exit code and failure from the shim's status row; `limit`: the limit a
    run stopped at a limit reached (seconds)."""
    at = f"at simulated time {_time(when)}"
    ranks = [rank] if rank >= 0 else []
    if status == "completed":
        return status, 0, None
    if status == "exited":
        if code == 0:  # a program's 0 would read as a success: the job failed all the same
            return status, 1, Failure(f"rank {rank} called exit(0) {at} before MPI_Finalize", ranks, when, 0)
        return status, code, Failure(f"rank {rank} exited with status {code} {at}", ranks, when, code)
    if status == "aborted":
        exit_code = code & 0xFF or 1  # as a shell sees it; MPI_Abort(comm, 0) fails all the same
        return (
            status,
            exit_code,
            Failure(f"rank {rank} called MPI_Abort with error code {code} {at}", ranks, when, code),
        )
    if status == "crashed":
        return status, 128 + code, Failure(f"rank {rank} was killed by {_signal_name(code)} {at}", ranks, when, code)
    if status == "deadlock":
        blocked = _blocked(rows)
        if not blocked:  # every rank had finished: one of the shim's GPU streams was left blocked
            msg = f"the simulation deadlocked {at} after every rank had finished (a simulated GPU stream was blocked)"
            return "orrery_error", EXIT_ORRERY_ERROR, Failure(msg, [], when)
        parts = []
        for b in blocked:
            call = b["call"] or "no MPI call (outside the calls Orrery wraps)"
            if b["peer"] is not None:
                word = "from" if "recv" in call.lower() or "probe" in call.lower() else "to"
                call += f" {word} {'any rank' if b['peer'] == 'any' else 'rank ' + str(b['peer'])}"
                if b["tag"] is not None:
                    call += f" (tag {b['tag']})"
            parts.append(f"rank {b['rank']} in {call} since {_time(b['since_s'])}")
        msg = f"{at} no rank can go on: " + "; ".join(parts)
        return status, EXIT_DEADLOCK, Failure(msg, [b["rank"] for b in blocked], when, blocked=blocked)
    if status in ("sim_time_limit", "wall_time_limit"):
        running = _blocked(rows)
        if status == "sim_time_limit":
            what = f"the run reached its simulated time limit of {_time(limit)} (--sim-time-limit) {at}"
            exit_code = EXIT_SIM_TIME_LIMIT
        else:
            what = f"the run reached its wall-time limit of {_time(limit)} (--wall-time-limit) {at}"
            exit_code = EXIT_WALL_TIME_LIMIT
        msg = f"{what}, with {_where(running)}"
        return status, exit_code, Failure(msg, [r["rank"] for r in running], when, running=running)
    if status == "pending_gpu_work":
        pending = _pending(rows)
        work = "; ".join(f"{p['work']} on {p['stream']}" for p in pending)
        msg = (
            f"rank {rank} ended {at} with work still queued on its GPU: {work} (wait for it, e.g. "
            "cudaDeviceSynchronize, before MPI_Finalize)"
        )
        return status, EXIT_PENDING_GPU_WORK, Failure(msg, ranks, when, pending=pending)
    if status == _EXIT_AFTER_FINALIZE:
        msg = (
            f"rank {rank} called exit(0) after MPI_Finalize {at} while {_rank_span(unfinished)} had not "
            "finished: SimGrid runs every rank in one process, which exit() ends; return from main instead"
        )
        return "orrery_error", EXIT_ORRERY_ERROR, Failure(msg, ranks, when)
    if status == _SIMULATOR_CRASHED:
        msg = f"the simulator crashed ({_signal_name(code)}) {at}, outside any rank's code"
        return "orrery_error", EXIT_ORRERY_ERROR, Failure(msg, ranks, when, code)
    if status == "orrery_error":
        return status, EXIT_ORRERY_ERROR, Failure(f"the simulation stopped {at}", ranks, when)
    return "orrery_error", EXIT_ORRERY_ERROR, Failure(f"the report has an unknown status '{status}'", ranks, when)


def read_run(
    out: Path,
    run: dict,
    returncode: int,
    links: Mapping[str, platform.Link] | None = None,
    overran_s: float | None = None,
) -> Results:
    """A run's results from what it left in `out` (the shim's report, an error Orrery stopped on,
    the row a crash wrote before anything else) and the launcher's exit status; `run["exit_code"]`
    becomes what `orrery run` exits with. ``links`` are the platform's link directions
    (platform.link_directions), which give the report's links their kinds and capacities.
    ``overran_s``: orrery run stopped the simulation that many seconds past its wall-time limit
    (``run["wall_time_limit_s"]``), where the shim had not stopped it."""
    if returncode < 0:  # the launcher itself killed by signal -returncode (SIGPIPE: its reader gone)
        returncode = 128 - returncode
    report = out / "report.tsv"
    rows = _read_rows(report)
    crash = _read_rows_plain(out / "report.tsv.crash")
    error = (out / "error.txt").read_text(errors="replace").strip() if (out / "error.txt").is_file() else None
    reported = rows is not None
    if not reported and crash:  # the crash left no report: its own row is all there is
        rows = crash
    status_row = next((r for r in rows or () if r["category"] == "status"), None)
    if status_row is None or rows is None:  # (no rows, no status row)
        if overran_s is not None and not error:
            msg = (
                f"the run passed its wall-time limit of {_time(run['wall_time_limit_s'])} (--wall-time-limit) "
                "where SimGrid's clock stood still (SimGrid's start-up, or the program's own code looping "
                f"without a CUDA or MPI call that waits) and was stopped from outside {_time(overran_s)} "
                "later: nothing of it was reported"
            )
            return _empty("wall_time_limit", EXIT_WALL_TIME_LIMIT, Failure(msg, [], None), run)
        if error:
            return _empty("orrery_error", EXIT_ORRERY_ERROR, Failure(error, [], None), run)
        if _killed(returncode):  # killed before the shim could say by whom
            code = returncode - 128
            return _empty(
                "crashed",
                128 + code,
                Failure(f"the simulation was killed by {_signal_name(code)}", [], None, code),
                run,
            )
        what = "wrote no report" if rows is None else "wrote a report without a status"
        return _empty(
            "orrery_error",
            EXIT_ORRERY_ERROR,
            Failure(f"the simulation {what} ({report}) and exited with status {returncode}", [], None, returncode),
            run,
        )
    res = _results(rows, run)
    res.links = _links(rows, links or {})
    unfinished = [r.rank for r in res.ranks if not r.finished]
    rank, code, when = int(status_row["rank"]), int(status_row["count"]), float(status_row["time_s"])
    limit = run.get("wall_time_limit_s" if status_row["name"] == "wall_time_limit" else "sim_time_limit_s") or 0.0
    status, exit_code, failure = _failure(status_row["name"], rank, code, when, rows, unfinished, limit)
    if error:  # one of Orrery's own errors (interpose fatal): its message says what
        status, exit_code = "orrery_error", EXIT_ORRERY_ERROR
        failure = Failure(error, [rank] if rank >= 0 else [], when)
    elif status == "completed" and _killed(returncode):
        failure = Failure(
            f"the simulation completed, then its process was killed by {_signal_name(returncode - 128)}",
            [],
            when,
            returncode - 128,
        )
        status, exit_code = "crashed", returncode
    elif status == "completed" and returncode:
        # a rank's main returned it (SMPI takes the first non-zero one and does not say whose)
        failure = Failure(f"a rank returned {returncode} from main (SMPI does not say which)", [], when, returncode)
        status, exit_code = "exited", returncode
    res.status, res.failure = status, failure
    res.run["exit_code"] = exit_code
    if not reported:
        res.makespan_s = None
    return res


def _read_rows_plain(path: Path) -> list[dict] | None:
    """A crash's row: written without a header (interpose/core/outcome.cpp, write_crash_row)."""
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        return [dict(zip(REPORT_COLUMNS, r)) for r in csv.reader(f, delimiter="\t") if len(r) == len(REPORT_COLUMNS)]


def _empty(status: str, exit_code: int, failure: Failure, run: dict) -> Results:
    return Results(status, failure, None, [], {}, {**run, "exit_code": exit_code})


def _results(rows: list[dict], run: dict) -> Results:
    makespan = 0.0
    per_rank: dict[int, dict] = {}
    uncosted: dict[str, int] = {}
    for row in rows:
        rank, cat, name = int(row["rank"]), row["category"], row["name"]
        if cat in ("status", "blocked", "pending", "link"):
            continue
        t = Tally(int(row["count"]), float(row["time_s"]), int(row["bytes"]))
        if cat == "run":
            makespan = t.time_s
            continue
        d = per_rank.setdefault(
            rank,
            {
                "kernel": {},
                "copy": {},
                "mpi": {},
                "nccl": {},
                "managed": {},
                "rank": {},
                "engine": {},
                "overlap": {},
                "term": {},
                "host": "?",
            },
        )
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
        ranks.append(
            RankResult(
                rank=rank,
                host=d["host"],
                finished=d["rank"]["finished"].count == 1,
                end_s=end_s,
                host_s=end_s - mpi_s - scalars["gpu_wait"],
                host_api_s=scalars["host_api"],
                gpu_wait_s=scalars["gpu_wait"],
                mpi_s=mpi_s,
                idle_s=makespan - end_s,
                kernel_s=math.fsum(t.time_s for t in d["kernel"].values()),
                engines={k: v.time_s for k, v in d["engine"].items()},
                comm_s=comm,
                comm_hidden_s=hidden,
                comm_exposed_s=comm - hidden,
                hidden_fraction=hidden / comm if comm > 0 else 0.0,
                mixed_placement_calls=d.get("mixed", 0),
                kernels={k: Tally(v.count, v.time_s) for k, v in d["kernel"].items()},
                copies=d["copy"],
                mpi=d["mpi"],
                nccl=d["nccl"],
                nccl_s=math.fsum(t.time_s for t in d["nccl"].values()),
                managed=d["managed"],
                terms=Terms(
                    **{f"{name}_s": t.time_s for name, t in d["term"].items()},
                    idle_s=makespan - end_s,
                ),
            )
        )
    return Results(
        "completed",
        None,
        makespan,
        ranks,
        dict(sorted(uncosted.items())),
        {**run, "exit_code": 0},
        terms=term_summary(ranks, run.get("iterations")),
    )


def _links(rows: list[dict], directions: Mapping[str, platform.Link]) -> list[LinkResult]:
    """The report's link rows (rank -1, "link", the direction's name, the transfers that crossed
    it, bytes, busy seconds; interpose/core/links.cpp), busiest by bytes first, ties by name."""
    found = []
    for row in rows:
        if row["category"] != "link":
            continue
        spec = directions.get(row["name"])
        if spec is None:
            raise SimulationError(f"the report names a link {row['name']!r} that the platform does not have")
        found.append(LinkResult(row["name"], spec.kind, spec.bandwidth, float(row["bytes"]), float(row["time_s"])))
    return sorted(found, key=lambda link: (-link.bytes, link.name))


def _time(seconds: float) -> str:
    return _fmt(seconds) if seconds else "0 s"


def _fmt(seconds: float) -> str:
    if seconds == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def utilisation(link: LinkResult, makespan_s: float | None) -> float:
    """The share of a link's capacity over the whole run that it used: bytes / (capacity x makespan)."""
    return link.bytes / (link.capacity_Bps * makespan_s) if makespan_s else 0.0


def busiest_link(results: Results) -> tuple[LinkResult, float] | None:
    """The link direction with the highest utilisation (ties: more bytes, then by name), and that
    utilisation; None where no link carried anything."""
    ranked = sorted(results.links, key=lambda link: (-utilisation(link, results.makespan_s), -link.bytes, link.name))
    return (ranked[0], utilisation(ranked[0], results.makespan_s)) if ranked else None


def _bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3f} {unit}"
    return f"{n:.0f} B"


def term_rows(terms: TermSummary) -> list[tuple[str, Terms]]:
    """The rows a terms table shows: the critical rank's and the mean, per iteration when the run
    has its iterations, else for the whole run."""
    if terms.critical_per_iteration and terms.mean_per_iteration:
        return [(f"rank {terms.critical_rank}", terms.critical_per_iteration), ("mean", terms.mean_per_iteration)]
    return [(f"rank {terms.critical_rank}", terms.critical), ("mean", terms.mean)]


def term_table(terms: TermSummary | None, ranks: int) -> list[str]:
    """The summary's lines of the run's terms (none without them)."""
    if terms is None:
        return []
    per = (
        f"per iteration ({terms.iterations} iterations)"
        if terms.iterations
        else "whole run (--iterations N: per iteration)"
    )
    lines = [f"time by term, {per}: the critical rank (last to finish) and the mean over {n_ranks(ranks)}"]
    heads = (*TERM_HEADINGS, "total")
    widths = [max(len(h), 11) for h in heads]
    lines.append("          " + "  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for label, t in term_rows(terms):
        cells = [_fmt(getattr(t, name)) for name in TERMS] + [_fmt(t.total_s())]
        lines.append(f"{label:<10}" + "  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    return lines


def n_ranks(n: int) -> str:
    """A count of ranks in words: 1 rank, 2 ranks."""
    return f"{n} rank{'' if n == 1 else 's'}"


def ranks_on(results: Results) -> str:
    """The run's ranks (those of its layout, not only those that reported before a failure ended
    it) and its machine: "2 ranks on h100-ib200"."""
    return f"{n_ranks(results.run.get('ranks', len(results.ranks)))} on {results.run.get('machine', '?')}"


def managed_note(results: Results) -> str | None:
    """What the run took as managed memory resident on its devices, and that its migrations are not
    in the times (docs/skeleton-mode.md, "Managed memory"); None: the program allocated none."""
    allocations = [[t for name, t in r.managed.items() if name in MANAGED_ALLOCATIONS] for r in results.ranks]
    managed = [t for ts in allocations for t in ts]
    if not managed:
        return None
    return (
        f"{_bytes(sum(t.bytes for t in managed))} in {sum(t.count for t in managed)} allocations on "
        f"{n_ranks(sum(1 for ts in allocations if ts))}, taken as resident on their devices (--managed resident): "
        "its migrations between host and device are not in these times (results.json: ranks[].managed)"
    )


def summary(results: Results) -> str:
    """A short table of where simulated time went, per rank (or min/mean/max beyond 16 ranks)."""
    cols = ("end_s", "kernel_s", "mpi_s", "gpu_wait_s", "host_s", "idle_s", "comm_exposed_s", "hidden_fraction")
    ended = "finished" if results.status == "completed" else "ended"
    heads = (ended, "GPU kernels", "MPI", "GPU wait", "host", "idle", "comm exposed", "comm hidden")
    where = f"({ranks_on(results)})"
    if results.makespan_s is None:
        return f"orrery: the run ended ({results.status}) without a report of its ranks"
    if results.status == "completed":
        lines = [f"orrery: simulated makespan {_fmt(results.makespan_s)} {where}"]
    else:  # the ranks' times up to the failure
        lines = [f"orrery: the run ended ({results.status}) at simulated time {_fmt(results.makespan_s)} {where}"]
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
    lines += term_table(results.terms, len(results.ranks))
    if busiest := busiest_link(results):
        link, used = busiest
        span = results.makespan_s or 0.0
        busy = f"{100 * link.busy_s / span:.1f}%" if span > 0 else "-"
        lines.append(
            f"busiest link (by utilisation): {link.name} ({link.kind}), {_bytes(link.bytes)} in "
            f"{_time(link.busy_s)} busy ({busy} of the run), {100 * used:.1f}% of its "
            f"{_bytes(link.capacity_Bps)}/s over the run"
        )
    nccl: dict[str, list[Tally]] = {}
    for r in results.ranks:
        for name, t in r.nccl.items():
            nccl.setdefault(name, []).append(t)
    if nccl:
        lines.append(
            "NCCL operations (per rank: calls, bytes per call, device time; mean over the ranks that made them):"
        )
        for name, ts in sorted(nccl.items()):
            calls = math.fsum(t.count for t in ts) / len(ts)
            per_call = math.fsum(t.bytes for t in ts) / math.fsum(t.count for t in ts)
            lines.append(
                f"  {name:<32} {calls:>8g} calls  {_bytes(per_call):>10}  {_fmt(math.fsum(t.time_s for t in ts) / len(ts))}"
            )
    if note := managed_note(results):
        lines.append(f"managed memory: {note}")
    for line in results.physics_violations:
        lines.append(f"warning: physically impossible, a bug of Orrery (please report it): {line}")
    mixed = [r for r in results.ranks if r.mixed_placement_calls]
    if mixed:
        calls = sum(r.mixed_placement_calls for r in mixed)
        lines.append(
            f"warning: {calls} MPI calls on {len(mixed)} ranks had collectives over host and device "
            "buffers: a collective's messages all leave from next to the GPU, so its host data took the "
            "GPU's route (results.json: mixed_placement_calls)"
        )
    if results.kernels_without_cost:
        lines.append("kernels without a cost (given the default time; --strict makes this an error):")
        for name, n in results.kernels_without_cost.items():
            lines.append(f"  {n:>8} launches  {name}")
    return "\n".join(lines)
