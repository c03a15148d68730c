"""The soak's short mode against a real `agenthost serve`: it drives, samples,
reads the store back and draws; counts and verdicts' presence, never timings."""

from pathlib import Path

import pytest

from benchmarks import soak


def test_a_short_soak_loses_no_turn_and_reports_every_verdict(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs the bench extra")
    config = soak.SoakConfig(minutes=0.4, users=12, sample_s=4.0, idle_s=4.0, out=tmp_path)
    result = soak.run(config)
    assert len(result.tally.completed) > 12
    assert result.lost == []
    assert set(result.verdicts) == {
        "turns/s kept",
        "RSS levels off",
        "RSS back when idle",
        "no turn lost",
    }
    assert [s.load for s in result.samples][-1] is False  # it sampled the idle server too
    assert result.plot == tmp_path / "soak.png" and result.plot.stat().st_size > 10_000
    assert "no turn lost" in soak.report(result, config)
