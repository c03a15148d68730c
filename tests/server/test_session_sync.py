"""The session actions the server derives: reducing `changes(old, new)` from
`old` with the session reducer gives `new`, its status too (through
x-session/statusChanged where no 1.1 action carries it), for any two states;
and the channel state hides the reserved config."""

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.messages.commands import GetSessionViewReply
from agenthost.messages.reducers import reduce_session
from agenthost.messages.session_events import (
    ChatAdded,
    SessionInputNeededSet,
    SessionStatusChanged,
    SessionTitleChanged,
)
from agenthost.messages.state import (
    ActiveClient,
    ChatStatus,
    ChatSummary,
    SessionInputKind,
    SessionInputRequest,
    SessionState,
    SessionSummary,
)
from agenthost.server.session_sync import changes, channel_state, for_version

CHATS = [f"ahp-chat:/c{i}" for i in range(4)]
STATUSES = st.sampled_from([ChatStatus.IDLE, ChatStatus.IN_PROGRESS, ChatStatus.INPUT_NEEDED])
SESSION_STATUSES = (
    ChatStatus.IDLE,
    ChatStatus.IN_PROGRESS,
    ChatStatus.INPUT_NEEDED,
    ChatStatus.ERROR,
)


chat_summaries = st.lists(
    st.builds(
        ChatSummary,
        resource=st.sampled_from(CHATS),
        title=st.sampled_from(["", "a", "b"]),
        status=st.one_of(st.none(), STATUSES),
        activity=st.one_of(st.none(), st.sampled_from(["thinking", "reading"])),
    ),
    max_size=4,
    unique_by=lambda c: c.resource,
).map(tuple)

requests = st.lists(
    st.builds(
        SessionInputRequest,
        kind=st.sampled_from([SessionInputKind.CHAT_INPUT, SessionInputKind.TOOL_CONFIRMATION]),
        id=st.sampled_from(["r1", "r2", "r3"]),
        chat=st.sampled_from(CHATS),
        turn_id=st.one_of(st.none(), st.sampled_from(["t1", "t2"])),
    ),
    max_size=3,
    unique_by=lambda r: r.id,
).map(tuple)


@st.composite
def states(draw: st.DrawFn) -> SessionState:
    chats = draw(chat_summaries)
    title = draw(st.sampled_from(["", "Q3", "Plans"]))
    return SessionState(
        title=title,
        user_titled=bool(title) and draw(st.booleans()),
        read=draw(st.booleans()),
        archived=draw(st.booleans()),
        config=tuple(
            draw(
                st.dictionaries(st.sampled_from(["mode", "model", "x"]), st.sampled_from("ab"))
            ).items()
        ),
        chats=chats,
        default_chat=draw(st.one_of(st.none(), st.sampled_from([c.resource for c in chats])))
        if chats
        else None,
        input_needed=tuple(draw(st.lists(st.sampled_from(["c0", "c1", "c2"]), unique=True))),
        input_requests=draw(requests),
        active_clients=tuple(
            ActiveClient(client_id=c)
            for c in draw(st.lists(st.sampled_from(["k1", "k2", "k3"]), unique=True))
        ),
        activity=draw(st.one_of(st.none(), st.sampled_from(["busy", "idle"]))),
        status=draw(st.sampled_from([*SESSION_STATUSES])),
    )


def _reduced(old: SessionState, new: SessionState) -> SessionState:
    state = old
    for action in changes(old, new):
        state = reduce_session(state, action)
    return state


@settings(deadline=None)  # the shared machine can stall one example past 200 ms
@given(states(), states())
def test_the_derived_actions_carry_any_state_to_any_other(
    old: SessionState, new: SessionState
) -> None:
    # A derived title never replaces one (the host's rule): from a titled state
    # the only title change is the user's.
    if old.title and not new.user_titled and new.title != old.title:
        new = attrs.evolve(new, user_titled=True, title=new.title or "t")
    if old.user_titled and not new.user_titled:
        new = attrs.evolve(new, user_titled=True, title=new.title or "t")
    assert _reduced(old, new) == new


@given(states())
def test_a_state_unchanged_takes_no_action(state: SessionState) -> None:
    assert changes(state, state) == ()


def test_a_status_no_1_1_action_carries_goes_out_as_the_extension() -> None:
    busy = SessionState(status=ChatStatus.IN_PROGRESS)
    assert changes(SessionState(), busy) == (SessionStatusChanged(status=ChatStatus.IN_PROGRESS),)
    failed = SessionState(status=ChatStatus.ERROR)
    assert changes(busy, failed) == (SessionStatusChanged(status=ChatStatus.ERROR),)


def test_a_status_the_1_1_actions_reach_takes_no_extension() -> None:
    request = SessionInputRequest(kind=SessionInputKind.CHAT_INPUT, id="r", chat=CHATS[0])
    waiting = SessionState(status=ChatStatus.INPUT_NEEDED, input_requests=(request,))
    sent = changes(SessionState(status=ChatStatus.IN_PROGRESS), waiting)
    assert sent == (SessionInputNeededSet(request=request),)


def test_a_title_the_host_derives_goes_out_as_a_derived_title() -> None:
    sent = changes(SessionState(), SessionState(title="hello"))
    assert sent == (SessionTitleChanged(title="hello", by_user=False),)


def test_a_chat_whose_field_went_back_to_none_is_set_whole() -> None:
    was = ChatSummary(resource=CHATS[0], activity="busy")
    now = ChatSummary(resource=CHATS[0])
    sent = changes(SessionState(chats=(was,)), SessionState(chats=(now,)))
    assert sent == (ChatAdded(summary=now),)


def test_the_channel_state_hides_reserved_config_and_carries_the_catalog() -> None:
    entry = SessionState(title="Q3", config=(("ahp.owner", "alice"), ("mode", "fast")))
    summary = SessionSummary(
        id="s1", title="Q3", provider="scripted", turn_count=0, status=ChatStatus.IN_PROGRESS
    )
    chats = (ChatSummary(resource="ahp-chat:/c1", status=ChatStatus.IN_PROGRESS),)
    state = channel_state(
        GetSessionViewReply(entry=entry, summary=summary, chats=chats, default_chat="c1")
    )
    assert state.config == (("mode", "fast"),)
    assert state.provider == "scripted" and state.status == ChatStatus.IN_PROGRESS
    assert state.chats == chats and state.default_chat == "ahp-chat:/c1"


def test_peers_before_0_5_1_are_not_shown_the_input_requests() -> None:
    request = SessionInputRequest(kind=SessionInputKind.CHAT_INPUT, id="r", chat=CHATS[0])
    state = SessionState(input_requests=(request,))
    assert for_version(state, "0.5.0").input_requests == ()
    assert for_version(state, "0.5.1").input_requests == (request,)
