"""Input requests: what a chat asks the user (AHP's ChatInputRequest), its
questions, and the draft or submitted answers clients sync while it is open.

One class per concept; a question kind's fields that another kind does not
have are None. Answers are keyed by question id (an object on the wire,
ordered pairs here, one per question).
"""

import attrs

from agenthost.messages.errors import OpenStrEnum
from agenthost.messages.fields import Json, as_object, unique_pairs


class InputQuestionKind(OpenStrEnum):
    TEXT = "text"
    NUMBER = "number"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    SINGLE_SELECT = "single-select"
    MULTI_SELECT = "multi-select"


@attrs.frozen(kw_only=True)
class InputOption:
    """A choice of a select question."""

    id: str
    label: str
    description: str | None = None
    recommended: bool | None = None


@attrs.frozen(kw_only=True)
class InputQuestion:
    """One question of an input request. `min`/`max` bound a text's length, a
    number's value or a multi-select's count; numbers stay as sent (JSON)."""

    id: str
    kind: InputQuestionKind
    message: str
    title: str | None = None
    required: bool | None = None
    format: str | None = None
    min: Json | None = None
    max: Json | None = None
    default_value: Json | None = None
    options: tuple[InputOption, ...] | None = None
    allow_freeform_input: bool | None = None


class AnswerState(OpenStrEnum):
    DRAFT = "draft"
    SUBMITTED = "submitted"
    SKIPPED = "skipped"


class AnswerValueKind(OpenStrEnum):
    TEXT = "text"
    NUMBER = "number"
    BOOLEAN = "boolean"
    SELECTED = "selected"
    SELECTED_MANY = "selected-many"


@attrs.frozen(kw_only=True)
class AnswerValue:
    """What an answer holds: text, a number, a boolean, or selected option ids."""

    kind: AnswerValueKind
    value: Json
    freeform_values: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class InputAnswer:
    """A draft, submitted or skipped answer (a skipped one has no value)."""

    state: AnswerState
    value: AnswerValue | None = None
    freeform_values: tuple[str, ...] | None = None


Answers = tuple[tuple[str, InputAnswer], ...]


def unique_answers(pairs: Answers | None) -> Answers | None:
    """One answer per question id, the last one given winning, in first-seen order."""
    return None if pairs is None else unique_pairs(pairs)


class InputResponseKind(OpenStrEnum):
    """How a client completed an input request."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


@attrs.frozen(kw_only=True)
class ChatInputRequest:
    """A request for user input: a message, a URL to open, or questions."""

    id: str
    message: str | None = None
    url: str | None = None
    questions: tuple[InputQuestion, ...] | None = None
    answers: Answers | None = as_object(default=None, converter=unique_answers)

    def with_answer(self, question_id: str, answer: InputAnswer | None) -> "ChatInputRequest":
        """The request with one answer set, or removed (None); no answers is None."""
        answers = dict(self.answers or ())
        if answer is None:
            answers.pop(question_id, None)
        else:
            answers[question_id] = answer
        return attrs.evolve(self, answers=tuple(answers.items()) or None)

    def with_answers(self, answers: Answers | None) -> "ChatInputRequest":
        """The request with `answers` replacing the ones of the same questions."""
        merged = {**dict(self.answers or ()), **dict(answers or ())}
        return attrs.evolve(self, answers=tuple(merged.items()) or None)


def chosen(question: InputQuestion, answer: InputAnswer | None) -> tuple[str, ...]:
    """What an answer says in words: the labels of the options it selected, the
    freeform text it gave, its text, number or yes/no ("" for none of these)."""
    if answer is None or answer.value is None:
        return ()
    value = answer.value
    labels = {option.id: option.label for option in question.options or ()}
    freeform = tuple(answer.freeform_values or value.freeform_values or ())
    raw = value.value.value
    if value.kind in (AnswerValueKind.SELECTED, AnswerValueKind.SELECTED_MANY):
        ids = raw if isinstance(raw, list) else [raw]
        return tuple(labels.get(str(i), str(i)) for i in ids) + freeform
    if value.kind == AnswerValueKind.BOOLEAN:
        return ("yes" if raw else "no",)
    return (str(raw), *freeform)
