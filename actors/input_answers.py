"""A user's answers to an input request, as AHP has them (an InputAnswer per
question id), from what a caller of `chat.answer` gives.

Pure functions. The surfaces turn plain values into InputAnswers (`given`);
the turn tracker checks them against the request's questions (`resolve`).
Rules:
1. One `answer` text answers the request's first question.
2. A text answer to a select question that names one of its options (by id
   or by label) selects it; other text is freeform, taken only where the
   question allows freeform input or offers no options.
3. An answer to a question the request does not ask is refused, and so is a
   request left with a required question unanswered (skipped counts as not).
"""

from collections.abc import Mapping, Sequence

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.fields import Json
from agenthost.messages.inputs import (
    Answers,
    AnswerState,
    AnswerValue,
    AnswerValueKind,
    InputAnswer,
    InputOption,
    InputQuestion,
    InputQuestionKind,
)

Given = InputAnswer | str | bool | int | float | Sequence[str]
"""What a caller may give for one question."""

SELECTS = (InputQuestionKind.SINGLE_SELECT, InputQuestionKind.MULTI_SELECT)


def given(value: Given) -> InputAnswer:
    """A submitted InputAnswer for a plain value (an InputAnswer as it is)."""
    if isinstance(value, InputAnswer):
        return value
    if isinstance(value, bool):
        return _submitted(AnswerValueKind.BOOLEAN, value)
    if isinstance(value, int | float):
        return _submitted(AnswerValueKind.NUMBER, value)
    if isinstance(value, str):
        return _submitted(AnswerValueKind.TEXT, value)
    return _submitted(AnswerValueKind.SELECTED_MANY, [str(v) for v in value])


def given_all(answers: Mapping[str, Given] | None) -> Answers | None:
    return None if answers is None else tuple((k, given(v)) for k, v in answers.items())


def resolve(
    request_id: str,
    questions: tuple[InputQuestion, ...],
    answer: str | None,
    answers: Answers | None,
) -> Answers | AgentHostError:
    """The answers, checked and normalised against `questions` (the rules above)."""
    if answers is None:
        if answer is None or not questions:
            return _invalid(
                f"request {request_id} asks the user a question: pass answer= or answers="
            )
        answers = ((questions[0].id, given(answer)),)
    by_id = {q.id: q for q in questions}
    resolved: list[tuple[str, InputAnswer]] = []
    for question_id, value in answers:
        question = by_id.get(question_id)
        if question is None:
            return _invalid(f"request {request_id} asks no question {question_id!r}")
        normal = _normalised(question, value)
        if isinstance(normal, AgentHostError):
            return normal
        resolved.append((question_id, normal))
    answered = {qid for qid, a in resolved if a.state == AnswerState.SUBMITTED}
    missing = [q.id for q in questions if q.required and q.id not in answered]
    if missing:
        return _invalid(f"request {request_id}: question {missing[0]!r} needs an answer")
    return tuple(resolved)


def _normalised(question: InputQuestion, answer: InputAnswer) -> InputAnswer | AgentHostError:
    """A select question's answer as option ids, with freeform text apart (rule 2)."""
    value = answer.value
    if value is None or question.kind not in SELECTS:
        return answer
    raw = value.value.value
    picked = [str(v) for v in raw] if isinstance(raw, list) else [str(raw)]
    options = question.options or ()
    ids: list[str] = []
    freeform: list[str] = list(answer.freeform_values or value.freeform_values or ())
    for text in picked:
        option = _option(options, text)
        if option is not None:
            ids.append(option.id)
        elif options and not question.allow_freeform_input:
            return _invalid(f"{text!r} is not one of the choices of question {question.id!r}")
        else:
            freeform.append(text)
    if question.kind == InputQuestionKind.MULTI_SELECT:
        many = _value(AnswerValueKind.SELECTED_MANY, ids)
        return InputAnswer(state=answer.state, value=many, freeform_values=tuple(freeform) or None)
    if len(ids) + len(freeform) != 1:
        return _invalid(f"question {question.id!r} takes one choice")
    if ids:
        return InputAnswer(state=answer.state, value=_value(AnswerValueKind.SELECTED, ids[0]))
    return InputAnswer(state=answer.state, value=_value(AnswerValueKind.TEXT, freeform[0]))


def _option(options: Sequence[InputOption], text: str) -> InputOption | None:
    return next((o for o in options if text in (o.id, o.label)), None)


def _submitted(kind: AnswerValueKind, value: object) -> InputAnswer:
    return InputAnswer(state=AnswerState.SUBMITTED, value=_value(kind, value))


def _value(kind: AnswerValueKind, value: object) -> AnswerValue:
    return AnswerValue(kind=kind, value=Json.of(value))


def _invalid(message: str) -> AgentHostError:
    return AgentHostError(code=ErrorCode.INVALID_ARGUMENT, message=message)
