from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import pytest

from packager.models.spec import Grading, Provenance, Repo, TaskSpec
from packager.render import FileTree, OutFile
from packager.render.hud import BUILD_CA_NAME, BUILD_WHEELS_NAME, make_hud_files
from packager.render.naming import make_hud_env_name

AGENT_IMAGE = "packager/samples.textkit-1:agent-0123456789ab"
DATASET = "samples"


def _spec(workdir: str = "/testbed") -> TaskSpec:
    return TaskSpec(
        provenance=Provenance(
            dataset="samples",
            split="test",
            schema_name="swebench",
            instance_id="samples__textkit-1",
            slug="samples__textkit-1",
            language="python",
        ),
        instruction='Fix `wrap()` so that it keeps "quoted" words together.\n',
        repo=Repo(name="samples/textkit", base_commit="a" * 40, workdir=workdir),
        gold_patch="diff --git a/x b/x\n",
        grading=Grading(
            rule="all_pass",
            test_command="python3 -m pytest -rA tests",
            fail_to_pass=("tests/test_wrap.py::test_quotes",),
            timeout_sec=300,
        ),
        agent_timeout_sec=1800,
    )


def _payload(**extra: OutFile) -> FileTree:
    payload: FileTree = {
        "plan.json": OutFile(b'{"version": 1}\n'),
        "grading.pyz": OutFile(b"PK\x05\x06" + bytes(18)),  # an empty zip archive
        "payload/test.patch": OutFile(b"diff --git a/t b/t\n"),
        "payload/hidden/tests/test_hidden.py": OutFile(b"def test_x():\n    pass\n"),
    }
    payload.update(extra)
    return payload


def _files() -> FileTree:
    return make_hud_files(
        _spec(), dataset=DATASET, agent_image=AGENT_IMAGE, grader_payload=_payload()
    )


def _environment_names(tree: FileTree) -> list[str]:
    """What `hud deploy` scans for: literal Environment("...") / Environment(name="...")."""
    names = []
    for path, entry in tree.items():
        if not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(entry.data.decode())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Environment":
                arg = node.args[0] if node.args else node.keywords[0].value
                assert isinstance(arg, ast.Constant)
                names.append(arg.value)
    return names


def test_layout_and_python_sources_compile() -> None:
    files = _files()
    assert {
        ".dockerignore",
        "Dockerfile.hud",
        "env.py",
        "instruction.md",
        "pyproject.toml",
        "tasks.py",
    } <= set(files)
    assert list(files) == sorted(files)
    compile(files["env.py"].data, "env.py", "exec")
    compile(files["tasks.py"].data, "tasks.py", "exec")


def test_exactly_one_environment_named_by_naming() -> None:
    files = _files()
    expected = make_hud_env_name(DATASET, "samples__textkit-1")
    assert _environment_names(files) == [expected]
    assert f'Environment(name="{expected}")' in files["env.py"].data.decode()
    assert files["env.py"].data.decode().count("Environment(") == 1


def test_env_py_module_level_imports_are_stdlib_or_hud() -> None:
    tree = ast.parse(_files()["env.py"].data.decode())
    allowed = {
        "__future__",
        "asyncio",
        "contextlib",
        "json",
        "math",
        "os",
        "shutil",
        "signal",
        "subprocess",
        "warnings",
        "collections",
        "pathlib",
        "typing",
        "hud",
    }
    for node in tree.body:
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        assert roots <= allowed


def test_env_py_grades_with_the_runtime_and_a_sandboxed_workspace() -> None:
    text = _files()["env.py"].data.decode()
    assert '@env.template(\n    id="solve"' in text
    assert 'REPO_DIR = Path("/testbed")' in text
    assert f'BASE_COMMIT = "{"a" * 40}"' in text
    assert "shell_uid=AGENT_UID" in text and "AGENT_UID = 1000" in text
    assert "network=False" in text and "require_isolation=" in text
    assert '"diff", "--cached", "--binary", BASE_COMMIT' in text
    assert '"--patch"' in text and '"--out"' in text
    assert "terminate_sessions()" in text
    assert 'status == "infra_error"' in text


def test_tasks_py_row() -> None:
    text = _files()["tasks.py"].data.decode()
    assert "from env import env, solve" in text
    assert '_task.slug = "samples__textkit-1"' in text
    tree = ast.parse(text)
    values = {
        node.targets[0].attr: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute)
    }
    assert values["columns"] == {
        "dataset": DATASET,
        "schema": "swebench",
        "language": "python",
        "instance_id": "samples__textkit-1",
    }
    assert values["agent_config"] == {"timeout_seconds": 1800}
    assert "tasks = [_task]" in text


def test_payload_embedded_under_grader() -> None:
    files = _files()
    for path, entry in _payload().items():
        assert files[f"grader/{path}"] == entry


def test_no_git_or_env_paths() -> None:
    patterns = (".git", ".env", ".env.*", "*.env")
    for path in _files():
        for part in path.split("/"):
            assert not any(fnmatch.fnmatchcase(part, p) for p in patterns), path


