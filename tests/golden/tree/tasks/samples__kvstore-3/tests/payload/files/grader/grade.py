"""EC-SWE grader for samples/kvstore: run the node tests, score each criterion.

Reads ``criteria.json`` next to this file (name, weight, description, tests), runs
``node --test --test-reporter=tap test/`` in ``$REPO_DIR``, and scores each criterion as
the passed fraction of its tests. Writes ``{"reward": ..., "<criterion>": ...}`` to
``$REWARD_FILE`` (when set) and prints the same object as the last stdout line.
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TAP_LINE = re.compile(r"^\s*(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$")


def parse_tap(output):
    """Map each test name in Node's TAP output to "passed", "failed" or "skipped"."""
    status = {}
    for line in output.splitlines():
        match = TAP_LINE.match(line)
        if not match:
            continue
        verdict, name, directive = match.groups()
        if directive:
            status[name] = "skipped"
        else:
            status[name] = "passed" if verdict == "ok" else "failed"
    return status


def main():
    repo = os.environ.get("REPO_DIR", "/testbed")
    with open(os.path.join(HERE, "criteria.json"), encoding="utf-8") as f:
        criteria = json.load(f)
    try:
        proc = subprocess.run(
            ["node", "--test", "--test-reporter=tap", "test/"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=100,
        )
        output = proc.stdout
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or ""
        if isinstance(output, bytes):
            output = output.decode("utf-8", "replace")
    sys.stderr.write(output)
    status = parse_tap(output)
    scores = {}
    total = 0.0
    for criterion in criteria:
        tests = criterion["tests"]
        passed = sum(1 for name in tests if status.get(name) == "passed")
        score = passed / len(tests) if tests else 0.0
        scores[criterion["name"]] = score
        total += criterion["weight"] * score
    result = {"reward": round(total / 100, 6), **scores}
    reward_file = os.environ.get("REWARD_FILE")
    if reward_file:
        with open(reward_file, "w", encoding="utf-8") as f:
            json.dump(result, f)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
