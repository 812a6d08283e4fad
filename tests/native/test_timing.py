"""Simulated times of small nvcc-built programs against values derived by hand.

Every expected value below is written out from the h100-ib200 description
(orrery/machines/builtin/h100-ib200.toml): L, M, S are the host overheads of a kernel
launch, a copy and a synchronisation; a copy from pinned host memory to GPU g
crosses two PCIe links (root -> switch -> GPU), each with latency `pl`, at the
PCIe bandwidth; kernels cost what the test's cost file says. SimGrid runs
the CM02 model with no corrections, so a transfer takes latency + bytes/bandwidth.
"""

from __future__ import annotations

import re

import pytest
from derivations import BRIEF, BUSY, REL, US, cost_options, gpudirect_message, run_ok, wire

pytestmark = pytest.mark.native

HOST_TIME = re.compile(
    r"^orrery: host time: (\d+) overheads spent ahead of the clock, waited out in (\d+) sleeps$", re.M
)


@pytest.fixture
def costs(tmp_path):
    return cost_options(tmp_path)


def test_h2d_copy_crosses_two_pcie_links(run_program, programs, h100):
    n = 4_000_000
    v = run_ok(run_program, programs, "h2d", str(n)).values()
    o, p = h100.overheads, h100.pcie
    expected = o.memcpy + 2 * p.latency + n / p.bandwidth + o.sync
    assert v["elapsed"] == pytest.approx(expected, rel=REL)


def test_h2d_copy_follows_pcie_bandwidth_override(run_program, programs, h100):
    n = 4_000_000
    r = run_ok(run_program, programs, "h2d", str(n), options=("--set", "pcie.bandwidth=32GB/s"))
    o, p = h100.overheads, h100.pcie
    assert r.values()["elapsed"] == pytest.approx(o.memcpy + 2 * p.latency + n / 32e9 + o.sync, rel=REL)


