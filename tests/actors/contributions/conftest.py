"""Fixtures and helpers of the contribution tests."""

from collections.abc import Callable
from typing import Any

import pytest

from agenthost.actors import Host

Start = Callable[..., Host]


@pytest.fixture
def start(start_host: Start) -> Start:
    return start_host


def settled(chat: Any) -> None:
    """A round trip through the chat: what it told its session before is in the
    session's mailbox ahead of our next ask."""
    chat.state()
