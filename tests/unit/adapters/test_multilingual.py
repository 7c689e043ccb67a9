"""SWE-bench Multilingual rows as published (benchmarks/data/swe-bench-multilingual-real.jsonl,
taken unedited from the published parquet) and the harness specs' language fields: schema,
recipe -> Environment per toolchain, the toolchain fallback. Pure, no I/O besides the data file.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from packager import assumptions as A
from packager.adapters import Context, detect_schema, to_spec
from packager.adapters.recipe import PythonPolicy, make_recipe
from packager.datasets.harness_specs import harness_recipe
from packager.errors import RowError
from packager.registry import SchemaName
from packager.toolchains import ToolchainUnavailable, choose_toolchain

ROWS = Path(__file__).parents[3] / "benchmarks" / "data" / "swe-bench-multilingual-real.jsonl"
COLUMNS = [
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
]
CTX = Context(dataset="swe-bench-multilingual", split="test")
POLICY = PythonPolicy({}, lambda _image: False)


@cache
def _rows() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    return {row["instance_id"]: row for row in rows}


def row(task: str) -> dict[str, Any]:
    """A published row, unedited (a copy: tests may break it on purpose)."""
    return copy.deepcopy(_rows()[task])


def test_rows_have_the_published_shape() -> None:
    """11 columns, FAIL_TO_PASS/PASS_TO_PASS lists, no environment_setup_commit."""
    for r in _rows().values():
        assert list(r) == COLUMNS
        assert isinstance(r["FAIL_TO_PASS"], list) and isinstance(r["PASS_TO_PASS"], list)


def test_every_row_is_detected_as_multilingual() -> None:
    assert {detect_schema(r) for r in _rows().values()} == {SchemaName.SWEBENCH_MULTILINGUAL}


def test_swebench_rows_keep_their_schema() -> None:
    r = row("nlohmann__json-4237")
    r["environment_setup_commit"] = r["base_commit"]
    assert detect_schema(r) == SchemaName.SWEBENCH


def test_cpp_row_adapts_with_no_recipe() -> None:
    spec = to_spec(row("nlohmann__json-4237"), CTX)
    assert spec.provenance.schema_name == "swebench-multilingual"
    assert spec.provenance.language == "c"
    env = spec.environment
    assert env.base_image == "debian:bookworm-slim"
    assert {"build-essential", "cmake", "python3", "git"} <= set(env.packages)
    assert env.python is None and env.toolchain == "c"
    # The spec's build runs in one shell (`cd build` carries over) in the image ...
    assert env.install == (
        "mkdir -p build && cd build && cmake .. && make test-udt_cpp11 && cd ..",
    )
    # ... and again before the tests, after the patches (the harness's eval script).
    assert spec.grading.test_command == (
        "mkdir -p build && cd build && cmake .. && make test-udt_cpp11 && cd .. && "
        "./build/tests/test-udt_cpp11 -s -r=xml"
    )
    assert spec.grading.fail_to_pass == tuple(row("nlohmann__json-4237")["FAIL_TO_PASS"])
    meta = spec.provenance.metadata
    assert meta["toolchain_used"] == "c"
    assert meta["toolchain_base"] == "debian:bookworm-slim (Debian bookworm)"
    assert "python_requested" not in meta


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("FAIL_TO_PASS", ["ok", 3], "expected a list of strings"),
        ("FAIL_TO_PASS", [], "must not be empty"),
        ("PASS_TO_PASS", "not json", "not a JSON list"),
        ("base_commit", "main", "not a 40-hex commit id"),
        ("version", ["4237"], "expected a version string"),
    ],
)
def test_bad_values_name_task_and_field(field: str, value: Any, message: str) -> None:
    r = row("nlohmann__json-4237")
    r[field] = value
    with pytest.raises(RowError) as info:
        to_spec(r, CTX, schema="swebench-multilingual")
    assert info.value.task == "nlohmann__json-4237"
    assert info.value.field == field
    assert message in str(info.value)


def _spec_config(repo: str, version: str) -> dict[str, Any]:
    """A harness spec, its parser set to one this branch's runtime has: the environment is what
    is tested here (the parsers are another change's)."""
    config = harness_recipe(repo, version)
    assert config is not None
    return {**config, "log_parser": "tap"}


def _recipe(repo: str, version: str, language: str, **policy: Any) -> Any:
    return make_recipe(
        _spec_config(repo, version),
        task="t",
        field="spec",
        test_patch=None,
        pythons=PythonPolicy({}, lambda _image: False, **policy),
        env_commit=None,
        language=language,
    )


def test_node_20_is_served_by_trixie() -> None:
    recipe = _recipe("axios/axios", "5316", "js")
    env = recipe.environment
    assert env.base_image == "debian:trixie-slim"
    assert {"nodejs", "npm", "python3", "ca-certificates", "chromium"} <= set(env.packages)
    assert env.env == {"CHROME_BIN": "/usr/bin/chromium"}
    assert env.python is None and env.toolchain == "node"
    assert recipe.toolchain is not None and not recipe.toolchain.substituted
    # install then build in the image; at grading, a build step the install already ran is
    # not run again (the harness reruns it with a network; grader containers have none).
    assert env.install == ("npm install", "npm install")
    assert recipe.test_command.startswith("npx mocha test/unit/adapters/http.js")


def test_a_build_step_the_install_did_not_run_reruns_at_grading() -> None:
    recipe = _recipe("fmtlib/fmt", "3158", "c")
    assert recipe.test_command.startswith("mkdir -p build && cmake -B build -S . && ")
    assert "ctest --test-dir build" in recipe.test_command


def test_node_16_is_substituted_and_recorded() -> None:
    recipe = _recipe("preactjs/preact", "3010", "js")
    assert recipe.toolchain is not None
    assert (recipe.toolchain.requested, recipe.toolchain.used) == ("16", "18")
    assert recipe.environment.base_image == "debian:bookworm-slim"
    assert recipe.toolchain.describe() == "node 16 -> 18"


def test_node_16_refused_with_fallback_never() -> None:
    with pytest.raises(RowError) as info:
        _recipe("preactjs/preact", "3010", "js", toolchain_fallback="never")
    assert info.value.field == "spec.docker_specs.node_version"
    assert "Debian ships 18 (bookworm), 20 (trixie)" in str(info.value)


def test_pnpm_comes_from_npm_before_pre_install() -> None:
    config = {"docker_specs": {"node_version": "18", "pnpm_version": "7.9.0"}, "log_parser": "tap"}
    config["pre_install"] = ["echo pre"]
    config["test_cmd"] = "pnpm test"
    recipe = make_recipe(
        config, task="t", field="spec", test_patch=None, pythons=POLICY, env_commit=None
    )
    assert recipe.environment.pre_install == ("npm install -g pnpm@7.9.0", "echo pre")
    assert recipe.environment.base_image == "debian:bookworm-slim"


def test_pnpm_without_node_is_refused() -> None:
    config = {"docker_specs": {"pnpm_version": "7.9.0"}, "log_parser": "tap", "test_cmd": "x"}
    with pytest.raises(RowError) as info:
        make_recipe(
            config, task="t", field="spec", test_patch=None, pythons=POLICY, env_commit=None
        )
    assert info.value.field == "spec.docker_specs.pnpm_version"


def test_apt_pkgs_follow_the_toolchain() -> None:
    config = {
        "docker_specs": {"node_version": "10.16.3"},
        "apt-pkgs": ["libsass-dev", "sassc"],
        "log_parser": "tap",
        "test_cmd": "npm test",
    }
    recipe = make_recipe(
        config, task="t", field="spec", test_patch=None, pythons=POLICY, env_commit=None
    )
    packages = recipe.environment.packages
    assert packages[-2:] == ("libsass-dev", "sassc")
    assert packages.index("nodejs") < packages.index("libsass-dev")
    assert recipe.toolchain is not None and recipe.toolchain.used == "18"


def test_c_build_tools_and_no_test_file_directives() -> None:
    """redis: Tcl for `runtest`; the harness appends no test files to a C command."""
    recipe = make_recipe(
        _spec_config("redis/redis", "13338"),
        task="t",
        field="spec",
        test_patch=row("redis__redis-13338")["test_patch"],
        pythons=POLICY,
        env_commit=None,
        language="c",
    )
    assert "tcl" in recipe.environment.packages
    assert recipe.environment.install == ("make distclean && make",)
    assert recipe.test_command == (
        "make distclean && make && TERM=dumb ./runtest --durable --single unit/type/stream-cgroups"
    )


def test_bad_docker_specs_values() -> None:
    for specs, field in (
        ({"node_version": ["20"]}, "spec.docker_specs.node_version"),
        ({"node_version": "20", "go_version": "1.22"}, "spec.docker_specs.go_version"),
        ("node 20", "spec.docker_specs"),
    ):
        config = {"docker_specs": specs, "log_parser": "tap", "test_cmd": "x"}
        with pytest.raises(RowError) as info:
            make_recipe(
                config, task="t", field="spec", test_patch=None, pythons=POLICY, env_commit=None
            )
        assert info.value.field == field


@pytest.mark.parametrize(
    ("name", "asked", "used", "suite"),
    [
        ("node", "18.20.4", "18", "bookworm"),
        ("node", "20", "20", "trixie"),
        ("node", "0.8", "18", "bookworm"),
        ("node", "21.6.2", "20", "trixie"),
        ("go", "1.19.13", "1.19", "bookworm"),
        ("go", "1.22.12", "1.24", "trixie"),
        ("rust", "1.77", "1.85", "trixie"),
        ("java", "11", "17", "bookworm"),
        ("java", "21", "21", "trixie"),
        ("php", "8.3.16", "8.4", "trixie"),
        ("ruby", "3.1", "3.1", "bookworm"),
    ],
)
def test_choose_toolchain(name: str, asked: str, used: str, suite: str) -> None:
    choice = choose_toolchain(name, asked)
    assert (choice.used, choice.image) == (used, A.debian_base_image(suite))
    assert choice.substituted == (asked.split(".")[: len(used.split("."))] != used.split("."))


def test_choose_toolchain_never() -> None:
    assert choose_toolchain("go", "1.19.13", "never").used == "1.19"
    with pytest.raises(ToolchainUnavailable):
        choose_toolchain("go", "1.22.12", "never")


def test_node_images_take_the_npm_registry_as_a_build_argument() -> None:
    from packager.render.harbor import make_harbor_task

    spec = to_spec(row("nlohmann__json-4237"), CTX)
    c_file = make_harbor_task(spec).files["environment/Dockerfile"].data.decode()
    node = spec.model_copy(
        update={"environment": spec.environment.model_copy(update={"toolchain": "node"})}
    )
    node_file = make_harbor_task(node).files["environment/Dockerfile"].data.decode()
    assert "ARG NPM_CONFIG_REGISTRY" in node_file
    assert "ARG NPM_CONFIG_REGISTRY" not in c_file


def test_host_npm_registry_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from packager.stages.build import host_npm_registry

    host_npm_registry.cache_clear()
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "http://npm.mirror.invalid/")
    try:
        assert host_npm_registry() == "http://npm.mirror.invalid/"
    finally:
        host_npm_registry.cache_clear()
