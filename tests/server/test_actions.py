"""The client action tables: which typed actions a client may dispatch, and the
older forms the server still takes."""

from agenthost.messages import rpc
from agenthost.messages.events import InputCompleted, PendingMessageRemoved, ToolCallCompleted
from agenthost.messages.fields import Json
from agenthost.messages.inputs import InputResponseKind
from agenthost.messages.session_events import SessionReady
from agenthost.server.actions import (
    CHAT_ACTIONS,
    SESSION_ACTIONS,
    _tool_result_text,
    older_shapes,
)

CHAT = "ahp-chat:/c1"


def decoded(action: dict[str, object]) -> object:
    params = {"channel": CHAT, "clientSeq": 1, "action": action}
    return rpc.decode_params("dispatchAction", older_shapes(params)).action


def test_an_answer_in_the_form_before_0_5_is_an_accepted_input_completion() -> None:
    action = decoded({"type": "chat/inputCompleted", "requestId": "r1", "answer": "main.py"})
    assert isinstance(action, InputCompleted)
    assert action.request_id == "r1" and action.response is InputResponseKind.ACCEPT
    [(_, answer)] = action.answers or ()
    assert answer.value is not None and answer.value.value.value == "main.py"


def test_a_removal_naming_its_message_by_pending_id_is_read_by_id() -> None:
    action = decoded({"type": "chat/pendingMessageRemoved", "kind": "queued", "pendingId": "q1"})
    assert isinstance(action, PendingMessageRemoved) and action.pending_id == "q1"


def test_an_action_in_todays_form_passes_unchanged() -> None:
    params = {"channel": CHAT, "clientSeq": 1, "action": {"type": "chat/turnCancelled"}}
    assert older_shapes(params) is params


def test_only_client_actions_have_handlers() -> None:
    assert all(not t.wire_type.startswith("x-") for t in (*CHAT_ACTIONS, *SESSION_ACTIONS))
    assert SessionReady not in SESSION_ACTIONS
    assert {t.wire_type for t in SESSION_ACTIONS} == {
        "session/titleChanged",
        "session/isReadChanged",
        "session/isArchivedChanged",
        "session/configChanged",
        "session/customizationToggled",
        "session/activeClientSet",
        "session/activeClientRemoved",
    }


def test_no_refused_action_has_a_handler() -> None:
    from agenthost.server.refusals import REFUSED

    assert not set(REFUSED) & {*CHAT_ACTIONS, *SESSION_ACTIONS}


def test_a_client_tools_result_is_its_text_content_or_its_json() -> None:
    def result(**fields: object) -> str:
        return _tool_result_text(ToolCallCompleted(turn_id="t", tool_call_id="c", **fields))  # type: ignore[arg-type]

    texts = Json.of([{"type": "text", "text": "<ht"}, {"type": "text", "text": "ml>"}])
    assert result(content=texts) == "<html>"
    assert result(structured_content=Json.of({"a": 1})) == '{"a":1}'
    assert result(content=Json.of([{"type": "image"}])) == '[{"type": "image"}]'
    assert result() == ""
