"""Unit tests are pure: no sockets, no AWS."""

from __future__ import annotations

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network() -> object:
    disable_socket()
    yield
    enable_socket()


class Sleeps(list[float]):
    """The SDK's injected sleep (tests of its retries): records every wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
