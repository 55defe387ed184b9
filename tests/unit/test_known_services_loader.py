"""botocore's data loader, told which services exist (`store/aws.py`): for the services Baton makes clients of, it
answers what botocore's own loader answers, for every kind of model a client loads, and its sessions' clients use it;
it never lists botocore's other services. It parses with orjson what botocore parses with `json`, to the same data in
the same order, and hands out botocore's endpoint data trimmed to Baton's services, from which every endpoint of them
resolves as from the whole file."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, cast

import botocore
import botocore.session
import pytest
from botocore.loaders import JSONFileLoader, Loader
from botocore.regions import EndpointResolver

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


def _data_files() -> list[str]:
    """Every data file a client of Baton's services may load, as the loader names them (no extension)."""
    root = Loader.BUILTIN_DATA_PATH
    names = ["endpoints", "partitions", "sdk-default-configuration", "_retry"]
    for service in aws.SERVICES:
        for version in sorted(os.listdir(os.path.join(root, service))):
            for file in sorted(os.listdir(os.path.join(root, service, version))):
                names.append(f"{service}/{version}/{file.split('.json')[0]}")
    return names


@pytest.mark.parametrize("name", _data_files())
def test_it_parses_each_file_as_botocore_does_keys_in_the_same_order(name: str) -> None:
    path = os.path.join(Loader.BUILTIN_DATA_PATH, name)
    ours = aws.known_services_loader()(None).file_loader.load_file(path)
    theirs = JSONFileLoader().load_file(path)
    assert theirs is not None
    assert ours == theirs
    assert json.dumps(ours) == json.dumps(theirs)  # the same order, nested (botocore's are OrderedDicts)


@pytest.fixture(autouse=True)
def no_customer_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """botocore also looks in `~/.aws/models`: these tests must not depend on what this machine keeps there."""
    monkeypatch.setattr(Loader, "CUSTOMER_DATA_PATH", str(tmp_path / "no-models"))


def test_what_orjson_refuses_is_parsed_as_botocore_parses_it(tmp_path: Path) -> None:
    (tmp_path / "odd.json").write_text('{"nan": NaN}', encoding="utf-8")
    ours = aws.known_services_loader()(None).file_loader.load_file(str(tmp_path / "odd"))
    assert math.isnan(ours["nan"])


@pytest.mark.parametrize("number", ["123456789012345678901234567890", "-9223372036854775809", "18446744073709551616"])
def test_integers_past_64_bits_are_parsed_as_botocore_parses_them(tmp_path: Path, number: str) -> None:
    # (orjson reads them as floats, without an error)
    (tmp_path / "big.json").write_text(f'{{"big": {number}}}', encoding="utf-8")
    ours = aws.known_services_loader()(None).file_loader.load_file(str(tmp_path / "big"))
    assert ours == {"big": int(number)}
    assert type(ours["big"]) is int


def _full_endpoints() -> dict[str, Any]:
    loaded = Loader(include_default_search_paths=False, extra_search_paths=[Loader.BUILTIN_DATA_PATH]).load_data(
        "endpoints"
    )
    return cast("dict[str, Any]", loaded)


def test_the_kept_endpoints_are_this_botocores_trimmed_to_batons_services() -> None:
    kept = json.loads(aws.ENDPOINTS.read_text(encoding="utf-8"))
    assert kept["botocore"] == botocore.__version__, "botocore changed: run `make botocore-endpoints`"
    assert kept["endpoints"] == aws.trimmed_endpoints(_full_endpoints()), "run `make botocore-endpoints`"
    assert {service for p in kept["endpoints"]["partitions"] for service in p["services"]} == set(aws.SERVICES)


def test_the_loader_hands_out_the_kept_endpoints_from_botocores_own_path() -> None:
    endpoints, path = aws.known_services_loader()(None).load_data_with_path("endpoints")
    assert path == os.path.join(Loader.BUILTIN_DATA_PATH, "endpoints")
    assert endpoints == json.loads(aws.ENDPOINTS.read_text(encoding="utf-8"))["endpoints"]


