"""`orrery run --trace`: trace.json against the trace-event format, and a golden excerpt of a small
2-rank program whose every slice is derived by hand from h100-ib200's parameters (as
test_timing.py derives its times); message pairing, the rank and window filters, a failed run's
trace, and no trace without the flag.

The program (programs/trace.cu, built alone here) does nothing that takes simulated time before
its mode's first call, so its events start at 0. Perfetto reads times to the nanosecond: every
time is compared to 1 ns.
"""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import HERE, build, needs_nvcc, orrery
from derivations import US, wire
from trace_format import check, named

pytestmark = [pytest.mark.native, needs_nvcc]

N = 4_000_000  # bytes rank 0 copies to its GPU
M = 1 << 20  # bytes it then sends to rank 1: at or above the eager threshold (rendezvous)
K = 50 * US  # the kernel's cost (cost file)
NS = 1e-3  # a nanosecond, in the trace's microseconds


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    return build(HERE / "native" / "programs" / "trace.cu", d / "trace")


@pytest.fixture(scope="module")
def costs(tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "costs.json"
    path.write_text(json.dumps({"kernels": {"work": {"time": "50us"}}}))
    return str(path)


def run(program, costs, out, *mode, options=()):
    p = orrery("run", "--gpus-per-node", "2", "--costs", costs, "--out", str(out), *options, "--", str(program), *mode)
    trace = json.loads((out / "trace.json").read_text()) if (out / "trace.json").is_file() else None
    return p, trace


def golden_times(h100):
    """rank 0: cudaMemcpy (its overhead, the copy over two PCIe hops, the sync overhead), the
    launch, the kernel and cudaDeviceSynchronize, then MPI_Send of device memory to rank 1 over
    NVLink (a rendezvous: the handshake's two latencies first; the MPI library's software time
    per message, h100-ib200's mpi.*_overhead_device_intra, on the sender before and on the
    receiver after); rank 1 receives from 0."""
    o, p, mpi = h100.overheads, h100.pcie, h100.mpi
    copy = 2 * p.latency + N / p.bandwidth
    launched = o.memcpy + copy + o.sync  # cudaLaunchKernel starts
    kernel = launched + o.launch
    sent = kernel + K + o.sync  # MPI_Send starts
    wired = wire(h100.nvlink.latency, M, h100.nvlink_pair_bandwidth, mpi.eager_threshold_device)
    message = mpi.overhead("send", "device", True) + wired  # MPI_Send returns once the data arrived
    return {
        "copy": (o.memcpy, copy),
        "memcpy": (0, o.memcpy + copy + o.sync),
        "launch": (launched, o.launch),
        "kernel": (kernel, K),
        "sync": (kernel, K + o.sync),
        "send": (sent, message),
        "recv": (0, sent + message + mpi.overhead("recv", "device", True)),
    }


def assert_slice(s, name, begin_s, dur_s, **args):
    assert s["name"] == name
    assert s["ts"] == pytest.approx(begin_s / US, abs=NS), name
    assert s["dur"] == pytest.approx(dur_s / US, abs=NS), name
    for key, value in args.items():
        assert s["args"].get(key) == value, (name, key, s["args"])


def test_golden_trace_of_a_copy_a_kernel_and_a_message_is_derived_from_the_machine(program, costs, tmp_path, h100):
    p, trace = run(program, costs, tmp_path / "a", "golden", str(N), str(M), options=("--trace",))
    assert p.returncode == 0, p.stderr
    t = golden_times(h100)
    c = check(trace)
    host0 = named(c, "host", "rank 0 (node 0)")
    assert [s["name"] for s in host0] == [
        "cudaMemcpy",
        "wait for GPU",
        "cudaLaunchKernel",
        "cudaDeviceSynchronize",
        "wait for GPU",
        "MPI_Send",
    ]
    assert_slice(host0[0], "cudaMemcpy", *t["memcpy"], of="H2D", bytes=N)
    assert_slice(host0[1], "wait for GPU", *t["copy"], **{"for": "default stream (device 0)"})
    assert_slice(host0[2], "cudaLaunchKernel", *t["launch"], of="work(float*)")
    assert_slice(host0[3], "cudaDeviceSynchronize", *t["sync"])
    assert_slice(host0[4], "wait for GPU", *t["kernel"], **{"for": "every stream of device 0"})
    assert_slice(host0[5], "MPI_Send", *t["send"], bytes=M, peer=1, tag=7)

    stream = named(c, "default stream (device 0)", "rank 0 (node 0)")
    assert len(stream) == 2
    assert_slice(stream[0], "H2D", *t["copy"], bytes=N)
    assert_slice(stream[1], "work(float*)", *t["kernel"], grid="4x1x1", block="256x1x1")
    (engine,) = named(c, "H2D engine", "GPU 0 of node 0 (n0-gpu0)")
    assert_slice(engine, "H2D", *t["copy"], bytes=N, rank=0, stream=0)

    (recv,) = named(c, "host", "rank 1 (node 0)")
    assert_slice(recv, "MPI_Recv", *t["recv"], bytes=M, peer=0, tag=7)
    assert recv["args"]["received"] == [{"from": 0, "tag": 7, "bytes": M}]
    # one arrow, from the send to the receive that took it
    assert [(a["name"], b["name"]) for a, b in c.flows.values()] == [("MPI_Send", "MPI_Recv")]
    assert next(iter(c.flows.values())) == (host0[5], recv)

    # the same inputs give the same file, byte for byte; the event file is gone
    again, _ = run(program, costs, tmp_path / "b", "golden", str(N), str(M), options=("--trace",))
    assert again.returncode == 0
    assert (tmp_path / "a" / "trace.json").read_bytes() == (tmp_path / "b" / "trace.json").read_bytes()
    assert not (tmp_path / "a" / "trace.tsv").exists()


def test_messages_pair_in_the_order_receives_were_posted_not_completed(program, costs, tmp_path):
    """Rank 1 posts (any source, tag 5), (rank 0, any tag), (any, any) and waits for them in the
    reverse order: by MPI's non-overtaking rule they got A, B and C (the program prints what each
    got), so A's arrow ends at the last wait, B's at the second, C's at the first."""
    p, trace = run(program, costs, tmp_path / "o", "pairs", options=("--trace",))
    assert p.returncode == 0, p.stderr
    assert "first receive got 1\nsecond receive got 2\nthird receive got 3" in p.stdout
    c = check(trace)
    rank1 = named(c, "host", "rank 1 (node 0)")
    waits = [s for s in rank1 if s["name"] == "MPI_Wait"]
    assert len(waits) == 5  # three of the messages above, two of the persistent request
    arrows: dict[int, list] = {}  # by tag: (send slice, receive slice, bytes), in send order
    for flow, (a, b) in c.flows.items():
        message = c.flow_args[flow]
        arrows.setdefault(message["tag"], []).append((a, b, message["bytes"]))
    by_size = {size: (a, b) for a, b, size in arrows[5] + arrows[6]}
    assert sorted(by_size) == [1000, 2000, 3000]
    assert by_size[1000][1] is waits[2] and by_size[2000][1] is waits[1] and by_size[3000][1] is waits[0]
    assert waits[0]["args"]["received"] == [{"from": 0, "tag": 6, "bytes": 3000}]
    assert {size: a["name"] for size, (a, _) in by_size.items()} == {
        1000: "MPI_Isend",
        2000: "MPI_Isend",
        3000: "MPI_Send",
    }
    for process in ("rank 0 (node 0)", "rank 1 (node 0)"):  # a collective: a slice with its bytes
        (allreduce,) = [s for s in named(c, "host", process) if s["name"] == "MPI_Allreduce"]
        assert allreduce["args"]["bytes"] == 8
    # MPI_Sendrecv_replace: an arrow each way between the two calls
    swaps = sorted((a["pid"], b["pid"], a["name"], b["name"], size) for a, b, size in arrows[9])
    assert swaps == [(1, 2, *["MPI_Sendrecv_replace"] * 2, 8), (2, 1, *["MPI_Sendrecv_replace"] * 2, 8)]
    # a persistent request: each MPI_Start's message to the wait that completed it
    assert [(a["name"], b, size) for a, b, size in arrows[11]] == [
        ("MPI_Start", waits[3], 16),
        ("MPI_Start", waits[4], 16),
    ]


def test_messages_pair_per_communicator(program, costs, tmp_path):
    """The same sender, receiver and tag on three communicators (SMPI's communicator ids keep
    them apart), received in another order than sent."""
    p, trace = run(program, costs, tmp_path / "o", "comms", options=("--trace",))
    assert p.returncode == 0, p.stderr
    c = check(trace)
    recvs = [s for s in named(c, "host", "rank 1 (node 0)") if s["name"] == "MPI_Recv"]
    into = {c.flow_args[flow]["bytes"]: b for flow, (_, b) in c.flows.items()}
    assert len(recvs) == 3 and sorted(into) == [4, 8, 12]
    assert into[12] is recvs[0] and into[8] is recvs[1] and into[4] is recvs[2]


def test_trace_ranks_keeps_only_those_ranks_and_a_run_without_trace_leaves_none(program, costs, tmp_path, h100):
    out = tmp_path / "o"
    p, trace = run(program, costs, out, "golden", str(N), str(M), options=("--trace-ranks", "1"))
    assert p.returncode == 0, p.stderr
    c = check(trace)
    # no rank 0, no GPU of its copies; the links' counters stay (a link carries every rank's traffic)
    assert sorted(c.processes.values()) == ["links", "rank 1 (node 0)"]
    assert [s["name"] for slices in c.slices.values() for s in slices] == ["MPI_Recv"]
    assert_slice(named(c, "host", "rank 1 (node 0)")[0], "MPI_Recv", *golden_times(h100)["recv"])
    assert c.flows == {}  # its sender is not in the trace
    assert json.loads((out / "run.json").read_text())["trace"]["ranks"] == [1]

    (out / "trace.tsv").write_text("stale")
    p, trace = run(program, costs, out, "golden", str(N), str(M))
    assert p.returncode == 0, p.stderr
    assert trace is None and not (out / "trace.tsv").exists()
    assert json.loads((out / "run.json").read_text())["trace"] is None


def test_trace_window_keeps_the_events_that_overlap_it(program, costs, tmp_path, h100):
    t = golden_times(h100)
    kernel_begin, kernel_end = t["kernel"][0], t["kernel"][0] + K
    assert kernel_begin < 100 * US and kernel_end > 120 * US and t["launch"][0] + t["launch"][1] < 100 * US
    p, trace = run(program, costs, tmp_path / "in", "golden", str(N), str(M), options=("--trace-window", "100us:120us"))
    assert p.returncode == 0, p.stderr
    c = check(trace)
    names = sorted(s["name"] for slices in c.slices.values() for s in slices)
    assert names == ["MPI_Recv", "cudaDeviceSynchronize", "wait for GPU", "work(float*)"]
    assert c.flows == {}

    # from the end of the kernel on: the send, the receive and its arrow, nothing of the copy
    assert kernel_end > 125 * US > kernel_begin
    p, trace = run(program, costs, tmp_path / "open", "golden", str(N), str(M), options=("--trace-window", "125us:"))
    assert p.returncode == 0, p.stderr
    c = check(trace)
    names = sorted(s["name"] for slices in c.slices.values() for s in slices)
    assert names == ["MPI_Recv", "MPI_Send", "cudaDeviceSynchronize", "wait for GPU", "work(float*)"]
    assert [(a["name"], b["name"]) for a, b in c.flows.values()] == [("MPI_Send", "MPI_Recv")]


def test_a_failed_run_still_writes_its_trace_up_to_the_failure(program, costs, tmp_path, h100):
    """Rank 1 launches `work` twice and aborts at 2L, the first kernel running since L; rank 0
    has been blocked in MPI_Recv since 0: both slices end at the failure, marked unfinished."""
    L = h100.overheads.launch
    p, trace = run(program, costs, tmp_path / "o", "abort", options=("--trace",))
    assert p.returncode == 3, p.stderr  # MPI_Abort's code
    c = check(trace)
    (recv,) = named(c, "host", "rank 0 (node 0)")
    assert_slice(recv, "MPI_Recv", 0, 2 * L, unfinished=True)
    (kernel,) = named(c, "default stream (device 1)", "rank 1 (node 0)")
    assert_slice(kernel, "work(float*)", L, L, unfinished=True)
    launches = named(c, "host", "rank 1 (node 0)")
    assert len(launches) == 2
    assert_slice(launches[0], "cudaLaunchKernel", 0, L)
    assert_slice(launches[1], "cudaLaunchKernel", L, L)
    assert "unfinished" not in launches[1]["args"]


def test_link_counters_integrate_to_the_bytes_results_json_counts(program, costs, tmp_path):
    """--trace asks the shim for the links' rate series: the counters of the busiest links, each
    a step function of its rate, carry exactly the bytes results.json gives those links."""
    p, trace = run(program, costs, tmp_path / "o", "golden", str(N), str(M), options=("--trace", "--trace-links", "3"))
    assert p.returncode == 0, p.stderr
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    carried = {link["name"]: link["bytes"] for link in results["links"]}
    counters: dict[str, list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append((e["ts"] * US, e["args"]["B/s"]))
    assert len(counters) == 3  # the three links that carried the most (ties by name)
    busiest = sorted(carried, key=lambda name: (-carried[name], name))[:3]
    assert sorted(counters) == sorted(busiest)
    for name, steps in counters.items():
        assert steps[-1][1] == 0  # a completed run: every link idle at the end
        moved = sum(rate * (t1 - t0) for (t0, rate), (t1, _) in itertools.pairwise(steps))
        # the trace's times are rounded to the nanosecond
        assert moved == pytest.approx(carried[name], rel=1e-3), name
    # the series was for the counters only: it is not left beside the trace
    assert not (tmp_path / "o" / "link_series.tsv").exists()


def test_a_stream_waiting_for_an_event_shows_the_wait_then_its_kernel(program, costs, tmp_path, h100):
    """Rank 0 launches `work` on stream 1 (its launch overhead L first), records an event behind
    it and makes stream 2 wait for the event before launching `work` there: stream 2 holds from
    the wait's enqueue (L, the record and the wait cost the host nothing) until the event
    completes with the first kernel (L + K), then runs its own kernel (L + K to L + 2K). The
    event's record is a mark on stream 1 as its kernel ends."""
    p, trace = run(program, costs, tmp_path / "o", "join", options=("--trace",))
    assert p.returncode == 0, p.stderr
    L = h100.overheads.launch
    c = check(trace)
    first, record = named(c, "stream 1 (device 0)", "rank 0 (node 0)")
    assert_slice(first, "work(float*)", L, K)
    assert record["name"] == "event record"  # a mark, as the kernel ends
    assert record["ts"] == pytest.approx((L + K) / US, abs=NS)
    held, second = named(c, "stream 2 (device 0)", "rank 0 (node 0)")
    assert_slice(held, "dependency wait", L, K, waiting="event wait")
    assert_slice(second, "work(float*)", L + K, K)
