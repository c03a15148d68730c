"""The store actor's batching: a write's ack means committed, and every write
is committed once the mailbox drains, whatever message drained it."""

from agenthost.actors import use_runtime
from agenthost.actors.protocol import Committed, ListSessionRows, Write
from agenthost.actors.store import StoreActor
from agenthost.store.records import SaveSession
from agenthost.testing import DeterministicRunner
from tests.fakes.stores import Acks, StoreFactory


def test_a_listing_right_behind_a_write_still_commits_it_and_sends_its_ack(
    store_factory: StoreFactory,
) -> None:
    # Found through the AHP server: a listSessions that reached the store just
    # behind a chat's last write left that write uncommitted, so the chat never
    # published its turnComplete.
    with use_runtime(DeterministicRunner()) as runner:
        opened = store_factory()
        opened.open()
        store = StoreActor.start(opened)
        acks = Acks.start()
        op = SaveSession(session_id="s", provider="scripted", title="", created_at=0, chat_ids=())
        store.tell(Write(op=op, ack_to=acks, ack=Committed(seq=1)))
        store.tell(ListSessionRows())  # a read in the mailbox behind the write
        runner.run()
        to_store = [type(d.message) for d in runner.history if d.actor == "StoreActor"]
        assert to_store == [Write, ListSessionRows]  # the write did not drain the mailbox
        assert acks.proxy().acks.get() == [Committed(seq=1)]
        assert [s.id for s in store.ask(ListSessionRows())] == ["s"]
