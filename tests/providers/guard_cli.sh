#!/bin/sh
# A stand-in CLI: reports its pid, parent, session, process group, whether it
# has a terminal, the pid of a child it left running ("-" for none) and its
# arguments; then runs on, deaf to its stdin closing. With GUARD_CLI_EXIT set it
# starts a child that holds its stdout, reports it, and exits with that status.
if (: < /dev/tty) 2>/dev/null; then tty=yes; else tty=no; fi
read -r _ _ _ ppid pgrp session _ < /proc/$$/stat
if [ -n "$GUARD_CLI_EXIT" ]; then
  sleep 3600 &
  echo "$$ $ppid $session $pgrp $tty $! $*"
  exit "$GUARD_CLI_EXIT"
fi
echo "$$ $ppid $session $pgrp $tty - $*"
exec sleep 3600
