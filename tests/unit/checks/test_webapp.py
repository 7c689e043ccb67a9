"""How a web app is started: detection from repository files (pure) and recipe entries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from packager.adapters.app_start import CANDIDATE_PATHS, detect_start, paths_to_read
from packager.checks.app import _answer as answer
from packager.checks.app import _probe_summary as probe_summary
from packager.checks.app import log_tail
from packager.context import RunContext
from packager.models.app import AppStart, start_from_recipe

DJANGO_MANAGE = b"""#!/usr/bin/env python
import os, sys
if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site.settings")
    from django.core.management import execute_from_command_line
    execute_from_command_line(sys.argv)
"""
FLASK_APP = b"from flask import Flask\n\napp = Flask(__name__)\n"


def pkg(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def found(files: dict[str, bytes], default_port: int = 3000) -> AppStart:
    start = detect_start(files, default_port)
    assert start is not None
    return start


# ------------------------------------------------------------------------------ package.json


def test_start_script_is_npm_start_on_default_port() -> None:
    files = {"package.json": pkg(scripts={"start": "node server.js", "dev": "nodemon"})}
    assert detect_start(files) == AppStart("npm start", 3000, "package.json scripts.start")
    assert found(files, default_port=8123).port == 8123


@pytest.mark.parametrize(
    ("script", "port"),
    [
        ("PORT=4000 node server.js", 4000),
        ("cross-env NODE_ENV=production PORT=4100 node server.js", 4100),
        ("next start -p 3005", 3005),
        ("react-scripts start --port=3300", 3300),
        ("vite preview", 4173),
        ("npm run build && vite preview", 4173),
        ("ng serve", 4200),
        ("webpack serve --mode development", 8080),
    ],
)
def test_start_script_port(script: str, port: int) -> None:
    files = {"package.json": pkg(scripts={"start": script})}
    assert detect_start(files) == AppStart("npm start", port, "package.json scripts.start")


@pytest.mark.parametrize(
    ("script", "path", "source", "port"),
    [
        ("node server.js", "server.js", b"const port = process.env.PORT || 4000;", 4000),
        ("node ./src/server", "src/server.js", b"app.listen(process.env.PORT ?? '8081')", 8081),
        ("node -r dotenv/config api/main.js", "api/main.js", b"server.listen(7001);", 7001),
        (
            "nodemon --watch src src/index.ts",
            "src/index.ts",
            b"Number(process.env.PORT) || 5050",
            5050,
        ),
        ("node ./bin/www", "bin/www", b"normalizePort(process.env.PORT || '3300')", 3300),
        ("npm run build && npm run serve:prod", "dist/app.js", b"process.env.PORT || 9090", 9090),
    ],
)
def test_port_default_in_the_server_source(
    script: str, path: str, source: bytes, port: int
) -> None:
    scripts = {"start": script, "build": "tsc", "serve:prod": "node dist/app.js"}
    files = {"package.json": pkg(scripts=scripts), path: source}
    assert detect_start(files) == AppStart("npm start", port, "package.json scripts.start")


def test_script_references_are_followed_safely() -> None:
    loop = {"package.json": pkg(scripts={"start": "npm start", "dev": "yarn dev"})}
    assert found(loop) == AppStart("npm start", 3000, "package.json scripts.start")
    dangling = {"package.json": pkg(scripts={"dev": "npm start && npm run nothing"})}
    assert found(dangling) == AppStart("npm run dev", 3000, "package.json scripts.dev")
    chain = {"package.json": pkg(scripts={"start": "yarn serve", "serve": "vite preview"})}
    assert found(chain).port == 4173


def test_explicit_port_in_script_beats_the_source_default() -> None:
    files = {
        "package.json": pkg(scripts={"start": "PORT=4000 node server.js"}),
        "server.js": b"const port = process.env.PORT || 5000;",
    }
    assert found(files).port == 4000


def test_usual_server_file_gives_the_port_when_the_script_names_none() -> None:
    files = {
        "package.json": pkg(scripts={"start": "concurrently server client"}),
        "index.js": b"const PORT = process.env.PORT || 8888;",
    }
    assert detect_start(files) == AppStart("npm start", 8888, "package.json scripts.start")


def test_dev_then_serve_scripts_are_fallbacks() -> None:
    dev = {"package.json": pkg(scripts={"dev": "vite", "build": "vite build"})}
    assert detect_start(dev) == AppStart("npm run dev", 5173, "package.json scripts.dev")
    serve = {"package.json": pkg(scripts={"serve": "node srv.js", "test": "jest"})}
    assert detect_start(serve) == AppStart("npm run serve", 3000, "package.json scripts.serve")


def test_main_without_scripts_is_run_with_node() -> None:
    files = {"package.json": pkg(name="x", main="lib/app.js"), "lib/app.js": b"app.listen(7000)"}
    assert detect_start(files) == AppStart("node lib/app.js", 7000, "package.json main")
    weird = {"package.json": pkg(main="my server.js", scripts={"test": "jest"})}
    assert detect_start(weird) == AppStart("node 'my server.js'", 3000, "package.json main")


def test_package_json_without_a_way_to_start_is_nothing() -> None:
    assert detect_start({"package.json": pkg(scripts={"test": "jest", "build": "tsc"})}) is None
    assert detect_start({"package.json": b"{not json"}) is None
    assert detect_start({"package.json": b"[]"}) is None


# ------------------------------------------------------------------------------------ Compose

COMPOSE = b"""
services:
  db:
    image: postgres:16
    ports: ["5432:5432"]
  worker:
    build: .
    command: npm run worker
  web:
    build: .
    entrypoint: ["./docker-entrypoint.sh"]
    command: ["node", "server.js", "--msg", "a b"]
    ports:
      - "127.0.0.1:${WEB_PORT:-8080}:3000/tcp"
  other:
    command: python3 other.py
    ports: ["9000:9000"]
