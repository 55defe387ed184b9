"""cdk-nag acknowledgements: every one names the finding and says why it is acceptable."""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one finding (full id, e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and its children."""
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of an L2 construct's resource (findings name resources by it)."""
    resource = construct.node.default_child
    if not isinstance(resource, CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return Stack.of(construct).get_logical_id(resource)
