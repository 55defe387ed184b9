"""Schemathesis hooks for the run against `baton serve` (loaded through tests/e2e/schemathesis.toml).

The run may revoke only the keys it created itself: listing keys shows other key ids (its own key's among them),
and revoking its own key would turn the rest of the run into 401s, or another key into a broken test elsewhere.

A case with a negative part is judged negative, as schemathesis' own revalidation judges it (its 4.32.5 coverage
phase can label one positive), and must then be refused. (An integer written with a fraction, `3600.0`, is an
integer to JSON Schema and to Baton alike: JSON has one number type.)

The run counts what it sent of the request headers Baton reads and what came back, and writes the counts to the file
named by `BATON_SCHEMATHESIS_HEADER_COUNTS` when it ends (the test checks the headers were fuzzed at all).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
from collections import Counter
from typing import Any

import schemathesis
from schemathesis.generation import GenerationMode

KEY_ID = re.compile(r"key_[0-9a-f]{32}\Z")
CREATED_KEYS: set[str] = set()
"""Key ids this run minted with `POST /v1/keys`."""
FUZZED_HEADERS = ("If-Match", "If-None-Match", "Idempotency-Key")
HEADER_COUNTS: Counter[str] = Counter()
"""`<header> sent`, `<header> <status>` and `Idempotent-Replayed`: how often each was sent, and its answers."""


def _write_header_counts() -> None:
    path = os.environ.get("BATON_SCHEMATHESIS_HEADER_COUNTS")
    if path:
        with open(path, "w", encoding="utf-8") as counts:
            json.dump(HEADER_COUNTS, counts)


atexit.register(_write_header_counts)


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Remember every key the run creates; count the fuzzed request headers and their answers."""
    sent = {name.lower() for name in (case.headers or {})}
    for name in FUZZED_HEADERS:
        if name.lower() in sent:
            HEADER_COUNTS[f"{name} sent"] += 1
            HEADER_COUNTS[f"{name} {response.status_code}"] += 1
    if response.headers.get("idempotent-replayed"):
        HEADER_COUNTS["Idempotent-Replayed"] += 1
    if case.method.upper() == "POST" and case.path == "/v1/keys" and response.status_code == 201:
        CREATED_KEYS.add(response.json()["data"]["key_id"])


def judge_a_case_with_a_negative_part_as_negative(case: Any) -> None:
    """Label a case negative when any of its parts is, as schemathesis' own revalidation of a case does.

    The coverage phase draws header values from letters and digits only, so a header whose pattern needs another
    character (If-Match needs `*` or `"`) gets no positive value there; it then seeds that optional header with a
    negative value (`If-Match: 0`) and still labels the "Default positive test case" built on it positive, whose
    metadata says the header part is negative. Judged as what it is, the request must be refused (it is, with 400).
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if any(not part.mode.is_positive for part in meta.components.values()):
        meta.generation.mode = GenerationMode.NEGATIVE


def leave_out_resources_of_a_positive_save(case: Any) -> None:
    """A save's `resources` must name blobs declared and uploaded before (server-side state, api-v1.md Blobs), with
    unique names and ids: no generated value does, so a schema-valid save with resources is rightly a 400. Positive
    cases are sent without them (negative ones keep theirs: those must be refused); attaching is proven by the blob
    suites (tests/integration/test_resources.py, tests/e2e/test_blobs.py)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    is_save = case.method.upper() == "POST" and case.path == "/v1/checkpoints"
    if is_save and isinstance(case.body, dict) and case.body.get("resources"):
        case.body = {**case.body, "resources": []}


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    """Judge mislabelled cases as what they are; point a revocation of a key the run did not create at a
    well-formed id no key has (a 404 instead)."""
    judge_a_case_with_a_negative_part_as_negative(case)
    leave_out_resources_of_a_positive_save(case)
    if case.method.upper() != "DELETE" or case.path != "/v1/keys/{key_id}":
        return
    key_id = (case.path_parameters or {}).get("key_id")
    if isinstance(key_id, str) and KEY_ID.match(key_id) and key_id not in CREATED_KEYS:
        case.path_parameters["key_id"] = "key_" + secrets.token_hex(16)
