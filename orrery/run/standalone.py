"""A program built by Orrery's wrappers, started on its own (``./prog``, not ``orrery run ./prog``).

SMPI links programs as shared objects that only smpirun can start; the wrappers give each
program an entry point (standalone_entry.c) that execs ``python -P -m orrery.run.standalone
PROGRAM ARGS...``. This module runs the program as one simulated rank on the default machine, as
``orrery run`` would, but quietly: the program's standard output is its own (no summary), its exit
status is the program's, the run's folder is temporary and removed, and Orrery's only words go to
stderr. That is what a build system's test programs need (configure's AC_RUN_IFELSE, its
conftest.val values, libtool's checks); a cluster is simulated with ``orrery run`` only.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..api import simulate
from ..errors import InputError, OrreryError
from .launch import FLAT_PLATFORM_FILE, platform_library, program_file
from .results import EXIT_BAD_INPUT, EXIT_ORRERY_ERROR

#: The machine a program started on its own runs on (`orrery run`'s default), one node, one GPU, one rank.
MACHINE = "h100-ib200"
#: What smpirun itself prints on stdout after a program that exits non-zero: its command line
#: (the program, SimGrid's options, the platform file) and the status.
_SMPIRUN_FAILURE = (
    rb"%s [^\n]* %s\n"
    rb"(?:Generated unrolled hostfile [^\n]* kept\.\n)?"
    rb"Execution failed with code (?P<status>\d+)\.\n\Z"
)
#: What the runtime leaves in the run's folder once the program has made a call it sees.
_SHIM_OUTPUTS = ("report.tsv", "report.tsv.crash", "error.txt")
#: Lines of the program's output held back until the next ones come (smpirun's are the last two or three).
_HELD_LINES = 3


class _Stdout:
    """Standard output as the program wrote it: everything on fd 1 (the program's output, then
    smpirun's) goes through a pipe to the real stdout, the last lines held back until the end so
    that smpirun's report of a non-zero status is dropped; ``status`` is the one it reported (0
    when it reported none)."""

    def __init__(self, program: Path, platform: Path):
        self.failure = re.compile(
            _SMPIRUN_FAILURE % (re.escape(os.fsencode(program)), re.escape(os.fsencode(platform)))
        )
        self.status = 0

    def _forward(self, read_end: int, real: int) -> None:
        held = b""
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                held += chunk
                cut = len(held)
                for _ in range(_HELD_LINES + 1):  # keep the last lines (and a line being written)
                    cut = held.rfind(b"\n", 0, cut)
                    if cut < 0:
                        break
                if cut >= 0:
                    os.write(real, held[: cut + 1])
                    held = held[cut + 1 :]
        m = self.failure.search(held)
        if m:
            self.status = int(m.group("status"))
            held = held[: m.start()]
        if held:
            os.write(real, held)

    @contextmanager
    def filtered(self) -> Iterator[None]:
        sys.stdout.flush()
        real = os.dup(1)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.close(write_end)
        thread = threading.Thread(target=self._forward, args=(read_end, real))
        thread.start()
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(real, 1)  # closes the pipe's last write end: the forwarder sees its end
            thread.join()
            os.close(real)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("orrery: error: orrery.run.standalone: expected a program and its arguments", file=sys.stderr)
        return EXIT_BAD_INPUT
    program, args = argv[0], argv[1:]
    print(
        f"orrery: {Path(program).name} runs as one simulated rank on one GPU of {MACHINE}; "
        f"`orrery run` simulates a cluster",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="orrery-standalone-") as tmp:
        out = Path(tmp).resolve()
        platform_file = platform_library() if platform_library().exists() else out / FLAT_PLATFORM_FILE
        stdout = _Stdout((program_file(program) or Path(program)).resolve(), platform_file)
        try:
            with stdout.filtered():
                res = simulate(
                    program, args, machine=MACHINE, nodes=1, gpus_per_node=1, out=out, capture_output=False, check=False
                )
        except InputError as e:
            print(f"orrery: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except OrreryError as e:
            if not any((out / name).exists() for name in _SHIM_OUTPUTS):
                # The program made no call the runtime saw (no MPI_Init, no CUDA call: configure's
                # plain C tests), so it wrote no report: it ran under SMPI, whose status is its own.
                return stdout.status
            print(f"orrery: error: {e}", file=sys.stderr)
            return EXIT_ORRERY_ERROR
    if res.failure:
        print(f"orrery: {res.status}: {res.failure.message}", file=sys.stderr)
    return int(res.run["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
