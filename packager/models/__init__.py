"""The data that crosses stages: `TaskSpec` (what a row means, dataset-independent) and the
results of runs and tasks (`RunResult`, `TaskResult`). Frozen, validated, no I/O (`spec`).
"""
