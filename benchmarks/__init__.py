"""Repeatable benchmarks, printed as ratios against baselines measured in the same run."""
