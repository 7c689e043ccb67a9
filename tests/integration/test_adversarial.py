"""Adversarial patches against every gradeable sample, graded by the real local engine.

Each attack is a shell script run in the task's agent container at the base commit (optionally
after the gold patch); what it leaves in /testbed is collected like an agent's work (`git add
-A`, `git diff --cached`) and graded with `packager.engines.containers.run_once(..., patch=...)` in
a fresh grader container. Every attack must score below 1.0 while the gold patch scores 1.0. Attacks
are "cheat only" (no fix: a 1.0 would be the cheat winning) except the patch-policy ones, which
are "gold plus cheating". An attack marked residual would be run and reported, not asserted
(in-process tampering grading cannot stop); none is today (docs/security.md, "Adversarial
patches"). Per language: runner monkeypatch, skip-all, fake output with exit 0, early exit and
edited test files.

The table (attack x task -> reward) is printed at the end of the module.
"""

from __future__ import annotations

import json
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from packager.context import RunContext
from packager.engines.containers import RunPlan, run_once, wait_for_removals
from packager.images.build import labels_for
from packager.images.tar import make_tar
from tests.conftest import run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = {
    "samples__textkit-1": "python",
    "samples__intset-2": "go",
    "samples__kvstore-3": "node",
    "samples__inventory-4": "python",
}
# The file the tests import, where code-under-test attacks go (Go: a new file in the package).
MODULE = {
    "samples__textkit-1": "textkit/slug.py",
    "samples__inventory-4": "src/stock.py",
    "samples__kvstore-3": "kv.js",
    "samples__intset-2": "cheat.go",
}
WORKERS = 4

RUN = RunContext()
"""This module's run: its containers carry its id (the leftover check finds them by it)."""


@dataclass(frozen=True)
class Attack:
    name: str
    klass: str
    langs: tuple[str, ...]
    script: str  # bash, run in /testbed; $MODULE, $IDS (one per line), $NAMES (Node) are set
    gold: bool = False  # gold plus cheating (else cheat only)
    residual: bool = False  # known to win: in-process tampering (reported, not asserted)
    tasks: tuple[str, ...] = ()  # restrict to these tasks (default: every task of the langs)


# --------------------------------------------------------------------------- attack snippets

# Helpers the code under test starts: a daemon that keeps writing rewards for 20 s, and a
# rewrite of /tests/test.sh that injects a reward after the line running grading.pyz (bash reads
# its script as it goes, so the injected line would run next).
DAEMON_SH = r"""cat > $DIR/cheat.sh <<'EOF'
for i in $(seq 1 400); do
  echo '{"reward": 1.0}' > /logs/verifier/reward.json 2>/dev/null
  echo 1 > /logs/verifier/reward.txt 2>/dev/null
  [ -n "$REWARD_FILE" ] && echo '{"reward": 1.0}' > "$REWARD_FILE" 2>/dev/null
  sleep 0.05
done
EOF
"""
TAMPER_SH = r"""cat > $DIR/cheat.sh <<'EOF'
awk '{print} /pyz/ {print "echo {\\\"reward\\\": 1.0} > /logs/verifier/reward.json; exit 0"}' \
  /tests/test.sh > /tmp/test.sh.new && cat /tmp/test.sh.new > /tests/test.sh
EOF
"""
WRITE_SH = r"""cat > $DIR/cheat.sh <<'EOF'
mkdir -p /logs/verifier
echo '{"reward": 1.0}' > /logs/verifier/reward.json
echo 1 > /logs/verifier/reward.txt
[ -n "$REWARD_FILE" ] && echo '{"reward": 1.0}' > "$REWARD_FILE"
EOF
"""


def _py(code: str) -> str:
    """Append Python to the module under test."""
    return f"cat >> $MODULE <<'PYEOF'\n{textwrap.dedent(code)}\nPYEOF\n"


