"""Sessions sharded over processes: a front and shards on one shared PostgreSQL store.

Belongs here: the sharded host (`ShardedHost`, `AsyncShardedHost`: the public
surface of actors/, with each session on one shard), the wire between a
front and its shards, a shard's server, and starting shards as Ray actors
(`start_sharded`; `pip install 'agenthost[scale]'`). Importing this package
imports neither ray nor psycopg; starting shards on Ray imports ray.

Invariants (each module states its own):
1. A session is resident on one shard at a time, fenced by its lease in the
   store (store/leases.py); any shard can restore any session.
2. The front holds handles only; what a session is lives on its shard.
3. Ray places and restarts shards; turns, events and replies travel on a
   direct connection between the front and each shard (shards/wire.py).
"""

from agenthost.shards.host import AsyncShardedHost, ShardedHost
from agenthost.shards.serving import ShardOptions, scripted_providers

__all__ = ["AsyncShardedHost", "ShardOptions", "ShardedHost", "scripted_providers"]
