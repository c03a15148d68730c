"""Smoke tests of benchmarks/stores.py at a tiny size, on each store: counts, never timings."""

import pytest

from agenthost.store.base import OWNER_KEY
from benchmarks import stores
from tests.fakes.stores import StoreFactory


@pytest.mark.parametrize("way", [stores.batches, stores.group_commit])
def test_each_way_writes_every_row(store_factory: StoreFactory, way: object) -> None:
    ops = stores.turn_ops(30)
    way(stores.with_session(store_factory()), ops)  # type: ignore[operator]
    stored = store_factory.query("SELECT id, seq FROM turns ORDER BY seq")
    assert stored == [(op.turn_id, op.seq) for op in ops]


def test_the_owners_fill_gives_me_about_my_share(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.open()
    try:
        stores.fill_owners(store, others=200)
        page = store.list_sessions_page(owner="me", limit=stores.MINE + 5)
        assert stores.MINE <= len(page.items) <= stores.MINE + 1
        assert all(dict(s.config)[OWNER_KEY] == "me" for s in page.items)
        assert len(store.list_sessions()) == 200 + stores.MINE
    finally:
        store.close()
