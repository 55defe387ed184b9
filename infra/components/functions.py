"""The api function: Python 3.13 on arm64, packaged without Docker, granted only what it touches."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, cast

import jsii
from aws_cdk import BundlingOptions, DockerImage, Duration, ILocalBundling
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from baton_checkpoints.settings import environment_name
from baton_checkpoints.store import layout, schema
from infra.config import TENANT_DEFAULTS, StageConfig
from infra.nag import acknowledge, logical_id

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS = REPO / "functions"
# What `baton` ships to Lambda: everything but the local emulator, the CLI, the SDK and the LangGraph saver (an
# import-linter contract keeps the deployed code from importing them).
NOT_DEPLOYED = ("local", "cli", "client", "langgraph")
SHUTDOWN_LAYER = FUNCTIONS / "layers" / "shutdown"
"""The `baton-shutdown` external extension (`/opt/extensions/baton-shutdown`): with it, Lambda sends the api
function SIGTERM before stopping a container, and the function writes the usage counts it holds
(`handlers/api.py: on_shutdown`). It costs a cold start without SnapStart the extension's start (Lambda starts the
runtime once extensions have registered: a Python without `site` importing `http.client`)."""
RUNTIME = lambda_.Runtime.PYTHON_3_13
"""The Python 3.12 and later managed runtimes wait for the next event in a thread of their own, so a SIGTERM reaches
the handler's Python code between requests (on 3.8 to 3.11 it does not: the shutdown flush would never run)."""
PLATFORM = "manylinux2014_aarch64"
TIMEOUT = Duration.seconds(29)
"""Below API Gateway's 30 s, so a slow request ends in the function's own answer, not the gateway's."""

TABLE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
)
"""Every operation the store makes (TransactWriteItems is authorized per item, as the writes it carries;
BatchWriteItem is a purge's deletes)."""
BUCKET_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:GetObjectTagging",
    "s3:PutObjectTagging",
)
"""Reading and writing blobs and their pending/attached tag; deleting what a checkpoint let go of is the reaper's."""
LIST_ACTIONS = ("s3:ListBucket",)
"""On the bucket itself, with no condition: S3 answers a GET or HEAD of a missing key `404 NoSuchKey` only to a
principal that may list the bucket, and `403 AccessDenied` to any other, which the store cannot tell from a real
denial. A missing spilled state (a defect) must be a 503 naming the defect, and a blob whose upload has not landed a
400 naming the blob: both need the 404. Listing shows keys only (blob ids, random state ids) of objects the function
may read anyway. (A condition on `s3:prefix` would not do: a GET carries no prefix for S3 to check it against.)"""
DISCARD_ACTIONS = ("s3:DeleteObject",)
"""Only on spilled states (`blobs/<tenant>/states/*`): a save refused after it spilled its state removes the object
no item came to reference, so a refused request leaves nothing behind."""


def runtime_requirements() -> list[str]:
    """The Lambda runtime set: the `server` extra of pyproject.toml, as pinned there."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["optional-dependencies"]["server"])


UNUSED_IN_LAMBDA = ("zstandard/_cffi*.so", "zstandard/backend_cffi.py")
"""Files of the runtime set that CPython never loads: zstandard's CFFI backend (for PyPy) is an unstripped 11 MB
library beside the C backend CPython uses; leaving it out keeps the asset, and its cold download, 11 MB smaller."""


@jsii.implements(ILocalBundling)
class PipBundling:
    """Bundles the asset on this machine: pip fetches arm64 wheels for Python 3.13, then Baton's package is copied.

    Runs only when the stack is synthesized for deployment (`make synth`, `make deploy`); tests skip bundling.
    """

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            output_dir,
            "--platform",
            PLATFORM,
            "--implementation",
            "cp",
            "--python-version",
            RUNTIME.name.removeprefix("python"),
            "--only-binary=:all:",
            *runtime_requirements(),
        ]
        subprocess.run(command, check=True)
        for unused in UNUSED_IN_LAMBDA:
            for path in Path(output_dir).glob(unused):
                path.unlink()
        shutil.rmtree(Path(output_dir) / "bin", ignore_errors=True)  # the packages' console scripts: never run
        target = Path(output_dir) / "baton_checkpoints"
        shutil.copytree(
            FUNCTIONS / "baton_checkpoints",
            target,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *NOT_DEPLOYED),
            dirs_exist_ok=True,
        )
        compile_bytecode(Path(output_dir))
        return True


def runtime_python() -> str | None:
    """An interpreter of the runtime's Python version on this machine, or None: `python3.13` on the PATH, else one
    that pyenv installed (whose shim on the PATH answers only for the versions pyenv has selected)."""
    version = RUNTIME.name.removeprefix("python")
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [
        shutil.which(RUNTIME.name),
        *sorted(map(str, pyenv_root.glob(f"versions/{version}*/bin/{RUNTIME.name}"))),
    ]
    # (a pre-release's bytecode has another magic number: the runtime would ignore it)
    check = (
        f"import sys; sys.exit(sys.version_info[:2] != ({version.replace('.', ', ')}) "
        "or sys.version_info.releaselevel != 'final')"
    )
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", check], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def compile_bytecode(output_dir: Path) -> bool:
    """Compile every module of the asset for the runtime's Python, so that a cold start reads bytecode instead of
    compiling each module it imports (Lambda's code directory is read-only: what is compiled there is lost with the
    container). The bytecode is checked against nothing (`unchecked-hash`): the asset's files never change, and the
    zip's normalized times would make time-checked bytecode look stale. Only an interpreter of that very version can
    write it: without one on the PATH, the asset ships sources alone (docs/operations.md says what that costs)."""
    python = runtime_python()
    if python is None:
        print(f"baton: no {RUNTIME.name} on the PATH: the asset ships without bytecode", file=sys.stderr)
        return False
    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(output_dir)],
        check=True,
    )
    return True


def bytecode_tag() -> str:
    """What bytecode the asset will hold: the runtime Python's magic number, or none. Part of the asset's hash, so that
    an asset bundled without bytecode is bundled again once this machine can compile it (and the other way)."""
    python = runtime_python()
    if python is None:
        return "sources only"
    magic = "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"
    done = subprocess.run([python, "-c", magic], capture_output=True, text=True, check=True)
    return "bytecode " + done.stdout.strip()


def function_code() -> lambda_.Code:
    """The api function's asset; bundled locally, never in a container."""
    return lambda_.Code.from_asset(
        str(FUNCTIONS),
        bundling=BundlingOptions(
            # Required by the API, never used: local bundling always answers (and raises if pip fails).
            image=DockerImage.from_registry("baton-local-bundling-only"),
            # Never read either: the bundling options are part of the asset's hash, and so is whether it can hold
            # bytecode (an asset bundled without is bundled again once this machine can compile it).
            environment={"BATON_BYTECODE": bytecode_tag()},
            # jsii hands the options over as one positional object, not as the keywords its stub declares.
            local=cast(ILocalBundling, PipBundling()),
        ),
        exclude=["**/__pycache__", "layers", *(f"baton_checkpoints/{name}" for name in NOT_DEPLOYED)],
    )


