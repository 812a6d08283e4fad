"""The timeline trace of a run (``orrery run --trace``, docs/trace.md): what the shim recorded
turned into a Chrome trace-event JSON file (trace.json) that ui.perfetto.dev opens.

The shim writes its events while the run goes (interpose/core/trace.cpp), only for the ranks and
the window asked for, as rows of run_description.json's ``trace_rows`` (trace.tsv); ``write``
reads them by those names after the run, completed or not, and lays them out: a process per
rank (its host thread, then one thread per CUDA stream), a process per GPU (one thread per copy
engine), a process of link counters (link_series.tsv, when the run wrote one), flow arrows from
each point-to-point message's send to its receive. Times are simulated: microseconds in the
file, rounded to the nanosecond, the same for the same inputs.

Not here: recording (the shim), choosing what to record (the CLI and the API give
``TraceOptions``), results.json (results.py).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import numbers
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import units
from ..errors import InputError
from .run_description import SCHEMA

EVENTS_FILE = "trace.tsv"  # the shim's event file, removed once trace.json is written
TRACE_FILE = "trace.json"
LINK_SERIES_FILE = "link_series.tsv"  # per link direction, its rate whenever it changes (links.cpp)
DEFAULT_LINKS = 8

#: The event file's rows, by kind: column names and types, as the shim writes them.
ROWS: dict[str, dict[str, str]] = {kind: spec["columns"] for kind, spec in SCHEMA["trace_rows"].items()}
_READ = {"int": int, "number": float, "string": str}
_READERS = {kind: (tuple(columns), tuple(_READ[t] for t in columns.values())) for kind, columns in ROWS.items()}
_NO_PEER, _ANY_PEER = -1, -2  # interpose/core/runtime.hpp, Rank::kNoPeer, Rank::kAnyPeer


@dataclass(frozen=True)
class TraceOptions:
    """What a run records for its trace: the ranks kept (empty: all), the window of simulated
    time (events that overlap it are kept; ``end_s`` None: no end), the number of links given a
    counter track (the busiest)."""

    ranks: tuple[int, ...] = ()
    begin_s: float = 0.0
    end_s: float | None = None
    links: int = DEFAULT_LINKS

    def description(self, out: Path) -> dict[str, Any]:
        """The run description's ``trace`` section (run_description.json, Trace)."""
        return {
            "events": str(out / EVENTS_FILE),
            "ranks": list(self.ranks),
            "begin_s": self.begin_s,
            "end_s": self.end_s,
        }


# ---------------------------------------------------------------- options


def parse_ranks(value: str | Iterable[int], ranks: int, flag: str = "--trace-ranks") -> tuple[int, ...]:
    """``0-3,8`` (or a list of ranks) as the sorted ranks it names, each a rank of the job."""
    expected = f"ranks and ranges of ranks of the job (0 to {ranks - 1}), e.g. 0-3,8"
    if isinstance(value, str):
        kept: set[int] = set()
        for part in value.split(","):
            first, dash, last = part.strip().partition("-")
            if not first.isdigit() or (dash and not last.isdigit()):
                raise InputError(flag, None, value, expected)
            low, high = int(first), int(last) if dash else int(first)
            if low > high or high >= ranks:
                raise InputError(flag, None, value, expected)
            kept.update(range(low, high + 1))
        return tuple(sorted(kept))
    listed = list(value)
    if not listed or not all(
        isinstance(r, numbers.Integral) and not isinstance(r, bool) and 0 <= r < ranks for r in listed
    ):
        raise InputError(flag, None, listed, expected)
    return tuple(sorted({int(r) for r in listed}))


def parse_window(value: str | Sequence[object], flag: str = "--trace-window") -> tuple[float, float | None]:
    """``BEGIN:END`` (times with units, either may be empty), or a (begin, end) pair of seconds or
    times with units (None: open), as (begin_s, end_s or None)."""
    expected = "BEGIN:END, simulated times with units such as 1ms:2ms (either may be empty), BEGIN before END"
    if isinstance(value, str):
        parts: Sequence[object] = value.split(":")
    else:
        parts = list(value)
    if len(parts) != 2:
        raise InputError(flag, None, value, expected)

    def one(side: object) -> float | None:
        if side is None or (isinstance(side, str) and not side.strip()):
            return None
        try:  # a Python caller's plain number is seconds; on the command line a time needs its unit
            return units.parse(side, "time", plain=not isinstance(side, str))
        except ValueError:
            raise InputError(flag, None, value, expected) from None

    begin, end = one(parts[0]), one(parts[1])
    if end is not None and begin is not None and begin >= end:
        raise InputError(flag, None, value, expected)
    return begin or 0.0, end


