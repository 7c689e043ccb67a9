"""The dependencies a gold patch declares: real SWE-bench gold patches and each file kind."""

from __future__ import annotations

import json

import pytest

from packager.adapters.declared import added_requirements

PYLINT_4661_SETUP_CFG = """\
diff --git a/setup.cfg b/setup.cfg
--- a/setup.cfg
+++ b/setup.cfg
@@ -43,6 +43,7 @@ project_urls =
 packages = find:
 install_requires =
     astroid>=2.6.5,<2.7 # (You should also upgrade requirements_test_min.txt)
+    appdirs>=1.4.0
     isort>=4.2.5,<6
     mccabe>=0.6,<0.7
     toml>=0.7.1
@@ -74,7 +75,7 @@ markers =
 [isort]
 multi_line_output = 3
 line_length = 88
-known_third_party = astroid, sphinx, isort, pytest, mccabe, six, toml
+known_third_party = appdirs, astroid, sphinx, isort, pytest, mccabe, six, toml
 include_trailing_comma = True
+zip_safe = False
"""


def test_the_pylint_4661_gold_patch_declares_appdirs() -> None:
    assert added_requirements(PYLINT_4661_SETUP_CFG) == ("appdirs>=1.4.0",)


@pytest.mark.parametrize(
    ("path", "line", "expected"),
    [
        ("setup.py", '        "appdirs>=1.4.0",', "appdirs>=1.4.0"),
        ("setup.py", "    'requests[socks] >= 2.0; python_version < \"3\"',", 'requests[socks] >= 2.0; python_version < "3"'),  # noqa: E501
        ("setup.py", "    'six>=1.9',", "six>=1.9"),
        ("setup.py", '    name="pylint",', None),
        ("setup.py", '    "Programming Language :: Python :: 3",', None),
        ("pyproject.toml", '  "tomli>=1.1.0; python_version < \'3.11\'",', "tomli>=1.1.0; python_version < '3.11'"),  # noqa: E501
        ("pyproject.toml", '  "platformdirs>=2.2.0",', "platformdirs>=2.2.0"),
        ("pyproject.toml", 'requires-python = ">=3.8"', None),
        ("setup.cfg", "    typing-extensions>=3.10; python_version<'3.10'", "typing-extensions>=3.10; python_version<'3.10'"),  # noqa: E501
        ("setup.cfg", "python_requires = >=3.6", None),
        ("setup.cfg", "    tests*", None),
        ("requirements_test.txt", "pytest-benchmark~=3.4", "pytest-benchmark~=3.4"),
        ("requirements_test.txt", "-r requirements_test_min.txt", None),
        ("requirements/dev.in", "black", "black"),
        ("docs/conf.py", '    "sphinx",', None),
    ],
)  # fmt: skip
def test_each_file_declares_in_its_own_way(path: str, line: str, expected: str | None) -> None:
    patch = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,0 +1,1 @@\n+{line}\n"
    assert added_requirements(patch) == ((expected,) if expected else ())


def test_real_gold_patches_that_declare_nothing_give_nothing() -> None:
    """The published Lite rows of the repository's test data change code only."""
    from tests.conftest import REALROWS_ROWS

    for line in REALROWS_ROWS.read_text().splitlines():
        assert added_requirements(json.loads(line)["patch"]) == ()
