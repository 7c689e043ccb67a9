"""Grading runtime entry point: ``python3 grade.py PLAN [--out DIR] [--patch FILE]``.

Orchestrates the steps of docs/grading.md: reset the repository, apply the candidate patch,
check the patch policy, restore protected paths, add the hidden tests, run the test command,
parse its output, apply the reward rule, and write ``reward.json`` and ``report.json``.

It fails closed: a zero reward with status ``infra_error`` is written before anything else, so
a crash, a kill or an unexpected exception can never leave a stale or missing reward behind.

Standard library only, Python >= 3.9. Packed with its sibling modules into one zipapp, run in
grader images as ``python3 -I -S /tests/grading.pyz`` (the archive is ``sys.path[0]``, so the
siblings import as top-level modules, as they do when this file runs as a script); the package
import serves the unit tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from . import canaries, parsers, patching, processes, rules, runners, scan, surround, tripwires
elif __package__:
    from . import canaries, parsers, patching, processes, rules, runners, scan, surround, tripwires
else:  # run as a script or from the zipapp: sys.path[0] holds the siblings
    import canaries
    import parsers
    import patching
    import processes
    import rules
    import runners
    import scan
    import surround
    import tripwires

DEFAULT_PATCH = "/logs/artifacts/model.patch"
DEFAULT_OUT = "/logs/verifier"
DEFAULT_TIMEOUT_SEC = 1800.0
RULES = ("all_pass", "formula", "script", "judge")
TEST_OUTPUT = "test-output.txt"
BUILD_OUTPUT = "build-output.txt"
GRADER_OUTPUT = "grader-output.txt"
GRADER_STDERR = "grader-stderr.txt"

Report = Dict[str, Any]


class Stop(Exception):
    """Grading ends early with a final status (patch_failed, policy_violation, ...)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Terminated(Exception):
    """SIGTERM arrived; raised so the fail-closed path still writes the outputs."""


def new_report() -> Report:
    """A report in its fail-closed state: what stays on disk if grading never finishes."""
    return {
        "status": "infra_error",
        "reason": "grading did not finish",
        "reward": 0.0,
        "subscores": {},
        "tests": {},
        "exit_code": None,
        "duration_sec": 0.0,
        "apply": {"method": None, "log": ""},
        "violations": [],
    }


# ------------------------------------------------------------------------------------- outputs


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    # Write-then-rename: a reader never sees half a file, even if we are killed mid-write.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # a directory squatting on the name would make os.replace fail
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n", "utf-8")
    os.replace(tmp, path)


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return round(number, 6)


def write_outputs(out_dir: Path, report: Report) -> None:
    """Write report.json and reward.json (flat, finite, rounded to 6 places).

    Anything that cannot be serialised degrades to a zero reward with an infra_error report,
    and reward.json is attempted even when report.json could not be written.
    """
    reward: Dict[str, float] = {"reward": 0.0}
    try:
        try:
            subscores = {
                str(k): _finite(v) for k, v in report["subscores"].items() if k != "reward"
            }
            reward = {"reward": _finite(report["reward"]), **subscores}
            _write_json(
                out_dir / "report.json",
                dict(report, reward=reward["reward"], subscores=subscores),
            )
        except Exception as exc:
            reward = {"reward": 0.0}
            fallback = new_report()
            fallback["reason"] = f"cannot write report: {type(exc).__name__}: {exc}"
            _write_json(out_dir / "report.json", fallback)
    finally:
        _write_json(out_dir / "reward.json", reward)


# ---------------------------------------------------------------------------------------- plan


_str_list = runners.str_list


def _plan_path(plan_dir: Path, value: Any, field: str) -> Optional[Path]:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ValueError(f"plan: {field} must be a path string")
    path = plan_dir / value
    if not path.exists():
        raise ValueError(f"plan: {field} {value!r} does not exist")
    return path


def _timeout(value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"plan: timeout must be a positive number, not {value!r}")
    return float(value)


TEST_ENV = "PACKAGER_TEST_ENV"
"""A JSON object of variables the host sets for the test command only (a perturbed gold run's
shifted clock or shuffle seed), not for this runtime: it is taken out of the command's
environment and its members put in."""