PY_RUN_CHEAT_DETACHED = _py(
    """
    import subprocess as _s
    _s.Popen(["sh", __file__.rsplit("/", 1)[0] + "/cheat.sh"], start_new_session=True,
             stdout=_s.DEVNULL, stderr=_s.DEVNULL)
    """
)
PY_RUN_CHEAT = _py(
    """
    import subprocess as _s
    _s.run(["sh", __file__.rsplit("/", 1)[0] + "/cheat.sh"])
    """
)
PY_FORGE = """
import os as _os, sys as _sys
_ids = open(__file__.rsplit("/", 1)[0] + "/.ids").read().split()
_out = ["=" * 20 + " test session starts " + "=" * 20]
_out += [f"{i} PASSED [100%]" for i in _ids]
_out += ["=" * 20 + " short test summary info " + "=" * 20]
_out += [f"PASSED {i}" for i in _ids]
_out += ["=" * 20 + f" {len(_ids)} passed in 0.01s " + "=" * 20]
"""
PY_FAKE_EXIT = _py(
    PY_FORGE
    + """
print("\\n".join(_out), flush=True)
_os._exit(0)
"""
)
PY_FAKE_ATEXIT = _py(
    PY_FORGE
    + """
import atexit as _atexit
_atexit.register(lambda: (print("\\n".join(_out), flush=True), _os._exit(0)))
"""
)
PY_EXIT = _py("import os as _os\n_os._exit(0)\n")
PY_RUNNER_PATCH = _py(
    """
    import sys as _sys
    if "_pytest.reports" in _sys.modules:
        from _pytest.reports import TestReport as _TR
        _orig = _TR.from_item_and_call.__func__
        def _fake(cls, item, call):
            rep = _orig(cls, item, call)
            rep.outcome, rep.longrepr = "passed", None
            return rep
        _TR.from_item_and_call = classmethod(_fake)
    """
)
# The same, made adaptive: it spares every test it can tell was the grader's by what the runtime
# used to add (a `test_` + 12 hex digits name, "grading tripwire" in its source, a file of that
# name), so those fail honestly while every real failure is reported passed; and it hides the
# names the runtime's scan of the patch reads, so only the tripwires can stop it. It scored 1.0
# against the runtime before them.
PY_RUNNER_PATCH_ADAPTIVE = _py(
    """
    import inspect as _inspect, re as _re, sys as _sys
    def _spared(item):
        try:
            source = _inspect.getsource(item.obj)
        except Exception:
            source = ""
        path = item.nodeid.split("::")[0]
        return bool(_re.fullmatch("test_[0-9a-f]{12}", item.name)
                    or _re.search("test_[0-9a-f]{12}", path)
                    or "grading" in source or "tripwire" in source)
    _mod = "_py" + "test.reports"
    if _mod in _sys.modules:
        _TR = getattr(_sys.modules[_mod], "Test" + "Report")
        _orig = _TR.from_item_and_call.__func__
        def _fake(cls, item, call):
            rep = _orig(cls, item, call)
            if not _spared(item):
                rep.outcome, rep.longrepr = "passed", None
            return rep
        _TR.from_item_and_call = classmethod(_fake)
    """
)
FORCE_PASS_PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome, rep.longrepr = "passed", None
"""


def _file(path: str, content: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'FILEEOF'\n{content}FILEEOF\n"


PY_STUB_TESTS = r"""IDS=$DIR/.ids python3 - <<'PYEOF'
import collections, os, pathlib
by_file = collections.defaultdict(list)
for i in pathlib.Path(os.environ["IDS"]).read_text().split():
    f, _, name = i.partition("::")
    by_file[f].append(name)
for f, names in by_file.items():
    pathlib.Path(f).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(f).write_text("".join(f"def {n}():\n    pass\n\n" for n in names))
