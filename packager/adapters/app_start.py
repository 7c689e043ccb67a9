"""How a web app (a SWEeper row) is started, read from its repository's files. Pure.

SWEeper rows name a repository and a commit, never a start command, a port or an image. This
module decides the start command from the repository's files (`detect_start`), unless a recipe
gives it (`packager.models.app.start_from_recipe`); `packager.checks.app` then proves, in a
container of the task's image, that the app started that way answers HTTP.

Detection, first match wins (deterministic; only root-level files are considered):

1. `package.json` `scripts.start`            -> `npm start`
2. a Compose file (`compose.yaml`, `compose.yml`, `docker-compose.yaml`, `docker-compose.yml`,
   first present that parses): the first service, in file order, with both a `command` and a
   usable `ports` entry -> that service's `entrypoint` + `command`, on the container port.
   Docker-in-Docker is not available, so only the command is used (not the image, build,
   environment, working_dir or the other services). Nothing is guessed from a Compose file
   without such a service: it contributes nothing and detection goes on with rule 3.
3. `manage.py` mentioning django               -> `python3 manage.py runserver 0.0.0.0:$PORT
   --noreload`, port 8000
4. `app.py`, then `wsgi.py`, importing flask -> `python3 -m flask --app <module> run --host
   0.0.0.0 --port $PORT`, port 5000
5. `package.json` `scripts.dev`, then `scripts.serve` -> `npm run dev` / `npm run serve`
6. `package.json` `main` (no start, dev or serve script) -> `node <main>`

The app is always started with `PORT` set to the chosen port. For Node apps the port is, in
order: a `PORT=N` assignment or a `-p N`/`--port N` flag in the script (following
`npm run`/`yarn`/`pnpm` references to other scripts), the default of a well-known dev server
that does not read `PORT` (vite 5173, `vite preview` 4173, ng/ember 4200, webpack-dev-server and
vue-cli 8080, parcel 1234, gatsby 8000, astro 4321, http-server 8080), then the first obvious
default in the server source (`process.env.PORT || N`, `process.env.PORT ?? N`, `.listen(N`)
of the script's entry file, `main` or a usual server file (`SERVER_SOURCES`), else
`default_port`. Scripts (dev/serve) come after the Python frameworks because Python web apps
often carry a `package.json` whose `dev` script only watches front-end assets.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from packager.models.app import AppStart

COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
"""Compose file names, in the order Docker Compose itself prefers them."""

SERVER_SOURCES = (
    "server.js",
    "app.js",
    "index.js",
    "server.mjs",
    "index.mjs",
    "server.ts",
    "index.ts",
    "bin/www",
    "src/server.js",
    "src/index.js",
    "src/app.js",
    "src/server.ts",
    "src/index.ts",
    "src/app.ts",
    "src/main.ts",
    "server/index.js",
    "server/index.ts",
    "server/server.js",
)
"""Usual Node server entry files, searched (after the script's entry and `main`) for a port."""

CANDIDATE_PATHS = (
    "package.json",
    *COMPOSE_FILES,
    "manage.py",
    "app.py",
    "wsgi.py",
    *SERVER_SOURCES,
)
"""Files `detect_start` reads; `paths_to_read` adds the ones a package.json names."""

DJANGO_PORT = 8000
FLASK_PORT = 5000

_JS_RUNNERS = frozenset(
    {"node", "nodemon", "ts-node", "ts-node-dev", "tsx", "babel-node", "node-dev", "supervisor"}
)
_NODE_VALUE_FLAGS = frozenset(
    {"-r", "--require", "--loader", "--experimental-loader", "--import", "--env-file"}
)
_VALUE_FLAGS = {
    "node": _NODE_VALUE_FLAGS,
    "nodemon": _NODE_VALUE_FLAGS
    | {"-w", "--watch", "-i", "--ignore", "-e", "--ext", "-x", "--exec", "--config", "--delay"},
    "ts-node": _NODE_VALUE_FLAGS | {"-P", "--project", "-O", "--compiler-options"},
    "ts-node-dev": _NODE_VALUE_FLAGS | {"-P", "--project", "--watch", "--ignore-watch"},
}
"""Flags of node-like runners that take a value (so the value is not the entry file)."""
_WRAPPERS = frozenset({"cross-env", "npx", "env", "exec", "dotenv", "--", "pnpx", "bunx"})
_SCRIPT_SPLIT = re.compile(r"&&|\|\||;|\n")
_PORT_ASSIGN = re.compile(r"(?:^|[\s;&\"'])PORT=['\"]?(\d{1,5})\b")
_PORT_FLAG = re.compile(r"(?:^|\s)(?:-p|--port)(?:\s+|=)['\"]?(\d{1,5})\b")
_SOURCE_PORT = (
    re.compile(r"process\.env\.PORT\s*\)?\s*(?:\|\||\?\?)\s*['\"`]?(\d{2,5})\b"),
    re.compile(r"\.listen\(\s*['\"]?(\d{2,5})\b"),
)
_FLASK_IMPORT = re.compile(r"^\s*(?:from\s+flask\s+import\b|import\s+flask\b)", re.MULTILINE)
_ENV_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}")

