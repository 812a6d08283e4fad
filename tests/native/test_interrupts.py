"""A run stopped from outside ends with everything it started. Ctrl-C (SIGINT), `kill` or
`timeout` (SIGTERM) and a closed terminal (SIGHUP) stop `orrery run` with the exit status a shell
gives a process that signal killed (128 + its number) and one line saying so; SimGrid and the
program stop with it (no process of the run left running), SMPI's copies of the program go
(no copy folder left in /dev/shm), and --out holds nothing of the run. `orrery sweep` stops the
same way, its running points' simulations with it. A run whose reader goes away
(`orrery run ... | head`) is a run its program did not survive: results.json says SIGPIPE
killed it.

The program is programs/mpi_only.c: in mode hold it prints "rank R holding", then spins for 120 s
of CPU time (each test stops it long before); in mode chatter its ranks print 100 000 lines each.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ORRERY

pytestmark = pytest.mark.native


def processes_naming(text: str) -> dict[int, str]:
    """The live (not zombie) processes whose command line contains `text`: pid -> command line."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:  # ended meanwhile
            continue
        if text in cmdline and state != "Z":
            found[int(proc.name)] = cmdline
    return found


def simulators(text: str) -> dict[int, str]:
    """The live smpimain processes whose command line contains `text`."""
    return {pid: c for pid, c in processes_naming(text).items() if c.split()[0].endswith("/smpimain")}


def copies_folder(cmdlines: dict[int, str]) -> Path:
    """The folder of SMPI's copies of the program, from smpimain's command line."""
    folders = {m.group(1) for c in cmdlines.values() if (m := re.search(r"--cfg=smpi/tmpdir:(\S+)", c))}
    assert len(folders) == 1, cmdlines
    return Path(folders.pop())


def start(out: Path, program: Path, mode: str) -> subprocess.Popen:
    """`orrery run` of the program's `mode` on 2 ranks, its output read by the test."""
    return subprocess.Popen(
        [ORRERY, "run", "--gpus-per-node", "2", "--out", str(out), "--", str(program), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def end(proc: subprocess.Popen) -> None:
    """A run the test did not see end ended as a user would end it (SIGTERM, then SIGKILL), so that
    a failing test leaves no simulation running and no copies behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def gone(text: str, timeout: float = 10.0) -> dict[int, str]:
    """The processes naming `text` still running after `timeout` seconds ({} once none is)."""
    deadline = time.monotonic() + timeout
    while (left := processes_naming(text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stopped_run_leaves_nothing_running_or_written(tmp_path, mpi_only, sig):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")  # an earlier run's
    proc = start(out, mpi_only, "hold")
    try:
        # ranks run one at a time: rank 0 holds, rank 1 never starts
        assert [proc.stdout.readline() for _ in range(2)] == ["rank 0 before\n", "rank 0 holding\n"]
        run = processes_naming(str(out / "hostfile"))  # smpirun's and smpimain's command lines
        copies = copies_folder(run)
        assert copies.is_dir() and copies.parent == Path("/dev/shm")
        assert {"run.json", "hostfile", "machine.json"} <= {p.name for p in out.iterdir()}
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        end(proc)
    assert proc.returncode == 128 + sig, stderr
    assert stderr.splitlines() == [f"orrery: stopped by {sig.name} before the run ended; {out} holds nothing of it"]
    assert "rank 1" not in stdout
    assert gone(str(out / "hostfile")) == {}
    assert not copies.exists()
    assert sorted(out.iterdir()) == []


def test_a_stopped_sweep_stops_its_points_simulations(tmp_path, mpi_only):
    """SIGTERM to `orrery sweep` reaches each running point's process (a session of its own),
    whose simulation (another session) stops with it; the sweep says how to resume."""
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'program = "{mpi_only}"\nargs = ["hold"]\n\n[grid]\ngpus_per_node = [1, 2]\n')
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [ORRERY, "sweep", str(spec), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        points = str(out / "points")
        # both points' smpimain (its command line names the point's host file), each holding
        wait_for(lambda: len(simulators(points)) == 2)
        copies = {copies_folder({pid: c}) for pid, c in simulators(points).items()}
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        end(proc)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.splitlines()[-1] == (f"orrery: sweep interrupted; run the same command again to resume from {out}")
    assert gone(points) == {}
    assert len(copies) == 2 and not any(c.exists() for c in copies)
    for point in (out / "points").iterdir():
        assert not (point / "results.json").exists() and not (point / "run.json").exists()


def test_a_run_whose_reader_went_away_was_killed_by_sigpipe(tmp_path, mpi_only):
    """`orrery run ... | head`: the program dies of SIGPIPE at its first write after the reader
    closed the pipe, so does `orrery run` at its summary (141 in a shell), results.json first."""
    out = tmp_path / "out"
    proc = start(out, mpi_only, "chatter")
    try:
        assert proc.stdout.readline() == "rank 0 before\n"
        proc.stdout.close()  # the reader goes: a rank's next write finds no reader
        proc.wait(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == -signal.SIGPIPE
    res = json.loads((out / "results.json").read_text())
    assert res["status"] == "crashed"
    assert res["failure"]["message"] == "the simulation was killed by signal 13 (SIGPIPE: Broken pipe)"
    assert res["run"]["exit_code"] == 128 + signal.SIGPIPE
    assert gone(str(out / "hostfile")) == {}
