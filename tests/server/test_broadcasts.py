"""Listeners and the wire views: a root notification reaches only its
identity's connections, a session action is sequenced once for all of them,
and a listed session carries AHP's required fields."""

from typing import Any

from agenthost.messages.commands import GetSessionViewReply
from agenthost.messages.protocol import SessionAddedParams
from agenthost.messages.session_events import SessionTitleChanged
from agenthost.messages.state import ChatStatus, ChatSummary, SessionState, SessionSummary
from agenthost.messages.wire import to_wire
from agenthost.server.broadcasts import Listeners
from agenthost.server.channels import ROOT, Sequencer
from agenthost.server.session_sync import channel_state
from agenthost.server.views import listed


class Inbox:
    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def offer(self, message: dict[str, Any]) -> None:
        self.frames.append(message)

    def leave(self, uri: str) -> None:
        pass


SUMMARY = SessionSummary(
    id="s1", title="Q3", provider="scripted", turn_count=2, created_at=1000, unread=True
)


def test_a_root_notification_reaches_only_its_identitys_connections() -> None:
    listeners = Listeners(Sequencer(10))
    alice, bob = Inbox(), Inbox()
    listeners.join("alice", ROOT, alice)
    listeners.join("bob", ROOT, bob)
    listeners.root(
        "alice", "root/sessionAdded", SessionAddedParams(channel=ROOT, summary=listed(SUMMARY))
    )
    assert [f["method"] for f in alice.frames] == ["root/sessionAdded"] and bob.frames == []
    listeners.leave("alice", ROOT, alice)
    assert not listeners.on_root("alice") and len(listeners) == 1


def test_a_session_action_is_sequenced_once_and_sent_to_each_subscriber() -> None:
    sequencer = Sequencer(10)
    listeners = Listeners(sequencer)
    first, second = Inbox(), Inbox()
    for inbox in (first, second):
        listeners.join("alice", "ahp-session:/s1", inbox)
    listeners.session_action("s1", SessionTitleChanged(title="Q3"))
    assert first.frames == second.frames
    assert first.frames[0]["params"] == {
        "channel": "ahp-session:/s1",
        "action": {"type": "session/titleChanged", "title": "Q3"},
        "serverSeq": 1,
    }
    assert sequencer.seq == 1


def test_a_listed_session_has_the_fields_ahp_requires() -> None:
    wire = to_wire(listed(SUMMARY))
    assert wire["resource"] == "ahp-session:/s1"
    assert wire["status"] == ChatStatus.IDLE  # unread: no IsRead bit
    assert wire["createdAt"] == wire["modifiedAt"] == "1970-01-01T00:00:01.000Z"
    assert (wire["turnCount"], wire["inputNeeded"]) == (2, False)


def test_a_session_state_hides_the_servers_own_config() -> None:
    summary = SessionSummary(
        id="s1", title="", provider="p", turn_count=0, config=(("ahp.owner", "a"), ("m", "x"))
    )
    entry = SessionState(config=summary.config)
    chats = tuple(ChatSummary(resource=f"ahp-chat:/{c}") for c in ("c1", "c2"))
    view = GetSessionViewReply(entry=entry, summary=summary, chats=chats, default_chat="c1")
    wire = to_wire(channel_state(view))
    assert wire["config"]["values"] == {"m": "x"}  # the owner's key hidden
    assert wire["config"]["schema"]["additionalProperties"] == {"type": "string"}
    assert wire["defaultChat"] == "ahp-chat:/c1"
    assert [c["resource"] for c in wire["chats"]] == ["ahp-chat:/c1", "ahp-chat:/c2"]
