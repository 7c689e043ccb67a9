"""Verification engines. `local` reproduces Harbor's separate-verifier protocol with the Docker
SDK: agent container (oracle: solution/solve.sh; nop: nothing) → collect model.patch → fresh
grader container → /tests/test.sh → reward.json. Containers are always removed.

Starting a container is the largest fixed cost of a run (about 0.15 s here), so the grader
container is created and started while the agent phase runs, behind a gate: it waits, doing
nothing, until the collected patch is put into it, then runs /tests/test.sh as its main
process, exactly as a grader started afterwards would. It never sees the agent container.

Every round trip to the engine on a run's path costs 10-80 ms, so a run makes few: the agent
phase is the agent container's main process (no exec), its outputs come back in one archive,
the grader's results, logs and OOM state are read at once, and containers are removed in the
background (never leaked: the interpreter waits for those threads at exit).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packager.context import RunContext
from packager.engines.excerpts import run_evidence
from packager.engines.mounts import (
    RunFolders,
    copy_confined_tree,
    mark_shared,
    mounts_proven,
    mounts_usable,
    read_confined,
    run_folders,
    volume,
    write_new,
)
from packager.errors import RunError
from packager.images.build import (
    DockerClient,
    is_connection_error,
    labels_for,
)
from packager.images.tar import extract_tree, make_tar, read_tar_member
from packager.models.spec import RunResult
from packager.render.write import write_json

AGENT_TIMEOUT_DEFAULT = 1800

PATCH_MEMBER = "logs/artifacts/model.patch"
"""Where the grader reads the collected patch (Harbor's agent artifact path)."""
GATE_MEMBER = "logs/grade-now"
"""Put into an early-started grader after the patch (the same tar, later in it): the gate opens."""
FOLDER_MARK = ".packager-folder"
"""Left in a grader's run folder before its container is created: a gate started with the
argument `folder` that does not find it at /logs exits FOLDER_MISSING at once (the folder is
not what the container sees; the run grades in a fresh container through the archive calls)."""
FOLDER_MISSING = 86
GATE_SCRIPT = (
    f'if [ "$1" = folder ] && [ ! -e /logs/{FOLDER_MARK} ]; then exit {FOLDER_MISSING}; fi; '
    # The runtime starts now (interpreter, imports, its fail-closed report) and waits for the
    # gate itself: its start-up is off the run's path.
    f"exec bash /tests/test.sh --after /{GATE_MEMBER}"
)
"""The gate never removes its file: the engine is still setting the member's owner and times
after creating it, and a file gone by then fails the whole put_archive (`lchown ...: no such
file or directory`, an HTTP 500)."""
assert sorted([PATCH_MEMBER, GATE_MEMBER]) == [PATCH_MEMBER, GATE_MEMBER]  # make_tar sorts

AGENT_OUT = "/logs/agent"
"""Where the agent phase leaves solve.sh's and the collect hook's output and exit codes."""
AGENT_SCRIPT = (
    f'o={AGENT_OUT}; mkdir -p "$o" || exit 125; '
    'if [ "$1" = oracle ]; then '
    'timeout --kill-after=10 "$2" bash -c /solution/solve.sh >"$o/solve.txt" 2>&1; '
    'echo $? >"$o/solve.exit"; fi; '
    'timeout --kill-after=10 120 bash -c "$3" >"$o/collect.txt" 2>&1; echo $? >"$o/collect.exit"'
)
"""The agent container's main process (`bash -c AGENT_SCRIPT agent KIND TIMEOUT COLLECT`): the
oracle's solve.sh (put in before the container starts), then the collect hook, each with its
deadline, as `docker exec` ran them before (same user, workdir and environment)."""


@dataclass(frozen=True)
class RunPlan:
    """What one run needs to know about its task."""

    task: str
    agent_image: str
    grader_image: str
    workdir: str
    collect: str
    solution_dir: Path
    grade_timeout_sec: int
    agent_timeout_sec: int = AGENT_TIMEOUT_DEFAULT
    network: bool = False
    memory_mb: int | None = None
    """Memory limit of every run container (no swap beyond it); None = the engine's default."""
    grader_env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the grader container (a browser judge's model endpoint)."""
    grader_network: bool = False
    """Whether the grader container has a network (a browser judge reaches its model)."""
    grader_caps: tuple[str, ...] = ()
    """Capabilities the grader container gets: NET_ADMIN for a task with unroutable addresses
    (the runtime routes them into loopback, in a namespace with no network)."""
    cpus: float | None = None
    """CPUs of every run container (the task's `Environment.cpus`, at most the engine's)."""
    grader_cpuset: str | None = None
    """CPUs the grader container may run on (`0`: one; what `nproc` and
    `os.sched_getaffinity` then see); None: all (a perturbed gold run changes it)."""
    grader_files: tuple[tuple[str, bytes], ...] = ()
    """(absolute path, bytes) put into the grader container before it starts (a perturbed
    gold run's clock library)."""
    run: RunContext = field(default_factory=RunContext, compare=False)
    """The run the containers belong to (their labels name it; Ctrl-C stops the next one)."""


HOST_ALIAS = "host.docker.internal"
"""How a container with a network reaches the host (a model endpoint, the replay server)."""

EXCERPT_CHARS = 400
RUN_FILES = (
    "reward.json",
    "report.json",
    "test-output.txt",
    "refresh-output.txt",
    "apply.log",
    "agent.txt",
    "collect.txt",
    "grader.txt",
    "model.patch",
)
"""What one run writes in its log folder (cleared first, so nothing stale is read back)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The last meaningful lines of a log, on one line, at most `limit` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines)
    return joined if len(joined) <= limit else "…" + joined[-limit:]


@dataclass(frozen=True)
class AgentOutcome:
    """What the agent phase left: the collected patch and, for the oracle, solve.sh's exit."""

    patch: bytes
    solve_exit: int | None = None
    solve_log: Path | None = None


@contextmanager
def _container(
    client: DockerClient,
    image: str,
    task: str,
    role: str,
    command: list[str],
    workdir: str,
    network: bool,
    memory_mb: int | None = None,
    env: Mapping[str, str] | None = None,
    cpus: float | None = None,
    background: bool = False,
    folder: Path | None = None,
    solution: Path | None = None,
    cap_add: tuple[str, ...] = (),
    *,
    run: RunContext,
    cpuset: str | None = None,
    files: tuple[tuple[str, bytes], ...] = (),
) -> Iterator[Any]:
    """A created container, removed (forced) on leaving: here, or with `background` in a
    thread (`remove_later`), so the run does not wait for it. `folder` is mounted at /logs,
    `solution` read-only at /solution.
    """
    run.check()
    name = f"packager-{role}-{uuid.uuid4().hex[:10]}"
    kwargs: dict[str, Any] = (
        {"extra_hosts": {HOST_ALIAS: "host-gateway"}} if network else {"network_mode": "none"}
    )
    if env:
        kwargs["environment"] = dict(env)
    if cap_add:
        kwargs["cap_add"] = list(cap_add)
    if memory_mb is not None:
        kwargs["mem_limit"] = f"{memory_mb}m"
        kwargs["memswap_limit"] = f"{memory_mb}m"
    if cpus is not None:
        # A quota, as the harness sets it: what `nproc`-style checks of the cgroup read.
        kwargs["nano_cpus"] = int(min(cpus, _engine_cpus(client)) * 1e9)
    if cpuset is not None:
        kwargs["cpuset_cpus"] = cpuset
    kwargs.update(volume(folder, solution))
    container = client.containers.create(
        image,
        command=command,
        name=name,
        labels=labels_for(task, role, run),
        working_dir=workdir,
        detach=True,
        **kwargs,
    )
    try:
        if files:
            container.put_archive("/", make_tar({p.lstrip("/"): data for p, data in files}))
        yield container
    finally:
        if background:
            remove_later(container)
        else:
            _remove_container(container)


REMOVE_PAUSES = (0.5, 2.0, 5.0)
"""Pauses between attempts at removing a container. Under load the engine can refuse a forced
removal (a layer still busy on unmount, a removal already in progress) or the call can time
out, and the container is then still there; CI once found four of a task's containers left.
"""


def _remove_container(container: Any, pauses: tuple[float, ...] = REMOVE_PAUSES) -> bool:
    """Force-remove `container`, trying again after each pause; whether it is gone. Gone
    already is success; an engine that cannot be reached is not tried again (nothing to undo).
    """
    import docker.errors

    for pause in (*pauses, None):
        try:
            container.remove(force=True)
            return True
        except docker.errors.NotFound:
            return True
        except Exception as exc:  # noqa: BLE001 - refused or timed out: try again
            if pause is None or is_connection_error(exc):
                return False
            time.sleep(pause)
    return False


_REMOVALS: list[threading.Thread] = []
_REMOVALS_LOCK = threading.Lock()


def remove_later(container: Any) -> None:
    """Force-remove `container` in a thread, off the run's path (a removal takes 30-200 ms).
    The thread is not a daemon: the interpreter waits for it before exiting, so no container
    outlives the process (after Ctrl-C, `remove_run_containers` also sweeps by run label).
    """
    thread = threading.Thread(target=_remove_container, args=(container,), name="remove")
    with _REMOVALS_LOCK:
        _REMOVALS[:] = [t for t in _REMOVALS if t.is_alive()]
        _REMOVALS.append(thread)
    thread.start()


def wait_for_removals() -> None:
    """Return once every container handed to `remove_later` so far is removed."""
    with _REMOVALS_LOCK:
        pending = list(_REMOVALS)
    for thread in pending:
        thread.join()


_ENGINE_CPUS: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def _engine_cpus(client: DockerClient) -> float:
    """The engine's CPU count (a quota above it is refused); asked once per client, since
    `info` is one of the engine's slowest calls.
    """
    cached = _ENGINE_CPUS.get(client)
    if cached is None:
        info = client.info() if hasattr(client, "info") else {}
        cached = _ENGINE_CPUS[client] = float(info.get("NCPU") or 1)
    return cached


def _oom_killed(box: Any) -> bool:
    """Whether the kernel killed a process of the container for memory (cgroup OOM)."""
    box.reload()
    return bool((box.attrs.get("State") or {}).get("OOMKilled"))


def _oom_error(plan: RunPlan, phase: str, log_dir: Path) -> RunError:
    limit = f"{plan.memory_mb} MiB" if plan.memory_mb else "the engine's limit"
    return RunError(
        plan.task, f"{phase} container was killed for memory (OOMKilled, limit {limit})", log_dir
    )


def agent_phase(
    client: DockerClient,
    plan: RunPlan,
    kind: str,
    log_dir: Path,
    background: bool = False,
    folder: Path | None = None,
) -> AgentOutcome:
    """Run the agent phase (oracle or nop); the collected model.patch and solve.sh's exit.
    The container runs AGENT_SCRIPT as its main process; its outputs and the patch are read
    from `folder`, its /logs (`packager.engines.mounts`), or else come back in one archive of
    /logs. With `background`, the container is removed in a thread.
    """
    deadline = (plan.agent_timeout_sec if kind == "oracle" else 0) + 120 + 30
    command = ["bash", "-c", AGENT_SCRIPT, "agent", kind, str(plan.agent_timeout_sec)]
    # The oracle's solution: mounted read-only once the engine is proven to see this host's
    # files (and solve.sh is executable there), else put in as an archive.
    solution = (
        plan.solution_dir
        if kind == "oracle"
        and folder is not None
        and mounts_proven(client)
        and os.access(plan.solution_dir / "solve.sh", os.X_OK)
        else None
    )
    with _container(
        client,
        plan.agent_image,
        plan.task,
        f"agent-{kind}",
        [*command, plan.collect],
        plan.workdir,
        plan.network,
        plan.memory_mb,
        cpus=plan.cpus,
        background=background,
        folder=folder,
        solution=solution,
        run=plan.run,
    ) as box:
        if kind == "oracle" and solution is None:
            files = {
                f"solution/{p.relative_to(plan.solution_dir).as_posix()}": p.read_bytes()
                for p in sorted(plan.solution_dir.rglob("*"))
                if p.is_file()
            }
            box.put_archive("/", make_tar(files, {"solution/solve.sh": 0o755}))
        box.start()
        status = _wait(box, plan, "agent phase", deadline, log_dir)
        if plan.memory_mb is not None and _oom_killed(box):
            raise _oom_error(plan, "agent", log_dir)
        if status.get("StatusCode") == 125:
            said = box.logs(stdout=True, stderr=True).decode(errors="replace")
            reason = f"the agent phase could not make {AGENT_OUT}: {excerpt(said)}"
            raise RunError(plan.task, reason, log_dir)
        read = _agent_reader(client, box, folder)
    outputs = {
        name: (read(f"agent/{name}") or b"").decode(errors="replace")
        for name in ("solve.txt", "solve.exit", "collect.txt", "collect.exit")
    }
    solve_exit: int | None = None
    solve_log: Path | None = None
    if kind == "oracle":
        solve_exit = _exit_code(outputs["solve.exit"])
        solve_log = log_dir / "agent.txt"
        solve_log.write_text(f"exit code {solve_exit}\n{outputs['solve.txt']}")
    if _exit_code(outputs["collect.exit"]) != 0:
        (log_dir / "collect.txt").write_text(outputs["collect.txt"])
    data = read("artifacts/model.patch")
    return AgentOutcome(data or b"", solve_exit, solve_log)


def _agent_reader(client: DockerClient, box: Any, folder: Path | None) -> Any:
    """How the agent phase's files are read (name relative to /logs -> bytes or None): from
    its run folder when the engine wrote them there (AGENT_SCRIPT always writes
    collect.exit), else from one archive of /logs.
    """
    if folder is not None:
        shared = read_confined(folder, "agent/collect.exit") is not None
        mark_shared(client, shared)
        if shared:
            return lambda name: read_confined(folder, name)
    stream, _ = box.get_archive("/logs")
    archive = b"".join(stream)
    return lambda name: read_tar_member(archive, name)


def _exit_code(text: str) -> int:
    """An exit code AGENT_SCRIPT wrote (-1: none, the step never finished)."""
    return int(text.strip()) if text.strip().lstrip("-").isdigit() else -1


def _wait(box: Any, plan: RunPlan, phase: str, deadline: float, log_dir: Path) -> dict[str, Any]:
    """The container's exit status; a lost engine or the deadline passing is a RunError."""
    try:
        return dict(box.wait(timeout=deadline))
    except Exception as exc:  # requests ReadTimeout or connection errors
        if is_connection_error(exc):
            raise RunError(
                plan.task,
                f"lost the Docker engine while the {phase} ran ({type(exc).__name__}: {exc})",
                log_dir,
            ) from exc
        try:
            box.kill()
        except Exception:  # noqa: BLE001 - best effort before the report says why
            pass
        raise RunError(
            plan.task,
            f"{phase} did not finish within {deadline} s (timeout; {type(exc).__name__})",
            log_dir,
        ) from exc


def _grader_container(
    client: DockerClient, plan: RunPlan, kind: str, command: list[str], folder: Path | None
) -> Any:
    return _container(
        client,
        plan.grader_image,
        plan.task,
        f"grader-{kind}",
        command,
        plan.workdir,
        plan.grader_network,
        plan.memory_mb,
        dict(plan.grader_env),
        cpus=plan.cpus,
        background=True,
        folder=folder,
        cap_add=plan.grader_caps,
        run=plan.run,
        cpuset=plan.grader_cpuset,
        files=plan.grader_files,
    )


class EarlyGrader:
    """A fresh grader container created and started behind the gate (GATE_SCRIPT) in a
    thread, while the agent phase runs; `close` has it removed (in the background) whatever
    happened.
    """

    def __init__(
        self, client: DockerClient, plan: RunPlan, kind: str, folder: Path | None = None
    ) -> None:
        self._stack = ExitStack()
        self._box: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._start,
            args=(client, plan, kind, folder),
            name=f"grader-{kind}",
            daemon=True,
        )
        self._thread.start()

    def _start(self, client: DockerClient, plan: RunPlan, kind: str, folder: Path | None) -> None:
        try:
            command = ["bash", "-c", GATE_SCRIPT, "gate", *(["folder"] if folder else [])]
            if folder is not None:
                write_new(folder, FOLDER_MARK, b"")
            box = self._stack.enter_context(_grader_container(client, plan, kind, command, folder))
            box.start()
            self._box = box
        except BaseException as exc:  # noqa: BLE001 - raised again where the grader is needed
            self._error = exc

    def container(self) -> Any:
        """The started container (the error that kept it from starting is raised here)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._box

    def close(self) -> None:
        self._thread.join()
        self._stack.close()


def run_grader_phase(
    client: DockerClient,
    plan: RunPlan,
    kind: str,
    patch: bytes,
    log_dir: Path,
    early: EarlyGrader | None = None,
    folder: Path | None = None,
) -> dict[str, Any]:
    """Grade `patch` in a fresh grader container (`early`'s, started behind its gate, when
    given; `folder` is its /logs, see `packager.engines.mounts`); return report.json (reward
    always present).
    """
    (log_dir / "model.patch").write_bytes(patch)
    # Through the folder only once a run has shown the engine sees it; else as an archive
    # (which also lands in the folder when the engine shares it).
    handed = folder is not None and mounts_proven(client)
    with (
        nullcontext(early.container())
        if early is not None
        else _grader_container(client, plan, kind, ["bash", "/tests/test.sh"], folder)
    ) as box:
        _hand_over(box, patch, folder if handed else None, gated=early is not None)
        if early is None:
            box.start()
        status = _wait(box, plan, "grader", plan.grade_timeout_sec + 120, log_dir)
        if (
            early is not None
            and status.get("StatusCode") == FOLDER_MISSING
            and folder is not None
            and read_confined(folder, "verifier/reward.json") is None
        ):
            mark_shared(client, False)
            return run_grader_phase(client, plan, kind, patch, log_dir)
        files = _grader_results(box, plan, log_dir, folder)
    reward = json.loads(files["reward.json"]) if "reward.json" in files else None
    report = json.loads(files["report.json"]) if "report.json" in files else {}
    if not isinstance(reward, dict) or "reward" not in reward:
        raise RunError(
            plan.task, f"no reward.json written (grader exit {status.get('StatusCode')})", log_dir
        )
    report["reward_json"] = reward
    apply = report.get("apply")
    if report.get("status") == "patch_failed" and isinstance(apply, dict) and apply.get("log"):
        (log_dir / "apply.log").write_text(str(apply["log"]))
    return report


def _hand_over(box: Any, patch: bytes, folder: Path | None, gated: bool) -> None:
    """Give the grader the patch (and open its gate when `gated`): as files in `folder`, else
    as one archive.
    """
    if folder is not None:
        write_new(folder, PATCH_MEMBER.removeprefix("logs/"), patch)
        if gated:
            write_new(folder, GATE_MEMBER.removeprefix("logs/"), b"")
    elif gated:
        box.put_archive("/", make_tar({PATCH_MEMBER: patch, GATE_MEMBER: b""}))
    else:
        box.put_archive("/", make_tar({PATCH_MEMBER: patch}))


def _grader_results(
    box: Any, plan: RunPlan, log_dir: Path, folder: Path | None
) -> dict[str, bytes]:
    """Copy a finished grader's results into `log_dir` (from its folder when it wrote them
    there, else from one archive of /logs/verifier) with its output and OOM state read at the
    same time; the result files by name.
    """
    on_host = folder is not None and read_confined(folder, "verifier/reward.json") is not None
    with ThreadPoolExecutor(3) as pool:  # the round trips at once
        oom = pool.submit(_oom_killed, box)
        logs = pool.submit(box.logs, stdout=True, stderr=True)
        fetched = (
            None if on_host else pool.submit(lambda: b"".join(box.get_archive("/logs/verifier")[0]))
        )
        (log_dir / "grader.txt").write_bytes(logs.result())
        if oom.result():
            raise _oom_error(plan, "grader", log_dir)
        archive = fetched.result() if fetched is not None else b""
    files = {}
    for name in ("reward.json", "report.json", "test-output.txt", "refresh-output.txt"):
        if on_host and folder is not None:
            data = read_confined(folder, f"verifier/{name}")
        else:
            data = read_tar_member(archive, name)
        if data is not None:
            (log_dir / name).write_bytes(data)
            files[name] = data
    if on_host and folder is not None:
        copy_confined_tree(folder, "verifier/judge", log_dir / "judge")
    else:
        extract_tree(archive, "verifier/judge/", log_dir / "judge")
    return files


def _run_phases(
    client: DockerClient,
    plan: RunPlan,
    kind: str,
    log_dir: Path,
    patch: bytes | None,
    folders: RunFolders | None,
) -> tuple[AgentOutcome | None, dict[str, Any]]:
    """The agent phase (unless a patch is given) with the grader started beside it behind
    its gate, then grading; the agent's outcome and the grader's report.
    """
    agent: AgentOutcome | None = None
    early = (
        EarlyGrader(client, plan, kind, folders.grader if folders else None)
        if patch is None
        else None
    )
    try:
        if patch is None:
            agent = agent_phase(
                client,
                plan,
                kind,
                log_dir,
                background=True,
                folder=folders.agent if folders else None,
            )
            patch = agent.patch
        folder = folders.grader if folders else None
        return agent, run_grader_phase(client, plan, kind, patch, log_dir, early, folder)
    finally:
        if early is not None:
            early.close()


def run_once(
    client: DockerClient, plan: RunPlan, kind: str, log_dir: Path, patch: bytes | None = None
) -> RunResult:
    """One full run: agent phase (unless a patch is given), then grading.

    Infrastructure faults (timeouts, OOM kills, a lost engine) become an `infra_error` run;
    reward.json is still written as 0 in the run's log folder, as Harbor would read it.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    for stale in RUN_FILES:
        (log_dir / stale).unlink(missing_ok=True)
    shutil.rmtree(log_dir / "judge", ignore_errors=True)
    started = time.monotonic()
    agent: AgentOutcome | None = None
    with run_folders(mounts_usable(client)) as folders:
        try:
            agent, report = _run_phases(client, plan, kind, log_dir, patch, folders)
        except RunError as exc:
            _write_zero_reward(log_dir, exc.reason)
            return RunResult(
                kind=kind,
                reward=None,
                grade_status="infra_error",
                reason=exc.reason,
                duration_sec=round(time.monotonic() - started, 3),
                log_dir=str(log_dir),
            )
    rewards = report["reward_json"]
    subscores = {k: float(v) for k, v in rewards.items() if k != "reward"}
    apply_log: str | None = None
    apply_excerpt: str | None = None
    if agent is not None and agent.solve_exit not in (None, 0) and agent.solve_log is not None:
        apply_log = str(agent.solve_log)
        apply_excerpt = f"solve.sh exit {agent.solve_exit}: " + excerpt(
            agent.solve_log.read_text(errors="replace").split("\n", 1)[-1]
        )
    elif (log_dir / "apply.log").is_file():
        apply_log = str(log_dir / "apply.log")
        apply_excerpt = excerpt((log_dir / "apply.log").read_text(errors="replace"))
    reason = report.get("reason") or failed_tests_reason(report)
    grade_status = str(report.get("status", "graded"))
    if grade_status == "infra_error" and reason and "timeout" in str(reason):
        reason = f"timeout: the test command ran past {plan.grade_timeout_sec} s ({reason})"
    return RunResult(
        kind=kind,
        reward=float(rewards["reward"]),
        subscores=subscores,
        grade_status=grade_status,
        reason=reason,
        duration_sec=round(time.monotonic() - started, 3),
        log_dir=str(log_dir),
        apply_log=apply_log,
        apply_excerpt=apply_excerpt,
        judge=judge_record(report.get("judge"), log_dir / "judge"),
        **run_evidence(report, log_dir / "test-output.txt"),
    )


