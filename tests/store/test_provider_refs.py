"""A chat's provider reference (migration 0010): written, read back, replaced."""

from pathlib import Path

from agenthost.store import SqliteStore
from agenthost.store.records import DeleteSession, SaveProviderRef, SaveSession


def test_a_chat_keeps_the_last_provider_reference_written_for_it(db_path: Path) -> None:
    store = SqliteStore(db_path)
    store.open()
    store.apply(
        SaveSession(session_id="s1", provider="p", title="", created_at=1, chat_ids=("c1", "c2"))
    )
    assert store.provider_ref("c1") is None
    store.apply(SaveProviderRef(chat_id="c1", provider_ref="thread-1"))
    store.apply(SaveProviderRef(chat_id="c1", provider_ref="thread-2"))
    store.commit()
    store.close()
    store = SqliteStore(db_path)
    store.open()
    try:
        assert store.provider_ref("c1") == "thread-2"
        assert store.provider_ref("c2") is None
        store.apply(DeleteSession(session_id="s1"))
        assert store.provider_ref("c1") is None
        store.apply(SaveProviderRef(chat_id="gone", provider_ref="x"))  # no such chat: no row
        assert store.provider_ref("gone") is None
    finally:
        store.close()
