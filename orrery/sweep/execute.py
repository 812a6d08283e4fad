"""Running a sweep's points: on a local pool, or on a Dask cluster; resuming; the table's rows.

Each point runs in a process of its own (worker.py) in its folder OUT/points/ID. Locally a
pool of threads starts those processes, at most ``workers`` at once: every point is already a
process of its own (its simulation another, smpirun's), so a thread only waits for it. With
a scheduler address the points are Dask tasks (dask.distributed), each starting the same
process on whichever worker takes it: the workers must see the spec's files and OUT at the
same paths (a shared file system).

A point's inputs are checked here first, where they are cheap to check (the machine with
the point's overrides, the layout, the placeholders, the cost file): a point whose inputs
are wrong is recorded as ``bad_input`` without being run. A point is finished when its
folder holds its results.json and a point.json (written after it) whose record of the
point's inputs equals this sweep's: a resumed sweep runs only the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__, machines
from ..calibration import merge
from ..errors import InputError, OrreryError
from ..machines import platform
from ..run import costs as cost_files
from ..run.results import Results
from . import worker
from .spec import Sweep, SweepPoint

log = logging.getLogger("orrery.sweep")

POINTS = "points"
#: What a point's folder holds besides the run's own files (results.json, platform.xml, ...)
POINT_FILES = (worker.RECORD, "stdout.txt", "stderr.txt")
#: A point that is not run: its inputs are wrong
BAD_INPUT = "bad_input"


@dataclass
class Prepared:
    """A point as it will run: its layout resolved, its arguments filled in, the task a worker
    runs; or, for a point whose inputs are wrong, the error (task None)."""

    point: SweepPoint
    gpus_per_node: int | None
    ranks_per_node: int | None
    args: list[str] | None
    task: dict | None
    error: str | None = None


@dataclass
class Outcome:
    """What became of a point in this sweep: ``ran`` False for one finished earlier."""

    status: str
    error: str | None
    ran: bool
    results: Results | None = field(default=None, repr=False)


def _digest(path: Path, cache: dict[Path, str]) -> str:
    if path not in cache:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        cache[path] = h.hexdigest()
    return cache[path]


_FLAGS = {"--nodes": "nodes", "--gpus-per-node": "gpus_per_node", "--ranks-per-node": "ranks_per_node"}


def _located(e: InputError, sweep: Sweep, point: SweepPoint) -> InputError:
    """An error of the point's inputs named by the spec's key (``set.KEY``, ``nodes``, ...)
    rather than by `orrery run`'s flag; errors of a file (a cost file, a machine
    description) keep naming that file."""
    where = f"{sweep.source} (point {point.id})"
    if e.source.startswith("--set "):
        return InputError(where, f"set.{e.key}", e.value, e.expected)
    if e.source in _FLAGS:
        return InputError(where, _FLAGS[e.source], e.value, e.expected)
    if e.source == "--machine":
        return InputError(where, "machine", point.machine, e.expected)
    if e.source == str(sweep.source):  # the spec's own key (a placeholder), at this point
        return InputError(where, e.key, e.value, e.expected)
    return e


def _cost_file_problem(path: Path) -> InputError | None:
    try:
        cost_files.load(str(path))
    except InputError as e:
        return e
    return None


def prepare(sweep: Sweep, out: Path) -> list[Prepared]:
    """Every point checked and made ready to run, in the spec's order."""
    digests: dict[Path, str] = {}
    machine_cache: dict[str, tuple[machines.Machine, str] | InputError] = {}
    cost_checked: dict[Path, InputError | None] = {}
    program_sha = _digest(sweep.program, digests)
    prepared = []
    for point in sweep.points:
        gpn, rpn, args = point.gpus_per_node, point.ranks_per_node, None
        try:
            machine = sweep.machine_path(point.machine)
            calibration = str(sweep.path(point.calibration)) if point.calibration else None
            key = json.dumps([machine, calibration, point.set], sort_keys=True)
            if key not in machine_cache:
                try:
                    cal = merge.read(calibration, machines.load(machine).name) if calibration else None
                    m = merge.machine(machine, cal, point.set)
                    machine_cache[key] = (m, hashlib.sha256(m.model_dump_json().encode()).hexdigest())
                except InputError as e:
                    machine_cache[key] = e
            cached = machine_cache[key]
            if isinstance(cached, InputError):
                raise cached
            m, machine_sha = cached
            layout = platform.Layout.for_machine(m, point.nodes, point.gpus_per_node, point.ranks_per_node)
            gpn, rpn = layout.gpus_per_node, layout.ranks_per_node
            args = sweep.fill(sweep.namespace(point, gpn, rpn))
            costs = sweep.path(point.costs) if point.costs else None
            if costs is not None:
                if costs not in cost_checked:
                    cost_checked[costs] = _cost_file_problem(costs)
                problem = cost_checked[costs]
                if problem is not None:
                    raise problem
        except InputError as e:
            prepared.append(Prepared(point, gpn, rpn, args, None, worker.one_line(_located(e, sweep, point))))
            continue
        inputs = {
            "orrery": __version__,
            "program_sha256": program_sha,
            "args": args,
            "machine": point.machine,
            "machine_sha256": machine_sha,  # the description with the calibration and overrides applied
            "set": point.set,
            "calibration_sha256": _digest(Path(calibration), digests) if calibration else None,
            "costs_sha256": _digest(costs, digests) if costs else None,
            "layout": [layout.nodes, gpn, rpn],
            "mode": sweep.spec.mode,
            "strict": sweep.spec.strict,
            "managed": sweep.spec.managed,
            "sim_time_limit_s": sweep.spec.sim_time_limit,
        }
        task = {
            "folder": str((out / POINTS / point.id).absolute()),
            "cwd": str(sweep.source.parent.absolute()),  # where the program runs: the spec's paths are relative to it
            "program": str(sweep.program),
            "args": args,
            "machine": machine,
            "nodes": layout.nodes,
            "gpus_per_node": gpn,
            "ranks_per_node": rpn,
            "mode": sweep.spec.mode,
            "costs": str(costs) if costs else None,
            "calibration": calibration,
            "set": point.set,
            "strict": sweep.spec.strict,
            "managed": sweep.spec.managed,
            "sim_time_limit": sweep.spec.sim_time_limit,
            "wall_time_limit": sweep.spec.wall_time_limit,  # not an input: a point it stopped runs again
            "record": {"orrery_sweep_point": 1, "id": point.id, "parameters": point.parameters, "inputs": inputs},
        }
        prepared.append(Prepared(point, gpn, rpn, args, task))
    return prepared


