"""The run of a selection, stage by stage: which rows (`select`), completed from their
repositories (`resolve`), rendered and put in place (`materialize`); then each task's job
(`job.TaskJob`: its images built by `build`, environments by `environment`, audited, verified),
its result files and the report (`store`). `patch` grades one candidate patch for a task.
"""
