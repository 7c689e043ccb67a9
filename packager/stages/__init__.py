"""One task's stages below the run: its images built (`build`, the shared environment images
in `environment`), audited and verified, composed by `job.TaskJob`, which every executor runs.
"""
