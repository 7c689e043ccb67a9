"""TaskSpec: the one dataset-independent description of a task, plus result models.

Adapters build a TaskSpec from a row; every later stage reads only this. Models are frozen and
validated; nothing here does I/O or knows a dataset's column names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from packager.registry import SchemaName

Parser = str
"""A parser of the grading runtime (`packager.grading.parsers.PARSERS`)."""
JsonValue = str | int | float | bool | None | list[str]
Rule = Literal["all_pass", "formula", "script", "judge"]
Status = Literal[
    "verified",
    "gold_failed",
    "nop_solved",
    "flaky",
    "build_failed",
    "infra_error",
    "needs_judge",
    "needs_network",
    "nop_mismatch",
    "leak",
    "rendered",
    "built",
]


class Frozen(BaseModel):
    """Base for immutable, strictly validated models."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Provenance(Frozen):
    """Where a task comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=True)
    """`schema_name` holds the schema's plain string (what every output file writes)."""

    dataset: str
    split: str
    schema_name: SchemaName
    instance_id: str
    slug: str
    language: str = "unknown"
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Row facts that travel into task.toml's metadata (e.g. PDL tier, token budget)."""


class Repo(Frozen):
    """The repository the agent works in."""

    name: str
    base_commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    files: dict[str, bytes] | None = None
    """Inline repositories (PDL): the whole tree; the base commit is made from it."""
    setup_patch: str | None = None
    """Applied to the working tree in the agent image, uncommitted (so the diff base stays)."""
    reference_commit: str | None = None
    """Gold given as a later commit (SWEeper); the diff is read from the repo source."""
    workdir: str = "/testbed"
    history: Literal["full", "base-only"] = "full"
    """`full`: the history up to base_commit; `base-only`: one commit holding the base tree."""
    diff_base: str | None = None
    """The snapshot's HEAD when it differs from base_commit (history `base-only`)."""

    @property
    def head(self) -> str:
        """The commit the agent image's repository is at: candidate diffs are taken from it."""
        return self.diff_base or self.base_commit


class Environment(Frozen):
    """How the agent image's system is made before the repository goes in."""

    base_image: str = "debian:bookworm-slim"
    dockerfile: str | None = None
    """A row's own Dockerfile text (EC-SWE); its FROM names the base. A clone of the task's
    repository in it has been replaced by the snapshot (`snapshot_at` marks where)."""
    prebuilt: bool = False
    """`base_image` is a published harness image that already holds the repository at the
    workdir; its history is cut again and the snapshot replaces its `.git`."""
    python: str | None = None
    """Interpreter version of a Python recipe: a venv at /opt/venv comes first on PATH."""
    requirements: dict[str, bytes] = Field(default_factory=dict)
    """Requirement files installed with `pip install -r`, in order (name -> content)."""
    requirements_paths: tuple[str, ...] = ()
    """Candidate requirement files, the first that exists in the repository at
    `source_commit` to be read (the pipeline resolves it into `requirements`; adapters do no
    I/O)."""
    conda_env_paths: tuple[str, ...] = ()
    """Candidate environment.yml files, likewise; read as pip requirements
    (packager.datasets.conda)."""
    source_commit: str | None = None
    as_of: str | None = None
    """pip resolves as of this moment (`2019-08-21T15:45:13Z`): only files the index had
    received before it are offered (`--as-of`; packager.images.timemachine). None: as of now."""
    validated_as_of: str | None = None
    """When the environment's recipe was validated against its rows (a UTC stamp; the recipe
    key `validated_as_of`, the harness specs' HARNESS_VALIDATED_AS_OF): `--as-of published`,
    the default, resolves as of it (or the row's own date when that is later)."""
    as_of_commit: str | None = None
    """`--as-of setup-commit`: resolve as of this commit's committer date, read by the pipeline
    from the repository source (adapters do no I/O), which then sets `as_of` and clears this."""
    drop_unavailable: bool = True
    """Requirements converted from conda package names (`A.conda_derived` files) that pip
    cannot install are dropped and recorded rather than failing the build (False:
    `--strict-environment`)."""
    pip_packages: tuple[str, ...] = ()
    """Packages installed with pip after the requirement files."""
    packages: tuple[str, ...] = ()
    """Debian packages installed as root."""
    pre_install: tuple[str, ...] = ()
    """Shell commands run as root in the workdir once the repository is in (before `install`;
    the harness runs them after its clone)."""
    install: tuple[str, ...] = ()
    """Shell commands run in the workdir after `pre_install`."""
    env: dict[str, str] = Field(default_factory=dict)
    """ENV lines of the agent image, right after FROM; `$VAR` expands as Docker expands it, and
    grading runs with the image's resulting environment (never these literals)."""
    network: bool = False
    """Whether the agent phase may use the network."""
    shell_setup: str | None = None
    """Shell run before every test command (activating a harness image's conda env)."""
    toolchain: str | None = None
    """The recipe's toolchain besides Python (`node`, `c`, `go`, `rust`, `java`, `php`,
    `ruby`): before building, the repository's manifests are checked for a package registry
    this machine cannot reach (packager.toolchains)."""
    installers_out: tuple[str, ...] = ()
    """Installers (`pip`, `setuptools`) the agent image must not hold: each carries a later copy
    of the package under test (packager.datasets.vendored). Build steps get them for the step
    only; the grader image gets them back."""
    vendored_package: str | None = None
    """The package under test's import name when `installers_out` is set."""
    cpus: float | None = None
    """CPUs the task's containers get (the harness's `nano_cpus`: tests that need two cores
    skip themselves in a container whose CPU share reads as one); None = the engine's default."""


