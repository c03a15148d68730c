#!/bin/sh
# A stand-in CLI: reports its pid, session, process group, whether it has a
# terminal, and its arguments; then runs on, deaf to its stdin closing.
if (: < /dev/tty) 2>/dev/null; then tty=yes; else tty=no; fi
read -r _ _ _ _ pgrp session _ < /proc/$$/stat
echo "$$ $session $pgrp $tty $*"
exec sleep 3600
