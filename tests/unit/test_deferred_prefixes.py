"""Which deferred routers a request's path asks for (`api/resolver.py`): the one search each request makes finds
exactly what testing each router's prefixes would, so a request never misses the router of its route."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from baton_checkpoints.api.app import DEFERRED_ROUTERS
from baton_checkpoints.api.resolver import API_ROOT, _asking_for, _holds
from tests.unit.hypothesis_profiles import active_profile, examples

PROFILE = active_profile()
PREFIXES = [prefix for _, *prefixes in DEFERRED_ROUTERS for prefix in prefixes]
SEGMENTS = st.sampled_from(["", "v1", "prod", "checkpoints", "lease", "threads", "oauth", "mcp", "x-1", "console"])
PATHS = st.one_of(
    st.lists(SEGMENTS, max_size=5).map(lambda parts: "/" + "/".join(parts)),
    st.sampled_from([prefix for prefix in PREFIXES if prefix != API_ROOT]).flatmap(
        lambda prefix: st.tuples(st.text(max_size=8), st.text(max_size=8)).map(lambda ends: ends[0] + prefix + ends[1])
    ),
    st.text(alphabet="/abv1", max_size=12),
)


@settings(PROFILE, max_examples=examples(500))
@given(PATHS)
def test_the_search_finds_what_each_prefix_finds(path: str) -> None:
    assert bool(_asking_for(PREFIXES).search(path)) == any(_holds(path, prefix) for prefix in PREFIXES)


def test_the_root_stands_for_the_api_address_alone() -> None:
    root = _asking_for([API_ROOT])
    assert [bool(root.search(path)) for path in ("/", "", "/prod", "/prod/", "/v1/keys", "/console/x")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_nothing_deferred_asks_for_nothing() -> None:
    assert _asking_for([]).search("/v1/checkpoints") is None
