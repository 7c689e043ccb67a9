"""SWE-bench (full, Lite, Verified, `_oracle`) and SWE-rebench rows → TaskSpec (`all_pass`).

The SWE-bench card's rows carry nothing about environments. Where a row's environment comes
from, most specific first: a `--recipes` entry for the instance, for `owner/name@version`, for
`owner/name`; the row's own `install_config` (SWE-rebench); the SWE-bench harness's own spec for
`(repo, version)` (packager.datasets.harness_specs). A published harness image (`docker_image`, or
the harness naming with `--prebuilt always`) replaces the environment, keeping the recipe's test
side. The full SWE-rebench also carries `requirements` (the environment's `pip freeze`),
installed as the exact pin set when building from the recipe.

Quirks owned here: FAIL_TO_PASS/PASS_TO_PASS arrive as JSON strings (or lists, as in SWE-bench
Multilingual, whose rows also lack `environment_setup_commit`: assumptions.MISSING_ENV_COMMIT);
`install_config`/`meta` as JSON strings or dicts; `_oracle` rows carry `text`, a retrieval
prompt that names the files to change, so it is never the instruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packager import assumptions as A
from packager.adapters import Context, row_id
from packager.adapters.common import check_patch, get_sha, get_str, parse_list, parse_mapping
from packager.adapters.recipe import PythonPolicy, RecipeResult, make_recipe
from packager.datasets.harness_parsers import not_test_ids
from packager.datasets.harness_specs import harness_recipe
from packager.datasets.harness_specs import language as harness_language
from packager.datasets.harness_specs import source as harness_source
from packager.datasets.recipes import recipe_keys
from packager.errors import RowError
from packager.models.spec import Environment, Grading, Provenance, Repo, TaskSpec
from packager.registry import SchemaName
from packager.render.naming import make_slug
from packager.toolchains import LANGUAGE_BY_PARSER, LANGUAGE_BY_TOOLCHAIN

_TEST_KEYS = ("test_cmd", "log_parser", "timeout", "env_vars", "eval_commands", "nano_cpus")


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWE-bench row."""
    return to_spec_with(row, ctx, schema=SchemaName.SWEBENCH)


