"""Non-blocking collectives on the blocking ones' algorithms (interpose/mpi/smpi_nbc.cpp).

SimGrid 3.32's SMPI runs every non-blocking collective linearly, whatever the selector, so a
non-blocking call took another time than its blocking form (docs/simulation.md). liborrery_smpi.so
runs MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast, MPI_Ibarrier and MPI_Iallgather on the messages of
the algorithm the selector takes for the blocking call, wherever smpi_colls.cpp runs that
algorithm in the kernel, and leaves the rest to SMPI's requests.

The oracle is the program's blocking form (tests/native/programs/nbc.c): on generated sequences, a
non-blocking call waited for at once returns at the blocking call's instant, every bit, with the
same data; completed by MPI_Test polls or in one MPI_Waitall with point-to-point requests, with the
same data. Overlapped with a sleep of T, the call ends at max(the blocking call's end, its start +
T): it progresses while the rank sleeps, as SMPI's own requests do. ORRERY_SMPI_NBC=simgrid (SMPI's
linear requests) shows the old times, and =report counts what ran where."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import mpicc_program, orrery

from orrery import machines as machine

pytestmark = pytest.mark.native

REPORT = re.compile(r"^orrery: non-blocking collectives: (.*)$", re.M)
COUNT = re.compile(r"MPI_(\w+) (\d+) in the kernel, (\d+) by SMPI's requests")
STAGES = re.compile(r"stages: ([^;]*)")
LINE = re.compile(r"^call (\d+) rank (\d+) t=(\S+) hash=(\S+)$", re.M)
OVERLAP = re.compile(r"^rank (\d+) entered=(\S+) returned=(\S+) through=(\S+) right=(\d)$", re.M)


@pytest.fixture(scope="session")
def nbc(tmp_path_factory) -> Path:
    """tests/native/programs/nbc.c built with `orrery mpicc`, once per session."""
    return mpicc_program(tmp_path_factory, "nbc")


def run(program: Path, out: Path, options: tuple[str, ...], *args: str, mode: str | None = "report"):
    return orrery("run", "--out", str(out), *options, "--", str(program), *args, env={"ORRERY_SMPI_NBC": mode})


def counts(stderr: str) -> dict[str, tuple[int, int]]:
    """(in the kernel, by SMPI's requests) per call, from a run with ORRERY_SMPI_NBC=report."""
    found = REPORT.findall(stderr)
    assert len(found) == 1, stderr
    return {name: (int(k), int(r)) for name, k, r in COUNT.findall(found[0])}


def stages(stderr: str) -> dict[str, int]:
    found = STAGES.search(REPORT.search(stderr)[1])
    assert found, stderr
    return {name: int(n) for name, n in (item.rsplit(" ", 1) for item in found[1].split(", "))}


def calls(stdout: str) -> dict[tuple[int, int], tuple[float, str]]:
    """(call, rank): (the time it returned, the hash of its data)."""
    return {(int(c), int(r)): (float.fromhex(t), h) for c, r, t, h in LINE.findall(stdout)}


# machine, selector and kinds drawn (W: on MPI_COMM_WORLD only): calls whose blocking form is an
# algorithm run in the kernel there, or SMPI's code that can be recorded (the others' go to SMPI's
# requests: test_what_cannot_be_recorded_goes_to_smpi_s_requests)
CASES = [
    # Open MPI's choices at 72 ranks: recursive doubling, its reduces (binomial, and segmented or
    # pipelined ones: SMPI's code recorded), k-nomial and binomial broadcasts, recursive doubling's and
    # Bruck's barriers (its allgather at 72, recursive doubling off a power of two, is not recorded)
    pytest.param(("--machine", "h100-ib200", "--nodes", "18"), "arbB", 40, id="ompi-72"),
    # a power of two of ranks: Open MPI's recursive-doubling allgather too
    pytest.param(("--machine", "h100-ib200", "--nodes", "16"), "arbBgW", 40, id="ompi-64"),
    # SMPI's default: a linear reduce then a binomial-tree broadcast (two stages), a linear barrier
    pytest.param(("--machine", "dgx-a100", "--nodes", "3"), "arbB", 40, id="default-24"),
    # MPICH's: its broadcasts and Bruck's allgather (SMPI's code recorded), Bruck's barrier
    pytest.param(
        ("--machine", "h100-ib200", "--nodes", "5", "--set", "mpi.collective_selector=mpich"), "bBgW", 30, id="mpich-20"
    ),
    # MVAPICH2's pairwise barrier (SMPI's code recorded)
    pytest.param(
        ("--machine", "h100-ib200", "--nodes", "5", "--set", "mpi.collective_selector=mvapich2"),
        "BW",
        20,
        id="mvapich2-20",
    ),
]


@pytest.mark.parametrize("options, kinds, n", CASES)
def test_a_non_blocking_collective_waited_for_at_once_is_its_blocking_form_bit_for_bit(
    nbc, tmp_path, options, kinds, n
):
    blocking = run(nbc, tmp_path / "b", options, "mix", "7", str(n), "blocking", kinds)
    waited = run(nbc, tmp_path / "w", options, "mix", "7", str(n), "wait", kinds)
    # progress only inside MPI calls (mpi.progress): a rank that waits at once is inside one throughout
    held = run(nbc, tmp_path / "h", (*options, "--set", "mpi.progress=in_calls"), "mix", "7", str(n), "wait", kinds)
    assert blocking.returncode == waited.returncode == held.returncode == 0, blocking.stderr + waited.stderr
    theirs, ours = calls(blocking.stdout), calls(waited.stdout)
    assert len(theirs) > n and ours == theirs
    assert calls(held.stdout) == theirs
    took = counts(waited.stderr)
    assert all(by_requests == 0 for _, by_requests in took.values()), took
    names = {"a": "Iallreduce", "r": "Ireduce", "b": "Ibcast", "B": "Ibarrier", "g": "Iallgather"}
    assert {c for c, (k, _) in took.items() if k} == {names[k] for k in kinds if k in names}
    # the blocking run made none; its report has no stages (nothing asked)
    assert counts(blocking.stderr) == dict.fromkeys(names.values(), (0, 0))
    assert "stages" not in REPORT.search(blocking.stderr)[1]


def test_the_default_selector_s_allreduce_is_two_stages(nbc, tmp_path):
    """SMPI's default allreduce is its linear reduce then its binomial-tree broadcast: each
    non-blocking allreduce runs two stages, and each reduce one (allreduces and reduces of the
    draw, times the ranks that made them)."""
    options = ("--machine", "dgx-a100", "--nodes", "3")
    res = run(nbc, tmp_path / "w", options, "mix", "7", "40", "wait", "ar")
    assert res.returncode == 0, res.stderr
    took, ran = counts(res.stderr), stages(res.stderr)
    allreduces, reduces = took["Iallreduce"][0], took["Ireduce"][0]
    assert allreduces > 0 and reduces > 0
    assert ran["reduce default"] == allreduces + reduces
    assert ran["bcast binomial"] == allreduces
    assert sum(ran.values()) == 2 * allreduces + reduces


@pytest.mark.parametrize("progress", ["asynchronous", "in_calls"])
@pytest.mark.parametrize("form", ["test", "waitall"])
def test_completed_by_polls_or_with_other_requests_the_data_are_the_blocking_form_s(nbc, tmp_path, form, progress):
    """MPI_Test in a loop (each poll costs the machine's poll time, so returns come later) and one
    MPI_Waitall with a ring exchange: every call's data are the blocking form's, and no rank returns
    before its blocking form returned; with either progress (mpi.progress)."""
    options = ("--machine", "h100-ib200", "--nodes", "16", "--set", f"mpi.progress={progress}")
    blocking = run(nbc, tmp_path / "b", options, "mix", "11", "30", "blocking", "abBgW")
    other = run(nbc, tmp_path / "o", options, "mix", "11", "30", form, "abBgW")
    assert blocking.returncode == other.returncode == 0, blocking.stderr + other.stderr
    theirs, ours = calls(blocking.stdout), calls(other.stdout)
    assert ours.keys() == theirs.keys() and len(ours) > 30
    assert {k: h for k, (_, h) in ours.items()} == {k: h for k, (_, h) in theirs.items()}
    assert all(ours[k][0] >= theirs[k][0] for k in ours)
    assert any(ours[k][0] > theirs[k][0] for k in ours)


def overlap(
    program: Path,
    out: Path,
    form: str,
    microseconds: int,
    mode: str | None = None,
    size: int = 8,
    progress: str = "asynchronous",
):
    res = run(
        program,
        out,
        ("--machine", "h100-ib200", "--nodes", "16", "--set", f"mpi.progress={progress}"),
        "overlap",
        form,
        str(size),
        str(microseconds),
        mode=mode,
    )
    assert res.returncode == 0, res.stderr
    found = {
        int(r): (float.fromhex(e), float.fromhex(ret), float.fromhex(th), ok)
        for r, e, ret, th, ok in OVERLAP.findall(res.stdout)
    }
    assert len(found) == 64 and all(ok == "1" for *_, ok in found.values())
    return found, res.stderr


@pytest.mark.parametrize(
    "size, microseconds, span",
    [(8, 0, (5e-6, 100e-6)), (8, 5, (5e-6, 100e-6)), (8, 100, (5e-6, 100e-6)), (1 << 20, 100, (100e-6, 1e-3))],
    ids=["8B-0us", "8B-5us", "8B-100us", "1MiB-100us"],
)
def test_an_overlapped_allreduce_ends_at_the_later_of_its_blocking_end_and_the_work(
    nbc, tmp_path, size, microseconds, span
):
    """64 ranks, an MPI_Iallreduce, a sleep of T, MPI_Wait: the rank returns at max(where
    MPI_Allreduce returned, where it entered + T). 8 bytes (recursive doubling, in the kernel) take
    14 to 16 us here: T = 0 is the blocking time, 5 us is hidden in it, 100 us hides it. 1 MiB
    (Rabenseifner's, SMPI's code recorded) takes about 0.25 ms: 100 us is hidden in it."""
    blocking, _ = overlap(nbc, tmp_path / "b", "blocking", microseconds, size=size)
    overlapped, stderr = overlap(nbc, tmp_path / "o", "overlapped", microseconds, mode="report", size=size)
    t = microseconds * 1e-6
    for rank, (entered, returned, _, _) in blocking.items():
        o_entered, o_returned, o_through, _ = overlapped[rank]
        assert o_entered == entered
        assert o_returned == o_through
        assert o_returned == pytest.approx(max(returned, entered + t), rel=0, abs=1e-15)
    spans = [returned - entered for entered, returned, _, _ in blocking.values()]
    assert span[0] < min(spans) and max(spans) < span[1]
    assert counts(stderr)["Iallreduce"] == (64, 0)
    assert stages(stderr)["SMPI's code recorded"] == (64 if size > 8 else 0)


@pytest.mark.parametrize("size, microseconds", [(8, 100), (1 << 20, 300)], ids=["8B", "1MiB"])
def test_in_calls_progress_leaves_what_the_call_did_not_post_to_the_wait(nbc, tmp_path, size, microseconds):
    """mpi.progress = in_calls (Open MPI's libnbc, MPICH without asynchronous progress): 64 ranks,
    an MPI_Iallreduce, a sleep of T, MPI_Wait. Waited for at once (T = 0) it returns where
    MPI_Allreduce does, every bit: the rank is inside MPI calls throughout. With T and 2T, both
    longer than the blocking call, only the messages the call posted went during the sleep; the
    rest runs in MPI_Wait: the rank returns at entered + T + a tail that is the same for T and 2T,
    longer than 0 and shorter than the blocking call. With asynchronous progress the sleep hides it
    all (entered + T)."""
    blocking, _ = overlap(nbc, tmp_path / "b", "blocking", 0, size=size)
    at_once, _ = overlap(nbc, tmp_path / "0", "overlapped", 0, size=size, progress="in_calls")
    assert all(at_once[rank][:2] == (entered, returned) for rank, (entered, returned, _, _) in blocking.items())
    t = microseconds * 1e-6
    tails = {}
    for k in (1, 2):
        held, _ = overlap(nbc, tmp_path / f"h{k}", "overlapped", k * microseconds, size=size, progress="in_calls")
        hidden, _ = overlap(nbc, tmp_path / f"a{k}", "overlapped", k * microseconds, size=size)
        for rank, (entered, returned, _, _) in blocking.items():
            assert hidden[rank][1] == pytest.approx(entered + k * t, rel=0, abs=1e-15)
            tail = held[rank][1] - (entered + k * t)
            assert 0 < tail < returned - entered
            tails.setdefault(rank, []).append(tail)
    assert all(once == pytest.approx(twice, rel=0, abs=1e-12) for once, twice in tails.values())


@pytest.mark.parametrize("progress", ["asynchronous", "in_calls"])
def test_each_mpi_test_is_a_progress_point(nbc, tmp_path, progress):
    """64 ranks, a 1 MiB MPI_Iallreduce (Rabenseifner's: 6 rounds halving, 6 doubling), then a
    sleep of 5 us and an MPI_Test, again until it completes: each pass takes the sleep and one poll
    (mpi.poll_time). Asynchronous: it completes where MPI_Allreduce returns, and the next poll sees
    it, less than a pass after the blocking end. In calls: each round starts at the poll after the
    one before it ended, so it ends more than a pass after the blocking end, and less than a pass
    per round."""
    blocking, _ = overlap(nbc, tmp_path / "b", "blocking", 0, size=1 << 20)
    options = ("--machine", "h100-ib200", "--nodes", "16", "--set", f"mpi.progress={progress}")
    res = run(nbc, tmp_path / "p", options, "overlap", "polled", str(1 << 20), "5", mode=None)
    assert res.returncode == 0, res.stderr
    found = re.findall(
        r"^rank (\d+) entered=(\S+) returned=(\S+) through=\S+ right=(\d) polls=(\d+)$", res.stdout, re.M
    )
    assert len(found) == 64 and all(ok == "1" for *_, ok, _ in found)
    step = 5e-6 + machine.load("h100-ib200").mpi.poll_time  # the sleep and one poll
    for rank, entered, returned, _, polls in found:
        b_entered, b_returned, _, _ = blocking[int(rank)]
        assert float.fromhex(entered) == b_entered
        late = float.fromhex(returned) - b_returned
        assert float.fromhex(returned) - b_entered == pytest.approx(int(polls) * step, rel=1e-9)
        if progress == "asynchronous":
            assert 0 <= late < step
        else:
            assert step < late < 12 * step


def test_smpi_s_linear_requests_took_another_time(nbc, tmp_path):
    """ORRERY_SMPI_NBC=simgrid: SMPI's own non-blocking allreduce, waited for at once, returns at
    another instant than the blocking call (here sooner: every rank's 8 bytes to every other at
    once); the data are the same."""
    blocking, _ = overlap(nbc, tmp_path / "b", "blocking", 0)
    linear, _ = overlap(nbc, tmp_path / "s", "overlapped", 0, mode="simgrid")
    assert all(linear[r][0] == blocking[r][0] for r in blocking)
    assert all(linear[r][1] < blocking[r][1] for r in blocking)


def test_a_freed_request_s_messages_still_run_and_the_next_call_gets_its_data(nbc, tmp_path):
    """Every rank but the root frees its MPI_Ibcast's request at once (MPI_Request_free): the
    broadcast's messages still run (the root waits for its own), and the next MPI_Ibcast, from
    rank 1, gets rank 1's data everywhere."""
    res = run(nbc, tmp_path / "f", ("--machine", "h100-ib200", "--nodes", "2"), "freed")
    assert res.returncode == 0, res.stderr
    assert sorted(re.findall(r"^rank (\d+) second (-?\d+) (-?\d+)$", res.stdout, re.M)) == sorted(
        (str(r), "2000", "2063") for r in range(8)
    )
    assert counts(res.stderr)["Ibcast"] == (16, 0)


@pytest.mark.parametrize("selector", ["impi", "mvapich2"])
def test_a_recorded_waitany_returns_as_its_requests_complete(nbc, tmp_path, selector):
    """Intel MPI's and MVAPICH2's reduce of 200 KB on 20 ranks is MVAPICH2's k-nomial one, whose
    root combines each child's data as it arrives (Request::waitany, recorded as "once k of them are
    done"): MPI_Ireduce waited for at once takes the blocking call's time on every rank, every
    bit, and the sums are right."""
    options = ("--machine", "h100-ib200", "--nodes", "5", "--set", f"mpi.collective_selector={selector}")
    took = {}
    for form in ("blocking", "waited"):
        res = run(nbc, tmp_path / form, options, "reduce", form, "50000")
        assert res.returncode == 0, res.stderr
        found = re.findall(r"^rank (\d+) took=(\S+) right=(\d)$", res.stdout, re.M)
        assert len(found) == 20 and all(right == "1" for *_, right in found)
        took[form] = {int(r): float.fromhex(t) for r, t, _ in found}
    assert took["waited"] == took["blocking"]
    assert counts(res.stderr)["Ireduce"] == (20, 0)
    assert stages(res.stderr)["waitany calls recorded"] == 19  # the root's, a child each


@pytest.mark.parametrize(
    "selector, mode", [("ompi", "simgrid"), ("mpich", None), ("ompi", None)], ids=["smpi", "mpich", "kernel"]
)
def test_in_place_non_blocking_collectives_read_no_freed_memory(nbc, tmp_path, selector, mode):
    """SMPI 3.32's in-place MPI_Iallreduce, MPI_Iscan, MPI_Iexscan, MPI_Ireduce_scatter_block,
    MPI_Ialltoall, MPI_Ialltoallv and MPI_Ialltoallw (the last two with gaps between the blocks)
    sent from a copy of the receive buffer that its entry point freed as it returned:
    with messages of 185 KB (above the detached threshold, so read when they leave) the maxima came
    out wrong, silently (element 0 on every rank, thousands of elements once the memory was
    reused). Every element is right now: by SMPI's requests (ORRERY_SMPI_NBC=simgrid; MPICH's
    allreduce, which is not recorded) and in the kernel (Open MPI's)."""
    options = ("--machine", "h100-ib200", "--nodes", "2", "--set", f"mpi.collective_selector={selector}")
    res = run(nbc, tmp_path / "i", options, "inplace", "23136", mode=mode)
    assert res.returncode == 0, res.stderr
    found = re.findall(r"^rank (\d+) (\w+) wrong (\d+)$", res.stdout, re.M)
    assert len(found) == 8 * 7 and all(bad == "0" for *_, bad in found), found


@pytest.mark.parametrize("mode", [None, "simgrid"], ids=["kernel", "smpi"])
def test_mpi_testany_sees_a_pending_collective(nbc, tmp_path, mode):
    """SMPI's MPI_Testany answered "no active request" (flag 1, index MPI_UNDEFINED) at its first
    poll over a pending non-blocking collective's request, its own as well as the kernel's. Now it
    completes it: index 0, after as many polls as MPI_Testsome takes over the same (one poll a call
    each), at the same simulated time from the post, with the sum (1 + ... + 8 = 36)."""
    res = run(nbc, tmp_path / "t", ("--machine", "h100-ib200", "--nodes", "2"), "testany", mode=mode)
    assert res.returncode == 0, res.stderr
    found = re.findall(
        r"^rank (\d+) testany (\S+) (\d+) (\S+) (\S+) testsome (\S+) (\d+) (\S+) (\S+)$", res.stdout, re.M
    )
    assert len(found) == 8
    for _, index, polls, time, total, count, some_polls, some_time, some_total in found:
        assert (index, total, count, some_total) == ("0", "36", "1", "36")
        assert int(polls) == int(some_polls) > 1
        # (times from the post, at two instants: equal but for the subtraction's rounding)
        assert float.fromhex(time) == pytest.approx(float.fromhex(some_time), rel=0, abs=1e-15)
        assert float.fromhex(time) > 0


def test_a_rank_missing_from_a_non_blocking_collective_is_a_deadlock_naming_every_call(nbc, tmp_path):
    """Seven of 8 ranks wait for an MPI_Iallreduce (recursive doubling, in the kernel), the eighth
    in an MPI_Recv nobody sends: the run is a deadlock naming each rank's call."""
    out = tmp_path / "d"
    res = run(nbc, out, ("--machine", "h100-ib200", "--nodes", "2"), "deadlock")
    assert res.returncode != 0
    found = json.loads((out / "results.json").read_text())
    assert found["status"] == "deadlock"
    assert [(b["rank"], b["call"]) for b in found["failure"]["blocked"]] == [(r, "MPI_Wait") for r in range(7)] + [
        (7, "MPI_Recv")
    ]
    assert "after" not in res.stdout


def test_what_cannot_be_recorded_goes_to_smpi_s_requests(nbc, tmp_path):
    """MPICH's allreduce of an operation that commutes is its two-level algorithm, on SMPI's node
    and leader communicators, which a recording cannot follow: an MPI_Iallreduce of 1 MiB goes to
    SMPI's requests, as before; the sums are right (element i: the ranks' 0..7 plus 8 i)."""
    options = ("--machine", "h100-ib200", "--nodes", "2", "--set", "mpi.collective_selector=mpich")
    res = run(nbc, tmp_path / "f", options, "fallback")
    assert res.returncode == 0, res.stderr
    assert sorted(re.findall(r"^rank (\d+) sum (\S+) (\S+)$", res.stdout, re.M)) == sorted(
        (str(r), "28.0", f"{28 + 8 * 131071}.0") for r in range(8)
    )
    assert counts(res.stderr)["Iallreduce"] == (0, 8)


@pytest.mark.parametrize("selector", ["default", "ompi", "mpich", "mvapich2", "impi"])
def test_non_blocking_reductions_of_a_derived_type_in_the_kernel_are_right(tmp_path_factory, tmp_path, selector):
    """tests/native/programs/reductions.c's rounds (test_reductions.py) with the non-blocking
    collectives in the kernel: MPI_Iallreduce and MPI_Ireduce of a struct of a double and an int
    with an operation of the program's that commutes, on communicators of 2 to 16 ranks, 1 to 5000
    elements, come out right, every element, its padding untouched: in the kernel (the blocking
    call's algorithm, SMPI's code recorded, as a derived type takes it) or by SMPI's requests,
    whichever the selector's algorithm allows (MVAPICH2's and Intel MPI's two-level ones, on SMPI's
    node communicators, are SMPI's to run)."""
    reductions = mpicc_program(tmp_path_factory, "reductions")
    out = tmp_path / "out"
    options = ("--machine", "h100-ib200", "--nodes", "4", "--set", f"mpi.collective_selector={selector}")
    res = orrery(
        "run",
        "--out",
        str(out),
        *options,
        "--",
        str(reductions),
        "2,3,5,8,13,16",
        "1,3,100,1000,5000",
        "struct",
        env={"ORRERY_SMPI_NBC": "report"},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "FAIL" not in res.stdout
    assert len(re.findall(r"^checked n=\d+ elements=\d+ round=struct non-blocking$", res.stdout, re.M)) == 30
    took = counts(res.stderr)
    # each rank of communicators of 2, 3, 5, 8, 13 and 16 (47) for 5 counts: an allreduce, two reduces
    assert sum(took["Iallreduce"]) == 47 * 5 and sum(took["Ireduce"]) == 2 * 47 * 5
    if selector in ("default", "ompi"):  # the others' reduce is two-level, on SMPI's node communicators
        assert took["Iallreduce"][0] > 0 and took["Ireduce"][0] > 0, took


DEVICE = re.compile(r"^rank (\d+) entered=(\S+) returned=(\S+)$", re.M)


@pytest.mark.parametrize("size, copied", [(1 << 18, 8 << 18), (64 << 20, 0)], ids=["256KiB", "64MiB-folded"])
def test_device_buffers_are_copied_only_where_they_hold_data(programs, tmp_path, size, copied):
    """MPI_Iallreduce between cudaMalloc'd buffers on 8 ranks, waited for at once, returns at the
    blocking call's instant, every bit. Below the fold threshold (1 MiB) each rank's input is
    copied into the call's table (8 x 256 KiB); from it on, device memory is folded (no data
    anyone reads, and SMPI's messages from it carry none): nothing is copied, where 8 x 64 MiB
    would have been."""
    program = programs["nbc_device"]
    options = ("--machine", "h100-ib200", "--nodes", "2")
    found = {}
    for form in ("blocking", "waited"):
        res = run(program, tmp_path / form, options, form, str(size))
        assert res.returncode == 0, res.stderr
        found[form] = {int(r): (e, t) for r, e, t in DEVICE.findall(res.stdout)}
        assert len(found[form]) == 8
    assert found["waited"] == found["blocking"]
    assert counts(res.stderr)["Iallreduce"] == (8, 0)
    assert re.search(rf"inputs copied: {copied} bytes$", REPORT.search(res.stderr)[1])
