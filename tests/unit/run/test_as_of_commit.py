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