def to_spec_multilingual(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWE-bench Multilingual row (no `environment_setup_commit`)."""
    return to_spec_with(row, ctx, schema=SchemaName.SWEBENCH_MULTILINGUAL)


def to_spec_rebench(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one SWE-rebench row."""
    return to_spec_with(row, ctx, schema=SchemaName.SWE_REBENCH)


def _row_image(row: Mapping[str, Any], ctx: Context, task: str) -> str | None:
    """The published image this row runs in, per `--prebuilt` (None: build from a recipe)."""
    if ctx.prebuilt == "never":
        return None
    named = row.get("docker_image") or row.get("image_name")
    if named is not None and not isinstance(named, str):
        raise RowError(task, "docker_image", "expected a string")
    if ctx.prebuilt == "always":
        return named or A.harness_image_name(task)
    if named and ctx.has_image(named):
        return named
    return None


def _recipe_source(
    row: Mapping[str, Any], ctx: Context, task: str, repo: str, version: str | None
) -> tuple[tuple[str, dict[str, Any]] | None, str, dict[str, Any], str]:
    """Where the row's environment comes from, most specific first: a `--recipes` entry (for
    the instance, `owner/name@version`, `owner/name`), the row's own install_config, the
    harness's spec. Returns the recipe entry found, the field errors name, the recipe, and the
    source as task metadata says it ("" when there is none).
    """
    row_config = parse_mapping(row.get("install_config"), task, "install_config")
    # A row's own install_config is overridden only by a recipe naming that very row.
    found = ctx.recipes.find([task] if row_config else recipe_keys(task, repo, version))
    if found is not None:
        return found, f"recipes[{found[0]}]", found[1], f"recipe {found[0]}"
    if row_config:
        return None, "install_config", row_config, "install_config"
    builtin = harness_recipe(repo, version)
    if builtin is not None:
        origin = f"harness spec {repo}@{version}"
        return None, origin, builtin, f"{origin} ({harness_source()})"
    return None, "install_config", {}, ""


def _prebuilt(environment: Environment, image: str) -> Environment:
    """A published image's environment: it holds the repository and its environment, the
    recipe (when given) only contributes its test command, parser, variables and cpus.
    """
    return Environment(
        base_image=image,
        prebuilt=True,
        shell_setup=A.HARNESS_CONDA_ACTIVATE,
        env=environment.env,
        cpus=environment.cpus,
    )


def _graded_ids(
    row: Mapping[str, Any], task: str, parser: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """FAIL_TO_PASS and PASS_TO_PASS without the ids no test can have (runner output a harness
    parser misread: they grade nothing either way), and those ids, which the task's metadata
    names, never silently.
    """
    f2p = parse_list(row.get("FAIL_TO_PASS"), task, "FAIL_TO_PASS", allow_empty=False)
    p2p = parse_list(row.get("PASS_TO_PASS"), task, "PASS_TO_PASS")
    noise = not_test_ids(parser, (*f2p, *p2p))
    f2p = tuple(t for t in f2p if t not in noise)
    p2p = tuple(t for t in p2p if t not in noise)
    if not f2p:
        raise RowError(task, "FAIL_TO_PASS", f"no test id left once {list(noise)} is set aside")
    return f2p, p2p, noise


def _metadata(
    recipe: RecipeResult, image: str | None, version: str | None, entry: str | None, source: str
) -> dict[str, Any]:
    """What the task's metadata says of its environment: where it comes from, which Python."""
    metadata: dict[str, Any] = {"environment": "image" if image else "recipe"}
    if version:
        metadata["version"] = version
    if entry is not None:
        metadata["recipe"] = entry
    metadata["environment_source"] = f"image {image}" if image else source
    if image is None and recipe.python is not None:
        metadata["python_requested"] = recipe.python.requested
        metadata["python_used"] = recipe.python.used
        metadata["python_base"] = f"{recipe.python.image} ({recipe.python.how})"
    if image is None and recipe.toolchain is not None:
        metadata["toolchain_requested"] = (
            f"{recipe.toolchain.name} {recipe.toolchain.requested}".strip()
        )
        metadata["toolchain_used"] = f"{recipe.toolchain.name} {recipe.toolchain.used}".strip()
        metadata["toolchain_base"] = f"{recipe.toolchain.image} ({recipe.toolchain.how})"
    if recipe.notes:
        metadata["recipe_notes"] = list(recipe.notes)
    return metadata


def _language(repo: str, recipe: RecipeResult) -> str:
    """The task's language: the harness's for its repository, else the recipe's toolchain's
    or its parser's, else Python.
    """
    named = harness_language(repo)
    if named:
        return named
    if recipe.toolchain is not None and recipe.toolchain.name in LANGUAGE_BY_TOOLCHAIN:
        return LANGUAGE_BY_TOOLCHAIN[recipe.toolchain.name]
    return LANGUAGE_BY_PARSER.get(recipe.parser, A.SWEBENCH_LANGUAGE)


def to_spec_with(row: Mapping[str, Any], ctx: Context, *, schema: SchemaName) -> TaskSpec:
    """Shared by SWE-bench and SWE-rebench: they differ only in where the recipe comes from."""
    task = row_id(row) or get_str(row, "?", "instance_id")
    repo = get_str(row, task, "repo")
    base = get_sha(row, task, "base_commit")
    version = row.get("version")
    version = str(version) if version not in (None, "") else None
    test_patch = check_patch(row.get("test_patch"), task, "test_patch")
    # Absent (SWE-bench Multilingual): read at the base commit (A.MISSING_ENV_COMMIT).
    env_commit = row.get("environment_setup_commit") or row.get(A.MISSING_ENV_COMMIT)
    if not isinstance(env_commit, str):
        raise RowError(task, "environment_setup_commit", "expected a commit id string")
    if version is not None and not isinstance(row.get("version"), str | int | float):
        raise RowError(task, "version", "expected a version string such as '3.9' or '4731'")

    found, field, config, source = _recipe_source(row, ctx, task, repo, version)
    image = _row_image(row, ctx, task)
    if not config and image is None:
        raise RowError(
            task,
            "install_config",
            f"no environment: the row carries none and the SWE-bench harness has no spec for "
            f"{repo}@{version}; give a recipe with --recipes (keys: {task!r}, "
            f"'{repo}@{version}' or {repo!r}) or use the published harness image with "
            "--prebuilt always",
        )
    if image is not None:
        # Only the test side of a recipe applies to a published image's environment.
        config = {k: v for k, v in config.items() if k in _TEST_KEYS}
    frozen = row.get("requirements")
    if frozen is not None and not isinstance(frozen, str):
        raise RowError(task, "requirements", "expected a pip freeze as text")
    recipe = make_recipe(
        config,
        task=task,
        field=field,
        test_patch=test_patch,
        pythons=PythonPolicy(
            ctx.base_images, ctx.python_available, ctx.python_fallback, ctx.toolchain_fallback
        ),
        env_commit=env_commit,
        frozen_requirements=frozen if (frozen and image is None) else None,
        language=harness_language(repo),
    )
    environment = recipe.environment if image is None else _prebuilt(recipe.environment, image)
    f2p, p2p, noise = _graded_ids(row, task, recipe.parser)
    metadata = _metadata(recipe, image, version, found[0] if found else None, source)
    if noise:
        metadata["ids_not_tests"] = list(noise)
    metadata["log_parser"] = recipe.harness_parser
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name=schema,
            instance_id=task,
            slug=make_slug(task),
            language=_language(repo, recipe),
            metadata=metadata,
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(name=repo, base_commit=base, workdir=A.SWEBENCH_WORKDIR, history=ctx.history),
        environment=environment,
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="all_pass",
            parser=recipe.parser,
            test_command=recipe.test_command,
            timeout_sec=recipe.timeout_sec,
            test_patch=test_patch,
            fail_to_pass=f2p,
            pass_to_pass=p2p,
        ),
    )
