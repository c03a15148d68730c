"""AHP protocol versions: which ones agenthost speaks, how `initialize`
negotiates one, and which actions and notifications each version knows.

Negotiation is a pure function, as upstream's `negotiateProtocolVersion`
(types/version/registry.ts): of the versions a client offers, the highest
one within the caret range of a supported baseline, and always a version
the client offered, spelled as it offered it. A malformed entry anywhere in
the offer is an error, even beside a good one.

Baselines: 1.0.0 and 0.9.0 are upstream's released baselines (1.1.0, the
version these types follow, is in ^1.0.0). 0.5.0 is ours: the official
TypeScript client trees of the 0.5 line offer ["0.5.0", "0.4.0", "0.3.0"],
["0.5.1", "0.5.0"] and ["0.5.2", "0.5.1"], and agenthost's state and actions
are that line's chat-channel shapes; where a shape moved since, the
negotiated version picks it (`turns_by_cursor`, `steering_list`, and the
action and notification tables below). 0.6, 0.7 and 0.8 are not served.
"""

import functools
import re
from collections.abc import Mapping
from typing import Any

from agenthost.messages.errors import ValidationError

PROTOCOL_VERSION = "1.1.0"
"""The version these types follow."""

BASELINES = ("1.0.0", "0.9.0", "0.5.0")
"""Released versions whose caret range agenthost serves, most preferred first."""

_SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")

Version = tuple[int, int, int]


def parse_version(text: object) -> Version:
    """`MAJOR.MINOR.PATCH` (no prerelease, build, leading zeros or spaces).

    Raises:
        ValueError: `text` is not such a string.
    """
    match = _SEMVER.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a MAJOR.MINOR.PATCH version")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def in_caret_range(version: Version, baseline: Version) -> bool:
    """`^baseline`: the same major (for 0.x the same minor; for 0.0.x the same
    patch), at or above the baseline."""
    major, minor, patch = version
    base_major, base_minor, base_patch = baseline
    return (
        major == base_major
        and (major > 0 or minor == base_minor)
        and (major > 0 or minor > 0 or patch == base_patch)
        and version >= baseline
    )


def negotiate(offered: object, baselines: tuple[str, ...] = BASELINES) -> str | None:
    """The highest offered version in a baseline's caret range, as offered; None
    when there is none (answer -32005 with `supported_versions()`).

    Raises:
        ValidationError: the offer is not a list of versions; `.field` names the
            entry (`protocolVersions[2]`).
    """
    if not isinstance(offered, list | tuple):
        raise ValidationError.of("protocolVersions", "expected an array of versions")
    bases = [parse_version(b) for b in baselines]
    best: tuple[Version, str] | None = None
    for index, text in enumerate(offered):
        try:
            version = parse_version(text)
        except ValueError as exc:
            raise ValidationError.of(f"protocolVersions[{index}]", str(exc)) from exc
        if any(in_caret_range(version, base) for base in bases) and (
            best is None or version > best[0]
        ):
            best = (version, text)
    return None if best is None else best[1]


def supported_versions(baselines: tuple[str, ...] = BASELINES) -> tuple[str, ...]:
    """What -32005's `supportedVersions` lists: a caret range per baseline."""
    return tuple(f"^{baseline}" for baseline in baselines)


def at_least(version: str, minimum: str) -> bool:
    return parse_version(version) >= parse_version(minimum)


def turns_by_cursor(version: str) -> bool:
    """fetchTurns takes a cursor and answers `{}` (turns arrive as
    chat/turnsLoaded) from 0.5.1; before, it takes `before`/`limit` and
    answers `{turns, hasMore}`."""
    return at_least(version, "0.5.1")


def steering_list(version: str) -> bool:
    """The chat state has `steeringMessages` (1.1); before, only the single
    `steeringMessage` slot, showing the list's head."""
    return at_least(version, "1.1.0")


