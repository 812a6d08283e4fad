"""The trace's options, its link counters from a hand-written link_series.tsv, and how events are
laid out for Perfetto (orrery/run/trace.py), without running anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trace_format import check, named

from orrery.errors import InputError
from orrery.run import trace

pytestmark = pytest.mark.unit
ORRERY = str(Path(sys.executable).parent / "orrery")

DESCRIPTION = {  # what trace.py reads of run.json: where the ranks and GPUs are
    "ranks": [{"node": 0, "cpu": "n0-cpu0"}, {"node": 0, "cpu": "n0-cpu0"}],
    "gpus": [{"node": 0, "index": 0, "host": "n0-gpu0"}, {"node": 0, "index": 1, "host": "n0-gpu1"}],
}


def test_trace_ranks_and_window_read_as_documented():
    assert trace.parse_ranks("0-3,8", 16) == (0, 1, 2, 3, 8)
    assert trace.parse_ranks(" 5 ,2-3", 6) == (2, 3, 5)
    assert trace.parse_ranks([3, 1, 3], 4) == (1, 3)
    assert trace.parse_window("1ms:2.5ms") == (1e-3, 2.5e-3)
    assert trace.parse_window(":20us") == (0.0, 20e-6)
    assert trace.parse_window("3us:") == (3e-6, None)
    assert trace.parse_window((1e-3, None)) == (1e-3, None)
    assert trace.options(4, window="1ms:2ms", links="0") == trace.TraceOptions((), 1e-3, 2e-3, 0)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--trace-ranks", "0-9", "expected ranks and ranges of ranks of the job (0 to 3), e.g. 0-3,8"),
        ("--trace-ranks", "2-1", "expected ranks and ranges of ranks of the job (0 to 3), e.g. 0-3,8"),
        ("--trace-ranks", "one", "expected ranks and ranges of ranks of the job (0 to 3), e.g. 0-3,8"),
        ("--trace-window", "2ms:1ms", "expected BEGIN:END, simulated times with units such as 1ms:2ms "
         "(either may be empty), BEGIN before END"),
        ("--trace-window", "1:2", "expected BEGIN:END, simulated times with units such as 1ms:2ms "
         "(either may be empty), BEGIN before END"),
        ("--trace-window", "1ms", "expected BEGIN:END, simulated times with units such as 1ms:2ms "
         "(either may be empty), BEGIN before END"),
        ("--trace-links", "-1", "expected a whole number of links, 0 or more (the busiest get a counter track)"),
    ],
)  # fmt: skip
def test_a_bad_trace_option_is_one_line_naming_the_flag_value_and_what_was_expected(tmp_path, flag, value, message):
    # checked before the program is looked at: no program is needed
    p = subprocess.run(
        [ORRERY, "run", "--out", str(tmp_path / "o"), flag, value, "--", "./no-such-program"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert p.stderr == f"orrery: error: {flag}: got {value!r}, {message}\n"
    assert not (tmp_path / "o").exists()


def test_the_api_refuses_the_same_values():
    import orrery

    with pytest.raises(InputError, match=r"^--trace-window: got \(0\.002, 0\.001\), expected BEGIN:END"):
        orrery.simulate("./no-such-program", trace_window=(2e-3, 1e-3))
    with pytest.raises(InputError, match=r"^--trace-ranks: got \[4\], expected ranks"):
        orrery.simulate("./no-such-program", trace_ranks=[4])


def write_run(tmp_path: Path, rows: list[str], links: str | None = None) -> Path:
    (tmp_path / "run.json").write_text(json.dumps(DESCRIPTION))
    (tmp_path / trace.EVENTS_FILE).write_text("".join(r + "\n" for r in rows))
    if links is not None:
        (tmp_path / trace.LINK_SERIES_FILE).write_text(links)
    return tmp_path


# three link directions: a is busy 1 GB/s for 2 us (2000 B), b 4 GB/s for 1 us (4000 B), c 1 GB/s for 1 us
LINKS = """time_s\tlink\tbytes_per_s
0\ta\t1e9
1e-6\tb\t4e9
1e-6\tc\t1e9
2e-6\ta\t0
2e-6\tb\t0
2e-6\tc\t0
"""


def counters(trace_json: dict) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for e in trace_json["traceEvents"]:
        if e["ph"] == "C":
            out.setdefault(e["name"], []).append((e["ts"], e["args"]["B/s"]))
    return out


def test_link_counters_are_the_busiest_links_rates_in_the_window(tmp_path):
    out = write_run(tmp_path, [], LINKS)
    path = trace.write(out, trace.TraceOptions(links=2))
    t = json.loads(path.read_text())
    check(t)
    assert counters(t) == {"b": [(1.0, 4e9), (2.0, 0.0)], "a": [(0.0, 1e9), (2.0, 0.0)]}
    links_pid = {e["pid"] for e in t["traceEvents"] if e["ph"] == "C"}
    assert [e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name"] == ["links"]
    assert links_pid == {len(DESCRIPTION["ranks"]) + len(DESCRIPTION["gpus"]) + 1}
    # a window from 1.5 us: each link's rate then, and its changes inside
    t = json.loads(trace.write(out, trace.TraceOptions(begin_s=1.5e-6, end_s=3e-6, links=3)).read_text())
    assert counters(t) == {"a": [(1.5, 1e9), (2.0, 0.0)], "b": [(1.5, 4e9), (2.0, 0.0)], "c": [(1.5, 1e9), (2.0, 0.0)]}
    t = json.loads(trace.write(out, trace.TraceOptions(links=0)).read_text())
    assert counters(t) == {}


def test_a_link_series_without_its_header_is_named(tmp_path):
    out = write_run(tmp_path, [], "time\tlink\trate\n0\ta\t1\n")
    with pytest.raises(InputError, match=r"link_series.tsv: got \['time', 'link', 'rate'\], expected a header"):
        trace.write(out, trace.TraceOptions())


def host(rank, name, begin, end, call=0, category="mpi", detail=""):
    return f"host\t{rank}\t{category}\t{name}\t{begin}\t{end}\t0\t-1\t-1\t{call}\t{detail}"


def test_slices_that_start_together_nest_as_they_happened_and_a_half_written_row_is_dropped(tmp_path):
    """A call that took no time came before one that starts with it; of two that take time, the
    longer holds the shorter. A crash can cut the file's last line: it is left out."""
    rows = [
        host(0, "MPI_Irecv", 0, 0, call=1),
        host(0, "wait for GPU", 1e-6, 2e-6, category="wait"),
        host(0, "cudaStreamSynchronize", 1e-6, 3e-6, category="cuda"),
        host(0, "MPI_Wait", 0, 1e-6, call=2),
        "host\t0\tmpi\tMPI_Barr",
    ]
    t = json.loads(trace.write(write_run(tmp_path, rows), trace.TraceOptions()).read_text())
    c = check(t)
    order = [(s["name"], s["ts"]) for s in named(c, "host", "rank 0 (node 0)")]
    assert order == [("MPI_Irecv", 0), ("MPI_Wait", 0), ("cudaStreamSynchronize", 1), ("wait for GPU", 1)]
    assert not (tmp_path / trace.EVENTS_FILE).exists()


