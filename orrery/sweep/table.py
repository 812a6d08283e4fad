"""A sweep's table: one row per point, in the spec's order, as a pandas DataFrame, CSV and Parquet.

Columns (docs/sweeps.md): ``point`` (its id: its folder is OUT/points/ID), the parameters
the spec sweeps (``machine`` always; ``costs``, ``calibration``, ``set.KEY`` and program
parameters where swept, as the spec writes them), ``args`` (the program's arguments at the
point), the layout resolved (``nodes``, ``gpus_per_node``, ``ranks_per_node``, ``gpus``,
``ranks``), ``series``, ``status``, ``makespan_s``, ``speedup`` and ``efficiency`` within
the series, the mean and the max over ranks of each time of results.json (``kernel_mean_s``,
``kernel_max_s``, ...), ``kernels_without_cost`` (launches given the default time) and
``error``. A point that did not complete has its status and error and no times.

A *series* is the points that differ only in their layout (nodes, gpus_per_node,
ranks_per_node): the same machine, overrides, files and program parameters. Speed-up and
efficiency are relative to its smallest completed point (fewest GPUs, then ranks, then
nodes): speed-up T_ref / T, parallel efficiency speed-up x GPUs_ref / GPUs.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..run.results import Results
from .execute import Outcome, Prepared
from .spec import LAYOUT, Sweep

if TYPE_CHECKING:
    import pandas as pd

#: results.json's per-rank figures the table gives the mean and max of
BREAKDOWN = (
    "kernel_s",
    "mpi_s",
    "gpu_wait_s",
    "host_s",
    "host_api_s",
    "idle_s",
    "comm_s",
    "comm_exposed_s",
    "comm_hidden_s",
    "hidden_fraction",
)
CSV, PARQUET = "sweep.csv", "sweep.parquet"


def _stat_columns(name: str) -> tuple[str, str]:
    base, unit = (name[:-2], "_s") if name.endswith("_s") else (name, "")
    return f"{base}_mean{unit}", f"{base}_max{unit}"


STAT_COLUMNS = [c for name in BREAKDOWN for c in _stat_columns(name)]
#: The table's columns after the point's id and its parameters: what the sweep made of the point
RESULT_COLUMNS = (
    "args",
    *LAYOUT,
    "gpus",
    "ranks",
    "series",
    "status",
    "makespan_s",
    "speedup",
    "efficiency",
    *STAT_COLUMNS,
    "kernels_without_cost",
    "error",
)


def _parameter_columns(sweep: Sweep) -> list[str]:
    seen = dict.fromkeys(["machine"])
    for p in sweep.points:
        seen.update(dict.fromkeys(k for k in p.parameters if k not in LAYOUT))
    return list(seen)


def _cell(value: object) -> object:
    """A parameter as one cell: a list of arguments as a command line writes it, a measured
    model's list of tables as JSON."""
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return shlex.join(value)
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def _row(sweep: Sweep, p: Prepared, outcome: Outcome, columns: list[str]) -> dict[str, Any]:
    point = p.point
    row: dict[str, Any] = {"point": point.id}
    for c in columns:
        if c == "machine":
            row[c] = point.machine
        else:
            row[c] = _cell(point.parameters.get(c))
    row["args"] = shlex.join(p.args) if p.args is not None else None
    row["nodes"] = point.nodes
    row["gpus_per_node"] = p.gpus_per_node
    row["ranks_per_node"] = p.ranks_per_node
    row["gpus"] = point.nodes * p.gpus_per_node if p.gpus_per_node else None
    row["ranks"] = point.nodes * p.ranks_per_node if p.ranks_per_node else None
    row["status"] = outcome.status
    res: Results | None = outcome.results
    done = res is not None and res.status == "completed" and res.makespan_s is not None and res.ranks
    row["makespan_s"] = res.makespan_s if done and res is not None else None
    for name in BREAKDOWN:
        mean, top = _stat_columns(name)
        values = [getattr(r, name) for r in res.ranks] if done and res is not None else []
        row[mean] = math.fsum(values) / len(values) if values else None
        row[top] = max(values) if values else None
    row["kernels_without_cost"] = sum(res.kernels_without_cost.values()) if done and res is not None else None
    row["error"] = outcome.error
    return row


def _series(rows: list[dict[str, object]], columns: list[str]) -> list[int]:
    """Each row's series, numbered from 1 in the order series first appear."""
    keys: dict[str, int] = {}
    return [keys.setdefault(json.dumps([r[c] for c in columns]), len(keys) + 1) for r in rows]


def _scaling(rows: list[dict[str, Any]]) -> None:
    """Each completed row's speed-up and efficiency against its series' smallest completed point."""
    for r in rows:
        r["speedup"] = r["efficiency"] = None
    done = [r for r in rows if r["status"] == "completed"]
    for s in dict.fromkeys(r["series"] for r in done):
        group = [r for r in done if r["series"] == s]
        ref = min(group, key=lambda r: (r["gpus"], r["ranks"], r["nodes"]))  # the first of equals
        for r in group:
            r["speedup"] = ref["makespan_s"] / r["makespan_s"]
            r["efficiency"] = r["speedup"] * ref["gpus"] / r["gpus"]


def _dtype(values: list[object]) -> str:
    """The one type a column's values have for pandas and Parquet: whole numbers as nullable
    integers, numbers as floats, booleans, else text."""
    given = [v for v in values if v is not None]
    if given and all(isinstance(v, bool) for v in given):
        return "boolean"
    if given and all(isinstance(v, int) and not isinstance(v, bool) for v in given):
        return "Int64"
    if given and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given):
        return "Float64"
    return "string"


INTEGERS = (*LAYOUT, "gpus", "ranks", "series", "kernels_without_cost")
FLOATS = ("makespan_s", "speedup", "efficiency", *STAT_COLUMNS)
TEXTS = ("point", "args", "status", "error")


def frame(sweep: Sweep, prepared: list[Prepared], outcomes: list[Outcome]) -> pd.DataFrame:
    """The sweep's table, one row per point in the spec's order."""
    import pandas as pd

    columns = _parameter_columns(sweep)
    rows = [_row(sweep, p, o, columns) for p, o in zip(prepared, outcomes)]
    for r, s in zip(rows, _series(rows, columns)):
        r["series"] = s
    _scaling(rows)
    names = ["point", *columns, *RESULT_COLUMNS]
    dtypes = {n: "Int64" if n in INTEGERS else "Float64" if n in FLOATS else "string" for n in names}
    for c in columns:
        dtypes[c] = _dtype([r[c] for r in rows])
        if dtypes[c] == "string":
            for r in rows:
                r[c] = None if r[c] is None else str(r[c])
    table = pd.DataFrame([[r[n] for n in names] for r in rows], columns=names, dtype=object)
    return table.astype(dtypes)


def write(table: pd.DataFrame, out: Path) -> list[Path]:
    """OUT/sweep.csv (the same table gives the same bytes) and OUT/sweep.parquet, each written
    whole or not at all."""
    written = []
    for name, save in (
        (CSV, lambda p: table.to_csv(p, index=False, lineterminator="\n")),
        (PARQUET, lambda p: table.to_parquet(p, index=False, engine="pyarrow")),
    ):
        part = out / (name + ".part")
        save(part)
        part.replace(out / name)
        written.append(out / name)
    return written
