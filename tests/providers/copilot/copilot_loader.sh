#!/bin/sh
# A loader-shaped Copilot CLI: starts the stand-in CLI as its child with its own
# stdio, as npm's `copilot` node loader starts the native binary, and waits for it.
exec 3<&0  # dash gives a background job /dev/null for stdin unless told
"$(dirname "$0")/standin_copilot.py" "$@" <&3 3<&- &
wait $!
