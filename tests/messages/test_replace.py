"""messages.reduction.replace: attrs.evolve, fast, with the same results."""

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost.messages.reduction import replace
from agenthost.messages.state import ChatState, UserMessage


@given(modified_at=st.integers(min_value=0), title=st.text())
def test_replace_gives_what_evolve_gives(modified_at: int, title: str) -> None:
    state = ChatState(resource="ahp-chat:/c", title="t", draft=UserMessage(text="d").text)
    assert replace(state, modified_at=modified_at, title=title) == attrs.evolve(
        state, modified_at=modified_at, title=title
    )


def test_replace_runs_a_changed_fields_validator() -> None:
    state = ChatState(resource="ahp-chat:/c")
    with pytest.raises(ValueError):
        attrs.evolve(state, modified_at=-1)
    with pytest.raises(ValueError):
        replace(state, modified_at=-1)