def parse_links(value: str | int, flag: str = "--trace-links") -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise InputError(flag, None, value, "a whole number of links, 0 or more (the busiest get a counter track)")
    return int(text)


def options(
    ranks_in_job: int,
    ranks: str | Iterable[int] | None = None,
    window: str | Sequence[object] | None = None,
    links: str | int | None = None,
) -> TraceOptions:
    """The trace's options from what a user gave (the CLI's strings or the API's values)."""
    begin, end = parse_window(window) if window is not None else (0.0, None)
    return TraceOptions(
        ranks=parse_ranks(ranks, ranks_in_job) if ranks is not None else (),
        begin_s=begin,
        end_s=end,
        links=parse_links(links) if links is not None else DEFAULT_LINKS,
    )


# ---------------------------------------------------------------- reading the event file


def _typed(kind: str, fields: list[str]) -> dict[str, Any] | None:
    names, readers = _READERS.get(kind, ((), ()))
    if not names or len(fields) != len(names):
        return None
    try:
        return dict(zip(names, [read(text) for read, text in zip(readers, fields)]))
    except ValueError:
        return None


def read_events(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The event file's rows by kind. A run that crashed may have left its last line half
    written: a row that does not parse is left out."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not path.is_file():
        return rows
    with path.open(newline="") as f:
        for line in f:
            kind, _, rest = line.rstrip("\n").partition("\t")
            row = _typed(kind, rest.split("\t"))
            if row is not None:
                rows[kind].append(row)
    return rows


def read_link_series(path: Path) -> dict[str, list[tuple[float, float]]]:
    """link_series.tsv (header time_s, link, bytes_per_s; a row whenever a link direction's
    rate changes) as each link's (time, rate) steps in time order."""
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    if not path.is_file():
        return series
    with path.open(newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = {"time_s", "link", "bytes_per_s"} - set(reader.fieldnames or ())
        if missing:
            raise InputError(str(path), None, reader.fieldnames, "a header time_s, link, bytes_per_s")
        for line, row in enumerate(reader, start=2):
            try:
                t, rate = float(row["time_s"]), float(row["bytes_per_s"])
            except (TypeError, ValueError):
                raise InputError(str(path), f"line {line}", row, "a time in seconds and a rate in bytes/s") from None
            series[row["link"]].append((t, rate))
    for steps in series.values():
        steps.sort(key=lambda s: s[0])
    return series


def busiest_links(series: dict[str, list[tuple[float, float]]], n: int) -> list[str]:
    """The n links that carried the most bytes (each rate held until its next change), the
    busiest first; ties by name."""

    def carried(steps: list[tuple[float, float]]) -> float:
        return sum(rate * (t1 - t0) for (t0, rate), (t1, _) in itertools.pairwise(steps))

    ranked = sorted(series, key=lambda name: (-carried(series[name]), name))
    return ranked[:n]


# ---------------------------------------------------------------- laying it out


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _us(ns: int) -> float:
    """Nanoseconds as the microseconds the format wants: ns / 1000 is the double nearest that
    decimal, which JSON writes with at most three decimals, as Perfetto reads it back."""
    return ns / 1000


@dataclass
class _Event:
    key: tuple  # sort key: (ts, then the order below); Python's sort keeps the file's order of equals
    event: dict[str, Any]
    then: list[dict[str, Any]] = field(default_factory=list)  # flow events bound to it, right after


class _Layout:
    """Processes and threads (Perfetto's tracks), numbered in a fixed order."""

    def __init__(self, description: dict[str, Any]):
        self.ranks = len(description["ranks"])
        self.rank_node = [int(r["node"]) for r in description["ranks"]]
        gpus = sorted((int(g["node"]), int(g["index"]), g["host"]) for g in description["gpus"])
        self.gpu_pid = {(node, index): self.ranks + 1 + i for i, (node, index, _) in enumerate(gpus)}
        self.gpu_host = {(node, index): host for node, index, host in gpus}
        self.links_pid = self.ranks + len(gpus) + 1
        self.threads: dict[tuple, tuple[int, str, int]] = {}  # track key -> (pid, name, sort index)

    def host(self, rank: int) -> tuple:
        key = ("host", rank)
        self.threads.setdefault(key, (rank + 1, "host", 0))
        return key

    def stream(self, rank: int, device: int, stream: int) -> tuple:
        key = ("stream", rank, device, stream)
        name = f"{'default stream' if stream == 0 else f'stream {stream}'} (device {device})"
        self.threads.setdefault(key, (rank + 1, name, 1 + device * 100000 + stream))
        return key

    def engine(self, node: int, gpu: int, engine: str, unit: int) -> tuple:
        key = ("engine", node, gpu, engine, unit)
        name = f"{engine} engine" + (f" {unit}" if unit else "")
        order = {"H2D": 0, "D2H": 1, "copy": 2}.get(engine, 3)
        self.threads.setdefault(key, (self.gpu_pid[(node, gpu)], name, order * 1000 + unit))
        return key

    def tids(self) -> dict[tuple, int]:
        """Thread ids unique across processes (Perfetto's JSON import keys threads by tid)."""
        return {key: i + 1 for i, key in enumerate(sorted(self.threads, key=repr))}

    def metadata(self, tids: dict[tuple, int], with_links: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        used_pids = sorted({pid for pid, _, _ in self.threads.values()} | ({self.links_pid} if with_links else set()))
        gpu_of_pid = {pid: key for key, pid in self.gpu_pid.items()}
        for pid in used_pids:
            if pid <= self.ranks:
                name = f"rank {pid - 1} (node {self.rank_node[pid - 1]})"
            elif pid in gpu_of_pid:
                node, index = gpu_of_pid[pid]
                name = f"GPU {index} of node {node} ({self.gpu_host[(node, index)]})"
            else:
                name = "links"
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for key in sorted(self.threads, key=lambda k: tids[k]):
            pid, name, order = self.threads[key]
            tid = tids[key]
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": order}})
        return out


def _peer(value: int) -> int | str | None:
    return "any" if value == _ANY_PEER else None if value < 0 else value


def _host_args(row: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if row["category"] == "mpi":
        args["bytes"] = row["bytes"]
        if (peer := _peer(row["peer"])) is not None:
            args["peer"] = peer
        if (tag := _peer(row["tag"])) is not None:
            args["tag"] = tag
    elif row["category"] == "cuda":
        if row["detail"] and row["detail"] != "unfinished":
            args["of"] = row["detail"]
        if row["bytes"]:
            args["bytes"] = row["bytes"]
    elif row["detail"] != "unfinished":
        args["for"] = row["detail"]
    if row["detail"] == "unfinished":
        args["unfinished"] = True
    return args


def _op_args(row: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if row["category"] == "kernel":
        args.update(grid=row["grid"], block=row["block"])
    elif row["category"] in ("copy", "memset"):
        args["bytes"] = row["bytes"]
    elif row["category"] == "wait":
        args["waiting"] = row["detail"]
    if row["detail"] == "unfinished":
        args["unfinished"] = True
    return args


def _slice(layout_key: tuple, name: str, cat: str, begin_s: float, end_s: float, args: dict[str, Any]) -> _Event:
    t0, t1 = _ns(begin_s), _ns(end_s)
    dur = max(t1 - t0, 0)
    event = {"ph": "X", "name": name, "cat": cat, "ts": t0, "dur": dur, "args": args}
    # Of slices that start together on a thread, a parent is longer than its child; one that takes
    # no time is never a parent (the shim writes none with children) and came first.
    return _Event((t0, dur > 0, -dur), {"track": layout_key, **event})


def _flows(
    rows: dict[str, list[dict[str, Any]]], call_slices: dict[tuple[int, int], _Event]
) -> Iterator[tuple[_Event, _Event, dict[str, Any], dict[str, Any]]]:
    """Each message whose send and receive are both in the trace: its two slices and its flow
    start and end. A send and a receive pair up by MPI's non-overtaking rule: the seq-th message
    from s to d with tag T on communicator c (the shim numbers both sides)."""
    receives = {(r["peer"], r["rank"], r["tag"], r["comm"], r["seq"]): r for r in rows.get("recv", [])}
    for s in rows.get("send", []):
        r = receives.get((s["rank"], s["peer"], s["tag"], s["comm"], s["seq"]))
        if r is None:
            continue
        out, into = call_slices.get((s["rank"], s["call"])), call_slices.get((r["rank"], r["call"]))
        if out is None or into is None:
            continue
        name = f"message {s['rank']} -> {s['peer']}"
        args = {"bytes": s["bytes"], "from": s["rank"], "to": s["peer"], "tag": s["tag"]}
        yield (
            out,
            into,
            {"ph": "s", "name": name, "cat": "mpi", "args": args},
            {
                "ph": "f",
                "bp": "e",
                "name": name,
                "cat": "mpi",
            },
        )


def events(
    description: dict[str, Any],
    rows: dict[str, list[dict[str, Any]]],
    links: dict[str, list[tuple[float, float]]],
    opts: TraceOptions,
) -> list[dict[str, Any]]:
    """The trace's events: metadata first, then every timed event in time order (of slices that
    start together, the one that takes no time first, then the longer, so that Perfetto nests
    them as they happened), each flow event right after the slice it binds to (Perfetto binds a
    flow to the slice open on its thread when it reads the flow event)."""
    layout = _Layout(description)
    timed: list[_Event] = []
    call_slices: dict[tuple[int, int], _Event] = {}
    for row in rows.get("host", []):
        e = _slice(
            layout.host(row["rank"]), row["name"], row["category"], row["begin_s"], row["end_s"], _host_args(row)
        )
        timed.append(e)
        if row["category"] == "mpi" and row["call"]:
            call_slices[(row["rank"], row["call"])] = e
    for row in rows.get("op", []):
        key = layout.stream(row["rank"], row["device"], row["stream"])
        timed.append(_slice(key, row["name"], row["category"], row["begin_s"], row["end_s"], _op_args(row)))
    for row in rows.get("engine", []):
        key = layout.engine(row["node"], row["gpu"], row["engine"], row["unit"])
        args = {"bytes": row["bytes"], "rank": row["rank"], "device": row["device"], "stream": row["stream"]}
        timed.append(_slice(key, row["name"], "copy", row["begin_s"], row["end_s"], args))
    for row in rows.get("mark", []):
        key = layout.stream(row["rank"], row["device"], row["stream"])
        t = _ns(row["time_s"])
        event = {"track": key, "ph": "i", "s": "t", "name": row["name"], "cat": "event", "ts": t}
        timed.append(_Event((t, False, 0), event))
    kept_links = busiest_links(links, opts.links)
    begin_ns, end_ns = _ns(opts.begin_s), math.inf if opts.end_s is None else _ns(opts.end_s)
    for name in kept_links:
        steps = [(_ns(t), rate) for t, rate in links[name]]
        inside = [(t, rate) for t, rate in steps if begin_ns <= t <= end_ns]
        before = [rate for t, rate in steps if t < begin_ns]
        if before and (not inside or inside[0][0] > begin_ns):  # the rate the window starts with
            inside.insert(0, (begin_ns, before[-1]))
        for t, rate in inside:
            counter = {"pid": layout.links_pid, "ph": "C", "name": name, "ts": t, "args": {"B/s": rate}}
            timed.append(_Event((t, False, 0), counter))

    timed.sort(key=lambda e: e.key)
    position = {id(e): i for i, e in enumerate(timed)}
    flows = list(_flows(rows, call_slices))
    for flow_id, (out, into, start, _) in enumerate(flows, start=1):
        start.update(id=flow_id, track=out.event["track"], ts=out.event["ts"])
        out.then.append(start)
        # a wait or test says nothing of what it completed: the slice that received lists it
        message = start["args"]
        received = {"from": message["from"], "tag": message["tag"], "bytes": message["bytes"]}
        into.event["args"].setdefault("received", []).append(received)
    for flow_id, (out, into, _, finish) in enumerate(flows, start=1):
        # the finish goes after its receive slice and after the start, which may come later
        later = into if position[id(into)] >= position[id(out)] else out
        finish.update(id=flow_id, track=into.event["track"], ts=max(into.event["ts"], out.event["ts"]))
        later.then.append(finish)

    tids = layout.tids()
    out_events = layout.metadata(tids, bool(kept_links))
    for e in timed:
        for event in (e.event, *e.then):
            out_events.append(_placed(event, layout, tids))
    return out_events


def _placed(event: dict[str, Any], layout: _Layout, tids: dict[tuple, int]) -> dict[str, Any]:
    """The event with its track as pid and tid, its times in microseconds."""
    out = dict(event)
    track = out.pop("track", None)
    if track is not None:
        pid, _, _ = layout.threads[track]
        out["pid"], out["tid"] = pid, tids[track]
    else:
        out["tid"] = 0
    out["ts"] = _us(out["ts"])
    if "dur" in out:
        out["dur"] = _us(out["dur"])
    return out


def write(out: Path, opts: TraceOptions) -> Path:
    """trace.json in `out` from the run's event file and its run description (run.json), with
    the link counters of link_series.tsv if the run wrote one; the event file is removed."""
    description = json.loads((out / "run.json").read_text())
    rows = read_events(out / EVENTS_FILE)
    links = read_link_series(out / LINK_SERIES_FILE)
    tmp = out / (TRACE_FILE + ".part")
    encode = json.JSONEncoder(separators=(",", ":")).encode
    with tmp.open("w") as f:  # one event a line: a large trace stays readable with grep
        f.write('{"traceEvents": [\n')
        f.write("\n,".join(encode(event) for event in events(description, rows, links, opts)))
        f.write("\n]}\n")
    tmp.replace(out / TRACE_FILE)
    (out / EVENTS_FILE).unlink(missing_ok=True)
    return out / TRACE_FILE
