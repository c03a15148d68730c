"""Hypothesis strategies for the message types (registered once, for every test
that draws them with st.from_type)."""

from hypothesis import strategies as st

from agenthost.messages import AgentHostError, ChatState, ErrorCode
from agenthost.messages.common import Unknown
from agenthost.messages.customizations import Customization
from agenthost.messages.fields import Json
from agenthost.messages.state import ClientTool

text = st.text(max_size=20)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
# A variant from a newer peer: its discriminator (`kind` or `type`) is one no
# union here knows, and it carries fields of its own.
unknown_variants = st.builds(
    lambda extra: Unknown(data=Json.of({**extra, "kind": "x-future", "type": "x-future"})),
    st.dictionaries(st.sampled_from(["detail", "payload", "n"]), json_values, max_size=2),
)

st.register_type_strategy(
    AgentHostError,
    st.builds(
        AgentHostError, code=st.sampled_from(ErrorCode), message=text, resumable=st.booleans()
    ),
)
st.register_type_strategy(
    ChatState,
    st.builds(ChatState, modified_at=st.integers(0, 253_402_300_799_999)),  # up to year 9999
)
st.register_type_strategy(float, st.floats(allow_nan=False, allow_infinity=False))  # JSON numbers
st.register_type_strategy(Json, st.builds(Json.of, json_values.filter(lambda v: v is not None)))
st.register_type_strategy(Unknown, unknown_variants)
st.register_type_strategy(
    ClientTool,
    st.builds(
        ClientTool,
        parameters=json_values.filter(lambda v: v is not None).map(lambda v: Json.of(v).text),
    ),
)
# A customization's children are customizations: one level deep is enough.
_leaf_customizations = st.builds(Customization, children=st.none())
st.register_type_strategy(
    Customization,
    st.builds(
        Customization,
        children=st.none()
        | st.lists(_leaf_customizations | unknown_variants, max_size=2).map(tuple),
    ),
)
