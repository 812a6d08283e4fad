"""orrery.run.timeline: a trace's excerpt as a figure (rows per track, bars per slice, arrows)."""

from __future__ import annotations

import json

import pytest

from orrery.errors import InputError
from orrery.run import timeline

pytestmark = pytest.mark.unit


def _trace(tmp_path):
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "rank 0 (node 0)"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "rank 1 (node 1)"}},
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "GPU 0 of node 0 (host)"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 5, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 6, "args": {"name": "default stream (device 0)"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 1 (device 0)"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 8, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_name", "pid": 3, "tid": 9, "args": {"name": "H2D engine"}},
    ]
    x = [  # stream 1 never used: no row
        {"ph": "X", "name": "MPI_Send", "cat": "mpi", "ts": 10.0, "dur": 5.0, "pid": 1, "tid": 5, "args": {}},
        {"ph": "X", "name": "k", "cat": "kernel", "ts": 2.0, "dur": 6.0, "pid": 1, "tid": 6, "args": {}},
        {"ph": "X", "name": "MPI_Recv", "cat": "mpi", "ts": 9.0, "dur": 8.0, "pid": 2, "tid": 8, "args": {}},
        {"ph": "X", "name": "H2D", "cat": "copy", "ts": 0.0, "dur": 2.0, "pid": 3, "tid": 9, "args": {"rank": 0}},
        {"ph": "s", "name": "message 0 -> 1", "cat": "mpi", "id": 1, "ts": 10.0, "pid": 1, "tid": 5},
        {"ph": "f", "name": "message 0 -> 1", "cat": "mpi", "id": 1, "ts": 17.0, "pid": 2, "tid": 8, "bp": "e"},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": meta + x}))
    return path


def test_tracks_of_chosen_ranks_and_their_engines(tmp_path):
    events = timeline._events(_trace(tmp_path))
    labels = [t.label for t in timeline.tracks(events)]
    assert labels == [
        "rank 0: host",
        "rank 0: default stream (device 0)",
        "rank 1: host",
        "GPU 0 of node 0: H2D engine",
    ]
    # rank 1 alone: the engine carried only rank 0's copy
    assert [t.label for t in timeline.tracks(events, [1])] == ["rank 1: host"]


def test_figure_draws_each_slice_in_its_row_and_the_message(tmp_path):
    _trace(tmp_path)
    fig = timeline.figure(tmp_path, ranks=[0, 1], window=(1e-6, None))  # the folder holding trace.json
    ax = fig.axes[0]
    bars = sorted(
        (tuple(round(v, 6) for v in c.get_paths()[0].get_extents().bounds) for c in ax.collections),
        key=lambda b: (b[1], b[0]),
    )
    # (start us, row - 0.4, duration, 0.8): the host's send, the kernel, rank 1's receive, the copy
    assert bars == [(10.0, -0.4, 5.0, 0.8), (2.0, 0.6, 6.0, 0.8), (9.0, 1.6, 8.0, 0.8), (0.0, 2.6, 2.0, 0.8)]
    assert ax.get_xlim() == (1.0, 17.0)
    (arrow,) = ax.texts  # the message: from the send's start on row 0 to the receive's end on row 2
    assert arrow.xy == (17.0, 2) and arrow.xyann == (10.0, 0)


def test_a_file_that_is_not_a_trace_is_named(tmp_path):
    (tmp_path / "trace.json").write_text("[1, 2]")
    with pytest.raises(InputError, match=r"trace.json: key 'traceEvents': got None, expected a trace written by"):
        timeline.figure(tmp_path)
    with pytest.raises(InputError, match=r"key 'ranks': got \[7\], expected ranks the trace holds"):
        timeline.figure(_trace(tmp_path), ranks=[7])
