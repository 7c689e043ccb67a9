"""`RunConfig`: defaults written once, input checks as validators (exit 2), `--config FILE`
under the command line's flags, and the digest the report records."""

from __future__ import annotations

from pathlib import Path

import pytest

from packager.config import RunConfig
from packager.errors import InputError
from packager.run.store import write_report
from packager.storage import OutputPaths
from tests.conftest import run_cli

TASK = "samples__textkit-1"


def _load(tmp_path: Path, text: str | None, **flags: object) -> RunConfig:
    file = None
    if text is not None:
        file = tmp_path / "run.yaml"
        file.write_text(text)
    return RunConfig.load(file, {"selection": {"tasks": (TASK,)}, **flags})


def test_defaults_are_the_fields_own(tmp_path: Path) -> None:
    config = _load(tmp_path, None)
    assert (config.build.timeout, config.build.workers, config.out) == (1800.0, 1, Path("build"))
    assert (config.verify.engine, config.verify.environment, config.executor.name) == (
        "local",
        "docker",
        "local",
    )
    assert config.quality.max_ablations == 12


def test_a_flag_overrides_the_file_and_the_file_applies_without_it(tmp_path: Path) -> None:
    text = "build:\n  timeout: 60\n  workers: 3\nquality:\n  max_ablations: 4\n"
    config = _load(tmp_path, text, build={"timeout": 90.0})
    assert (config.build.timeout, config.build.workers, config.quality.max_ablations) == (
        90.0,
        3,
        4,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("build:\n  bogus: 1\n", "run.yaml: build.bogus: Extra inputs are not permitted"),
        ("nonsense: 1\n", "run.yaml: nonsense: Extra inputs are not permitted"),
        ("verify:\n  oracle_runs: 0\n", "run.yaml: verify.oracle_runs:"),
        (
            "selection:\n  prebuilt: sometimes\n",
            "run.yaml: selection.prebuilt: Input should be 'auto', 'always' or 'never'",
        ),
        ("executor:\n  name: slurm\n", "run.yaml: unknown executor 'slurm'"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_a_bad_file_names_itself_and_the_key(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, text)
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ({"verify": {"harbor_env": "modal"}}, "--harbor-env modal needs --engine harbor"),
        ({"executor": {"shared_repos": True}}, "--shared-repos needs --executor ray"),
        ({"executor": {"name": "ray"}, "quality": {"enabled": True}}, "--quality runs with"),
        ({"verify": {"patch": "x.patch", "engine": "harbor"}}, "--patch grades with the local"),
        ({"selection": {"tasks": (TASK,), "all_tasks": True}}, "give TASK ids or --all"),
        ({"selection": {}}, "name at least one TASK or pass --all"),
    ],
)
def test_input_checks_are_validators(tmp_path: Path, flags: dict[str, object], said: str) -> None:
    with pytest.raises(InputError) as caught:
        RunConfig.load(None, {"selection": {"tasks": (TASK,)}} | flags)
    assert said in str(caught.value)


def test_the_digest_follows_the_configuration(tmp_path: Path) -> None:
    first = _load(tmp_path, None)
    assert first.digest() == _load(tmp_path, None).digest() and len(first.digest()) == 16
    assert first.digest() != _load(tmp_path, None, build={"timeout": 5.0}).digest()
    paths = OutputPaths(tmp_path / "out", "ds")
    plain = write_report(paths).read_text()
    recorded = write_report(paths, config_digest=first.digest()).read_text()
    assert recorded == plain + f"\nRun configuration: {first.digest()}\n"


def test_cli_config_file_under_the_flags(tmp_path: Path) -> None:
    """The file's `out` applies without --out; --out overrides it; an unknown key exits 2."""
    file = tmp_path / "run.yaml"
    file.write_text(f"out: {tmp_path / 'from-file'}\nselection:\n  tasks: [{TASK}]\n")
    assert run_cli("render", "--config", str(file)).returncode == 0
    assert (tmp_path / "from-file" / "samples" / "tasks" / TASK).is_dir()
    given = run_cli("render", "--config", str(file), "--out", str(tmp_path / "flag"))
    assert given.returncode == 0, given.stderr
    assert (tmp_path / "flag" / "samples" / "tasks" / TASK).is_dir()
    file.write_text("selection:\n  tasks: [x]\n  colour: blue\n")
    bad = run_cli("render", "--config", str(file), "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2
    assert f"{file}: selection.colour: Extra inputs are not permitted" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_every_option_takes_its_help_and_default_from_a_config_field() -> None:
    import typer.main

    from packager.cli import app
    from packager.config import CleanConfig, PublishConfig

    models = [CleanConfig, PublishConfig, RunConfig]
    models += [RunConfig.section_of(n)[1] for n in ("tasks", "workers", "engine", "name", "strict")]
    described = {
        (name, info.description) for model in models for name, info in model.model_fields.items()
    }
    group = typer.main.get_command(app)
    checked = 0
    for command in group.commands.values():  # type: ignore[attr-defined]
        for param in command.params:
            if param.param_type_name == "option" and param.name not in ("config", "help"):
                assert param.help, (command.name, param.name)
                assert (param.name, param.help) in described, (command.name, param.name)
                checked += 1
    assert checked > 80


def test_publish_and_clean_options_are_checked_like_a_run() -> None:
    from packager.config import CleanConfig, PublishConfig

    with pytest.raises(InputError, match="--branch names a branch of --dataset-repo"):
        PublishConfig(registry="localhost:5000/ns", branch="release")
    with pytest.raises(InputError, match=r"unknown executor 'slurm' \(available: local, ray\)"):
        PublishConfig(registry="localhost:5000/ns", executor="slurm")
    assert PublishConfig(registry="localhost:5000/ns").version == "1.0"
    assert CleanConfig().keep_newest == 0
    done = run_cli("publish", "--all", "--registry", "localhost:5000/ns", "--branch", "b")
    assert done.returncode == 2 and "--branch names a branch of --dataset-repo" in done.stderr
