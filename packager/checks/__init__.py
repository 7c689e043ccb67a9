"""Checks on built and verified tasks, beyond the oracle/nop verdict.

- `audit`: nothing from the grading side (gold patch, hidden tests, grader files, later
  commits) is in any layer or git object of an agent image.
- `quality`: a verified task can still be poor (an ablation of the gold patch also passes, the
  instruction leaks the fix, hidden tests that test nothing); each finding is reported.
- `app`: SWEeper web apps answer before their browser workflows are judged (how they start is
  `packager.adapters.app_start`'s).
"""
