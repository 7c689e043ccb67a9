"""EC-SWE rows → TaskSpec (grading rule `script`: the row's own scoring script).

Quirks owned here: `grader` is a list of `{criterion, weight}` with float weights adding up to
100; `grader_files` (`{path, encoding, content}`, utf-8 or base64) live under `grader/`,
`grading/` or `protected/` and hold the hidden tests and the scoring script, found by the rule
in `find_entry` or named with `--grader-entry`; the row's `dockerfile` clones the repository,
and that clone is replaced by the packager's snapshot (`substitute_clone`), so no later commit
reaches the agent image; `base_reward` is what the untouched repository scores.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from typing import Any

from packager import assumptions as A
from packager.adapters import Context, row_id
from packager.adapters.common import check_patch, get, get_sha, get_str, parse_files
from packager.errors import RowError
from packager.models.spec import (
    Criterion,
    Environment,
    Expectations,
    Grading,
    JsonValue,
    Provenance,
    Repo,
    TaskSpec,
)
from packager.render.naming import make_slug

WEIGHT_TOLERANCE = 1e-6


def parse_criteria(value: Any, task: str) -> tuple[Criterion, ...]:
    """`grader`: a list of {criterion, weight} (or its JSON text); weights add up to 100."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowError(task, "grader", f"not a JSON list: {exc.msg}") from exc
    if not isinstance(value, list) or not value:
        raise RowError(task, "grader", "expected a non-empty list of {criterion, weight}")
    criteria = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("criterion"), str):
            raise RowError(task, f"grader[{i}].criterion", "each entry needs a criterion text")
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise RowError(task, f"grader[{i}].weight", "expected a number >= 0")
        criteria.append(Criterion(name=item["criterion"], weight=float(weight)))
    total = sum(c.weight for c in criteria)
    if abs(total - 100.0) > WEIGHT_TOLERANCE:
        raise RowError(task, "grader", f"weights add up to {total:g}, not 100")
    return tuple(criteria)


def find_entry(files: Mapping[str, bytes], task: str, named: str | None) -> str:
    """The scoring script among the grader files.

    With `--grader-entry`, that path. Otherwise the single file `<root>/<stem><suffix>` at the
    top of a grader folder (roots grader/, grading/, protected/; stems grade, grader, score,
    run_grader; suffixes .py, .sh).
    """
    if named:
        if named not in files:
            raise RowError(task, "grader_files", f"--grader-entry {named}: no such grader file")
        return named
    candidates = [
        path
        for path in files
        if path.count("/") == 1
        and path.split("/")[0] in A.ECSWE_GRADER_ROOTS
        and posixpath.splitext(path.split("/")[1])[0] in A.ECSWE_ENTRY_STEMS
        and posixpath.splitext(path)[1] in A.ECSWE_ENTRY_SUFFIXES
    ]
    if len(candidates) == 1:
        return candidates[0]
    what = f"several ({', '.join(sorted(candidates))})" if candidates else "none"
    raise RowError(
        task,
        "grader_files",
        f"cannot tell the scoring script: {what} of the form "
        f"<{'|'.join(A.ECSWE_GRADER_ROOTS)}>/<{'|'.join(A.ECSWE_ENTRY_STEMS)}>"
        f"{{{','.join(A.ECSWE_ENTRY_SUFFIXES)}}}; name it with --grader-entry PATH",
    )


