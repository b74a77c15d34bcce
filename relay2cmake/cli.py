"""Command line: thin. Parses flags, calls a pipeline, maps our errors to exit code 1."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from relay2cmake import __version__
from relay2cmake.errors import Relay2CMakeError, UserError
from relay2cmake.naming import terminal_text

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Compile a neural-network model into a standalone C/C++ CMake package.",
    pretty_exceptions_enable=False,
)

_state = {"debug": False, "quiet": False}
QUIET_HELP = "Print nothing but errors."
DEBUG_HELP = "Show tracebacks for errors, and what TVM printed while working."


def _echo(text: str, err: bool = False) -> None:
    """Every line the tool prints: text from a model (names, file names) never reaches the
    terminal as escape sequences."""
    typer.echo(terminal_text(text), err=err)


def _version_callback(value: bool) -> None:
    if value:
        _echo(f"relay2cmake {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    _state["debug"] = debug
    _state["quiet"] = quiet


def _flags(quiet: bool, debug: bool) -> None:
    """The flags given after the command (``gen ... -q``) count as much as before it."""
    _state["quiet"] = bool(_state["quiet"]) or quiet
    _state["debug"] = bool(_state["debug"]) or debug


def _progress():
    from relay2cmake.progress import Progress

    return Progress(quiet=bool(_state["quiet"]), debug=bool(_state["debug"]))


def parse_input_shapes(values: list[str]) -> dict[str, tuple[int | tuple[int, int], ...]]:
    """``NAME=D0,D1,...``; a dimension is a number or a range ``LO..HI`` (chosen at run time)."""
    shapes: dict[str, tuple[int | tuple[int, int], ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition("=")
        if not sep or not name:
            raise UserError(
                f"--input-shape {value!r} is not NAME=D0,D1,... (for example --input-shape x=1,3,224,224, "
                "or x=1..8,3,224,224 for a batch chosen at run time)."
            )
        shape = tuple(_parse_dim(value, d) for d in dims.split(",")) if dims.strip() else ()
        if name in shapes:
            raise UserError(f"--input-shape gives {name!r} twice.")
        shapes[name] = shape
    return shapes


def _parse_dim(flag: str, text: str) -> int | tuple[int, int]:
    low, dots, high = text.strip().partition("..")
    try:
        bounds = (int(low), int(high)) if dots else (int(low),)
    except ValueError:
        raise UserError(
            f"--input-shape {flag!r}: dimensions must be whole numbers or ranges LO..HI, separated by commas."
        ) from None
    if any(b <= 0 for b in bounds):
        raise UserError(f"--input-shape {flag!r}: dimensions must be positive.")
    if len(bounds) == 1:
        return bounds[0]
    if bounds[0] > bounds[1]:
        raise UserError(f"--input-shape {flag!r}: the range {text.strip()} is empty (LO must not exceed HI).")
    return bounds if bounds[0] < bounds[1] else bounds[0]


def parse_constant_inputs(values: list[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for value in values:
        name, sep, data = value.partition("=")
        if not sep or not name:
            raise UserError(f"--constant-input {value!r} is not NAME=values.npy or NAME=1,2,3.")
        if name in result:
            raise UserError(f"--constant-input gives {name!r} twice.")
        result[name] = data
    return result


def _terminate(_signum, _frame) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C (staging folders are removed)


def _run(action) -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    try:
        action()
    except Relay2CMakeError as exc:
        if _state["debug"]:
            raise
        _echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        _echo("interrupted", err=True)
        raise typer.Exit(130) from None


NO_WINOGRAD_HELP = (
    "Keep 3x3 convolutions direct: smaller weights (Winograd's transformed filters are 16/9 of "
    "theirs), about half the speed on those layers."
)


@app.command()
def gen(
    model: Path = typer.Argument(
        ..., help="Model file: ONNX (.onnx), a PyTorch exported program (.pt2) or a TVMScript module (.py)."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder to write the package to (must be empty or absent)."
    ),
    name: str | None = typer.Option(None, "--name", help="CMake package name (default: from the file name)."),
    version: str = typer.Option(
        "1.0.0",
        "--version",
        help="Package version X.Y.Z, optionally with -pre-release and +build (semantic versioning).",
    ),
    input_shape: list[str] = typer.Option(
        [],
        "--input-shape",
        help="Fix an input's shape, NAME=D0,D1,...; a dimension LO..HI is chosen at run time (repeatable).",
    ),
    constant_input: list[str] = typer.Option(
        [], "--constant-input", help="Freeze an ONNX input: NAME=values.npy or NAME=1,2,3 (repeatable)."
    ),
    target: list[str] = typer.Option(
        [],
        "--target",
        help="Kernel set besides portable C: x86_64[:CPU], aarch64[:CPU] (repeatable; "
        "default: the host's architecture; 'c' alone: C kernels only).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it is not empty."),
    tuning_db: Path | None = typer.Option(
        None, "--tuning-db", help="Schedules from `relay2cmake tune` (optional; defaults need none)."
    ),
    no_winograd: bool = typer.Option(False, "--no-winograd", help=NO_WINOGRAD_HELP),
    no_self_check: bool = typer.Option(
        False,
        "--no-self-check",
        help="Do not build the package and run its golden test before writing it (faster, unchecked).",
    ),
    allow_unverified: bool = typer.Option(
        False,
        "--allow-unverified",
        help="Write the package even when no second reference confirms the golden outputs, or when "
        "the package fails its own golden test (both are reported in metadata.json).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
) -> None:
    """Generate a CMake package from MODEL.

    Before writing, gen builds the package with CMake and runs its golden test against
    reference outputs that two independent paths agree on (e.g. ONNX Runtime and ONNX's
    reference evaluator); optimisations that fail are declined, with a warning."""

    _flags(quiet, debug)

    def action() -> None:
        # Mistakes in files and flags answer before TVM loads (seconds, with PyTorch installed).
        from relay2cmake.frontends import check_model_path
        from relay2cmake.naming import check_package_name, check_version

        check_model_path(model)
        check_version(version)
        if name is not None:
            check_package_name(name)
        shapes, constants = parse_input_shapes(input_shape), parse_constant_inputs(constant_input)

        from relay2cmake.commands.generate import GenerateOptions, generate

        report = generate(
            GenerateOptions(
                model=model,
                out=out,
                name=name,
                version=version,
                input_shapes=shapes,
                targets=tuple(target),
                force=force,
                constant_inputs=constants,
                tuning_db=tuning_db,
                winograd=not no_winograd,
                self_check=not no_self_check,
                allow_unverified=allow_unverified,
            ),
            progress=_progress(),
        )
        plan = report.plan
        if _state["quiet"]:
            return
        for warning in report.warnings:
            _echo(f"warning: {warning}", err=True)
        _echo(
            f"Wrote {report.identity.name} ({report.files} files) to {out}: {len(plan.steps)} kernel calls, "
            f"arena {plan.arena_bytes} B (TVM's static plan: {plan.tvm_storage_bytes} B of intermediates, "
            f"without inputs and kernel scratch), weights {plan.weight_bytes} B."
        )

    _run(action)


@app.command()
def tune(
    model: Path = typer.Argument(..., help="Model file (.onnx, .pt2 or .py), as for gen."),
    out: Path = typer.Option(..., "--out", "-o", help="Tuning database to write (JSON)."),
    trials: int = typer.Option(64, "--trials", help="Schedules MetaSchedule measures per kernel."),
    target: list[str] = typer.Option(
        [], "--target", help="Kernel set to tune: x86_64[:CPU] or aarch64[:CPU] (default: the host's)."
    ),
    input_shape: list[str] = typer.Option([], "--input-shape", help="As for gen."),
    constant_input: list[str] = typer.Option([], "--constant-input", help="As for gen."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists."),
    no_winograd: bool = typer.Option(False, "--no-winograd", help="As for gen (tune what gen will build)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
) -> None:
    """Search faster schedules for MODEL's kernels with MetaSchedule (minutes; optional).

    A kernel keeps a tuned schedule only if it ran faster than the default one here;
    `gen --tuning-db OUT` uses them."""

    _flags(quiet, debug)

    def action() -> None:
        from relay2cmake.frontends import check_model_path

        check_model_path(model)  # before TVM loads
        shapes, constants = parse_input_shapes(input_shape), parse_constant_inputs(constant_input)
        if out.exists() and not force:
            raise UserError(f"{str(out)!r} exists; pass --force to replace it.")
        from relay2cmake.commands.tune import tune
        from relay2cmake.lower import tuning_db

        report = tune(
            model,
            shapes,
            constants,
            tuple(target),
            trials,
            _progress(),
            winograd=not no_winograd,
        )
        tuning_db.save(report.database, out)
        if _state["quiet"]:
            return
        for record in report.database.records:
            _echo(f"  {record.kernel}: {record.tuned_us:.1f} us tuned, {record.default_us:.1f} us default")
        _echo(
            f"Wrote {out}: {len(report.database.records)} of {report.kernels} kernels faster than their "
            f"default schedule ({report.database.target}), in {report.seconds:.0f} s."
        )

    _run(action)


@app.command()
def inspect(
    model: Path = typer.Argument(
        ..., help="Model file: ONNX (.onnx), a PyTorch exported program (.pt2) or a TVMScript module (.py)."
    ),
    input_shape: list[str] = typer.Option([], "--input-shape", help="Fix an input's shape, NAME=D0,D1,..."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
) -> None:
    """Describe MODEL: inputs, outputs, operators, parameters, memory, and what cannot be lowered."""
    _flags(False, debug)

    def action() -> None:
        import json

        from relay2cmake.frontends import check_model_path

        check_model_path(model)
        # A range is inspected at its largest value.
        shapes = {
            name: tuple(d[1] if isinstance(d, tuple) else d for d in dims)
            for name, dims in parse_input_shapes(input_shape).items()
        }
        from relay2cmake.commands.inspect import inspect_model, render_text

        report = inspect_model(model, shapes)
        _echo(json.dumps(report.as_dict(), indent=2) if as_json else render_text(report))

    _run(action)


@app.command()
def demo(
    out: Path = typer.Option(Path("relay2cmake-demo"), "--out", "-o", help="Working folder for the demo."),
    force: bool = typer.Option(False, "--force", help="Use OUT even if it holds something else."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
) -> None:
    """Generate, build, install and run a package from the bundled sample model."""
    _flags(quiet, debug)

    def action() -> None:
        from relay2cmake.commands.demo import run_demo

        seconds = run_demo(out, force, _progress())
        if _state["quiet"]:
            return
        timing = ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items())
        _echo(f"Demo done in {sum(seconds.values()):.1f}s ({timing}). Everything is in {out}/.")

    _run(action)


def main() -> None:
    try:
        app()
    except SystemExit:
        raise
    except Exception as exc:  # a bug of ours: say so plainly, keep the traceback for --debug
        if "--debug" in sys.argv:
            raise
        _echo(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for a traceback)", err=True)
        sys.exit(1)
