"""A checker of Chrome trace-event JSON as Orrery writes it (docs/trace.md), for the trace tests:
the keys each phase needs, numeric times, flows that start and finish, slices that nest on their
thread, and the slice each flow event binds to when a reader takes the events in file order as
Perfetto does (a flow binds to the slice open on its thread)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

REQUIRED = {
    "X": ("name", "ts", "dur", "pid", "tid"),
    "i": ("name", "ts", "pid", "tid", "s"),
    "C": ("name", "ts", "pid", "args"),
    "M": ("name", "pid", "args"),
    "s": ("name", "cat", "id", "ts", "pid", "tid"),
    "f": ("name", "cat", "id", "ts", "pid", "tid", "bp"),
}
METADATA = ("process_name", "process_sort_index", "thread_name", "thread_sort_index")


def _ns(us: float) -> int:
    return round(us * 1000)


@dataclass
class Checked:
    """What the checker learned: the slices by (pid, tid), each flow's two bound slices, and the
    args of each flow's start."""

    slices: dict[tuple[int, int], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    flows: dict[object, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    flow_args: dict[object, dict[str, Any]] = field(default_factory=dict)
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    processes: dict[int, str] = field(default_factory=dict)


def check(trace: dict[str, Any]) -> Checked:
    """Raise AssertionError at the first departure from the format; return what was checked."""
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "no traceEvents list"
    out = Checked()
    open_slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)  # per thread, as a reader has them
    starts: dict[object, dict[str, Any]] = {}
    last_ts = -math.inf
    for i, e in enumerate(trace["traceEvents"]):
        ph = e.get("ph")
        assert ph in REQUIRED, f"event {i}: phase {ph!r}"
        for key in REQUIRED[ph]:
            assert key in e, f"event {i} ({ph}) has no {key}: {e}"
        for key in ("ts", "dur"):
            if key in e:
                v = e[key]
                assert isinstance(v, (int, float)) and not isinstance(v, bool), (
                    f"event {i}: {key} {v!r} is not a number"
                )
                assert math.isfinite(v) and v >= 0, f"event {i}: {key} {v!r}"
        if ph == "M":
            assert e["name"] in METADATA, f"event {i}: metadata {e['name']}"
            if e["name"] == "thread_name":
                out.threads[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e["name"] == "process_name":
                out.processes[e["pid"]] = e["args"]["name"]
            continue
        # Orrery writes its timed events in time order, which lets a reader bind flows as it goes
        assert e["ts"] >= last_ts, f"event {i}: ts {e['ts']} before {last_ts}"
        last_ts = e["ts"]
        if ph == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values()), f"event {i}: {e}"
            continue
        thread = (e["pid"], e["tid"])
        stack = open_slices[thread]
        if ph in ("X", "i"):
            begin, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))
            while stack and stack[-1]["_end"] <= begin:  # slices are half-open: one ending here is closed
                stack.pop()
            if stack:  # inside the open slice: it must end within it
                assert end <= stack[-1]["_end"], f"event {i} overlaps {stack[-1]['name']} on {thread}: {e}"
            s = {**e, "_begin": begin, "_end": end}
            stack.append(s)
            out.slices[thread].append(s)
        elif ph == "s":
            assert e["id"] not in starts, f"event {i}: flow {e['id']} started twice"
            assert stack, f"event {i}: flow {e['id']} starts outside any slice"
            starts[e["id"]] = stack[-1]
            out.flow_args[e["id"]] = e.get("args", {})
        else:  # "f", bound to the enclosing slice
            assert e["bp"] == "e", f"event {i}: flow finish not bound to its enclosing slice"
            assert e["id"] in starts, f"event {i}: flow {e['id']} finishes before it starts"
            assert stack, f"event {i}: flow {e['id']} finishes outside any slice"
            assert e["id"] not in out.flows, f"event {i}: flow {e['id']} finished twice"
            out.flows[e["id"]] = (starts[e["id"]], stack[-1])
    unfinished = set(starts) - set(out.flows)
    assert not unfinished, f"flows that never finish: {sorted(unfinished)}"
    return out


def named(checked: Checked, thread_name: str, process_name: str) -> list[dict[str, Any]]:
    """The slices of the thread with these names."""
    for (pid, tid), name in checked.threads.items():
        if name == thread_name and checked.processes.get(pid) == process_name:
            return checked.slices.get((pid, tid), [])
    return []
