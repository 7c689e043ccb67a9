"""The host's unified-diff parser (packager.diffs): paths, statuses, hunks, and a lossless cut
of git and plain patches, including what the parsers it replaced got wrong."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from packager.diffs import (
    FileDiff,
    Junk,
    decode_patch,
    encode_line,
    git_header_paths,
    parse_diff,
    side_path,
    split_lines,
    unquote,
)

MODIFIED = """\
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,4 +1,5 @@ def main():
 import os
-import sys
+import sys  # used
+import re
 # comment
 x = 1
@@ -10,2 +11,2 @@
 y = 2
-z = 3
+z = 4
"""

NEW_AND_DELETED = """\
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,2 @@
+def test_new():
+    assert True
\\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100755
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
"""

HEADERS_ONLY = """\
diff --git a/bin.dat b/bin.dat
index bdc955b..8835708 100644
GIT binary patch
literal 2
JcmZQz0ssI600RI3

literal 2
JcmZQz1ONa700IC2

diff --git a/empty.txt b/empty.txt
new file mode 100644
index 0000000..e69de29
diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
diff --git a/old name.txt b/new name.txt
similarity index 100%
rename from old name.txt
rename to new name.txt
diff --git a/src/a.py b/src/b.py
similarity index 90%
copy from src/a.py
copy to src/b.py
index 0ff3bbb..fb3ced1 100644
--- a/src/a.py
+++ b/src/b.py
@@ -2 +2 @@
-five = 5
+five = "five"
diff --git a/logo.png b/logo.png
index 5555555..6666666 100644
Binary files a/logo.png and b/logo.png differ
"""

QUOTED = (
    'diff --git "a/caf\\303\\251 x.txt" "b/caf\\303\\251 x.txt"\n'
    "index 7898192..422c2b7 100644\n"
    '--- "a/caf\\303\\251 x.txt"\t\n'
    '+++ "b/caf\\303\\251 x.txt"\t\n'
    "@@ -1 +1,2 @@\n"
    " a\n"
    "+b\n"
)


def _only(text: str) -> FileDiff:
    (file,) = parse_diff(text).files
    return file


def test_modified_file_hunks_numbers_and_lines() -> None:
    f = _only(MODIFIED)
    assert (f.old_path, f.new_path, f.path, f.status) == ("src/app.py",) * 3 + ("modified",)
    assert f.git and not f.binary and not f.mode_change and f.index == 0
    one, two = f.hunks
    assert (one.old_start, one.old_len, one.new_start, one.new_len) == (1, 4, 1, 5)
    assert one.added == ((2, "import sys  # used"), (3, "import re"))
    assert one.removed == ((2, "import sys"),)
    assert one.delta == 1 and one.file == "src/app.py"
    assert one.lines[4] == (" ", "# comment") and one.text.startswith(
        "@@ -1,4 +1,5 @@ def main():\n"
    )
    assert two.added == ((12, "z = 4"),) and two.removed == ((11, "z = 3"),)
    assert two.where == "src/app.py: new lines 11-12, old lines 10-11"
    assert f.header.endswith("+++ b/src/app.py\n") and f.text == MODIFIED


def test_new_and_deleted_files() -> None:
    new, gone = parse_diff(NEW_AND_DELETED).files
    assert (new.status, new.old_path, new.new_path, new.new_mode) == (
        "added",
        None,
        "tests/test_new.py",
        "100644",
    )
    assert new.hunks[0].added == ((1, "def test_new():"), (2, "    assert True"))
    assert new.hunks[0].new_ends_without_newline and new.paths == ("tests/test_new.py",)
    assert (gone.status, gone.old_path, gone.new_path, gone.path) == (
        "deleted",
        "old.txt",
        None,
        "old.txt",
    )
    assert gone.old_mode == "100755" and not gone.mode_change and gone.index == 1
    assert not gone.hunks[0].new_ends_without_newline
    assert gone.hunks[0].where == "old.txt: new none (after line 0), old line 1"


def test_sections_without_hunks() -> None:
    files = parse_diff(HEADERS_ONLY).files
    assert [(f.status, f.old_path, f.new_path) for f in files] == [
        ("modified", "bin.dat", "bin.dat"),
        ("added", None, "empty.txt"),
        ("modified", "mode.sh", "mode.sh"),
        ("renamed", "old name.txt", "new name.txt"),
        ("copied", "src/a.py", "src/b.py"),
        ("modified", "logo.png", "logo.png"),
    ]
    binary, empty, mode, rename, copy, marker = files
    assert binary.binary and binary.binary_data and not binary.hunks
    assert binary.header.endswith("JcmZQz1ONa700IC2\n\n")
    assert not empty.hunks and not empty.binary
    assert mode.mode_change and (mode.old_mode, mode.new_mode) == ("100644", "100755")
    assert rename.paths == ("old name.txt", "new name.txt") and not rename.hunks
    assert rename.git_names == rename.paths and mode.git_names == ("mode.sh",)
    assert copy.hunks[0].added == ((2, 'five = "five"'),) and copy.hunks[0].file == "src/b.py"
    assert marker.binary and not marker.binary_data
    assert parse_diff(HEADERS_ONLY).text == HEADERS_ONLY


def test_quoted_paths_with_c_escapes() -> None:
    f = _only(QUOTED)
    assert f.old_path == f.new_path == "café x.txt" and f.status == "modified"
    assert f.hunks[0].added == ((2, "b"),)
    assert unquote('"tab\\there \\"q\\" back\\\\slash"') == 'tab\there "q" back\\slash'
    assert unquote("plain name") == "plain name"


def test_side_paths() -> None:
    assert side_path("a/x.py\t2024-01-01 10:00:00.000 +0000\n") == "x.py"
    assert side_path("/dev/null\n") is None
    assert side_path("b/with space.py\t\n") == "with space.py"
    assert side_path('"b/quo\\tted"\t\r\n') == "quo\tted"
    assert side_path("x.py") == "x.py"


@pytest.mark.parametrize(
    ("line", "paths"),
    [
        ("diff --git a/x.py b/x.py\n", ("x.py", "x.py")),
        ("diff --git a/sp ace.py b/sp ace.py", ("sp ace.py", "sp ace.py")),
        ("diff --git a/old.py b/new.py", ("old.py", "new.py")),
        ('diff --git "a/caf\\303\\251" "b/caf\\303\\251"', ("café", "café")),
        ('diff --git "a/q\\"x" b/plain', ('q"x', "plain")),
        ('diff --git a/plain "b/caf\\303\\251"', ("plain", "café")),
        ("diff --git a/one b/two b/three", ("one b/two", "three")),
        ("diff --git nonsense", (None, None)),
    ],
)
def test_git_header_paths(line: str, paths: tuple[str | None, str | None]) -> None:
    assert git_header_paths(line) == paths


def test_plain_diff_timestamps_and_header_lookalikes() -> None:
    # diff -u output (no `diff --git`): timestamps after a tab; a removed SQL comment that
    # looks like a `---` line stays in its hunk; CRLF ends of added lines are dropped.
    text = (
        "--- a/db.sql\t2024-01-01 00:00:00\n+++ b/db.sql\t2024-01-02 00:00:00\n"
        "@@ -1,2 +1,2 @@\n--- old comment line\n+-- new comment\r\n keep\n"
        "@@ -10 +10,2 @@\n ctx\n+second hunk line\n"
        "--- other.py\n+++ other.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
    db, other = parse_diff(text).files
    assert (db.path, other.path) == ("db.sql", "other.py") and not db.git
    assert db.hunks[0].removed == ((1, "-- old comment line"),)
    assert db.hunks[0].added == ((1, "-- new comment"),)
    assert db.hunks[1].added == ((11, "second hunk line"),)
    assert other.status == "modified" and other.index == 1
    assert parse_diff(text).text == text


def test_git_header_alone_names_one_file() -> None:
    # Without rename or copy lines git names one file: the new side (git apply refuses a
    # header whose sides differ); both names stay in `git_names` for checkers.
    f = _only("diff --git a/../x b/y\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n")
    assert (f.status, f.old_path, f.new_path, f.git_names) == ("modified", "y", "y", ("../x", "y"))
    assert f.binary_data


def test_pdl_section_starting_at_new_file_mode() -> None:
    text = "new file mode 100644\n--- /dev/null\n+++ b/tests/hidden/test_h.py\n@@ -0,0 +1 @@\n+x\n"
    f = _only(text)
    assert (f.status, f.path, f.new_mode, f.git) == (
        "added",
        "tests/hidden/test_h.py",
        "100644",
        False,
    )


def test_junk_around_sections_is_kept() -> None:
    text = "From abc Mon Sep 17 00:00:00 2001\nSubject: fix\n\n---\n" + MODIFIED + "-- \n2.40.0\n"
    patch = parse_diff(text)
    kinds = [type(s).__name__ for s in patch.sections]
    assert kinds == ["Junk", "FileDiff", "Junk"]
    assert isinstance(patch.sections[0], Junk) and patch.sections[0].text.startswith("From abc")
    assert patch.text == text and patch.paths == ("src/app.py",)


def test_empty_and_none() -> None:
    assert parse_diff(None).sections == () and parse_diff("").files == ()
    assert split_lines("a\nb") == ["a\n", "b"] and split_lines("a\n") == ["a\n"]


def test_context_line_without_its_space_and_truncated_hunk() -> None:
    text = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n"
    (hunk,) = _only(text).hunks
    assert hunk.lines == ((" ", "a"), (" ", ""), ("-", "b"), ("+", "c"))
    cut = "--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n a\n-b\n+c\n"
    assert _only(cut).hunks[0].added == ((2, "c"),)


def test_paths_of_a_whole_patch() -> None:
    patch = parse_diff(HEADERS_ONLY + NEW_AND_DELETED)
    assert patch.paths == tuple(
        sorted(
            {
                "bin.dat",
                "empty.txt",
                "mode.sh",
                "old name.txt",
                "new name.txt",
                "src/a.py",
                "src/b.py",
                "logo.png",
                "tests/test_new.py",
                "old.txt",
            }
        )
    )
    assert [f.index for f in patch.files] == list(range(8))


def test_bytes_round_trip() -> None:
    data = "+caf\xe9 latin-1\n".encode("latin-1")
    text = decode_patch(data)
    assert encode_line(text) == data and decode_patch(None) == ""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_real_git_output(tmp_path: Path) -> None:
    # What `git diff` really writes for a rename with changes, a mode change, a binary file,
    # an empty new file, a deleted file and a name git must quote.
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            capture_output=True,
            check=True,
        )
        return done.stdout.decode()

    git("init", "-q")
    (tmp_path / "ren.txt").write_text("".join(f"{n}\n" for n in range(20)))
    (tmp_path / "mode.sh").write_text("x\n")
    (tmp_path / "bin.dat").write_bytes(b"\0\1")
    (tmp_path / "café x.txt").write_text("a\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    git("add", "-A")
    git("commit", "-qm", "base")
    git("mv", "ren.txt", "ren2.txt")
    (tmp_path / "ren2.txt").write_text("".join(f"{n}\n" for n in range(19)) + "nineteen\n")
    (tmp_path / "mode.sh").chmod(0o755)
    (tmp_path / "bin.dat").write_bytes(b"\0\2")
    (tmp_path / "café x.txt").write_text("a\nb\n")
    (tmp_path / "empty.txt").write_text("")
    git("rm", "-q", "gone.txt")
    git("add", "-A")
    text = git("diff", "--cached", "-M", "--binary")
    patch = parse_diff(text)
    assert patch.text == text
    got = {(f.status, f.old_path, f.new_path, len(f.hunks), f.binary) for f in patch.files}
    assert got == {
        ("modified", "bin.dat", "bin.dat", 0, True),
        ("modified", "café x.txt", "café x.txt", 1, False),
        ("added", None, "empty.txt", 0, False),
        ("deleted", "gone.txt", None, 1, False),
        ("modified", "mode.sh", "mode.sh", 0, False),
        ("renamed", "ren.txt", "ren2.txt", 1, False),
    }
