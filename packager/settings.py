"""The run settings that travel below the configuration unchanged: the base of every
configuration section, and `VerifyConfig`, which the stages and engines read as it is (the
command line's `RunConfig.verify`, not a copy in another shape). A leaf beside the models:
checks that need an engine or an executor are `RunConfig`'s (packager.config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from packager.defaults import DEFAULT_ENVIRONMENT
from packager.errors import InputError, UnknownEngineError
from packager.registry import ENGINES, EngineName, JudgeMode, parse

PERTURBATIONS = ("shuffle", "cpus", "clock")
"""The perturbed gold runs a task may get (`engines.perturb`): tests shuffled, one CPU, a
shifted clock and timezone."""
ORACLE_RUNS = 6
"""Plain gold runs by default: with the three perturbed ones, 9 gold runs, which leave a test
failing 30% of the time unseen in 0.7**9 = 4% of tasks (docs/grading.md, Stability)."""

PARTIAL = "partial"
"""Validation context flag: a file on its own, before the command line completes it (checks
between fields wait for the whole)."""


class Section(BaseModel):
    """A section of the configuration; its validators are built on first use (so `--help`
    needs none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def whole(info: ValidationInfo) -> bool:
    return not (info.context or {}).get(PARTIAL, False)


class VerifyConfig(Section):
    """How tasks are verified (or one candidate patch graded)."""

    engine: EngineName = Field(
        EngineName.LOCAL,
        description=(
            "Verification engine: local (Docker SDK, seconds per run) or harbor "
            "(the real `harbor run` in the pinned .harbor environment; `make "
            "harbor`)."
        ),
    )
    harbor_env: str | None = Field(
        None,
        description=(
            "With --engine harbor: Harbor's environment type for the trials "
            "(`harbor run --env`), default docker; e.g. daytona, modal or e2b for "
            "Harbor's cloud sandboxes (docs/harbor.md)."
        ),
    )
    oracle_runs: int = Field(
        ORACLE_RUNS, ge=1, description="Oracle (gold) runs per task, before the perturbed ones."
    )
    nop_runs: int = Field(1, ge=1, description="Nop runs per task.")
    runs: str | None = Field(
        None,
        description=(
            "G,N: gold (oracle) runs and nop runs per task, over --oracle-runs and "
            "--nop-runs. A listed test whose outcome differs between runs makes the task "
            "flaky (docs/grading.md, Stability)."
        ),
    )
    perturb: tuple[str, ...] | None = Field(
        None,
        description=(
            "Perturbed gold runs after the plain ones, comma-separated: shuffle (tests "
            "in another order), cpus (one CPU), clock (a shifted clock and timezone); "
            "all, or none. Default: all with the local engine (which runs them), none "
            "with harbor. Made on tasks the plain runs verify."
        ),
    )
    force: bool = Field(
        False, description="Verify again tasks already verified for the same images (no resume)."
    )
    memory_mb: int | None = Field(
        None,
        ge=16,
        description=(
            "Memory limit of each agent and grader container, in MiB (no swap "
            "beyond it); a run killed for memory is an infra_error."
        ),
    )
    judge: JudgeMode = Field(
        JudgeMode.ENV,
        description=(
            "Where a browser judge's model is (SWEeper tasks): env = the endpoint "
            "named by PACKAGER_JUDGE_BASE_URL, PACKAGER_JUDGE_MODEL and "
            "PACKAGER_JUDGE_API_KEY (unset: the task stops at needs_judge); replay "
            "= a local server replaying the sample's recorded model turns "
            "(packager/samples/replays/<id>.yaml), started and stopped by this "
            "command."
        ),
    )
    patch: Path | None = Field(
        None, description="Grade this candidate patch instead; prints one JSON object."
    )

    @model_validator(mode="before")
    @classmethod
    def _runs(cls, data: object) -> object:
        """`runs` "G,N" sets `oracle_runs` and `nop_runs` (and is kept as given)."""
        if not isinstance(data, dict) or data.get("runs") in (None, ""):
            return data
        text = str(data["runs"])
        parts = text.split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
            raise InputError(f"--runs {text!r}: give G,N, gold runs and nop runs, each >= 1")
        return {**data, "oracle_runs": int(parts[0]), "nop_runs": int(parts[1])}

    @property
    def perturbations(self) -> tuple[str, ...]:
        """The perturbed runs asked for (the default: all with the local engine)."""
        if self.perturb is not None:
            return self.perturb
        return PERTURBATIONS if self.engine == EngineName.LOCAL else ()

    @field_validator("perturb", mode="before")
    @classmethod
    def _perturb(cls, value: object) -> tuple[str, ...] | None:
        if value is None:
            return None
        items = value.split(",") if isinstance(value, str) else list(value or ())  # type: ignore[call-overload]
        names = [str(v).strip() for item in items for v in str(item).split(",") if v.strip()]
        if names in (["none"], []):
            return ()
        if names == ["all"]:
            return PERTURBATIONS
        unknown = [n for n in names if n not in PERTURBATIONS]
        if unknown:
            raise InputError(
                f"unknown --perturb {', '.join(unknown)} (known: {', '.join(PERTURBATIONS)}, "
                "all, none)"
            )
        return tuple(dict.fromkeys(names))

    @property
    def environment(self) -> str:
        """The environment type trials run in (`--harbor-env`, docker by default)."""
        return self.harbor_env if self.harbor_env is not None else DEFAULT_ENVIRONMENT

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: object) -> EngineName:
        member = parse(EngineName, str(value))
        if member is None:
            raise UnknownEngineError(str(value), ENGINES)
        return member

    @field_validator("judge", mode="before")
    @classmethod
    def _judge(cls, value: object) -> JudgeMode:
        member = parse(JudgeMode, str(value))
        if member is None:
            modes = ", ".join(JudgeMode)
            raise InputError(f"unknown --judge {value!r} (available: {modes})")
        return member

    @model_validator(mode="after")
    def _harbor_env(self, info: ValidationInfo) -> Self:
        """`--harbor-env` is for the harbor engine (what each engine accepts: RunConfig)."""
        if not whole(info):
            return self
        if self.harbor_env is not None and self.engine != "harbor":
            raise InputError(
                f"--harbor-env {self.harbor_env} needs --engine harbor (the {self.engine} engine "
                "runs on the local Docker engine)"
            )
        if self.engine == "harbor" and (self.perturb or self.nop_runs > 1):
            raise InputError(
                "--perturb and more than one nop run are made by the local engine; "
                "use --engine local (the default)"
            )
        return self
