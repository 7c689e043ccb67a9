"""Leak audit against real images: the sample agent images are clean, and deliberately leaky
variants built FROM them are each caught with the right finding kind.

Every variant image carries `packager.tool=packager` and a per-session `packager.task` label; the
module fixture removes them (and the dangling first stages of multi-stage builds) at the end and
asserts none is left.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from packager.checks.audit import AuditReport, audit_image, audit_task, parse_patch
from packager.datasets.sources import open_dataset
from packager.images import build
from packager.models.spec import TaskSpec
from packager.render import naming
from packager.render.harbor import make_harbor_task
from packager.run.resolve import resolve_spec
from packager.run.select import Selection, iter_specs
from packager.storage import OutputPaths
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.docker

GRADEABLE = (
    "samples__textkit-1",
    "samples__intset-2",
    "samples__kvstore-3",
    "samples__inventory-4",
)
SESSION = uuid.uuid4().hex[:10]
TEST_LABEL = f"audit-test/{SESSION}"


def _specs() -> dict[str, TaskSpec]:
    sel = Selection(dataset=open_dataset(None, "test"), task_ids=GRADEABLE)
    return {s.task_id: resolve_spec(s, sel.merged_repo_sources) for s in iter_specs(sel)}


@pytest.fixture(scope="module")
def specs() -> dict[str, TaskSpec]:
    return _specs()


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> tuple[Path, dict[str, Any]]:
    """Build the gradeable samples' images through the real CLI (cached by content hash)."""
    out = tmp_path_factory.mktemp("audit-out")
    proc = run_cli("build", *GRADEABLE, "--out", str(out), "-j", "2")
    results = {}
    for path in (out / "samples" / "results").glob("*.json"):
        if not path.name.endswith(".audit.json"):
            data = json.loads(path.read_text())
            results[data["instance_id"]] = data
    assert results, proc.stdout + proc.stderr
    return out, results


def _agent_tag(spec: TaskSpec) -> str:
    return make_harbor_task(spec).agent_image


@pytest.mark.parametrize("task", GRADEABLE)
def test_sample_agent_image_is_clean(
    task: str,
    built: tuple[Path, dict[str, Any]],
    specs: dict[str, TaskSpec],
    docker_client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, results = built
    assert results.get(task, {}).get("status") == "built", results.get(task)
    paths = OutputPaths(out, "samples")
    report = audit_task(docker_client, specs[task], paths)
    assert report.clean, [f.to_json() for f in report.findings]
    written = json.loads((out / "samples" / "results" / f"{task}.audit.json").read_text())
    assert written["status"] == "clean" and written["findings"] == []
    assert written["stats"]["layers"] >= 3 and written["stats"]["git_objects"] > 0
    assert written["stats"]["evidence_units"] > 0
    # `packager build` audited this very image already: the clean verdict is reused ...
    assert report.stats.get("cached") == 1 and written["cache_key"]
    # ... but not for other secrets (a changed gold patch is audited afresh; an empty machine
    # cache, as an earlier run of this test left that very verdict in the machine's own).
    changed = specs[task].model_copy(update={"gold_patch": (specs[task].gold_patch or "") + " "})
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "cache"))
    again = audit_task(docker_client, changed, paths)
    assert again.clean and "cached" not in again.stats and again.stats["layers"] >= 3


# --------------------------------------------------------------------------- leaky variants