def test_deterministic() -> None:
    assert _files() == _files()


def test_dockerfile() -> None:
    text = _files()["Dockerfile.hud"].data.decode()
    assert text.splitlines()[0] == f"FROM {AGENT_IMAGE} AS hud-base"
    assert "chmod 700 /hud;" in text and 'chmod -R go-rwx "$path"' in text
    assert "chmod -R go-rwx /hud/venv" in text
    assert "hud==0.6.21 'typer<0.29'" in text
    assert "COPY grader/ /hud/grader/" in text
    assert "/hud/baseline.tar" in text
    assert "ENV REPO_DIR=/testbed" in text
    assert "EXPOSE 8765" in text
    assert text.rstrip().endswith(
        'CMD ["/hud/venv/bin/hud", "serve", "/hud/env.py", "--host", "0.0.0.0", "--port", "8765"]'
    )


def test_pyproject() -> None:
    data = tomllib.loads(_files()["pyproject.toml"].data.decode())
    assert data["project"] == {
        "name": make_hud_env_name(DATASET, "samples__textkit-1"),
        "version": "0.1.0",
        "requires-python": ">=3.11,<3.13",
        "dependencies": ["hud==0.6.21", "typer<0.29"],
    }


def test_dockerignore_allows_what_the_dockerfile_copies() -> None:
    lines = _files()[".dockerignore"].data.decode().splitlines()
    assert "*" in lines
    for name in ("env.py", "tasks.py", "instruction.md", "grader", "Dockerfile.hud"):
        assert f"!{name}" in lines
    assert f"!{BUILD_CA_NAME}" in lines  # build-time only; never rendered
    assert BUILD_CA_NAME not in _files()


def test_instruction_file() -> None:
    assert _files()["instruction.md"].data == _spec().instruction.encode()


@pytest.mark.parametrize(
    "path",
    [
        "payload/hidden/.git/HEAD",
        "payload/hidden/.env",
        "payload/grader/config/prod.env",
        "payload/hidden/.env.example",
        "../escape.py",
        "/abs/path",
        "payload//double",
    ],
)
def test_bad_payload_path_raises(path: str) -> None:
    with pytest.raises(ValueError, match="payload path|drops"):
        make_hud_files(
            _spec(),
            dataset=DATASET,
            agent_image=AGENT_IMAGE,
            grader_payload=_payload(**{path: OutFile(b"x")}),
        )


def test_bad_payload_path_error_names_the_path() -> None:
    with pytest.raises(ValueError, match=r"payload/hidden/\.git/HEAD"):
        make_hud_files(
            _spec(),
            dataset=DATASET,
            agent_image=AGENT_IMAGE,
            grader_payload=_payload(**{"payload/hidden/.git/HEAD": OutFile(b"x")}),
        )


def test_payload_declaring_another_environment_raises() -> None:
    payload = _payload(**{"payload/hidden/t.py": OutFile(b'Environment(name="other")\n')})
    with pytest.raises(ValueError, match="payload/hidden/t.py"):
        make_hud_files(_spec(), dataset=DATASET, agent_image=AGENT_IMAGE, grader_payload=payload)


@pytest.mark.parametrize("image", ["", "img\nRUN evil", "img with space"])
def test_bad_agent_image_raises(image: str) -> None:
    with pytest.raises(ValueError, match="agent image"):
        make_hud_files(_spec(), dataset=DATASET, agent_image=image, grader_payload=_payload())


@pytest.mark.parametrize("workdir", ["/", "/hud/repo", "/a b", "relative", "/a/../b"])
def test_bad_workdir_raises(workdir: str) -> None:
    with pytest.raises(ValueError, match="workdir"):
        make_hud_files(
            _spec(workdir), dataset=DATASET, agent_image=AGENT_IMAGE, grader_payload=_payload()
        )


def test_values_in_python_sources_are_literals() -> None:
    spec = _spec().model_copy(
        update={
            "provenance": _spec().provenance.model_copy(
                update={"instance_id": "x\"'\\\n{{ y }}", "language": "c'\"++"}
            )
        }
    )
    files = make_hud_files(
        spec, dataset=DATASET, agent_image=AGENT_IMAGE, grader_payload=_payload()
    )
    tree = ast.parse(files["tasks.py"].data.decode())
    columns = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Attribute)
        and node.targets[0].attr == "columns"
    )
    assert columns["instance_id"] == "x\"'\\\n{{ y }}"
    assert columns["language"] == "c'\"++"


