"""The one registry shape: every named choice loads, detection follows the schema table, and a
missing optional dependency names the extra that installs it."""

from __future__ import annotations

import pytest

from packager import registry
from packager.adapters import detect_schema, get_adapter
from packager.errors import InputError
from packager.registry import EngineName, Entry, ExecutorName, SchemaName


@pytest.mark.parametrize(
    ("kind", "table"),
    [
        (EngineName, registry.ENGINES),
        (ExecutorName, registry.EXECUTORS),
        (SchemaName, registry.SCHEMAS),
    ],
)
def test_every_member_has_an_entry_that_loads(kind, table):
    assert set(table) == set(kind)
    for member, entry in table.items():
        if entry.extra is not None:
            continue  # optional dependency (ray): its loading is tested with the extra below
        assert callable(registry.load(entry)), member


def test_parse_takes_values_only():
    assert registry.parse(EngineName, "harbor") is EngineName.HARBOR
    assert registry.parse(EngineName, "HARBOR") is None
    assert registry.parse(ExecutorName, "slurm") is None
    assert registry.parse(SchemaName, "ec-swe") is SchemaName.EC_SWE


def test_members_compare_as_their_strings():
    assert SchemaName.SWE_REBENCH == "swe-rebench"
    assert f"{EngineName.LOCAL}" == "local"
    assert list(registry.EXECUTORS) == ["local", "ray"]


def test_detection_follows_the_table_order():
    # A row carrying every schema's markers is detected as the first schema of the table.
    row = {column: "x" for entry in registry.SCHEMAS.values() for column in entry.markers}
    assert detect_schema(row) is next(iter(registry.SCHEMAS))
    # Each schema's own markers alone pick that schema.
    for name, entry in registry.SCHEMAS.items():
        assert detect_schema(dict.fromkeys(entry.markers, "x")) == name
        assert get_adapter(name) is registry.load(entry)


def test_missing_optional_dependency_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "needs_absent.py").write_text("import absent_dependency_for_test\nX = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = Entry("needs_absent:X", extra="packager[absent]")
    with pytest.raises(InputError, match=r"pip install 'packager\[absent\]'"):
        registry.load(entry)
    # Without an extra the import error is not dressed up: it is a bug, not a missing install.
    with pytest.raises(ModuleNotFoundError):
        registry.load(Entry("needs_absent:X"))


def test_a_missing_module_itself_is_not_blamed_on_the_extra():
    with pytest.raises(ModuleNotFoundError):
        registry.load(Entry("packager.no_such_module:X", extra="packager[ray]"))


def test_config_fields_hold_the_registrys_members() -> None:
    """`--engine`, `--schema` and `--judge` are typed with the registry's enums: the config holds
    members (not strings in the same shape), and an unknown name is refused as before."""
    from packager.config import ExecutorConfig, SelectionConfig
    from packager.errors import DatasetError, UnknownEngineError
    from packager.settings import VerifyConfig

    assert VerifyConfig(engine="harbor").engine is EngineName.HARBOR  # type: ignore[arg-type]
    assert VerifyConfig().engine is EngineName.LOCAL
    # Executors are the registry's table (a new one is its module plus one entry): a name it lists.
    assert ExecutorConfig(name="ray").name == ExecutorName.RAY
    assert ExecutorConfig().name == ExecutorName.LOCAL
    assert SelectionConfig(schema_name="pdl").schema_name is SchemaName.PDL  # type: ignore[arg-type]
    with pytest.raises(UnknownEngineError, match="unknown engine 'ray'"):
        VerifyConfig(engine="ray")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown executor 'k8s'"):
        ExecutorConfig(name="k8s")
    with pytest.raises(DatasetError, match="unknown schema 'nope'"):
        SelectionConfig(schema_name="nope")  # type: ignore[arg-type]


def test_an_unknown_judge_mode_is_refused_before_anything_is_rendered(tmp_path) -> None:
    """`--judge` is a registry enum: a mode that does not exist is bad input (exit 2) at once,
    not an error after the tasks were rendered."""
    from packager.registry import JudgeMode
    from packager.settings import VerifyConfig
    from tests.conftest import run_cli

    assert VerifyConfig().judge is JudgeMode.ENV
    assert VerifyConfig(judge="replay").judge is JudgeMode.REPLAY  # type: ignore[arg-type]
    proc = run_cli("package", "samples__textkit-1", "--out", str(tmp_path), "--judge", "live")
    assert proc.returncode == 2, proc.stderr
    assert "unknown --judge 'live' (available: env, replay)" in proc.stderr + proc.stdout
    assert not (tmp_path / "samples").exists()