def finished(p: Prepared) -> Results | None:
    """The results of a point run earlier with exactly these inputs, or None."""
    if p.task is None:
        return None
    folder = Path(p.task["folder"])
    try:
        record = json.loads((folder / worker.RECORD).read_text())
        if record.get("inputs") != json.loads(json.dumps(p.task["record"]["inputs"])):
            return None
        res = Results.read(folder / "results.json")
        # the wall clock's verdict is no result of the inputs: the point runs again
        return None if res.status == "wall_time_limit" else res
    except (OSError, ValueError, OrreryError):
        return None


# ---- running points

_running: set[subprocess.Popen] = set()  # the points' processes this process started, to stop them on an interrupt
_running_lock = threading.Lock()


def run_point(task: dict) -> dict:
    """Run one point in a process of its own; its outcome (status, error). A Dask task too."""
    folder = Path(task["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    for name in (*POINT_FILES, "results.json"):
        (folder / name).unlink(missing_ok=True)
    with (folder / "stderr.txt").open("wb") as err:
        # -P: the installed orrery, never a folder named so in the working directory. A session of
        # its own: an interrupt stops the point's whole process group, smpirun and the simulation
        # included (_stop_running), not only the worker
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "orrery.sweep.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=task["cwd"],
            start_new_session=True,
        )
        with _running_lock:
            _running.add(proc)
        try:
            out, _ = proc.communicate(json.dumps(task).encode())
        finally:
            with _running_lock:
                _running.discard(proc)
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        outcome = json.loads(lines[-1])
        if isinstance(outcome, dict) and "status" in outcome:
            return outcome
    except (IndexError, ValueError):
        pass
    tail = (folder / "stderr.txt").read_text(errors="replace").strip().splitlines()
    why = f": {tail[-1]}" if tail else ""
    return {"status": "orrery_error", "error": f"the point's process exited with status {proc.returncode}{why}"}


def _stop_running() -> None:
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)


def _local(tasks: list[dict], workers: int) -> Iterator[tuple[str, dict]]:
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="orrery-sweep") as pool:
        futures = {pool.submit(run_point, t): t["record"]["id"] for t in tasks}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        except BaseException:  # an interrupt: no new point starts, the running ones stop
            pool.shutdown(wait=False, cancel_futures=True)
            _stop_running()
            raise


