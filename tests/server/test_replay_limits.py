"""The server's replay buffer (server/channels.py Sequencer), bounded in bytes as
well as in envelopes, and rid of a closed channel's envelopes."""

from agenthost.server.channels import Sequencer

A, B = "ahp-chat:/a", "ahp-chat:/b"


def test_the_replay_buffer_keeps_at_most_its_bytes_and_refuses_a_replay_past_what_it_dropped() -> (
    None
):
    sequencer = Sequencer(100, replay_bytes=1_000)
    sequencer.opened(A)
    for n in range(5):
        sequencer.stamp(A, {"n": n}, size=300)
    assert sequencer.buffered_bytes == 900  # three of 300: the two oldest made room
    assert sequencer.since(1, {A}) is None  # seq 2 was dropped
    assert [e["action"]["n"] for e in sequencer.since(2, {A}) or []] == [2, 3, 4]


def test_a_closed_channel_s_envelopes_leave_the_buffer_and_the_others_still_replay() -> None:
    sequencer = Sequencer(100, replay_bytes=10_000)
    sequencer.opened(A)
    sequencer.opened(B)
    for n in range(3):
        sequencer.stamp(A, {"n": n}, size=1_000)
        sequencer.stamp(B, {"n": n}, size=10)
    sequencer.closed(A)
    assert sequencer.buffered_bytes == 30
    assert [e["action"]["n"] for e in sequencer.since(0, {B}) or []] == [0, 1, 2]
    assert sequencer.since(0, {A}) is None  # closed: its client takes a snapshot


def test_closed_channels_envelopes_go_together_and_a_reopened_one_keeps_its_new_ones() -> None:
    """Dropping each channel's envelopes at its close visited the whole buffer
    every time; they go together, once they are half of it, and are never
    replayed meanwhile."""
    sequencer = Sequencer(100)
    for channel in (A, B):
        sequencer.opened(channel)
    for n in range(3):
        sequencer.stamp(A, {"n": n}, size=1)
    for n in range(4):
        sequencer.stamp(B, {"n": n}, size=1)
    sequencer.closed(A)  # 3 of 7: they wait
    assert sequencer.buffered_bytes == 7 and sequencer.since(0, {A}) is None
    sequencer.opened(A)
    reopened = sequencer.seq
    sequencer.stamp(A, {"n": "again"}, size=1)
    assert [e["action"]["n"] for e in sequencer.since(reopened, {A}) or []] == ["again"]
    sequencer.closed(B)  # now 7 of 8 are closed channels': they go, A's new one stays
    assert sequencer.buffered_bytes == 1
    assert [e["action"]["n"] for e in sequencer.since(reopened, {A}) or []] == ["again"]
