"""Where an upgrade request carries its bearer token (server/auth.py)."""

import pytest
from aiohttp.test_utils import make_mocked_request

from agenthost.server.auth import bearer_protocol, bearer_token


@pytest.mark.parametrize("token", ["t" * 32, "tökén-with/slashes+plus=", "a"])
def test_a_token_offered_as_a_subprotocol_is_read_back_whole(token: str) -> None:
    offered = f"agenthost, {bearer_protocol(token)}"
    request = make_mocked_request("GET", "/ahp", headers={"Sec-WebSocket-Protocol": offered})
    assert bearer_token(request) == token
    assert set(bearer_protocol(token)) <= set(
        "agenthost.bearer" + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )


def test_the_header_comes_first_then_the_subprotocol_then_the_query() -> None:
    both = {"Authorization": "Bearer from-header", "Sec-WebSocket-Protocol": bearer_protocol("p")}
    assert bearer_token(make_mocked_request("GET", "/ahp?token=q", headers=both)) == "from-header"
    protocol = {"Sec-WebSocket-Protocol": bearer_protocol("p")}
    assert bearer_token(make_mocked_request("GET", "/ahp?token=q", headers=protocol)) == "p"
    assert bearer_token(make_mocked_request("GET", "/ahp?token=q")) == "q"
    assert bearer_token(make_mocked_request("GET", "/ahp")) == ""


def test_a_subprotocol_that_is_no_token_carries_none() -> None:
    garbled = {"Sec-WebSocket-Protocol": "agenthost, agenthost.bearer.%%%"}
    assert bearer_token(make_mocked_request("GET", "/ahp", headers=garbled)) == ""
    undecodable = {"Sec-WebSocket-Protocol": "agenthost.bearer.__8"}  # not UTF-8
    assert bearer_token(make_mocked_request("GET", "/ahp", headers=undecodable)) == ""