def _command_env(plan: Mapping[str, Any]) -> Dict[str, str]:
    env = dict(os.environ)
    extra = plan.get("env") or {}
    if not isinstance(extra, dict):
        raise ValueError("plan: env must be an object")
    env.update({str(k): str(v) for k, v in extra.items()})
    perturbed = env.pop(TEST_ENV, "")
    if perturbed:
        added = json.loads(perturbed)
        if not isinstance(added, dict):
            raise ValueError(f"{TEST_ENV} must be a JSON object")
        env.update({str(k): str(v) for k, v in added.items()})
    return env


# ------------------------------------------------------------------------------ grader files

SNAPSHOT_BYTES_LIMIT = 64 * 1024 * 1024
RUNTIME_DIR = Path(os.path.dirname(os.path.abspath(__file__)))
"""Where this runtime's modules are: ``/tests/.runtime`` (unpacked and byte-compiled by the
grader image's build), the archive ``/tests/grading.pyz`` (a file: no cache folder) or the
source tree."""


class GraderFiles:
    """The plan's folder (``/tests``: test.sh, plan.json, this runtime, the payload) as it was
    before any command ran. The code under test runs as the same user as the runtime, so it
    could rewrite it, and ``test.sh`` is still being read by bash after grade.py exits: lines
    written after the one running grade.py would run next (and could overwrite reward.json).
    ``check`` puts every changed or deleted file back and reports what it had to restore.
    ``__pycache__`` folders are not watched (Python writes them there legitimately), except
    those of ``runtime``: the grader image's build byte-compiled this runtime there, and a
    process started after the candidate's code ran (the browser agent) imports from it.
    """

    def __init__(
        self, root: Path, skip: Sequence[Path] = (), runtime: Optional[Path] = None
    ) -> None:
        self.root = root
        self.skip = [p.resolve() for p in skip]
        self.runtime = runtime.resolve() if runtime is not None else None
        self.files: Dict[str, Tuple[str, int, Optional[bytes]]] = {}
        budget = SNAPSHOT_BYTES_LIMIT
        for path in self._walk():
            data = path.read_bytes()
            keep = data if len(data) <= budget else None
            budget -= len(data) if keep is not None else 0
            digest = hashlib.sha256(data).hexdigest()
            self.files[path.relative_to(root).as_posix()] = (digest, path.stat().st_mode, keep)

    def _walk(self) -> List[Path]:
        found: List[Path] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            here = Path(dirpath)
            dirnames[:] = [
                d
                for d in dirnames
                if (d != "__pycache__" or here.resolve() == self.runtime)
                and (here / d).resolve() not in self.skip
            ]
            found.extend(here / f for f in filenames if (here / f).is_file())
        return sorted(found)

    def check(self) -> List[str]:
        """Restore what changed; return the relative paths that had been changed or deleted."""
        changed: List[str] = []
        for rel, (digest, mode, data) in self.files.items():
            path = self.root / rel
            try:
                same = (
                    path.is_file()
                    and not path.is_symlink()
                    and hashlib.sha256(path.read_bytes()).hexdigest() == digest
                )
            except OSError:
                same = False
            if same:
                continue
            changed.append(rel)
            if data is not None:
                if path.is_symlink() or path.is_dir():
                    patching._remove(path)
                path.parent.mkdir(parents=True, exist_ok=True)
                # In place, never a new inode: bash still reads test.sh through the descriptor
                # it opened, so replacing the file would leave the tampered bytes under it.
                with open(path, "wb") as f:
                    f.write(data)
                os.chmod(path, mode & 0o7777)
        return changed


def _check_grader_files(guard: Optional[GraderFiles], report: Report) -> None:
    if guard is None:
        return
    changed = guard.check()
    if changed:
        report["violations"].extend({"kind": "grader_files_changed", "path": p} for p in changed)
        raise Stop(
            "policy_violation",
            "the code under test changed the grader's files: " + ", ".join(changed),
        )


# -------------------------------------------------------------------------------------- grading