def test_an_arrow_binds_to_its_slices_whichever_starts_first(tmp_path):
    """The receive of the first message started before its send, the second one after: both
    arrows go from the send's slice to the receive's, as a reader binding in file order sees."""
    rows = [
        host(1, "MPI_Recv", 0, 5e-6, call=1),
        host(0, "MPI_Send", 1e-6, 2e-6, call=1),
        "send\t0\t1\t3\t-1\t0\t1\t8\t1e-06",
        "recv\t1\t0\t3\t-1\t0\t1\t5e-06",
        host(0, "MPI_Isend", 6e-6, 6e-6, call=2),
        host(1, "MPI_Wait", 7e-6, 7e-6, call=2),
        "send\t0\t1\t3\t-1\t1\t2\t16\t6e-06",
        "recv\t1\t0\t3\t-1\t1\t2\t7e-06",
        "send\t0\t1\t4\t-1\t0\t2\t16\t6e-06",  # never received: no arrow
    ]
    c = check(json.loads(trace.write(write_run(tmp_path, rows), trace.TraceOptions()).read_text()))
    pairs = sorted((a["name"], b["name"], b["args"]["received"][0]["bytes"]) for a, b in c.flows.values())
    assert pairs == [("MPI_Isend", "MPI_Wait", 16), ("MPI_Send", "MPI_Recv", 8)]
