"""The package index as of a date, served to builds beside the machine wheelhouse.

A build whose environment names a cut-off (`Environment.as_of`, `--as-of`) resolves every pip
requirement against `/<token>/asof/<stamp>/simple/<project>/` on the wheelhouse server: the
upstream index's page of that project (PEP 691 JSON, which carries each file's `upload-time`,
PEP 700), less every file uploaded at or after the cut-off, as a PEP 503 links page whose links
come back through `/<token>/asof/file/<url>/<filename>` (the server downloads for the build, so
builds need no CA bundle and no route to the index's file host). A file without an upload time
is served (the index does not say; nothing to cut on).

The upstream index is this host pip's: `PACKAGER_INDEX_URL`, else pip's configured
`index-url`, else pip's own default. Pages are kept in memory for the life of the server.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import logging
import os
import re
import shutil
import ssl
import threading
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from typing import IO, Any

from packager.images.hud_build import host_ca_bundle, host_index_url
from packager.render.write import write_json
from packager.stamps import parse_stamp
from packager.storage import INDEX_PAGES

LOG = logging.getLogger(__name__)

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
_PROJECT = re.compile(r"[A-Za-z0-9._-]+")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
TIMEOUT_SEC = 60


def upstream_index() -> str:
    """The index builds resolve against, as this host's pip would (ends with '/')."""
    url = os.environ.get("PACKAGER_INDEX_URL", "").strip()
    if not url:
        url = host_index_url() or ""
    if not url:
        from pip._internal.models.index import PyPI  # pip's own default, named by pip

        url = PyPI.simple_url
    return url.rstrip("/") + "/"


def _context() -> ssl.SSLContext:
    bundle = host_ca_bundle()
    return ssl.create_default_context(cafile=str(bundle) if bundle else None)


def _open(url: str, accept: str | None = None) -> Any:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    context = _context() if url.startswith("https:") else None
    return urllib.request.urlopen(request, timeout=TIMEOUT_SEC, context=context)


def _encode(url: str) -> str:
    return base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _decode(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


def links_page(
    data: dict[str, Any], page_url: str, cutoff: datetime, prefix: str
) -> tuple[str, list[str]]:
    """A PEP 503 page of a PEP 691 project page's files uploaded before `cutoff`, each linked
    through `prefix` (`/<token>/asof/file/`), and the file URLs it links.
    """
    rows, urls = [], []
    for entry in data.get("files") or []:
        if not isinstance(entry, dict) or not entry.get("url") or not entry.get("filename"):
            continue
        uploaded = entry.get("upload-time")
        if isinstance(uploaded, str) and uploaded:
            try:
                if datetime.fromisoformat(uploaded.replace("Z", "+00:00")) >= cutoff:
                    continue
            except ValueError:
                pass
        url = urllib.parse.urljoin(page_url, str(entry["url"]).split("#", 1)[0])
        urls.append(url)
        name = str(entry["filename"])
        href = f"{prefix}{_encode(url)}/{urllib.parse.quote(name)}"
        sha256 = (entry.get("hashes") or {}).get("sha256")
        if sha256:
            href += f"#sha256={sha256}"
        attrs = f'href="{html.escape(href)}"'
        if entry.get("requires-python"):
            attrs += f' data-requires-python="{html.escape(str(entry["requires-python"]))}"'
        yanked = entry.get("yanked")
        if yanked:
            reason = yanked if isinstance(yanked, str) else ""
            attrs += f' data-yanked="{html.escape(reason)}"'
        rows.append(f"<a {attrs}>{html.escape(name)}</a><br>\n")
    return "<!DOCTYPE html>\n<html><body>\n" + "".join(rows) + "</body></html>\n", urls


class TimeMachine:
    """The `/asof/` routes of one wheelhouse server."""

    def __init__(self, upstream: str | None = None) -> None:
        self.upstream = upstream or upstream_index()
        self._pages: dict[str, tuple[dict[str, Any], str] | None] = {}
        self._urls: set[str] = set()
        """File URLs of the pages served: the only ones `file` fetches (a build step cannot
        have this host fetch anything else)."""
        self._lock = threading.Lock()

    def project(self, name: str) -> tuple[dict[str, Any], str] | None:
        """The upstream JSON page of a project and its URL (None: the index has no such)."""
        key = re.sub(r"[-_.]+", "-", name).lower()
        with self._lock:
            if key in self._pages:
                return self._pages[key]
        url = f"{self.upstream}{key}/"
        try:
            with _open(url, f"{JSON_ACCEPT}, application/json;q=0.5") as response:
                found: tuple[dict[str, Any], str] | None = (
                    json.loads(response.read()),
                    response.geturl(),
                )
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            found = None
        with self._lock:
            self._pages[key] = found
        return found

    def handle(self, parts: list[str], out: Any) -> bool:
        """Serve `asof/<stamp>/simple/<project>/` or `asof/file/<url>/<name>` (the parts after
        the token) through `out` (the request handler); False when the path is neither.
        """
        if len(parts) == 4 and parts[1] == "file":
            return self._file(parts[2], out)
        if len(parts) == 5 and parts[2] == "simple" and parts[4] == "":
            if not _STAMP.fullmatch(parts[1]) or not _PROJECT.fullmatch(parts[3]):
                return False
            found = self.project(parts[3])
            if found is None:
                out._reply(404)
                return True
            data, page_url = found
            token = out.server.token
            body, urls = links_page(data, page_url, parse_stamp(parts[1]), f"/{token}/asof/file/")
            with self._lock:
                self._urls.update(urls)
            out._reply(200, body.encode(), "text/html")
            return True
        return False

    def _file(self, encoded: str, out: Any) -> bool:
        try:
            url = _decode(encoded)
        except (ValueError, UnicodeDecodeError):
            return False
        with self._lock:
            if url not in self._urls:
                return False
        with _open(url) as response:
            out.send_response(200)
            out.send_header("Content-Type", "application/octet-stream")
            length = response.headers.get("Content-Length")
            if length:
                out.send_header("Content-Length", length)
            out.end_headers()
            if out.command != "HEAD":
                stream: IO[bytes] = response
                shutil.copyfileobj(stream, out.wfile)
        return True


_PIN = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)\s*(?:;.*)?$"
)
_SDIST = re.compile(r"^(.+)-(\d[^-]*)\.(?:tar\.gz|tar\.bz2|tgz|zip)$")


