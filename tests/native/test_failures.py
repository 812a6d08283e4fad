"""Failures are failures: a deadlock, MPI_Abort, a rank's exit, a crash, GPU work left pending at
a rank's end each end `orrery run` with a non-zero status, the program's output kept, and a
results.json saying what happened, to which rank and when; a pure-MPI program runs as any other;
results.json counts the bytes of every MPI call.

The failing program (programs/failures.cu) has one rank (the last) run `busy` and wait for it
before it fails, so the failure happens at L + BUSY + S (launch, kernel, synchronisation),
L, S from the h100-ib200 description; the other ranks fail at once.
"""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest
from conftest import HERE, orrery
from derivations import REL, US

pytestmark = pytest.mark.native

BUSY = 1000 * US


@pytest.fixture
def costs(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"kernels": {"busy": {"time": "1ms"}}}))
    return ("--costs", str(path))


def fail(run_program, programs, mode, costs, ranks=2):
    return run_program(programs["failures"], mode, options=(*costs, "--gpus-per-node", str(ranks)))


def worked(h100) -> float:
    """When the rank that ran busy and waited for it comes back: its launch, busy, the sync."""
    return h100.overheads.launch + BUSY + h100.overheads.sync


def check_reported(r, status: str, exit_code: int, ranks: list[int], time_s: float):
    """The exit status, results.json's status, ranks and time, and what reached the terminal:
    every rank's output up to the failure, Orrery's line naming the failure last on stderr, no
    SimGrid backtrace, no launcher lines on stdout."""
    assert r.returncode == exit_code, r.stderr
    res = r.results
    assert res["status"] == status
    assert res["run"]["exit_code"] == exit_code
    assert res["failure"]["ranks"] == ranks
    assert res["failure"]["time_s"] == pytest.approx(time_s, rel=REL)
    assert res["makespan_s"] == pytest.approx(time_s, rel=REL)
    for rank in range(len(res["ranks"])):
        assert f"rank {rank} before" in r.stdout
    assert r.stderr.splitlines()[-1] == f"orrery: {status}: {res['failure']['message']}"
    assert "backtrace" not in r.stderr.lower()
    assert "Execution failed" not in r.stdout
    return res


