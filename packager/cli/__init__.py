"""Command-line interface: the only package that prints or picks exit codes.

Exit codes: 0 success (every task verified, for verify/package); 1 some task did not verify
or a run failed; 2 bad input (dataset, row, task id, option); 3 no Docker engine reachable.
"""

from __future__ import annotations

import sys

import typer

from packager.cli import release, tasks
from packager.errors import Interrupted, PackagerError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=(
        "Turn benchmark dataset rows into verified Harbor tasks and HUD environments.\n\n"
        "Without --dataset the embedded sample dataset is used. Typical use: "
        "`packager package samples__textkit-1` renders, builds and verifies one task."
    ),
    pretty_exceptions_enable=False,
)
for command in (
    *(tasks.list_command, tasks.render_command, tasks.build_command, tasks.package_command),
    *(tasks.verify_command, tasks.audit_command, tasks.quality_command),
    *(release.publish_command, release.clean_command, release.report_command),
):
    app.command(command.__name__.removesuffix("_command"))(command)
app.add_typer(release.release_app, name="release")


def main() -> None:
    """Entry point for the `packager` script."""
    try:
        app()
    except PackagerError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        typer.echo(f"{exc}; finished results are kept", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