def exact_pins(lines: list[str]) -> list[tuple[str, str]]:
    """`name==version` requirements among `lines` (other lines: not pins), in order."""
    pins = []
    for line in lines:
        found = _PIN.match(line.split(" #", 1)[0])
        if found and "*" not in found.group(2):
            pins.append((found.group(1), found.group(2)))
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def file_version(filename: str) -> str | None:
    """The version in a distribution's file name (a wheel's or an sdist's)."""
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return parts[1] if len(parts) >= 5 else None
    found = _SDIST.match(filename)
    return found.group(2) if found else None


def released(page: dict[str, Any], version: str) -> datetime | None:
    """When a version's first file was uploaded, per a PEP 691 page (None: not there, or the
    index gives no upload times).
    """
    times = []
    for entry in page.get("files") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("upload-time"), str):
            continue
        if file_version(str(entry.get("filename", ""))) != version:
            continue
        try:
            times.append(datetime.fromisoformat(entry["upload-time"].replace("Z", "+00:00")))
        except ValueError:
            continue
    return min(times) if times else None


def cached_page(name: str) -> dict[str, Any] | None:
    """A project's PEP 691 page from the upstream index, kept in the machine cache (upload times
    never change; a version pinned but not in the kept page fetches it again).
    """
    path = INDEX_PAGES.path() / f"{_normal(name)}.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    try:
        with _open(f"{upstream_index()}{_normal(name)}/", JSON_ACCEPT) as response:
            page = dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    write_json(path, page)
    return page


@functools.lru_cache(maxsize=8192)
def release_time(name: str, version: str) -> datetime | None:
    """When `name==version` was released, per its kept index page (fetched again when the
    release is newer than the kept page); None when the index does not tell. Kept per process:
    the rows of one spec pin the same releases, and a page is megabytes of JSON to parse.
    """
    page = cached_page(name)
    when = released(page, version) if page else None
    if page is not None and when is None:  # a release newer than the kept page
        (INDEX_PAGES.path() / f"{_normal(name)}.json").unlink(missing_ok=True)
        page = cached_page(name)
        when = released(page, version) if page else None
    return when


def raised_for_pins(stamp: str, pins: list[tuple[str, str]]) -> tuple[str, str | None]:
    """The cut-off at which every exact pin exists: `stamp`, or the release of the newest pin
    released after it (and that pin, `name==version`). Pins win over the date; a pin whose
    release the index does not tell leaves the cut-off as it is.
    """
    cutoff, by = parse_stamp(stamp), None
    for name, version in pins:
        try:
            when = release_time(name, version)
        except (OSError, ValueError) as exc:
            LOG.info("as of: no release time for %s==%s (%s)", name, version, exc)
            continue
        if when is not None and when >= cutoff:
            cutoff, by = when.replace(microsecond=0) + timedelta(seconds=1), f"{name}=={version}"
    return cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"), by
