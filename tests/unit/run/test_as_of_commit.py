"""`--as-of setup-commit`: a real SWE-bench row resolves as of its environment setup commit's
committer date, read from the repository source (a published bundle of the real repository)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from packager.adapters import Context, to_spec
from packager.errors import RowError
from packager.run.resolve import resolve_spec
from tests.conftest import REALROWS_BUNDLE, REALROWS_ROWS

ROW = json.loads(REALROWS_ROWS.read_text().splitlines()[0])


def test_the_setup_commit_dates_the_environment(tmp_path: Path) -> None:
    clone = tmp_path / "marshmallow.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(REALROWS_BUNDLE), str(clone)], check=True)
    setup = ROW["environment_setup_commit"]
    seconds = subprocess.run(
        ["git", "--git-dir", str(clone), "log", "-1", "--format=%ct", setup],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.strip()
    expected = datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    spec = to_spec(ROW, Context("lite", "dev", as_of="setup-commit"))
    assert spec.environment.as_of is None and spec.environment.as_of_commit == setup
    done = resolve_spec(spec, {ROW["repo"]: str(clone)})
    assert done.environment.as_of == expected
    assert done.environment.as_of_commit is None
    assert done.provenance.metadata["resolved_as_of"] == expected
    # created_at is a different moment: the rules are not the same rule
    created = to_spec(ROW, Context("lite", "dev", as_of="created")).environment.as_of
    assert created is not None and created != expected


def test_a_setup_commit_missing_from_the_source_names_the_field(tmp_path: Path) -> None:
    clone = tmp_path / "marshmallow.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(REALROWS_BUNDLE), str(clone)], check=True)
    row = {**ROW, "environment_setup_commit": "0" * 40}
    spec = to_spec(row, Context("lite", "dev", as_of="setup-commit"))
    with pytest.raises(RowError) as caught:
        resolve_spec(spec, {ROW["repo"]: str(clone)})
    assert caught.value.field == "environment_setup_commit"
    assert "0" * 40 in str(caught.value)


def test_published_resolves_as_of_the_harness_validation_or_the_row_when_later() -> None:
    """The default rule: a harness spec's environment as of when the specs were validated
    (Verified's publication); a row made after that as of its own date; a recipe that names
    no date as of now, and one that does as of it."""
    from packager.datasets.harness_specs import HARNESS_VALIDATED_AS_OF
    from packager.datasets.recipes import Recipes

    assert Context("lite", "dev").as_of == "published"
    spec = to_spec(ROW, Context("lite", "dev"))
    assert spec.environment.as_of == f"{HARNESS_VALIDATED_AS_OF}T00:00:00Z"
    assert spec.provenance.metadata["resolved_as_of"] == spec.environment.as_of
    later = to_spec({**ROW, "created_at": "2025-03-04T05:06:07Z"}, Context("lite", "dev"))
    assert later.environment.as_of == "2025-03-04T05:06:07Z"
    assert to_spec(ROW, Context("lite", "dev", as_of="none")).environment.as_of is None

    key = f"{ROW['repo']}@{ROW['version']}"
    recipe = {"python": "3.9", "install": "pip install -e .", "test_cmd": "pytest -rA"}
    undated = Context("lite", "dev", recipes=Recipes({key: recipe}))
    assert to_spec(ROW, undated).environment.as_of is None
    dated = Context(
        "lite", "dev", recipes=Recipes({key: {**recipe, "validated_as_of": "2021-05-06"}})
    )
    assert to_spec(ROW, dated).environment.as_of == max(
        "2021-05-06T00:00:00Z",
        to_spec(ROW, Context("lite", "dev", as_of="created")).environment.as_of,
    )
    bad = Context("lite", "dev", recipes=Recipes({key: {**recipe, "validated_as_of": "soon"}}))
    with pytest.raises(RowError) as caught:
        to_spec(ROW, bad)
    assert caught.value.field.endswith("validated_as_of")
