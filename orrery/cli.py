"""The ``orrery`` command line: parses, validates, calls the library.

Errors of Orrery's own types become one line on stderr, ``orrery: error: ...``,
and exit status 2 (bad input, argparse's own errors included) or 3 (the
simulation could not go on); a run that fails otherwise ends with
``orrery: STATUS: ...`` on stderr and the exit status results.py assigns to
that status (the program's own where it has one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from . import __version__, _paths, api, interrupts, progress
from . import machines as machine
from .calibration import merge, sweeps
from .errors import InputError, OrreryError
from .machines import platform
from .report import FORMATS as REPORT_FORMATS
from .report import TOP as REPORT_TOP
from .run import build, launch, run_description
from .run.launch import FILL_POLICIES, GPU_VISIBILITY, MANAGED_POLICIES
from .run.results import check_iterations, summary
from .run.trace import DEFAULT_LINKS

# --sweeps help: each machine's other sets of shared sweeps
SWEEP_SETS = "; ".join(f"{m}: {', '.join(sets)}" for m, sets in sweeps.other_sets().items())


def writable_folder(path: str, flag: str = "--out") -> Path:
    """The folder a command writes to: one that exists or can be made, and can be written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(flag, None, path, "a folder (this is a file)")
    existing = next(d for d in [p, *p.absolute().parents] if d.exists())
    if not existing.is_dir():
        raise InputError(flag, None, path, f"a folder ({existing} is a file)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(flag, None, path, f"a folder Orrery can write to ({existing} is not writable)")
    return p


def _writable_file(path: str, flag: str) -> Path:
    p = Path(path)
    if p.is_dir():
        raise InputError(flag, None, path, "a file (this is a folder)")
    writable_folder(str(p.absolute().parent), flag)
    return p


def _run_command(a: argparse.Namespace) -> int:
    program = list(a.program)
    if program and program[0] == "--":
        program = program[1:]
    launch.clear_outputs(writable_folder(a.out))
    res = api.simulate(
        program[0] if program else "",
        program[1:],
        machine=a.machine,
        nodes=a.nodes,
        gpus_per_node=a.gpus_per_node,
        ranks_per_node=a.ranks_per_node,
        mode=a.mode,
        costs=a.costs,
        calibration=a.calibration,
        set=a.set,
        out=a.out,
        strict=a.strict,
        d2h_fill=a.d2h_fill,
        gpu_visibility=a.gpu_visibility,
        managed=a.managed,
        sim_time_limit=a.sim_time_limit,
        wall_time_limit=a.wall_time_limit,
        fold_pinned=not a.no_fold_pinned,
        trace=a.trace,
        trace_ranks=a.trace_ranks,
        trace_window=a.trace_window,
        trace_links=a.trace_links,
        capture_output=False,
        check=False,
        iterations=check_iterations(a.iterations),
    )
    sys.stdout.flush()
    print(summary(res))
    print(f"orrery: results in {Path(a.out) / 'results.json'}")
    if res.failure:  # the last line on stderr: what failed (Orrery's own errors say "error")
        sys.stdout.flush()
        print(f"orrery: {res.status}: {res.failure.message}", file=sys.stderr)
    return int(res.run["exit_code"])


def _machine_command(a: argparse.Namespace) -> int:
    if a.machine_cmd == "list":
        for name in machine.builtin_names():
            print(f"{name:20} {machine.load(name).description}")
    elif a.machine_cmd == "show":
        m = machine.load(a.name, machine.parse_overrides(a.set))
        width = max(len(k) for k in m.parameters())
        print(f"{m.name}: {m.description}")
        for key, value in m.parameters().items():
            if isinstance(value, list):  # a measured model: one line per segment, SI units
                print(f"  {key:{width}}  {'':>22}  {m.sources.get(key, '')}")
                for seg in value:
                    size = f"up to {seg.up_to:.6g} B" if seg.up_to is not None else "larger"
                    what = ", ".join(f"{f} {v!r}" for f, v in seg if f != "up_to")
                    print(f"  {'':{width}}    {size}: {what}")
            else:
                print(f"  {key:{width}}  {value!r:>22}  {m.sources.get(key, '')}")
    elif a.machine_cmd == "validate":
        m = machine.load(a.file)
        print(f"{a.file}: valid machine '{m.name}' ({len(m.parameters())} parameters)")
    elif a.machine_cmd == "export":
        m = machine.load(a.name, machine.parse_overrides(a.set))
        layout = platform.Layout.for_machine(m, a.nodes, a.gpus_per_node, a.ranks_per_node)
        print(platform.platform_xml(m, layout), end="")
    return 0


def _report_command(a: argparse.Namespace) -> int:
    from . import report

    formats = report.parse_formats(a.format)
    results = report.load(a.run_dir)  # a bad run folder stops here, before anything is written
    out = writable_folder(a.out) if a.out else writable_folder(str(Path(a.run_dir) / "report"), "--out")
    rep = report.build(results, a.top, Path(a.run_dir), check_iterations(a.iterations))
    report.write(rep, out, formats)
    print(report.text(rep), end="")
    print(f"orrery: report in {out / 'report.md'}, its tables (CSV) and figures ({', '.join(formats)}) beside it")
    return 0


def _validate_command(a: argparse.Namespace) -> int:
    from .calibration import report, validate

    progress.configure(a.verbose)
    out = writable_folder(a.out)
    overrides = machine.parse_overrides(a.set)
    calibration = merge.read(a.calibration, a.machine) if a.calibration else None
    results = validate.validate(
        a.machine, Path(a.repo) if a.repo else None, overrides, sweep_set=a.sweeps, calibration=calibration
    )
    print(report.validation_report(results))
    for path in report.write_validation(results, a.machine, out):
        print(f"orrery: plot {path}")
    print(f"orrery: numbers in {out / 'validation.json'}")
    return 0


def _calibrate_command(a: argparse.Namespace) -> int:
    from .calibration import calibrate, fit

    progress.configure(a.verbose)
    repo = Path(a.repo) if a.repo else None
    out = writable_folder(a.out)
    if a.sweeps and a.input:
        raise InputError(
            "--sweeps", None, a.sweeps, "either --sweeps (a set of the shared measurements) or --input files"
        )
    layout = None
    if a.collective_layout:
        parts = a.collective_layout.lower().split("x")
        if len(parts) != 2 or not all(x.isdigit() and int(x) > 0 for x in parts):
            raise InputError(
                "--collective-layout",
                None,
                a.collective_layout,
                "NODESxGPUS, two positive whole numbers (e.g. 2x4: 8 ranks, 4 on each of 2 nodes)",
            )
        layout = (int(parts[0]), int(parts[1]))
    # the kernel table is read first: a bad one stops the command before the calibration's runs
    kernels = fit.fit_kernels(a.kernels) if a.kernels else None
    cal, pairs = calibrate.calibrate(a.machine, repo, [Path(f) for f in a.input], a.p2p_path, a.sweeps, layout)
    print(calibrate.write(out, a.machine, cal, pairs, repo, kernels))
    print(f"orrery: calibration in {out / 'calibration.json'}; closed-loop plots in {out / 'closed-loop'}")
    return 0


def _fit_command(a: argparse.Namespace) -> int:
    from .calibration import appfit

    progress.configure(a.verbose)
    writable_folder(a.out)
    if a.costs_out:
        _writable_file(a.costs_out, "--costs-out")
    problem = appfit.load(a.spec)
    if a.costs_out and problem.spec.costs is None:
        raise InputError("--costs-out", None, a.costs_out, f"a spec with a cost file ({a.spec} has no costs)")
    result = appfit.fit(problem)
    written = appfit.write(problem, result, Path(a.out))
    costs = appfit.fitted_costs(problem, result)
    if a.costs_out and costs is not None:
        Path(a.costs_out).write_text(costs)
    print(appfit.report(result))
    print(f"orrery: fit in {', '.join(map(str, written))}")
    return 0


def _sweep_command(a: argparse.Namespace) -> int:
    from . import sweep
    from .sweep import execute

    execute.configure_logging(a.verbose)
    out = writable_folder(a.out)
    if a.workers is not None and a.workers < 1:
        raise InputError("--workers", None, a.workers, "a number of points to run at once, 1 or more")
    if a.workers is not None and a.scheduler:
        raise InputError(
            "--workers", None, a.workers, "--workers or --scheduler: a Dask cluster has workers of its own"
        )
    if not a.dry_run:
        sweep.clear(out)  # a refused sweep leaves no earlier table looking current
    spec = sweep.load(a.spec)
    if a.dry_run:
        listing = sweep.plan(spec, out)
        states = [state for _, state in listing]
        print(
            f"orrery: {len(listing)} points in {a.spec}: {states.count('run')} to run, "
            f"{states.count('finished earlier')} finished earlier in {out}, {states.count('bad input')} with bad input"
        )
        for p, state in listing:
            what = " ".join(f"{k}={v}" for k, v in p.point.parameters.items())
            print(f"{p.point.id}  {state:16}  {what}")
            print(
                f"{'':{len(p.point.id)}}  {'':16}  "
                + (f"args: {' '.join(p.args)}" if p.args is not None else p.error or "")
            )
        return 0
    try:
        result = sweep.run(
            spec,
            out,
            scheduler=a.scheduler,
            workers=a.workers,
            force=a.force,
            retry_failed=a.retry_failed,
            plots=not a.no_plots,
        )
    except KeyboardInterrupt as e:
        print(f"orrery: sweep interrupted; run the same command again to resume from {out}", file=sys.stderr)
        return interrupts.exit_status(e)
    outcomes = result.outcomes
    failed = [(point, o) for point, o in zip(spec.points, outcomes) if o.status != "completed"]
    earlier = sum(not o.ran and o.status != execute.BAD_INPUT for o in outcomes)
    print(
        f"orrery: sweep of {len(outcomes)} points: {len(outcomes) - len(failed)} completed, {len(failed)} failed "
        f"({earlier} finished earlier, not rerun)"
    )
    print(
        f"orrery: table in {out / 'sweep.csv'} and {out / 'sweep.parquet'}"
        + (f", plots in {out / 'plots'}" if any(f.parent.name == "plots" for f in result.files) else "")
    )
    sys.stdout.flush()
    for point, o in failed:
        print(f"orrery: point {execute.label(point)}: {o.status}: {o.error}", file=sys.stderr)
    return 0 if not failed else 1


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log each step on stderr (default: warnings only; a progress bar when stderr is a terminal)",
    )


