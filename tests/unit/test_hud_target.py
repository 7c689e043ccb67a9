from __future__ import annotations

import ast
import fnmatch
import tomllib

import pytest

from packager.model import Grading, Provenance, Repo, TaskSpec
from packager.naming import make_hud_env_name
from packager.render import FileTree, OutFile
from packager.targets.hud import make_hud_files

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
        "grading/grade.py": OutFile(b"print('grade')\n", 0o755),
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
    assert text.splitlines()[0] == f"FROM {AGENT_IMAGE}"
    assert "chmod -R go-rwx /hud" in text
    assert "hud==0.6.21 'typer<0.29'" in text
    assert "ARG PIP_CERT" in text
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
