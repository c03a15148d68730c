"""The lifecycle property machine (tests/actors/test_lifecycle_properties.py):
what it tracks and checks (ledger.py), how it writes a failure down (trace.py),
and the machine itself (machine.py)."""
