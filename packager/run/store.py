"""The files of results kept in a dataset's output folder (`packager.storage.OutputPaths`):
each task's result (`write_result`: an infra_error never replaces a verdict), a rerun's cache
check (`cached_result`), and the report made from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packager.checks.quality import read_quality
from packager.images import build
from packager.models.spec import TaskResult
from packager.release.report import QualityRow, make_html, make_markdown, quality_markdown
from packager.render.harbor_dataset import task_digest
from packager.render.write import write_json, write_text
from packager.stages.build import Rendered, image_tags
from packager.storage import REPORT_SUFFIXES, OutputPaths, human_bytes

if TYPE_CHECKING:
    from packager.images.build import DockerClient
    from packager.models.spec import TaskResult, TaskSpec


def write_result(paths: OutputPaths, result: TaskResult) -> Path:
    """results/<task>.json, atomically; returns the path written.

    An `infra_error` (the run did not complete) never replaces an earlier verdict: when
    results/<task>.json holds a result of another status it stays untouched, and the error goes
    to results/<task>.error.json. Any other result replaces results/<task>.json and removes a
    stale error file.
    """
    target = paths.result_file(result.task)
    if result.status == "infra_error" and target.is_file():
        try:
            previous = TaskResult.model_validate_json(target.read_text())
        except ValueError:
            previous = None
        if previous is not None and previous.status != "infra_error":
            target = paths.error_file(result.task)
    elif result.status != "infra_error":
        paths.error_file(result.task).unlink(missing_ok=True)
    write_json(target, result.model_dump(mode="json"))
    return target


def cached_result(
    paths: OutputPaths,
    spec: TaskSpec,
    *,
    oracle_runs: int,
    engine: str = "local",
    client: DockerClient | None = None,
    rendered: Rendered | None = None,
    nop_runs: int = 1,
    perturb: tuple[str, ...] = (),
) -> TaskResult | None:
    """The task's saved result when it is `verified` for the very images this spec renders to
    and the very task folder rendered now (its digest: an edited instruction or task.toml is
    verified again, so a release never ships bytes no run saw), by the same engine, with at
    least `oracle_runs` oracle runs, `nop_runs` nop runs and a perturbed run for each of
    `perturb`: a rerun skips such a task.

    With a client, the images must also still be the ones verified (same ids) and the agent
    image's base images unchanged since it was built. `rendered`: the tags and digest this run's
    render decided (else the spec is rendered and the folder read again).
    """
    target = paths.result_file(spec.provenance.slug)
    if not target.is_file():
        return None
    try:
        previous = TaskResult.model_validate_json(target.read_text())
    except ValueError:
        return None
    tags = rendered.tags if rendered is not None else image_tags(spec)
    same = previous.images == tags.images
    if not (
        previous.status == "verified"
        and same
        and previous.engine == engine
        and len(previous.oracle) >= oracle_runs
        and 1 + len(previous.more_nops) >= nop_runs
        and set(perturb) <= {r.perturbation for r in previous.perturbed}
    ):
        return None
    folder = paths.task_dir(spec.provenance.slug)
    digest = rendered.digest if rendered is not None else task_digest(folder)
    if previous.task_digest is None or previous.task_digest != digest:
        return None
    if client is not None and previous.image_ids:
        try:
            current = {k: client.images.get(v).id for k, v in previous.images.items()}
            dockerfile = paths.task_dir(spec.provenance.slug) / "environment" / "Dockerfile"
            stale = build.stale_bases(
                client, tags.agent, build.base_ids(client, dockerfile.read_text())
            )
        except Exception:  # noqa: BLE001 - an image is gone: verify again
            return None
        if current != previous.image_ids or stale:
            return None
    return previous


def read_results(paths: OutputPaths) -> list[TaskResult]:
    """Every results/<task>.json of a dataset, sorted by task."""
    folder = paths.results_dir
    if not folder.is_dir():
        return []
    return [
        TaskResult.model_validate_json(p.read_text())
        for p in sorted(folder.glob("*.json"))
        if not p.name.endswith(REPORT_SUFFIXES)
    ]


def write_report(
    paths: OutputPaths, disk: dict[str, int] | None = None, *, config_digest: str | None = None
) -> Path:
    """report.md and report.html (self-contained: a status chart and seconds per stage per
    task) from every result of the dataset, with `disk`: the tool's Docker disk use, and the
    digest of the run's configuration (`RunConfig.digest`) when given.
    """
    results = read_results(paths)
    text = make_markdown(paths.dataset, results)
    quality: list[QualityRow] = []
    for result in results:
        found = read_quality(paths, result.task)
        if found is None:
            continue
        covered = f"{found.covered}/{found.total}" if found.covered is not None else "-"
        uncovered = "; ".join(h.where for h in found.hunks if h.covered is False)
        leaks = "; ".join(f"{leak.kind}: {leak.text[:60]}" for leak in found.leaks)
        quality.append((result.instance_id, covered, uncovered, leaks or "no"))
    text += quality_markdown(quality)
    if disk is not None:
        text += (
            f"\nDocker disk use of packager images: {disk['images']} images, "
            f"{human_bytes(disk['size_bytes'])} ({human_bytes(disk['unique_bytes'])} not shared).\n"
        )
        if "dataset_bytes" in disk:
            text += (
                f"\nThis dataset's images, every layer counted once: "
                f"{human_bytes(disk['dataset_bytes'])}; bytes only one task's images hold: median "
                f"{human_bytes(disk['task_unique_median'])}, largest "
                f"{human_bytes(disk['task_unique_max'])}.\n"
            )
        if "output_bytes" in disk:
            text += (
                f"\nThis output folder: {human_bytes(disk['output_bytes'])} (each file once; "
                "no task keeps its repository, the machine's snapshot cache does: "
                f"{human_bytes(disk['snapshot_cache_bytes'])}).\n"
            )
    if config_digest is not None:
        text += f"\nRun configuration: {config_digest}\n"
    write_text(paths.report_file, text)
    write_text(
        paths.report_file.with_suffix(".html"), make_html(paths.dataset, results, disk, quality)
    )
    return paths.report_file
