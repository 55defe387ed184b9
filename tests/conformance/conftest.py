"""Conformance suites run third-party test suites against Baton over HTTP: they use the `baton serve` (and its moto
server) of tests/e2e, whose session fixtures are imported here."""

from tests.e2e.conftest import baton, moto_endpoint

__all__ = ["baton", "moto_endpoint"]
