"""The table and the blob bucket, from the same definitions the code and the moto fixtures use."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from baton_checkpoints.store import schema
from infra.config import StageConfig
from infra.nag import acknowledge

CORS_ALLOWED_HEADERS = ("content-type", "x-amz-checksum-sha256", "x-amz-sdk-checksum-algorithm", "x-amz-tagging")
"""What a browser sends with a presigned PUT: the headers `POST /v1/blobs` signs into the URL (the browser sets
`content-length` itself, which needs no preflight)."""
CORS_EXPOSED_HEADERS = ("etag",)


def _string(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Storage(Construct):
    """One DynamoDB table (keys, indexes and TTL from `baton_checkpoints.store.schema`) and one S3 bucket for blobs."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        definition = schema.TABLE
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_string(definition.partition_key),
            sort_key=_string(definition.sort_key),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.removal_policy == RemovalPolicy.RETAIN,
            removal_policy=config.removal_policy,
        )
        for index in definition.global_indexes:
            self.table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string(index.partition_key),
                sort_key=_string(index.sort_key),
                projection_type=dynamodb.ProjectionType.INCLUDE,
                non_key_attributes=list(index.non_key_attributes),
            )
        for index in definition.local_indexes:
            self.table.add_local_secondary_index(
                index_name=index.name,
                sort_key=_string(index.sort_key),
                projection_type=dynamodb.ProjectionType.INCLUDE,
                non_key_attributes=list(index.non_key_attributes),
            )
        self.index_names = tuple(i.name for i in (*definition.global_indexes, *definition.local_indexes))

        # A stage whose data goes with the stack (dev) empties its buckets when it is destroyed: CloudFormation cannot
        # delete a bucket that holds objects, and `make destroy` would stop at both until emptied by hand.
        empties = config.removal_policy == RemovalPolicy.DESTROY
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=config.removal_policy,
            auto_delete_objects=empties,
        )
        acknowledge(
            self.access_logs,
            "AwsSolutions-S1",
            "This is the server access log bucket of the blob bucket; logging it into itself would loop.",
        )

        key, value = schema.PENDING_TAG
        cors = None
        if config.cors_origins:
            cors = [
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
                    allowed_origins=list(config.cors_origins),
                    allowed_headers=list(CORS_ALLOWED_HEADERS),
                    exposed_headers=list(CORS_EXPOSED_HEADERS),
                    max_age=3600,
                )
            ]
        self.bucket = s3.Bucket(
            self,
            "Blobs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="blobs/",
            cors=cors,
            lifecycle_rules=[
                s3.LifecycleRule(id="AbortIncompleteUploads", abort_incomplete_multipart_upload_after=Duration.days(1)),
                s3.LifecycleRule(
                    id="ExpireNeverAttached",
                    prefix=schema.BLOB_PREFIX,
                    tag_filters={key: value},
                    expiration=Duration.days(schema.PENDING_EXPIRY_DAYS),
                ),
            ],
            removal_policy=config.removal_policy,
            auto_delete_objects=empties,
        )
