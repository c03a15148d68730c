"""The fixture runner says, in one line, how many AHP fixtures it found: in the
report header when tests/ahp is named on the command line, and at the end of
any run that collected the fixture tests."""

from typing import Any

import pytest

from tests.ahp.fixture_files import summary


def pytest_report_header(config: pytest.Config) -> str:
    return summary()


_collected: list[bool] = []


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if any(item.nodeid.startswith("tests/ahp/test_fixtures.py") for item in items):
        _collected.append(True)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _collected:
        terminalreporter.write_line(summary())
