"""The commands that work on finished tasks: publish, clean, report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from packager.cli import show
from packager.cli.options import (
    CleanFlags,
    DatasetFlags,
    OutFlag,
    PublishFlags,
    TaskPick,
    pipeline,
    with_options,
)
from packager.config import CleanConfig, PublishConfig
from packager.errors import InputError
from packager.storage import human_bytes


@with_options(PublishFlags, TaskPick, DatasetFlags, OutFlag, config=False)
def publish_command(flags: PublishFlags, pick: TaskPick, data: DatasetFlags, out: OutFlag) -> None:
    """Push verified tasks' images to a registry, write a release copy of their task folders
    naming the images by digest (with dataset.toml and registry.json), and optionally commit it
    into a dataset repository. Publishing again with no change pushes nothing and commits
    nothing. An image this machine's engine lacks is taken from the registry when it serves
    that tag already (`--executor ray`).
    """
    if not pick.tasks and not pick.all_tasks:
        raise InputError("name TASK ids or pass --all")
    config = PublishConfig(**dataclasses.asdict(flags))
    report = pipeline().release(out.out, data.dataset, data.split, pick.tasks or [], config)
    for task in report.tasks:
        for image in task.images:
            state = "pushed" if image.pushed else "unchanged"
            typer.echo(f"{task.task}: {image.role} {image.reference} ({state})")
    for task_id, why in report.skipped.items():
        typer.echo(f"{task_id}: not published ({why})")
    typer.echo(
        f"published {len(report.tasks)} task(s): {report.pushed} image(s) pushed, "
        f"{report.unchanged} unchanged; release: {report.release_dir}"
    )
    if report.dataset_repo is not None:
        change = ", ".join(c[:12] for c in report.commits) or "no change, no commit"
        typer.echo(f"dataset repository {report.dataset_repo} ({report.branch}): {change}")
    raise typer.Exit(1 if pick.tasks and report.skipped else 0)


@with_options(CleanFlags, config=False)
def clean_command(flags: CleanFlags) -> None:
    """Remove this tool's containers, images and build cache from the Docker engine (found by
    the label packager.tool=packager; base images and other images are never touched).
    """
    report, after = pipeline().clean_engine(CleanConfig(**dataclasses.asdict(flags)), typer.echo)
    verb = "would remove" if flags.dry_run else "removed"
    typer.echo(
        f"{verb} {report.containers} container(s), {len(report.images)} image tag(s) "
        f"({human_bytes(report.reclaimed_bytes)}), {report.build_cache} dangling build layer(s); "
        f"kept {len(report.kept)}\npackager images on this engine: {after['images']}, "
        f"{human_bytes(after['size_bytes'])} ({human_bytes(after['unique_bytes'])} not shared)"
    )


@with_options(DatasetFlags, OutFlag, config=False)
def report_command(data: DatasetFlags, out: OutFlag) -> None:
    """Summarise the latest results of a dataset (terminal table, report.md and report.html)."""
    paths, results = pipeline().saved_results(out.out, data.dataset, data.split)
    if not results:
        typer.echo(f"no results under {paths.results_dir}", err=True)
        raise typer.Exit(1)
    show.print_table(results)
    typer.echo(f"report: {pipeline().write_report(paths)}")


release_app = typer.Typer(
    no_args_is_help=True,
    help="Compare releases that `publish` wrote (their release.json evidence).",
)


@release_app.command("diff")
def release_diff_command(
    old: Annotated[Path, typer.Argument(help="The older release: its folder or release.json.")],
    new: Annotated[Path, typer.Argument(help="The newer release: its folder or release.json.")],
) -> None:
    """List the tasks whose release evidence changed between two releases: added or removed,
    their content digest, images, verdict (status, rewards, run counts) or label findings.
    Exit 0 when none changed, 1 when some did (as `diff`), 2 when a release cannot be read.
    """
    changes = pipeline().release_diff(old, new)
    for change in changes:
        typer.echo(f"{change.task}: {change.what}: {change.detail}")
    typer.echo(f"{len(changes)} task(s) changed")
    raise typer.Exit(1 if changes else 0)