def test_two_kernels_in_one_stream_run_back_to_back(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "one-stream", options=costs).values()
    # busy starts after its launch (L) and brief right after busy; then the sync returns.
    assert v["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_peer_copy_is_serialised_with_the_work_of_both_devices(run_program, programs, h100, costs):
    """cudaMemcpyPeer waits for the work pending on the destination GPU and work issued there
    afterwards waits for it (CUDA: serialised with the current, source and destination
    devices), while the host goes on at once."""
    L, M, S = h100.overheads.launch, h100.overheads.memcpy, h100.overheads.sync
    n = 1 << 20
    v = run_ok(
        run_program,
        programs,
        "peer-serialised",
        str(n),
        options=(*costs, "--gpus-per-node", "2", "--ranks-per-node", "1"),
    ).values()
    assert v["issued"] == pytest.approx(L + M, rel=REL)  # the host did not wait
    copy = h100.nvlink.latency + n / h100.nvlink_pair_bandwidth
    # busy runs from L; the copy after it; brief (launched at 2L + M) after the copy
    assert v["elapsed"] == pytest.approx(L + BUSY + copy + BRIEF + S, rel=REL)


def test_two_kernels_in_two_streams_share_the_gpu(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "two-streams", options=costs).values()
    # brief starts at 2L, beside busy: both at half speed, so brief takes 2 * 20us.
    assert v["brief_done"] == pytest.approx(2 * L + 2 * BRIEF + S, rel=REL)
    # busy did L of its work alone, 20us while shared, the rest alone again.
    assert v["busy_done"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_kernel_overlaps_async_copy_in_another_stream(run_program, programs, h100, costs):
    n = 8_000_000  # the copy (~150 us) outlasts the 100 us kernel
    L, M, S = h100.overheads.launch, h100.overheads.memcpy, h100.overheads.sync
    p = h100.pcie
    v = run_ok(run_program, programs, "kernel-copy", str(n), options=costs).values()
    copy_end = L + M + 2 * p.latency + n / p.bandwidth
    assert copy_end > L + BUSY
    assert v["elapsed"] == pytest.approx(copy_end + S, rel=REL)


def test_kernel_cost_scales_with_threads_launched(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "scaled", options=costs).values()
    threads = (40 * 2) * (128 * 2)
    assert v["elapsed"] == pytest.approx(L + 1 * US + threads * 1e-9 + S, rel=REL)


def test_cuda_launch_kernel_ex_launches_its_configuration(run_program, programs, h100, costs):
    """cudaLaunchKernelEx: the grid, block and stream of its configuration (scaled's time for
    its 40x2 blocks of 128x2 threads), a priority and a one-block cluster accepted; programmatic
    dependent launch, whose overlap of kernels Orrery does not model, stops the run naming it."""
    L, S = h100.overheads.launch, h100.overheads.sync
    r = run_program(programs["timing"], "launch-ex", options=("--gpus-per-node", "1", *costs))
    v = r.values()
    threads = (40 * 2) * (128 * 2)
    assert v["returned"] == pytest.approx(L, rel=REL)
    assert v["elapsed"] == pytest.approx(L + 1 * US + threads * 1e-9 + S, rel=REL)
    assert r.returncode == 3
    assert r.stderr.splitlines()[-1] == (
        "orrery: error: cudaLaunchKernelEx: launch attribute cudaLaunchAttributeProgrammaticStreamSerialization "
        "(programmatic dependent launch: a kernel that starts before the one ahead of it in its stream ends), "
        "which Orrery does not simulate"
    )


def test_event_elapsed_time_is_the_simulated_interval(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "events", options=costs).values()
    # The first record completes at once on the idle stream, as it is made: the query finds it
    # complete and takes no time. Busy starts after its launch.
    assert v["query_idle"] == 0
    assert v["event_ms"] == pytest.approx((L + BUSY) * 1e3, rel=1e-6)  # a float
    assert v["query_before"] == 600  # cudaErrorNotReady while busy runs
    assert v["query_after"] == 0
    assert v["elapsed"] == pytest.approx(L + BUSY + S, rel=REL)


def test_destroyed_streams_complete_their_work_and_the_rank_ends_cleanly(run_program, programs, h100, costs):
    """cudaStreamDestroy returns at once and the stream's pending work still completes, as in CUDA;
    the program then ends (a stream's worker ending beside its rank once aborted the run)."""
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "destroy", options=costs).values()
    assert v["elapsed"] == pytest.approx(L + BUSY + S, rel=REL)


def test_the_per_thread_stream_handle_runs_beside_a_blocking_stream(run_program, programs, h100, costs):
    """cudaStreamPerThread, in a program built without --default-stream per-thread: a blocking
    stream of its own (flags 0), which does not wait for other blocking streams as the legacy does."""
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "per-thread-handle", options=costs).values()
    assert v["brief_done"] == pytest.approx(2 * L + 2 * BRIEF + S, rel=REL)
    assert v["flags"] == 0


def test_legacy_default_stream_waits_for_blocking_streams(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "legacy", options=costs).values()
    # brief, on stream 0, cannot start before busy (stream s1) ends.
    assert v["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_results_attribute_kernel_and_copy_time(run_program, programs, h100, costs):
    n = 8_000_000
    r = run_ok(run_program, programs, "kernel-copy", str(n), options=costs)
    rank0 = r.results["ranks"][0]
    assert rank0["kernels"]["busy(float*)"]["time_s"] == pytest.approx(BUSY, rel=REL)
    h2d = rank0["copies"]["H2D"]
    assert (h2d["count"], h2d["bytes"]) == (1, n)
    assert h2d["time_s"] == pytest.approx(2 * h100.pcie.latency + n / h100.pcie.bandwidth, rel=REL)


def test_device_sendrecv_within_a_node_crosses_nvlink(run_program, programs, h100):
    n = 8_000_000
    r = run_ok(run_program, programs, "sendrecv", str(n), options=("--gpus-per-node", "2"))
    v = r.values()
    # each rank: its MPI library's send overhead, the exchange over NVLink, its receive overhead
    # (h100-ib200's, carried from Open MPI + UCX on H100: mpi.*_overhead_device_intra)
    mpi = h100.mpi
    expected = (
        mpi.overhead("send", "device", True)
        + wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, mpi.eager_threshold_device)
        + mpi.overhead("recv", "device", True)
    )
    assert mpi.overhead("send", "device", True) > 1e-6
    assert v["rank 0 elapsed"] == pytest.approx(expected, rel=REL)
    assert v["rank 1 elapsed"] == pytest.approx(expected, rel=REL)


