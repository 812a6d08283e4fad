"""One point of a sweep in a process of its own: ``python -m orrery.sweep.worker``.

It reads the point's task (JSON, made by execute.py) on stdin, runs it with
``orrery.simulate(..., check=False)`` into the point's folder, writes there the program's
standard output (stdout.txt) and, once results.json is there, the record of the point's
inputs (point.json: what a resumed sweep compares), and prints its outcome as one JSON
line. Its stderr, SimGrid's and the program's included, goes where execute.py sends it
(the point's stderr.txt): a process per point keeps each point's output apart, which
threads sharing one stderr could not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import interrupts
from ..api import load, simulate
from ..errors import InputError, OrreryError

RECORD = "point.json"


def one_line(e: Exception) -> str:
    return "; ".join(line.strip() for line in str(e).splitlines() if line.strip())


def run(task: dict) -> dict:
    """The point's outcome: its status and, for one that did not complete, why."""
    folder = Path(task["folder"])
    stdout = None
    try:
        res = simulate(
            task["program"],
            task["args"],
            machine=task["machine"],
            nodes=task["nodes"],
            gpus_per_node=task["gpus_per_node"],
            ranks_per_node=task["ranks_per_node"],
            mode=task["mode"],
            costs=task["costs"],
            calibration=task["calibration"],
            set=task["set"],
            strict=task["strict"],
            managed=task["managed"],
            sim_time_limit=task["sim_time_limit"],
            wall_time_limit=task["wall_time_limit"],
            out=folder,
            capture_output=True,
            check=False,
        )
        stdout = res.stdout
    except InputError as e:
        return {"status": "bad_input", "error": one_line(e)}
    except OrreryError as e:  # Orrery's own error: results.json says so when the run got that far
        if not (folder / "results.json").is_file():
            return {"status": "orrery_error", "error": one_line(e)}
        res = load(folder)
    (folder / "stdout.txt").write_text(stdout or "")
    part = folder / (RECORD + ".part")
    part.write_text(json.dumps(task["record"], indent=1, sort_keys=True) + "\n")
    part.replace(folder / RECORD)
    return {"status": res.status, "error": res.failure.message if res.failure else None}


def main() -> int:
    try:
        with interrupts.raised():  # the sweep stopping (SIGTERM): the point's simulation ends too
            outcome = run(json.loads(sys.stdin.read()))
    except KeyboardInterrupt as e:
        return interrupts.exit_status(e)
    sys.stdout.write(json.dumps(outcome) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
