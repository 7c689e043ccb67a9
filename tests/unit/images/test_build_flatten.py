"""The flatten Dockerfile of a published image (pure), and the tag it gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from packager.images.build import base_images
from packager.images.flatten import (
    FLAT_REPOSITORY,
    LABEL_FLAT_BASE,
    LABEL_FLATTENED_FROM,
    FlatBase,
    flat_tag,
    make_flatten_dockerfile,
)

IMAGE = "sha256:" + "ab" * 32


def _logical_lines(dockerfile: str) -> list[str]:
    """Instructions as the Dockerfile parser sees them (continuations joined)."""
    return dockerfile.replace("\\\n", "").splitlines()


def test_copies_the_file_system_of_a_stage_without_the_workdir_git() -> None:
    text = make_flatten_dockerfile(IMAGE, {}, "/testbed")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        f"FROM {IMAGE} AS published",
        "LABEL packager.tool=packager packager.role=flat-stage",
        "USER root",
        "RUN rm -rf /testbed/.git",
        "FROM scratch",
        "COPY --from=published / /",
    ]
    # Only the published image is a base; the stage and scratch are not.
    assert base_images(text) == [IMAGE]


def test_env_values_are_literal_whatever_they_hold() -> None:
    config = {
        "Env": [
            "PATH=/opt/miniconda3/bin:/usr/bin",
            "SPACES=a b  c",
            'DQ=say "hi"',
            "SQ=it's",
            "DOLLAR=$HOME and ${X}",
            "BACK=C:\\path\\",
            "EMPTY=",
            "EQ=x=y",
            "UNI=ünï",
        ]
    }
    text = make_flatten_dockerfile(IMAGE, config, "/testbed")
    env = [line for line in _logical_lines(text) if line.startswith("ENV ")]
    assert len(env) == 1
    assert env[0] == (
        'ENV PATH="/opt/miniconda3/bin:/usr/bin"     SPACES="a b  c"     DQ="say \\"hi\\""'
        '     SQ="it\'s"     DOLLAR="\\$HOME and \\${X}"     BACK="C:\\\\path\\\\"'
        '     EMPTY=""     EQ="x=y"     UNI="ünï"'
    )


@pytest.mark.parametrize(
    "config",
    [
        {"Env": ["MULTI=line one\nline two"]},
        {"Env": ["NOEQUALS"]},
        {"Env": ["BAD KEY=x"]},
        {"Labels": {"k": "a\nb"}},
        {"Cmd": "not a list"},
        {"Healthcheck": {"Test": ["CMD-SHELL", "true\nfalse"]}},
    ],
)
def test_what_a_dockerfile_cannot_hold_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_flatten_dockerfile(IMAGE, config, "/testbed")


def test_relative_workdir_is_refused() -> None:
    with pytest.raises(ValueError):
        make_flatten_dockerfile(IMAGE, {}, "testbed")


def test_a_workdir_with_spaces_is_quoted_for_the_shell() -> None:
    text = make_flatten_dockerfile(IMAGE, {"WorkingDir": "/work dir"}, "/work dir/")
    assert "RUN rm -rf '/work dir/.git'" in text
    assert 'WORKDIR "/work dir"' in text


def test_absent_or_empty_settings_write_nothing() -> None:
    config = {
        "Env": None,
        "WorkingDir": "",
        "User": "",
        "Entrypoint": None,
        "Cmd": None,
        "Shell": None,
        "Labels": None,
        "ExposedPorts": None,
        "Volumes": None,
        "Healthcheck": None,
        "StopSignal": "",
    }
    text = make_flatten_dockerfile(IMAGE, config, "/testbed")
    assert text == make_flatten_dockerfile(IMAGE, {}, "/testbed")
    assert text.splitlines()[-1] == "COPY --from=published / /"
    text = make_flatten_dockerfile(IMAGE, {"Entrypoint": [], "Cmd": []}, "/testbed")
    assert "ENTRYPOINT" not in text and "CMD" not in text


def test_run_settings_are_restated_after_the_copy() -> None:
    config = {
        "Env": ["A=1"],
        "WorkingDir": "/testbed",
        "User": "1000:1000",
        "Entrypoint": ["/bin/tini", "--"],
        "Cmd": ["bash", "-c", 'echo "$A"'],
        "Shell": ["/bin/bash", "-o", "pipefail", "-c"],
        "ExposedPorts": {"8080/tcp": {}, "53/udp": {}},
        "Volumes": {"/data": {}},
        "StopSignal": "SIGINT",
        "Labels": {"org.opencontainers.image.title": 'the "harness"', "packager.task": "x/y"},
    }
    lines = _logical_lines(make_flatten_dockerfile(IMAGE, config, "/testbed"))
    after = lines[lines.index("COPY --from=published / /") + 1 :]
    assert after == [
        'ENV A="1"',
        'LABEL "org.opencontainers.image.title"="the \\"harness\\""',
        "EXPOSE 53/udp",
        "EXPOSE 8080/tcp",
        'VOLUME ["/data"]',
        "STOPSIGNAL SIGINT",
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
        'WORKDIR "/testbed"',
        'ENTRYPOINT ["/bin/tini", "--"]',
        "CMD " + json.dumps(["bash", "-c", 'echo "$A"']),
        'USER "1000:1000"',
    ]


def test_health_checks_keep_their_form_and_timings() -> None:
    shell = {
        "Healthcheck": {
            "Test": ["CMD-SHELL", "curl -f localhost || exit 1"],
            "Interval": 30_000_000_000,
            "Retries": 3,
        }
    }
    assert (
        "HEALTHCHECK --interval=30000000000ns --retries=3 CMD curl -f localhost || exit 1"
        in make_flatten_dockerfile(IMAGE, shell, "/testbed")
    )
    exec_form = {"Healthcheck": {"Test": ["CMD", "/bin/check", "--quick"]}}
    assert 'HEALTHCHECK CMD ["/bin/check", "--quick"]' in make_flatten_dockerfile(
        IMAGE, exec_form, "/testbed"
    )
    none = {"Healthcheck": {"Test": ["NONE"]}}
    assert "HEALTHCHECK NONE" in make_flatten_dockerfile(IMAGE, none, "/testbed")


def test_the_tag_follows_the_published_image_and_the_workdir() -> None:
    text = make_flatten_dockerfile(IMAGE, {}, "/testbed")
    tag = flat_tag(IMAGE, "/testbed", text)
    assert tag.startswith(FLAT_REPOSITORY + ":") and len(tag.split(":")[1]) == 16
    assert tag == flat_tag(IMAGE, "/testbed", text)
    other = "sha256:" + "cd" * 32
    assert tag != flat_tag(other, "/testbed", make_flatten_dockerfile(other, {}, "/testbed"))
    assert tag != flat_tag(IMAGE, "/repo", make_flatten_dockerfile(IMAGE, {}, "/repo"))


def test_an_agent_image_on_a_flat_base_is_labelled_with_it_and_its_source() -> None:
    text = make_flatten_dockerfile(IMAGE, {}, "/testbed")
    flat = FlatBase("org/harness:v1", IMAGE, "/testbed", text, flat_tag(IMAGE, "/testbed", text))
    assert flat.agent_labels == {
        LABEL_FLAT_BASE: flat.tag,
        LABEL_FLATTENED_FROM: f"org/harness:v1@{IMAGE}",
    }