_TOOL_PORTS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("vite", "preview"), 4173),
    (("vite", "build"), 0),  # a build, not a server
    (("vite",), 5173),
    (("ng", "serve"), 4200),
    (("ember", "serve"), 4200),
    (("webpack", "serve"), 8080),
    (("webpack-dev-server",), 8080),
    (("vue-cli-service", "serve"), 8080),
    (("parcel", "build"), 0),
    (("parcel",), 1234),
    (("gatsby", "develop"), 8000),
    (("gatsby", "serve"), 9000),
    (("astro",), 4321),
    (("http-server",), 8080),
)
"""Defaults of dev servers that ignore `PORT` (0: the command is not a server)."""


# --------------------------------------------------------------------------- detection (pure)


def _text(files: Mapping[str, bytes], path: str) -> str | None:
    data = files.get(path)
    if data is None:
        data = files.get("./" + path)
    return None if data is None else data.decode("utf-8", errors="replace")


def _valid_port(value: str | int) -> int | None:
    try:
        port = int(value)
    except ValueError:
        return None
    return port if 1 <= port <= 65535 else None


def _package_json(files: Mapping[str, bytes]) -> dict[str, Any] | None:
    text = _text(files, "package.json")
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _scripts(package: Mapping[str, Any]) -> dict[str, str]:
    scripts = package.get("scripts")
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(v, str) and v.strip()}


def _main(package: Mapping[str, Any]) -> str | None:
    main = package.get("main")
    if not isinstance(main, str) or not main.strip():
        return None
    return posixpath.normpath(main.strip())


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _program(segment: str) -> list[str]:
    """The words of one script command from its program on (env assignments, wrappers gone)."""
    words = _words(segment)
    while words and (("=" in words[0] and not words[0].startswith("-")) or words[0] in _WRAPPERS):
        words = words[1:]
    return words


def _script_ref(words: list[str], scripts: Mapping[str, str]) -> str | None:
    """The script an `npm run X` / `npm start` / `yarn X` / `pnpm X` command refers to."""
    if not words or words[0] not in {"npm", "yarn", "pnpm", "bun"}:
        return None
    rest = [w for w in words[1:] if not w.startswith("-")]
    if rest and rest[0] in {"run", "run-script"}:
        rest = rest[1:]
    return rest[0] if rest and rest[0] in scripts else None


def _entry_file(words: list[str]) -> str | None:
    """The file a `node`-like runner is given."""
    if not words or words[0] not in _JS_RUNNERS:
        return None
    takes_value = _VALUE_FLAGS.get(words[0], _VALUE_FLAGS["node"])
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in takes_value:
            skip = True
        elif not word.startswith("-") and not (words[0] == "tsx" and word == "watch"):
            return posixpath.normpath(word)
    return None


def _script_hints(
    script: str, scripts: Mapping[str, str], depth: int = 0
) -> tuple[int | None, list[str]]:
    """(port, entry files) a script shows: explicit port first, then a dev server's default."""
    port: int | None = None
    entries: list[str] = []
    for pattern in (_PORT_ASSIGN, _PORT_FLAG):
        match = pattern.search(script)
        if match and _valid_port(match.group(1)):
            return _valid_port(match.group(1)), entries
    segments = [s for s in _SCRIPT_SPLIT.split(script) if s.strip()]
    # The server is usually the last command (`npm run build && node dist/server.js`).
    for segment in reversed(segments):
        words = _program(segment)
        ref = _script_ref(words, scripts)
        if ref is not None and depth < 3:
            port, more = _script_hints(scripts[ref], scripts, depth + 1)
            entries.extend(more)
            if port is not None or more:
                break
            continue
        entry = _entry_file(words)
        if entry is not None:
            entries.append(entry)
            break
        known = _tool_port(words)
        if known is not None:
            port = known or None
            break
    return port, entries


def _tool_port(words: list[str]) -> int | None:
    for prefix, port in _TOOL_PORTS:
        if tuple(words[: len(prefix)]) == prefix:
            return port
    return None


def _variants(path: str) -> list[str]:
    """The files `node path` may load (Node adds .js or /index.js to a bare module path)."""
    if posixpath.splitext(path)[1] in {".js", ".mjs", ".cjs", ".ts", ".mts", ".cts"}:
        return [path]
    return [path, f"{path}.js", f"{path}.ts", f"{path}/index.js"]


def _source_port(files: Mapping[str, bytes], paths: Iterable[str]) -> int | None:
    seen: set[str] = set()
    for path in paths:
        for candidate in _variants(path):
            if candidate in seen:
                continue
            seen.add(candidate)
            text = _text(files, candidate)
            if text is None:
                continue
            for pattern in _SOURCE_PORT:
                match = pattern.search(text)
                if match and (port := _valid_port(match.group(1))):
                    return port
            break
    return None


