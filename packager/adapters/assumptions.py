"""Every choice made where a dataset card is silent, in one place (docs/datasets.md lists them).

The cards in `shared/seeds/` define which columns a row has and what they mean. Where a card
does not say something the packager must know (a test command, a workdir, where grader files
live, which interpreter), the answer is a constant here, never a literal in an adapter.
"""

from __future__ import annotations

DEFAULT_BASE_IMAGE = "debian:bookworm-slim"
"""The base of every image built from a recipe, unless a recipe or `--base-image` says else."""

DEBIAN_PYTHON = "3.11"
"""Debian bookworm's python3. A recipe asking for this version (or "3") uses it."""

VENV = "/opt/venv"
"""Python recipes install into this venv (Debian's python3 refuses pip installs, PEP 668);
made with --system-site-packages so Debian's python3-* packages stay importable."""

DEFAULT_TEST_TIMEOUT_SEC = 1800
"""The SWE-bench harness's per-instance test timeout, used where a row gives none."""

# ----------------------------------------------------------------------------- SWE-bench family

SWEBENCH_WORKDIR = "/testbed"
"""Where the harness (and its published images) keep the repository."""

SWEBENCH_LANGUAGE = "python"
"""SWE-bench and SWE-rebench rows carry no language column; their repositories are Python,
unless the recipe's parser says which runner (and so which language) the tests use."""

LANGUAGE_BY_PARSER = {"gotest": "go", "tap": "javascript"}

DEFAULT_LOG_PARSER = "parse_log_pytest"
"""A recipe without `log_parser` is graded as the harness grades most rows."""

DEFAULT_REQS_PATHS = ("requirements.txt",)
"""`packages: requirements.txt` without `reqs_path` reads this file (the harness keeps per-repo
paths in a table this tool does not carry; SWE-rebench rows name them in `reqs_path`)."""

DEFAULT_ENV_YML_PATHS = ("environment.yml",)

NON_TEST_EXTS = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)
"""Files of a test patch that are not test files (the harness's NON_TEST_EXTS): never passed to
the test command as directives."""

NO_DIRECTIVE_PARSERS = ("gotest", "tap", "junit", "doctest")
"""Runners whose test command takes no test-file arguments (the harness appends directives to
Python test commands only)."""


def directive_style(harness_parser: str, runtime_parser: str) -> str | None:
    """How test files are passed to the test command: paths, Django labels, or not at all."""
    if harness_parser == "parse_log_django":
        return "django"
    return None if runtime_parser in NO_DIRECTIVE_PARSERS else "path"


HARNESS_CONDA_ACTIVATE = (
    "if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate testbed; fi"
)
"""Published harness images keep the environment in conda env `testbed`; tests run inside it."""


def harness_image_name(instance_id: str, namespace: str = "swebench") -> str:
    """The SWE-bench harness's published per-instance image name (`--prebuilt`)."""
    return f"{namespace}/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


# ------------------------------------------------------------------------------------- EC-SWE

ECSWE_WORKDIR = "/workspace/repo"
"""The card: the agent's workspace is `/workspace/repo`."""

ECSWE_GRADER_ROOTS = ("grader", "grading", "protected")
"""The card: grader files live under one of these folders."""

ECSWE_ENTRY_STEMS = ("grade", "grader", "score", "run_grader")
ECSWE_ENTRY_SUFFIXES = (".py", ".sh")
"""The scoring script is the single file `<root>/<stem><suffix>` at the top of a grader folder
(or the one `--grader-entry` names)."""

ECSWE_INTERPRETERS = {".py": "python3", ".sh": "bash"}

ECSWE_GRADER_TIMEOUT_SEC = 1800

# ---------------------------------------------------------------------------------------- PDL

PDL_REPO_PREFIX = "pdl"
"""PDL rows have no `repo` column: the repository is named `pdl/<task_id>`."""

PDL_WORKDIR = "/testbed"
PDL_PYTHON = DEBIAN_PYTHON
"""PDL fixtures are Python tested with pytest; Debian's python3 and python3-pytest run them."""

PDL_PACKAGES = ("python3", "python3-pytest")
PDL_TEST_COMMAND = "python3 -m pytest -rA -p no:cacheprovider"
"""Followed by the test files named in FAIL_TO_PASS and PASS_TO_PASS."""

PDL_REQUIREMENTS_FILE = "requirements.lock"
PDL_NOP_VALUES = {"hidden_pass_fraction": 0.0, "public_regression": 1.0, "build_health": 1.0}
"""The untouched fixture: every hidden test fails, public tests pass, the suite collects."""

# ------------------------------------------------------------------------------------ SWEeper

SWEEPER_WORKDIR = "/app"
SWEEPER_DEFAULT_PORT = 3000
SWEEPER_LANGUAGE = "web"
