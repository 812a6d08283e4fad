"""A sweep's scaling figures, from its table (table.py): each function takes the table and
returns a matplotlib Figure; ``write`` saves them all as PNG and SVG in OUT/plots/.

- ``time``: simulated makespan against GPUs, one line per series (log-log);
- ``speedup`` and ``efficiency``: against GPUs, relative to each series' smallest completed
  point, with the ideal;
- ``breakdown``: per completed point, its ranks' mean time stacked by where it went (host,
  MPI, waiting for the GPU, idle until the last rank finished: they add up to the makespan).

Not among the sweep's own figures, for a what-if study (a run and its variants: another
fabric, GPUDirect off, ...): ``variants``, each point's makespan with its change from a
reference point beside its kernel, MPI and exposed communication time, its points named by
``point_labels``.

Only completed points are drawn. A series is the points that differ only in their layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .table import RESULT_COLUMNS

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

PLOTS = ("time", "speedup", "efficiency", "breakdown")
#: the parts of a rank's time that add up to the makespan (results.json), stacked in this order
PARTS = (("host_mean_s", "host"), ("mpi_mean_s", "MPI"), ("gpu_wait_mean_s", "GPU wait"), ("idle_mean_s", "idle"))
# a point's parameters are the table's columns other than its id and what the sweep made of it
_NOT_SERIES = {"point", *RESULT_COLUMNS}


def series_labels(table: pd.DataFrame) -> dict[int, str]:
    """Each series named by the parameters in which the series differ (all alike: 'all points')."""
    keys = [c for c in table.columns if c not in _NOT_SERIES]
    firsts = table.drop_duplicates("series")
    varying = [c for c in keys if firsts[c].astype("string").fillna("").nunique() > 1]
    labels = {}
    for _, r in firsts.iterrows():
        parts = [f"{c}={'' if r[c] is None or str(r[c]) == '<NA>' else r[c]}" for c in varying]
        labels[int(r["series"])] = ", ".join(parts) or "all points"
    return labels


def _blank(value: object) -> bool:
    return value is None or str(value) in ("<NA>", "nan")


def point_labels(table: pd.DataFrame, unset: str = "as described") -> list[str]:
    """Each point (row) named by what it gives of the keys whose values differ between points:
    ``KEY=VALUE`` (a machine override without its ``set.``, as ``orrery run --set`` writes it),
    in the table's column order; a point that gives none of them: `unset` (the machine as
    its description has it)."""
    keys = [c for c in table.columns if c not in _NOT_SERIES]
    keys += [c for c in ("nodes", "gpus_per_node", "ranks_per_node") if c in table.columns]
    varying = [c for c in keys if table[c].astype("string").fillna("").nunique() > 1]
    labels = []
    for _, r in table.iterrows():
        parts = [f"{c.removeprefix('set.')}={r[c]}" for c in varying if not _blank(r[c])]
        labels.append(", ".join(parts) or unset)
    return labels


def _completed(table: pd.DataFrame) -> pd.DataFrame:
    done = table[table["status"] == "completed"]
    return done.sort_values(["series", "gpus", "ranks", "nodes"], kind="stable")


def _each_series(done: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    return [(s, done[done["series"] == s]) for s in sorted(set(done["series"].tolist()))]


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(7, 4.5), layout="constrained")


def _lines(table: pd.DataFrame, column: str, ylabel: str, title: str, log_y: bool) -> Figure:
    fig = _figure()
    ax = fig.add_subplot()
    labels = series_labels(table)
    done = _completed(table)
    for s, group in _each_series(done):
        ax.plot(group["gpus"].astype(float), group[column].astype(float), marker="o", label=labels[s])
    from matplotlib.ticker import EngFormatter, FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    gpus = sorted({int(g) for g in done["gpus"]})
    ax.set_xticks(gpus, [str(g) for g in gpus])  # the GPU counts swept, written out
    ax.xaxis.set_minor_formatter(NullFormatter())
    values = [float(v) for v in done[column] if float(v) > 0]
    if log_y and values and max(values) >= 10 * min(values):  # log only over a decade or more: its ticks
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(bottom=0, top=max(values, default=1.0) * 1.1)
    ax.yaxis.set_major_formatter(
        EngFormatter(unit="s") if column == "makespan_s" else FuncFormatter(lambda v, _: f"{v:g}")
    )
    ax.set_xlabel("GPUs")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def _legend(fig: Figure) -> None:
    ax = fig.axes[0]
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small", loc="best")


def time(table: pd.DataFrame) -> Figure:
    fig = _lines(table, "makespan_s", "simulated makespan", "Time against GPUs", log_y=True)
    _legend(fig)
    return fig


def speedup(table: pd.DataFrame) -> Figure:
    fig = _lines(table, "speedup", "speed-up", "Speed-up against GPUs (each series' smallest point = 1)", log_y=True)
    ax = fig.axes[0]
    done = _completed(table)
    refs = sorted({int(g["gpus"].iloc[0]) for _, g in _each_series(done)})
    top = float(done["gpus"].max()) if len(done) else 1.0
    for i, ref in enumerate(refs):  # ideal: speed-up in proportion to the GPUs
        ax.plot([ref, top], [1.0, top / ref], "k--", lw=0.8, label="ideal" if i == 0 else None)
    _legend(fig)
    return fig


def efficiency(table: pd.DataFrame) -> Figure:
    fig = _lines(table, "efficiency", "parallel efficiency", "Parallel efficiency against GPUs", log_y=False)
    ax = fig.axes[0]
    ax.axhline(1.0, color="k", ls="--", lw=0.8, label="ideal")
    ax.set_ylim(bottom=0, top=max(1.1, ax.get_ylim()[1]))
    _legend(fig)
    return fig


def breakdown(table: pd.DataFrame) -> Figure:
    """Per completed point, its ranks' mean time by where it went: in seconds (top) and as a
    share of the makespan (bottom)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, PercentFormatter

    done = _completed(table)
    labels = series_labels(table)
    several = done["series"].nunique() > 1
    fig = Figure(figsize=(max(7.0, 0.45 * len(done) + 2), 6.5), layout="constrained")
    top, share = fig.subplots(2, 1, sharex=True)
    x = list(range(len(done)))
    span = [float(v) for v in done["makespan_s"]]
    below = [0.0] * len(done)
    for column, name in PARTS:
        values = [float(v) for v in done[column]]
        top.bar(x, values, bottom=below, label=name)
        share.bar(x, [v / t for v, t in zip(values, span)], bottom=[b / t for b, t in zip(below, span)])
        below = [b + v for b, v in zip(below, values)]
    ticks = [f"{int(r['gpus'])}" + (f"\ns{int(r['series'])}" if several else "") for _, r in done.iterrows()]
    share.set_xticks(x, ticks, fontsize="small")
    share.set_xlabel("GPUs" + (" / series" if several else ""))
    top.yaxis.set_major_formatter(EngFormatter(unit="s"))
    top.set_ylabel("mean time per rank")
    share.yaxis.set_major_formatter(PercentFormatter(1.0))
    share.set_ylabel("share of the makespan")
    share.set_ylim(0, 1)
    title = "Where the time goes"
    if several:
        shown = set(done["series"])
        title += "\n" + "; ".join(f"s{s}: {t}" for s, t in sorted(labels.items()) if s in shown)
    fig.suptitle(title, fontsize="small" if several else None, wrap=True)
    if len(done):
        fig.legend(*top.get_legend_handles_labels(), loc="outside lower center", ncols=len(PARTS), fontsize="small")
    return fig