def _apply_candidate(
    repo: Path, base: str, patch_path: Path, report: Report
) -> Tuple[str, List[str]]:
    """Steps 1-2: reset, apply the candidate patch; return its text and touched paths."""
    patching.reset_repo(repo, base)
    text = ""
    if patch_path.is_file():
        text = patch_path.read_text(encoding="utf-8", errors="surrogateescape")
    if not text.strip():
        where = "empty" if patch_path.is_file() else "missing"
        report["apply"] = {"method": "empty", "log": f"{where} patch at {patch_path}"}
        return "", []
    touched = patching.touched_paths(text)
    result = patching.apply_patch(repo, base, patch_path)
    report["apply"] = {"method": result.method, "log": result.log}
    if not result.ok:
        raise Stop("patch_failed", "the patch does not apply")
    return text, touched


def _environment_base(plan: Mapping[str, Any], repo: Path, base: str) -> str:
    """The commit grading measures against: ``base_commit``, or, when building the image
    changed tracked files (a recipe's pre_install editing tox.ini, as the SWE-bench harness's
    sphinx specs do), a commit on top of it holding those changes, made from the image's
    record of them. Protected paths and test files are restored to it, not to the bare base:
    the environment's own edits are part of the task, not the candidate's.
    """
    recorded = plan.get("environment_patch")
    patch = Path(str(recorded)) if recorded else None
    if patch is None or not patch.is_file() or patch.stat().st_size == 0:
        return base
    patching.reset_repo(repo, base)
    try:
        patching.git(repo, "apply", "--binary", "--whitespace=nowarn", str(patch))
        patching.git(repo, "add", "-A")
        tree = patching.git(repo, "write-tree").stdout.strip()
        made = patching.git(
            repo,
            "-c",
            "user.name=packager",
            "-c",
            "user.email=packager@example.invalid",
            "commit-tree",
            tree,
            "-p",
            base,
            "-m",
            "packager: the environment's changes to tracked files",
        )
    except patching.GitError as exc:
        reason = f"the environment's recorded changes do not apply: {exc}"
        raise Stop("infra_error", reason) from None
    patching.reset_repo(repo, base)
    return made.stdout.strip()


def _check_policy(plan: Mapping[str, Any], touched: Sequence[str], report: Report) -> None:
    """Step 3: every touched path allowed and none forbidden."""
    policy = plan.get("patch_policy")
    if not policy:
        return
    if not isinstance(policy, dict):
        raise ValueError("plan: patch_policy must be an object or null")
    allowed = _str_list(policy.get("allowed"), "patch_policy.allowed")
    forbidden = _str_list(policy.get("forbidden"), "patch_policy.forbidden")
    bad = patching.policy_violations(touched, allowed, forbidden)
    if bad:
        report["violations"].extend({"kind": "patch_policy", "path": p} for p in bad)
        raise Stop(
            "policy_violation", "the patch touches paths outside its policy: " + ", ".join(bad)
        )


def _protect_and_add_tests(
    plan: Mapping[str, Any],
    plan_dir: Path,
    repo: Path,
    touched: Sequence[str],
    report: Report,
    base: str,
) -> None:
    """Steps 4-5: restore protected paths (to ``base``: see _environment_base), apply
    test_patch, copy hidden files.
    """
    protected = _str_list(plan.get("protected_paths"), "protected_paths")
    protected += list(patching.DEFAULT_PROTECTED)
    test_patch = _plan_path(plan_dir, plan.get("test_patch"), "test_patch")
    test_paths: List[str] = []
    if test_patch is not None:
        test_text = test_patch.read_text(encoding="utf-8", errors="surrogateescape")
        test_paths = patching.touched_paths(test_text)
    keep: List[str] = []
    if plan.get("refresh"):  # declarations kept, their test-run and plugin sections put back
        declared = [p for p in touched if p not in test_paths]
        how = {p: patching.keep_declaration_change(repo, base, p) for p in declared}
        keep = [p for p in declared if how[p]]
        merged = [p for p in keep if how[p] == "merged"]
        report["violations"].extend({"kind": "test_sections_restored", "path": p} for p in merged)
        if keep:
            report["declarations_kept"] = keep
    restored = patching.restore_protected(repo, base, protected, test_paths, touched, keep)
    report["violations"].extend({"kind": "protected_path_restored", "path": p} for p in restored)
    if test_patch is not None:
        try:
            patching.git(repo, "apply", "--whitespace=nowarn", str(test_patch.resolve()))
        except patching.GitError as exc:
            raise Stop("infra_error", f"test_patch does not apply: {exc}") from None
    hidden = _plan_path(plan_dir, plan.get("hidden_files"), "hidden_files")
    if hidden is not None:
        if not hidden.is_dir():
            raise ValueError("plan: hidden_files must be a directory")
        shutil.copytree(str(hidden), str(repo), dirs_exist_ok=True, symlinks=True)