def test_device_sendrecv_across_nodes_crosses_pcie_nic_and_fabric(run_program, programs, h100):
    n = 8_000_000
    r = run_ok(
        run_program, programs, "sendrecv", str(n), nodes=2, options=("--gpus-per-node", "1", "--ranks-per-node", "1")
    )
    mpi = h100.mpi
    send, recv = mpi.overhead("send", "device", False), mpi.overhead("recv", "device", False)
    assert r.values()["rank 0 elapsed"] == pytest.approx(send + gpudirect_message(h100, n) + recv, rel=REL)
    assert r.results["ranks"][0]["mpi"]["MPI_Sendrecv"]["count"] == 2


def test_device_isend_irecv_take_the_same_time_as_sendrecv(run_program, programs, h100):
    n = 8_000_000
    r = run_ok(
        run_program, programs, "isend", str(n), nodes=2, options=("--gpus-per-node", "1", "--ranks-per-node", "1")
    )
    send, recv = h100.mpi.overhead("send", "device", False), h100.mpi.overhead("recv", "device", False)
    assert r.values()["rank 1 elapsed"] == pytest.approx(send + gpudirect_message(h100, n) + recv, rel=REL)
    mpi = r.results["ranks"][1]["mpi"]
    assert (mpi["MPI_Isend"]["count"], mpi["MPI_Irecv"]["count"], mpi["MPI_Waitall"]["count"]) == (1, 1, 1)


def test_a_transfer_goes_on_while_its_sender_waits_for_its_gpu(run_program, programs, h100, costs):
    """Rank 0 posts an MPI_Isend, then waits for a 100 us kernel before MPI_Wait. Its wait for the
    GPU must not hold the transfer back (an actor that suspended itself to wait would suspend the
    transfer it started): rank 1 receives at the instant it does when rank 0 launches nothing."""
    n = 1_000_000  # about 40 us on the wire: over long before the kernel ends
    options = ("--gpus-per-node", "1", "--ranks-per-node", "1", *costs)
    L, S = h100.overheads.launch, h100.overheads.sync
    alone = run_ok(run_program, programs, "isend-wait", str(n), nodes=2, options=options).values()
    waiting = run_ok(run_program, programs, "isend-gpu-wait", str(n), nodes=2, options=options).values()
    assert waiting["received"] == pytest.approx(alone["received"], rel=REL)
    assert waiting["received"] < L + BUSY  # received while its sender still waited for the kernel
    # its launch, the kernel, the synchronisation's return; MPI_Wait then returns at once
    assert waiting["sender done"] == pytest.approx(L + BUSY + S, rel=REL)


def test_collectives_on_device_buffers(run_program, programs, h100):
    n = 1_000_000
    r = run_ok(run_program, programs, "collectives", str(n), options=("--gpus-per-node", "2"))
    v = r.values()
    # two ranks on one node: the broadcast is one NVLink message from rank 0 to rank 1 (rendezvous;
    # Open MPI's choice for 1 MB on 2 ranks is a binomial tree)
    # (a collective's own message: no per-message software time, as in the allreduce test below)
    bcast = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    assert v["rank 1 bcast"] == pytest.approx(bcast, rel=REL)
    assert "rank 0 done" in r.stdout and "rank 1 done" in r.stdout
    mpi = r.results["ranks"][0]["mpi"]
    for call in ("MPI_Bcast", "MPI_Allreduce", "MPI_Allgather", "MPI_Alltoall", "MPI_Reduce_scatter_block", "MPI_Wait"):
        assert mpi[call]["count"] == 1, call
        assert mpi[call]["time_s"] > 0, call  # each moves 1 MB over NVLink: never free
    assert mpi["MPI_Iallreduce"]["count"] == 1  # returns at once; its time shows in MPI_Wait