class Criterion(Frozen):
    """One weighted criterion of a script grader (weights of a task sum to 100)."""

    name: str
    weight: float
    description: str = ""


SERVICES_ROOT = "/opt/packager-services"
"""Where each stand-in service's virtualenv is in the grader image, one folder per name."""


class Service(Frozen):
    """A stand-in service the grader serves on loopback for the test command
    (packager/datasets/services.yaml).
    """

    name: str
    packages: tuple[str, ...]
    """pip requirements of its own virtualenv in the grader image."""
    command: str
    python: str
    """That virtualenv's interpreter."""
    port: int
    env: dict[str, str] = Field(default_factory=dict)
    """Given to the test command (also in Grading.env)."""


class Grading(Frozen):
    """How the grader image decides the reward; serialised into plan.json."""

    rule: Rule
    parser: Parser = "pytest"
    test_command: str | None = None
    timeout_sec: int = 600
    env: dict[str, str] = Field(default_factory=dict)
    test_patch: str | None = None
    hidden_files: dict[str, bytes] = Field(default_factory=dict)
    protected_paths: tuple[str, ...] = ()
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    formula: str | None = None
    hidden_tests: tuple[str, ...] = ()
    public_tests: tuple[str, ...] = ()
    build_command: str | None = None
    patch_allowed: tuple[str, ...] = ()
    patch_forbidden: tuple[str, ...] = ()
    grader_command: str | None = None
    grader_dir: str = "."
    """The scoring script's folder among the grader files (its working directory)."""
    grader_files: dict[str, bytes] = Field(default_factory=dict)
    criteria: tuple[Criterion, ...] = ()
    workflows: str | None = None
    """SWEeper behaviour workflows (YAML text), judged by a model in a browser."""
    app_start: str | None = None
    """SWEeper: the command that starts the web app (with PORT set), and how it was found."""
    app_port: int | None = None
    app_start_how: str | None = None
    refresh_requirements: tuple[str, ...] = ()
    """Requirements the gold patch declares (packager.adapters.declared): the grader image holds
    wheels of them (and of pip's build tools) in REFRESH_WHEELS, never the agent image."""
    refresh_command: str | None = None
    """The environment's install step, re-run by the grading runtime offline (from those wheels)
    after a candidate is applied, as the harness re-runs it with the network."""
    services: tuple[Service, ...] = ()
    """Stand-in services started before the test command (their `env` is in `env`)."""
    unroutable: tuple[str, ...] = ()
    """IPv4 addresses the tests expect no answer from (services.yaml): the grading runtime routes
    them into loopback, so a connect waits as on a real network instead of failing at once."""

    @property
    def browser_judged(self) -> bool:
        """Graded by a model driving a browser against a web app (the `judge` rule, SWEeper):
        its web app is started and probed before the runs, the judge image runs beside the
        grader on a network of its own, and the grading needs the judge's model endpoint. The
        one place the packager asks which rule that is.
        """
        return self.rule == "judge"

    network: bool = False
    """Whether the grader container has the network (`--grader-network public`); a browser
    judge's grader has it regardless (it reaches its model)."""
    build_health: Literal["command", "collected"] = "command"
    """formula rule: `command` = build_command exits 0 (none = 1); `collected` = the test run
    got as far as collecting and running tests (docs/grading.md)."""

    @model_validator(mode="after")
    def _rule_has_what_it_needs(self) -> Grading:
        if self.rule == "all_pass" and not self.fail_to_pass:
            raise ValueError("all_pass grading needs at least one FAIL_TO_PASS test")
        if self.rule == "script":
            if not self.grader_command:
                raise ValueError("script grading needs a grader command")
            if self.criteria and abs(sum(c.weight for c in self.criteria) - 100.0) > 1e-6:
                raise ValueError("criterion weights must sum to 100")
        if self.rule == "formula" and not self.formula:
            raise ValueError("formula grading needs a formula")
        return self


class Expectations(Frozen):
    """What verification must see."""

    gold_reward: float = 1.0
    nop_reward: float | None = None
    """The row's own base reward (EC-SWE base_reward, PDL floor), when it gives one."""


