"""Where rows come from and what travels with them, before an adapter sees a row.

- `sources`: a dataset named by a Hugging Face id, a local file or folder, or the shipped samples.
- `recipes`: the user's `--recipes` file of environments, keyed by instance, owner/name@version
  or owner/name.
- `harness_specs` (+ `harness_specs.json`): the SWE-bench harness's own environment specs.
- `harness_parsers`: the harness's log-parser names mapped onto the grading runtime's parsers.
- `conda`: conda package lists and environment.yml files as pip requirements.
"""
