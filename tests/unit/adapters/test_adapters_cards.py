"""The adapters on the cards' row shapes: pure `to_spec(row, Context(...))`, no I/O.

Rows start from the samples (exactly the cards' columns, packager/samples/rows.jsonl) and change
only what a test is about. docs/datasets.md describes every behaviour checked here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from packager import assumptions as A
from packager.adapters import Context, row_id, to_spec
from packager.adapters import recipe as recipe_adapter
from packager.adapters.common import repo_name
from packager.adapters.ecswe import find_entry, substitute_clone
from packager.assumptions import SNAPSHOT_MARK
from packager.datasets.harness_parsers import TEST_DJANGO, TEST_GO, TEST_PYTEST
from packager.datasets.recipes import Recipes
from packager.errors import RowError
from packager.grading import rules
from packager.models.spec import TaskSpec
from packager.repos.objects import inline_commit_sha
from tests.conftest import sample_rows

TEXTKIT = "samples__textkit-1"  # swebench
INTSET = "samples__intset-2"  # swe-rebench
KV = "samples__kvstore-3"  # ec-swe
INV = "samples__inventory-4"  # pdl
TODO = "samples__todo-web-5"  # sweeper

Row = dict[str, Any]


def _row(task: str, **changes: Any) -> Row:
    row = copy.deepcopy(next(r for r in sample_rows() if row_id(r) == task))
    row.update(changes)
    return row


def _ctx(**options: Any) -> Context:
    return Context(dataset="cards", split="test", **options)


def _spec(row: Row, **options: Any) -> TaskSpec:
    return to_spec(row, _ctx(**options))


# ============================================================================== EC-SWE: clone

REPO = "o/n"
URL = "https://github.com/o/n"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _sub(dockerfile: str) -> tuple[str, str | None]:
    return substitute_clone(dockerfile, REPO, A.ECSWE_WORKDIR)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("clone", "where"),
    [
        (f"git clone {URL} /workspace/repo", "/workspace/repo"),
        (f"git clone {URL}.git /workspace/repo", "/workspace/repo"),
        (f"git clone --depth 1 {URL} /workspace/repo", "/workspace/repo"),
        (f"git clone --depth=1 {URL} /srv/app", "/srv/app"),
        (f"git clone -b main {URL} /srv/app", "/srv/app"),
        (f"git clone --branch main --single-branch {URL} /srv/app", "/srv/app"),
        (f"git clone -q {URL}/ /srv/app", "/srv/app"),
    ],
)
def test_clone_of_the_task_repo_becomes_the_snapshot(clone: str, where: str) -> None:
    dockerfile = (
        "FROM debian:bookworm-slim\n"
        "RUN apt-get update && apt-get install -y git\n"
        f"RUN {clone} && cd {where} && git checkout {SHA}\n"
        f"WORKDIR {where}\n"
    )
    text, workdir = _sub(dockerfile)
    assert workdir == where
    assert _lines(text) == [
        "FROM debian:bookworm-slim",
        "RUN apt-get update && apt-get install -y git",
        SNAPSHOT_MARK,
        f"ADD repo.tar {where}",
        f"WORKDIR {where}",
    ]
    assert "git clone" not in text and SHA not in text


def test_clone_to_a_relative_dir_after_workdir() -> None:
    text, workdir = _sub(
        f"FROM x\nWORKDIR /workspace\nRUN git clone {URL} repo && cd repo && git checkout {SHA}\n"
    )
    assert workdir == "/workspace/repo"
    assert _lines(text) == [
        "FROM x",
        "WORKDIR /workspace",
        SNAPSHOT_MARK,
        "ADD repo.tar /workspace/repo",
    ]


def test_clone_without_a_destination_uses_the_repo_name() -> None:
    text, workdir = _sub(f"FROM x\nWORKDIR /src\nRUN git clone {URL}.git\n")
    assert workdir == "/src/n"
    assert "ADD repo.tar /src/n" in _lines(text)


def test_backslash_continued_run_keeps_its_other_steps() -> None:
    dockerfile = (
        "FROM node:20\n"
        "RUN apt-get update \\\n"
        f"    && git clone --depth 1 {URL} /w/r \\\n"
        "    && cd /w/r \\\n"
        f"    && git fetch origin {SHA} \\\n"
        f"    && git checkout {SHA} \\\n"
        "    && git reset --hard \\\n"
        "    && npm ci\n"
        'CMD ["bash"]\n'
    )
    text, workdir = _sub(dockerfile)
    assert workdir == "/w/r"
    assert _lines(text) == [
        "FROM node:20",
        SNAPSHOT_MARK,
        "ADD repo.tar /w/r",
        "RUN apt-get update && cd /w/r && npm ci",
        'CMD ["bash"]',
    ]


def test_clone_of_another_repo_is_kept() -> None:
    other = (
        f"RUN git clone https://github.com/o/n-plugins /opt/p && cd /opt/p && git checkout {SHA}"
    )
    fork = "RUN git clone https://github.com/xo/n /opt/fork"
    text, workdir = _sub(f"FROM x\n{other}\n{fork}\nRUN git clone {URL} /app\n")
    assert workdir == "/app"
    assert _lines(text) == ["FROM x", other, fork, SNAPSHOT_MARK, "ADD repo.tar /app"]


def test_only_another_repo_cloned_leaves_the_dockerfile_alone() -> None:
    dockerfile = "FROM x\nRUN git clone https://github.com/o/other /opt/o\n"
    assert _sub(dockerfile) == (dockerfile, None)


@pytest.mark.parametrize(
    "copy_line",
    [
        "COPY grader/ /grader",
        "COPY ./grading /grading",
        "ADD protected /protected",
        "COPY --chown=1000 grader/grade.py /grader/grade.py",
    ],
)
def test_copy_of_grader_folders_is_dropped(copy_line: str) -> None:
    text, _ = _sub(f"FROM x\nRUN git clone {URL} /app\n{copy_line}\nCOPY src/ /app/src\n")
    assert copy_line not in _lines(text)
    assert f"# packager: dropped (grading files go to the grader image): {copy_line}" in text
    assert "COPY src/ /app/src" in _lines(text)


def test_copy_of_grader_folders_is_dropped_without_a_clone() -> None:
    text, workdir = _sub("FROM x\nCOPY grader/ /grader\nWORKDIR /workspace/repo\n")
    assert workdir is None
    assert "COPY grader/ /grader" not in _lines(text)


def test_clone_with_an_option_after_the_url() -> None:
    text, workdir = _sub(f"FROM x\nRUN git clone {URL} -b main /srv/app\n")
    assert workdir == "/srv/app"
    assert "ADD repo.tar /srv/app" in _lines(text)


def test_ecswe_sample_workdir_is_the_clone_dir() -> None:
    spec = _spec(_row(KV))
    assert spec.repo.workdir == "/workspace/repo"
    dockerfile = spec.environment.dockerfile or ""
    assert "ADD repo.tar /workspace/repo" in dockerfile
    assert "git clone" not in dockerfile and spec.repo.base_commit not in dockerfile
    assert spec.environment.base_image == "debian:bookworm-slim"
    assert spec.provenance.metadata["snapshot"] == "replaces the dockerfile's clone"


def test_ecswe_clone_dir_elsewhere_is_the_workdir() -> None:
    row = _row(KV)
    row["dockerfile"] = row["dockerfile"].replace("/workspace/repo", "/opt/kv")
    assert _spec(row).repo.workdir == "/opt/kv"


def test_ecswe_sample_grading() -> None:
    row = _row(KV)
    spec = _spec(row)
    g = spec.grading
    assert g.rule == "script"
    assert g.grader_command == "python3 grade.py" and g.grader_dir == "grader"
    assert set(g.grader_files) == {f["path"] for f in row["grader_files"]}
    assert [(c.name, c.weight) for c in g.criteria] == [
        (c["criterion"], c["weight"]) for c in row["grader"]
    ]
    assert spec.expectations.nop_reward == row["base_reward"]
    assert spec.provenance.language == row["language"]
    assert spec.provenance.metadata["hud_task"] == row["hud_task"]
    assert spec.repo.setup_patch == row["setup_patch"]


# ============================================================================ EC-SWE: entry


def _files(*paths: str) -> dict[str, bytes]:
    return {p: b"x" for p in paths}


@pytest.mark.parametrize(
    ("paths", "entry"),
    [
        (("grader/grade.py", "grader/criteria.json", "grader/tests/test_x.py"), "grader/grade.py"),
        (("grading/run_grader.sh", "grading/lib.sh"), "grading/run_grader.sh"),
        (("protected/score.py", "protected/hidden/test_a.py"), "protected/score.py"),
        (("grader/grader.sh", "grader/sub/grade.py"), "grader/grader.sh"),
    ],
)
def test_find_entry_single_candidate(paths: tuple[str, ...], entry: str) -> None:
    assert find_entry(_files(*paths), "t", None) == entry


def test_find_entry_two_candidates_names_both() -> None:
    with pytest.raises(RowError) as caught:
        find_entry(_files("grader/grade.py", "grading/score.sh", "grader/x.py"), "t", None)
    message = str(caught.value)
    assert caught.value.field == "grader_files"
    assert "grader/grade.py" in message and "grading/score.sh" in message
    assert "grader/x.py" not in message and "--grader-entry" in message


@pytest.mark.parametrize(
    "paths",
    [
        ("grader/sub/grade.py",),  # nested: not an entry
        ("grader/grade.txt", "grader/grade"),
        ("grader/run.py",),
        ("grade.py",),
    ],
)
def test_find_entry_no_candidate(paths: tuple[str, ...]) -> None:
    with pytest.raises(RowError, match="none.*--grader-entry"):
        find_entry(_files(*paths), "t", None)


def test_find_entry_named() -> None:
    files = _files("grader/grade.py", "grading/score.sh", "grader/sub/check.py")
    assert find_entry(files, "t", "grader/sub/check.py") == "grader/sub/check.py"
    with pytest.raises(RowError, match="--grader-entry grader/nope.py"):
        find_entry(files, "t", "grader/nope.py")


def test_grader_entry_option_reaches_the_spec() -> None:
    row = _row(KV)
    row["grader_files"].append({"path": "grading/check.sh", "encoding": "utf-8", "content": "x"})
    spec = _spec(row, grader_entry="grading/check.sh")
    assert spec.grading.grader_command == "bash check.sh"
    assert spec.grading.grader_dir == "grading"


# ============================================================================ recipe lookup


def _recipe(test_cmd: str, **more: Any) -> dict[str, Any]:
    return {"python": "3.11", "test_cmd": test_cmd, **more}


ALL_KEYS = {
    TEXTKIT: _recipe("echo instance"),
    "samples/textkit@1.0": _recipe("echo version"),
    "samples/textkit": _recipe("echo repo"),
    "samples/textkit@2.0": _recipe("echo other-version"),
    "other/repo": _recipe("echo other-repo"),
}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ((TEXTKIT, "samples/textkit@1.0", "samples/textkit"), TEXTKIT),
        (("samples/textkit@1.0", "samples/textkit"), "samples/textkit@1.0"),
        (("samples/textkit", "samples/textkit@2.0"), "samples/textkit"),
    ],
)
def test_recipe_precedence(keys: tuple[str, ...], expected: str) -> None:
    recipes = Recipes({k: v for k, v in ALL_KEYS.items() if k in keys or k == "other/repo"})
    spec = _spec(_row(TEXTKIT), recipes=recipes)
    assert spec.provenance.metadata["recipe"] == expected
    assert spec.grading.test_command == f"{ALL_KEYS[expected]['test_cmd']} tests/test_slug.py"


def test_recipe_of_another_version_or_repo_does_not_match() -> None:
    recipes = Recipes({k: ALL_KEYS[k] for k in ("samples/textkit@2.0", "other/repo")})
    with pytest.raises(RowError) as caught:
        _spec(_row(TEXTKIT), recipes=recipes)
    assert caught.value.field == "install_config"
    assert "--recipes" in str(caught.value) and "--prebuilt" in str(caught.value)


def test_rebench_install_config_used_when_no_recipe_matches() -> None:
    row = _row(INTSET)
    spec = _spec(row, recipes=Recipes({"other/repo": _recipe("echo no")}))
    config = json.loads(row["install_config"])
    assert "recipe" not in spec.provenance.metadata
    assert spec.provenance.metadata["environment"] == "recipe"
    assert spec.grading.test_command == config["test_cmd"]  # Go: no test-file directives
    assert spec.grading.parser == "gotest" and spec.provenance.language == "go"
    assert spec.environment.env == config["env_vars"]
    assert spec.environment.packages == tuple(config["apt-pkgs"])
    assert spec.environment.prebuilt is False


def test_rebench_recipe_for_the_instance_overrides_install_config() -> None:
    recipe = {"test_cmd": "go test -count=1 -v ./...", "log_parser": "parse_log_gotest"}
    spec = _spec(_row(INTSET), recipes=Recipes({INTSET: recipe}))
    assert spec.provenance.metadata["recipe"] == INTSET
    assert spec.grading.test_command == "go test -count=1 -v ./..."
    assert spec.environment.env == {}  # nothing of the row's install_config is merged in


def test_rebench_install_config_may_be_an_object() -> None:
    row = _row(INTSET)
    row["install_config"] = json.loads(row["install_config"])
    assert _spec(row).grading.test_command == row["install_config"]["test_cmd"]


# ---------------------------------------------------------------------------------- prebuilt


@pytest.mark.parametrize(
    ("instance", "image"),
    [
        (TEXTKIT, "swebench/sweb.eval.x86_64.samples_1776_textkit-1:latest"),
        ("Django__Django-11099", "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"),
        ("astropy__astropy-12907", "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"),
    ],
)
def test_prebuilt_always_uses_the_harness_image(instance: str, image: str) -> None:
    assert A.harness_image_name(instance) == image
    spec = _spec(_row(TEXTKIT, instance_id=instance), prebuilt="always")
    env = spec.environment
    assert env.prebuilt is True and env.base_image == image
    assert env.shell_setup == A.HARNESS_CONDA_ACTIVATE
    assert env.python is None and env.pip_packages == () and env.pre_install == ()
    # No recipe: the harness's default command for the default parser, plus the test files.
    assert spec.grading.test_command == f"{TEST_PYTEST} tests/test_slug.py"
    assert spec.provenance.metadata["environment"] == "image"


def test_prebuilt_always_keeps_only_the_recipes_test_side() -> None:
    recipe = _recipe(
        "pytest -x", pre_install=["apt-get install -y foo"], env_vars={"LANG": "C.UTF-8"}
    )
    spec = _spec(_row(TEXTKIT), prebuilt="always", recipes=Recipes({TEXTKIT: recipe}))
    assert spec.environment.prebuilt is True
    assert spec.environment.pre_install == () and spec.environment.python is None
    assert spec.environment.env == {"LANG": "C.UTF-8"}
    assert spec.grading.test_command == "pytest -x tests/test_slug.py"


def test_prebuilt_always_prefers_the_rows_docker_image() -> None:
    row = _row(INTSET)
    spec = _spec(row, prebuilt="always")
    assert spec.environment.prebuilt is True
    assert spec.environment.base_image == row["docker_image"]


class Engine:
    """A stand-in for `ctx.has_image` that records what it was asked."""

    def __init__(self, *images: str) -> None:
        self.images = set(images)
        self.asked: list[str] = []

    def __call__(self, name: str) -> bool:
        self.asked.append(name)
        return name in self.images


def test_prebuilt_auto_uses_docker_image_when_the_engine_has_it() -> None:
    row = _row(INTSET)
    engine = Engine(row["docker_image"])
    spec = _spec(row, has_image=engine)
    assert engine.asked == [row["docker_image"]]
    assert spec.environment.prebuilt is True
    assert spec.environment.base_image == row["docker_image"]
    assert spec.environment.env["GOFLAGS"] == "-mod=mod"  # env_vars still apply to grading
    assert spec.environment.pre_install == ()


def test_prebuilt_auto_builds_from_install_config_when_the_engine_lacks_it() -> None:
    row = _row(INTSET)
    engine = Engine("someone/else:latest")
    spec = _spec(row, has_image=engine)
    assert engine.asked == [row["docker_image"]]
    assert spec.environment.prebuilt is False
    assert spec.environment.base_image == A.DEFAULT_BASE_IMAGE
    assert spec.environment.packages == tuple(json.loads(row["install_config"])["apt-pkgs"])


def test_prebuilt_auto_never_guesses_an_image_for_swebench_rows() -> None:
    engine = Engine(A.harness_image_name(TEXTKIT))
    with pytest.raises(RowError, match="--prebuilt always"):
        _spec(_row(TEXTKIT), has_image=engine)
    assert engine.asked == []


def test_prebuilt_never_ignores_docker_image() -> None:
    row = _row(INTSET)
    engine = Engine(row["docker_image"])
    spec = _spec(row, prebuilt="never", has_image=engine)
    assert spec.environment.prebuilt is False and engine.asked == []


# ================================================================================ make_recipe

TEST_PATCH = "".join(
    f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    for path in (
        "tests/test_core.py",
        "tests/data/expected.json",
        "docs/changes.md",
        "tests/fixtures/input.txt",
        "tests/conftest.py",
        "setup.cfg",
        "tests/data/table.csv",
        "tests/config.yaml",
    )
) + (
    "diff --git a/tests/test_old.py b/tests/test_renamed.py\nsimilarity index 90%\n"
    "rename from tests/test_old.py\nrename to tests/test_renamed.py\n"
)


def _make(config: dict[str, Any], test_patch: str | None = TEST_PATCH, **kw: Any) -> Any:
    options: dict[str, Any] = {
        "task": "t",
        "field": "install_config",
        "test_patch": test_patch,
        "pythons": recipe_adapter.PythonPolicy({}, lambda _image: False),
        "env_commit": "e" * 40,
    }
    options.update(kw)
    return recipe_adapter.make_recipe(config, **options)


def test_requirements_txt_with_reqs_path() -> None:
    result = _make({"python": "3.11", "packages": "requirements.txt", "reqs_path": ["r/dev.txt"]})
    env = result.environment
    assert env.requirements_paths == ("r/dev.txt",)
    assert env.source_commit == "e" * 40
    assert env.python == "3.11" and env.pip_packages == () and env.requirements == {}


def test_requirements_txt_without_reqs_path_reads_requirements_txt() -> None:
    env = _make({"packages": "requirements.txt"}).environment
    assert env.requirements_paths == A.DEFAULT_REQS_PATHS == ("requirements.txt",)
    assert env.python == A.DEBIAN_PYTHON  # a recipe installing packages needs an interpreter


def test_environment_yml() -> None:
    env = _make({"packages": "environment.yml", "env_yml_path": ["ci/env.yml"]}).environment
    assert env.conda_env_paths == ("ci/env.yml",) and env.source_commit == "e" * 40
    assert env.python == A.DEBIAN_PYTHON


@pytest.mark.parametrize(
    ("packages", "pips"),
    [
        # conda's `name=1.19` is any 1.19.x; `python` is the interpreter, not a requirement.
        ("numpy=1.19 pytest python=3.9", ("numpy==1.19.*", "pytest")),
        ("numpy==1.19 'attrs>=21' pytest", ("numpy==1.19", "attrs>=21", "pytest")),
        (["scipy=1.5.2", "six", "dask-core"], ("scipy==1.5.2.*", "six", "dask")),
    ],
)
def test_conda_package_list_becomes_pip_requirements(packages: Any, pips: tuple[str, ...]) -> None:
    result = _make({"packages": packages, "pip_packages": ["hypothesis==6.0"]})
    env = result.environment
    text = "".join(f"{p}\n" for p in pips).encode()
    assert env.requirements == {A.CONDA_PACKAGES_FILE: text}
    assert env.pip_packages == ("hypothesis==6.0",)  # after `packages`, as the harness
    assert env.requirements_paths == () and env.source_commit is None
    assert env.python == A.DEBIAN_PYTHON and env.packages == A.PYTHON_TOOLCHAIN_PACKAGES
    said = " ".join(result.notes)
    assert ("python=3.9" in said) == ("python=3.9" in str(packages))
    assert ("installed as dask" in said) == ("dask-core" in packages)


@pytest.mark.parametrize(
    ("parser", "command"),
    [
        (None, TEST_PYTEST),
        ("parse_log_pytest", TEST_PYTEST),
        ("parse_log_django", TEST_DJANGO),
        ("parse_log_gotest", TEST_GO),
    ],
)
def test_missing_test_cmd_takes_the_harness_default(parser: str | None, command: str) -> None:
    config = {"log_parser": parser} if parser else {}
    assert _make(config, test_patch=None).test_command == command


def test_missing_test_cmd_without_a_harness_default_is_refused() -> None:
    with pytest.raises(RowError) as caught:
        _make({"log_parser": "junit"})
    assert caught.value.field == "install_config.test_cmd"


def test_test_cmd_list_is_joined() -> None:
    result = _make({"test_cmd": ["cd src", "pytest -rA"]}, test_patch=None)
    assert result.test_command == "cd src && pytest -rA"


def test_directives_are_the_test_files_of_the_test_patch() -> None:
    # b/ paths of the diff --git lines (a rename counts as its new name), minus the harness's
    # non-test extensions (.json .md .txt csv .yaml ...); setup.cfg and conftest.py stay.
    expected = ("tests/test_core.py", "tests/conftest.py", "setup.cfg", "tests/test_renamed.py")
    assert recipe_adapter.test_directives(TEST_PATCH) == expected
    assert _make({"test_cmd": "pytest -rA"}).test_command == "pytest -rA " + " ".join(expected)


def test_directives_ignore_plain_diff_headers() -> None:
    plain = "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert recipe_adapter.test_directives(plain) == ()


def test_django_directives_are_dotted_labels() -> None:
    patch = (
        "diff --git a/tests/auth_tests/test_views.py b/tests/auth_tests/test_views.py\n"
        "diff --git a/tests/auth_tests/templates/x.html b/tests/auth_tests/templates/x.html\n"
        "diff --git a/tests/i18n/data.json b/tests/i18n/data.json\n"
        "diff --git a/tests/forms_tests/tests/test_input.py "
        "b/tests/forms_tests/tests/test_input.py\n"
    )
    result = _make({"log_parser": "parse_log_django"}, test_patch=patch)
    assert result.parser == "django"
    assert result.test_command == (
        f"{TEST_DJANGO} auth_tests.test_views forms_tests.tests.test_input"
    )


def test_go_gets_no_directives() -> None:
    patch = "diff --git a/set_test.go b/set_test.go\n"
    result = _make(
        {"log_parser": "parse_log_gotest", "test_cmd": "go test ./..."}, test_patch=patch
    )
    assert result.test_command == "go test ./..." and result.parser == "gotest"


def test_directives_are_shell_quoted() -> None:
    patch = "diff --git a/tests/test a.py b/tests/test a.py\n"
    assert (
        _make({"test_cmd": "pytest"}, test_patch=patch).test_command == "pytest 'tests/test a.py'"
    )


FREEZE = "\n".join(
    [
        "# pip freeze of the environment",
        "attrs==23.1.0",
        "-e git+https://github.com/o/n@0123456789abcdef#egg=n",
        "iniconfig==2.0.0",
        "n @ file:///testbed",
        "",
        "pluggy==1.3.0",
        "pytest==7.4.0",
    ]
)


def test_full_rebench_row_installs_the_frozen_pins() -> None:
    config = {
        "python": "3.11",
        "packages": "requirements.txt",
        "reqs_path": ["requirements.txt"],
        "pip_packages": ["pytest"],
        "install": "python -m pip install -e .",
        "test_cmd": "pytest -rA",
        "log_parser": "parse_log_pytest",
    }
    row = _row(INTSET, install_config=json.dumps(config), requirements=FREEZE)
    spec = _spec(row, prebuilt="never")
    env = spec.environment
    pins = b"attrs==23.1.0\niniconfig==2.0.0\npluggy==1.3.0\npytest==7.4.0\n"
    assert env.requirements == {"requirements.frozen.txt": pins}
    # The pin set replaces packages/pip_packages; `install` still installs the repository.
    assert env.requirements_paths == () and env.pip_packages == () and env.source_commit is None
    assert env.install == ("python -m pip install -e .",)
    assert env.python == "3.11"


def test_frozen_pins_are_ignored_on_a_published_image() -> None:
    row = _row(INTSET, requirements=FREEZE)
    spec = _spec(row, has_image=Engine(row["docker_image"]))
    assert spec.environment.prebuilt is True and spec.environment.requirements == {}


@pytest.mark.parametrize(
    ("version", "images", "base", "used"),
    [
        ("3.11", {}, A.DEFAULT_BASE_IMAGE, "3.11"),
        ("3", {}, A.DEFAULT_BASE_IMAGE, "3.11"),
        ("3.9", {"3.9": "python:3.9-slim"}, "python:3.9-slim", "3.9"),
        ("3.11", {"3.11": "python:3.11"}, "python:3.11", "3.11"),
        ("3.9", {}, "debian:bullseye-slim", "3.9"),
        ("3.13", {}, "debian:trixie-slim", "3.13"),
        # No image serves it: the nearest Debian python3 at or above, else the newest below.
        ("3.5", {}, "debian:bullseye-slim", "3.9"),
        ("3.6", {}, "debian:bullseye-slim", "3.9"),
        ("3.10", {}, "debian:bookworm-slim", "3.11"),
        ("3.12", {}, "debian:trixie-slim", "3.13"),
        ("3.14", {}, "debian:trixie-slim", "3.13"),
        ("3.6", {"3.6": "mine:py36"}, "mine:py36", "3.6"),
    ],
)
def test_python_base_image(version: str, images: dict[str, str], base: str, used: str) -> None:
    pythons = recipe_adapter.PythonPolicy(images, lambda _image: False)
    result = _make({"python": version}, pythons=pythons)
    assert result.environment.base_image == base and result.environment.python == used
    assert result.python is not None and result.python.requested == version


def test_the_official_image_serves_a_version_the_engine_has_or_can_pull() -> None:
    asked: list[str] = []

    def available(image: str) -> bool:
        asked.append(image)
        return image == "python:3.6-slim"

    result = _make({"python": "3.6"}, pythons=recipe_adapter.PythonPolicy({}, available))
    assert result.environment.base_image == "python:3.6-slim"
    assert result.python is not None and not result.python.substituted
    assert asked == ["python:3.6-slim"]


def test_python_fallback_never_refuses_a_substitution_naming_the_versions() -> None:
    pythons = recipe_adapter.PythonPolicy({}, lambda _image: False, "never")
    with pytest.raises(RowError, match=r"Python 3\.7: .*3\.9, 3\.11, 3\.13") as caught:
        _make({"python": "3.7"}, pythons=pythons)
    assert caught.value.field == "install_config.python"
    assert "--base-image 3.7=IMAGE" in caught.value.problem
    # A version some image serves is no substitution: `never` lets it through.
    assert _make({"python": "3.9"}, pythons=pythons).environment.python == "3.9"


def test_recipe_order_and_env() -> None:
    env = _make(
        {
            "apt-pkgs": ["git", "make"],
            "pre_install": "echo pre",
            "install": ["make", "make install"],
            "env_vars": {"B": "$HOME/b", "A": 1},
            "eval_commands": ["source env.sh", "export X=1"],
            "no_use_env": True,
            "docker_specs": {"python_version": "3.11"},
        }
    ).environment
    assert env.packages == ("git", "make")  # no Python asked for: no Python toolchain
    assert env.pre_install == ("echo pre",) and env.install == ("make", "make install")
    assert env.env == {"A": "1", "B": "$HOME/b"}
    assert env.shell_setup == "source env.sh; export X=1"
    assert env.python is None  # nothing Python asked for


# ======================================================================================== PDL

CARD_FORMULA = "0.80 * hidden_pass_fraction + 0.15 * public_regression + 0.05 * build_health"


def test_pdl_formula_uses_the_card_names() -> None:
    row = _row(INV)
    spec = _spec(row)
    assert (
        row["reward_formula"]
        == "0.80hidden_pass_fraction + 0.15public_regression + 0.05*build_health"
    )
    assert spec.grading.rule == "formula"
    assert spec.grading.formula == CARD_FORMULA
    assert rules.parse_expression(spec.grading.formula)  # the runtime's own parser accepts it
    assert spec.grading.build_health == "collected"


def test_pdl_nop_expectation_for_the_card_formula() -> None:
    assert _spec(_row(INV)).expectations.nop_reward == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("formula", "nop"),
    [
        ("hidden_pass_fraction", 0.0),
        ("0.5public_regression + 0.5build_health", 1.0),
        ("(hidden_pass_fraction + public_regression) / 2", 0.5),
    ],
)
def test_pdl_nop_expectation_follows_the_formula(formula: str, nop: float) -> None:
    assert _spec(_row(INV, reward_formula=formula)).expectations.nop_reward == pytest.approx(nop)


def test_pdl_groups_and_test_command() -> None:
    row = _row(INV)
    g = _spec(row).grading
    assert g.hidden_tests == tuple(row["FAIL_TO_PASS"])
    assert g.public_tests == tuple(row["PASS_TO_PASS"])
    assert g.test_command == (
        f"{A.PDL_TEST_COMMAND} tests/hidden/test_hidden.py tests/public/test_public.py"
    )
    assert g.protected_paths == ("tests/hidden/test_hidden.py",)
    assert g.test_patch == row["test_patch"]
    assert g.patch_allowed == tuple(row["patch_policy_allowed"])
    assert g.patch_forbidden == tuple(row["patch_policy_forbidden"])


def test_pdl_test_command_lists_each_file_once_in_order() -> None:
    row = _row(
        INV,
        FAIL_TO_PASS=["tests/hidden/test_b.py::t1", "tests/hidden/test_a.py::t2"],
        PASS_TO_PASS=["tests/public/test_p.py::t3", "tests/hidden/test_b.py::t4"],
    )
    assert _spec(row).grading.test_command == (
        f"{A.PDL_TEST_COMMAND} tests/hidden/test_b.py tests/hidden/test_a.py tests/public/test_p.py"
    )


def test_pdl_metadata_and_repo() -> None:
    row = _row(INV)
    spec = _spec(row)
    meta = spec.provenance.metadata
    assert meta["tier"] == row["tier"]
    assert meta["token_budget"] == row["token_budget"]
    assert meta["graded_ladder_rungs"] == row["graded_ladder_rungs"]
    assert meta["task_version"] == row["task_version"] and meta["domain"] == row["domain"]
    assert spec.repo.name == f"pdl/{row['task_id']}" == "pdl/samples_inventory_004"
    assert spec.repo.workdir == A.PDL_WORKDIR
    files = {f["path"]: f["content"].encode() for f in row["files"]}
    assert spec.repo.files == files
    assert spec.repo.base_commit == inline_commit_sha(files)


def test_pdl_base_commit_follows_the_files() -> None:
    row = _row(INV)
    row["files"][0]["content"] += "# changed\n"
    assert _spec(row).repo.base_commit != _spec(_row(INV)).repo.base_commit


@pytest.mark.parametrize("lock", ["# no third-party packages\n", "", "\n   \n# a\n  # b\n"])
def test_pdl_comment_only_lock_means_no_venv(lock: str) -> None:
    row = _row(INV)
    for item in row["files"]:
        if item["path"] == A.PDL_REQUIREMENTS_FILE:
            item["content"] = lock
    env = _spec(row).environment
    assert env.python is None and env.requirements == {}
    assert env.packages == A.PDL_PACKAGES


def test_pdl_sample_lock_holds_only_comments() -> None:
    env = _spec(_row(INV)).environment
    assert env.python is None and env.requirements == {}


def test_pdl_lock_naming_packages_is_installed() -> None:
    row = _row(INV)
    for item in row["files"]:
        if item["path"] == A.PDL_REQUIREMENTS_FILE:
            item["content"] = "# pinned\nsix==1.17.0\n"
    env = _spec(row).environment
    assert env.requirements == {"requirements.lock": b"# pinned\nsix==1.17.0\n"}
    assert env.python == A.PDL_PYTHON


def test_pdl_gold_patch_without_diff_git_header() -> None:
    row = _row(INV)
    assert row["patch"].startswith("--- a/")
    assert _spec(row).gold_patch == row["patch"]


# ==================================================================================== SWEeper


def test_sweeper_case_id_is_the_id() -> None:
    row = _row(TODO)
    assert "instance_id" not in row
    spec = _spec(row)
    assert spec.task_id == row["case_id"] == spec.provenance.instance_id
    assert spec.provenance.schema_name == "sweeper"
    assert spec.repo.base_commit == row["base_commit"]
    assert spec.repo.reference_commit == row["reference_commit"]
    assert spec.gold_patch is None  # read from the repository by the pipeline
    meta = spec.provenance.metadata
    assert meta["slug"] == row["slug"] and meta["pr"] == row["pr"] and meta["issue"] is None
    assert meta["workflows"] == ["target:blank-title-rejected", "preservation:add-and-complete"]
    assert spec.grading.rule == "judge" and spec.grading.workflows == row["workflows"]


@pytest.mark.parametrize(
    ("repo", "name"),
    [
        ("https://github.com/samples/todo-web", "samples/todo-web"),
        ("https://github.com/samples/todo-web.git", "samples/todo-web"),
        ("https://github.com/samples/todo-web/", "samples/todo-web"),
        ("git@github.com:samples/todo-web.git", "samples/todo-web"),
        ("ssh://git@example.org:2222/samples/todo-web.git", "samples/todo-web"),
        ("samples/todo-web", "samples/todo-web"),
    ],
)
def test_sweeper_repo_url_to_owner_name(repo: str, name: str) -> None:
    assert _spec(_row(TODO, repo=repo)).repo.name == name


@pytest.mark.parametrize(
    "repo", ["https://github.com", "https://github.com/", "http://example.com"]
)
def test_repo_url_without_owner_and_name_is_refused(repo: str) -> None:
    with pytest.raises(RowError, match="not a repository"):
        repo_name(repo, "t", "repo")


@pytest.mark.parametrize(
    ("prompt", "column"), [("scoped", "task_scoped"), ("specified", "task_specified")]
)
def test_sweeper_prompt(prompt: str, column: str) -> None:
    row = _row(TODO)
    spec = _spec(row, prompt=prompt)
    assert spec.instruction == row[column]
    assert spec.provenance.metadata["prompt"] == column


def test_sweeper_without_recipe_leaves_the_start_to_detection() -> None:
    g = _spec(_row(TODO)).grading
    assert g.app_start is None and g.app_port is None and g.app_start_how is None


@pytest.mark.parametrize(
    ("recipes", "start", "port"),
    [
        ({"todo-web": {"start_command": "node server.js", "port": 8080}}, "node server.js", 8080),
        ({"todo-web": {"start_command": "npm start"}}, "npm start", A.SWEEPER_DEFAULT_PORT),
        (
            {
                "todo-web": {"start_command": "by slug", "port": 1},
                TODO: {"start_command": "by case", "port": 2},
            },
            "by case",
            2,
        ),
    ],
    ids=["slug", "slug-default-port", "case-id-wins"],
)
def test_sweeper_recipe_gives_the_app_start(
    recipes: dict[str, dict[str, Any]], start: str, port: int
) -> None:
    g = _spec(_row(TODO), recipes=Recipes(recipes)).grading
    assert (g.app_start, g.app_port, g.app_start_how) == (start, port, "recipe")


@pytest.mark.parametrize(
    ("recipe", "field"),
    [
        ({"port": 8080}, "recipes[todo-web].start_command"),
        ({"start_command": "npm start", "port": 70000}, "recipes[todo-web].port"),
        ({"start_command": "npm start", "port": "80"}, "recipes[todo-web].port"),
    ],
)
def test_sweeper_bad_recipe(recipe: dict[str, Any], field: str) -> None:
    with pytest.raises(RowError) as caught:
        _spec(_row(TODO), recipes=Recipes({"todo-web": recipe}))
    assert caught.value.field == field


def test_sweeper_workflows_keep_extra_tests() -> None:
    row = _row(TODO)
    doc = yaml.safe_load(row["workflows"])
    extra = dict(doc["tests"][1], id="filter-still-works")
    doc["tests"].append(extra)
    row["workflows"] = yaml.safe_dump(doc, sort_keys=False)
    assert _spec(row).provenance.metadata["workflows"][-1] == "preservation:filter-still-works"


# ============================================================================== every schema

ADAPT: dict[str, Callable[[Row], TaskSpec]] = {
    "swebench": lambda row: _spec(row, prebuilt="always"),
    "swe-rebench": lambda row: _spec(row),
    "ec-swe": lambda row: _spec(row),
    "pdl": lambda row: _spec(row),
    "sweeper": lambda row: _spec(row),
}


@pytest.mark.parametrize(
    ("task", "schema"),
    [
        (TEXTKIT, "swebench"),
        (INTSET, "swe-rebench"),
        (KV, "ec-swe"),
        (INV, "pdl"),
        (TODO, "sweeper"),
    ],
)
def test_every_sample_adapts_with_its_schema(task: str, schema: str) -> None:
    row = _row(task)
    spec = ADAPT[schema](row)
    assert spec.provenance.schema_name == schema
    assert spec.task_id == task and spec.instruction
    assert spec.provenance.dataset == "cards" and spec.provenance.split == "test"


def test_oracle_text_is_never_the_instruction() -> None:
    row = _row(TEXTKIT)
    assert row["text"] != row["problem_statement"]
    assert _spec(row, prebuilt="always").instruction == row["problem_statement"]


# --------------------------------------------------------------------------- patches (diffs)


def test_directives_unquote_names_git_quotes() -> None:
    # The harness's regex missed a C-quoted `diff --git` line; packager.diffs reads it.
    patch = (
        'diff --git "a/tests/test_caf\\303\\251.py" "b/tests/test_caf\\303\\251.py"\n'
        "diff --git a/tests/test_plain.py b/tests/test_plain.py\n"
    )
    assert recipe_adapter.test_directives(patch) == ("tests/test_café.py", "tests/test_plain.py")


def test_check_patch_reads_paths_from_file_headers_only() -> None:
    from packager.adapters.common import check_patch

    # A removed SQL comment `--- ../notes` is a hunk line, not a path (it used to be checked).
    text = "--- a/db.sql\n+++ b/db.sql\n@@ -1,2 +1,2 @@\n--- ../notes\n+-- notes\n keep\n"
    assert check_patch(text, "t", "patch") == text
    with pytest.raises(RowError, match="'..'"):
        check_patch("--- a/x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "t", "patch")
    renamed = "diff --git a/x b/../y\nsimilarity index 100%\nrename from x\nrename to ../y\n"
    with pytest.raises(RowError, match="'..'"):
        check_patch(renamed, "t", "patch")
    binary = "diff --git a/../x b/y\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n"
    with pytest.raises(RowError, match="'..'"):
        check_patch(binary, "t", "patch")
    with pytest.raises(RowError, match="unified diff"):
        check_patch("diff --git a/m b/m\nold mode 100644\nnew mode 100755\n", "t", "patch")


def test_pdl_hidden_patch_must_add_every_file() -> None:
    from packager.adapters.pdl import check_hidden_patch

    new = "--- /dev/null\n+++ b/tests/hidden/test_{n}.py\n@@ -0,0 +1 @@\n+x = {n}\n"
    both = new.format(n=1) + new.format(n=2)
    assert check_hidden_patch(both, "t") == ("tests/hidden/test_1.py", "tests/hidden/test_2.py")
    # A plain patch whose second file changes an existing one (once missed: the whole text was
    # one block holding a `--- /dev/null`).
    edit = "--- a/tests/hidden/test_2.py\n+++ b/tests/hidden/test_2.py\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(RowError, match="must only add files"):
        check_hidden_patch(new.format(n=1) + edit, "t")
    with pytest.raises(RowError, match="belong under"):
        check_hidden_patch(new.format(n=1).replace("tests/hidden/", "tests/"), "t")
