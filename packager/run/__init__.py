"""One run of the tool over a selection of rows: select, resolve and render the rows, then build,
audit and verify each task (one per-task job that every executor calls), keep the results.
`store` holds every output path; `patch` grades one candidate patch for a task.
"""
