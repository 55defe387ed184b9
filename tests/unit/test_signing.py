"""Baton's SigV4 signer (`store/signing.py`) signs exactly as botocore's own does, and only Baton's DynamoDB client
uses it."""

from __future__ import annotations

import copy
import datetime
import io
from collections.abc import Callable
from typing import Any
from unittest import mock

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.store import aws, signing
from baton_checkpoints.store.signing import SIGNATURE_VERSION, BatonSigV4Auth, choose_signer
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
_ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
_VALUES = st.one_of(
    _ASCII,
    st.text(max_size=20),  # any text, line breaks included: botocore's own path
    st.text(st.characters(categories=["Cs", "Ll"]), min_size=1, max_size=4),  # lone surrogates
    st.sampled_from(["  spaced   out  ", "a\tb", "", "application/x-amz-json-1.0"]),
)
_NAMES = st.one_of(
    st.sampled_from(
        [
            "Content-Type",
            "X-Amz-Target",
            "User-Agent",
            "Authorization",
            "X-Amz-Date",
            "Date",
            "X-Amz-Security-Token",
            "X-Amz-Content-SHA256",
            "Expect",
            "Host",
            "host",
            "amz-sdk-invocation-id",
            "X-Amzn-Trace-Id",
            "transfer-encoding",
        ]
    ),
    st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,15}\Z"),
)
_SECRETS = st.one_of(st.sampled_from(["secret-a", "secret-b"]), st.text(min_size=1, max_size=30))


@st.composite
def _requests(draw: st.DrawFn) -> AWSRequest:
    scheme = draw(st.sampled_from(["https", "http"]))
    host = draw(st.sampled_from(["dynamodb.us-east-1.amazonaws.com", "127.0.0.1", "localhost"]))
    port = draw(st.sampled_from(["", ":443", ":80", ":8000"]))
    path = draw(st.sampled_from(["/", "", "/a/b", "/a/../b/./c", "/with space", "/%41"]))
    query = draw(st.sampled_from(["", "?b=2&a=1", "?x", "?a=%2F"]))
    body = draw(
        st.one_of(
            st.binary(max_size=300),
            st.just(b""),
            st.none(),
            _ASCII,
            st.just(bytearray(b"{}")),
            st.dictionaries(_ASCII, _ASCII, max_size=3),  # (form-encoded by botocore)
            st.binary(max_size=50).map(io.BytesIO),
        )
    )
    request = AWSRequest(
        method=draw(st.sampled_from(["POST", "GET", "post"])),
        url=f"{scheme}://{host}{port}{path}{query}",
        params=draw(st.dictionaries(_ASCII, _ASCII, max_size=2)),
    )
    request.data = body
    for name, value in draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=8)):
        request.headers[name] = value  # (email.message appends: a name may repeat)
    context: dict[str, Any] = {}
    if draw(st.booleans()):
        context["payload_signing_enabled"] = draw(st.booleans())
    if draw(st.booleans()):
        context["checksum"] = {
            "request_algorithm": draw(st.sampled_from([{"in": "trailer"}, {"in": "header"}, "crc32"]))
        }
    request.context.update(context)
    return request


def _signed(signer: type[SigV4Auth], requests: list[AWSRequest], credentials: Any, region: str, service: str) -> Any:
    """The headers of `requests` after one `signer` signed each in turn (the first twice, as a retry signs it
    again), or the error it raised."""
    auth = signer(credentials, service, region)
    try:
        for request in (requests[0], *requests):
            auth.add_auth(request)
    except Exception as exc:  # the outcome compared is the exception's type
        return type(exc)
    return [
        (list(request.headers.raw_items()), request.context.get("timestamp"), _position(request.data))
        for request in requests
    ]


def _position(body: Any) -> int | None:
    """Where a file-like body's reading stands (signing must leave it where it was)."""
    return body.tell() if isinstance(body, io.BytesIO) else None