@pytest.mark.parametrize("n, extra", [(400_000, 5e-6), (1_000_000, 3e-6)])
def test_collective_correction_adds_its_range_s_time(run_program, programs, h100, n, extra):
    """collectives.bcast: each rank's broadcast takes the extra time of its size range longer
    (the size is count x type size: n bytes here); other collectives keep their own times. The
    broadcast is derived as one message: SMPI's default algorithms (Open MPI's, the built-in's,
    pipeline a 400 kB broadcast in 8 KiB segments)."""
    fix = "[{up_to = '512KB', extra = '5us'}, {extra = '3us'}]"
    default = ("--gpus-per-node", "2", "--set", "mpi.collective_selector=default")
    plain = run_ok(run_program, programs, "collectives", str(n), options=default)
    fixed = run_ok(
        run_program,
        programs,
        "collectives",
        str(n),
        options=(*default, "--set", f"collectives.bcast={fix}"),
    )
    bcast = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    assert fixed.values()["rank 1 bcast"] == pytest.approx(bcast + extra, rel=REL)
    assert fixed.values()["rank 0 bcast"] == pytest.approx(plain.values()["rank 0 bcast"] + extra, rel=REL)
    for call in ("MPI_Allreduce", "MPI_Alltoall"):
        assert fixed.results["ranks"][1]["mpi"][call]["time_s"] == pytest.approx(
            plain.results["ranks"][1]["mpi"][call]["time_s"], rel=REL
        )


@pytest.mark.parametrize("selector, messages", [("ompi", (1, 1)), ("default", (1, 2))])
def test_small_allreduce_takes_the_steps_of_the_chosen_algorithm(run_program, programs, h100, selector, messages):
    """The H100 built-ins choose collective algorithms as Open MPI does (SMPI's ompi selector): a
    1 kB allreduce on 2 ranks is recursive doubling, one exchange between the two GPUs (each
    direction of their NVLink carries one message), the same time on both ranks; SMPI's own
    default is a linear reduce to rank 0, then a broadcast from it: rank 0 receives one message
    (and sends the result eagerly), rank 1 sends one and waits for the other."""
    n = 1024
    assert h100.mpi.collective_selector == "ompi"
    r = run_ok(
        run_program,
        programs,
        "collectives",
        str(n),
        options=("--gpus-per-node", "2", "--set", f"mpi.collective_selector={selector}"),
    )
    # the messages SMPI's collectives make of their own pay no per-message software time (only the
    # program's point-to-point calls do, in their wrappers: docs/simulation.md's approximations)
    one = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    for rank in (0, 1):
        assert r.values()[f"rank {rank} allreduce"] == pytest.approx(messages[rank] * one, rel=REL), rank


def test_open_mpi_s_knomial_broadcast_on_device_buffers_is_a_radix_4_tree(run_program, programs, h100):
    """From 8 ranks Open MPI broadcasts 1 kB by a k-nomial tree of radix 4 (SMPI's ompi selector:
    bcast__mvapich2_knomial_intra_node, which liborrery_smpi runs without SMPI's node layout,
    whose first broadcast deadlocked on the ranks' stream actors). On 2 nodes x 4 GPUs, rank 0
    sends to rank 4 (across nodes, GPUDirect) and to ranks 1-3 (NVLink), rank 4 to ranks 5-7."""
    n = 1024
    r = run_ok(run_program, programs, "collectives", str(n), nodes=2, options=("--gpus-per-node", "4"))
    # each one message of the collective, without software time (as in the allreduce above)
    nvlink = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    across = gpudirect_message(h100, n)
    expected = [0.0, nvlink, nvlink, nvlink, across, across + nvlink, across + nvlink, across + nvlink]
    assert [r.values()[f"rank {k} bcast"] for k in range(8)] == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("selector", ["mvapich2", "impi"])
def test_smp_aware_collectives_leave_the_ranks_stream_actors_out(run_program, programs, h100, selector):
    """MVAPICH2's and Intel MPI's choices (SMPI's selectors) split a communicator by node from the
    actors on each rank's host, where its streams stand too: SMPI counted them as members (an
    actor not in a group answers for its parent) and waited on them forever. Each rank of the
    second node gets the broadcast no sooner than a message across the nodes takes."""
    r = run_ok(
        run_program,
        programs,
        "collectives",
        "1024",
        nodes=2,
        options=("--gpus-per-node", "4", "--set", f"mpi.collective_selector={selector}"),
    )
    for rank in range(4, 8):
        assert r.values()[f"rank {rank} bcast"] >= gpudirect_message(h100, 1024) * (1 - REL), rank
    assert all(f"rank {k} done" in r.stdout for k in range(8))


