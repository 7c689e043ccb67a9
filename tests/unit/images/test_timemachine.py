"""The package index as of a date: which files a project's page keeps, how they are linked, and
the dates `--as-of` takes (the builds themselves: tests/integration/test_as_of.py)."""

from __future__ import annotations

import pytest

from packager.images.timemachine import TimeMachine, links_page
from packager.stamps import as_stamp, parse_stamp

PAGE = {
    "name": "demo",
    "files": [
        {"filename": "demo-1.0.tar.gz", "url": "../../files/demo-1.0.tar.gz",
         "hashes": {"sha256": "aa"}, "upload-time": "2019-01-01T00:00:00.000000Z",
         "requires-python": ">=3.6"},
        {"filename": "demo-2.0-py3-none-any.whl", "url": "https://files.example/demo-2.0-py3-none-any.whl",
         "hashes": {"sha256": "bb"}, "upload-time": "2024-01-01T00:00:00Z"},
        {"filename": "demo-1.5-py3-none-any.whl", "url": "https://files.example/demo-1.5-py3-none-any.whl",
         "hashes": {}, "yanked": "broken"},
    ],
}  # fmt: skip


def test_a_page_keeps_what_was_uploaded_before_the_cut_off() -> None:
    body, urls = links_page(PAGE, "https://index.example/simple/demo/", parse_stamp(
        "2020-06-01T00:00:00Z"), "/tok/asof/file/")  # fmt: skip
    assert "demo-1.0.tar.gz" in body and "demo-2.0" not in body
    assert "demo-1.5" in body and 'data-yanked="broken"' in body  # no upload time: kept
    assert 'data-requires-python="&gt;=3.6"' in body and "#sha256=aa" in body
    assert urls == [
        "https://index.example/files/demo-1.0.tar.gz",
        "https://files.example/demo-1.5-py3-none-any.whl",
    ]
    assert '/demo-1.0.tar.gz#sha256=aa"' in body  # the link ends with the file's name
    later, _ = links_page(PAGE, "https://index.example/simple/demo/", parse_stamp(
        "2025-01-01T00:00:00Z"), "/tok/asof/file/")  # fmt: skip
    assert "demo-2.0-py3-none-any.whl" in later


@pytest.mark.parametrize(
    ("given", "stamp"),
    [
        ("2020-06-01", "2020-06-01T00:00:00Z"),
        ("2019-08-21T15:45:13Z", "2019-08-21T15:45:13Z"),
        ("2019-08-21T17:45:13+02:00", "2019-08-21T15:45:13Z"),
    ],
)
def test_dates_as_stamps(given: str, stamp: str) -> None:
    assert as_stamp(given) == stamp


def test_not_a_date_is_refused() -> None:
    with pytest.raises(ValueError):
        as_stamp("yesterday")


class _Out:
    """What `TimeMachine.handle` writes through (a request handler's calls)."""

    class server:  # noqa: N801
        token = "tok"

    def __init__(self) -> None:
        self.replies: list[tuple[int, bytes]] = []

    def _reply(self, code: int, body: bytes = b"", kind: str = "") -> None:
        self.replies.append((code, body))


def test_only_files_of_served_pages_are_fetched() -> None:
    machine = TimeMachine("https://index.example/simple/")
    machine._pages["demo"] = (PAGE, "https://index.example/simple/demo/")
    out = _Out()
    assert machine.handle(["asof", "2020-06-01T00:00:00Z", "simple", "demo", ""], out)
    assert out.replies[0][0] == 200 and b"demo-1.0.tar.gz" in out.replies[0][1]
    import base64

    other = base64.urlsafe_b64encode(b"http://internal.invalid/latest").decode().rstrip("=")
    assert not machine.handle(["asof", "file", other, "x.whl"], out)  # never fetched: 404
    assert not machine.handle(["asof", "not-a-stamp", "simple", "demo", ""], out)


def test_exact_pins_and_file_versions() -> None:
    from packager.images.timemachine import exact_pins, file_version

    lines = ["tox==4.16.0", "Jinja2 == 3.0.3 ; python_version<'4'", "numpy==1.19.*", "six>=1",
             "-e .", "pkg[extra]==2.0  # comment"]  # fmt: skip
    assert exact_pins(lines) == [("tox", "4.16.0"), ("Jinja2", "3.0.3"), ("pkg", "2.0")]
    assert file_version("tox_current_env-0.0.11-py3-none-any.whl") == "0.0.11"
    assert file_version("tox-current-env-0.0.11.tar.gz") == "0.0.11"
    assert file_version("Jinja2-3.0.3.zip") == "3.0.3"
    assert file_version("README") is None


def test_a_pin_released_after_the_date_raises_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from packager.images import timemachine

    pages = {
        "tox": {"files": [
            {"filename": "tox-4.16.0-py3-none-any.whl", "upload-time": "2024-07-03T03:29:14.5Z"},
            {"filename": "tox-4.16.0.tar.gz", "upload-time": "2024-07-03T03:30:00Z"},
            {"filename": "tox-3.0.0.tar.gz", "upload-time": "2018-01-01T00:00:00Z"},
        ]},
        "old": {"files": [{"filename": "old-1.0.tar.gz", "upload-time": "2010-01-01T00:00:00Z"}]},
    }  # fmt: skip
    monkeypatch.setattr(timemachine, "cached_page", lambda name: pages.get(name))
    timemachine.release_time.cache_clear()  # kept per process: not the pages of other tests
    stamp = "2020-04-08T13:46:43Z"
    assert timemachine.raised_for_pins(stamp, [("old", "1.0"), ("tox", "4.16.0")]) == (
        "2024-07-03T03:29:15Z",
        "tox==4.16.0",
    )
    assert timemachine.raised_for_pins(stamp, [("old", "1.0"), ("tox", "3.0.0")]) == (stamp, None)
    assert timemachine.raised_for_pins(stamp, [("gone", "1.0")]) == (stamp, None)
    timemachine.release_time.cache_clear()