@settings(PROFILE, max_examples=examples(400))
@given(
    requests=st.lists(_requests(), min_size=1, max_size=2),
    access_key=st.sampled_from(["AKIDEXAMPLE", "ASIA0000"]),
    secret=_SECRETS,
    token=st.one_of(st.none(), st.just(""), _ASCII),
    region=st.sampled_from(["us-east-1", "eu-west-3"]),
    service=st.sampled_from(["dynamodb", "s3"]),
    when=st.one_of(  # mostly a few days, so that examples share (or must not share) signing keys
        st.sampled_from([datetime.datetime(2026, 12, 4, 10), datetime.datetime(2026, 12, 4, 23, 59, 59)]),
        st.datetimes(min_value=datetime.datetime(2020, 1, 1), max_value=datetime.datetime(2030, 1, 1)),
    ),
    no_credentials=st.integers(0, 9).map(lambda n: n == 0),  # (one in ten: signing then fails at once)
)
def test_requests_are_signed_as_botocore_signs_them(
    requests: list[AWSRequest],
    access_key: str,
    secret: str,
    token: str | None,
    region: str,
    service: str,
    when: datetime.datetime,
    no_credentials: bool,
) -> None:
    credentials = None if no_credentials else ReadOnlyCredentials(access_key, secret, token)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        theirs = _signed(SigV4Auth, copy.deepcopy(requests), credentials, region, service)
        ours = _signed(BatonSigV4Auth, copy.deepcopy(requests), credentials, region, service)
    assert ours == theirs


def test_a_changed_secret_day_or_region_signs_with_a_new_key() -> None:
    def authorization(secret: str, day: int, region: str) -> str:
        request = AWSRequest(method="POST", url="https://dynamodb.us-east-1.amazonaws.com/", data=b"{}")
        with mock.patch.object(botocore.auth, "get_current_datetime", return_value=datetime.datetime(2026, 12, day)):
            BatonSigV4Auth(ReadOnlyCredentials("AKID", secret, None), "dynamodb", region).add_auth(request)
            expected = copy.deepcopy(request)
            del expected.headers["Authorization"]
            SigV4Auth(ReadOnlyCredentials("AKID", secret, None), "dynamodb", region).add_auth(expected)
        assert request.headers["Authorization"] == expected.headers["Authorization"]
        return str(request.headers["Authorization"])

    first = authorization("one", 1, "us-east-1")
    assert authorization("one", 1, "us-east-1") == first
    assert len({first, authorization("two", 1, "us-east-1"), authorization("one", 2, "us-east-1")}) == 3
    assert authorization("one", 1, "eu-west-3") != first
    assert len(signing._keys) <= 4  # the last few keys, never every one


def test_batons_dynamodb_client_signs_with_batons_signer() -> None:
    client = aws.dynamodb_client("http://127.0.0.1:1")
    _, chosen = client.meta.events.emit_until_response(
        "choose-signer.dynamodb.GetItem",
        signing_name="dynamodb",
        region_name="us-east-1",
        signature_version="v4",
        context={"auth_type": "v4"},
    )
    assert chosen == SIGNATURE_VERSION
    assert botocore.auth.AUTH_TYPE_MAPS[SIGNATURE_VERSION] is BatonSigV4Auth
    signer = client._request_signer.get_auth_instance("dynamodb", "us-east-1", chosen)  # type: ignore[attr-defined]
    assert type(signer) is BatonSigV4Auth


@pytest.mark.parametrize(("make", "service"), [(aws.s3_client, "s3"), (aws.events_client, "events")])
def test_other_clients_keep_botocores_signers(make: Callable[[str], Any], service: str) -> None:
    client = make("http://127.0.0.1:1")
    _, chosen = client.meta.events.emit_until_response(
        f"choose-signer.{service}.Operation",
        signing_name=service,
        region_name="us-east-1",
        signature_version="v4",
        context={"auth_type": "v4"},
    )
    assert chosen != SIGNATURE_VERSION


@pytest.mark.parametrize(
    ("signature_version", "context"),
    [
        ("v4a", {"auth_type": "v4a"}),
        ("v4-query", {}),  # a presigned URL
        ("v4", {"auth_type": "v4", "unsigned_payload": True}),
        ("v4", {"auth_type": "v4-unsigned-body"}),
        ("s3v4", {}),
        ("bearer", {"auth_type": "bearer"}),
    ],
)
def test_every_other_signing_is_left_to_botocore(signature_version: str, context: dict[str, Any]) -> None:
    assert choose_signer(signature_version=signature_version, context=context, signing_name="dynamodb") is None
