"""Every choice made where a dataset card is silent, in one place (docs/datasets.md lists them).

The cards in `shared/seeds/` define which columns a row has and what they mean. Where a card
does not say something the packager must know (a test command, a workdir, where grader files
live, which interpreter), the answer is a constant here, never a literal in an adapter.
"""

from __future__ import annotations

from packager.grading.parsers_js import PARSERS as JS_PARSERS

DEFAULT_BASE_IMAGE = "debian:bookworm-slim"
"""The base of every image built from a recipe, unless a recipe or `--base-image` says else."""

DEBIAN_PYTHON = "3.11"
"""Debian bookworm's python3. A recipe asking for this version (or "3") uses it."""

DEBIAN_PYTHON_SUITES: dict[str, str] = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
"""The Python each Debian release ships as its python3: the versions served from Debian's own
archive (seeded with debootstrap where no registry is reachable, packager.images.bases)."""


def debian_base_image(suite: str) -> str:
    """The slim Debian image of a release (`debian:bookworm-slim`)."""
    return f"debian:{suite}-slim"


VENV = "/opt/venv"
"""Python recipes install into this venv (Debian's python3 refuses pip installs, PEP 668);
made with --system-site-packages so Debian's python3-* packages stay importable."""

VENV_TOOLS = ("pip>=21.3,<25", "setuptools>=65,<70", "wheel")
"""What the venv's installers are, as in the harness's conda environments (2024: pip 24,
setuptools 69, wheel), installed before anything else when the recipe installs with pip.
Debian bullseye's venv ships pip 20.3, whose editable install of a pyproject.toml project
breaks with today's setuptools; pip 25 dropped the `setup.py develop` editable install that
projects without a pyproject.toml got (with `wheel` present) under the harness: the
finder-based one replacing it keeps the repository off sys.path, and tests that import it by
path fail (pylint-dev__pylint-4604)."""


def official_python_image(version: str) -> str:
    """The official image of a Python version (used where the engine has it or can pull it)."""
    return f"python:{version}-slim"


PYTHON_TOOLCHAIN_PACKAGES = (
    "build-essential",
    "ca-certificates",
    "curl",
    "git",
    "libffi-dev",
    "locales",
    "tzdata",
)
"""Debian packages every Python recipe's image gets first: what the SWE-bench harness's base
image (ubuntu with build-essential, locales, ...) gives the recipes written against it, so C
extensions compile, `locale-gen` in eval_commands works and pip reaches the index over TLS.
Debian's own python3 also brings python3-dev (headers) and python3-venv."""

DEFAULT_TEST_TIMEOUT_SEC = 1800
"""The SWE-bench harness's per-instance test timeout, used where a row gives none."""

# ----------------------------------------------------------------------------- SWE-bench family

SWEBENCH_WORKDIR = "/testbed"
"""Where the harness (and its published images) keep the repository."""

MISSING_ENV_COMMIT = "base_commit"
"""SWE-bench Multilingual rows carry no `environment_setup_commit` (its card is silent on where
an environment comes from; the harness builds each instance's environment from the repository
at its base commit): files a recipe reads (requirements, manifests) are read at `base_commit`."""

SWEBENCH_LANGUAGE = "python"
"""SWE-bench and SWE-rebench rows carry no language column; their repositories are Python,
unless the recipe's parser says which runner (and so which language) the tests use (a
toolchain profile's `parsers`, packager.toolchains)."""

DEFAULT_LOG_PARSER = "parse_log_pytest"
"""A recipe without `log_parser` is graded as the harness grades most rows."""

DEFAULT_REQS_PATHS = ("requirements.txt",)
"""`packages: requirements.txt` without `reqs_path` reads this file (the harness's specs name
their paths in its per-repository table, shipped in harness_specs.json; SWE-rebench rows name
them in `reqs_path`)."""

REQUIREMENT_LINES_DROPPED = ("-e .", "#", ".[test")
"""Requirement-file lines the harness leaves out (they install the repository itself, which
`install` does, or are comments)."""

DEFAULT_ENV_YML_PATHS = ("environment.yml",)

CONDA_PACKAGES_FILE = "conda-packages.txt"
"""The requirements file a recipe's conda package list (`packages: "numpy scipy=1.5"`) is
written to, as pip requirements (packager.datasets.conda)."""


def conda_derived(requirements_file: str) -> bool:
    """Whether an environment's requirements file was converted from conda package names (a
    recipe's conda list, or an environment.yml read from the repository): pip may lack some.
    """
    return requirements_file == CONDA_PACKAGES_FILE or requirements_file.endswith(
        (".yml.txt", ".yaml.txt")
    )


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

NATIVE_RUNNER_PARSERS = (
    "redis",
    "automake",
    "micropython",
    "googletest",
    "maven",
    "ant",
    "gradle",
    "phpunit_testdox",
    "minitest",
    "cucumber",
    "jekyll",
    "test_unit",
    "rspec_lines",
    "cargo",
)
"""The runtime's C/C++, Java, PHP, Ruby and Rust parsers (packager/grading/parsers_native.py)."""

NO_DIRECTIVE_PARSERS = ("gotest", "tap", "junit", "doctest", *NATIVE_RUNNER_PARSERS, *JS_PARSERS)
"""Runners whose test command takes no test-file arguments (the harness appends directives to
Python test commands only; a JavaScript spec's `test_cmd` names its files itself)."""


def directive_style(
    harness_parser: str, runtime_parser: str, language: str | None = None
) -> str | None:
    """How test files are passed to the test command: paths, Django labels, or not at all
    (the harness appends them to Python repositories' commands only).
    """
    if language not in (None, "python"):
        return None
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

# -------------------------------------------------------------- toolchains besides Python
# Each toolchain's versions, packages, environment and registry: packager/toolchains/.

NON_PYTHON_PACKAGES = ("ca-certificates", "curl", "git", "python3", "procps")
"""Every non-Python recipe's image gets these first: TLS roots and curl for the toolchains'
own downloads, git, python3 (>= 3.9 on every Debian served: the grading runtime is a Python
zipapp run with `python3 -I -S` in the grader image, FROM this one) and ps (test suites that
look for their servers' processes, redis' `runtest`)."""

SNAPSHOT_MARK = "# packager: the repository snapshot replaces the row's clone here"
"""The line an EC-SWE row's Dockerfile gets where its own clone of the repository was (the card
gives a Dockerfile that clones; the agent image takes the snapshot instead)."""
