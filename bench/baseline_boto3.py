"""The cold-start baseline: the least any Python function that talks to DynamoDB pays at import.

It imports boto3 and creates a DynamoDB client, as a minimal handler module would at load time. Baton's handler
modules are measured as a ratio to this, in the same run (see `bench/coldstart.py`).
"""

import boto3

client = boto3.client("dynamodb", region_name="us-east-1")
