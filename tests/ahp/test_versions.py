"""Protocol version negotiation (messages/versions.py): upstream's rule, the
highest offered version within a supported baseline's caret range, answered
as the client spelled it; and which actions each version knows."""

import pytest

from agenthost.messages.errors import ValidationError
from agenthost.messages.versions import (
    BASELINES,
    knows_action,
    knows_notification,
    negotiate,
    steering_list,
    supported_versions,
    turns_by_cursor,
)

UPSTREAM = ("1.0.0", "0.9.0")

# (offered, what upstream's baselines pick, what agenthost's pick): the rows
# without a 0.5 version match upstream's version-negotiation table.
TABLE = [
    ([], None, None),
    (["0.9.0"], "0.9.0", "0.9.0"),
    (["0.9.0", "0.9.4"], "0.9.4", "0.9.4"),
    (["0.9.4", "0.9.0"], "0.9.4", "0.9.4"),
    (["0.9.10", "0.9.9"], "0.9.10", "0.9.10"),
    (["0.9.2", "0.9.2"], "0.9.2", "0.9.2"),
    (["0.10.0", "0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"], "0.9.0", "0.9.0"),
    (["1.0.0", "0.10.0", "0.9.0"], "1.0.0", "1.0.0"),
    (["0.9.0", "1.0.0"], "1.0.0", "1.0.0"),
    (["1.4.0", "1.10.0"], "1.10.0", "1.10.0"),
    (["1.0.0"], "1.0.0", "1.0.0"),
    (["2.0.0", "0.10.0", "0.9.1"], "0.9.1", "0.9.1"),
    (["2.0.0", "0.10.0", "0.8.99"], None, None),
    (["0.10.0"], None, None),
    (
        ["0.9.99999999999999999999", "0.9.100"],
        "0.9.99999999999999999999",
        "0.9.99999999999999999999",
    ),
    (
        ["1.99999999999999999999.0", "1.100.0", "0.9.0"],
        "1.99999999999999999999.0",
        "1.99999999999999999999.0",
    ),
    # the client trees the issue read: the 0.5 line, and 1.x
    (["0.5.0", "0.4.0", "0.3.0"], None, "0.5.0"),
    (["0.5.1", "0.5.0"], None, "0.5.1"),
    (["0.5.2", "0.5.1"], None, "0.5.2"),
    (["0.8.0", "0.5.2"], None, "0.5.2"),
    (["1.1.0", "1.0.0", "0.9.0"], "1.1.0", "1.1.0"),
    (["1.2.0"], "1.2.0", "1.2.0"),  # the version offered, not one of ours
    (["0.4.0", "0.3.0"], None, None),
    (["0.6.0", "0.7.0"], None, None),
]


@pytest.mark.parametrize(("offered", "upstream", "ours"), TABLE, ids=str)
def test_negotiation_picks_the_highest_offered_version_a_baseline_covers(
    offered: list[str], upstream: str | None, ours: str | None
) -> None:
    assert negotiate(offered, UPSTREAM) == upstream
    assert negotiate(offered) == ours
    assert ours is None or ours in offered


MALFORMED = [
    ["0.9"],
    ["0.9.0.0"],
    ["00.9.0"],
    ["0.09.0"],
    ["0.9.01"],
    ["0.9.0-beta"],
    ["0.9.0+build"],
    [" 0.9.0"],
    ["0.9.0\n"],
    ["0.-1.0"],
    ["v0.9.0"],
    [""],
    ["0.٩.0"],  # a digit, but not an ASCII one
    ["0.9.0", "invalid"],
    ["invalid", "0.9.0"],
    ["1.0.0", "1.0"],
    [9],
    [None],
    [{"version": "0.9.0"}],
]


@pytest.mark.parametrize("offered", MALFORMED, ids=str)
def test_a_malformed_version_is_an_error_naming_it_even_beside_a_good_one(offered: list) -> None:
    with pytest.raises(ValidationError) as caught:
        negotiate(offered)
    bad = next(i for i, v in enumerate(offered) if v not in ("0.9.0", "1.0.0"))
    assert caught.value.field == f"protocolVersions[{bad}]"


def test_an_offer_that_is_not_a_list_is_an_error() -> None:
    with pytest.raises(ValidationError) as caught:
        negotiate("1.0.0")
    assert caught.value.field == "protocolVersions"


def test_the_refusal_names_a_caret_range_per_baseline() -> None:
    assert supported_versions() == tuple(f"^{b}" for b in BASELINES)
    assert supported_versions(UPSTREAM) == ("^1.0.0", "^0.9.0")


def test_the_negotiated_version_decides_the_shapes_that_moved() -> None:
    assert not turns_by_cursor("0.5.0") and turns_by_cursor("0.5.1")
    assert not steering_list("1.0.0") and steering_list("1.1.0")
    assert not knows_action("0.5.0", "session/inputNeededSet")
    assert knows_action("0.5.1", "session/inputNeededSet")
    assert not knows_action("0.5.2", "chat/turnResume") and knows_action("0.9.0", "chat/turnResume")
    assert knows_action("0.4.0", "x-chat/requestOpened")  # extensions are never gated
    assert not knows_notification("1.0.0", "channel/frame")
    assert knows_notification("1.1.0", "channel/frame")


def test_a_peer_is_sent_the_actions_its_version_knows_and_a_question_once() -> None:
    from agenthost.messages.versions import sent_to

    question = {"type": "x-chat/requestOpened", "request": {"kind": "user_input"}}
    permission = {"type": "x-chat/requestOpened", "request": {"kind": "permission"}}
    closed = {"type": "x-chat/requestClosed", "requestId": "r", "kind": "user_input"}
    resume = {"type": "chat/turnResume", "turnId": "t"}
    assert not sent_to("1.1.0", question) and not sent_to("1.1.0", closed)
    assert sent_to("1.1.0", permission) and sent_to("1.1.0", resume)
    assert not sent_to("0.5.0", resume) and sent_to("0.9.0", resume)
    assert sent_to("0.3.0", question) and sent_to("0.3.0", closed)  # no input requests before 0.4
    assert sent_to(None, question)  # not negotiated: nothing is left out