def _node_start(
    files: Mapping[str, bytes], package: Mapping[str, Any], script: str | None, default_port: int
) -> int:
    scripts = _scripts(package)
    port, entries = _script_hints(script, scripts) if script else (None, [])
    if port is not None:
        return port
    main = _main(package)
    sources = [*entries, *([main] if main else []), *SERVER_SOURCES]
    return _source_port(files, sources) or default_port


def _compose_port(entry: Any) -> int | None:
    if isinstance(entry, bool):
        return None
    if isinstance(entry, int):
        return _valid_port(entry)
    if isinstance(entry, dict):
        target = entry.get("target")
        protocol = entry.get("protocol", "tcp")
        if protocol != "tcp" or isinstance(target, bool) or not isinstance(target, int | str):
            return None
        return _valid_port(target)
    if not isinstance(entry, str):
        return None
    text = _ENV_DEFAULT.sub(r"\1", entry.strip())
    text, _, protocol = text.partition("/")
    if protocol not in {"", "tcp"}:
        return None
    container = text.rsplit(":", 1)[-1]
    return _valid_port(container) if container.isdigit() else None


def _compose_words(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip().replace("$$", "$")
    if isinstance(value, list) and value and all(isinstance(v, str | int) for v in value):
        return shlex.join(str(v).replace("$$", "$") for v in value)
    return None


def _compose_start(files: Mapping[str, bytes]) -> AppStart | None:
    import yaml

    for name in COMPOSE_FILES:
        text = _text(files, name)
        if text is None:
            continue
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        services = data.get("services") if isinstance(data, dict) else None
        if not isinstance(services, dict):
            continue
        for service, spec in services.items():
            if not isinstance(spec, dict):
                continue
            command = _compose_words(spec.get("command"))
            ports = spec.get("ports")
            if command is None or not isinstance(ports, list):
                continue
            port = next((p for p in map(_compose_port, ports) if p is not None), None)
            if port is None:
                continue
            entrypoint = _compose_words(spec.get("entrypoint"))
            full = f"{entrypoint} {command}" if entrypoint else command
            return AppStart(full, port, f"{name} (service {service})")
        return None  # the Compose file Docker would use has no usable service
    return None


def _django_start(files: Mapping[str, bytes]) -> AppStart | None:
    text = _text(files, "manage.py")
    if text is None or "django" not in text.lower():
        return None
    return AppStart(
        "python3 manage.py runserver 0.0.0.0:$PORT --noreload", DJANGO_PORT, "manage.py (Django)"
    )


def _flask_start(files: Mapping[str, bytes]) -> AppStart | None:
    for name in ("app.py", "wsgi.py"):
        text = _text(files, name)
        if text is not None and _FLASK_IMPORT.search(text):
            module = name.removesuffix(".py")
            return AppStart(
                f"python3 -m flask --app {module} run --host 0.0.0.0 --port $PORT",
                FLASK_PORT,
                f"{name} (Flask)",
            )
    return None


def detect_start(files: Mapping[str, bytes], default_port: int = 3000) -> AppStart | None:
    """How to start the app in `files` (repository path -> bytes at base_commit), or None.

    `files` may be the whole tree or just the files in `paths_to_read`. See the module
    docstring for the order of the rules. Pure and deterministic.
    """
    if _valid_port(default_port) is None:
        raise ValueError(f"default_port must be 1..65535, got {default_port!r}")
    package = _package_json(files)
    scripts = _scripts(package) if package is not None else {}
    if package is not None and "start" in scripts:
        port = _node_start(files, package, scripts["start"], default_port)
        return AppStart("npm start", port, "package.json scripts.start")
    for rule in (_compose_start, _django_start, _flask_start):
        found = rule(files)
        if found is not None:
            return found
    if package is None:
        return None
    for name in ("dev", "serve"):
        if name in scripts:
            port = _node_start(files, package, scripts[name], default_port)
            return AppStart(f"npm run {name}", port, f"package.json scripts.{name}")
    main = _main(package)
    if main is not None:
        port = _node_start(files, package, None, default_port)
        return AppStart(f"node {shlex.quote(main)}", port, "package.json main")
    return None


def paths_to_read(package_json: bytes | None) -> list[str]:
    """Paths worth reading for `detect_start`: `CANDIDATE_PATHS` plus the files a package.json
    names (its `main`, the entry files of its scripts), for a caller that reads files one by one.
    """
    paths = list(CANDIDATE_PATHS)
    if package_json is not None:
        package = _package_json({"package.json": package_json})
        if package is not None:
            scripts = _scripts(package)
            extra: list[str] = []
            for name in ("start", "dev", "serve"):
                if name in scripts:
                    extra.extend(_script_hints(scripts[name], scripts)[1])
            main = _main(package)
            if main:
                extra.append(main)
            for path in extra:
                for candidate in _variants(path):
                    if candidate not in paths and not candidate.startswith("../"):
                        paths.append(candidate)
    return paths


# ------------------------------------------------------------------- the check (Docker SDK)
