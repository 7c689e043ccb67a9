"""After verification: `publish` (images to a registry, the Harbor dataset to a repository),
`report` (report.md / report.html over a dataset's results) and `clean` (old images and
containers of this tool).
"""
