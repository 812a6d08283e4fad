"""The term breakdown (results.json ``ranks[].terms`` and ``terms``; docs/running.md, "The terms").

A program of known steps (programs/terms/nccl_terms.cu: one letter per step) on two GPUs of one
h100-ib200 node, as the built-in was before its MPI stack was calibrated (a frozen copy,
examples/jacobi/h100-ib200-uncalibrated.toml, so that a calibration of the built-in changes no
derivation here): the terms of each run derived by hand from that description (L, M, S
the host overheads of a launch, a copy and a synchronisation; X a copy of n bytes from pinned
memory across two PCIe links; W an n-byte device message over the NVLink between the two GPUs,
as test_timing.py derives them) and the kernels' costs; then the partition itself (the terms add
up to each rank's end, idle to the makespan) over generated programs.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from conftest import HERE, REPO, build, built_once, needs_nvcc, orrery, session_dir
from derivations import BRIEF, BUSY, REL, wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.native, needs_nvcc]

N = 1_000_000
TERMS = (
    "kernels_s",
    "exposed_p2p_s",
    "exposed_collectives_s",
    "copies_sync_s",
    "host_overheads_s",
    "host_s",
)
MACHINE = REPO / "examples" / "jacobi" / "h100-ib200-uncalibrated.toml"


@pytest.fixture(scope="module")
def simulate(tmp_path_factory):
    """Runs the program's steps on two GPUs of one node (or of two nodes); returns results.json."""
    d = tmp_path_factory.mktemp("terms")
    source = HERE / "native" / "programs" / "terms" / "nccl_terms.cu"
    programs = session_dir(tmp_path_factory, "programs")  # built once for every worker, as conftest's programs
    program = built_once(programs / "nccl_terms", lambda tmp: build(source, tmp, obj=programs / "nccl_terms.o"))
    costs = d / "costs.json"
    costs.write_text(json.dumps({"kernels": {"busy": {"time": f"{BUSY!r}s"}, "brief": {"time": f"{BRIEF!r}s"}}}))
    counter = itertools.count()

    def _simulate(steps: str, n: int = N, nodes: int = 1, options: tuple[str, ...] = ()) -> dict:
        out = d / f"out{next(counter)}"
        layout = ("--nodes", "2", "--gpus-per-node", "1") if nodes == 2 else ("--gpus-per-node", "2")
        p = orrery(
            "run",
            "--machine",
            str(MACHINE),
            *layout,
            "--costs",
            str(costs),
            "--out",
            str(out),
            *options,
            "--",
            str(program),
            steps,
            str(n),
        )
        assert p.returncode == 0, p.stderr
        return json.loads((out / "results.json").read_text())

    return _simulate