ACTION_INTRODUCED_IN: dict[str, str] = {
    "root/agentsChanged": "0.1.0",
    "root/activeSessionsChanged": "0.1.0",
    "root/configChanged": "0.1.0",
    "session/ready": "0.1.0",
    "session/creationFailed": "0.1.0",
    "session/chatAdded": "0.4.0",
    "session/chatRemoved": "0.4.0",
    "session/chatUpdated": "0.4.0",
    "session/chatsReordered": "0.9.0",
    "session/defaultChatChanged": "0.4.0",
    "session/titleChanged": "0.1.0",
    "session/modelChanged": "0.1.0",
    "session/agentChanged": "0.2.0",
    "session/serverToolsChanged": "0.1.0",
    "session/activeClientSet": "0.5.0",
    "session/activeClientRemoved": "0.5.0",
    "session/workingDirectorySet": "0.7.0",
    "session/workingDirectoryRemoved": "0.7.0",
    "session/workingDirectoryReplaced": "0.8.0",
    "session/inputNeededSet": "0.5.1",
    "session/inputNeededRemoved": "0.5.1",
    "session/customizationsChanged": "0.1.0",
    "session/customizationToggled": "0.1.0",
    "session/customizationUpdated": "0.1.0",
    "session/customizationRemoved": "0.2.0",
    "session/mcpServerStateChanged": "0.3.0",
    "session/mcpServerStartRequested": "0.5.2",
    "session/mcpServerStopRequested": "0.5.2",
    "session/mcpServerBackgroundRequested": "0.9.0",
    "session/isReadChanged": "0.1.0",
    "session/isArchivedChanged": "0.1.0",
    "session/activityChanged": "0.1.0",
    "session/changesetsChanged": "0.2.0",
    "session/configChanged": "0.1.0",
    "session/metaChanged": "0.1.0",
    "chat/turnStarted": "0.4.0",
    "chat/delta": "0.4.0",
    "chat/responsePart": "0.4.0",
    "chat/toolCallStart": "0.4.0",
    "chat/toolCallDelta": "0.4.0",
    "chat/toolCallReady": "0.4.0",
    "chat/toolCallConfirmed": "0.4.0",
    "chat/toolCallComplete": "0.4.0",
    "chat/toolCallResultConfirmed": "0.4.0",
    "chat/toolCallContentChanged": "0.4.0",
    "chat/toolCallAuthRequired": "0.6.0",
    "chat/toolCallAuthResolved": "0.6.0",
    "chat/turnComplete": "0.4.0",
    "chat/turnCancelled": "0.4.0",
    "chat/error": "0.4.0",
    "chat/turnResume": "0.9.0",
    "chat/activityChanged": "0.5.0",
    "chat/changesetsChanged": "0.9.0",
    "chat/workingDirectorySet": "0.7.0",
    "chat/workingDirectoryRemoved": "0.7.0",
    "chat/usage": "0.4.0",
    "chat/reasoning": "0.4.0",
    "chat/pendingMessageSet": "0.4.0",
    "chat/pendingMessageRemoved": "0.4.0",
    "chat/queuedMessagesReordered": "0.4.0",
    "chat/draftChanged": "0.5.0",
    "chat/isReadChanged": "0.9.0",
    "chat/isArchivedChanged": "0.9.0",
    "chat/inputRequested": "0.4.0",
    "chat/inputAnswerChanged": "0.4.0",
    "chat/inputCompleted": "0.4.0",
    "chat/truncated": "0.4.0",
    "chat/turnsLoaded": "0.5.1",
}
"""The version that introduced each root, session and chat action (upstream's
ACTION_INTRODUCED_IN for these channels, registry.ts @ 1.1.0)."""

NOTIFICATION_INTRODUCED_IN: dict[str, str] = {
    "root/sessionAdded": "0.1.0",
    "root/sessionRemoved": "0.1.0",
    "root/sessionSummaryChanged": "0.1.0",
    "root/progress": "0.5.0",
    "auth/required": "0.1.0",
    "channel/frame": "1.1.0",
    "channel/credit": "1.1.0",
    "channel/ready": "1.1.0",
    "channel/reset": "1.1.0",
    "channel/snapshot": "1.1.0",
}
"""The version that introduced each server notification agenthost may send."""


@functools.lru_cache(maxsize=4096)
def knows_action(version: str, action_type: str) -> bool:
    """Whether a peer of `version` knows the action; an `x-` extension action is
    never version-gated (peers ignore action types they do not know)."""
    introduced = ACTION_INTRODUCED_IN.get(action_type)
    return introduced is None or at_least(version, introduced)


def questions_as_input_requests(version: str) -> bool:
    """A peer that knows chat/inputRequested gets the host's questions so (and
    their end as chat/inputCompleted); only a peer that does not gets them as
    the extension x-chat/requestOpened and x-chat/requestClosed. Every version
    served knows it (0.4.0), so today none gets a question twice."""
    return knows_action(version, "chat/inputRequested")


def sent_to(version: str | None, action: Mapping[str, Any]) -> bool:
    """Whether an action (as wire JSON) goes to a peer of `version` (None: not
    negotiated yet): one the version knows, and a question's x-chat request
    action only where the version has no input requests."""
    if version is None:
        return True
    kind = action.get("type")
    if not isinstance(kind, str) or not knows_action(version, kind):
        return False
    if kind == "x-chat/requestOpened":
        request = action.get("request")
        asked = isinstance(request, Mapping) and request.get("kind") == "user_input"
        return not (asked and questions_as_input_requests(version))
    if kind == "x-chat/requestClosed" and action.get("kind") == "user_input":
        return not questions_as_input_requests(version)
    return True


def knows_notification(version: str, method: str) -> bool:
    introduced = NOTIFICATION_INTRODUCED_IN.get(method)
    return introduced is None or at_least(version, introduced)