def _outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    """What `call` answers, or the error it raises (its type and message)."""
    try:
        return call(*args, **kwargs)
    except Exception as error:
        return (type(error), str(error))


def test_every_endpoint_of_batons_services_resolves_as_from_the_whole_file() -> None:
    full = _full_endpoints()
    theirs = EndpointResolver(full, uses_builtin_data=True)
    ours = EndpointResolver(aws.trimmed_endpoints(full), uses_builtin_data=True)
    assert ours.get_available_partitions() == theirs.get_available_partitions()
    variants = [{}, {"use_fips_endpoint": True}, {"use_dualstack_endpoint": True}]
    variants.append({"use_fips_endpoint": True, "use_dualstack_endpoint": True})
    checked = 0
    for partition in full["partitions"]:
        regions = {*partition["regions"], "xx-nowhere-1"}
        for service in aws.SERVICES:
            regions |= set(partition["services"].get(service, {}).get("endpoints", {}))
            assert ours.get_available_endpoints(service, partition["partition"]) == theirs.get_available_endpoints(
                service, partition["partition"]
            )
        for region in sorted(regions):
            assert _outcome(ours.get_partition_for_region, region) == _outcome(theirs.get_partition_for_region, region)
            for service in aws.SERVICES:
                for variant in variants:
                    checked += 1
                    assert _outcome(ours.construct_endpoint, service, region, partition["partition"], **variant) == (
                        _outcome(theirs.construct_endpoint, service, region, partition["partition"], **variant)
                    ), (service, region, variant)
    assert checked > 500  # every partition, region, service and variant


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1", "us-iso-east-1"])
@pytest.mark.parametrize("service", aws.SERVICES)
def test_clients_resolve_as_clients_of_botocores_own_session(region: str, service: str) -> None:
    ours = aws.session().create_client(service, region_name=region)
    theirs = botocore.session.get_session().create_client(service, region_name=region)
    assert (ours.meta.endpoint_url, ours.meta.partition, ours.meta.region_name) == (
        theirs.meta.endpoint_url,
        theirs.meta.partition,
        theirs.meta.region_name,
    )


def test_an_endpoints_file_on_the_data_path_comes_first(tmp_path: Path) -> None:
    mine = {"partitions": [], "version": 3}
    (tmp_path / "endpoints.json").write_text(json.dumps(mine), encoding="utf-8")
    endpoints, path = aws.known_services_loader()(str(tmp_path)).load_data_with_path("endpoints")
    assert (endpoints, path) == (mine, str(tmp_path / "endpoints"))


def test_a_data_path_beside_botocores_own_is_not_taken_for_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A directory whose name merely starts with botocore's data directory's (`.../data-custom`)
    monkeypatch.setattr(Loader, "BUILTIN_DATA_PATH", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data-custom").mkdir()
    mine = {"partitions": [], "version": 3}
    (tmp_path / "data-custom" / "endpoints.json").write_text(json.dumps(mine), encoding="utf-8")
    endpoints, path = aws.known_services_loader()(str(tmp_path / "data-custom")).load_data_with_path("endpoints")
    assert (endpoints, path) == (mine, str(tmp_path / "data-custom" / "endpoints"))


def test_a_damaged_kept_copy_leaves_botocores_own_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "endpoints.json").write_text("{not json", encoding="utf-8")
    monkeypatch.setattr(aws, "ENDPOINTS", tmp_path / "endpoints.json")
    endpoints, _ = aws.known_services_loader()(None).load_data_with_path("endpoints")
    assert endpoints == _full_endpoints()


def test_another_botocore_reads_its_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore, "__version__", "0.0.0")
    endpoints, _ = aws.known_services_loader()(None).load_data_with_path("endpoints")
    assert endpoints == _full_endpoints()
