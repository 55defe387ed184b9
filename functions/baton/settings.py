"""Settings from the environment, validated once per container (by the wiring, `api/services.py`, when it builds
the services on the first request that needs AWS).

Anything that differs between deployments (the table's name) has no default: a function deployed without it
fails at its first request with a message naming the variable, rather than writing somewhere unexpected.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Settings(BaseModel):
    """The api function's environment."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    table_name: str = Field(alias="BATON_TABLE_NAME", min_length=3, max_length=255)
    bucket_name: str | None = Field(default=None, alias="BATON_BUCKET_NAME", min_length=3, max_length=63)
    """The blob bucket; unset until a deployment stores blobs (the API does not use it yet)."""
    aws_endpoint_url: str | None = Field(default=None, alias="BATON_AWS_ENDPOINT_URL")
    """An AWS-compatible endpoint (moto, DynamoDB Local); unset on AWS itself."""
    service_name: str = Field(default="baton", alias="POWERTOOLS_SERVICE_NAME")


def environment_name(field: str) -> str:
    """The environment variable that sets a field of `Settings` (infrastructure sets them by these names)."""
    alias = Settings.model_fields[field].alias
    if alias is None:
        raise KeyError(field)
    return alias


class SettingsError(RuntimeError):
    """The environment does not describe a usable deployment."""


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Validate settings from `environ` (default: the process environment)."""
    source = dict(os.environ if environ is None else environ)
    try:
        return Settings.model_validate(source)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise SettingsError(f"invalid environment: {problems}") from exc