#: what ``variants`` sets beside each point's makespan: the ranks' mean time in each
VARIANT_PARTS = (("kernel_mean_s", "kernel"), ("mpi_mean_s", "MPI"), ("comm_exposed_mean_s", "exposed communication"))


def variants(table: pd.DataFrame, labels: Sequence[str] | None = None, reference: int = 0) -> Figure:
    """A what-if study's points side by side, one row each in the table's order, completed
    points only: left, the simulated makespan and its change from the reference point (the
    table's row at position `reference`, drawn darker); right, the ranks' mean kernel time, MPI
    time and exposed communication (VARIANT_PARTS), which show where a change of the makespan
    came from. `labels`: a name per row of the table (default ``point_labels``)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    from ..errors import InputError

    names = list(labels) if labels is not None else point_labels(table)
    if len(names) != len(table):
        raise InputError("variants", "labels", len(names), f"a label per row of the table ({len(table)})")
    if not 0 <= reference < len(table) or table["status"].iloc[reference] != "completed":
        raise InputError("variants", "reference", reference, "the position of a completed point in the table")
    done = [i for i in range(len(table)) if table["status"].iloc[i] == "completed"]
    base = float(table["makespan_s"].iloc[reference])
    fig = Figure(figsize=(11, 0.55 * len(done) + 1.8), layout="constrained")
    span, parts = fig.subplots(1, 2, sharey=True)
    y = list(range(len(done)))
    spans = [float(table["makespan_s"].iloc[i]) for i in done]
    colours = ["tab:blue" if i == reference else "lightsteelblue" for i in done]
    span.barh(y, spans, color=colours)
    for row, i, value in zip(y, done, spans):
        change = "reference" if i == reference else f"{value / base - 1:+.1%}"
        span.annotate(change, (value, row), xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
    span.set_xlim(0, 1.2 * max(spans, default=1.0))  # room for the changes written after the bars
    span.set_yticks(y, [names[i] for i in done], fontsize="small")
    span.invert_yaxis()  # the table's first row on top
    span.set_title("simulated makespan (change from the reference)", fontsize="medium")
    height = 0.8 / len(VARIANT_PARTS)
    for k, (column, name) in enumerate(VARIANT_PARTS):
        offsets = [row + (k - (len(VARIANT_PARTS) - 1) / 2) * height for row in y]
        parts.barh(offsets, [float(table[column].iloc[i]) for i in done], height=height, label=name)
    parts.set_title("mean time per rank", fontsize="medium")
    fig.legend(
        *parts.get_legend_handles_labels(), loc="outside lower right", ncols=len(VARIANT_PARTS), fontsize="small"
    )
    for ax in (span, parts):
        ax.xaxis.set_major_formatter(EngFormatter(unit="s"))
        ax.grid(True, axis="x", alpha=0.3)
    return fig


def write(table: pd.DataFrame, folder: Path) -> list[Path]:
    """Every figure as folder/NAME.png and .svg; none when no point completed."""
    import matplotlib

    if not (table["status"] == "completed").any():
        return []
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "orrery-sweep"}):  # the same table draws the same SVG
        for name in PLOTS:
            fig = globals()[name](table)
            for ext, metadata in (("png", {"Software": None}), ("svg", {"Date": None})):
                path = folder / f"{name}.{ext}"
                fig.savefig(path, format=ext, metadata=metadata, dpi=120)
                written.append(path)
    return written
