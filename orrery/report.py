"""A run's report: tables and figures of where its simulated time went (``orrery report RUN_DIR``).

Seven sections, each a table (pandas) built from the run's ``results.json`` (orrery.load,
Results.to_frame): time by category per rank (or per group of ranks beyond GROUP_LIMIT), time by
term (the critical rank's and the mean, per iteration given the iterations), the slowest ranks and why (what makes each later than the median rank, in words), top kernels,
communication hidden and exposed, NCCL operations by algorithm and protocol (when the program
called NCCL), busiest links. ``build()`` gives them as a :class:`Report`,
``text()`` as Markdown, the ``plot_*`` functions each as a matplotlib Figure, ``write()`` puts
report.md, one CSV per table and the figures (PNG and SVG, byte-identical for the same run) in
a folder. A run that did not complete is reported too, its failure first.

Not here: running a program (orrery.api), the summary ``orrery run`` prints
(orrery.run.results.summary), comparing several runs (sweeps).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError
from .run.results import (
    TERM_HEADINGS,
    TERMS,
    RankResult,
    Results,
    TermSummary,
    check_iterations,
    managed_note,
    n_ranks,
    ranks_on,
    term_summary,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

#: Beyond this many ranks, tables and figures show groups of consecutive ranks (min/mean/max)
GROUP_LIMIT = 64
#: How many slowest ranks, kernels and links report.md shows (the CSV files hold every row)
TOP = 5
FORMATS = ("png", "svg")

#: A rank's timeline, which adds up to the makespan (results.json: host_s + mpi_s + gpu_wait_s
#: = end_s, end_s + idle_s = makespan_s), then its GPU's kernel time, which runs beside it
TIMELINE = (("host_s", "host"), ("mpi_s", "MPI"), ("gpu_wait_s", "GPU wait"), ("idle_s", "idle"))
KERNELS = ("kernel_s", "kernels")
CATEGORY_COLUMNS = ("kernel_s", "mpi_s", "gpu_wait_s", "host_s", "idle_s")  # the order
# what a rank did for longer than the median rank, in words
_MORE = {"host_s": "on the host", "mpi_s": "in MPI", "gpu_wait_s": "waiting for its GPU"}
_COLOURS = {
    "host_s": "#4c72b0",
    "mpi_s": "#dd8452",
    "gpu_wait_s": "#c44e52",
    "idle_s": "#cccccc",
    "kernel_s": "#55a868",
    "comm_hidden_s": "#55a868",
    "comm_exposed_s": "#dd8452",
}
#: terms.csv: the critical rank's terms and their mean over ranks (`row`), for the whole run and
#: per iteration (`per`: run, iteration); `rank` is the critical rank's (empty for the mean)
TERMS_COLUMNS = ("row", "rank", "per", "iterations", *TERMS, "total_s")
SLOWEST_COLUMNS = ("rank", "end_s", "behind_s", "median_rank", "cause", "cause_s", "detail", "detail_s", "why")
#: Every file write() may leave in its folder: all removed first, so that nothing of an earlier
#: report (a links figure of a run that had links) stays beside this one's
OUTPUTS = (
    "report.md",
    "time_by_category.csv",
    "time_by_category_groups.csv",
    "terms.csv",
    "terms_by_rank.csv",
    "slowest_ranks.csv",
    "top_kernels.csv",
    "communication.csv",
    "communication_groups.csv",
    "nccl_operations.csv",
    "links.csv",
    *(f"{fig}.{ext}" for fig in ("time_by_category", "top_kernels", "communication", "links") for ext in FORMATS),
)
# matplotlib's settings for figures that are the same bytes on every run: no date, fixed ids
_RC: dict[RcKeyType, object] = {
    "svg.hashsalt": "orrery-report",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
}
_SIZE = (8.0, 4.5)  # inches
_DPI = 100


@dataclass
class Report:
    """A run's report as tables (pandas DataFrames; times in simulated seconds)."""

    results: Results
    run_dir: Path | None
    top: int
    #: per rank: rank, host, finished, end_s, then CATEGORY_COLUMNS
    categories: pd.DataFrame
    #: per group of consecutive ranks beyond GROUP_LIMIT: first_rank, last_rank, ranks, and
    #: <column>_min / _mean / _max for end_s and each category; None for fewer ranks
    groups: pd.DataFrame | None
    #: the run's terms (TERMS_COLUMNS) and what they were computed with (None: no ranks)
    terms: pd.DataFrame
    term_summary: TermSummary | None
    #: per rank: rank, end_s, each term, total_s (Results.to_frame("terms"))
    terms_by_rank: pd.DataFrame
    #: every rank, the last to finish first: rank, end_s, behind_s (after the median rank),
    #: median_rank, cause (the column it spent longest on beyond the median rank), cause_s,
    #: detail (the MPI call, kernel or copy kind of most of it), detail_s, why (in words)
    slowest: pd.DataFrame
    #: every kernel over all ranks, most device time first: kernel, total_s, count, mean_s, share
    kernels: pd.DataFrame
    #: per rank: rank, comm_s, comm_hidden_s, comm_exposed_s, hidden_fraction
    communication: pd.DataFrame
    #: per group of ranks beyond GROUP_LIMIT: first_rank, last_rank, ranks, the means of comm_s,
    #: comm_hidden_s, comm_exposed_s, and hidden_fraction (the group's hidden / its communication)
    communication_groups: pd.DataFrame | None
    #: the run's communication hidden behind its GPUs' work: sum of hidden / sum of comm_s
    #: (None: no communication)
    hidden_fraction: float | None
    #: every link direction, highest utilisation first (Results.to_frame("links"))
    links: pd.DataFrame
    #: every NCCL operation over all ranks, most device time first: operation (the call), algorithm
    #: (NCCL's algorithm/protocol, or p2p/Simple), count, bytes (per call), total_s, mean_s, share
    nccl: pd.DataFrame


