"""The stack's outputs: where the API answers, and which table and bucket it uses."""

from __future__ import annotations

from tests.infrastructure.conftest import Synthesized, render


def test_outputs_give_the_api_url_table_and_bucket_names(synthesized: Synthesized) -> None:
    # Given the template's outputs
    outputs = synthesized.json["Outputs"]
    api_id = synthesized.logical_id(synthesized.stack.api.http_api)
    # Then ApiUrl is the API's execute-api URL, and TableName and BucketName name Baton's own table and bucket
    assert {"ApiUrl", "TableName", "BucketName"} <= set(outputs)
    assert render(outputs["ApiUrl"]["Value"]).startswith("https://${" + api_id + "}.execute-api.")
    assert outputs["TableName"]["Value"] == {"Ref": synthesized.logical_id(synthesized.stack.storage.table)}
    assert outputs["BucketName"]["Value"] == {"Ref": synthesized.logical_id(synthesized.stack.storage.bucket)}
