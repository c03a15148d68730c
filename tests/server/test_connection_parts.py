"""The connection's plain parts: its rate limit, its outbox, and the errors it
answers with."""

import asyncio

from agenthost.messages.errors import JsonRpcErrorCode, ValidationError
from agenthost.server.connection import Outbox, RateLimit
from agenthost.server.errors import RpcError, invalid_params


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_rate_limit_allows_a_burst_then_its_sustained_rate() -> None:
    clock = Clock()
    limit = RateLimit(rate=2.0, burst=3, now=clock)
    assert [limit.allow() for _ in range(4)] == [True, True, True, False]
    clock.now = 0.5  # one message's worth refilled
    assert [limit.allow() for _ in range(2)] == [True, False]
    clock.now = 100.0  # never more than the burst
    assert [limit.allow() for _ in range(4)] == [True, True, True, False]


def test_an_outbox_refuses_past_its_limit_and_drains_in_order() -> None:
    async def main() -> None:
        outbox = Outbox(limit=2)
        assert outbox.put("1") and outbox.put("2")
        assert not outbox.put("3")
        assert await outbox.get() == "1"
        assert outbox.put("4")
        assert outbox.drain() == ["2", "4"]
        assert len(outbox) == 0

    asyncio.run(main())


def test_an_outbox_refuses_past_its_bytes_until_they_were_sent_and_takes_any_frame_alone() -> None:
    async def main() -> None:
        outbox = Outbox(limit=100, limit_bytes=10)
        assert outbox.put("x" * 25)  # alone in the outbox: queued however large
        assert not outbox.put("y")
        sent = await outbox.get()
        assert not outbox.put("y")  # taken, not yet sent: still counted
        outbox.sent(sent)
        assert outbox.put("y" * 6) and outbox.put("z" * 4)
        assert not outbox.put("w")
        assert outbox.queued_bytes == 10

    asyncio.run(main())


def test_invalid_params_name_the_field_in_the_message_and_the_data() -> None:
    error = invalid_params(ValidationError.of("action.turnId", "expected a string"))
    frame = error.frame(7)
    assert frame["id"] == 7
    assert frame["error"] == {
        "code": JsonRpcErrorCode.INVALID_PARAMS,
        "message": "invalid params: 'action.turnId': expected a string",
        "data": {"field": "action.turnId"},
    }


def test_an_error_frame_for_an_unreadable_request_has_a_null_id() -> None:
    frame = RpcError(JsonRpcErrorCode.PARSE_ERROR, "not JSON").frame(None)
    assert frame == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not JSON"}}