def load(run_dir: str | os.PathLike) -> Results:
    """A run's results from its folder: an InputError names a path that is not a run's folder
    or a results.json that cannot be read."""
    from . import api

    p = Path(run_dir)
    if not p.is_dir():
        what = "a file" if p.exists() else "no such folder"
        raise InputError("RUN_DIR", None, str(p), f"a run's folder, as `orrery run --out` writes it ({what})")
    return api.load(p)


def parse_formats(text: str) -> tuple[str, ...]:
    """``--format``: png, svg or both, comma-separated."""
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",")))
    if not chosen or any(f not in FORMATS for f in chosen):
        raise InputError("--format", None, text, "png, svg or png,svg")
    return chosen


def build(results: Results, top: int = TOP, run_dir: Path | None = None, iterations: int | None = None) -> Report:
    """The report's tables from a run's results; ``iterations`` (default: the run's own,
    ``orrery run --iterations``) divides its terms for their per-iteration figures."""
    import pandas as pd

    if top < 1:
        raise InputError("--top", None, top, "a positive whole number")
    check_iterations(iterations)
    summary = term_summary(results.ranks, iterations or results.run.get("iterations"))
    ranks = sorted(results.ranks, key=lambda r: r.rank)
    frame = results.to_frame("ranks").sort_values("rank", kind="stable").reset_index(drop=True)
    categories = frame[["rank", "host", "finished", "end_s", *CATEGORY_COLUMNS]].copy()
    comm_columns = ["rank", "comm_s", "comm_hidden_s", "comm_exposed_s", "hidden_fraction"]
    communication = frame[comm_columns].copy()
    total_comm = math.fsum(r.comm_s for r in ranks)
    hidden = math.fsum(r.comm_hidden_s for r in ranks) / total_comm if total_comm > 0 else None
    links = results.to_frame("links")
    links = links.sort_values(["utilisation", "link"], ascending=[False, True], kind="stable").reset_index(drop=True)
    groups = comm_groups = None
    if len(ranks) > GROUP_LIMIT:
        bounds = _group_bounds([r.rank for r in ranks])
        groups = _groups(ranks, bounds)
        comm_groups = _communication_groups(ranks, bounds)
    return Report(
        results=results,
        run_dir=run_dir,
        top=top,
        categories=categories,
        groups=groups,
        terms=_terms(summary),
        term_summary=summary,
        terms_by_rank=results.to_frame("terms").sort_values("rank", kind="stable").reset_index(drop=True),
        slowest=pd.DataFrame(_slowest(ranks), columns=SLOWEST_COLUMNS),
        kernels=_kernels(ranks),
        communication=communication,
        communication_groups=comm_groups,
        hidden_fraction=hidden,
        links=links,
        nccl=_nccl(ranks),
    )


