"""The SWE-bench harness's environment specs shipped in packager/datasets/harness_specs.json are the
pinned release's own (swebench 4.1.0, installed test-only into .venv/swebench-4.1.0 by
`make install`), and a spec becomes the recipe the harness means.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from packager.datasets import harness_specs
from tests.conftest import ROOT

RELEASE = ROOT / ".venv" / "swebench-4.1.0"
SHIPPED = ROOT / "packager" / "datasets" / "harness_specs.json"


def test_shipped_specs_equal_the_pinned_release(tmp_path: Path) -> None:
    if not (RELEASE / "swebench" / "harness" / "constants").is_dir():
        pytest.fail(
            f"swebench 4.1.0 is not installed at {RELEASE}. Fix: `make install` (or "
            f"`pip install --no-deps --target {RELEASE} -r requirements-specs.txt`)",
            pytrace=False,
        )
    out = tmp_path / "specs.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "harness_specs.py"), "--swebench", str(RELEASE),
         "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == SHIPPED.read_bytes(), "regenerate with `make specs`"
    # The release's own module, imported afresh, agrees on the headline table as well.
    probe = (
        "import json, sys, types\n"
        f"root = {str(RELEASE / 'swebench')!r}\n"
        "for name, path in (('swebench', root), ('swebench.harness', root + '/harness')):\n"
        "    m = types.ModuleType(name); m.__path__ = [path]; sys.modules[name] = m\n"
        "from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS as S\n"
        "print(json.dumps(S, sort_keys=True))\n"
    )
    direct = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(direct) == json.loads(SHIPPED.read_text())["specs"]


def test_the_tables_cover_what_the_harness_evaluates() -> None:
    tables = harness_specs.tables()
    assert tables["source"] == "swebench==4.1.0"
    assert len(tables["specs"]) == 66
    python = [repo for repo, ext in tables["extensions"].items() if ext == "py"]
    assert "django/django" in python and "sympy/sympy" in python
    assert tables["parsers"]["django/django"] == "parse_log_django"


def test_a_spec_becomes_a_recipe_with_the_per_repository_tables() -> None:
    django = harness_specs.harness_recipe("django/django", "3.0")
    assert django is not None
    assert django["python"] == "3.6" and django["packages"] == "requirements.txt"
    assert django["reqs_path"] == ["tests/requirements/py3.txt"]
    assert django["log_parser"] == "parse_log_django"
    assert any("locale-gen" in c for c in django["eval_commands"])
    xarray = harness_specs.harness_recipe("pydata/xarray", "2022.06")
    assert xarray is not None and xarray["env_yml_path"][0].endswith("environment.yml")
    assert harness_specs.harness_recipe("django/django", "0.0") is None
    assert harness_specs.harness_recipe("nobody/nothing", "1.0") is None
    assert harness_specs.language("sympy/sympy") == "python"
    assert harness_specs.language("nobody/nothing") is None