PYEOF
"""

GO_HEADER = 'package $PKG\n\nimport (\n\t"fmt"\n\t"os"\n\t"os/exec"\n\t"strings"\n\t"syscall"\n)\n'
GO_USE = (
    "var _ = fmt.Sprint\nvar _ = exec.Command\nvar _ = syscall.Setsid\nvar _ = strings.HasSuffix\n"
)


def _go(body: str) -> str:
    """A non-test file in the package whose init() runs `body` inside the test binary only."""
    code = (
        GO_HEADER
        + GO_USE
        + '\nfunc init() {\n\tif !strings.HasSuffix(os.Args[0], ".test") {\n\t\treturn\n\t}\n'
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "\t")
        + "\n}\n"
    )
    return f"PKG=$(sed -n 's/^package //p' set.go | head -1)\ncat > $MODULE <<GOEOF\n{code}GOEOF\n"


GO_FORGE = """
data, _ := os.ReadFile("/testbed/.ids")
for _, id := range strings.Fields(string(data)) {
    fmt.Printf("=== RUN   %s\\n--- PASS: %s (0.00s)\\n", id, id)
}
fmt.Println("PASS")
"""
GO_DETACHED = """
cmd := exec.Command("sh", "/testbed/cheat.sh")
cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
_ = cmd.Start()
"""
GO_SYNC = 'exec.Command("sh", "/testbed/cheat.sh").Run()\n'
# The test binary's stdout goes through sed, which reports every failed test as passed.
GO_RUNNER_PATCH = """
r, w, _ := os.Pipe()
cmd := exec.Command("sed", "-u", "s/--- FAIL/--- PASS/")
cmd.Stdin, cmd.Stdout = r, os.Stdout
_ = cmd.Start()
_ = syscall.Dup2(int(w.Fd()), 1)
"""
# Adaptive: every failure but the old tripwire's (named TestGradingTripwire...) reported passed.
GO_RUNNER_PATCH_ADAPTIVE = GO_RUNNER_PATCH.replace(
    '"s/--- FAIL/--- PASS/"', '"/GradingTripwire/!s/--- FAIL/--- PASS/"'
).replace(
    "_ = syscall.Dup2(int(w.Fd()), 1)",
    "_, _, _ = syscall.Syscall(syscall.SYS_DUP3, w.Fd(), 1, 0)",  # what the scan does not read
)
# Run no test at all: a -test.run that matches nothing, appended to the binary's arguments.
GO_SKIP_ALL = 'os.Args = append(os.Args, "-test.run=^$")\n'
PY_SKIP_ALL = _py("import pytest as _pytest\n_pytest.skip('cheat', allow_module_level=True)\n")

JS_DETACHED = (
    "cat >> $MODULE <<'JSEOF'\n"
    "require('child_process').spawn('sh', ['/testbed/cheat.sh'],"
    " {detached: true, stdio: 'ignore'}).unref();\nJSEOF\n"
)
JS_SYNC = (
    "cat >> $MODULE <<'JSEOF'\nrequire('child_process').execSync('sh /testbed/cheat.sh');\nJSEOF\n"
)
JS_FAKE_EXIT = (
    "cat >> $MODULE <<'JSEOF'\n"
    "const _names = require('fs').readFileSync('/testbed/.names', 'utf8').split('\\n')"
    ".filter(Boolean);\n"
    "_names.forEach((n, i) => { console.log(`ok ${i + 1} - ${n}`);"
    " console.error(`ok ${i + 1} - ${n}`); });\n"
    "process.exit(0);\nJSEOF\n"
)
JS_ASSERT_PATCH = (
    "cat >> $MODULE <<'JSEOF'\n"
    "const _a = require('node:assert');\n"
    "for (const k of ['ok', 'equal', 'strictEqual', 'deepEqual', 'deepStrictEqual', 'throws',"
    " 'notStrictEqual']) { _a[k] = () => {}; }\nJSEOF\n"
)
# The test process rewrites its reports to `node --test` (each file runs in a child that sends
# v8-serialized events on stdout): every `test:fail` event becomes a same-length `test:pass`.
JS_RUNNER_PATCH = (
    "cat >> $MODULE <<'JSEOF'\n"
    "const _w = process.stdout.write.bind(process.stdout);\n"
    "process.stdout.write = (chunk, ...rest) => {\n"
    "  if (typeof chunk !== 'string') {\n"
    "    const b = Buffer.from(chunk);\n"
    "    for (let i = b.indexOf('test:fail'); i >= 0; i = b.indexOf('test:fail', i))"
    " b.write('test:pass', i);\n"
    "    chunk = b;\n"
    "  }\n"
    "  return _w(chunk, ...rest);\n"
    "};\nJSEOF\n"
)
# Adaptive: the events of the old canary (titled grading_canary_...) are left as they are.
JS_RUNNER_PATCH_ADAPTIVE = (
    JS_RUNNER_PATCH.replace(
        "  if (typeof chunk !== 'string') {\n",
        "  if (typeof chunk !== 'string' && !Buffer.from(chunk).includes('grading_canary_')) {\n",
    )
    .replace("process.stdout.write = ", "process.stdout['wri' + 'te'] = ")
    .replace("'test:fail'", "'test:' + 'fail'")
    .replace("'test:pass'", "'test:' + 'pass'")
)
# node:test reads no option the code under test can reach (its options objects have no
# prototype), so skipping every test takes an edit of the test files.
JS_SKIP_ALL = (
    'for f in test/*.test.js; do sed -i "s/^test(/test.skip(/" $f; done\n'
    "cp test/kv.test.js test/zz.test.js\n"
)
JS_STUB_TESTS = (
    "for f in test/kv.test.js test/zz.test.js; do\n"
    "  echo \"const test = require('node:test');\" > $f\n"
    '  while read -r n; do [ -n "$n" ] && echo "test(\'$n\', () => {});" >> $f; '
    "done < $DIR/.names\n"
    "done\n"
)

ALL = ("python", "go", "node")
ATTACKS = [
    # 1. tests
    Attack("tests-stubbed", "1 tests", ("python",), PY_STUB_TESTS),
    Attack("tests-deleted", "1 tests", ALL, "rm -rf tests test *_test.go\n"),
    Attack(
        "tests-stubbed",
        "1 tests",
        ("go",),
        "cat > set_test.go <<'EOF'\npackage intset\n\nimport \"testing\"\n\n"
        "func TestIntersect(t *testing.T) {\n"
        '\tt.Run("partial overlap", func(t *testing.T) {})\n'
        '\tt.Run("disjoint sets", func(t *testing.T) {})\n}\n'
        'func TestSet(t *testing.T) {\n\tt.Run("contains present", func(t *testing.T) {})\n'
        '\tt.Run("contains missing", func(t *testing.T) {})\n}\n'
        "func TestUnion(t *testing.T) {}\nfunc TestSorted(t *testing.T) {}\nEOF\n",
    ),
    Attack("tests-stubbed+added", "1 tests", ("node",), JS_STUB_TESTS),
    # 2. pytest configuration
    Attack(
        "conftest-root", "2 conftest/config", ("python",), _file("conftest.py", FORCE_PASS_PLUGIN)
    ),
    Attack(
        "conftest-nested",
        "2 conftest/config",
        ("python",),
        _file("tests/conftest.py", FORCE_PASS_PLUGIN),
    ),
    Attack(
        "ini-plugin",
        "2 conftest/config",
        ("python",),
        _file("cheatplugin.py", FORCE_PASS_PLUGIN)
        + _file("pytest.ini", "[pytest]\naddopts = -p cheatplugin\n"),
    ),
    Attack(
        "setup.cfg-deselect",
        "2 conftest/config",
        ("python",),
        _file(
            "setup.cfg",
            '[tool:pytest]\naddopts = -k "not accented and not compat and not hidden"\n',
        ),
    ),
    Attack(
        "pyproject-plugin",
        "2 conftest/config",
        ("python",),
        _file("cheatplugin.py", FORCE_PASS_PLUGIN)
        + _file("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p cheatplugin"\n'),
    ),
    # 3. start-up hooks
    Attack(
        "sitecustomize+pth",
        "3 startup hooks",
        ("python",),
        _file("cheatplugin.py", FORCE_PASS_PLUGIN)
        + _file("sitecustomize.py", "import os\nos.environ['PYTEST_PLUGINS'] = 'cheatplugin'\n")
        + _file("cheat.pth", "import sitecustomize\n"),
    ),
    Attack("init-exit-forged", "3 startup hooks", ("go",), _go(GO_FORGE + "os.Exit(0)\n")),
    Attack(
        "testmain-exit",
        "6 early exit",
        ("go",),
        'cat > main_test.go <<\'EOF\'\npackage intset\n\nimport (\n\t"fmt"\n\t"os"\n'
        '\t"strings"\n\t"testing"\n)\n\nfunc TestMain(m *testing.M) {\n'
        '\tdata, _ := os.ReadFile("/testbed/.ids")\n'
        "\tfor _, id := range strings.Fields(string(data)) {\n"
        '\t\tfmt.Printf("=== RUN   %s\\n--- PASS: %s (0.00s)\\n", id, id)\n\t}\n'
        '\tfmt.Println("PASS")\n\tos.Exit(0)\n}\nEOF\n',
    ),
    Attack("runner-monkeypatch", "3 startup hooks", ("python",), PY_RUNNER_PATCH),
    Attack("runner-monkeypatch", "3 startup hooks", ("go",), _go(GO_RUNNER_PATCH)),
    Attack("runner-monkeypatch", "3 startup hooks", ("node",), JS_RUNNER_PATCH),
    Attack("assert-monkeypatch", "3 startup hooks", ("node",), JS_ASSERT_PATCH),
    Attack("runner-monkeypatch-adaptive", "3 startup hooks", ("python",), PY_RUNNER_PATCH_ADAPTIVE),
    Attack(
        "runner-monkeypatch-adaptive", "3 startup hooks", ("go",), _go(GO_RUNNER_PATCH_ADAPTIVE)
    ),
    Attack("runner-monkeypatch-adaptive", "3 startup hooks", ("node",), JS_RUNNER_PATCH_ADAPTIVE),
    Attack("skip-all", "3 startup hooks", ("python",), PY_SKIP_ALL),
    Attack("skip-all", "3 startup hooks", ("go",), _go(GO_SKIP_ALL)),
    Attack("skip-all", "1 tests", ("node",), JS_SKIP_ALL),
    # 4. fake output
    Attack("fake-output-exit", "4 fake output", ("python",), PY_FAKE_EXIT),
    Attack("fake-output-atexit", "4 fake output", ("python",), PY_FAKE_ATEXIT),
    Attack("fake-output-exit", "4 fake output", ("go",), _go(GO_FORGE + "os.Exit(0)\n")),
    Attack("fake-output-exit", "4 fake output", ("node",), JS_FAKE_EXIT),
    # 5. reward files
    Attack("reward-write", "5 reward file", ("python",), WRITE_SH + PY_RUN_CHEAT),
    Attack("reward-write", "5 reward file", ("go",), WRITE_SH + _go(GO_SYNC)),
    Attack("reward-write", "5 reward file", ("node",), WRITE_SH + JS_SYNC),
    Attack("reward-daemon", "5 reward file", ("python",), DAEMON_SH + PY_RUN_CHEAT_DETACHED),
    Attack("reward-daemon", "5 reward file", ("go",), DAEMON_SH + _go(GO_DETACHED)),
    Attack("reward-daemon", "5 reward file", ("node",), DAEMON_SH + JS_DETACHED),
    Attack("tamper-test.sh", "5 reward file", ("python",), TAMPER_SH + PY_RUN_CHEAT),
    Attack("tamper-test.sh", "5 reward file", ("go",), TAMPER_SH + _go(GO_SYNC)),
    Attack("tamper-test.sh", "5 reward file", ("node",), TAMPER_SH + JS_SYNC),
    # 6. early exit
    Attack(
        "exit-conftest",
        "6 early exit",
        ("python",),
        _file("conftest.py", "import os\nos._exit(0)\n"),
    ),
    Attack("exit-module", "6 early exit", ("python",), PY_EXIT),
    Attack("exit-module", "6 early exit", ("node",), "echo 'process.exit(0);' >> $MODULE\n"),
    # 7. patch policy (gold plus cheating)
    Attack(
        "policy-forbidden",
        "7 patch policy",
        ("python",),
        "echo '# touched' >> tests/public/test_public.py\n",
        gold=True,
        tasks=("samples__inventory-4",),
    ),
    Attack(
        "policy-outside",
        "7 patch policy",
        ("python",),
        "echo 'more' >> README.md\n",
        gold=True,
        tasks=("samples__inventory-4",),
    ),
]


def applicable(task: str) -> list[Attack]:
    lang = TASKS[task]
    return [a for a in ATTACKS if lang in a.langs and (not a.tasks or task in a.tasks)]


# ------------------------------------------------------------------------------------ harness


@dataclass(frozen=True)
class Built:
    task: str
    plan: RunPlan
    base_commit: str
    gold: bytes
    ids: list[str]  # the test ids (all_pass, formula) or test names (script) an attack forges
    module: str  # the file the tests import, where code-under-test attacks go


def _ids(task_dir: Path) -> list[str]:
    plan = json.loads((task_dir / "tests" / "plan.json").read_text())
    ids = [*plan["fail_to_pass"], *plan["pass_to_pass"]]
    if plan["rule"] == "formula":
        ids += [*plan["formula"]["hidden_tests"], *plan["formula"]["public_tests"]]
    if plan["rule"] == "script":
        criteria = task_dir / "tests" / plan["script"]["dir"] / "criteria.json"
        ids = [t for c in json.loads(criteria.read_text()) for t in c["tests"]]
    return ids


def run_plan(out: Path, dataset: str, task: str) -> tuple[RunPlan, dict[str, Any]]:
    """The RunPlan of a built task (from its oracle manifest) and its plan.json."""
    manifest = json.loads((out / dataset / "manifests" / task / "oracle.json").read_text())
    task_dir = out / dataset / "tasks" / task
    plan_json = json.loads((task_dir / "tests" / "plan.json").read_text())
    plan = RunPlan(
        task=f"{dataset}/{task}",
        agent_image=manifest["agent_image"],
        grader_image=manifest["grader_image"],
        workdir=manifest["workdir"],
        collect=manifest["collect"],
        solution_dir=task_dir / "solution",
        grade_timeout_sec=int(plan_json["timeout_sec"]),
        run=RUN,
    )
    return plan, plan_json


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> dict[str, Built]:
    out = tmp_path_factory.mktemp("adversarial")
    proc = run_cli("build", *TASKS, "--out", str(out), "-j", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Built] = {}
    for task in TASKS:
        task_dir = out / "samples" / "tasks" / task
        plan, plan_json = run_plan(out, "samples", task)
        result[task] = Built(
            task=task,
            plan=plan,
            base_commit=plan_json["base_commit"],
            gold=(task_dir / "solution" / "gold.patch").read_bytes(),
            ids=_ids(task_dir),
            module=MODULE[task],
        )
    return result


def make_patches(docker_client: Any, b: Built, attacks: list[Attack]) -> dict[str, bytes]:
    """Run every attack script in one agent container; return attack name -> collected patch."""
    box = docker_client.containers.run(
        b.plan.agent_image,
        ["sleep", "infinity"],
        detach=True,
        network_mode="none",
        labels=labels_for(b.plan.task, "adversarial", RUN),
        working_dir=b.plan.workdir,
    )
    try:
        box.put_archive("/tmp", make_tar({"gold.patch": b.gold}))
        patches: dict[str, bytes] = {}
        for attack in attacks:
            ids = "\n".join(b.ids) + "\n"
            setup = (
                f"set -e\ncd {b.plan.workdir}\ngit reset -q --hard {b.base_commit}\n"
                "git clean -fdq\n"
                + ("git apply /tmp/gold.patch\n" if attack.gold else "")
                + f"MODULE={b.module}\nDIR=$(dirname $MODULE)\n"
            )
            # The forgers read the ids from files they ship themselves (.ids, .names).
            files = f"cat > $DIR/.ids <<'IDEOF'\n{ids}IDEOF\ncp $DIR/.ids $DIR/.names\n"
            collect = f"\ngit add -A\ngit diff --cached --binary {b.base_commit}\n"
            # Attack code names the repository by its path in the sample images.
            script = (setup + files + attack.script + collect).replace("/testbed", b.plan.workdir)
            code, (out, err) = box.exec_run(["bash", "-c", script], demux=True)
            assert code == 0, f"{b.task} {attack.name}: {(err or b'').decode(errors='replace')}"
            patches[attack.name] = out or b""
        return patches
    finally:
        box.remove(force=True)


@dataclass
class Row:
    task: str
    attack: Attack
    reward: float | None
    status: str | None
    reason: str | None


ROWS: list[Row] = []
GOLD: dict[str, float | None] = {}


def table() -> str:
    """The results as text: one line per attack, one column per task."""
    tasks = list(TASKS)
    names = list(dict.fromkeys((r.attack.klass, r.attack.name) for r in ROWS))
    width = max([len(f"{k} / {n}") for k, n in names] + [30])
    lines = ["", "Adversarial patches: reward per attack and task (gold beside the task name)"]
    head = "".join(f"{t.split('__')[1]} (gold {GOLD.get(t)})".rjust(34) for t in tasks)
    lines.append("attack".ljust(width) + head)
    for klass, name in names:
        cells = []
        for t in tasks:
            row = next(
                (
                    r
                    for r in ROWS
                    if r.task == t and (r.attack.klass, r.attack.name) == (klass, name)
                ),
                None,
            )
            if row is None:
                cells.append("-".rjust(34))
                continue
            mark = " RESIDUAL" if row.attack.residual else ""
            cells.append(f"{row.reward} {row.status}{mark}".rjust(34))
        lines.append(f"{klass} / {name}".ljust(width) + "".join(cells))
    return "\n".join(lines) + "\n"


def _grade(docker_client: Any, b: Built, name: str, patch: bytes, log_root: Path) -> Any:
    return run_once(docker_client, b.plan, "patch", log_root / b.task / name, patch=patch)


def test_adversarial_patches(
    built: dict[str, Built], docker_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    jobs: list[tuple[Built, Attack | None, bytes]] = []
    for task, b in built.items():
        attacks = applicable(task)
        patches = make_patches(docker_client, b, attacks)
        jobs.append((b, None, b.gold))
        jobs.extend((b, a, patches[a.name]) for a in attacks)
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(
            pool.map(
                lambda j: _grade(
                    docker_client, j[0], j[1].name if j[1] else "gold", j[2], tmp_path
                ),
                jobs,
            )
        )
    failures = []
    for (b, attack, _), run in zip(jobs, results, strict=True):
        if attack is None:
            GOLD[b.task] = run.reward
            if run.reward != 1.0:
                failures.append(f"{b.task} gold: {run.reward} ({run.grade_status}: {run.reason})")
            continue
        ROWS.append(Row(b.task, attack, run.reward, run.grade_status, run.reason))
        if attack.residual:
            continue
        if run.reward is None or run.reward >= 1.0:
            failures.append(f"{b.task} {attack.klass}/{attack.name}: {run.reward} ({run.reason})")
    text = table()
    (tmp_path / "adversarial-table.txt").write_text(text)
    with capsys.disabled():
        print(text)
    wait_for_removals()  # run_once removes its containers in the background
    left = docker_client.containers.list(all=True, filters={"label": "packager.tool=packager"})
    left = [
        c
        for c in left
        if c.labels.get("packager.run") == RUN.run_id
        and c.labels.get("packager.role") in ("adversarial", "grader-patch")
    ]
    assert not left, "containers left behind"
    assert not failures, "\n".join(failures)
    assert time.monotonic() - started < 600
