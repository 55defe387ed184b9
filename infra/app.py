"""The CDK app: `python infra/app.py` (or `make synth`) writes cdk.out/; `-c stage=dev|prod` picks the stage."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script by the CDK CLI or `make synth`: import from the repository root, not from infra/.
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from aws_cdk import App, Environment, Validations
from aws_cdk.cx_api import SynthesisMessageLevel
from cdk_nag import AwsSolutionsChecks

from infra.config import TENANT_DEFAULTS, stage_config
from infra.stack import BatonStack

FEATURE_FLAGS = {
    # Grant S3 server access log delivery with a bucket policy rather than the deprecated bucket ACL.
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
}
"""Set here rather than in cdk.json, so `python infra/app.py`, the CDK CLI and the tests synthesize alike."""


def build_app(app: App) -> BatonStack:
    """Add the stage's stack and the cdk-nag checks to `app`."""
    for flag, value in FEATURE_FLAGS.items():
        if app.node.try_get_context(flag) is None:
            app.node.set_context(flag, value)
    config = stage_config({key: app.node.try_get_context(key) for key in _CONTEXT_KEYS})
    environment = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT"):
        environment = Environment(
            account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ.get("CDK_DEFAULT_REGION")
        )
    stack = BatonStack(app, f"Baton-{config.name}", config=config, env=environment)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


_CONTEXT_KEYS = (
    "stage",
    "cors_origins",
    "alarm_email",
    "event_bus_name",
    "reserved_concurrency",
    "provisioned_concurrency",
    "snap_start",
    *TENANT_DEFAULTS,
)
"""Every context key `stage_config` reads (a key missing here would be accepted by the CLI and silently ignored)."""


def main() -> None:
    """Synthesize into $CDK_OUTDIR (set by the CDK CLI) or cdk.out, and print the stack's warnings (the CDK CLI
    prints them itself; `make synth` runs this without it)."""
    app = App(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
    build_app(app)
    assembly = app.synth()
    if "CDK_CLI_VERSION" not in os.environ:
        for artifact in assembly.artifacts:
            for message in artifact.messages:
                if message.level == SynthesisMessageLevel.WARNING:
                    print(f"[Warning at {message.id}] {message.entry.data}", file=sys.stderr)


if __name__ == "__main__":
    main()