def test_a_completed_run_says_so(run_program, programs):
    r = run_program(programs["timing"], "one-stream", options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    res = r.results
    assert res["status"] == "completed" and res["failure"] is None and res["run"]["exit_code"] == 0
    assert [rank["finished"] for rank in res["ranks"]] == [True]
    assert "orrery:" not in r.stderr


def test_two_ranks_receiving_first_is_a_deadlock_naming_both_calls(run_program, programs, costs, h100):
    r = fail(run_program, programs, "deadlock2", costs)
    t = worked(h100)  # rank 1 posts its receive after busy: then nothing can move
    res = check_reported(r, "deadlock", 4, [0, 1], t)
    assert res["failure"]["blocked"] == [
        {"rank": 0, "call": "MPI_Recv", "peer": 1, "tag": 0, "since_s": 0.0},
        {"rank": 1, "call": "MPI_Recv", "peer": 0, "tag": 0, "since_s": pytest.approx(t, rel=REL)},
    ]
    assert "rank 0 in MPI_Recv from rank 1 (tag 0) since 0 s" in res["failure"]["message"]
    for rank in res["ranks"]:
        assert not rank["finished"] and rank["end_s"] == pytest.approx(t, rel=REL)
    # the receive each rank is blocked in counts as its MPI time up to the deadlock
    assert res["ranks"][0]["mpi"]["MPI_Recv"] == {"count": 1, "bytes": 4, "time_s": pytest.approx(t, rel=REL)}
    assert "rank 0 after" not in r.stdout


def test_a_ring_of_synchronous_sends_is_a_deadlock(run_program, programs, costs, h100):
    r = fail(run_program, programs, "ring", costs, ranks=3)
    since = worked(h100)
    t = since + h100.mpi.overhead("send", "host", True)  # rank 2's send is posted after its overhead
    res = check_reported(r, "deadlock", 4, [0, 1, 2], t)
    assert [(b["rank"], b["call"], b["peer"]) for b in res["failure"]["blocked"]] == [
        (0, "MPI_Ssend", 1),
        (1, "MPI_Ssend", 2),
        (2, "MPI_Ssend", 0),
    ]
    assert res["failure"]["blocked"][2]["since_s"] == pytest.approx(since, rel=REL)


def test_mpi_abort_exits_with_its_error_code(run_program, programs, costs, h100):
    r = fail(run_program, programs, "abort7", costs)
    res = check_reported(r, "aborted", 7, [1], worked(h100))
    assert res["failure"]["code"] == 7
    assert res["failure"]["message"].startswith("rank 1 called MPI_Abort with error code 7 at simulated time ")
    assert "rank 1 after" not in r.stdout


@pytest.mark.parametrize("status", [5, 3])
def test_a_rank_s_exit_status_is_passed_through(run_program, programs, costs, h100, status):
    """exit(3) exits 3 as the program's own: results.json's status and the last stderr line tell it
    from Orrery's own errors (exit 3, status orrery_error, `orrery: error: ...`)."""
    r = fail(run_program, programs, f"exit{status}", costs)
    res = check_reported(r, "exited", status, [1], worked(h100))
    assert res["failure"]["code"] == status
    assert not r.stderr.splitlines()[-1].startswith("orrery: error:")
    assert res["ranks"][1]["kernels"]["busy(float*)"]["count"] == 1  # its work before the exit is there


def test_a_segfault_names_the_rank_and_the_signal(run_program, programs, costs, h100):
    r = fail(run_program, programs, "segv", costs)
    res = check_reported(r, "crashed", 128 + 11, [1], worked(h100))
    assert res["failure"]["code"] == 11
    assert "rank 1 was killed by signal 11 (SIGSEGV" in res["failure"]["message"]


@pytest.mark.parametrize(
    "mode, stream, work, issue",
    [
        ("pending-kernel", "the legacy default stream of device 0", ["kernel busy(float*)"], ("launch",)),
        (
            "pending-memset",
            "the legacy default stream of device 0",
            ["kernel busy(float*)", "memset of 1048576 bytes"],
            ("launch", "memcpy"),
        ),
        (
            "pending-async-copy",
            "stream 1 of device 0",
            ["kernel busy(float*)", "H2D copy of 1048576 bytes"],
            ("launch", "memcpy"),
        ),
    ],
)
def test_gpu_work_pending_at_a_rank_s_end_is_named(run_program, programs, costs, h100, mode, stream, work, issue):
    """Rank 1 ends right after issuing the work (its host overheads: a launch, a memset's or a
    copy's issue), with busy still running and what follows it queued."""
    r = fail(run_program, programs, mode, costs)
    t = sum(getattr(h100.overheads, o) for o in issue)
    res = check_reported(r, "pending_gpu_work", 5, [1], t)
    assert res["failure"]["pending"] == [{"rank": 1, "stream": stream, "work": w} for w in work]
    assert "rank 1 after" in r.stdout  # it did reach its end
    assert res["ranks"][1]["finished"] is True


def test_main_returning_a_status_is_passed_through(run_program, programs):
    """... and the program's standard output is its own: smpirun, seeing the status, printed
    smpimain's command line and "Execution failed with code 7." there (XSBench's failed check)."""
    r = run_program(programs["timing"], "exit", options=("--gpus-per-node", "1"))
    assert r.returncode == 7
    assert r.results["status"] == "exited" and r.results["failure"]["code"] == 7
    assert r.stderr.splitlines()[-1].startswith("orrery: exited: a rank returned 7 from main")
    assert "Execution failed" not in r.stdout and "--cfg=" not in r.stdout
    assert r.stdout.splitlines()[0].startswith("orrery: the run ended (exited)")  # the program prints nothing


def test_a_pure_mpi_program_has_a_normal_report(run_program, mpi_only):
    r = run_program(mpi_only, "bytes", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    res = r.results
    assert res["status"] == "completed"
    for rank in res["ranks"]:
        assert rank["finished"] and rank["kernel_s"] == 0 and rank["copies"] == {}
        assert rank["gpu_wait_s"] == 0 and rank["engines"] == {"compute": 0, "H2D": 0, "D2H": 0}
        assert rank["mpi_s"] > 0


def test_mpi_calls_count_their_bytes(run_program, mpi_only):
    """Bytes per call, by hand from mpi_only.c's calls (double 8 B, int 4 B, 2 ranks): point-to-
    point the message (MPI_Sendrecv both), collectives the rank's send buffer (MPI_Bcast the
    buffer at every rank; MPI_Scatter the root's whole send buffer, a block elsewhere; MPI_Gather
    in place at the root its block of the receive buffer)."""
    res = run_program(mpi_only, "bytes", options=("--gpus-per-node", "2")).results
    common = {
        "MPI_Sendrecv": (1, 10 * 8 + 20 * 8),
        "MPI_Irecv": (1, 7 * 4),
        "MPI_Isend": (1, 7 * 4),
        "MPI_Waitall": (1, 0),
        "MPI_Bcast": (1, 50 * 8),
        "MPI_Allreduce": (2, 2 * 30 * 8),
        "MPI_Allgather": (1, 5 * 4),
        "MPI_Alltoall": (1, 2 * 4 * 4),
        "MPI_Gather": (1, 9 * 4),
        "MPI_Barrier": (1, 0),
    }
    expected = [
        {**common, "MPI_Send": (2, 100 * 8 + 3 * 4), "MPI_Scatter": (1, 2 * 6 * 8)},
        {**common, "MPI_Recv": (2, 100 * 8 + 3 * 4), "MPI_Scatter": (1, 6 * 8)},
    ]
    for rank, want in zip(res["ranks"], expected):
        assert {k: (v["count"], v["bytes"]) for k, v in rank["mpi"].items()} == want


def test_exit_in_a_c_rank_is_passed_through(run_program, mpi_only):
    """exit() in a file smpicc builds is SMPI's smpi_exit, which ended only the rank and left the
    others to deadlock: rank 1's exit(5), before anything was simulated, ends the job with 5."""
    r = run_program(mpi_only, "exit5", options=("--gpus-per-node", "2"))
    res = check_reported(r, "exited", 5, [1], 0.0)
    assert res["failure"]["code"] == 5


def test_a_run_ended_before_its_other_ranks_started_still_names_all_of_them(run_program, mpi_only):
    """OSU's one-sided benchmarks exit(1) on a usage error before MPI_Init: rank 0 ends the job
    before rank 1 has made a call, so only rank 0 reports. The summary named the run "1 ranks on";
    it names the run's ranks."""
    r = run_program(mpi_only, "exit1-before-init", options=("--gpus-per-node", "2"))
    assert r.returncode == 1, r.stderr
    res = r.results
    assert res["status"] == "exited" and [rank["rank"] for rank in res["ranks"]] == [0]
    assert "orrery: the run ended (exited) at simulated time 0 (2 ranks on h100-ib200)" in r.stdout.splitlines()
    report = orrery("report", str(r.out))
    assert report.returncode == 0, report.stderr
    assert "2 ranks on h100-ib200" in report.stdout and "the mean is over 1 rank." in report.stdout


def test_exit_0_of_a_program_that_never_called_mpi_init_is_its_normal_end(run_program, programs, mpi_only):
    """Under mpirun a process that never joined the MPI job ends with its own status: a CUDA
    program without MPI (deviceQuery and the other CUDA samples call exit(EXIT_SUCCESS)) completes,
    its work counted; exit(0) before MPI_Init in a C rank (SMPI's smpi_exit) too."""
    r = run_program(programs["no_mpi"], "0", options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("copied\n")
    res = r.results
    assert res["status"] == "completed" and res["failure"] is None
    assert res["ranks"][0]["finished"] is True
    assert res["ranks"][0]["copies"]["H2D"]["count"] == 1
    r = run_program(mpi_only, "exit0-before-init", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    assert r.results["status"] == "completed"
    assert [rank["finished"] for rank in r.results["ranks"]] == [True, True]


def test_a_program_without_mpi_ends_after_its_last_overhead_however_it_ends(run_program, programs):
    """NVIDIA's single_gpu Jacobi ends with cudaFree, whose synchronisation overhead is host time
    the rank spends ahead of SimGrid's clock: no MPI_Finalize catches it up. Its end, returning
    from main or calling exit(0), is after that overhead, and so is the makespan: once the rank
    ended 1 us after the makespan (idle -1 us) returning, and 1 us before it calling exit(0) (its
    terms then summed to 1 us more than the makespan)."""
    ends = []
    for how in ("return", "0"):
        r = run_program(programs["no_mpi"], how, options=("--gpus-per-node", "1"))
        assert r.returncode == 0, r.stderr
        res = r.results
        rank = res["ranks"][0]
        assert res["status"] == "completed" and rank["finished"] is True
        assert rank["end_s"] == res["makespan_s"]
        assert rank["idle_s"] == 0 and res["terms"]["critical"]["idle_s"] == 0
        assert math.fsum(res["terms"]["critical"].values()) == pytest.approx(res["makespan_s"], rel=1e-12)
        gpu = json.loads((r.out / "run.json").read_text())["gpu"]
        # the copy's overhead and its synchronisation's, then cudaFree's synchronisation
        assert res["terms"]["critical"]["host_overheads_s"] == pytest.approx(
            gpu["copy_overhead_s"] + 2 * gpu["sync_overhead_s"], rel=1e-9
        )
        ends.append(rank["end_s"])
    assert ends[0] == ends[1]


@pytest.mark.parametrize("mode", ["spin-wtime", "spin-clock"])
def test_a_loop_waiting_for_time_to_pass_in_host_code_stops_the_run_named(run_program, programs, mode):
    """The program's host code costs no simulated time: a loop that waits on the clock for 1 ms
    (OSU's non-blocking collectives time their dummy compute so) hung the run for ever; it now
    stops, named, after ten million MPI calls (MPI_Wtime) or a hundred million reads of the
    host's clock at one instant (an MPI call counting for ten reads; the few the program made
    at that instant before its loop count too)."""
    r = run_program(programs["timing"], mode, options=("--gpus-per-node", "1"))
    assert r.returncode == 3, r.stderr
    assert r.results["status"] == "orrery_error"
    last = r.stderr.strip().splitlines()[-1]
    found = re.match(
        r"orrery: error: rank 0 made (\d+) MPI calls \(MPI_Wtime among them\) and (\d+) reads of the host's clock "
        r"in a row at simulated time ",
        last,
    )
    assert found, last
    calls, reads = int(found[1]), int(found[2])
    assert calls * 10 + reads == 100_000_000
    assert (calls if mode == "spin-wtime" else reads) > 0.999 * (10_000_000 if mode == "spin-wtime" else 100_000_000)
    assert "waits for time to pass in its own host code" in r.stderr


def test_a_non_zero_exit_of_a_program_without_mpi_is_its_status(run_program, programs):
    r = run_program(programs["no_mpi"], "5", options=("--gpus-per-node", "1"))
    assert r.returncode == 5, r.stderr
    assert r.results["status"] == "exited" and r.results["failure"]["code"] == 5
    assert r.stderr.splitlines()[-1].startswith("orrery: exited: rank 0 exited with status 5 at simulated time ")


def test_a_program_without_orrery_s_runtime_is_refused(tmp_path):
    """A pure-MPI program linked by plain smpicc has no libcudart.so.13: nothing would time its MPI
    calls or write the report."""
    exe = tmp_path / "bare"
    subprocess.run(["smpicc", str(HERE / "native" / "programs" / "mpi_only.c"), "-o", str(exe)], check=True)
    p = orrery("run", "--out", str(tmp_path / "o"), "--", str(exe), "bytes")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"orrery: error: orrery run: got '{exe}'")
    assert "orrery mpicc" in p.stderr
    assert not (tmp_path / "o").exists()


def test_cuda_calls_from_the_program_s_own_threads_stop_the_run_in_one_line_every_time(run_program, tmp_path):
    """NVIDIA's multi_threaded_copy Jacobi drives a GPU per OpenMP thread: those threads are not
    simulated ranks. All of them calling cudaSetDevice at once once ended the run three ways in three
    tries (its error, "the simulation stopped", "wrote no report ... status 0"): one line, each time."""
    src = tmp_path / "threads.cu"
    src.write_text(
        "#include <mpi.h>\n"
        "int main(int c, char** v) { MPI_Init(&c, &v);\n"
        "#pragma omp parallel num_threads(8)\n"
        "  { for (int i = 0; i < 1000; i++) cudaSetDevice(0); }\n"
        "MPI_Finalize(); }\n"
    )
    exe = tmp_path / "threads"
    orrery("nvcc", "-Xcompiler", "-fopenmp", str(src), "-o", str(exe), check=True)
    for _ in range(3):
        r = run_program(exe, options=("--gpus-per-node", "1"))
        assert r.returncode == 3, r.stderr
        assert r.stderr.strip().splitlines()[-1] == (
            "orrery: error: cudaSetDevice called outside of any simulated rank, from a thread of the "
            "program's own (OpenMP's, std::thread's): Orrery simulates each rank's CUDA calls from the "
            "thread that runs its MPI"
        )
        assert r.results["status"] == "orrery_error"