@pytest.fixture(scope="module")
def costs():
    from orrery import machines

    h100 = machines.load(str(MACHINE))
    o = h100.overheads
    x = 2 * h100.pcie.latency + N / h100.pcie.bandwidth
    w = wire(h100.nvlink.latency, N, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    return o.launch, o.memcpy, o.sync, x, w


def assert_terms(rank: dict, **expected: float) -> None:
    """The rank's terms as expected (0 where not named), adding up to its end."""
    for name in TERMS:
        assert rank["terms"][name] == pytest.approx(expected.get(name, 0.0), rel=REL, abs=1e-15), name
    assert math.fsum(rank["terms"][t] for t in TERMS) == pytest.approx(rank["end_s"], rel=1e-12)


def test_a_kernel_a_copy_a_message_and_a_collective_each_in_its_term(simulate, costs):
    """K: a kernel waited for; C: a synchronous copy; P: a device MPI_Sendrecv over NVLink; B: a
    device MPI_Bcast between the two ranks, one NVLink message (a rendezvous: the root's send
    completes with its transfer); then the final device synchronisation (nothing left: S)."""
    L, M, S, X, W = costs
    res = simulate("KCPB")
    for rank in res["ranks"]:
        assert_terms(
            rank,
            kernels_s=BUSY,
            copies_sync_s=X,
            exposed_p2p_s=W,
            exposed_collectives_s=W,
            host_overheads_s=L + S + M + S + S,
        )
        assert rank["end_s"] == pytest.approx(L + BUSY + S + M + X + S + W + W + S, rel=REL)
        assert rank["terms"]["idle_s"] == 0
    t = res["terms"]
    assert t["iterations"] is None and t["critical_per_iteration"] is None
    assert t["critical"]["exposed_p2p_s"] == pytest.approx(W, rel=REL)
    assert t["mean"]["copies_sync_s"] == pytest.approx(X, rel=REL)


def test_a_message_while_a_kernel_runs_is_kernel_time(simulate, costs):
    """k then P: the exchange (W < BUSY) runs beside the kernel, which the final synchronisation
    then waits for: all of BUSY is the kernel's, none of it exposed communication."""
    L, _, S, _, W = costs
    assert W < BUSY
    for rank in simulate("kP")["ranks"]:
        assert_terms(rank, kernels_s=BUSY, host_overheads_s=L + S)
        assert rank["comm_s"] == pytest.approx(W, rel=REL)  # the communication was there, hidden


def test_a_wait_splits_between_the_kernel_and_the_copy_behind_it(simulate, costs):
    """k, h, S: one synchronisation waits for the kernel, then for the copy queued after it. The
    copy's API overhead (M) is the host's own, though the kernel ran meanwhile: the wait saw
    BUSY - M of it."""
    L, M, S, X, _ = costs
    for rank in simulate("khS")["ranks"]:
        assert_terms(rank, kernels_s=BUSY - M, copies_sync_s=X, host_overheads_s=L + M + S + S)


def test_iterations_divide_the_terms(simulate, costs):
    L, M, S, X, _ = costs
    res = simulate("KCKC", options=("--iterations", "2"))
    t = res["terms"]
    assert t["iterations"] == 2 and res["run"]["iterations"] == 2
    per = t["mean_per_iteration"]
    assert per["kernels_s"] == pytest.approx(BUSY, rel=REL)
    assert per["copies_sync_s"] == pytest.approx(X, rel=REL)
    assert per["host_overheads_s"] == pytest.approx(L + M + 2 * S + S / 2, rel=REL)  # the final sync's S, halved
    assert t["critical_per_iteration"]["kernels_s"] == pytest.approx(BUSY, rel=REL)


def test_a_non_blocking_collective_waited_for_is_a_collective(simulate):
    for rank in simulate("a")["ranks"]:
        mpi = rank["mpi"]
        assert rank["terms"]["exposed_collectives_s"] == pytest.approx(
            mpi["MPI_Iallreduce"]["time_s"] + mpi["MPI_Wait"]["time_s"], rel=REL
        )
        assert mpi["MPI_Wait"]["time_s"] > 0
        assert rank["terms"]["exposed_p2p_s"] == 0


@pytest.mark.parametrize("steps, term", [("N", "exposed_collectives_s"), ("O", "exposed_p2p_s")])
def test_an_nccl_operation_waited_for_goes_to_its_kind(simulate, costs, steps, term):
    """N: an all-reduce, O: a send and a receive in one group (their tallies each the group's
    time). The communicator's unique id goes out by MPI_Bcast and the communicator exists once
    the last rank has it and joins: each rank's time until then is a collective's. Then the
    operation is launched (L) and waited for whole by the final synchronisation (S)."""
    L, _, S, _, _ = costs
    ranks = simulate(steps)["ranks"]
    joined = max(rank["mpi"]["MPI_Bcast"]["time_s"] for rank in ranks)
    for rank in ranks:
        nccl = max(t["time_s"] for t in rank["nccl"].values())
        assert nccl > 0
        expected = {"exposed_collectives_s": joined}
        expected[term] = expected.get(term, 0.0) + nccl
        assert_terms(rank, host_overheads_s=L + S, **expected)


STEPS = st.text(alphabet="KkbChdmSDqPIBAaRNO", min_size=1, max_size=8)


@settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, n=st.sampled_from([8, 65_536, 4_000_000]), nodes=st.sampled_from([1, 2]))
def test_the_terms_partition_every_rank_s_time(simulate, steps, n, nodes):
    """Generated programs: every term non-negative, the six adding up to the rank's end and with
    idle to the makespan; the kernel term no more than its kernels' device time, the copies and
    synchronisation no more than its GPU waits, the host overheads its CUDA API overheads; the
    critical rank the last to finish."""
    res = simulate(steps, n=n, nodes=nodes)
    for rank in res["ranks"]:
        t = rank["terms"]
        assert all(t[name] >= 0 for name in (*TERMS, "idle_s")), t
        assert math.fsum(t[name] for name in TERMS) == pytest.approx(rank["end_s"], rel=1e-12, abs=1e-18)
        assert rank["end_s"] + t["idle_s"] == pytest.approx(res["makespan_s"], rel=1e-12)
        assert t["kernels_s"] <= rank["kernel_s"] * (1 + 1e-12)
        assert t["copies_sync_s"] <= rank["gpu_wait_s"] * (1 + 1e-12) + 1e-18
        assert t["host_overheads_s"] == pytest.approx(rank["host_api_s"], rel=1e-12, abs=1e-18)
    last = max(res["ranks"], key=lambda r: (r["end_s"], -r["rank"]))
    assert res["terms"]["critical_rank"] == last["rank"]
    mean = res["terms"]["mean"]
    assert math.fsum(mean[name] for name in (*TERMS, "idle_s")) == pytest.approx(res["makespan_s"], rel=1e-12)
