"""A program built by Orrery's wrappers, started on its own (``./prog``, not ``orrery run ./prog``).

SMPI links programs as shared objects that only smpirun can start; the wrappers give each
program an entry point (standalone_entry.c) that execs ``python -P -m orrery.run.standalone
PROGRAM ARGS...``. This module runs the program as one simulated rank on the default machine, as
``orrery run`` would, but quietly: the program's standard output is its own (no summary, and
nothing of smpirun's: launch.py takes SimGrid's status from the launcher_status script), its exit
status is the program's, the run's folder is temporary and removed, and Orrery's only words go to
stderr. That is what a build system's test programs need (configure's AC_RUN_IFELSE, its
conftest.val values, libtool's checks); a cluster is simulated with ``orrery run`` only.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ..api import simulate
from ..errors import InputError, OrreryError
from .results import EXIT_BAD_INPUT, EXIT_ORRERY_ERROR

#: The machine a program started on its own runs on (`orrery run`'s default), one node, one GPU, one rank.
MACHINE = "h100-ib200"
#: What the runtime leaves in the run's folder once the program has made a call it sees.
_SHIM_OUTPUTS = ("report.tsv", "report.tsv.crash", "error.txt")


def _simulator_status(out: Path) -> int:
    """SimGrid's exit status for a run without a report: results.json's failure code (the status
    launch.py read, which smpirun no longer prints after the program's output)."""
    try:
        failure = json.loads((out / "results.json").read_text())["failure"]
        return int(failure["code"]) if failure and failure["code"] is not None else EXIT_ORRERY_ERROR
    except (OSError, ValueError, KeyError, TypeError):
        return EXIT_ORRERY_ERROR


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
        try:
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
                return _simulator_status(out)
            print(f"orrery: error: {e}", file=sys.stderr)
            return EXIT_ORRERY_ERROR
    if res.failure:
        print(f"orrery: {res.status}: {res.failure.message}", file=sys.stderr)
    return int(res.run["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
