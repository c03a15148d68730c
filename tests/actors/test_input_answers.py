"""actors/input_answers.py: a user's answers checked against the questions."""

from agenthost.actors.input_answers import given, resolve
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.inputs import (
    AnswerState,
    AnswerValueKind,
    InputAnswer,
    InputOption,
    InputQuestion,
    InputQuestionKind,
    chosen,
)

OPTIONS = (InputOption(id="a", label="Apple"), InputOption(id="b", label="Banana"))
ONE = InputQuestion(id="one", kind=InputQuestionKind.SINGLE_SELECT, message="?", options=OPTIONS)
MANY = InputQuestion(id="many", kind=InputQuestionKind.MULTI_SELECT, message="?", options=OPTIONS)
TEXT = InputQuestion(id="text", kind=InputQuestionKind.TEXT, message="?", required=True)


def kind_and_value(answers: object, question_id: str) -> tuple[AnswerValueKind, object]:
    assert not isinstance(answers, AgentHostError), answers
    answer = dict(answers)[question_id]  # type: ignore[call-overload]
    assert answer.value is not None
    return answer.value.kind, answer.value.value.value


def test_one_text_answers_the_first_question() -> None:
    assert kind_and_value(resolve("r", (TEXT, ONE), "hi", None), "text") == (
        AnswerValueKind.TEXT,
        "hi",
    )


def test_a_choice_named_by_its_label_or_id_is_selected_by_id() -> None:
    for text in ("Banana", "b"):
        answers = resolve("r", (ONE,), text, None)
        assert kind_and_value(answers, "one") == (AnswerValueKind.SELECTED, "b")


def test_several_choices_are_selected_many() -> None:
    answers = resolve("r", (MANY,), None, (("many", given(["Apple", "b"])),))
    assert kind_and_value(answers, "many") == (AnswerValueKind.SELECTED_MANY, ["a", "b"])


def test_text_outside_the_choices_is_refused_unless_freeform_is_allowed() -> None:
    refused = resolve("r", (ONE,), "Cherry", None)
    assert isinstance(refused, AgentHostError) and refused.code is ErrorCode.INVALID_ARGUMENT
    free = InputQuestion(
        id="one",
        kind=InputQuestionKind.SINGLE_SELECT,
        message="?",
        options=OPTIONS,
        allow_freeform_input=True,
    )
    assert kind_and_value(resolve("r", (free,), "Cherry", None), "one") == (
        AnswerValueKind.TEXT,
        "Cherry",
    )


def test_a_single_choice_takes_one() -> None:
    refused = resolve("r", (ONE,), None, (("one", given(["a", "b"])),))
    assert isinstance(refused, AgentHostError)


def test_an_unknown_question_or_a_required_one_unanswered_is_refused() -> None:
    unknown = resolve("r", (TEXT,), None, (("nope", given("x")),))
    assert isinstance(unknown, AgentHostError) and "nope" in unknown.message
    skipped = InputAnswer(state=AnswerState.SKIPPED)
    missing = resolve("r", (TEXT, ONE), None, (("one", given("a")), ("text", skipped)))
    assert isinstance(missing, AgentHostError) and "'text'" in missing.message


def test_plain_values_become_submitted_answers_of_their_kind() -> None:
    assert given(True).value is not None and given(True).value.kind == AnswerValueKind.BOOLEAN
    assert given(3).value is not None and given(3).value.kind == AnswerValueKind.NUMBER
    assert given("x").state == AnswerState.SUBMITTED


def test_an_answer_in_words_is_its_choices_labels() -> None:
    answers = resolve("r", (MANY,), None, (("many", given(["a", "b"])),))
    assert not isinstance(answers, AgentHostError)
    assert chosen(MANY, dict(answers)["many"]) == ("Apple", "Banana")