def _terms(summary: TermSummary | None) -> pd.DataFrame:
    import pandas as pd

    rows = []
    if summary is not None:
        shown = [("critical", summary.critical_rank, "run", summary.critical), ("mean", None, "run", summary.mean)]
        if summary.critical_per_iteration and summary.mean_per_iteration:
            shown += [
                ("critical", summary.critical_rank, "iteration", summary.critical_per_iteration),
                ("mean", None, "iteration", summary.mean_per_iteration),
            ]
        for row, rank, per, t in shown:
            rows.append([row, rank, per, summary.iterations, *(getattr(t, name) for name in TERMS), t.total_s()])
    return pd.DataFrame(rows, columns=TERMS_COLUMNS).astype({"rank": "Int64", "iterations": "Int64"})


def _group_bounds(ranks: list[int]) -> list[tuple[int, int]]:
    """Index ranges of at most GROUP_LIMIT groups of consecutive ranks, of equal size but the last."""
    size = math.ceil(len(ranks) / GROUP_LIMIT)
    return [(i, min(i + size, len(ranks))) for i in range(0, len(ranks), size)]


def _groups(ranks: list[RankResult], bounds: list[tuple[int, int]]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for lo, hi in bounds:
        members = ranks[lo:hi]
        row: dict[str, object] = {"first_rank": members[0].rank, "last_rank": members[-1].rank, "ranks": len(members)}
        for column in ("end_s", *CATEGORY_COLUMNS):
            values = [getattr(r, column) for r in members]
            row[f"{column}_min"] = min(values)
            row[f"{column}_mean"] = math.fsum(values) / len(values)
            row[f"{column}_max"] = max(values)
        rows.append(row)
    return pd.DataFrame(rows)


def _communication_groups(ranks: list[RankResult], bounds: list[tuple[int, int]]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for lo, hi in bounds:
        members = ranks[lo:hi]
        row: dict[str, object] = {"first_rank": members[0].rank, "last_rank": members[-1].rank, "ranks": len(members)}
        for column in ("comm_s", "comm_hidden_s", "comm_exposed_s"):
            row[column] = math.fsum(getattr(r, column) for r in members) / len(members)
        comm = math.fsum(r.comm_s for r in members)
        row["hidden_fraction"] = math.fsum(r.comm_hidden_s for r in members) / comm if comm > 0 else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def _changes(mine: dict, theirs: dict, suffix: str = "") -> list[tuple[str, float]]:
    """Per name (MPI call, kernel, copy kind) of either rank, how much longer it took at the
    first, largest first (names in order among equals)."""
    names = sorted(set(mine) | set(theirs))
    diffs = [
        (name + suffix, (mine[name].time_s if name in mine else 0.0) - (theirs[name].time_s if name in theirs else 0.0))
        for name in names
    ]
    return sorted(diffs, key=lambda d: -d[1])


def _slowest(ranks: list[RankResult]) -> list[dict]:
    """Every rank, the last to finish first, with what makes it later than the median rank.

    The median rank is a real rank (the lower median by end_s, ties by rank number), not a
    median of each column: a rank's host_s + mpi_s + gpu_wait_s is its end_s, so the
    differences to one rank add up to how much later it finished, and the largest names why."""
    if not ranks:
        return []
    by_end = sorted(ranks, key=lambda r: (r.end_s, r.rank))
    median = by_end[(len(by_end) - 1) // 2]
    rows = []
    for r in sorted(ranks, key=lambda r: (-r.end_s, r.rank)):
        behind = r.end_s - median.end_s
        diffs = {c: getattr(r, c) - getattr(median, c) for c in _MORE}
        cause = max(_MORE, key=lambda c: diffs[c])  # first of the largest, in _MORE's order
        changes: list[tuple[str, float]] = []
        if cause == "mpi_s":
            changes = _changes(r.mpi, median.mpi)
        elif cause == "gpu_wait_s":  # the GPU work it waited for: a kernel or a copy kind
            both = _changes(r.kernels, median.kernels) + _changes(r.copies, median.copies, " copies")
            changes = sorted(both, key=lambda d: -d[1])
        else:
            changes = [("CUDA API overheads", r.host_api_s - median.host_api_s)]
        detail, detail_s = changes[0] if changes and changes[0][1] > 0 else (None, 0.0)
        ended = "finished" if r.finished else "was stopped, unfinished,"
        if r.rank == median.rank:
            why = f"rank {r.rank} is the median rank ({ended} at {fmt_time(r.end_s)})"
        elif behind == 0:
            why = f"rank {r.rank} {ended} with the median rank (rank {median.rank})"
        elif behind < 0:
            why = f"rank {r.rank} {ended} {fmt_time(-behind)} before the median rank (rank {median.rank})"
        else:
            why = (
                f"rank {r.rank} {ended} {fmt_time(behind)} after the median rank (rank {median.rank}): "
                f"{fmt_time(diffs[cause])} more {_MORE[cause]}"
            )
            if detail:
                words = f"{detail} +{fmt_time(detail_s)}"
                if detail_s > diffs[cause] and changes[-1][1] < 0:  # more than all of it: others took less
                    words += f", {changes[-1][0]} -{fmt_time(-changes[-1][1])}"
                why += f" ({words})"
        late = behind > 0 and r.rank != median.rank
        rows.append(
            {
                "rank": r.rank,
                "end_s": r.end_s,
                "behind_s": behind,
                "median_rank": median.rank,
                "cause": cause if late else None,
                "cause_s": diffs[cause] if late else 0.0,
                "detail": detail if late else None,
                "detail_s": detail_s if late and detail else 0.0,
                "why": why,
            }
        )
    return rows


def _kernels(ranks: list[RankResult]) -> pd.DataFrame:
    import pandas as pd

    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for r in ranks:
        for name, tally in r.kernels.items():
            times.setdefault(name, []).append(tally.time_s)
            counts[name] = counts.get(name, 0) + tally.count
    totals = {name: math.fsum(t) for name, t in times.items()}
    overall = math.fsum(totals.values())
    rows = [
        {
            "kernel": name,
            "total_s": totals[name],
            "count": counts[name],
            "mean_s": totals[name] / counts[name] if counts[name] else 0.0,
            "share": totals[name] / overall if overall > 0 else 0.0,
        }
        for name in sorted(totals, key=lambda n: (-totals[n], n))
    ]
    return pd.DataFrame(rows, columns=["kernel", "total_s", "count", "mean_s", "share"])


NCCL_COLUMNS = ("operation", "algorithm", "count", "bytes", "total_s", "mean_s", "share")


def _nccl(ranks: list[RankResult]) -> pd.DataFrame:
    import pandas as pd

    totals: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for r in ranks:
        for name, tally in r.nccl.items():
            totals.setdefault(name, []).append(tally.time_s)
            counts[name] = counts.get(name, 0) + tally.count
            sizes[name] = sizes.get(name, 0) + tally.bytes
    total = {name: math.fsum(t) for name, t in totals.items()}
    overall = math.fsum(total.values())
    rows = []
    for name in sorted(total, key=lambda n: (-total[n], n)):
        call, _, algorithm = name.partition(" ")
        n = counts[name]
        rows.append(
            {
                "operation": call,
                "algorithm": algorithm,
                "count": n,
                "bytes": sizes[name] / n if n else 0.0,
                "total_s": total[name],
                "mean_s": total[name] / n if n else 0.0,
                "share": total[name] / overall if overall > 0 else 0.0,
            }
        )
    return pd.DataFrame(rows, columns=list(NCCL_COLUMNS))


def fmt_time(seconds: float) -> str:
    """A simulated time for people: 1.234 ms, 56.700 us."""
    if seconds == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if round(abs(seconds) / scale, 3) >= 1:  # as printed: 0.9999996 ms is 1.000 ms, not 1000.000 us
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


def _fmt_bytes(n: float, per_second: bool = False) -> str:
    suffix = "/s" if per_second else ""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if round(abs(n) / scale, 3) >= 1:
            return f"{n / scale:.3f} {unit}{suffix}"
    return f"{n:.0f} B{suffix}"


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def _table(heads: Sequence[str], rows: Iterable[Sequence[object]], right: Sequence[bool] | None = None) -> list[str]:
    """A Markdown table (pipes and a header rule), its columns padded for reading as text."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(heads)]
    right = right or [i > 0 for i in range(len(heads))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if r else (":" + "-" * (w + 1)) for w, r in zip(widths, right)) + "|"
    return [line(list(heads)), rule, *(line(row) for row in cells)]


def _group_label(row: dict) -> str:
    return f"{row['first_rank']}-{row['last_rank']}"


def text(rep: Report, figures: Sequence[str] = ()) -> str:
    """The report as Markdown; ``figures``: the figure files (in the report's folder) it links to."""
    res = rep.results
    lines = [f"# Report of {rep.run_dir}" if rep.run_dir else "# Report of a run", ""]
    where = ranks_on(res)
    if res.status != "completed":
        lines += ["## Failure", ""]
        failure = res.failure.message if res.failure else "no failure recorded"
        lines.append(f"The run did not complete: **{res.status}**: {failure}")
        if res.makespan_s is not None:
            lines.append(
                f"It ended at simulated time {fmt_time(res.makespan_s)} ({where}); the tables below stop there."
            )
        lines.append("")
    elif res.makespan_s is not None:
        lines += [f"Simulated makespan {fmt_time(res.makespan_s)} ({where}).", ""]
    if note := managed_note(res):
        lines += [f"Managed memory: {note}.", ""]
    shown = set(figures)

    def figure(name: str, title: str) -> None:
        for ext in ("svg", "png"):  # the SVG where both are written: it scales
            if f"{name}.{ext}" in shown:
                lines.extend([f"![{title}]({name}.{ext})", ""])
                return

    lines += ["## Time by category per rank", ""]
    if not res.ranks:
        lines += ["No per-rank report in this run.", ""]
    else:
        lines.append(
            "A rank's time (host, MPI, GPU wait, idle) adds up to the makespan; kernels are its "
            "GPU's device time, which runs beside it."
        )
        lines.append("")
        heads = [
            "rank",
            "ended" if res.status != "completed" else "finished",
            "kernels",
            "MPI",
            "GPU wait",
            "host",
            "idle",
        ]
        if rep.groups is None:
            rows = [
                [r["rank"], *(fmt_time(r[c]) for c in ("end_s", *CATEGORY_COLUMNS))]
                for r in rep.categories.to_dict("records")
            ]
            lines += _table(heads, rows)
        else:
            lines.append(f"{len(res.ranks)} ranks in groups of consecutive ranks: min / mean / max over each group.")
            lines.append("")
            rows = [
                [
                    _group_label(g),
                    *(
                        " / ".join(fmt_time(g[f"{c}_{s}"]) for s in ("min", "mean", "max"))
                        for c in ("end_s", *CATEGORY_COLUMNS)
                    ),
                ]
                for g in rep.groups.to_dict("records")
            ]
            lines += _table(["ranks", *heads[1:]], rows)
        lines.append("")
        figure("time_by_category", "time by category per rank")

    lines += ["## Time by term", ""]
    if rep.term_summary is None:
        lines += ["No per-rank report in this run.", ""]
    else:
        s = rep.term_summary
        lines.append(
            "Each rank's time up to its end, every instant in one term: waiting while its GPU ran its "
            "kernels (kernels), in MPI point-to-point calls or NCCL transfers with no kernel running "
            "(exposed p2p), in collectives (exposed coll.), waiting for copies or synchronisation "
            "(copies+sync), in CUDA API overheads, in the program's own host code; then idle until the "
            f"last rank finished (docs/running.md: the terms). Rank {s.critical_rank} finished last; "
            f"the mean is over {n_ranks(len(res.ranks))}."
            + (f" Per iteration: divided by {s.iterations} iterations." if s.iterations else "")
        )
        lines.append("")
        rows = [
            [
                f"{'rank ' + str(t['rank']) if t['row'] == 'critical' else 'mean'}"
                + (" per iteration" if t["per"] == "iteration" else ""),
                *(fmt_time(t[name]) for name in (*TERMS, "total_s")),
            ]
            for t in rep.terms.to_dict("records")
        ]
        lines += _table(["", *TERM_HEADINGS, "total"], rows, [False, *[True] * (len(TERMS) + 1)])
        lines.append("")

    lines += ["## Slowest ranks", ""]
    if rep.slowest.empty:
        lines += ["No per-rank report in this run.", ""]
    else:
        lines += [f"- {why}" for why in rep.slowest["why"].head(rep.top)]
        lines.append("")

    lines += ["## Top kernels", ""]
    if rep.kernels.empty:
        lines += ["No per-rank report in this run." if not res.ranks else "No kernels ran in this run.", ""]
    else:
        rows = [
            [k["kernel"], fmt_time(k["total_s"]), k["count"], fmt_time(k["mean_s"]), _percent(k["share"])]
            for k in rep.kernels.head(rep.top).to_dict("records")
        ]
        lines.append(f"{len(rep.kernels)} kernels; device time summed over ranks, most first.")
        lines.append("")
        lines += _table(["kernel", "total", "count", "mean", "share"], rows, [False, True, True, True, True])
        lines.append("")
        figure("top_kernels", "top kernels")

    lines += ["## Communication hidden and exposed", ""]
    if rep.hidden_fraction is None:
        lines += ["No per-rank report in this run." if not res.ranks else "No communication in this run.", ""]
    else:
        total = math.fsum(rep.communication["comm_s"])
        exposed = math.fsum(rep.communication["comm_exposed_s"])
        lines.append(
            f"{_percent(rep.hidden_fraction)} of the run's communication ({fmt_time(total)} over all ranks) "
            f"was hidden behind its GPUs' work; {fmt_time(exposed)} was exposed."
        )
        lines.append("")
        heads = ["rank", "communication", "hidden", "exposed", "hidden fraction"]
        if rep.communication_groups is None:
            rows = [
                [
                    c["rank"],
                    *(fmt_time(c[k]) for k in ("comm_s", "comm_hidden_s", "comm_exposed_s")),
                    _percent(c["hidden_fraction"]),
                ]
                for c in rep.communication.to_dict("records")
            ]
        else:
            heads[0] = "ranks (mean)"
            rows = [
                [
                    _group_label(g),
                    *(fmt_time(g[k]) for k in ("comm_s", "comm_hidden_s", "comm_exposed_s")),
                    _percent(g["hidden_fraction"]),
                ]
                for g in rep.communication_groups.to_dict("records")
            ]
        lines += _table(heads, rows)
        lines.append("")
        figure("communication", "communication hidden and exposed")

    if not rep.nccl.empty:
        lines += ["## NCCL operations", ""]
        lines.append(
            f"{len(rep.nccl)} NCCL operations by NCCL's algorithm and protocol; device time on their "
            "streams (from the stream reaching the operation to its last transfer) summed over ranks, most first."
        )
        lines.append("")
        rows = [
            [
                n["operation"],
                n["algorithm"],
                n["count"],
                _fmt_bytes(n["bytes"]),
                fmt_time(n["total_s"]),
                fmt_time(n["mean_s"]),
                _percent(n["share"]),
            ]
            for n in rep.nccl.to_dict("records")
        ]
        heads = ["operation", "algorithm", "count", "bytes per call", "total", "mean", "share"]
        lines += _table(heads, rows, [False, False, True, True, True, True, True])
        lines.append("")

    lines += ["## Busiest links", ""]
    if rep.links.empty:
        lines += ["No link statistics in this run.", ""]
    else:
        rows = [
            [
                link["link"],
                link["kind"],
                _fmt_bytes(link["capacity_Bps"], per_second=True),
                _fmt_bytes(link["bytes"]),
                fmt_time(link["busy_s"]),
                _percent(link["busy_fraction"]),
                _percent(link["utilisation"]),
            ]
            for link in rep.links.head(rep.top).to_dict("records")
        ]
        lines.append(f"{len(rep.links)} link directions, highest utilisation (bytes / (capacity x makespan)) first.")
        lines.append("")
        lines += _table(
            ["link", "kind", "capacity", "bytes", "busy", "busy fraction", "utilisation"],
            rows,
            [False, False, True, True, True, True, True],
        )
        lines.append("")
        figure("links", "busiest links")
    return "\n".join(lines).rstrip("\n") + "\n"


def _scale(largest: float) -> tuple[float, str]:
    """A time unit for an axis whose largest value is ``largest`` seconds."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if largest >= scale:
            return scale, unit
    return 1e-9, "ns"


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=_SIZE, dpi=_DPI, layout="constrained")


def plot_time_by_category(rep: Report) -> Figure:
    """Per rank (or group of ranks: their means, the span of their end times as a whisker) a
    stacked bar of its timeline (host, MPI, GPU wait, idle: the makespan) and beside it a
    narrower bar of its GPU's kernel time. Each bar's ``gid`` is ``<column>-rank<N>`` (or
    ``<column>-group<first>-<last>``), which the SVG keeps as the id of its group."""
    fig = _figure()
    ax = fig.add_subplot()
    if rep.groups is None:
        labels = [str(r) for r in rep.categories["rank"]]
        ids = [f"rank{r}" for r in rep.categories["rank"]]
        values = {c: list(rep.categories[c]) for c in CATEGORY_COLUMNS}
        ax.set_xlabel("rank")
    else:
        labels = [_group_label(g) for g in rep.groups.to_dict("records")]
        ids = [f"group{g['first_rank']}-{g['last_rank']}" for g in rep.groups.to_dict("records")]
        values = {c: list(rep.groups[f"{c}_mean"]) for c in CATEGORY_COLUMNS}
        ax.set_xlabel("ranks (mean over each group)")
    largest = max([rep.results.makespan_s or 0.0, *values["kernel_s"]])
    scale, unit = _scale(largest)
    x = list(range(len(labels)))
    bottom = [0.0] * len(x)
    for column, name in TIMELINE:
        heights = [v / scale for v in values[column]]
        bars = ax.bar([i - 0.15 for i in x], heights, 0.55, bottom=bottom, label=name, color=_COLOURS[column])
        for bar, gid in zip(bars, ids):
            bar.set_gid(f"{column}-{gid}")
        bottom = [b + h for b, h in zip(bottom, heights)]
    bars = ax.bar([i + 0.28 for i in x], [v / scale for v in values["kernel_s"]], 0.25, label=KERNELS[1])
    for bar, gid in zip(bars, ids):
        bar.set_color(_COLOURS["kernel_s"])
        bar.set_gid(f"kernel_s-{gid}")
    if rep.groups is not None:  # how far apart the group's ranks finished
        lo = [v / scale for v in rep.groups["end_s_min"]]
        hi = [v / scale for v in rep.groups["end_s_max"]]
        ax.vlines([i - 0.15 for i in x], lo, hi, color="black", linewidth=1, label="end (min to max)")
    ax.set_xticks(x, labels, rotation=90 if len(x) > 16 else 0)
    ax.set_ylabel(f"simulated time ({unit})")
    ax.set_title("Time by category per rank")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def plot_top_kernels(rep: Report) -> Figure:
    """The top kernels' device time summed over ranks, a horizontal bar each, most at the top;
    bar ``gid``: ``kernel<i>`` (i: its place in Report.kernels)."""
    fig = _figure()
    ax = fig.add_subplot()
    top = rep.kernels.head(rep.top)
    scale, unit = _scale(float(top["total_s"].max()))
    names = [_short(k) for k in top["kernel"]]
    bars = ax.barh(range(len(top)), [t / scale for t in top["total_s"]], color=_COLOURS["kernel_s"])
    for i, bar in enumerate(bars):
        bar.set_gid(f"kernel{i}")
    ax.set_yticks(range(len(top)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"device time over all ranks ({unit})")
    ax.set_title("Top kernels")
    return fig


def plot_communication(rep: Report) -> Figure:
    """Per rank (or group: means) its communication time as a stacked bar: hidden behind its
    GPU's work, then exposed; bar ``gid``: ``comm_hidden_s-rank<N>``, ``comm_exposed_s-rank<N>``."""
    fig = _figure()
    ax = fig.add_subplot()
    table = rep.communication if rep.communication_groups is None else rep.communication_groups
    if rep.communication_groups is None:
        labels = [str(r) for r in table["rank"]]
        ids = [f"rank{r}" for r in table["rank"]]
        ax.set_xlabel("rank")
    else:
        labels = [_group_label(g) for g in table.to_dict("records")]
        ids = [f"group{g['first_rank']}-{g['last_rank']}" for g in table.to_dict("records")]
        ax.set_xlabel("ranks (mean over each group)")
    scale, unit = _scale(float(table["comm_s"].max()))
    x = list(range(len(labels)))
    bottom = [0.0] * len(x)
    for column, name in (("comm_hidden_s", "hidden"), ("comm_exposed_s", "exposed")):
        heights = [v / scale for v in table[column]]
        bars = ax.bar(x, heights, 0.6, bottom=bottom, label=name, color=_COLOURS[column])
        for bar, gid in zip(bars, ids):
            bar.set_gid(f"{column}-{gid}")
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(x, labels, rotation=90 if len(x) > 16 else 0)
    ax.set_ylabel(f"communication ({unit})")
    ax.set_title(f"Communication hidden and exposed ({_percent(rep.hidden_fraction or 0.0)} hidden over the run)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def plot_links(rep: Report) -> Figure:
    """The busiest links' utilisation and busy fraction, two horizontal bars each; bar ``gid``:
    ``utilisation<i>``, ``busy_fraction<i>`` (i: its place in Report.links)."""
    fig = _figure()
    ax = fig.add_subplot()
    top = rep.links.head(rep.top)
    y = list(range(len(top)))
    for column, name, offset, colour in (
        ("utilisation", "utilisation", -0.2, "#4c72b0"),
        ("busy_fraction", "busy fraction", 0.2, "#cccccc"),
    ):
        bars = ax.barh([i + offset for i in y], [100 * v for v in top[column]], 0.4, label=name, color=colour)
        for i, bar in enumerate(bars):
            bar.set_gid(f"{column}{i}")
    ax.set_yticks(y, [f"{link} ({kind})" for link, kind in zip(top["link"], top["kind"])])
    ax.invert_yaxis()
    ax.set_xlabel("% of the makespan")
    ax.set_title("Busiest links")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def _short(kernel: str, width: int = 40) -> str:
    """A kernel's name for an axis: its arguments dropped when too long."""
    if len(kernel) <= width:
        return kernel
    name = kernel.split("(", 1)[0] + "(...)"
    return name if len(name) <= width else name[: width - 3] + "..."


def figures(rep: Report) -> dict[str, Figure]:
    """The report's figures by name, those it has data for."""
    made = {}
    if len(rep.categories):
        made["time_by_category"] = plot_time_by_category(rep)
    if len(rep.kernels):
        made["top_kernels"] = plot_top_kernels(rep)
    if rep.hidden_fraction is not None:
        made["communication"] = plot_communication(rep)
    if len(rep.links):
        made["links"] = plot_links(rep)
    return made


def write(rep: Report, out: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """report.md, a CSV per table and the figures in ``out`` (every earlier report's files
    removed first); returns the files written."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        made = figures(rep)  # everything is made before anything is written or removed
    names = [f"{name}.{ext}" for name in made for ext in formats]
    tables = {
        "time_by_category.csv": rep.categories,
        "terms.csv": rep.terms,
        "terms_by_rank.csv": rep.terms_by_rank,
        "slowest_ranks.csv": rep.slowest,
        "top_kernels.csv": rep.kernels,
        "communication.csv": rep.communication,
        "links.csv": rep.links,
    }
    if not rep.nccl.empty:
        tables["nccl_operations.csv"] = rep.nccl
    if rep.groups is not None:
        tables["time_by_category_groups.csv"] = rep.groups
    if rep.communication_groups is not None:
        tables["communication_groups.csv"] = rep.communication_groups
    body = text(rep, names)
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    written = []
    for name, table in tables.items():
        table.to_csv(out / name, index=False, lineterminator="\n")
        written.append(out / name)
    with matplotlib.rc_context(_RC):
        for name, fig in made.items():
            for ext in formats:
                path = out / f"{name}.{ext}"
                # no date or software version in the files: the same run gives the same bytes
                metadata = {"Date": None, "Creator": None} if ext == "svg" else {"Software": None}
                fig.savefig(path, format=ext, metadata=metadata)
                written.append(path)
    (out / "report.md").write_text(body)
    written.append(out / "report.md")
    return written
