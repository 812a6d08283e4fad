"""A timeline excerpt of a trace as a figure: what Perfetto shows, as a matplotlib Figure for a
notebook or a report (docs/trace.md).

``figure(trace, ranks=[0, 1], window=(1e-3, 1.2e-3))`` draws one row per track of the chosen
ranks (their host thread and CUDA streams, the copy engines of their GPUs), each slice a bar
coloured by what it is (MPI call, kernel, copy, memset, CUDA call, wait), and each message as an
arrow from the call that sent it to the call that completed its receive. Times are simulated
seconds from the start of the run; the trace's own unit (microseconds) is read as it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..schema import read_text

#: Colours by the trace's categories (orrery/run/trace.py), in the legend's order
COLOURS = {
    "mpi": "tab:red",
    "kernel": "tab:blue",
    "copy": "tab:green",
    "memset": "tab:olive",
    "cuda": "tab:purple",
    "wait": "lightgrey",
}


@dataclass(frozen=True)
class Track:
    pid: int
    tid: int
    label: str


def _events(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, "a trace written by orrery run --trace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), None, "invalid JSON", f"a trace written by orrery run --trace ({e})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise InputError(str(path), "traceEvents", None, "a trace written by orrery run --trace")
    return events


def tracks(events: list[dict[str, Any]], ranks: Iterable[int] | None = None) -> list[Track]:
    """The tracks of the chosen ranks (all: None) in the trace's order: each rank's host thread
    and streams, then the copy engines of the GPUs they used."""
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    wanted = None if ranks is None else set(ranks)
    rank_pids = {
        pid
        for pid, name in processes.items()
        if name.startswith("rank ") and (wanted is None or int(name.split()[1]) in wanted)
    }
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    # a GPU's copy engines, where a kept rank's copies ran (an engine's slices name their rank)
    engine_pids = {
        e["pid"]
        for e in events
        if e["ph"] == "X"
        and processes.get(e["pid"], "").startswith("GPU")
        and (wanted is None or e.get("args", {}).get("rank") in wanted)
    }
    out = []
    for (pid, tid), name in sorted(threads.items()):
        if (pid, tid) in used and (pid in rank_pids or pid in engine_pids):
            head = processes[pid].split(" (")[0]
            out.append(Track(pid, tid, f"{head}: {name}"))
    return out


def figure(
    trace: str | os.PathLike,
    ranks: Iterable[int] | None = None,
    window: tuple[float | None, float | None] = (None, None),
    width: float = 11.0,
):
    """The excerpt of `trace` (a trace.json, or the run folder holding it) for `ranks` (all:
    None) over `window` (simulated seconds; None: the run's start or end), as a matplotlib
    Figure."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    ranks = None if ranks is None else list(ranks)  # read twice: the tracks, and an error naming them
    path = Path(trace)
    if path.is_dir():
        path = path / "trace.json"
    events = _events(path)
    chosen = tracks(events, ranks)
    if not chosen:
        raise InputError(str(path), "ranks", ranks, "ranks the trace holds")
    row = {(t.pid, t.tid): i for i, t in enumerate(chosen)}
    begin = 0.0 if window[0] is None else window[0] * 1e6
    slices = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in row]
    end = max(e["ts"] + e["dur"] for e in slices) if window[1] is None else window[1] * 1e6
    fig = Figure(figsize=(width, 0.6 + 0.32 * len(chosen)))
    ax = fig.subplots()
    for e in slices:
        if e["ts"] + e["dur"] < begin or e["ts"] > end:
            continue
        ax.broken_barh(
            [(e["ts"], max(e["dur"], 1e-3))],
            (row[(e["pid"], e["tid"])] - 0.4, 0.8),
            facecolors=COLOURS.get(e.get("cat", ""), "black"),
            edgecolor="none",
        )
    # messages: a flow's start and finish (ids pair them), drawn where both ends are shown
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    for f in (e for e in events if e["ph"] == "f"):
        s = starts.get(f["id"])
        if s is None or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        if s["ts"] > end or f["ts"] < begin:
            continue
        ax.annotate(
            "",
            xy=(f["ts"], row[(f["pid"], f["tid"])]),
            xytext=(s["ts"], row[(s["pid"], s["tid"])]),
            arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.6},
        )
    ax.set_xlim(begin, end)
    ax.set_ylim(len(chosen) - 0.5, -0.5)
    ax.set_yticks(range(len(chosen)), [t.label for t in chosen], fontsize=7)
    ax.set_xlabel("simulated time (µs)")
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in COLOURS.items()],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=7,
    )
    fig.tight_layout()
    return fig
