"""botocore's data loader, told which services exist (`store/aws.py`): for the services Baton makes clients of, it
answers what botocore's own loader answers, for every kind of model a client loads, and its sessions' clients use it;
it never lists botocore's other services."""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.loaders import Loader

from baton_checkpoints.store import aws

TYPES = ("service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2", "service-2.sdk-extras")


@pytest.mark.parametrize("type_name", TYPES)
def test_it_answers_as_botocores_loader_does_for_batons_services(type_name: str) -> None:
    ours = aws.known_services_loader()(None)
    theirs = Loader()
    assert ours.list_available_services(type_name) == [
        service for service in theirs.list_available_services(type_name) if service in aws.SERVICES
    ]
    for service in ours.list_available_services(type_name):
        assert ours.determine_latest_version(service, type_name) == theirs.determine_latest_version(service, type_name)


def test_it_knows_every_service_baton_makes_clients_of() -> None:
    assert aws.known_services_loader()(None).list_available_services("service-2") == sorted(aws.SERVICES)


def test_batons_clients_are_made_with_it_and_it_lists_no_other_service(monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[str] = []
    real = os.listdir

    def spy(path: Any = ".") -> list[str]:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", spy)
    clients = [
        aws.dynamodb_client("http://127.0.0.1:1"),
        aws.s3_client("http://127.0.0.1:1"),
        aws.events_client("http://127.0.0.1:1"),
    ]
    assert [client.meta.service_model.service_name for client in clients] == ["dynamodb", "s3", "events"]
    # Only the services' own directories were listed, never botocore's data directory as a whole
    assert listed, "the spy sees the loader's listing"
    assert all(os.path.basename(path) in aws.SERVICES for path in listed), sorted(set(listed))
