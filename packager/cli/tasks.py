"""The commands that make tasks: list, render, build, package, verify, audit, quality. Each
parses its options into a `RunConfig`, calls one function of `packager.run.driver` and prints.
"""

from __future__ import annotations

import json
from typing import NoReturn

import typer

from packager.cli import options as o
from packager.cli import show
from packager.cli.options import with_options
from packager.config import RunConfig


@with_options(o.ListFlags, config=False)
def list_command(rows: o.ListFlags) -> None:
    """List the rows of a dataset: instance id, schema, language, and where the row's
    environment comes from (a recipe, its install_config, the SWE-bench harness's spec, a
    published image) with the Python it asks for and the one it gets.
    """
    for line in o.pipeline().list_rows(
        rows.dataset, rows.split, rows.schema_name, rows.recipes, rows.base_image or []
    ):
        typer.echo("\t".join(line))


@with_options(o.RowOptions)
def render_command(config: RunConfig) -> None:
    """Write Harbor task folders, HUD environment sources and oracle/nop manifests.

    Every selected row is validated before anything is written; a bad row exits 2 and
    leaves earlier output untouched.
    """
    o.pipeline().render(config, lambda task, where: typer.echo(f"rendered {task} -> {where}"))


def _package(config: RunConfig, *, verify: bool) -> NoReturn:
    outcome = o.pipeline().package(config, show.ConsoleDisplay(), verify=verify)
    show.summary(outcome, config.quality.strict)
    raise typer.Exit(outcome.exit_code(config.quality.strict))


@with_options(o.RowOptions, o.WorkersFlags, o.BuildFlags)
def build_command(config: RunConfig) -> None:
    """Render, then build each task's agent image and grader image (cached by content hash)."""
    _package(config, verify=False)


@with_options(*o.BUILD_AND_VERIFY, o.QualityOn, o.QualityFlags)
def package_command(config: RunConfig) -> None:
    """Render, build and verify: exit 0 only when every task is verified (oracle 1.0, nop < 1.0).

    Tasks already verified for the same images are reported as cached (resume); --force reruns.
    """
    _package(config, verify=True)


@with_options(*o.BUILD_AND_VERIFY, o.PatchFlag)
def verify_command(config: RunConfig) -> None:
    """Verify tasks (gold and nop runs, perturbed gold runs: --runs, --perturb), or grade one
    candidate patch with --patch.
    """
    if config.verify.patch is None:
        _package(config, verify=True)
    run = o.pipeline().grade_candidate(config)
    typer.echo(json.dumps(run, sort_keys=True))
    raise typer.Exit(0 if run["reward"] is not None else 1)


@with_options(o.RowOptions)
def audit_command(config: RunConfig) -> None:
    """Inspect every layer and git object of built agent images for leaks (exit 1 on a leak).

    Looks for hidden tests, grader files, test- and gold-patch content, commits after the base
    commit, tags, reflogs and remotes. `package` runs this before verifying.
    """
    leaks = 0
    for spec, report, where in o.pipeline().audit(config):
        typer.echo(f"{spec.task_id}: {report.status} ({report.stats['seconds']} s) -> {where}")
        for f in report.findings:
            typer.echo(f"  {f.kind} {f.path} {f.object_id or ''} {f.detail}")
        leaks += 0 if report.clean else 1
    raise typer.Exit(1 if leaks else 0)


@with_options(o.RowOptions, o.QualityFlags, o.RerunFlags)
def quality_command(config: RunConfig) -> None:
    """Check verified tasks beyond gold and nop (docs/quality.md): grade the gold patch with
    each hunk left out (a hunk whose removal still scores 1.0 is not needed by the tests), and
    look for an instruction that quotes the fix or names hidden tests. Results go to
    results/<task>.quality.json and the reports; a flagged task fails only with
    --strict-quality. Unchanged tasks reuse their saved checks (--force runs them again).
    """
    done = o.pipeline().check_quality(config, show.ConsoleDisplay())
    typer.echo(
        f"quality: {done.checked} checked, {len(done.flagged)} flagged, "
        f"{len(done.unverified)} not verified; report: {done.report}"
    )
    raise typer.Exit(1 if done.unverified or (config.quality.strict and done.flagged) else 0)