@pytest.mark.parametrize("ranks", [16, 64])
def test_collective_correction_fitted_on_8_ranks_scales_with_the_communicator(run_program, programs, ranks):
    """A correction measured on 8 ranks, on a communicator of P ranks: a per-step cost times the
    steps of the algorithm's model (CorrectionSegment.steps): linear, 7 us x (P - 1) / 7 on each
    rank's broadcast; log2, 3 us x log2(P) / 3 on its allreduce; constant, 2 us at any P on its
    alltoall."""
    fix = {
        "bcast": "[{extra = '7us', steps = 'linear', ranks = 8}]",
        "allreduce": "[{up_to = '512B', extra = '30us'}, {extra = '3us', steps = 'log2', ranks = 8}]",
        "alltoall": "[{extra = '2us'}]",
    }
    layout = ("--gpus-per-node", "4")
    plain = run_ok(run_program, programs, "collectives", "1024", nodes=ranks // 4, options=layout)
    sets = [a for name, value in fix.items() for a in ("--set", f"collectives.{name}={value}")]
    fixed = run_ok(run_program, programs, "collectives", "1024", nodes=ranks // 4, options=(*layout, *sets))
    log2 = {16: 4, 64: 6}[ranks]
    expected = {"bcast": 7 * US * (ranks - 1) / 7, "allreduce": 3 * US * log2 / 3}
    for rank in (0, 1, ranks - 1):
        for call, extra in expected.items():
            assert fixed.values()[f"rank {rank} {call}"] == pytest.approx(
                plain.values()[f"rank {rank} {call}"] + extra, rel=REL
            ), (rank, call)
        alltoall = [run.results["ranks"][rank]["mpi"]["MPI_Alltoall"]["time_s"] for run in (plain, fixed)]
        assert alltoall[1] == pytest.approx(alltoall[0] + 2 * US, rel=REL)


def test_copy_kinds_memset_and_launch_api_costs(run_program, programs, h100, costs):
    n = 4_194_304
    r = run_ok(run_program, programs, "api", str(n), options=("--gpus-per-node", "2", "--ranks-per-node", "1", *costs))
    v = r.values()
    o, p, g = h100.overheads, h100.pcie, h100.gpu
    M, L, S = o.memcpy, o.launch, o.sync
    # copies between device buffers return at once (CUDA's API synchronisation behaviour)
    assert v["peer_return"] == pytest.approx(M, rel=REL) and v["d2d_return"] == pytest.approx(M, rel=REL)
    # a peer copy crosses the NVLink between GPU 0 and GPU 1
    assert v["peer"] == pytest.approx(M + h100.nvlink.latency + n / h100.nvlink_pair_bandwidth + S, rel=REL)
    # a copy within one GPU runs at its device-to-device rate
    assert v["d2d"] == pytest.approx(M + g.d2d_latency + n / g.d2d_bandwidth + S, rel=REL)
    # cudaMemcpyDefault finds a pinned source and a device destination: an H2D copy
    assert v["default_h2d"] == pytest.approx(M + 2 * p.latency + n / p.bandwidth + S, rel=REL)
    # a 2D copy moves width x height bytes (1024 x n/4096), not the pitched extent
    assert v["h2d_2d"] == pytest.approx(M + 2 * p.latency + 1024 * (n // 4096) / p.bandwidth + S, rel=REL)
    assert v["memset"] == pytest.approx(M + n / g.memset_bandwidth + S, rel=REL)
    assert v["launch_api"] == pytest.approx(L + BUSY + S, rel=REL)
    assert (v["query_busy"], v["query_idle"]) == (600, 0)  # cudaErrorNotReady, then cudaSuccess
    # an invalid launch configuration is reported, sticky until read, and costs nothing on the GPU
    assert (v["peek"], v["get"], v["after"]) == (9, 9, 0)  # cudaErrorInvalidConfiguration
    assert v["invalid_launch"] == pytest.approx(S, rel=REL)
    assert r.stdout.count("priority 0 -5 -5") == 1  # CUDA's range, requests clamped to it
    copies = r.results["ranks"][0]["copies"]
    assert copies["peer"]["bytes"] == n and copies["D2D"]["bytes"] == n and copies["memset"]["bytes"] == n


# ---- the host's time (interpose/core/streams.cpp): overheads spent ahead of SimGrid's clock ----


@pytest.mark.parametrize("call", ["", "-ireduce"], ids=["igather", "ireduce"])
def test_an_mpi_call_the_shim_does_not_wrap_starts_at_the_rank_s_own_time(run_program, programs, h100, costs, call):
    """Rank 0's launch overhead is host time it does not sleep at once: SMPI's MPI calls catch it
    up as they enter, wrapped or not. Rank 1, the root of an MPI_Igather (no wrapper of the
    shim's), or of an MPI_Ireduce (which liborrery_smpi.so runs in the kernel, outside SMPI's entry
    point), waits for rank 0's message, which leaves L later after a launch; and right after a
    launch both of rank 0's clocks read L."""
    L = h100.overheads.launch
    options = (*costs, "--gpus-per-node", "1")
    plain = run_ok(run_program, programs, f"ahead{call}", options=options, nodes=2).values()
    launched = run_ok(run_program, programs, f"ahead{call}-launch", options=options, nodes=2).values()
    assert launched["reduced"] - plain["reduced"] == pytest.approx(L, abs=1e-15)
    assert launched["wtime"] == pytest.approx(L, rel=REL)
    assert launched["clock"] == pytest.approx(L, abs=0.5e-9)  # to the nearest nanosecond


def test_a_jacobi_iteration_waits_out_its_eight_overheads_in_three_sleeps(programs, costs, tmp_path):
    """Per iteration of the halo mode (a memset, a launch and a copy on a stream, its
    synchronisation, two device-buffer MPI_Sendrecv between nodes and an MPI_Allreduce) a rank
    spends eight host times: the memset's, the launch's and the copy's overheads (M, L, M), the
    synchronisation's (S), and each Sendrecv's send and receive software overheads. It sleeps
    three times: as each Sendrecv posts its messages (S and the send's; the previous receive's and
    this send's) and as the Allreduce enters SMPI (the second receive's); the synchronisation
    waits for the 100 us kernel, past the rank's own time, so it sleeps nothing. With a sleep per
    overhead, as before, the counts would be equal. Two ranks, one per node; the iterations' counts
    are the difference between 3 and 1 iterations (the set-up's cancel out)."""
    from conftest import orrery

    def counts(iterations: int) -> tuple[int, int]:
        out = tmp_path / f"halo{iterations}"
        args = ("--nodes", "2", "--gpus-per-node", "1", *costs, "--out", str(out))
        proc = orrery(
            "run", *args, "--", str(programs["timing"]), "halo", str(iterations), env={"ORRERY_HOST_TIME": "report"}
        )
        assert proc.returncode == 0, proc.stderr
        found = HOST_TIME.findall(proc.stderr)
        assert len(found) == 1, proc.stderr
        return int(found[0][0]), int(found[0][1])

    one, three = counts(1), counts(3)
    ranks, iterations = 2, 2
    assert three[0] - one[0] == ranks * iterations * 8
    assert three[1] - one[1] == ranks * iterations * 3


def test_a_host_time_within_the_clocks_precision_is_not_waited_for(jacobi, tmp_path):
    """A rank's own time reached by a sum in another order than SimGrid's clock (its host
    overheads added one by one, the GPU work it waited for ending at start + duration) can stand
    an ulp or two (about 1e-18 s at a few ms) ahead of the clock. SimGrid (surf/precision 1e-12)
    slept it as a whole picosecond and wrote `The parameter to sleep_for() is smaller than the
    SimGrid numerical accuracy` on standard error, for the first 20: the Jacobi example on
    gh200-slingshot over 300 iterations did so twice, 1 ps later, and at 1024 H100 twenty times.
    Such a time is the clock's own: nothing is waited for, and standard error stays empty."""
    from conftest import orrery

    out = tmp_path / "out"
    proc = orrery("run", "--machine", "gh200-slingshot", "--out", str(out), "--", str(jacobi), "-niter", "300")
    assert proc.returncode == 0, proc.stderr
    assert "iterations: 300" in proc.stdout
    assert proc.stderr == ""


def test_a_wrong_orrery_host_time_stops_the_run_in_one_line(programs, tmp_path):
    from conftest import orrery

    out = tmp_path / "out"
    proc = orrery("run", "--out", str(out), "--", str(programs["timing"]), "halo", "1", env={"ORRERY_HOST_TIME": "on"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "orrery: error: environment variable ORRERY_HOST_TIME: got 'on', expected 'report', or unset"
    ]
    assert not out.exists()