def _test_command(plan: Mapping[str, Any]) -> Tuple[str, str]:
    """The plan's test command and its parser."""
    command = plan.get("test_command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("plan: test_command is required for this rule")
    parser = str(plan.get("parser") or "")
    if parser not in parsers.PARSERS:
        raise ValueError(f"plan: unknown parser {parser!r}")
    return command, parser


def _run_tests(
    plan: Mapping[str, Any], repo: Path, out_dir: Path, timeout: float, report: Report
) -> Dict[str, str]:
    """Steps 6-7: run the test command, keep its exit code, parse per-test statuses. What a
    runner needs around its command (a proof, a tripwire, a canary) is its family's
    (runners.py); whatever the family added is taken out after the run.
    """
    command, parser = _test_command(plan)
    family = runners.family(parser)
    scratch = Path(tempfile.mkdtemp(prefix="grading-"))  # outside the repo under test
    run = runners.Run(plan, repo, _command_env(plan), scratch, command, parser, report)
    try:
        family.prepare(run)
        code, timed_out, output = processes.run_logged(
            surround.with_services(plan, command, out_dir),
            repo,
            run.env,
            timeout,
            out_dir / TEST_OUTPUT,
        )
        report["exit_code"] = code
        report["added_tests"] = list(run.added)
        if timed_out:
            # Scored 0 regardless; what finished before the kill is kept to help diagnose it.
            partial = family.on_timeout(run, output)
            if partial is not None:
                report["tests"] = parsers.parse(parser, partial)
            raise Stop("infra_error", "timeout")
        text = family.output(run, output)
        if text is None:
            return {}
        tests = family.check(run, parsers.parse(parser, text), output, code)
        report["tests"] = tests
        return tests
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        run.remove()


COLLECTED_EXIT_CODES = (0, 1)
"""pytest's exit codes for a session that collected and ran its tests (2: interrupted, e.g. by
collection errors; 3: internal error; 4: usage error; 5: no tests collected)."""


def _build_health(
    spec: Mapping[str, Any],
    plan: Mapping[str, Any],
    repo: Path,
    out_dir: Path,
    timeout: float,
    report: Report,
) -> float:
    """1.0 or 0.0. ``collected``: the test run collected and ran tests (an exit code in
    COLLECTED_EXIT_CODES and at least one trusted result); otherwise ``build_command`` exits 0
    (no command: 1.0).
    """
    if spec.get("build_health") == "collected":
        ran = report.get("exit_code") in COLLECTED_EXIT_CODES and bool(report.get("tests"))
        return 1.0 if ran else 0.0
    command = spec.get("build_command")
    if not command:
        return 1.0
    code, timed_out, _ = processes.run_logged(
        str(command), repo, _command_env(plan), timeout, out_dir / BUILD_OUTPUT
    )
    return 1.0 if code == 0 and not timed_out else 0.0


def _run_script(
    plan: Mapping[str, Any],
    plan_dir: Path,
    repo: Path,
    out_dir: Path,
    timeout: float,
    report: Report,
) -> Tuple[float, Dict[str, float]]:
    """The ``script`` rule: run the grader in GRADER_DIR and read the reward it reports."""
    spec = plan.get("script")
    if not isinstance(spec, dict) or not isinstance(spec.get("command"), str):
        raise ValueError("plan: rule script needs script.command")
    grader_dir = _plan_path(plan_dir, spec.get("dir"), "script.dir") or plan_dir
    criteria = spec.get("criteria") or []
    if not isinstance(criteria, list) or not all(isinstance(c, dict) for c in criteria):
        raise ValueError("plan: script.criteria must be a list of objects")
    scratch = Path(tempfile.mkdtemp(prefix="grading-"))  # outside the repo under test
    try:
        reward_file = scratch / "reward.json"
        criteria_file = scratch / "criteria.json"
        criteria_file.write_text(json.dumps(criteria, indent=2), encoding="utf-8")
        env = _command_env(plan)
        env.update(
            {
                "REPO_DIR": str(repo),
                "GRADER_DIR": str(grader_dir.resolve()),
                "REWARD_FILE": str(reward_file),
                "CRITERIA_FILE": str(criteria_file),
            }
        )
        node = canaries.write_node_canaries(repo)
        try:
            code, timed_out, stdout = processes.run_logged(
                spec["command"],
                grader_dir,
                env,
                _timeout(spec.get("timeout_sec"), timeout),
                out_dir / GRADER_OUTPUT,
                stderr_path=out_dir / GRADER_STDERR,
            )
        finally:
            if node is not None:
                node.remove()
        report["grader_exit_code"] = code
        if timed_out:
            raise Stop("infra_error", "timeout")
        if node is not None:
            canaries.check_grader_canary(node.name, stdout, out_dir / GRADER_STDERR, report)
        return rules.script_scores(rules.read_script_report(reward_file, stdout), criteria)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _import_judge() -> Any:
    """The judge rule's module (urllib and its imports: a fifth of the runtime's start-up, so
    only the judge rule loads it). Imported before the candidate patch is applied, as every
    other module is: nothing the candidate adds to the repository can stand in for it.
    """
    import importlib

    return importlib.import_module(f"{__package__}.judge" if __package__ else "judge")


def _grade(plan_path: Path, out_dir: Path, patch_path: Path, report: Report) -> None:
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    if not isinstance(plan, dict):
        raise ValueError("plan: not a JSON object")
    if plan.get("version") != 1:
        raise ValueError(f"plan: unsupported version {plan.get('version')!r}")
    report["instance_id"] = plan.get("instance_id")
    rule = plan.get("rule")
    report["rule"] = rule
    if rule not in RULES:
        raise ValueError(f"plan: unknown rule {rule!r}")
    judge = _import_judge() if rule == "judge" else None
    plan_dir = plan_path.resolve().parent
    repo = Path(str(plan["repo_dir"]))
    base = str(plan["base_commit"])
    timeout = _timeout(plan.get("timeout_sec"), DEFAULT_TIMEOUT_SEC)

    grading_base = _environment_base(plan, repo, base)
    candidate, touched = _apply_candidate(repo, base, patch_path, report)
    # `scan_patch: false` lets a test reach the defences behind the scan (on by default).
    tampering = scan.check(candidate, repo, base, report) if plan.get("scan_patch", 1) else None
    if tampering:
        raise Stop("policy_violation", tampering)
    if grading_base != base:
        # Index and HEAD to the environment's commit (the tree stays the candidate's): what
        # differs from it, tracked or not, is the candidate's doing.
        patching.git(repo, "reset", "-q", grading_base)
    _check_policy(plan, touched, report)
    _protect_and_add_tests(plan, plan_dir, repo, touched, report, grading_base)
    refreshed = surround.refresh(plan, repo, out_dir, timeout, _command_env(plan))
    if refreshed is not None:
        report["refresh"] = refreshed
    if plan.get("unroutable"):
        report["unroutable"] = surround.route_nowhere(plan)

    if judge is not None:
        try:
            reward, subscores = judge.judge_rule(
                plan, repo, out_dir, report, processes.sweep_descendants
            )
        except judge.Halt as halt:
            raise Stop(halt.status, halt.reason) from None
        report.update(status="graded", reason=None, reward=reward, subscores=subscores)
        if reward < 1.0:
            report["reason"] = "workflows failed: " + ", ".join(report.get("failed_workflows", []))
        return
    tests: Dict[str, str] = {}
    if rule != "script" or plan.get("test_command"):
        tests = _run_tests(plan, repo, out_dir, timeout, report)

    if rule == "all_pass":
        f2p = _str_list(plan.get("fail_to_pass"), "fail_to_pass")
        p2p = _str_list(plan.get("pass_to_pass"), "pass_to_pass")
        family = runners.family(str(plan.get("parser") or ""))
        tests = family.listed(tests, p2p, repo, out_dir / TEST_OUTPUT, report)
        reward, subscores = rules.all_pass(tests, f2p, p2p, details=report)
    elif rule == "formula":
        spec = plan.get("formula")
        if not isinstance(spec, dict):
            raise ValueError("plan: rule formula needs a formula object")
        health = _build_health(spec, plan, repo, out_dir, timeout, report)
        reward, subscores = rules.formula(tests, spec, health)
        hidden, public = rules.formula_groups(tests, spec)
        report.update(rules.failed_listed(tests, {"hidden": hidden, "public": public}))
    else:
        reward, subscores = _run_script(plan, plan_dir, repo, out_dir, timeout, report)
    report.update(status="graded", reason=None, reward=reward, subscores=subscores)


def grade(plan_path: Path, out_dir: Path, patch_path: Path) -> Report:
    """Run every step and return the final report; never raises for a grading failure."""
    started = time.monotonic()
    report = new_report()
    guard: Optional[GraderFiles] = None
    try:
        guard = GraderFiles(plan_path.resolve().parent, skip=[out_dir], runtime=RUNTIME_DIR)
        _grade(plan_path, out_dir, patch_path, report)
    except Stop as stop:
        report.update(status=stop.status, reason=stop.reason, reward=0.0, subscores={})
    except tripwires.Tampered as exc:
        report.update(status="policy_violation", reason=str(exc), reward=0.0, subscores={})
    except processes.Runaway as exc:
        report.update(status="infra_error", reason=str(exc), reward=0.0, subscores={})
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        report.update(status="infra_error", reason=reason, reward=0.0, subscores={})
    try:
        _check_grader_files(guard, report)
    except Stop as stop:
        report.update(status=stop.status, reason=stop.reason, reward=0.0, subscores={})
    except Exception as exc:
        reason = f"cannot check the grader's files: {type(exc).__name__}: {exc}"
        report.update(status="infra_error", reason=reason, reward=0.0, subscores={})
    report["duration_sec"] = round(time.monotonic() - started, 3)
    return report


def wait_for(path: Path, poll_sec: float = 0.01) -> None:
    """Return once `path` exists (it is only ever created, never removed: see the engine's
    gate); nothing of the candidate is in place before, so only start-up happens earlier.
    """
    while not os.path.lexists(path):
        time.sleep(poll_sec)


def _on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise Terminated(f"terminated by signal {signum}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; exit status 0 whenever reward.json was written."""
    ap = argparse.ArgumentParser(description="Grade a candidate patch against a plan.json.")
    ap.add_argument("plan", type=Path, help="path to plan.json")
    ap.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help="output directory")
    ap.add_argument("--patch", type=Path, default=Path(DEFAULT_PATCH), help="candidate patch")
    ap.add_argument(
        "--after",
        type=Path,
        help="start up (imports, the fail-closed report), then wait until this file exists "
        "before grading: the local engine creates it once the candidate's patch is in place",
    )
    args = ap.parse_args(argv)
    out_dir: Path = args.out
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in (TEST_OUTPUT, BUILD_OUTPUT, GRADER_OUTPUT, GRADER_STDERR):
            (out_dir / stale).unlink(missing_ok=True)
        write_outputs(out_dir, new_report())  # fail closed before doing anything else
    except Exception as exc:
        print(f"grading: cannot write to {out_dir}: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _on_sigterm)
    # The subreaper (and its ctypes import) before the candidate's files are in the repository.
    processes.set_subreaper()
    try:
        if args.after is not None:
            wait_for(args.after)
        report = grade(args.plan, out_dir, args.patch)
    except BaseException as exc:  # Terminated/KeyboardInterrupt between steps
        report = new_report()
        report["reason"] = f"{type(exc).__name__}: {exc}"
    report["resources"] = processes.cgroup_usage()  # the run's peak memory and CPU seconds
    try:
        write_outputs(out_dir, report)
    except Exception as exc:
        print(f"grading: cannot write outputs: {exc}", file=sys.stderr)
        return 1
    print(f"grading: status={report['status']} reward={report['reward']} reason={report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