class Variants:
    """Builds leaky images FROM a clean agent image; removes all of them at the end."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.tags: list[str] = []

    def build(self, name: str, dockerfile: str, files: dict[str, bytes]) -> str:
        tag = f"packager/audit-test:{name}-{SESSION}"
        with tempfile.TemporaryDirectory(prefix="audit-variant-") as tmp:
            ctx = Path(tmp)
            (ctx / "Dockerfile").write_text(dockerfile)
            for rel, data in files.items():
                (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
                (ctx / rel).write_bytes(data)
            self.tags.append(tag)
            build.build_image(
                self.client,
                task=TEST_LABEL,
                role=f"leak-{name}",
                context=ctx,
                tag=tag,
                log_path=ctx / "build.log",
                timeout_sec=600,
            )
        return tag

    def cleanup(self) -> list[str]:
        for tag in self.tags:
            try:
                self.client.images.remove(tag, force=True)
            except Exception:  # noqa: BLE001 - a failed build left no image
                pass
        label = f"{naming.LABEL_TASK}={TEST_LABEL}"
        self.client.images.prune(filters={"dangling": True, "label": label})
        return [
            str(i.tags or i.id) for i in self.client.images.list(all=True, filters={"label": label})
        ]


@pytest.fixture(scope="module")
def variants(docker_client: Any, built: tuple[Path, dict[str, Any]]) -> Iterator[Variants]:
    v = Variants(docker_client)
    yield v
    assert v.cleanup() == []


# The first stage of a multi-stage variant works on the repository; only its .git reaches the
# final image, so the finding must come from the git objects, not from a copied patch.
_STAGE = (
    "FROM {base} AS work\n"
    f'LABEL {naming.LABEL_TOOL}=packager {naming.LABEL_TASK}="{TEST_LABEL}"\n'
    "COPY gold.patch /tmp/gold.patch\n"
    "WORKDIR /testbed\n"
    "RUN {script}\n"
    "FROM {base}\n"
    "COPY --from=work /testbed/.git /testbed/.git\n"
)


def _post_patch_test_file(spec: TaskSpec) -> bytes:
    """tests/test_slug.py as the test patch leaves it (applied on the host to the base file)."""
    import subprocess

    from packager import repos

    sel = Selection(dataset=open_dataset(None, "test"))
    git_dir = repos.git_dir_for(repos.source_for(spec.repo.name, sel.merged_repo_sources))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(git_dir), tmp], check=True)
        subprocess.run(["git", "-C", tmp, "checkout", "-q", spec.repo.base_commit], check=True)
        assert spec.grading.test_patch
        subprocess.run(
            ["git", "-C", tmp, "apply"], input=spec.grading.test_patch.encode(), check=True
        )
        path = parse_patch(spec.grading.test_patch)[0].path
        return (Path(tmp) / path).read_bytes()


def _audit(client: Any, tag: str, spec: TaskSpec) -> AuditReport:
    report = audit_image(client, tag, spec)
    assert not report.clean
    assert report.status == "leak"
    return report


def test_hidden_tests_copied_into_image(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # (a) the test patch's post-patch test file, copied somewhere outside the repository
    spec = specs["samples__textkit-1"]
    tag = variants.build(
        "tests",
        f"FROM {_agent_tag(spec)}\nCOPY t.py /opt/leak/test_slug.py\n",
        {"t.py": _post_patch_test_file(spec)},
    )
    report = _audit(docker_client, tag, spec)
    assert report.kinds == {"test_patch"}
    (finding,) = report.findings
    assert finding.path == "/opt/leak/test_slug.py" and finding.layer.startswith("sha256:")


def test_hidden_file_copied_into_image(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # (a) a PDL hidden test file (a new file of its test_patch), byte for byte
    spec = specs["samples__inventory-4"]
    path = "tests/hidden/test_hidden.py"
    data = (ROOT / "packager/samples/src/inventory/hidden" / path).read_bytes()
    assert spec.grading.test_patch and path in spec.grading.test_patch
    tag = variants.build(
        "hidden", f"FROM {_agent_tag(spec)}\nCOPY h.py /root/{Path(path).name}\n", {"h.py": data}
    )
    report = _audit(docker_client, tag, spec)
    # The whole file is also the test patch's added lines.
    assert "hidden_test" in report.kinds and report.kinds <= {"hidden_test", "test_patch"}
    assert any("exact copy of test patch: new file" in f.detail for f in report.findings)


def test_grader_file_copied_into_image(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    spec = specs["samples__kvstore-3"]
    data = spec.grading.grader_files["grader/grade.py"]
    tag = variants.build(
        "grader", f"FROM {_agent_tag(spec)}\nCOPY g.py /usr/local/lib/g.py\n", {"g.py": data}
    )
    assert _audit(docker_client, tag, spec).kinds == {"grader_file"}


def test_gold_patch_added_then_deleted(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # (b) in one layer, gone in the next: invisible in a container, still in the image
    spec = specs["samples__textkit-1"]
    assert spec.gold_patch
    tag = variants.build(
        "gold-deleted",
        f"FROM {_agent_tag(spec)}\nCOPY gold.patch /tmp/leak/gold.patch\nRUN rm -rf /tmp/leak\n",
        {"gold.patch": spec.gold_patch.encode()},
    )
    report = _audit(docker_client, tag, spec)
    assert report.kinds == {"gold_patch"}
    (finding,) = report.findings
    assert finding.path == "/tmp/leak/gold.patch"
    assert "deleted by a later layer" in finding.detail


@pytest.mark.parametrize(
    ("name", "script", "expected", "absent"),
    [
        # (c) a future commit, reset away: unreachable but present; no reflog, no ref left
        (
            "commit",
            "git apply /tmp/gold.patch && git commit -qam fix && git reset -q --hard HEAD~1"
            " && rm -rf .git/logs .git/ORIG_HEAD",
            {"commit", "gold_patch"},
            {"ref", "reflog", "tag"},
        ),
        # (c) a branch pointing at the future commit
        (
            "branch",
            "git checkout -qb fix && git apply /tmp/gold.patch && git commit -qam fix && "
            "git checkout -q main && rm -rf .git/logs .git/ORIG_HEAD",
            {"commit", "ref", "gold_patch"},
            {"tag"},
        ),
        # (c) the reset-back commit with its reflog kept
        (
            "reflog",
            "git apply /tmp/gold.patch && git commit -qam fix && git reset -q --hard HEAD~1",
            {"commit", "reflog", "gold_patch"},
            {"tag"},
        ),
        # (d) a future annotated tag (ref and tag object), the commit reset away
        (
            "tag",
            "git apply /tmp/gold.patch && git commit -qam fix && git tag -a -m v1.1 v1.1 && "
            "git reset -q --hard HEAD~1 && rm -rf .git/logs .git/ORIG_HEAD",
            {"tag", "commit", "gold_patch"},
            {"reflog"},
        ),
        # (e) a dangling blob holding the fixed file, no commit
        (
            "blob",
            "git apply /tmp/gold.patch && git hash-object -w textkit/slug.py && git checkout -- .",
            {"gold_patch"},
            {"commit", "ref", "reflog", "tag"},
        ),
        # (e) the same blob inside a pack file (no loose copy)
        (
            "packed-blob",
            "git apply /tmp/gold.patch && git hash-object -w textkit/slug.py && "
            "git checkout -- . && git repack -qadk && git prune-packed && "
            "test -z \"$(find .git/objects -path '*/??/*' -type f)\"",
            {"gold_patch"},
            {"commit", "ref", "reflog", "tag"},
        ),
    ],
)
def test_history_leaks(
    name: str,
    script: str,
    expected: set[str],
    absent: set[str],
    variants: Variants,
    specs: dict[str, TaskSpec],
    docker_client: Any,
) -> None:
    spec = specs["samples__textkit-1"]
    assert spec.gold_patch
    tag = variants.build(
        name,
        _STAGE.format(base=_agent_tag(spec), script=script),
        {"gold.patch": spec.gold_patch.encode()},
    )
    report = _audit(docker_client, tag, spec)
    assert expected <= report.kinds, report.to_json()
    assert not (absent & report.kinds), report.to_json()
    gold = [f for f in report.findings if f.kind == "gold_patch"]
    assert gold and all(f.object_id and f.path == "/testbed/.git/objects" for f in gold)
    assert all(f.layer.startswith("sha256:") for f in report.findings)


def test_remote_and_tag_at_base(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # A tag made after the base commit, even one naming the base itself, is not history.
    spec = specs["samples__textkit-1"]
    tag = variants.build(
        "remote",
        f"FROM {_agent_tag(spec)}\nRUN git remote add origin https://example.invalid/textkit.git"
        " && git tag -a -m 'made later' v1.0\n",
        {},
    )
    report = _audit(docker_client, tag, spec)
    assert report.kinds == {"remote", "tag"}
    assert any(f.detail.startswith("annotated tag object") for f in report.findings)


def test_tags_older_than_the_base_are_history_not_a_leak(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # What the snapshot keeps for `git describe` (setuptools_scm): tags on the base or an
    # ancestor, made no later than the base commit. Beside them, a tag on the base dated a
    # second after it is a finding.
    spec = specs["samples__textkit-1"]
    script = (
        "WHEN=$(git log -1 --format=%ct HEAD); "
        'GIT_COMMITTER_DATE="$WHEN +0000" git tag -a -m past v0.9 HEAD~1 && '
        "git tag v0.9.1 HEAD~1 && "
        'GIT_COMMITTER_DATE="$((WHEN + 1)) +0000" git tag -a -m later v1.0-later HEAD'
    )
    tag = variants.build("past-tags", f"FROM {_agent_tag(spec)}\nRUN {script}\n", {})
    report = _audit(docker_client, tag, spec)
    assert report.kinds == {"tag"}, report.to_json()
    # Exactly v1.0-later: its ref and its tag object; v0.9 (annotated) and v0.9.1 pass.
    paths = sorted(f.path for f in report.findings)
    assert paths == ["/testbed/.git/objects", "/testbed/.git/refs/tags/v1.0-later"], paths
    assert len({f.object_id for f in report.findings}) == 1


def test_small_fix_caught_as_the_fixed_file(
    variants: Variants, specs: dict[str, TaskSpec], docker_client: Any
) -> None:
    # intset's gold hunk is too small to be line evidence once base lines are discounted; the
    # fixed file itself (the patch applied to the base tree) is still found by its hash.
    spec = specs["samples__intset-2"]
    assert spec.gold_patch
    fixed = parse_patch(spec.gold_patch)[0].path
    script = f"git apply /tmp/gold.patch && git hash-object -w {fixed} && git checkout -- ."
    tag = variants.build(
        "intset-blob",
        _STAGE.format(base=_agent_tag(spec), script=script),
        {"gold.patch": spec.gold_patch.encode()},
    )
    report = _audit(docker_client, tag, spec)
    assert report.kinds == {"gold_patch"}
    assert "after the patch" in report.findings[0].detail and report.findings[0].object_id


def test_a_later_commit_in_the_shared_history_layer(
    variants: Variants,
    specs: dict[str, TaskSpec],
    docker_client: Any,
    built: tuple[Path, dict[str, Any]],
    tmp_path: Path,
) -> None:
    """The agent Dockerfile as rendered, its history layer (`ADD history.tar`, the layer rows
    after one tag share) holding a commit after the base: the fix, committed. The row layer
    above it is the real one and the history layer's objects are not reachable from any ref,
    yet the audit reads every layer's object store and names that layer.
    """
    import subprocess
    import tarfile

    from packager import repos
    from packager.repos.stored import write_snapshot

    spec = specs["samples__textkit-1"]
    assert spec.gold_patch
    out, _ = built
    context = out / "samples" / "tasks" / spec.provenance.slug / "environment"
    assert not (context / "repo.tar").exists()  # the build took it out of the output folder
    files = {
        p.relative_to(context).as_posix(): p.read_bytes() for p in context.rglob("*") if p.is_file()
    }
    assert "ADD history.tar" in files["Dockerfile"].decode()
    sel = Selection(dataset=open_dataset(None, "test"))
    git_dir = repos.git_dir_for(repos.source_for(spec.repo.name, sel.merged_repo_sources))
    write_snapshot(
        tmp_path / "repo.tar",
        git_dir=git_dir,
        base_commit=spec.repo.base_commit,
        files=spec.repo.files,
        cache_dir=tmp_path / "cache",
        history_path=tmp_path / "history.tar",
    )
    files["repo.tar"] = (tmp_path / "repo.tar").read_bytes()
    work, layer = tmp_path / "work", tmp_path / "layer"
    subprocess.run(["git", "clone", "-q", str(git_dir), str(work)], check=True)
    git = ["git", "-C", str(work), "-c", "user.name=x", "-c", "user.email=x@example.invalid"]
    subprocess.run([*git, "checkout", "-q", spec.repo.base_commit], check=True)
    subprocess.run([*git, "apply"], input=spec.gold_patch.encode(), check=True)
    subprocess.run([*git, "commit", "-qam", "the fix"], check=True)
    fix = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    (layer / ".git" / "objects" / "pack").mkdir(parents=True)
    subprocess.run(
        [*git, "pack-objects", "-q", "--revs", str(layer / ".git" / "objects" / "pack" / "pack")],
        input=f"{fix.strip()}\n".encode(),
        check=True,
    )
    poisoned = tmp_path / "poisoned.tar"
    with tarfile.open(poisoned, "w") as tar:
        tar.add(layer / ".git", arcname=".git")
    files["history.tar"] = poisoned.read_bytes()
    tag = variants.build("history-layer", files.pop("Dockerfile").decode(), files)
    report = _audit(docker_client, tag, spec)
    assert {"commit", "gold_patch"} <= report.kinds, report.to_json()
    clean = docker_client.api.inspect_image(_agent_tag(spec))["RootFS"]["Layers"]
    mine = docker_client.api.inspect_image(tag)["RootFS"]["Layers"]
    history_layer = next(m for c, m in zip(clean, mine, strict=False) if c != m)
    commits = [f for f in report.findings if f.kind == "commit"]
    assert commits and all(f.layer == history_layer for f in commits), report.to_json()
    assert any(f.object_id == fix.strip() for f in commits)
