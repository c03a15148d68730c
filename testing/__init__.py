"""What tests of agenthost (and of programs that embed it) drive it with.

Belongs here: `DeterministicRunner`, a runtime in which the test picks the
next delivery, and `FakeClock`, time that moves only when the test says so.
Nothing in the other packages imports this one.
"""

from agenthost.testing.clock import FakeClock
from agenthost.testing.runner import Delivery, DeterministicRunner

__all__ = ["Delivery", "DeterministicRunner", "FakeClock"]
