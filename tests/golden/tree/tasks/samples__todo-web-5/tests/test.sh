#!/bin/bash
# Grades /logs/artifacts/model.patch against the hidden tests of samples__todo-web-5.
# Harbor ignores this script's exit code and reads /logs/verifier/reward.json, so a reward is
# written whatever happens: the runtime writes it, and if the runtime itself dies, this does.
mkdir -p /logs/verifier
# -I: no PYTHONPATH or user site from the image (the candidate's repository must never stand
# in for a module of the runtime); -S: no site-packages scan (stdlib only, and faster).
# The grader image's build unpacked and byte-compiled the runtime in /tests/.runtime (from the
# archive, python3 would compile its modules on every run); the archive where it did not.
runtime=/tests/grading.pyz
if [ -f /tests/.runtime/__main__.py ]; then runtime=/tests/.runtime; fi
python3 -I -S "$runtime" /tests/plan.json "$@"
status=$?
if [ ! -s /logs/verifier/reward.json ]; then
  printf '{"reward": 0}\n' > /logs/verifier/reward.json
  printf '{"status": "infra_error", "reason": "grading runtime exited %s without a reward", "reward": 0}\n' "$status" > /logs/verifier/report.json
fi
exit 0
