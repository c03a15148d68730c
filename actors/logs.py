"""Where an embedded host's log lines go when the program said nothing.

structlog's own default prints every event, info included, on stdout: into
the output of the program that embeds the host. So `Host.start()` calls
`quiet_unless_configured()` once: when the program has not configured
structlog itself, agenthost's events go through the standard `logging`
module (loggers named after the modules, `agenthost.actors.chat`, ...) at
the level `logging` has for `agenthost` at that moment; with nothing
configured that is WARNING, and Python's last-resort handler writes those
lines to stderr. A program that configured structlog, or the tests (which
do, and read events with `structlog.testing.capture_logs()`), is left alone.
"""

import logging

import structlog


def quiet_unless_configured() -> None:
    """Route structlog through stdlib logging at its `agenthost` level, unless
    the program configured structlog already. Runs on the caller's thread."""
    if structlog.is_configured():
        return
    level = logging.getLogger("agenthost").getEffectiveLevel()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S"),
            # plain tracebacks: no frame's locals (prompt text) in the log
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
