"""The first save: the sample event, as API Gateway would send it, creates a checkpoint."""

from __future__ import annotations

from tests.integration.driver import ApiDriver, CallCounter


def test_sample_save_event_creates_a_checkpoint_with_one_transaction(api: ApiDriver, counter: CallCounter) -> None:
    # Given the sample save event (it carries an Idempotency-Key)
    # When it reaches the handler
    first = api.invoke("save_checkpoint")
    # Then the checkpoint is created with one consistent read and one transaction
    assert first.status == 201
    assert first.data["revision"] == 1
    assert first.data["updated"] is False
    assert dict(counter.calls) == {"GetItem": 1, "BatchGetItem": 1, "TransactWriteItems": 1}
