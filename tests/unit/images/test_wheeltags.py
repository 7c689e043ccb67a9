"""Pins that follow the Python used (packager/images/wheeltags.py): wheel tags read as pip reads
them, and a pinned release without a wheel for the Python used moved within its series."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from packager.images import wheeltags


@pytest.mark.parametrize(
    ("filename", "python", "fits"),
    [
        ("numpy-1.23.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "3.10", True),
        ("numpy-1.23.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "3.11", False),
        ("numpy-1.23.5-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "3.11", True),
        ("numpy-1.23.5-cp311-cp311-macosx_11_0_arm64.whl", "3.11", False),
        ("numpy-1.23.5-cp311-cp311-manylinux_2_17_aarch64.whl", "3.11", False),
        ("cryptography-41.0.0-cp37-abi3-manylinux_2_28_x86_64.whl", "3.11", True),
        ("cryptography-41.0.0-cp37-abi3-manylinux_2_28_x86_64.whl", "3.6", False),
        ("six-1.16.0-py2.py3-none-any.whl", "3.11", True),
        ("tomli-2.0.1-py3-none-any.whl", "3.9", True),
        ("six-1.16.0.tar.gz", "3.11", False),
    ],
)
def test_wheel_fits(filename: str, python: str, fits: bool) -> None:
    assert wheeltags.wheel_fits(filename, python) is fits


def _page(*files: tuple[str, str]) -> dict[str, Any]:
    return {"files": [{"filename": f, "upload-time": t} for f, t in files]}


NUMPY = _page(
    ("numpy-1.23.0-cp310-cp310-manylinux_2_17_x86_64.whl", "2022-06-22T00:00:00Z"),
    ("numpy-1.23.0.tar.gz", "2022-06-22T00:00:00Z"),
    ("numpy-1.23.1-cp310-cp310-manylinux_2_17_x86_64.whl", "2022-07-08T00:00:00Z"),
    ("numpy-1.23.2-cp311-cp311-manylinux_2_17_x86_64.whl", "2022-08-14T00:00:00Z"),
    ("numpy-1.23.5-cp311-cp311-manylinux_2_17_x86_64.whl", "2022-11-20T00:00:00Z"),
    ("numpy-1.24.0-cp311-cp311-manylinux_2_17_x86_64.whl", "2022-12-18T00:00:00Z"),
    ("numpy-1.23.6rc1-cp311-cp311-manylinux_2_17_x86_64.whl", "2022-12-01T00:00:00Z"),
)


@pytest.fixture
def pages(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    known: dict[str, dict[str, Any]] = {
        "numpy": NUMPY,
        "six": _page(("six-1.16.0-py2.py3-none-any.whl", "2021-05-05T00:00:00Z")),
        "pycairo": _page(("pycairo-1.20.0.tar.gz", "2020-10-05T00:00:00Z")),
    }
    monkeypatch.setattr(wheeltags, "cached_page", known.get)
    wheeltags.moved_pin.cache_clear()  # kept per process: not the pages of other tests
    yield known
    wheeltags.moved_pin.cache_clear()


def test_a_pin_without_a_wheel_for_the_python_moves_within_its_series(pages: Any) -> None:
    assert wheeltags.moved_pin("numpy", "1.23.0", "3.11", None) == "1.23.5"  # not 1.24, not rc
    # as of a date: the newest of the series released before it
    assert wheeltags.moved_pin("numpy", "1.23.0", "3.11", "2022-09-01T00:00:00Z") == "1.23.2"
    # none before the date: the first after it
    assert wheeltags.moved_pin("numpy", "1.23.0", "3.11", "2022-07-01T00:00:00Z") == "1.23.2"


def test_pins_that_fit_or_ship_no_wheels_stay(pages: Any) -> None:
    assert wheeltags.moved_pin("numpy", "1.23.0", "3.10", None) is None
    assert wheeltags.moved_pin("six", "1.16.0", "3.11", None) is None
    assert wheeltags.moved_pin("pycairo", "1.20.0", "3.11", None) is None  # an sdist: built here
    assert wheeltags.moved_pin("unknown", "1.0", "3.11", None) is None
    assert wheeltags.moved_pins([("numpy", "1.23.0"), ("six", "1.16.0")], "3.11", None) == {
        ("numpy", "1.23.0"): "1.23.5"
    }


def test_a_spec_for_another_python_has_its_pins_moved_and_recorded(pages: Any) -> None:
    from packager.models.spec import Environment, Grading, Provenance, Repo, TaskSpec
    from packager.run.resolve import _pins_follow_python

    spec = TaskSpec(
        provenance=Provenance(
            dataset="d",
            split="test",
            schema_name="swebench",
            instance_id="o__r-1",
            slug="o__r-1",
            metadata={"python_requested": "3.10", "python_used": "3.11"},
        ),
        instruction="i",
        repo=Repo(name="o/r", base_commit="a" * 40),
        environment=Environment(
            python="3.11",
            pip_packages=("numpy==1.23.0", "six==1.16.0"),
            requirements={"r.txt": b"numpy == 1.23.0  # pinned\npandas\n"},
        ),
        gold_patch="diff --git a/x b/x\n",
        grading=Grading(rule="all_pass", test_command="pytest", fail_to_pass=("t::a",)),
    )
    moved = _pins_follow_python(spec)
    assert moved.environment.pip_packages == ("numpy==1.23.5", "six==1.16.0")
    assert moved.environment.requirements["r.txt"] == b"numpy == 1.23.5  # pinned\npandas\n"
    assert moved.provenance.metadata["pins_moved_for_python"] == ["numpy==1.23.0 -> 1.23.5"]
    same = spec.model_copy(
        update={"environment": spec.environment.model_copy(update={"python": "3.10"})}
    )
    same = same.model_copy(
        update={
            "provenance": same.provenance.model_copy(
                update={"metadata": {"python_requested": "3.10"}}
            )
        }
    )
    assert _pins_follow_python(same) is same
