"""How a turn's parts and a message's origin become columns and back (store/columns.py)."""

from agenthost.messages.state import (
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
)
from agenthost.store.columns import origin_column, origin_of, parts_column, parts_of


def test_a_turn_whose_parts_are_its_text_alone_keeps_no_parts_and_comes_back_as_part_one() -> None:
    live = (MarkdownPart(id="t-md1", content="hello"),)
    assert parts_column("t", "hello", live) is None
    assert parts_column("t", "hello", None) is None
    assert parts_of("t", "hello", None) == live
    assert parts_of("t", "", None) == ()


def test_parts_that_say_more_than_the_text_come_back_as_they_were() -> None:
    tool = ToolCallPart(
        tool_call=ToolCall(tool_call_id="c", tool_name="shell", status=ToolCallStatus.COMPLETED)
    )
    for parts in (
        (MarkdownPart(id="t-md1", content="a"), tool, MarkdownPart(id="t-md2", content="b")),
        (MarkdownPart(id="other-md1", content="ab"),),  # a forked turn keeps its source's ids
    ):
        column = parts_column("t", "ab", parts)
        assert column is not None
        assert parts_of("t", "ab", column) == parts


def test_an_origin_comes_back_as_it_was_and_user_is_kept_as_null() -> None:
    assert origin_column(MessageOrigin()) is None
    assert origin_of(None) == MessageOrigin()
    for kind in OriginKind:
        assert origin_of(origin_column(MessageOrigin(kind=kind))) == MessageOrigin(kind=kind)