class Functions(Construct):
    """The api function, its log group and its least-privilege role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        table: dynamodb.Table,
        index_names: tuple[str, ...],
        bucket: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        table_arn, bucket_arn = table.table_arn, bucket.bucket_arn
        self.log_group = logs.LogGroup(
            self, "ApiLogs", retention=config.log_retention, removal_policy=config.removal_policy
        )
        self.role = iam.Role(
            self,
            "ApiRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Baton api function: its table, its indexes, its bucket prefix, its logs.",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="Table",
                actions=list(TABLE_ACTIONS),
                resources=[table_arn, *(f"{table_arn}/index/{name}" for name in index_names)],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="BlobPrefix", actions=list(BUCKET_ACTIONS), resources=[f"{bucket_arn}/{schema.BLOB_PREFIX}*"]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="MissingKeysAre404", actions=list(LIST_ACTIONS), resources=[bucket_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DiscardRefusedStates",
                actions=list(DISCARD_ACTIONS),
                resources=[f"{bucket_arn}/{schema.BLOB_PREFIX}*/{layout.STATES}/*"],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{self.log_group.log_group_arn}"],
            )
        )
        self.shutdown_layer = lambda_.LayerVersion(
            self,
            "ShutdownExtension",
            code=lambda_.Code.from_asset(str(SHUTDOWN_LAYER), exclude=["**/__pycache__"]),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="baton-shutdown: an external extension waiting for SHUTDOWN, so the api function gets SIGTERM",
        )
        self.api = lambda_.Function(
            self,
            "Api",
            description="Baton HTTP API",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="baton_checkpoints.handlers.api.handler",
            code=function_code(),
            layers=[self.shutdown_layer],
            memory_size=config.api_memory_mb,
            timeout=TIMEOUT,
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=config.reserved_concurrency,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if config.snap_start else None,
            environment={
                environment_name("table_name"): table.table_name,
                environment_name("bucket_name"): bucket.bucket_name,
                environment_name("service_name"): "baton",
                **{environment_name(key): str(getattr(config, key)) for key in TENANT_DEFAULTS},
                "POWERTOOLS_METRICS_NAMESPACE": "Baton",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                # Baton uses no pydantic plugin: skip the scan of every installed distribution for one at cold start.
                "PYDANTIC_DISABLE_PLUGINS": "__all__",
            },
        )
        self.alias = lambda_.Alias(
            self,
            "Live",
            alias_name="live",
            version=self.api.current_version,
            provisioned_concurrent_executions=config.provisioned_concurrency,
        )
        acknowledge(
            self.api,
            "AwsSolutions-L1",
            "Pinned to python3.13, the runtime Baton's dependencies and tests target; a runtime upgrade is a "
            "deliberate change with its own tests, not something a synth should pick up.",
        )
        bucket_id = logical_id(bucket)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{schema.BLOB_PREFIX}*]",
            "Blobs are objects under one prefix; the grant is limited to that prefix of Baton's own bucket.",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{schema.BLOB_PREFIX}*/{layout.STATES}/*]",
            "Deleting is limited to spilled states (each tenant's states folder of Baton's own bucket): a save that "
            "is refused after it spilled its state removes that object.",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions.",
        )
