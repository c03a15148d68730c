"""The scripted provider keeps only its latest records of what it was sent."""

from collections.abc import Callable

from agenthost.actors import Host
from agenthost.providers.scripted import ScriptedProvider


def test_the_scripted_provider_keeps_only_its_latest_records(
    start_host: Callable[..., Host],
) -> None:
    kept = ScriptedProvider(records=2)
    chat = start_host(kept).create_session().chat()
    for text in ("one", "two", "three"):
        chat.send(text).result(timeout=10)
    assert kept.model_inputs == ["two", "three"]
    assert kept.prompts == ["two", "three"]
