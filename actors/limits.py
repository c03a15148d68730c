"""What one message and one subscriber may cost a host, in bytes: `HostLimits`,
set with `Host.start(limits=...)`, and the checks the surface makes with them.

The checks run on the caller's thread (sync or asyncio surface, so the AHP
server's dispatches too) before anything reaches an actor: a message over its
limit is refused with AgentHostError TOO_LARGE naming the limit and its size,
and changes nothing.

Invariants:
1. A message's text (a send, a steer, an edit of a queued message) is at most
   `message_bytes` of UTF-8; each attachment's text at most
   `attachment_bytes`, and a message carries at most `attachments` of them.
2. A subscriber's unread events hold at most `subscriber_queue_bytes` (as
   messages/sizes.py weighs them) as well as at most the host's
   `subscriber_queue_size` events; past either it gets Lagged and is closed
   (actors/handles.py), never slowing the host.
"""

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.sizes import utf8_bytes
from agenthost.messages.state import Attachment

MIB = 1 << 20


@attrs.frozen(kw_only=True)
class HostLimits:
    """Bounds in bytes on what callers hand a host (see the module docstring)."""

    message_bytes: int = MIB
    attachment_bytes: int = MIB
    attachments: int = 16
    subscriber_queue_bytes: int = 16 * MIB

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(HostLimits):
            if getattr(self, field.name) < 1:
                raise ValueError(f"HostLimits.{field.name} must be 1 or more")


def too_large(what: str, size: int, limit: int, setting: str) -> AgentHostError:
    return AgentHostError(
        code=ErrorCode.TOO_LARGE,
        message=f"{what} is {size} bytes; at most {limit} (HostLimits.{setting})",
    )


def check_text(limits: HostLimits, text: str) -> None:
    """Refuse a message's text over `message_bytes`.

    Raises:
        AgentHostError: TOO_LARGE naming the size and the limit.
    """
    size = utf8_bytes(text)
    if size > limits.message_bytes:
        raise too_large("the message's text", size, limits.message_bytes, "message_bytes")


def check_attachment_count(limits: HostLimits, count: int) -> None:
    """Refuse more than `attachments` attachments (before any is read)."""
    if count > limits.attachments:
        raise AgentHostError(
            code=ErrorCode.TOO_LARGE,
            message=f"{count} attachments; at most {limits.attachments} (HostLimits.attachments)",
        )


def check_attachment(limits: HostLimits, attachment: Attachment) -> None:
    """Refuse an attachment whose text is over `attachment_bytes`."""
    size = utf8_bytes(attachment.text)
    if size > limits.attachment_bytes:
        raise too_large(
            f"attachment {attachment.name}", size, limits.attachment_bytes, "attachment_bytes"
        )