def judge_record(judge: Any, root: Path) -> dict[str, Any] | None:
    """The report's judge section with paths on this machine (`root` holds the workflows'
    folders: screenshots, agent and app logs).
    """
    if not isinstance(judge, dict):
        return None
    record = dict(judge)
    workflows = []
    for item in judge.get("workflows") or []:
        if not isinstance(item, dict):
            continue
        item = dict(item)
        local = root / Path(str(item.get("log_dir", ""))).name
        item["log_dir"] = str(local)
        if item.get("screenshot"):
            item["screenshot"] = str(local / "screenshot.png")
        workflows.append(item)
    record["workflows"] = workflows
    return record


def failed_tests_reason(report: dict[str, Any]) -> str | None:
    """Which listed tests failed or went missing (first few per group, and the counts)."""
    failed = report.get("failed_tests")
    counts = report.get("failed_counts")
    if not isinstance(failed, dict) or not isinstance(counts, dict):
        return None
    tests = report.get("tests")
    statuses: dict[str, Any] = tests if isinstance(tests, dict) else {}
    parts = []
    for group, ids in failed.items():
        count = counts.get(group, 0)
        if not count or not isinstance(ids, list):
            continue
        shown = [f"{i} ({statuses.get(i, 'missing')})" for i in ids[:3]]
        more = f" and {count - len(shown)} more" if count > len(shown) else ""
        parts.append(f"{group}: {count} not passed: {', '.join(shown)}{more}")
    return "; ".join(parts) or None


def _write_zero_reward(log_dir: Path, reason: str) -> None:
    """A run that did not finish still leaves reward.json = 0 (fail closed), unless the grader
    wrote one; report.json says why.
    """
    if not (log_dir / "reward.json").is_file():
        write_json(log_dir / "reward.json", {"reward": 0})
    if not (log_dir / "report.json").is_file():
        write_json(
            log_dir / "report.json", {"status": "infra_error", "reason": reason, "reward": 0}
        )
