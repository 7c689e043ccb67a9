"""Leak audit logic without Docker: diff parsing, evidence lines, units, refs, whiteouts, and a
whole audit of a synthetic `docker save` stream served by a fake client."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from packager.checks.audit import (
    Layer,
    Source,
    audit_image,
    candidate_lines,
    informative,
    is_strong,
    make_units,
    norm_lines,
    parse_patch,
    ref_findings,
    secrets_of,
    visible,
)
from packager.models.spec import Grading, Provenance, Repo, TaskSpec

GOLD = "\n".join(
    [
        "diff --git a/textkit/slug.py b/textkit/slug.py",
        "index b842307..7125abd 100644",
        "--- a/textkit/slug.py",
        "+++ b/textkit/slug.py",
        "@@ -1,11 +1,13 @@",
        ' """URL slugs."""',
        " ",
        " import re",
        "+import unicodedata",
        " ",
        ' _SEPARATORS = re.compile(r"[^a-z0-9]+")',
        " ",
        " ",
        ' def slugify(text: str, sep: str = "-") -> str:',
        '     """Return a lowercase ASCII slug of ``text``, words joined by ``sep``."""',
        "-    text = text.lower()",
        '+    text = unicodedata.normalize("NFKD", text)',
        '+    text = text.encode("ascii", "ignore").decode("ascii").lower()',
        "     return _SEPARATORS.sub(sep, text).strip(sep)",
        "",
    ]
)

NEW_FILE = """\
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,3 @@
+def test_new_behaviour() -> None:
+    assert compute_the_answer() == 42
+    # no newline
\\ No newline at end of file
"""


# --------------------------------------------------------------------------- parse_patch


def test_parse_git_patch_added_lines_per_hunk() -> None:
    (pf,) = parse_patch(GOLD)
    assert pf.path == "textkit/slug.py" and not pf.new_file and pf.new_content is None
    assert pf.hunks == (
        (
            b"import unicodedata",
            b'    text = unicodedata.normalize("NFKD", text)',
            b'    text = text.encode("ascii", "ignore").decode("ascii").lower()',
        ),
    )


def test_parse_new_file_content_and_no_newline_marker() -> None:
    (pf,) = parse_patch(NEW_FILE)
    assert pf.new_file and pf.path == "tests/test_new.py"
    assert pf.new_content == (
        b"def test_new_behaviour() -> None:\n"
        b"    assert compute_the_answer() == 42\n    # no newline"
    )
    (pf2,) = parse_patch(NEW_FILE.replace("\\ No newline at end of file\n", ""))
    assert pf2.new_content is not None and pf2.new_content.endswith(b"newline\n")


def test_parse_plain_patch_several_files_and_tricky_lines() -> None:
    # A PDL-style patch without `diff --git`, a removed SQL comment that looks like a header,
    # two hunks, then a second file; CRLF in added lines is dropped.
    text = (
        "--- a/db.sql\n+++ b/db.sql\n@@ -1,2 +1,2 @@\n--- old comment line\n+-- new comment\r\n"
        " keep\n@@ -10 +10,2 @@\n ctx\n+second hunk line\n"
        "--- a/other.py\n+++ b/other.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
    files = parse_patch(text)
    assert [f.path for f in files] == ["db.sql", "other.py"]
    assert files[0].hunks == ((b"-- new comment",), (b"second hunk line",))
    assert files[1].hunks == ((b"x = 2",),)


def test_parse_binary_and_empty() -> None:
    binary = (
        "diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0..1\n"
        "GIT binary patch\nliteral 4\nLcmZ?wbhEx0\n\nliteral 0\nKcmV+b0RR6000031\n\n"
    )
    assert parse_patch(binary) == []
    assert parse_patch(None) == [] and parse_patch("") == []


def test_parse_quoted_paths_and_sections_without_text() -> None:
    # Git C-quotes names with special characters; the path is the file's real name (the old
    # parser kept the escapes). A pure rename and a mode change carry no text.
    text = (
        'diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"\n'
        '--- "a/caf\\303\\251.py"\n+++ "b/caf\\303\\251.py"\n@@ -1 +1 @@\n-a = 1\n+a = 2\n'
        "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n"
        "diff --git a/m b/m\nold mode 100644\nnew mode 100755\n"
    )
    (pf,) = parse_patch(text)
    assert pf.path == pf.old_path == "café.py" and pf.hunks == ((b"a = 2",),)


# --------------------------------------------------------------------------- lines and units


def test_norm_lines_strips_and_unwraps_diff_markers() -> None:
    data = b"short\n    long enough line  \r\n+    added in a diff line\n-removed from a diff\n"
    assert norm_lines(data) == {
        b"long enough line",
        b"+    added in a diff line",
        b"added in a diff line",
        b"-removed from a diff",
        b"removed from a diff",
    }


def test_candidate_lines_order_and_dedup() -> None:
    assert candidate_lines([b"  aaaaaaaa ", b"x", b"bbbbbbbbb", b"aaaaaaaa"]) == (
        b"aaaaaaaa",
        b"bbbbbbbbb",
    )


def test_is_strong() -> None:
    assert not is_strong([b"import unicodedata"])
    assert is_strong([b"import unicodedata", b"text = unicodedata.normalize(x)"])
    assert is_strong([b"y" * 60])
    assert not is_strong([b"a" * 10, b"b" * 10])


def _src(kind: str, label: str, group: str, *lines: str) -> Source:
    return Source(kind, label, group, tuple(s.encode() for s in lines))  # type: ignore[arg-type]


def test_units_ignore_lines_present_at_base() -> None:
    hunk = _src(
        "gold_patch",
        "h1",
        "f",
        "import unicodedata",
        'text = unicodedata.normalize("NFKD", x)',
        "return _SEPARATORS.sub(sep, text)",
    )
    units, dropped = make_units([hunk], set())
    assert len(units) == 1 and len(units[0].lines) == 3
    # The context-like line exists at base: it is no evidence and is left out of the unit.
    units, _ = make_units([hunk], {b"return _SEPARATORS.sub(sep, text)"})
    assert units[0].lines == {b"import unicodedata", b'text = unicodedata.normalize("NFKD", x)'}
    # A hunk made only of base lines gives nothing (moving code around is no leak).
    units, dropped = make_units([hunk], set(hunk.lines))
    assert units == [] and dropped == 0


def test_weak_hunks_pool_by_file_then_by_kind_then_drop() -> None:
    a = _src("gold_patch", "f1 hunk 1", "f1", "value = 1 + 2")
    b = _src("gold_patch", "f1 hunk 2", "f1", "other = value * 3", "done = True!")
    units, dropped = make_units([a, b], set())
    assert [u.label for u in units] == ["f1 (small hunks together)"]
    assert units[0].lines == {b"value = 1 + 2", b"other = value * 3", b"done = True!"}
    c = _src("test_patch", "g1 hunk", "g1", "assert xx == 1111111")
    d = _src("test_patch", "g2 hunk", "g2", "assert y == 22222222")
    units, dropped = make_units([c, d], set())
    assert [u.label for u in units] == ["test_patch (small pieces together)"]
    units, dropped = make_units([c], set())
    assert units == [] and dropped == 1


def test_long_sources_split_into_windows() -> None:
    lines = [f"line number {i:03d} of a long hidden test" for i in range(17)]
    units, _ = make_units([_src("hidden_test", "big", "big", *lines)], set())
    assert [len(u.lines) for u in units] == [8, 9]  # the weak tail joins the last window
    assert units[0].label == "big (part 1)"


def _spec(**grading: object) -> TaskSpec:
    return TaskSpec(
        provenance=Provenance(
            dataset="t", split="test", schema_name="swebench", instance_id="t-1", slug="t-1"
        ),
        instruction="fix it",
        repo=Repo(name="o/r", base_commit="0" * 40),
        gold_patch=GOLD,
        grading=Grading(rule="all_pass", fail_to_pass=("t",), **grading),
    )


def test_secrets_of_spec() -> None:
    spec = _spec(
        test_patch=NEW_FILE,
        hidden_files={"tests/h.py": b"def test_hidden_thing():\n"},
        grader_files={"grade.py": b"print('grading the candidate now')\n"},
    )
    secrets = secrets_of(spec)
    kinds = sorted({k for k, _, _ in secrets.exact.values()})
    assert kinds == ["gold_patch", "grader_file", "hidden_test", "test_patch"]
    new = parse_patch(NEW_FILE)[0].new_content
    assert new is not None and any(
        v[2] == new and v[0] == "hidden_test" for v in secrets.exact.values()
    )
    assert b"import unicodedata" in secrets.anchors


def test_informative() -> None:
    assert not informative(b"", set(), set())
    assert not informative(b"x = 1\n", set(), set())  # nothing of 8+ characters
    assert not informative(b"an existing line\n", {b"an existing line"}, set())
    assert informative(b"a brand new line\n", set(), set())
    assert not informative(b"\0" * 10, set(), set()) and informative(b"\0" * 100, set(), set())


# --------------------------------------------------------------------------- refs and layers

BASE = "a" * 40
FUTURE = "b" * 40


def _meta(**files: str) -> Layer:
    layer = Layer("L")
    layer.git_meta = {
        k.replace("__", "/").replace("_dot_", "."): v.encode() for k, v in files.items()
    }
    return layer


def test_clean_repository_metadata_has_no_findings() -> None:
    layer = _meta(
        HEAD="ref: refs/heads/main\n",
        refs__heads__main=BASE + "\n",
        config="[core]\n\tbare = false\n",
    )
    assert ref_findings(layer, "/testbed/.git", BASE) == []


def test_ref_findings_cover_every_kind() -> None:
    layer = Layer("L")
    layer.git_meta = {
        "HEAD": b"ref: refs/heads/main\n",
        "refs/heads/main": BASE.encode(),
        "refs/heads/fix": FUTURE.encode(),
        "refs/tags/v1.0": BASE.encode(),
        "packed-refs": f"# pack-refs\n{FUTURE} refs/tags/v1.1\n^{FUTURE}\n"
        f"{FUTURE} refs/remotes/origin/main\n".encode(),
        "logs/HEAD": f"{BASE} {FUTURE} a <a> 0 +0000\tcommit: fix\n".encode(),
        "ORIG_HEAD": FUTURE.encode(),
        "FETCH_HEAD": f"{FUTURE}\t\tbranch 'main' of x\n".encode(),
        "config": b'[remote "origin"]\n\turl = https://example.invalid/r.git\n',
        "objects/info/alternates": b"/srv/mirror.git/objects\n",
    }
    found = {
        (f.kind, f.path.removeprefix("/testbed/.git/"))
        for f in ref_findings(layer, "/testbed/.git", BASE)
    }
    assert found == {
        ("ref", "refs/heads/fix"),
        ("tag", "refs/tags/v1.0"),
        ("tag", "packed-refs"),
        ("remote", "packed-refs"),
        ("reflog", "logs/HEAD"),
        ("ref", "ORIG_HEAD"),
        ("ref", "FETCH_HEAD"),
        ("remote", "config"),
        ("alternates", "objects/info/alternates"),
    }


def test_detached_head() -> None:
    assert ref_findings(_meta(HEAD=BASE), "/r/.git", BASE) == []
    (f,) = ref_findings(_meta(HEAD=FUTURE), "/r/.git", BASE)
    assert f.kind == "ref" and f.object_id == FUTURE


def test_visibility_under_whiteouts() -> None:
    one, two, three = Layer("1"), Layer("2"), Layer("3")
    one.files = {"/tmp/leak/gold.patch", "/opt/a.py", "/srv/x/y.py"}
    two.deleted = {"/tmp/leak"}
    three.opaque = {"/srv/x"}
    layers = [one, two, three]
    assert not visible(layers, 0, "/tmp/leak/gold.patch")
    assert visible(layers, 0, "/opt/a.py")
    assert not visible(layers, 0, "/srv/x/y.py")
    three.files = {"/opt/a.py"}
    assert not visible(layers, 0, "/opt/a.py")  # overwritten
    assert visible(layers, 2, "/opt/a.py")


# --------------------------------------------------------------------------- a whole audit


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
    }
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


def _tar(entries: dict[str, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tree(root: Path, prefix: str) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        name = f"{prefix}/{path.relative_to(root).as_posix()}"
        out[name] = None if path.is_dir() else path.read_bytes()
    return out


class _FakeImage:
    def __init__(self, archive: bytes) -> None:
        self.archive = archive
        self.id = "sha256:" + "f" * 64

    def save(self, named: bool = False) -> Iterator[bytes]:
        for i in range(0, len(self.archive), 7000):  # odd chunk size: exercises the reader
            yield self.archive[i : i + 7000]


class _FakeClient:
    def __init__(self, archive: bytes) -> None:
        self._image = _FakeImage(archive)
        self.images = self
        self.api = self.containers = None

    def get(self, tag: str) -> _FakeImage:
        return self._image

    def ping(self) -> bool:
        return True


def _image(layers: list[dict[str, bytes | None]]) -> bytes:
    names = [f"l{i}/layer.tar" for i in range(len(layers))]
    config = {
        "rootfs": {"diff_ids": [f"sha256:{i:064d}" for i in range(len(layers))]},
        "history": [{"created_by": f"step {i}"} for i in range(len(layers))],
    }
    files: dict[str, bytes | None] = {}
    for name, layer in zip(names, layers, strict=True):
        files[name] = _tar(layer)
    files["config.json"] = json.dumps(config).encode()
    files["manifest.json"] = json.dumps([{"Config": "config.json", "Layers": names}]).encode()
    return _tar(files)


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str]:
    src = tmp_path / "src"
    (src / "textkit").mkdir(parents=True)
    (src / "textkit" / "slug.py").write_text(
        '"""URL slugs."""\n\nimport re\n\n_SEPARATORS = re.compile(r"[^a-z0-9]+")\n\n\n'
        'def slugify(text: str, sep: str = "-") -> str:\n'
        '    """Return a lowercase ASCII slug of ``text``, words joined by ``sep``."""\n'
        "    text = text.lower()\n    return _SEPARATORS.sub(sep, text).strip(sep)\n"
    )
    _git(src, "init", "-q", "-b", "main")
    _git(src, "add", "-A")
    _git(src, "commit", "-qm", "base")
    return src, _git(src, "rev-parse", "HEAD")


def _spec_for(base: str) -> TaskSpec:
    spec = _spec()
    return spec.model_copy(update={"repo": Repo(name="o/r", base_commit=base)})


def test_fake_image_clean_then_leaky(repo: tuple[Path, str], tmp_path: Path) -> None:
    src, base = repo
    _git(src, "gc", "-q", "--prune=now")
    subprocess.run(["rm", "-rf", str(src / ".git" / "logs")], check=True)  # as the snapshot does
    spec = _spec_for(base)
    system = {"usr/lib/python3/dist-packages/mod.py": b"import unicodedata\nprint('hi')\n"}
    clean = [system, {"testbed": None, **_tree(src, "testbed")}]
    report = audit_image(_FakeClient(_image(clean)), "img", spec)  # type: ignore[arg-type]
    assert report.clean, report.findings
    assert report.stats["layers"] == 2 and report.stats["git_objects"] > 0

    # The gold patch in a layer, deleted by the next one (a whiteout); a future commit left
    # loose in the repository and reachable from a tag.
    leak_layer = {"tmp": None, "tmp/leak": None, "tmp/leak/gold.patch": GOLD.encode()}
    whiteout = {"tmp": None, "tmp/.wh.leak": b""}
    assert subprocess.run(["git", "apply"], cwd=src, input=GOLD.encode()).returncode == 0
    _git(src, "commit", "-qam", "fix")
    _git(src, "tag", "v1.1")
    _git(src, "reset", "-q", "--hard", "HEAD~1")
    leaky = [*clean[:1], {"testbed": None, **_tree(src, "testbed")}, leak_layer, whiteout]
    report = audit_image(_FakeClient(_image(leaky)), "img", spec)  # type: ignore[arg-type]
    assert report.kinds == {"gold_patch", "commit", "tag", "reflog", "ref"}, report.to_json()
    patch_hit = next(f for f in report.findings if f.path == "/tmp/leak/gold.patch")
    assert patch_hit.layer == f"sha256:{2:064d}" and "deleted by a later layer" in patch_hit.detail
    assert "layer 3/4: step 2" in patch_hit.detail
    blob_hit = [f for f in report.findings if f.kind == "gold_patch" and f.object_id]
    assert blob_hit and blob_hit[0].path == "/testbed/.git/objects"
    assert report.summary().startswith("leak: ")


class _CountingImage(_FakeImage):
    def __init__(self, archive: bytes) -> None:
        super().__init__(archive)
        self.saves = 0

    def save(self, named: bool = False) -> Iterator[bytes]:
        self.saves += 1
        return super().save(named)


def test_clean_verdict_is_reused_across_output_folders_and_a_leak_never(
    repo: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.checks.audit import audit_task, machine_audit_path
    from packager.storage import OutputPaths

    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    src, base = repo
    _git(src, "gc", "-q", "--prune=now")
    subprocess.run(["rm", "-rf", str(src / ".git" / "logs")], check=True)
    spec = _spec_for(base)
    client = _FakeClient(_image([{"testbed": None, **_tree(src, "testbed")}]))
    image = client._image = _CountingImage(client._image.archive)

    first = audit_task(client, spec, OutputPaths(tmp_path / "a", "d"))  # type: ignore[arg-type]
    assert first.clean and "cached" not in first.stats and image.saves == 1
    written = json.loads(
        (tmp_path / "a" / "d" / "results" / f"{spec.provenance.slug}.audit.json").read_text()
    )
    assert machine_audit_path(written["cache_key"]).is_file()
    # Another output folder, same image and secrets: the machine's verdict, copied in.
    other = OutputPaths(tmp_path / "b", "d")
    again = audit_task(client, spec, other)  # type: ignore[arg-type]
    assert again.clean and again.stats == {"seconds": 0.0, "cached": 1} and image.saves == 1
    copied = json.loads(
        (tmp_path / "b" / "d" / "results" / f"{spec.provenance.slug}.audit.json").read_text()
    )
    assert copied == written
    # Other secrets: audited afresh.
    changed = spec.model_copy(update={"gold_patch": (spec.gold_patch or "") + " "})
    assert "cached" not in audit_task(client, changed, other).stats  # type: ignore[arg-type]
    assert image.saves == 2

    # A leaky image is audited every time and never enters the machine's cache.
    leak = {"tmp": None, "tmp/gold.patch": GOLD.encode()}
    leaky = _CountingImage(_image([{"testbed": None, **_tree(src, "testbed")}, leak]))
    leaky.id = "sha256:" + "e" * 64
    client._image = leaky
    for out in ("c", "d"):
        report = audit_task(client, spec, OutputPaths(tmp_path / out, "d"))  # type: ignore[arg-type]
        assert not report.clean
    assert leaky.saves == 2
    cached = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "audits").rglob("*.json")]
    assert cached and all(entry["clean"] for entry in cached)