class _UsageError(Exception):
    """A command line argparse refuses."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line (usage is in --help) raised for main() to report."""

    def error(self, message: str):
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):
        """The command line's options; one that no parser knows is refused by its command's
        parser (`orrery run: unrecognized arguments: -m (see orrery run --help)`)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command: argparse.ArgumentParser = self
            while sub := next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)), None):
                command = sub.choices[getattr(parsed, sub.dest)]  # `orrery machine show`'s parser
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def _out_of_run(argv: list[str]) -> Path | None:
    """The --out folder of an `orrery run` command line argparse refused, if it can be told."""
    p = _Parser(add_help=False)
    p.add_argument("--out", default="orrery-out")
    try:
        return Path(p.parse_known_args(argv)[0].out)
    except _UsageError:
        return None


def _toolchain_command(a: argparse.Namespace) -> int:
    # the path alone: `cmake -DCMAKE_TOOLCHAIN_FILE=$(orrery toolchain cmake)`,
    # `PATH=$(orrery toolchain path):$PATH make`
    if a.build_system == "cmake":
        print(_paths.cmake_toolchain())
        return 0
    folder = _paths.compiler_dir()
    if not all(os.access(c, os.X_OK) for c in folder.iterdir()):
        raise OrreryError(f"the compilers in {folder} are not executable: reinstall orrery (pip install .)")
    missing = [f"orrery-{w}" for w in build.WRAPPERS if shutil.which(f"orrery-{w}") is None]
    if missing:  # the folder's scripts run the wrappers from PATH
        raise OrreryError(
            f"{', '.join(missing)} not on PATH, which the compilers in {folder} run: put the folder holding "
            "them (where pip installed orrery) on PATH"
        )
    print(folder)
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="orrery", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"orrery {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a program built with Orrery's wrappers on a simulated machine")
    r.add_argument("--machine", default="h100-ib200", help="built-in machine name or .toml file")
    r.add_argument("--nodes", type=int, default=1)
    r.add_argument("--gpus-per-node", type=int)
    r.add_argument("--ranks-per-node", type=int)
    r.add_argument("--mode", default="skeleton", choices=["skeleton", "twin"])
    r.add_argument("--costs", help="kernel cost file (.toml or .json)")
    r.add_argument("--calibration", help="calibration file written by `orrery calibrate` for this machine")
    r.add_argument("--out", default="orrery-out", help="folder for results.json, the platform and the run description")
    r.add_argument("--strict", action="store_true", help="a kernel without a cost is an error")
    r.add_argument(
        "--d2h-fill",
        default=run_description.default("d2h_fill"),
        choices=FILL_POLICIES,
        help="what device-to-host copies write into host memory (default: %(default)s)",
    )
    r.add_argument(
        "--gpu-visibility",
        default=run_description.default("gpu_visibility"),
        choices=GPU_VISIBILITY,
        help="node: a rank sees all GPUs of its node (device 0 first); "
        "bound: only its own, as with CUDA_VISIBLE_DEVICES per rank",
    )
    r.add_argument(
        "--managed",
        default=run_description.default("managed"),
        choices=MANAGED_POLICIES,
        help="managed memory (cudaMallocManaged): refuse stops the run at it; resident takes it as memory "
        "that stays on its device, its migrations not simulated (default: %(default)s)",
    )
    r.add_argument(
        "--sim-time-limit",
        metavar="TIME",
        help="stop the run once its simulated time passes TIME (e.g. 500ms, 2s): status sim_time_limit, exit 6",
    )
    r.add_argument(
        "--wall-time-limit",
        metavar="TIME",
        help="stop the run once it has run TIME of wall-clock time (e.g. 90s, 30min, 2h): status "
        "wall_time_limit, exit 124",
    )
    r.add_argument("--no-fold-pinned", action="store_true", help="give pinned host buffers real memory")
    r.add_argument(
        "--trace", action="store_true", help="also write a timeline trace, DIR/trace.json, for ui.perfetto.dev"
    )
    r.add_argument("--trace-ranks", metavar="LIST", help="trace only these ranks, e.g. 0-3,8 (implies --trace)")
    r.add_argument(
        "--trace-window",
        metavar="BEGIN:END",
        help="trace only events overlapping this window of simulated time, e.g. 1ms:2ms; "
        "either end may be empty (implies --trace)",
    )
    r.add_argument(
        "--trace-links",
        metavar="N",
        help=f"give the N busiest links a counter track (default {DEFAULT_LINKS}; implies --trace)",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a machine parameter, e.g. pcie.bandwidth=64GB/s",
    )
    r.add_argument(
        "--iterations",
        type=int,
        metavar="N",
        help="the program's iterations: results.json and the summary also give its terms per iteration",
    )
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- ./program args...")
    r.set_defaults(func=_run_command)

    mc = sub.add_parser("machine", help="built-in machine descriptions")
    msub = mc.add_subparsers(dest="machine_cmd", required=True)
    msub.add_parser("list", help="the built-in machines")
    show = msub.add_parser("show", help="every parameter of a machine, in SI units, with its source")
    show.add_argument("name", help="built-in machine name or .toml file")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    val = msub.add_parser("validate", help="check a machine description file")
    val.add_argument("file")
    exp = msub.add_parser("export", help="the SimGrid platform of a machine")
    exp.add_argument("name", help="built-in machine name or .toml file")
    exp.add_argument("--format", choices=["xml"], default="xml")
    exp.add_argument("--nodes", type=int, default=1)
    exp.add_argument("--gpus-per-node", type=int)
    exp.add_argument("--ranks-per-node", type=int)
    exp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    mc.set_defaults(func=_machine_command)

    c = sub.add_parser("calibrate", help="fit a machine on measured sweeps and check the fit (closed loop)")
    c.add_argument("--machine", default="h100-ib200")
    c.add_argument("--out", default="orrery-calibration", help="folder for calibration.json and the closed loop")
    c.add_argument(
        "--repo",
        help="an Orrery checkout whose calibration/data/measured and calibration/bench to use "
        "(default: those installed with the package)",
    )
    c.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="FILE",
        help="measured sweeps to fit (measurement CSV, OSU, bandwidthTest, nccl-tests, BabelStream); "
        "default: the shared measurements known for the machine",
    )
    c.add_argument(
        "--kernels",
        metavar="TABLE",
        help="kernel timing table (kernel,grid_x..block_z,time,unit): also write DIR/costs.toml",
    )
    c.add_argument(
        "--sweeps",
        metavar="SET",
        help="another set of the machine's shared sweeps, one system and MPI stack, "
        "instead of its default one (" + SWEEP_SETS + ")",
    )
    c.add_argument(
        "--p2p-path",
        choices=["intra-node", "inter-node"],
        help="where the two ranks of raw OSU output ran (the output does not say)",
    )
    c.add_argument(
        "--collective-layout",
        metavar="NODESxGPUS",
        help="how many nodes and ranks (GPUs) per node ran raw OSU collective output, e.g. 2x4 "
        "(the output does not say; the harness's CSV does)",
    )
    _verbose(c)
    c.set_defaults(func=_calibrate_command)

    f = sub.add_parser(
        "fit",
        help="fit a program's cost and machine parameters to its measured run times, simulator in the loop",
    )
    f.add_argument("spec", help="fit spec (TOML): program, machine, runs with measured figures, parameters")
    f.add_argument(
        "--out",
        default="orrery-fit",
        help="folder for fit.json, the fitted costs.toml and, with machine parameters, calibration.json",
    )
    f.add_argument("--costs-out", metavar="FILE", help="also write the fitted cost file here")
    _verbose(f)
    f.set_defaults(func=_fit_command)

    v = sub.add_parser("validate", help="microbenchmarks on a built-in machine against measured sweeps")
    v.add_argument("--machine", default="h100-ib200")
    v.add_argument("--out", default="orrery-validate", help="folder for validation.json and the plots")
    v.add_argument("--sweeps", metavar="SET", help="another set of the machine's shared sweeps (" + SWEEP_SETS + ")")
    v.add_argument(
        "--repo",
        help="an Orrery checkout whose calibration/data/measured and calibration/bench to use "
        "(default: those installed with the package)",
    )
    v.add_argument("--calibration", help="a calibration file for this machine, written by `orrery calibrate`")
    v.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a machine parameter, e.g. pcie.bandwidth=64GB/s",
    )
    _verbose(v)
    v.set_defaults(func=_validate_command)

    sw = sub.add_parser(
        "sweep", help="run a program over a grid of layouts, arguments and machines: a table and scaling plots"
    )
    sw.add_argument(
        "spec", help="sweep spec (TOML): program, args, machine, and [grid] and/or [[points]] (docs/sweeps.md)"
    )
    sw.add_argument("--out", default="orrery-sweep", help="folder for sweep.csv, sweep.parquet, plots/ and points/")
    sw.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the points on the Dask cluster of this scheduler (tcp://host:port) instead of locally",
    )
    sw.add_argument("--workers", type=int, metavar="N", help="points run at once locally (default: the CPUs)")
    sw.add_argument("--dry-run", action="store_true", help="list the points and what would be run; run nothing")
    sw.add_argument("--force", action="store_true", help="rerun every point, even those finished earlier")
    sw.add_argument(
        "--retry-failed", action="store_true", help="rerun the points that finished earlier without completing"
    )
    sw.add_argument("--no-plots", action="store_true", help="write the table only")
    sw.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log each point (-vv: also those not rerun), even off a terminal",
    )
    sw.set_defaults(func=_sweep_command)
    rp = sub.add_parser(
        "report", help="tables and figures of a run: where its time went, slowest ranks, kernels, links"
    )
    rp.add_argument("run_dir", metavar="RUN_DIR", help="a run's folder (orrery run --out)")
    rp.add_argument(
        "--out", metavar="DIR", help="folder for report.md, its CSV tables and figures (default: RUN_DIR/report)"
    )
    rp.add_argument(
        "--top",
        type=int,
        default=REPORT_TOP,
        metavar="N",
        help="slowest ranks, kernels and links shown (default: %(default)s; the CSV files hold all)",
    )
    rp.add_argument(
        "--format",
        default=",".join(REPORT_FORMATS),
        metavar="png,svg",
        help="figure formats, comma-separated (default: %(default)s)",
    )
    rp.add_argument(
        "--iterations",
        type=int,
        metavar="N",
        help="the program's iterations: the terms per iteration (default: the run's --iterations)",
    )
    rp.set_defaults(func=_report_command)

    tc = sub.add_parser("toolchain", help="the path of a build system's settings for Orrery's wrappers")
    tc.add_argument(
        "build_system",
        choices=["cmake", "path"],
        help=(
            "cmake: the toolchain file (-DCMAKE_TOOLCHAIN_FILE=...); path: a folder of the wrappers under the "
            "compilers' own names (nvcc, mpicc, mpicxx, mpif90, ...), to put first on PATH for a build that runs "
            "them by name (PATH=$(orrery toolchain path):$PATH make)"
        ),
    )
    tc.set_defaults(func=_toolchain_command)

    for name in build.WRAPPERS:
        w = sub.add_parser(name, help=f"{name} for Orrery (use in a Makefile)", add_help=False)
        w.add_argument("args", nargs=argparse.REMAINDER)
        w.set_defaults(func=lambda a, n=name: build.WRAPPERS[n](a.args))
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `orrery machine show X | head` ends quietly
    # Compiler wrappers take the compiler's own options verbatim.
    if argv and argv[0] in build.WRAPPERS:
        return build.wrapper_main(argv[0], argv[1:])
    try:
        args = parser().parse_args(argv)
    except _UsageError as e:
        out = _out_of_run(argv[1:]) if argv[:1] == ["run"] else None
        if out is not None:
            launch.clear_outputs(out)
        print(f"orrery: error: {e}", file=sys.stderr)
        return 2
    try:
        with interrupts.raised():
            return args.func(args)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP: what was stopped, no traceback
        sys.stdout.flush()
        what = f" before the run ended; {args.out} holds nothing of it" if args.command == "run" else ""
        print(f"orrery: stopped by {signal.Signals(interrupts.signal_of(e)).name}{what}", file=sys.stderr)
        return interrupts.exit_status(e)
    except InputError as e:
        print(f"orrery: error: {e}", file=sys.stderr)
        return 2
    except OrreryError as e:
        print(f"orrery: error: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
