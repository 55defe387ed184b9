"""The CDK app, synthesized once per test session for each of: dev, prod, and dev with every context override.

Synthesis is offline: the Lambda asset is not bundled (bundling runs pip), and sockets are disabled from the
first synthesis to this package's last test. The fixtures are package-scoped (only this package uses them), so
each app is still synthesized once per session, and other suites run after this one with their sockets back.

cdk-nag's AwsSolutions checks run in every synthesis (`build_app` adds them) and any finding they report makes
`app.synth()` raise: a fixture that was built had zero unacknowledged findings.
"""

from __future__ import annotations

import os

# jsii prints a banner about the Node.js version when aws_cdk is first imported unless this is set beforehand.
os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, CfnElement
from aws_cdk.assertions import Template
from constructs import IConstruct
from infra.app import build_app
from infra.config import StageConfig, stage_config
from infra.stack import BatonStack
from pytest_socket import disable_socket, enable_socket

HERE = Path(__file__).resolve().parent

OFFLINE_CONTEXT: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
"""No stack's assets are bundled: bundling runs pip, and tests have no network."""

OVERRIDES: dict[str, Any] = {
    "cors_origins": "https://app.example.com",
    "alarm_email": "ops@example.com",
    "reserved_concurrency": 50,
    "provisioned_concurrency": 2,
    "snap_start": "false",  # (off on dev already; provisioned concurrency excludes it)
}
"""Every context override the app accepts, set at once (on the dev stage)."""

SYNTHESES = ("dev", "prod", "overrides")
CDK_EMPTIER = "CustomS3AutoDeleteObjectsCustomResourceProvider"
"""The logical ids CDK gives the handler (and its role) that empties a bucket before the stack deletes it."""
"""The session fixtures, by name: `synthesized` runs a test once for each."""


def synthesize_app(outdir: Path, context: dict[str, Any]) -> tuple[App, BatonStack]:
    """A fresh app with `build_app`'s stack and checks, not yet synthesized (no AWS account in the environment)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
        patch.delenv("CDK_DEFAULT_REGION", raising=False)
        app = App(outdir=str(outdir), context={**OFFLINE_CONTEXT, **context})
        stack = build_app(app)
    return app, stack


@dataclass(frozen=True)
class Synthesized:
    """One synthesized app: its stack, the stack's template (as assertions and as JSON) and the file on disk."""

    label: str
    context: dict[str, Any]
    app: App
    stack: BatonStack
    template: Template
    template_path: Path
    outdir: Path
    json: dict[str, Any] = field(repr=False)

    @property
    def config(self) -> StageConfig:
        """The stage configuration the app was built with."""
        return stage_config(self.context)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        """Every resource of the template, by logical id."""
        return dict(self.json["Resources"])

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """The resources of one CloudFormation type, by logical id."""
        return {lid: r for lid, r in self.resources.items() if r["Type"] == resource_type}

    @property
    def functions(self) -> dict[str, dict[str, Any]]:
        """Baton's own functions (the api and the reaper), without the handler CDK adds to empty a dev stage's
        buckets when the stack is destroyed (`auto_delete_objects`)."""
        return {lid: r for lid, r in self.of_type("AWS::Lambda::Function").items() if not lid.startswith(CDK_EMPTIER)}

    def only(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        """The one resource of a type (fails when there are none or several)."""
        found = self.of_type(resource_type)
        assert len(found) == 1, f"expected exactly one {resource_type}, found {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, construct: IConstruct) -> str:
        """The logical id of an L2 construct's CloudFormation resource (or of a CloudFormation element itself)."""
        element = construct if isinstance(construct, CfnElement) else construct.node.default_child
        assert isinstance(element, CfnElement), f"{construct.node.path} has no CloudFormation resource"
        return self.stack.get_logical_id(element)

    def resource(self, construct: IConstruct) -> dict[str, Any]:
        """The template's resource of a construct."""
        return self.resources[self.logical_id(construct)]


def _synthesize(outdir: Path, label: str, context: dict[str, Any]) -> Synthesized:
    app, stack = synthesize_app(outdir, context)
    assembly = app.synth()  # raises when cdk-nag reports an unacknowledged finding
    template_path = Path(assembly.get_stack_artifact(stack.artifact_id).template_full_path)
    template = Template.from_stack(stack)
    return Synthesized(
        label=label,
        context=context,
        app=app,
        stack=stack,
        template=template,
        template_path=template_path,
        outdir=outdir,
        json=dict(template.to_json()),
    )


@pytest.fixture(scope="package", autouse=True)
def _offline() -> Iterator[None]:
    """No socket may be opened while the app is synthesized and checked (jsii talks to node over pipes)."""
    disable_socket()
    yield
    enable_socket()


@pytest.fixture(scope="package")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The dev stage, no overrides."""
    return _synthesize(tmp_path_factory.mktemp("cdk-dev"), "dev", {"stage": "dev"})


@pytest.fixture(scope="package")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The prod stage, no overrides."""
    return _synthesize(tmp_path_factory.mktemp("cdk-prod"), "prod", {"stage": "prod"})


@pytest.fixture(scope="package")
def overrides(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The dev stage with CORS origins, an alarm email, reserved and provisioned concurrency."""
    return _synthesize(tmp_path_factory.mktemp("cdk-overrides"), "overrides", {"stage": "dev", **OVERRIDES})


@pytest.fixture(params=SYNTHESES)
def synthesized(request: pytest.FixtureRequest) -> Synthesized:
    """Each session synthesis in turn."""
    value = request.getfixturevalue(request.param)
    assert isinstance(value, Synthesized)
    return value


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this directory's tests `infrastructure` (they synthesize the CDK app)."""
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.infrastructure)


# Helpers shared by the test modules.


def render(value: Any) -> str:
    """A CloudFormation value as one readable string: `Ref` becomes `${Id}`, `Fn::GetAtt` `${Id.Attr}`, joins join.

    Anything else (a condition, an import) fails loudly rather than comparing by accident.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return "${" + str(argument) + "}"
        if function == "Fn::GetAtt":
            parts = argument if isinstance(argument, list) else str(argument).split(".", 1)
            return "${" + ".".join(str(p) for p in parts) + "}"
        if function == "Fn::Join":
            delimiter, items = argument
            return str(delimiter).join(render(item) for item in items)
        if function == "Fn::Sub" and isinstance(argument, str):
            return argument
    raise AssertionError(f"cannot render {json.dumps(value)}")


def as_list(value: Any) -> list[Any]:
    """A policy element (one value or a list) as a list."""
    return list(value) if isinstance(value, list) else [value]
