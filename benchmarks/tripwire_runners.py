"""The JavaScript and C++ tripwires on real rows' grader images: gold still 1.0, a tampered
runner 0.

    python benchmarks/tripwire_runners.py IMAGE --row ID [--rows FILE] [--runtime PYZ]

IMAGE is the grader image of a packaged SWE-bench Multilingual row whose test command runs
mocha, karma, GoogleTest or doctest (benchmarks/swebench_rows.py builds them: axios rows run
mocha's TAP reporter, preact rows karma with mocha in Chromium, fmt rows GoogleTest behind
ctest, nlohmann/json doctest). Two patches are graded with the grading runtime (this
checkout's, or --runtime, e.g. an older grading.pyz, to compare): the row's gold patch, and a
cheat-only patch that appends code to the first file the gold patch changes:

- mocha (the test command names ``mocha``): the process's stdout rewritten, every ``not ok`` line
  of the TAP reporter turned into ``ok`` (a reporter patched from inside the process);
- karma: mocha's ``Runner.prototype.fail`` replaced in the browser, so that a failing test is
  reported passed (the runner patched from the code under test);
- GoogleTest, doctest: a static initializer in the (header) file that routes the test binary's
  stdout through a pipe and a thread rewriting every failure (``[  FAILED  ]`` to
  ``[       OK ]``, doctest's ``success="false"`` to ``"true"``) on its way out.

Prints one line per patch: reward, status, reason. Each grading runs in a fresh container with
no network.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tripwire_sympy import GRADE, _docker, prepare  # noqa: E402

TAMPER = {
    "mocha": (
        "\n;{ const __w = process.stdout.write.bind(process.stdout);\n"
        "  process.stdout.write = (c, ...r) =>\n"
        "    __w(typeof c === 'string' ? c.replace(/^not ok/gm, 'ok') : c, ...r); }\n"
    ),
    "karma": (
        "\n;if (typeof window !== 'undefined' && window.Mocha) {\n"
        "  window.Mocha.Runner.prototype.fail = function (test) {\n"
        "    if (test.type === 'test') { test.state = 'passed'; this.emit('pass', test); }\n"
        "  };\n}\n"
    ),
    "pytest": (
        "\n\nimport _pytest.reports as _r\n_orig = _r.TestReport.from_item_and_call.__func__\n\n\n"
        "def _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n"
        "    rep.outcome, rep.longrepr = 'passed', None\n    return rep\n\n\n"
        "_r.TestReport.from_item_and_call = classmethod(_fake)\n"
    ),
    "cpp": r"""
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
namespace grading_cheat {
inline void replace_all(std::string& s, const std::string& a, const std::string& b) {
  for (size_t i = s.find(a); i != std::string::npos; i = s.find(a, i + b.size()))
    s.replace(i, a.size(), b);
}
struct Rewrite {
  std::thread pump;
  Rewrite() {
    int p[2];
    if (pipe(p) != 0) return;
    int out = dup(1), rd = p[0];
    fflush(stdout);
    dup2(p[1], 1);
    close(p[1]);
    pump = std::thread([out, rd] {
      std::string line;
      char c;
      while (read(rd, &c, 1) == 1) {
        line += c;
        if (c != '\n') continue;
        replace_all(line, "[  FAILED  ]", "[       OK ]");
        replace_all(line, "success=\"false\"", "success=\"true\"");
        if (write(out, line.data(), line.size()) < 0) return;
        line.clear();
      }
      if (!line.empty() && write(out, line.data(), line.size()) < 0) return;
    });
  }
  ~Rewrite() {  // at exit: the rest of stdout through the pump before the process ends
    fflush(stdout);
    close(1);
    if (pump.joinable()) pump.join();
  }
  static Rewrite& instance();
};
inline Rewrite& Rewrite::instance() { static Rewrite r; return r; }
__attribute__((unused)) static Rewrite& started = Rewrite::instance();
}
""",
}


# The same cheats made adaptive: each spares every test it can tell was the grader's by what
# the runtime added before its tripwires were camouflaged (a title, suite or message holding
# "grading_tripwire_", "GradingTripwire" or "grading tripwire"), so that those still fail
# honestly while every real failure is reported passed.
OLD_MARKS = ("grading_tripwire_", "GradingTripwire", "grading tripwire")
TAMPER_ADAPTIVE = {
    "mocha": (
        "\n;{ const __o = process.stdout, __k = 'wri' + 'te', __w = __o[__k].bind(__o);\n"
        "  __o[__k] = (c, ...r) =>\n"
        "    __w(typeof c === 'string' ? c.replace(/^not ok(?!.*(grading_tripwire_|grading "
        "tripwire))/gm, 'ok') : c, ...r); }\n"
    ),
    "karma": (
        "\n;if (typeof window !== 'undefined' && window.Mocha) {\n"
        "  const __p = window.Mocha['Run' + 'ner']['proto' + 'type'], __fail = __p.fail;\n"
        "  __p.fail = function (test, err) {\n"
        "    const mark = /grading_tripwire_|grading tripwire/;\n"
        "    const spared = mark.test(test.fullTitle()) || mark.test(String(test.fn));\n"
        "    if (test.type !== 'test' || spared) return __fail.apply(this, arguments);\n"
        "    test.state = 'passed'; this.emit('pass', test);\n"
        "  };\n}\n"
    ),
    "pytest": (
        "\n\nimport inspect as _inspect\nimport re as _re\n\n"
        "_r = __import__('_py' + 'test.reports', fromlist=['x'])\n"
        "_R = getattr(_r, 'Test' + 'Report')\n_orig = _R.from_item_and_call.__func__\n\n\n"
        "def _spared(item):\n    try:\n        source = _inspect.getsource(item.obj)\n"
        "    except Exception:\n        source = ''\n"
        "    old = _re.fullmatch('test_[0-9a-f]{12}', item.name)\n"
        "    return bool(old) or 'tripwire' in source\n\n\n"
        "def _fake(cls, item, call):\n    rep = _orig(cls, item, call)\n"
        "    if not _spared(item):\n        rep.outcome, rep.longrepr = 'passed', None\n"
        "    return rep\n\n\n_R.from_item_and_call = classmethod(_fake)\n"
    ),
    "cpp": TAMPER["cpp"]
    .replace(
        "    dup2(p[1], 1);\n", "    int (*redirect)(int, int) = ::dup2;\n    redirect(p[1], 1);\n"
    )
    .replace(
        "      std::string line;\n",
        "      std::string line;\n      bool spare = false;\n",
    )
    .replace(
        '        replace_all(line, "[  FAILED  ]", "[       OK ]");\n',
        '        if (line.find("<TestCase") != std::string::npos)\n'
        '          spare = line.find("grading_tripwire") != std::string::npos;\n'
        '        bool marked = spare || line.find("GradingTripwire") != std::string::npos\n'
        '                    || line.find("grading_tripwire") != std::string::npos;\n'
        '        if (!marked) replace_all(line, "[  FAILED  ]", "[       OK ]");\n',
    )
    .replace(
        '        replace_all(line, "success=\\"false\\"", "success=\\"true\\"");\n',
        '        if (!marked) replace_all(line, "success=\\"false\\"", "success=\\"true\\"");\n',
    ),
}
"""The adaptive cheats also hide the names the runtime's scan of the patch reads (scan.py:
``'wri' + 'te'``, ``['Run' + 'ner']``, ``__import__('_py' + 'test...')``, ``dup2`` through a
pointer), so what stops them is the tripwires alone."""


def main() -> int:
    """Grade gold and the tampered patch; print one line each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image")
    ap.add_argument("--row", required=True)
    ap.add_argument(
        "--rows", type=Path, default=ROOT / "benchmarks/data/swe-bench-multilingual-real.jsonl"
    )
    ap.add_argument("--runtime", type=Path, help="a grading.pyz (default: this checkout's)")
    ap.add_argument(
        "--adaptive",
        action="store_true",
        help="the cheat spares the tests the runtime used to add (by their old names and text)",
    )
    args = ap.parse_args()
    row, work = prepare(args.rows, args.row, args.runtime)
    plan = json.loads(_docker(args.image, work, "cat /tests/plan.json"))
    if plan["parser"] in ("googletest", "doctest"):
        runner = "cpp"
    elif plan["parser"].startswith("pytest"):
        runner = "pytest"
    else:
        runner = "karma" if "karma" in plan["test_command"] else "mocha"
    target = row["patch"].split("\n", 1)[0].split(" b/", 1)[1]
    (work / "tamper.txt").write_text((TAMPER_ADAPTIVE if args.adaptive else TAMPER)[runner])
    _docker(
        args.image,
        work,
        f"cd {plan['repo_dir']} && cat /m/tamper.txt >> {target} && git diff > /m/tamper.patch",
    )
    kind = "adaptive tamper" if args.adaptive else "tamper"
    print(f"{args.row}: {runner}, {kind} appended to {target}")
    for patch in ("gold.patch", "tamper.patch"):
        report = json.loads(_docker(args.image, work, GRADE.format(patch=patch)))
        print(f"{patch:14} reward={report['reward']} status={report['status']} {report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
