"""Row filters of whole-dataset runs: --filter (id globs), --repo, --language, --schema."""

from __future__ import annotations

import pytest

from packager.datasets.sources import open_dataset
from packager.errors import PackagerError
from packager.run.select import Selection, iter_specs


def _ids(**filters: object) -> list[str]:
    sel = Selection(dataset=open_dataset(None, "test"), all_tasks=True, **filters)  # type: ignore[arg-type]
    return [s.task_id for s in iter_specs(sel)]


def test_no_filter_selects_every_sample() -> None:
    assert len(_ids()) == 5


def test_id_globs_any_match_counts() -> None:
    assert _ids(id_globs=("*kit*", "*intset*")) == ["samples__textkit-1", "samples__intset-2"]


def test_repo_globs_and_exact_names() -> None:
    assert _ids(repo_globs=("samples/todo-web",)) == ["samples__todo-web-5"]
    assert _ids(repo_globs=("SAMPLES/T*",)) == ["samples__textkit-1", "samples__todo-web-5"]


def test_language_is_case_insensitive() -> None:
    assert _ids(languages=("Go",)) == ["samples__intset-2"]


def test_schema_with_all_keeps_only_rows_of_that_schema() -> None:
    assert _ids(schema="pdl") == ["samples__inventory-4"]
    assert _ids(schema="sweeper") == ["samples__todo-web-5"]


def test_filters_combine() -> None:
    assert _ids(id_globs=("*-[14]",), languages=("python",)) == [
        "samples__textkit-1",
        "samples__inventory-4",
    ]
    assert _ids(id_globs=("*-1",), languages=("python",)) == ["samples__textkit-1"]


def test_nothing_matching_is_an_error_naming_the_filters() -> None:
    with pytest.raises(PackagerError, match="no row of samples matches the filters.*cobol"):
        _ids(languages=("cobol",))