def _logical_lines(text: str) -> list[str]:
    """Dockerfile lines with backslash continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    if current:
        lines.append(current)
    return lines


def _names_repo(url: str, repo: str) -> bool:
    tail = url.rstrip("/").removesuffix(".git").lower()
    return tail.endswith("/" + repo.lower()) or tail.endswith(":" + repo.lower())


# git clone options that take a value (`-b main`, `--depth 1`, ...); `--opt=value` needs no entry.
_CLONE_VALUE_OPTIONS = frozenset(
    {
        "-b", "--branch", "-o", "--origin", "--depth", "-c", "--config", "--reference",
        "--reference-if-able", "--separate-git-dir", "-u", "--upload-pack", "--template",
        "--filter", "-j", "--jobs", "--shallow-since", "--shallow-exclude", "--bundle-uri",
        "--server-option",
    }
)  # fmt: skip


def _clone_positionals(args: list[str]) -> list[str]:
    """The repository and directory arguments of `git clone`, options (and their values)
    skipped wherever they stand.
    """
    positional: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            continue
        elif arg.startswith("-"):
            skip = arg in _CLONE_VALUE_OPTIONS
        else:
            positional.append(arg)
    return positional


_GIT_STEP = re.compile(r"^\s*git\s+(?:-C\s+\S+\s+)?(checkout|reset|fetch|pull|switch)\b")


def substitute_clone(dockerfile: str, repo: str, default_dir: str) -> tuple[str, str | None]:
    """Replace a `git clone` of `repo` in RUN lines by the snapshot (ADD repo.tar <dir>).

    Steps of the same RUN that move the clone (checkout, reset, fetch, pull) are dropped; the
    rest of the line stays. COPY/ADD of grader folders (grading belongs to the grader image)
    are dropped too. Returns the new text and the clone's directory (None: no clone found).
    """
    out: list[str] = []
    workdir = "/"
    clone_dir: str | None = None
    dropped = False
    for line in _logical_lines(dockerfile):
        words = line.split()
        keyword = words[0].upper() if words else ""
        if keyword == "WORKDIR" and len(words) >= 2:
            workdir = posixpath.join(workdir, words[1])
        if keyword in ("COPY", "ADD") and any(
            w.strip("./").split("/")[0] in A.ECSWE_GRADER_ROOTS
            for w in words[1:-1]
            if not w.startswith("--")
        ):
            out.append(f"# packager: dropped (grading files go to the grader image): {line}")
            dropped = True
            continue
        if keyword != "RUN" or "git clone" not in line or clone_dir is not None:
            out.append(line)
            continue
        body = line.split(None, 1)[1]
        kept: list[str] = []
        found: str | None = None
        for step in body.split("&&"):
            try:
                argv = shlex.split(step)
            except ValueError:
                argv = step.split()
            if len(argv) >= 3 and argv[0] == "git" and argv[1] == "clone":
                positional = _clone_positionals(argv[2:])
                if positional and _names_repo(positional[0], repo):
                    target = positional[1] if len(positional) > 1 else repo.split("/")[-1]
                    found = posixpath.normpath(posixpath.join(workdir, target))
                    continue
            if found is not None and _GIT_STEP.match(step):
                continue
            kept.append(step.strip())
        if found is None:
            out.append(line)
            continue
        clone_dir = found
        out.append(A.SNAPSHOT_MARK)
        out.append(f"ADD repo.tar {found}")
        kept = [k for k in kept if k]
        if all(k.split()[0] == "cd" for k in kept):
            kept = []  # only moved into the clone: nothing left to run
        if kept:
            out.append("RUN " + " && ".join(kept))
    if clone_dir is None and not dropped:
        return dockerfile, None
    return "\n".join(out) + "\n", clone_dir


def _base_image(dockerfile: str, task: str) -> str:
    for line in dockerfile.splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM" and len(words) >= 2:
            return words[1]
    raise RowError(task, "dockerfile", "no FROM line")


_METADATA_COLUMNS = (
    "hud_task",
    "difficulty",
    "repo_license",
    "agent_runs",
    "agent_mean_reward",
    "agent_solve_rate",
)


def to_spec(row: Mapping[str, Any], ctx: Context) -> TaskSpec:
    """Adapt one EC-SWE row."""
    task = row_id(row) or get_str(row, "?", "instance_id")
    repo = get_str(row, task, "repo")
    criteria = parse_criteria(get(row, task, "grader"), task)
    files = parse_files(get(row, task, "grader_files"), task, "grader_files")
    for path in files:
        if path.split("/")[0] not in A.ECSWE_GRADER_ROOTS:
            raise RowError(
                task,
                "grader_files",
                f"{path}: grader files live under {', '.join(A.ECSWE_GRADER_ROOTS)}",
            )
    entry = find_entry(files, task, ctx.grader_entry)
    interpreter = A.ECSWE_INTERPRETERS.get(posixpath.splitext(entry)[1], "bash")
    dockerfile, clone_dir = substitute_clone(
        get_str(row, task, "dockerfile"), repo, A.ECSWE_WORKDIR
    )
    base_reward = row.get("base_reward")
    if base_reward is not None and not (
        isinstance(base_reward, int | float) and 0.0 <= float(base_reward) < 1.0
    ):
        raise RowError(task, "base_reward", "expected a number in [0, 1)")
    setup = row.get("setup_patch")
    test_patch = row.get("test_patch")
    metadata: dict[str, JsonValue] = {
        key: row[key] for key in _METADATA_COLUMNS if row.get(key) is not None
    }
    metadata["grader_entry"] = entry
    metadata["snapshot"] = "replaces the dockerfile's clone" if clone_dir else "added after it"
    return TaskSpec(
        provenance=Provenance(
            dataset=ctx.dataset,
            split=ctx.split,
            schema_name="ec-swe",
            instance_id=task,
            slug=make_slug(task),
            language=str(row.get("language") or "unknown"),
            metadata=metadata,
        ),
        instruction=get_str(row, task, "problem_statement"),
        repo=Repo(
            name=repo,
            base_commit=get_sha(row, task, "base_commit"),
            setup_patch=check_patch(setup, task, "setup_patch") if setup else None,
            workdir=clone_dir or A.ECSWE_WORKDIR,
            history=ctx.history,
        ),
        environment=Environment(base_image=_base_image(dockerfile, task), dockerfile=dockerfile),
        gold_patch=check_patch(row.get("patch"), task, "patch"),
        grading=Grading(
            rule="script",
            timeout_sec=A.ECSWE_GRADER_TIMEOUT_SEC,
            test_patch=check_patch(test_patch, task, "test_patch") if test_patch else None,
            grader_command=f"{interpreter} {shlex.quote(posixpath.basename(entry))}",
            grader_dir=posixpath.dirname(entry),
            grader_files=files,
            criteria=criteria,
        ),
        expectations=Expectations(
            nop_reward=float(base_reward) if base_reward is not None else None
        ),
    )
