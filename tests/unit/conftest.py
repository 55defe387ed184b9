"""Unit tests are pure: no sockets, no AWS."""

from __future__ import annotations

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network() -> object:
    disable_socket()
    yield
    enable_socket()