"""


def test_compose_first_service_with_command_and_ports() -> None:
    start = detect_start({"docker-compose.yml": COMPOSE})
    assert start == AppStart(
        "./docker-entrypoint.sh node server.js --msg 'a b'",
        3000,
        "docker-compose.yml (service web)",
    )


@pytest.mark.parametrize(
    ("ports", "port"),
    [
        ("[8000]", 8000),
        ('["5000"]', 5000),
        ("[{target: 80, published: 8080}]", 80),
        ('["53:53/udp", "8081:81"]', 81),
        ('["[::1]:8080:8082"]', 8082),
        ('["${P:-4000}:${P:-4000}"]', 4000),
    ],
)
def test_compose_port_forms(ports: str, port: int) -> None:
    text = f"services:\n  app:\n    command: python3 serve.py\n    ports: {ports}\n"
    start = detect_start({"compose.yaml": text.encode()})
    assert start == AppStart("python3 serve.py", port, "compose.yaml (service app)")


def test_compose_dollar_escape_becomes_a_shell_dollar() -> None:
    text = b"services:\n  app:\n    command: sh -c 'node s.js --port $$PORT'\n    ports: [80]\n"
    assert found({"compose.yml": text}).command == "sh -c 'node s.js --port $PORT'"


@pytest.mark.parametrize(
    "text",
    [
        b"services:\n  web:\n    build: .\n    ports: ['80:80']\n",  # no command
        b"services:\n  web:\n    command: node s.js\n",  # no ports
        b"services:\n  web:\n    command: node s.js\n"
        b"    ports: ['${P}:${P}', '3000-3005:3000-3005', '53:53/udp']\n",
        b"services: [oops",  # not YAML
        b"version: '3'\n",
    ],
)
def test_unusable_compose_guesses_nothing(text: bytes) -> None:
    assert detect_start({"docker-compose.yaml": text}) is None


def test_compose_yaml_is_preferred_to_docker_compose_yml() -> None:
    files = {
        "docker-compose.yml": b"services:\n  a:\n    command: old\n    ports: [1]\n",
        "compose.yaml": b"services:\n  b:\n    command: new\n    ports: [2]\n",
    }
    assert detect_start(files) == AppStart("new", 2, "compose.yaml (service b)")


# ----------------------------------------------------------------------------- Python apps


def test_django_manage_py() -> None:
    assert detect_start({"manage.py": DJANGO_MANAGE}) == AppStart(
        "python3 manage.py runserver 0.0.0.0:$PORT --noreload", 8000, "manage.py (Django)"
    )


def test_manage_py_that_is_not_django_is_ignored() -> None:
    assert detect_start({"manage.py": b"from flask_script import Manager\n"}) is None


@pytest.mark.parametrize(
    ("name", "module", "source"),
    [
        ("app.py", "app", FLASK_APP),
        ("wsgi.py", "wsgi", b"import flask\napplication = flask.Flask('x')\n"),
    ],
)
def test_flask_app(name: str, module: str, source: bytes) -> None:
    assert detect_start({name: source}) == AppStart(
        f"python3 -m flask --app {module} run --host 0.0.0.0 --port $PORT",
        5000,
        f"{name} (Flask)",
    )


def test_app_py_without_flask_is_ignored() -> None:
    assert detect_start({"app.py": b"import fastapi  # flask-like\n"}) is None


def test_app_py_is_preferred_to_wsgi_py() -> None:
    files = {"app.py": FLASK_APP, "wsgi.py": FLASK_APP}
    assert found(files).how == "app.py (Flask)"


# ----------------------------------------------------------------------------------- order


def test_start_script_beats_compose_and_python() -> None:
    files = {
        "package.json": pkg(scripts={"start": "node server.js"}),
        "docker-compose.yml": COMPOSE,
        "manage.py": DJANGO_MANAGE,
    }
    assert found(files).how == "package.json scripts.start"


def test_compose_beats_python_frameworks() -> None:
    files = {"docker-compose.yml": COMPOSE, "manage.py": DJANGO_MANAGE, "app.py": FLASK_APP}
    assert found(files).how == "docker-compose.yml (service web)"


def test_unusable_compose_lets_the_framework_rules_decide() -> None:
    files = {"docker-compose.yml": b"services:\n  db:\n    image: pg\n", "manage.py": DJANGO_MANAGE}
    assert found(files).how == "manage.py (Django)"


def test_python_framework_beats_asset_dev_script_and_main() -> None:
    files = {
        "package.json": pkg(main="index.js", scripts={"dev": "webpack --watch"}),
        "app.py": FLASK_APP,
    }
    assert found(files).how == "app.py (Flask)"
    files["manage.py"] = DJANGO_MANAGE
    assert found(files).how == "manage.py (Django)"


def test_nothing_recognisable_is_none() -> None:
    assert detect_start({}) is None
    assert detect_start({"README.md": b"# app", "main.go": b"package main"}) is None


def test_detection_is_deterministic_and_ignores_mapping_order() -> None:
    files = {
        "package.json": pkg(scripts={"dev": "node s.js"}, main="m.js"),
        "compose.yml": COMPOSE,
        "app.py": FLASK_APP,
        "manage.py": DJANGO_MANAGE,
        "s.js": b"process.env.PORT || 4444",
    }
    reversed_files = dict(reversed(list(files.items())))
    assert detect_start(files) == detect_start(reversed_files) == detect_start(dict(files))


def test_bad_default_port_is_refused() -> None:
    with pytest.raises(ValueError, match="default_port"):
        detect_start({}, default_port=0)


def test_paths_to_read_adds_the_files_package_json_names() -> None:
    paths = paths_to_read(pkg(scripts={"start": "node server/main"}, main="dist/index.js"))
    assert paths[: len(CANDIDATE_PATHS)] == list(CANDIDATE_PATHS)
    assert "server/main.js" in paths and "server/main/index.js" in paths
    assert "dist/index.js" in paths and "dist/index.js.js" not in paths
    assert paths_to_read(None) == list(CANDIDATE_PATHS)


# ---------------------------------------------------------------------------------- recipe


def test_recipe_entry() -> None:
    entry = {"start_command": "  yarn start:prod ", "port": 8080, "python": "3.11"}
    assert start_from_recipe(entry) == AppStart("yarn start:prod", 8080, "recipe")


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"port": 80}, "start_command"),
        ({"start_command": "", "port": 80}, "start_command"),
        ({"start_command": "   ", "port": 80}, "start_command"),
        ({"start_command": ["npm", "start"], "port": 80}, "start_command"),
        ({"start_command": "npm start"}, "port"),
        ({"start_command": "npm start", "port": 0}, "port"),
        ({"start_command": "npm start", "port": 65536}, "port"),
        ({"start_command": "npm start", "port": "8080"}, "port"),
        ({"start_command": "npm start", "port": 80.0}, "port"),
        ({"start_command": "npm start", "port": True}, "port"),
    ],
)
def test_recipe_validation_names_the_key(entry: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=f"recipe key '{key}'"):
        start_from_recipe(entry)


# ------------------------------------------------------------------------- probe helpers


def test_probe_answer_must_be_an_http_status_line() -> None:
    assert answer("answer from 127.0.0.1: HTTP/1.1 302 Found\n") == "HTTP/1.1 302 Found"
    assert answer("answer from 127.0.0.1: SSH-2.0-x\n") is None
    assert answer("answer from 127.0.0.1: \n") is None
    assert answer("bash: /dev/tcp/127.0.0.1/80: Connection refused\n") is None


def test_probe_summary_folds_bash_connect_errors() -> None:
    output = (
        "environment: connect: Connection refused\n"
        "environment: line 2: /dev/tcp/127.0.0.1/3000: Connection refused\n"
    )
    assert probe_summary(output) == "/dev/tcp/127.0.0.1/3000: Connection refused"
    assert probe_summary("") == "(no output)"


def test_log_tail_keeps_the_last_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 31)) + "\n\n"
    tail = log_tail(text)
    assert tail.startswith("line 11 | ") and tail.endswith("line 30")
    assert log_tail("") == "(the app log is empty)"


# --------------------------------------------------------------------------- the check, faked


class FakeExec:
    def __init__(self, output: bytes) -> None:
        self.output = output


class FakeBox:
    """An app container whose probes answer in turn from `answers` (the last one repeats)."""

    def __init__(self, answers: list[bytes], exit_after: int | None = None) -> None:
        self.answers = answers
        self.exit_after = exit_after
        self.probes = 0
        self.started = self.removed = False
        self.attrs: dict[str, Any] = {"State": {"Status": "running"}}

    def start(self) -> None:
        self.started = True

    def reload(self) -> None:
        if self.exit_after is not None and self.probes >= self.exit_after:
            self.attrs = {"State": {"Status": "exited", "ExitCode": 3, "OOMKilled": False}}

    def exec_run(self, command: list[str]) -> FakeExec:
        assert command[:2] == ["bash", "-c"] and "/dev/tcp/$1/8000" in command[2]
        answer = self.answers[min(self.probes, len(self.answers) - 1)]
        self.probes += 1
        return FakeExec(answer)

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        import io
        import tarfile

        data = b"booting\nlistening on 8000\n"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(path.rsplit("/", 1)[-1])
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return [buf.getvalue()], {}

    def remove(self, force: bool = False) -> None:
        self.removed = force


class FakeContainers:
    def __init__(self, box: FakeBox | None) -> None:
        self.box = box
        self.created: dict[str, Any] = {}

    def create(self, image: str, **kwargs: Any) -> FakeBox:
        import docker.errors

        if self.box is None:
            raise docker.errors.ImageNotFound(f"no such image: {image}")
        self.created = {"image": image, **kwargs}
        return self.box


class FakeClient:
    def __init__(self, box: FakeBox | None) -> None:
        self.containers = FakeContainers(box)


REFUSED = b"/dev/tcp/127.0.0.1/8000: Connection refused\nbash: connect: Connection refused\n"
HTTP_OK = b"answer from 127.0.0.1: HTTP/1.0 200 OK\n"
START = AppStart("python3 manage.py runserver 0.0.0.0:$PORT --noreload", 8000, "manage.py")


def _check(box: FakeBox | None, tmp_path: Any, timeout_sec: float = 60.0) -> tuple[Any, Any]:
    from packager.checks.app import check_app_answers

    client = FakeClient(box)
    log_path = tmp_path / "logs" / "app.txt"
    seconds = check_app_answers(
        client,  # type: ignore[arg-type]
        "img:1",
        START,
        workdir="/app",
        log_path=log_path,
        timeout_sec=timeout_sec,
        task="ds/t-1",
        run=RunContext(),
    )
    return seconds, client


@pytest.fixture
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("packager.checks.app.POLL_SEC", 0.0)


@pytest.mark.usefixtures("no_wait")
def test_check_app_answers_polls_until_an_http_status_line(tmp_path: Any) -> None:
    box = FakeBox([REFUSED, b"answer from 127.0.0.1: \n", HTTP_OK])
    seconds, client = _check(box, tmp_path)
    assert seconds >= 0 and box.probes == 3 and box.started and box.removed
    created = client.containers.created
    assert (created["image"], created["network_mode"]) == ("img:1", "none")
    assert created["environment"] == {"PORT": "8000"}
    assert created["labels"]["packager.task"] == "ds/t-1"
    log = (tmp_path / "logs" / "app.txt").read_text()
    assert "command: python3 manage.py runserver" in log and "from manage.py" in log
    assert "/dev/tcp/127.0.0.1/8000: Connection refused" in log
    assert "answered after" in log and "HTTP/1.0 200 OK" in log
    assert "listening on 8000" in log and "FAILED" not in log


@pytest.mark.usefixtures("no_wait")
def test_check_app_answers_reports_an_app_that_exits(tmp_path: Any) -> None:
    from packager.errors import RunError

    box = FakeBox([REFUSED], exit_after=2)
    with pytest.raises(RunError, match="exited with code 3 after") as caught:
        _check(box, tmp_path)
    assert "last log lines: booting | listening on 8000" in caught.value.reason
    assert box.removed and box.probes == 2
    log = (tmp_path / "logs" / "app.txt").read_text()
    assert "the app exited with code 3" in log and "FAILED: app did not answer HTTP" in log


@pytest.mark.usefixtures("no_wait")
def test_check_app_answers_gives_up_at_its_deadline(tmp_path: Any) -> None:
    from packager.errors import RunError

    with pytest.raises(RunError, match="within 0 s \\(nothing listens there\\)"):
        _check(FakeBox([REFUSED]), tmp_path, timeout_sec=0.0)
    box = FakeBox([b"answer from 127.0.0.1: SSH-2.0\n"])
    with pytest.raises(RunError, match="accepts connections but got no HTTP status line"):
        _check(box, tmp_path, timeout_sec=0.0)
    assert box.removed


def test_check_app_answers_without_the_image(tmp_path: Any) -> None:
    from packager.errors import RunError

    with pytest.raises(RunError, match="cannot start the app: image img:1 not found"):
        _check(None, tmp_path)
    assert "FAILED: cannot start the app" in (tmp_path / "logs" / "app.txt").read_text()