def test_dockerfile_keeps_build_settings_in_a_throwaway_pip_stage() -> None:
    """The CA bundle and the index URL reach only the `hud-venv` stage; the image copies the
    venv out of it, so neither is in the final image's layers or history.
    """
    text = _files()["Dockerfile.hud"].data.decode()
    stages = text.split("\nFROM ")
    assert [s.split("\n", 1)[0] for s in stages[1:]] == ["hud-base AS hud-venv", "hud-base"]
    base, venv, final = stages
    pip_stage = "FROM " + venv
    assert 'ARG PIP_INDEX_URL=""' in pip_stage
    ca_glob = f"{BUILD_CA_NAME[:-1]}[{BUILD_CA_NAME[-1]}]"
    wheels_glob = f"{BUILD_WHEELS_NAME[:-1]}[{BUILD_WHEELS_NAME[-1]}]"
    assert f"COPY pyproject.toml {ca_glob} {wheels_glob} /tmp/hud-build/" in pip_stage
    assert f"export PIP_CERT=/tmp/hud-build/{BUILD_CA_NAME}" in pip_stage
    # Offline from the wheelhouse when there is one, else (or when it lacks a wheel) the index.
    assert "&& hud_venv --no-index --find-links /tmp/hud-build; then" in pip_stage
    assert pip_stage.index("--no-index") < pip_stage.index("else \\\n        hud_venv;")
    assert "rm -rf /tmp/hud-build" in pip_stage
    assert "chown -R 0:0 /hud/venv" in pip_stage and "RUN chown" not in text
    for other in (base, final):
        assert BUILD_WHEELS_NAME not in other and ".whl" not in other
    for other in (base, final):
        assert "PIP_INDEX_URL" not in other and "PIP_CERT" not in other
        assert "ARG " not in other
    assert "COPY --from=hud-venv /hud/venv /hud/venv" in final
    assert "bubblewrap" in base and "util-linux" in base and "procps" in base


def test_hud_build_host_pip_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from packager.images import hud_build

    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_CERT", raising=False)
    assert hud_build.host_index_url({}) is None
    assert hud_build.host_index_url({"global.extra-index-url": "file:///opt/x"}) is None
    assert hud_build.host_index_url({"global.index-url": "file:///opt/simple"}) is None
    settings = {"global.index-url": "https://a.invalid/simple", ":env:.index-url": ""}
    assert hud_build.host_index_url(settings) == "https://a.invalid/simple"
    settings["install.index-url"] = "https://b.invalid/simple"
    assert hud_build.host_index_url(settings) == "https://b.invalid/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "https://c.invalid/simple")
    assert hud_build.host_index_url(settings) == "https://c.invalid/simple"

    bundle = tmp_path / "ca.pem"
    bundle.write_text("x")
    assert hud_build.host_ca_bundle({"global.cert": str(bundle)}) == bundle
    missing = {"global.cert": str(tmp_path / "missing.pem")}
    default = hud_build.DEFAULT_CA_BUNDLE
    assert hud_build.host_ca_bundle(missing) == (default if default.is_file() else None)


def test_hud_image_tag_is_a_content_hash(tmp_path: Path) -> None:
    from packager.images.hud_build import hud_image_tag

    source = tmp_path / "samples__textkit-1"
    (source / "grader").mkdir(parents=True)
    (source / "env.py").write_text("a")
    (source / "grader" / "plan.json").write_text("{}")
    tag = hud_image_tag(source, DATASET)
    assert tag.startswith("packager/samples.samples__textkit-1:hud-")
    assert hud_image_tag(source, DATASET) == tag
    (source / "grader" / "plan.json").write_text("{ }")
    assert hud_image_tag(source, DATASET) != tag


def test_build_hud_image_refuses_another_base(tmp_path: Path) -> None:
    from packager.errors import BuildError
    from packager.images.hud_build import build_hud_image

    source = tmp_path / "samples__textkit-1"
    for path, entry in _files().items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_bytes(entry.data)
    with pytest.raises(BuildError, match="expected agent image"):
        build_hud_image(object(), source, "other:tag", "t:hud", tmp_path / "log")  # type: ignore[arg-type]
    with pytest.raises(BuildError, match="render the task first"):
        build_hud_image(object(), tmp_path, AGENT_IMAGE, "t:hud", tmp_path / "log")  # type: ignore[arg-type]


def test_hud_wheelhouse_is_none_when_pip_cannot_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed download leaves no wheelhouse (the build then installs from the index)."""
    from packager.images import hud_build

    monkeypatch.setattr(hud_build, "hud_requirements", lambda: ("packager-no-such-package==0",))
    dest = tmp_path / "cache" / "hud-wheels" / "x"
    assert hud_build.download_hud_wheels(tmp_path / "wheels.log", dest) is None
    assert not dest.exists() and list((tmp_path / "cache" / "hud-wheels").iterdir()) == []
    assert "packager-no-such-package==0" in (tmp_path / "wheels.log").read_text()


def test_hud_wheelhouse_marked_complete_is_reused_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packager.images import hud_build

    dest = tmp_path / "wheels"
    dest.mkdir()
    (dest / ".complete").write_text("")

    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip ran for a complete wheelhouse")

    monkeypatch.setattr(hud_build.subprocess, "run", no_pip)
    assert hud_build.download_hud_wheels(tmp_path / "wheels.log", dest) == dest
    monkeypatch.setenv("PACKAGER_CACHE", str(tmp_path / "c"))
    assert hud_build.wheelhouse_dir().parent == tmp_path / "c" / "hud-wheels"
