"""Provider connections restart on failure, a bounded number of times."""

from pathlib import Path

from agenthost.actors import Host, RestartPolicy, use_runtime
from agenthost.actors.protocol import ConnectionReady
from agenthost.messages import ErrorCode, OutcomeState
from agenthost.providers.scripted import Crash, Say, ScriptedProvider
from agenthost.store import SqliteStore
from agenthost.testing import DeterministicRunner, FakeClock


def test_a_connection_restarts_until_the_intensity_limit_then_the_provider_is_unavailable(
    db_path: Path,
) -> None:
    clock = FakeClock()
    provider = ScriptedProvider().on("boom", Say("x"), Crash())
    policy = RestartPolicy(intensity=2, period=60, backoff_min=1.0, backoff_max=4.0)
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": provider},
            clock=clock,
            restart_policy=policy,
            # The cool-down is the default idle period: the session would leave
            # memory just as its provider comes back, which is not what this tests.
            idle_release_s=policy.cooldown * 10,
        )
        session = host.create_session()
        chat = session.chat()

        first = chat.send("boom").result(timeout=10)
        assert first.error is not None and first.error.code is ErrorCode.EXECUTION_ABANDONED
        assert (
            chat.send("fine").result(timeout=10).state is OutcomeState.COMPLETE
        )  # restarted at once

        second = chat.send("boom").result(timeout=10)
        assert second.error is not None and second.error.code is ErrorCode.EXECUTION_ABANDONED
        waiting = chat.send("boom")  # no connection until the backoff elapses
        runner.run()
        assert not waiting.done()
        clock.advance(4.0)
        third = waiting.result(timeout=10)  # its producer died: abandoned, as the others
        assert third.error is not None and third.error.code is ErrorCode.EXECUTION_ABANDONED

        refused = chat.send("anything").result(timeout=10)  # past the limit: fails at once
        assert refused.error is not None and refused.error.code is ErrorCode.PROVIDER_UNAVAILABLE
        assert "failed 3 times within 60 s" in refused.error.message

        seen = len(runner.history)
        clock.advance(policy.cooldown)  # the provider comes back after its cool-down
        runner.run(
            until=lambda: any(isinstance(d.message, ConnectionReady) for d in runner.history[seen:])
        )
        assert chat.send("back").result(timeout=10).state is OutcomeState.COMPLETE
        assert [s.id for s in host.list_sessions()] == [session.id]
        assert len(chat.state().turns) == 6
        host.stop()


def test_a_send_right_after_the_cool_down_waits_for_the_provider_to_reconnect(
    db_path: Path,
) -> None:
    """Once the cool-down passed, the provider is being started again: a turn sent
    before it reconnected waits for it (as after any restart), never refused as
    unavailable."""
    clock = FakeClock()
    provider = ScriptedProvider().on("boom", Say("x"), Crash())
    policy = RestartPolicy(intensity=1, period=60, backoff_min=0.0, backoff_max=0.0, cooldown=30)
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": provider},
            clock=clock,
            restart_policy=policy,
        )
        chat = host.create_session().chat()
        for _ in range(2):
            assert chat.send("boom").result(timeout=10).state is OutcomeState.ERROR
        refused = chat.send("anything").result(timeout=10)
        assert refused.error is not None and refused.error.code is ErrorCode.PROVIDER_UNAVAILABLE
        runner.run()
        clock.advance(policy.cooldown)  # the restart is due; nothing delivered it yet
        outcome = chat.send("back").result(timeout=10)
        assert outcome.state is OutcomeState.COMPLETE, outcome.error
        host.stop()


def test_a_provider_is_unavailable_while_a_connection_of_it_cools_down_and_watchers_hear_both_ends(
    db_path: Path,
) -> None:
    clock = FakeClock()
    provider = ScriptedProvider().on("boom", Say("x"), Crash())
    policy = RestartPolicy(intensity=1, period=60, backoff_min=0.0, backoff_max=0.0, cooldown=30)
    heard: list[frozenset[str]] = []
    with use_runtime(DeterministicRunner()) as runner:
        host = Host.start(
            store=SqliteStore(db_path),
            providers={"scripted": provider},
            clock=clock,
            restart_policy=policy,
        )
        host.on_providers_changed(heard.append)
        chat = host.create_session().chat()
        assert chat.send("boom").result(timeout=10).state is OutcomeState.ERROR  # restarted
        assert host.unavailable_providers() == frozenset() and heard == []
        assert chat.send("boom").result(timeout=10).state is OutcomeState.ERROR  # past the limit
        assert host.unavailable_providers() == {"scripted"}
        assert heard == [frozenset({"scripted"})]
        runner.run()
        clock.advance(policy.cooldown)
        runner.run()
        assert host.unavailable_providers() == frozenset()
        assert heard == [frozenset({"scripted"}), frozenset()]
        host.stop()


def test_provider_health_reports_only_the_changes_of_availability() -> None:
    from agenthost.actors.context import ProviderHealth

    health = ProviderHealth()
    heard: list[frozenset[str]] = []
    stop = health.watch(heard.append)
    health.cooling("a", +1)
    health.cooling("a", +1)  # a second connection of it: still the same news
    health.cooling("b", +1)
    health.cooling("a", -1)
    assert heard == [frozenset({"a"}), frozenset({"a", "b"})]
    health.cooling("a", -1)
    assert heard[-1] == frozenset({"b"}) and health.unavailable() == {"b"}
    stop()
    health.cooling("b", -1)
    assert len(heard) == 3
