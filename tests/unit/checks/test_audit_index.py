"""Layer indexes without Docker: an index finds exactly what reading the files finds, is keyed
by the sha256 of the bytes read (not by what a manifest claims), and is published whole or not
at all; from `docker save` (a fake client) every layer is read and indexed, and no scratch folder
is left behind."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from packager.checks.audit import norm_lines
from packager.checks.audit.index import (
    IndexBuilder,
    git_meta_name,
    index_dir,
    line_hash,
    load_index,
    publish,
    scratch_dir,
    sweep_scratch,
)
from packager.checks.audit.layers import index_tar

FILES = {
    "opt/app/a.py": b"import unicodedata\nvalue = compute_the_answer()\n    return 42 + other\n",
    "opt/app/b.py": b"value = compute_the_answer()\nprint('unrelated line here')\n",
    "opt/app/blob.bin": b"\0binary compute_the_answer()\n",
    "srv/.git/refs/heads/main": b"0" * 40 + b"\n",
    "srv/.git/objects/ab/" + "c" * 38: b"x\x9c compressed",
    "srv/.git/description": b"not metadata the audit reads\n",
}


def _layer(files: dict[str, bytes], extra: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in extra:
            tar.addfile(tarfile.TarInfo(name))
    return buf.getvalue()


def test_index_hits_equal_reading_the_files(tmp_path: Path) -> None:
    data = _layer(FILES, extra=("tmp/.wh.gone", "var/cache/.wh..wh..opq"))
    index = index_tar(io.BytesIO(data), IndexBuilder(tmp_path / "s"))
    assert index.diff_id == "sha256:" + hashlib.sha256(data).hexdigest()
    anchors = {b"value = compute_the_answer()", b"return 42 + other", b"never anywhere at all"}
    hits = index.hits([(line_hash(a), a) for a in sorted(anchors)])
    by_path = {index.files[fid][0]: lines for fid, lines in hits.items()}
    expected = {
        "/" + name: anchors & norm_lines(body)
        for name, body in FILES.items()
        if b"\0" not in body and anchors & norm_lines(body) and "/objects/" not in name
    }
    assert by_path == expected and len(expected) == 2
    digest = hashlib.sha256(FILES["opt/app/b.py"]).hexdigest()
    assert [index.files[f][0] for f in index.with_digest(digest)] == ["/opt/app/b.py"]
    assert index.deleted == {"/tmp/gone"} and index.opaque == {"/var/cache"}
    assert set(index.git_meta) == {"srv/.git/refs/heads/main"}
    assert index.n_scanned == 5 and len(index.files) == 6  # the git object is kept, not scanned
    (store,) = index.object_stores()
    assert (store / "where").read_text() == "/srv/.git/objects"
    assert (store / "objects" / "ab" / ("c" * 38)).read_bytes() == b"x\x9c compressed"


def test_git_meta_names_any_repository() -> None:
    assert git_meta_name(".git/HEAD") and git_meta_name("a/b/.git/logs/HEAD")
    assert git_meta_name("x/.git/packed-refs") and git_meta_name("x/.git/objects/info/alternates")
    assert not git_meta_name("x/.git/description") and not git_meta_name("x/my.git/HEAD")


def test_publish_is_whole_and_first_wins(tmp_path: Path) -> None:
    root = tmp_path / "root"
    data = _layer(FILES)
    first = index_tar(io.BytesIO(data), IndexBuilder(scratch_dir(root)))
    second = index_tar(io.BytesIO(data), IndexBuilder(scratch_dir(root)))
    assert publish(first, root).path == index_dir(root, first.diff_id)
    kept = publish(second, root)  # another process got there first: it keeps its own
    assert kept.path != index_dir(root, first.diff_id) and kept.path.is_dir()
    loaded = load_index(index_dir(root, first.diff_id))
    assert loaded is not None and loaded.files == first.files
    assert list(loaded.lines) == list(first.lines) and list(loaded.fids) == list(first.fids)
    # A torn index (a table cut short) is no index.
    (kept.path / "fids.bin").write_bytes((kept.path / "fids.bin").read_bytes()[:-4])
    assert load_index(kept.path) is None
    assert load_index(tmp_path / "nothing") is None
    sweep_scratch(root, older_than=-1)
    assert not kept.path.exists() and index_dir(root, first.diff_id).is_dir()


def test_gzip_layer_is_keyed_by_its_plain_tar(tmp_path: Path) -> None:
    import gzip

    data = _layer(FILES)
    index = index_tar(io.BytesIO(gzip.compress(data)), IndexBuilder(tmp_path / "s"))
    assert index.diff_id == "sha256:" + hashlib.sha256(data).hexdigest()


def test_save_path_publishes_indexes_and_leaves_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.checks.audit import audit_image
    from packager.models.spec import Grading, Provenance, Repo, TaskSpec
    from tests.unit.checks.test_audit_logic import _FakeClient, _image

    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    spec = TaskSpec(
        provenance=Provenance(
            dataset="t", split="test", schema_name="swebench", instance_id="t-1", slug="t-1"
        ),
        instruction="fix it",
        repo=Repo(name="o/r", base_commit="0" * 40),
        gold_patch=None,
        grading=Grading(rule="all_pass", fail_to_pass=("t",)),
    )
    client = _FakeClient(_image([{"opt/x.py": b"print('x')\n"}, {"opt/y.py": b"y = 1\n"}]))
    first = audit_image(client, "img", spec)  # type: ignore[arg-type]
    assert first.stats["layers_read"] == 2 and first.stats["layers_indexed_before"] == 0
    published = sorted(p.name for p in (tmp_path / "cache").rglob("meta.json"))
    assert len(published) == 2
    second = audit_image(client, "img", spec)  # type: ignore[arg-type]
    # No local store behind a fake client: the save path reads (and re-indexes) every layer,
    # and leaves no scratch folder behind.
    assert second.stats["layers_read"] == 2 and second.findings == first.findings
    assert not any((tmp_path / "cache").rglob(".scratch/*"))


def test_a_wheels_members_are_indexed_under_its_path(tmp_path: Path) -> None:
    import zipfile

    from packager.checks.audit.layers import Layer, visible

    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("requests/models.py", FILES["opt/app/a.py"])
        archive.writestr("requests-2.25.1.dist-info/RECORD", b"requests/models.py,,\n")
    name = "usr/share/python-wheels/requests-2.25.1-py2.py3-none-any.whl"
    data = _layer({name: wheel.getvalue(), "opt/not-a-wheel.whl": b"plain text\n"})
    index = index_tar(io.BytesIO(data), IndexBuilder(tmp_path / "s"))
    anchor = b"value = compute_the_answer()"
    hits = index.hits([(line_hash(anchor), anchor)])
    paths = {index.files[fid][0] for fid in hits}
    member = f"/{name}/requests/models.py"
    assert paths == {member}
    # A later layer deleting the wheel hides its members as it hides a folder's files.
    later = Layer("later", deleted={"/" + name})
    assert not visible([Layer("first", files={member}), later], 0, member)
    assert visible([Layer("first", files={member}), Layer("other")], 0, member)
