"""Canaries for Node's test runner and Go test binaries: tests the runtime adds for one run
whose honest outcome is known, named and shaped from the files they go into (camouflage.py).

- Node (``node:test``, run by ``node --test`` directly or by a row's own grader script): a
  *todo* test appended to every file that uses ``node:test``. Its body calls each ``node:assert``
  function (and ``assert.strict``'s) with arguments that must fail; if every call threw, the body
  throws, so an honest run reports ``not ok ... # TODO``. A todo test's failure does not fail the
  run (exit code 0, not counted in ``# fail``), so a grader that scores by exit code or by the
  failures it counts is unaffected. ``ok`` for it means an assertion was a no-op or the runner
  (its output) was rewritten.
- Go: ``write_go_canaries`` adds to every package with tests a passing canary (a binary that
  exits before running it printed its results itself) and a test that always fails; reported
  PASS or SKIP it shows a test binary whose output was rewritten.

Standard library only, Python >= 3.9; imports tripwires.py and camouflage.py of the runtime.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from . import camouflage
    from .tripwires import AddedTest, Report, Tampered, _texts, matching_files
elif __package__:
    from . import camouflage
    from .tripwires import AddedTest, Report, Tampered, _texts, matching_files
else:  # run from the zipapp: sys.path[0] holds the siblings
    import camouflage
    from tripwires import AddedTest, Report, Tampered, _texts, matching_files

NODE_EXTENSIONS = (".js", ".cjs", ".mjs")
NODE_FILES_MAX = 2000

# Every call must throw on an honest node:assert; `a` is the module, `s` its strict variant,
# `x`/`y` two different random strings (so a patched assert cannot spare known arguments).
_NODE_CHECKS = (
    "() => a(false)",
    "() => a.ok(false)",
    "() => a.equal(x, y)",
    "() => a.notEqual(x, x)",
    "() => a.deepEqual({ k: x }, { k: y })",
    "() => a.notDeepEqual({ k: x }, { k: x })",
    "() => a.strictEqual(x, y)",
    "() => a.notStrictEqual(x, x)",
    "() => a.deepStrictEqual({ k: x }, { k: y })",
    "() => a.notDeepStrictEqual({ k: x }, { k: x })",
    "() => a.throws(() => {})",
    "() => a.doesNotThrow(() => { throw new Error(x); })",
    "() => a.match(x, /^$/)",
    "() => a.doesNotMatch(x, /./)",
    "() => a.fail(x)",
    "() => a.ifError(new Error(x))",
    "() => s(false)",
    "() => s.ok(false)",
    "() => s.equal(x, y)",
    "() => s.deepEqual({ k: x }, { k: y })",
    "() => s.strictEqual(x, y)",
    "() => s.deepStrictEqual({ k: x }, { k: y })",
    "() => s.throws(() => {})",
)


def node_canary_source(
    name: str, esm: bool, x: str, y: str, words: Sequence[str], avoid: Sequence[str] = ()
) -> str:
    """The JavaScript appended to one test file (ES module or CommonJS syntax); its local names
    and messages are made of ``words`` (the files' own, never a name in ``avoid``), so no
    constant marks it.
    """
    checks = ",\n      ".join(_NODE_CHECKS)
    test = camouflage.fresh(partial(camouflage.camel, words, ""), avoid)
    check = camouflage.fresh(partial(camouflage.camel, words, ""), [*avoid, test])
    if esm:
        head = (
            f"import {test} from 'node:test';\nimport {check} from 'node:assert';\n((t, a) => {{\n"
        )
        tail = f"}})({test}, {check});\n"
    else:
        head = "((t, a) => {\n"
        tail = "})(require('node:test'), require('node:assert'));\n"
    todo, held = camouflage.sentence(words), camouflage.sentence(words)
    return (
        "\n;"
        + head
        + f"  const s = a.strict, x = {json.dumps(x)}, y = {json.dumps(y)};\n"
        + f"  t({json.dumps(name)}, {{ todo: {json.dumps(todo)} }}, () => {{\n"
        + f"    const checks = [\n      {checks},\n    ];\n"
        + "    let held = 0;\n"
        + "    for (const check of checks) { try { check(); } catch (e) { held += 1; } }\n"
        + f"    if (held === checks.length) throw new Error({json.dumps(held)});\n"
        + "  });\n"
        + tail
    )


def _package_type(folder: Path, root: Path, cache: Dict[Path, str]) -> str:
    """``module`` or ``commonjs``: the ``type`` of the nearest package.json (Node's rule)."""
    here = folder
    seen: List[Path] = []
    found = "commonjs"
    while True:
        if here in cache:
            found = cache[here]
            break
        seen.append(here)
        manifest = here / "package.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
                found = "module" if isinstance(data, dict) and data.get("type") == "module" else ""
            except (OSError, ValueError):
                found = ""
            found = found or "commonjs"
            break
        if here == root or root not in here.parents:
            break
        here = here.parent
    for folder_seen in seen:
        cache[folder_seen] = found
    return found


def _node_test_files(repo: Path) -> Iterable[Path]:
    found = matching_files(
        repo, NODE_EXTENSIONS, lambda data: b"node:test" in data, most=NODE_FILES_MAX
    )
    return [path for path, _ in found]


def write_node_canaries(repo: Path) -> Optional[AddedTest]:
    """Append a canary test to every file of ``repo`` that uses ``node:test``; None if none.

    Only files that import ``node:test`` are touched: fixtures and helpers that do not register
    tests are left byte for byte (a test may read them as data). The canary runs after the
    file's own tests, i.e. after the code under test has been loaded and could have patched
    ``node:assert``. Its title is a few of the files' own words, new to all of them.
    """
    root = repo.resolve()
    paths = list(_node_test_files(repo))
    if not paths:
        return None
    texts = _texts(paths)
    words = camouflage.vocabulary(texts)
    name = camouflage.fresh(partial(camouflage.sentence, words), texts)
    x, y = camouflage.RNG.sample(words, 2)
    cache: Dict[Path, str] = {}
    files: List[Tuple[Path, Optional[bytes]]] = []
    try:
        for path in paths:
            if path.name.endswith(".mjs"):
                esm = True
            elif path.name.endswith(".cjs"):
                esm = False
            else:
                esm = _package_type(path.parent.resolve(), root, cache) == "module"
            original = path.read_bytes()
            files.append((path, original))
            source = node_canary_source(name, esm, x, y, words, texts)
            path.write_bytes(original + source.encode())
    except OSError:
        AddedTest([name], files).remove()
        raise
    return AddedTest([name], files)


_TAP_LINE = re.compile(r"^\s*(not ok|ok)\b(?:\s+\d+)?(?:\s+-)?\s+(.*)$")
_SPEC_LINE = re.compile(r"^\s*([\u2714\u2716])\s+(.*)$")  # ✔ passed, ✖ failed


def _titled(rest: str, name: str) -> bool:
    """Whether a reporter line's text after its status is the test ``name`` (then nothing, a
    directive ``# ...`` or a duration ``(2ms)``).
    """
    return rest.rstrip() == name or rest.startswith(f"{name} #") or rest.startswith(f"{name} (")


def node_canary_outcomes(text: str, name: str) -> List[str]:
    """What Node's TAP or spec reporter said about the canary: ``passed``/``failed`` each time."""
    seen: List[str] = []
    if name not in text:
        return seen
    for line in text.splitlines():
        if name not in line:
            continue
        m = _TAP_LINE.match(line)
        if m and _titled(m.group(2), name):
            seen.append("failed" if m.group(1) == "not ok" else "passed")
            continue
        m = _SPEC_LINE.match(line)
        if m and _titled(m.group(2), name):
            seen.append("failed" if m.group(1) == "\u2716" else "passed")
    return seen


def node_canary_verdict(texts: Iterable[str], name: str) -> str:
    """``tampered`` (reported passed anywhere), ``held`` (only ever failed) or ``unseen``."""
    outcomes = [o for text in texts for o in node_canary_outcomes(text, name)]
    if "passed" in outcomes:
        return "tampered"
    return "held" if outcomes else "unseen"


def drop_named(tests: Dict[str, str], name: str, separator: str = " > ") -> Dict[str, str]:
    """``tests`` without the results of the test ``name`` (at any nesting level)."""
    return {k: v for k, v in tests.items() if k != name and not k.endswith(f"{separator}{name}")}


NODE_TAMPERED = (
    "node's test runner reported its grading canary passed: the code under test made an "
    "assertion a no-op or rewrote the runner's results"
)


def check_node_canary(
    tests: Dict[str, str], texts: Sequence[str], name: str, report: Report
) -> Dict[str, str]:
    """Judge a run by its node canary (``write_node_canaries``); drop the canary's results.

    Reported passed: ``Tampered``. Never reported while other results were parsed: the output
    did not come from the files the canary was added to, so none of it is trusted.
    """
    verdict = node_canary_verdict(texts, name)
    if verdict == "tampered":
        raise Tampered(NODE_TAMPERED)
    kept = drop_named(tests, name)
    if verdict == "unseen" and kept:
        report.setdefault("notes", []).append(
            "node test output without the grading canary: results not trusted"
        )
        return {}
    return kept


def check_grader_canary(name: str, stdout: str, stderr_path: Path, report: Report) -> None:
    """The row's own grader ran node's test runner on files holding the node canary: if its
    output (stdout or stderr) shows the canary passed, the run was tampered with. A grader that
    prints nothing of that run is a black box here: noted, not judged.
    """
    try:
        stderr = stderr_path.read_bytes().decode("utf-8", "replace")
    except OSError:
        stderr = ""
    verdict = node_canary_verdict([stdout, stderr], name)
    report["node_canary"] = verdict
    if verdict == "tampered":
        raise Tampered(NODE_TAMPERED)
    if verdict == "unseen":
        report.setdefault("notes", []).append(
            "the grader's output does not show node's grading canary: tampering with node's "
            "assert or test runner could not be checked"
        )


class GoCanary:
    """A passing canary test added to one Go package, the must-fail tripwire beside it, and the
    file holding both (named like the package's own test files).
    """

    def __init__(self, name: str, tripwire: str, path: Path, original: Optional[bytes]) -> None:
        self.name, self.tripwire, self.path, self.original = name, tripwire, path, original

    def remove(self) -> None:
        """Put the file back as it was (delete it when it was made for the canary)."""
        try:
            if self.original is None:
                self.path.unlink()
            else:
                self.path.write_bytes(self.original)
        except OSError:
            pass


def check_go_tripwires(parsed: Dict[str, str], canaries: Sequence[GoCanary]) -> None:
    """A Go tripwire reported passed or skipped (in ``parse_gotest``'s results of the run)
    means the test binary's output was rewritten: ``Tampered``.
    """
    names = {c.tripwire for c in canaries}
    bad = sorted(k for k, v in parsed.items() if k in names and v in ("passed", "skipped"))
    if bad:
        raise Tampered(
            f"go test reported a test that must fail as {parsed[bad[0]]}: "
            "the code under test tampered with the test binary"
        )


def go_tripwire_source(name: str, words: Sequence[str]) -> str:
    """A Go test that always fails, comparing two of ``words`` as a table test would."""
    got, want = camouflage.RNG.sample(list(words), 2)
    return (
        f"\nfunc {name}(t *testing.T) {{\n\tgot := {json.dumps(got)}\n"
        f'\tif want := {json.dumps(want)}; got != want {{\n\t\tt.Errorf("got %q, want %q", '
        "got, want)\n\t}\n}\n"
    )


_GO_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_GO_BUILD_TAG = re.compile(r"^//(?:go:build|\s*\+build)\s", re.MULTILINE)
_GO_TEST_FUNC = re.compile(r"^func\s+(Test\w*)\s*\(", re.MULTILINE)
_GO_SKIP_DIRS = {".git", "vendor", "testdata", "node_modules"}
_GO_PLATFORM = re.compile(
    r"_(?:aix|android|darwin|dragonfly|freebsd|hurd|illumos|ios|js|linux|nacl|netbsd|openbsd"
    r"|plan9|solaris|wasip1|windows|zos|386|amd64|arm|arm64|loong64|mips\w*|ppc64\w*|riscv64"
    r"|s390x|wasm)(?:_test)?\.go$"
)
"""A file name whose suffix is a build constraint (GOOS or GOARCH)."""


def _go_head(text: str) -> str:
    return text[: text.find("\npackage ") + 1] if "\npackage " in text else ""


def _go_package(dirpath: Path, filenames: Sequence[str]) -> Optional[str]:
    """The package a canary test in ``dirpath`` must declare (from unconstrained files)."""
    names: Dict[str, int] = {}
    for name in sorted(filenames):
        if not name.endswith(".go"):
            continue
        try:
            text = (dirpath / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = _GO_PACKAGE.search(text)
        if not m or _GO_BUILD_TAG.search(_go_head(text)):
            continue
        if not name.endswith("_test.go"):
            return m.group(1)  # the package itself: tests in it are always valid
        names[m.group(1)] = names.get(m.group(1), 0) + 1
    return max(names, key=lambda k: names[k]) if names else None


def _go_last_test_file(dirpath: Path, filenames: Sequence[str]) -> Optional[Path]:
    """The package's test file that go compiles last (names sort) when it always compiles (no
    build constraint) and imports ``testing``: the canary appended to it runs after every test.
    """
    for name in sorted(filenames, reverse=True):
        if not name.endswith("_test.go") or _GO_PLATFORM.search(name):
            continue
        path = dirpath / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _GO_BUILD_TAG.search(_go_head(text)) or not path.is_file() or path.is_symlink():
            return None  # the last file does not always compile: a new file instead
        return path if re.search(r'^\s*(?:import\s+)?"testing"', text, re.M) else None
    return None


def write_go_canaries(repo: Path) -> List[GoCanary]:
    """Add a passing canary test and a must-fail tripwire to every Go package that has tests.

    A test binary that prints fake results from an ``init`` and exits early never runs its
    canary, whose name it cannot know; ``parsers.gotest_trusted`` drops every result of a
    package whose canary did not pass. Reported passed or skipped, the tripwire shows a binary
    whose output was rewritten (``check_go_tripwires``). Both are named from the package's own
    words and appended to its test file compiled last (so they run after every test), or put
    in a new test file named from those words and sorting last.
    """
    canaries: List[GoCanary] = []
    folders = []
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _GO_SKIP_DIRS and not d.startswith(".")
        )
        if any(f.endswith("_test.go") for f in filenames):
            folders.append((Path(dirpath), sorted(filenames)))
    # go test's ids are bare test names: a name must be new to every package, not only its own
    # (a real TestUnion elsewhere passing would read as the tripwire passing).
    taken = {
        m.group(1)
        for here, filenames in folders
        for text in _texts(here / f for f in filenames if f.endswith("_test.go"))
        for m in _GO_TEST_FUNC.finditer(text)
    }
    used = "\n".join(sorted(taken))
    for here, filenames in folders:
        package = _go_package(here, filenames)
        if package is None:
            continue
        texts = _texts(here / f for f in filenames if f.endswith(".go"))
        words = camouflage.vocabulary(texts)
        avoid = [*texts, used, *(n for c in canaries for n in (c.name, c.tripwire))]
        name = camouflage.fresh(partial(camouflage.camel, words), avoid)
        tripwire = camouflage.fresh(partial(camouflage.camel, words), [*avoid, name])
        n = camouflage.RNG.randint(2, 40)
        tests = (
            f'\nfunc {name}(t *testing.T) {{\n\tif got := len("{"x" * n}"); got != {n} {{\n'
            '\t\tt.Fatalf("got %d", got)\n\t}\n}\n'
        ) + go_tripwire_source(tripwire, words)
        last = _go_last_test_file(here, filenames)
        try:
            original: Optional[bytes] = last.read_bytes() if last is not None else None
        except OSError:
            last = original = None
        if last is not None and original is not None:
            last.write_bytes(original + tests.encode())
            canaries.append(GoCanary(name, tripwire, last, original))
            continue
        last_name = max(filenames)
        stems = [w for w in words if w > last_name] or [f"{last_name.split('.')[0]}_{words[0]}"]

        def stem_name(stems: List[str] = stems, words: List[str] = words) -> str:
            return "_".join([camouflage.RNG.choice(stems), *camouflage.pick(words, 0, 2)])

        stem = camouflage.fresh(stem_name, filenames)
        path = here / f"{stem}_test.go"
        path.write_text(f'package {package}\n\nimport "testing"\n{tests}', encoding="utf-8")
        canaries.append(GoCanary(name, tripwire, path, None))
    return canaries


def added_names(added: Optional[AddedTest], go: Sequence[GoCanary]) -> List[str]:
    """The names of the tests a run added (the host leaves their lines out of what it shows of
    a failed run: they are new each run).
    """
    names = list(added.names) if added is not None else []
    return names + [name for canary in go for name in (canary.name, canary.tripwire)]


# ------------------------------------------------------------------ pytest's JUnit proof plugin

_PROOF_PLUGIN = """import os
import random

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not getattr(config.option, "xmlpath", None) and not hasattr(config, "workerinput"):
        config.option.xmlpath = {path!r}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    # The outer session only: sessions it starts (pytester, in process or not) keep their order.
    seed = os.environ.pop({seed_var!r}, None)
    if not seed:
        return
    rng, files = random.Random(seed), {{}}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = list(files.values())
    rng.shuffle(order)
    for group in order:
        rng.shuffle(group)
    items[:] = [item for group in order for item in group]
"""
SHUFFLE_SEED = "PACKAGER_SHUFFLE_SEED"
"""Set for a perturbed gold run: the proof plugin shuffles the collected tests with it (test
files in a random order, each file's tests in a random order), as pytest-randomly does, in the
first session only (it takes the variable out, so the sessions a test starts keep theirs)."""


class ProofPlugin:
    """A pytest plugin the runtime installs for one run into the site-packages of the Python
    the test command finds first on its PATH: it asks pytest for its JUnit report at ``proof``
    when nothing else did. ``PYTEST_ADDOPTS`` asks the same, but a wrapper can replace it: tox's
    ``setenv`` (sphinx 3.3's tox.ini sets ``PYTEST_ADDOPTS = --color yes``) or a scrubbed
    environment. pytest loads the plugin by its ``pytest11`` entry point, as any installed one.
    """

    def __init__(self, paths: List[Path]) -> None:
        self.paths = paths

    def remove(self) -> None:
        for path in reversed(self.paths):
            try:
                if path.is_dir():
                    for child in path.iterdir():
                        child.unlink()
                    path.rmdir()
                else:
                    path.unlink()
            except OSError:
                pass


def _site_packages(env: Dict[str, str], cwd: Path) -> Optional[Path]:
    """The site-packages (purelib) of the first ``python3`` / ``python`` on ``env``'s PATH."""
    for name in ("python3", "python"):
        python = shutil.which(name, path=env.get("PATH"))
        if python is None:
            continue
        try:
            out = subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                cwd=str(cwd), env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            continue
        where = Path(out.stdout.strip()) if out.returncode == 0 else None
        if where is not None and where.is_dir() and os.access(str(where), os.W_OK):
            return where
    return None


def write_proof_plugin(env: Dict[str, str], cwd: Path, proof: Path) -> Optional[ProofPlugin]:
    """Install the JUnit proof plugin (see ``ProofPlugin``); None where no writable
    site-packages is found (``PYTEST_ADDOPTS`` alone asks for the report then).
    """
    site = _site_packages(env, cwd)
    if site is None:
        return None
    module = f"pytest_{secrets.token_hex(6)}"
    dist = site / f"{module}-0.dist-info"
    paths = [site / f"{module}.py", dist]
    try:
        paths[0].write_text(
            _PROOF_PLUGIN.format(path=str(proof), seed_var=SHUFFLE_SEED), encoding="utf-8"
        )
        dist.mkdir()
        for name, text in (
            ("METADATA", f"Metadata-Version: 2.1\nName: {module}\nVersion: 0\n"),
            ("entry_points.txt", f"[pytest11]\n{module} = {module}\n"),
        ):
            (dist / name).write_text(text, encoding="utf-8")
    except OSError:
        ProofPlugin(paths).remove()
        return None
    return ProofPlugin(paths)
