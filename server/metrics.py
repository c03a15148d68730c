"""What /metrics reports, in Prometheus' text format."""

import bisect
import itertools
from collections.abc import Mapping

import attrs

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # seconds


@attrs.define
class Metrics:
    """Counters the server keeps for /metrics (on the event loop's thread)."""

    turns: dict[str, int] = attrs.field(factory=dict)
    rejected_actions: int = 0
    steering_withdrawn: int = 0
    steering_not_withdrawn: int = 0
    window_resets: int = 0  # windowed subscriptions reset (server/windows.py)
    connections: int = 0
    # The turn latency histogram: counts per bucket (not every latency: the
    # server runs for months), their sum and count.
    latency_buckets: list[int] = attrs.field(factory=lambda: [0] * len(LATENCY_BUCKETS))
    latency_sum: float = 0.0
    latency_count: int = 0

    def turn_took(self, seconds: float) -> None:
        self.latency_sum += seconds
        self.latency_count += 1
        index = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        if index < len(LATENCY_BUCKETS):
            self.latency_buckets[index] += 1

    def turn_ended(self, outcome: str) -> None:
        self.turns[outcome] = self.turns.get(outcome, 0) + 1

    def render(
        self,
        counters: Mapping[str, int],
        chat_channels: int,
        tables: Mapping[str, int] | None = None,
    ) -> str:
        lines = [
            "# TYPE agenthost_live_sessions gauge",
            f"agenthost_live_sessions {counters.get('resident', 0)}",
            "# TYPE agenthost_connections gauge",
            f"agenthost_connections {self.connections}",
            "# TYPE agenthost_chat_channels gauge",
            f"agenthost_chat_channels {chat_channels}",
            "# TYPE agenthost_turns_total counter",
        ]
        lines += [
            f'agenthost_turns_total{{outcome="{k}"}} {v}' for k, v in sorted(self.turns.items())
        ]
        lines += [
            "# TYPE agenthost_rejected_actions_total counter",
            f"agenthost_rejected_actions_total {self.rejected_actions}",
            "# TYPE agenthost_steering_withdrawn_total counter",
            f"agenthost_steering_withdrawn_total {self.steering_withdrawn}",
            "# TYPE agenthost_steering_not_withdrawn_total counter",
            f"agenthost_steering_not_withdrawn_total {self.steering_not_withdrawn}",
            "# TYPE agenthost_window_resets_total counter",
            f"agenthost_window_resets_total {self.window_resets}",
            "# TYPE agenthost_provider_restarts_total counter",
            f"agenthost_provider_restarts_total {counters.get('restarts', 0)}",
            "# TYPE agenthost_gc_disposals_total counter",
            f"agenthost_gc_disposals_total {counters.get('draft_gc_disposed', 0)}",
            "# TYPE agenthost_turn_latency_seconds histogram",
        ]
        cumulative = itertools.accumulate(self.latency_buckets)
        for bound, count in zip(LATENCY_BUCKETS, cumulative, strict=True):
            lines.append(f'agenthost_turn_latency_seconds_bucket{{le="{bound}"}} {count}')
        lines += [
            f'agenthost_turn_latency_seconds_bucket{{le="+Inf"}} {self.latency_count}',
            f"agenthost_turn_latency_seconds_sum {self.latency_sum:.6f}",
            f"agenthost_turn_latency_seconds_count {self.latency_count}",
        ]
        if tables:
            lines.append("# TYPE agenthost_server_table_entries gauge")
            lines += [
                f'agenthost_server_table_entries{{table="{k}"}} {v}'
                for k, v in sorted((tables or {}).items())
            ]
        return "\n".join(lines) + "\n"