def connect(address: str):  # -> distributed.Client
    """A Dask client of the scheduler at `address`, or an InputError naming --scheduler."""
    try:
        from distributed import Client
    except ImportError:
        raise InputError(
            "--scheduler", None, address, "dask.distributed installed (pip install 'orrery[whatif]')"
        ) from None
    try:
        return Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise InputError(
            "--scheduler",
            None,
            address,
            f"the address of a running Dask scheduler, e.g. tcp://host:8786 (could not connect: {e})",
        ) from None


def _dask(tasks: list[dict], client) -> Iterator[tuple[str, dict]]:
    from distributed import as_completed as completed

    # pure=False: a point run twice is run twice (its folder is rewritten), never a cached result
    futures = {client.submit(run_point, t, key=f"orrery-point-{t['record']['id']}", pure=False): t for t in tasks}
    try:
        for f in completed(futures, loop=client.loop):
            t = futures[f]
            try:
                yield t["record"]["id"], f.result()
            except Exception as e:  # the worker running it died, or was lost
                yield t["record"]["id"], {"status": "orrery_error", "error": f"the Dask task failed: {e!r}"}
    except BaseException:
        client.cancel(list(futures))
        raise


def label(point: SweepPoint) -> str:
    what = ", ".join(f"{k}={v}" for k, v in point.parameters.items())
    return f"{point.id} ({what})" if what else point.id


def execute(
    prepared: list[Prepared],
    *,
    workers: int | None = None,
    client=None,
    force: bool = False,
    retry_failed: bool = False,
    progress: bool | None = None,
) -> list[Outcome]:
    """Run the points that are not finished; every point's outcome, in the spec's order."""
    from tqdm import tqdm

    outcomes: dict[str, Outcome] = {}
    todo = []
    for p in prepared:
        if p.task is None:
            outcomes[p.point.id] = Outcome(BAD_INPUT, p.error, False)
            log.info("point %s: not run, bad input: %s", label(p.point), p.error)
            continue
        earlier = None if force else finished(p)
        if earlier is not None and not (retry_failed and earlier.status != "completed"):
            outcomes[p.point.id] = Outcome(earlier.status, _error(earlier), False, earlier)
            log.debug("point %s: finished earlier with the same inputs, not rerun", label(p.point))
            continue
        todo.append(p)
    workers = workers or len(os.sched_getaffinity(0))
    where = f"the Dask cluster at {client.scheduler.address}" if client is not None else f"{workers} local workers"
    log.info(
        "%d points: %d finished earlier, %d with bad input, %d to run on %s",
        len(prepared),
        sum(o.ran is False and o.status != BAD_INPUT for o in outcomes.values()),
        sum(o.status == BAD_INPUT for o in outcomes.values()),
        len(todo),
        where,
    )
    root = next((Path(p.task["folder"]).parent for p in prepared if p.task), None)
    if root is not None and root.is_dir():
        others = set(os.listdir(root)) - {p.point.id for p in prepared}
        if others:
            log.info("%d folders in %s are not points of this spec: left as they are", len(others), root)
    by_id = {p.point.id: p for p in todo}
    tasks = [p.task for p in todo if p.task is not None]
    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(total=len(prepared), initial=len(outcomes), unit="point", disable=not show, file=sys.stderr)
    failed = sum(o.status != "completed" for o in outcomes.values())
    with bar, _logging_through(bar):
        bar.set_postfix(failed=failed)
        runs = _dask(tasks, client) if client is not None else _local(tasks, workers)
        for pid, result in runs:
            p = by_id[pid]
            res = finished(p)
            status = res.status if res is not None else result["status"]
            error = _error(res) if res is not None else result.get("error")
            outcomes[pid] = Outcome(status, error, True, res)
            if status == "completed":
                assert res is not None and res.makespan_s is not None
                log.info("point %s: completed, simulated makespan %.6g s", label(p.point), res.makespan_s)
            else:
                failed += 1
                log.info("point %s: %s: %s", label(p.point), status, error)
            bar.set_postfix(failed=failed)
            bar.update()
    return [outcomes[p.point.id] for p in prepared]


def _error(res: Results) -> str | None:
    return res.failure.message if res.failure else None


@contextlib.contextmanager
def _logging_through(bar) -> Iterator[None]:
    """Log lines printed above the progress bar instead of through it."""
    if bar.disable:
        yield
        return
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers=[log]):
        yield


def configure_logging(verbosity: int) -> None:
    """The sweep's log on stderr: what each point did (INFO) on a terminal or with -v, the
    points skipped too with -vv (DEBUG); only warnings otherwise."""
    level = (
        logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 or sys.stderr.isatty() else logging.WARNING
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("orrery: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False