class Calibration(Frozen):
    """Limits derived from a task's measured gold runs (`checks/resources.py`), stated in its
    task.toml once it is verified (`stages.calibrate`).
    """

    cpus: int
    memory_limit_mb: int
    storage_limit_mb: int
    verifier_timeout_sec: float


class TaskSpec(Frozen):
    """Everything needed to render, build and verify one task."""

    provenance: Provenance
    instruction: str
    repo: Repo
    environment: Environment = Environment()
    gold_patch: str | None
    grading: Grading
    expectations: Expectations = Expectations()
    agent_timeout_sec: int = 3600
    calibration: Calibration | None = None
    """The limits its last verification measured (read back at render, so the task.toml a
    rerun renders is the one it verified)."""

    @property
    def task_id(self) -> str:
        """The instance id this task was made from."""
        return self.provenance.instance_id


class RunResult(Frozen):
    """One oracle or nop run."""

    kind: Literal["oracle", "nop", "patch"]
    reward: float | None
    subscores: dict[str, float] = Field(default_factory=dict)
    grade_status: str
    reason: str | None = None
    duration_sec: float
    log_dir: str
    apply_log: str | None = None
    """Oracle runs whose gold patch did not apply: the log saying why (solve.sh or grader)."""
    apply_excerpt: str | None = None
    judge: dict[str, Any] | None = None
    """A browser judge's run: per workflow its outcome, reason, model calls, tokens, seconds
    and screenshot; and the totals."""
    tests_run: int | None = None
    """How many tests the test command's output reported (None: no test command ran)."""
    exit_code: int | None = None
    """The test command's exit code."""
    test_tail: str | None = None
    """What the test output says went wrong (its first error, else its last lines), kept when
    it reported no test at all (`engines.excerpts.output_excerpt`)."""
    nested_ids: list[str] | None = None
    """Listed PASS_TO_PASS ids only a pytest run nested in the output answered (read as the
    harness's line parser reads them): a label finding (grading/runner_pytest.py,
    `nested_statuses`)."""
    suspicious: list[str] | None = None
    """`path:line what` of the patch's lines the grading runtime's scan flagged for review, not
    scored: runner internals the repository's own code also uses, or a test file using them
    (grading/scan.py)."""
    network_hosts: list[str] | None = None
    """The test output shows a failed attempt to reach the network (grading is offline): the
    hosts it names, possibly none (`engines.excerpts.network_hosts`); None when it shows none."""
    perturbation: str | None = None
    """A perturbed gold run: what was changed (`engines.perturb`: shuffle, cpus, clock)."""
    perturbation_note: str | None = None
    """Why the perturbation did not take (a runner that cannot shuffle): the run is then a
    plain repeat."""
    resources: dict[str, float] | None = None
    """What the grader's container used, read from its cgroup when grading ended:
    `memory_peak_mb`, `cpu_sec` (`grading/processes.cgroup_usage`); None when not measured."""


class TaskResult(Frozen):
    """The latest verification of one task (written to results/<task>.json)."""

    task: str
    instance_id: str
    dataset: str
    status: Status
    reason: str | None = None
    engine: str
    images: dict[str, str] = Field(default_factory=dict)
    image_ids: dict[str, str] = Field(default_factory=dict)
    """The images' ids when verified: a rerun skips the task only for the very same images."""
    oracle: tuple[RunResult, ...] = ()
    nop: RunResult | None = None
    more_nops: tuple[RunResult, ...] = ()
    """The nop runs after the first (`--runs G,N` with N > 1)."""
    perturbed: tuple[RunResult, ...] = ()
    """Perturbed gold runs (`--perturb`), after the plain ones."""
    stability: dict[str, Any] | None = None
    """Each listed test's outcome in every run, the tests whose outcome changed and the
    perturbation that changed it, the runs and their added seconds (`checks/stability.py`)."""
    expected_nop: float | None = None
    durations: dict[str, float] = Field(default_factory=dict)
    logs: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, Any] | None = None
    """The dataset's labels checked against the runs (`checks/labels.py`): findings
    (label_missing, label_ambiguous, label_differs) and counts of labels derived from the runs."""
    node: str | None = None
    """The cluster node that built and verified the task (`--executor ray`), else None."""
    registry_images: dict[str, str] = Field(default_factory=dict)
    """Role → `host/ns/name@sha256:…` of the images pushed to `--registry` by the task's job."""
    resources: dict[str, float] | None = None
    """Measured on the gold runs (`checks/resources.py`): the largest peak memory, CPU seconds
    and wall seconds of a run, and the limits they suggest with their margin."""
    task_digest: str | None = None
    """The task folder's content digest (Harbor's, as dataset.toml names it) when its images
    were built: `publish` releases the folder only while it still has these bytes."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Where the agent image's environment came from and what it runs on: `source` (a recipe
    key, the row's install_config, the harness spec, a published image), `python_requested` /
    `python_used` / `python_base`, and `flattened_from` when a published image was flattened."""
