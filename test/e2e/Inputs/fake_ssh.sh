#!/bin/sh
# An ssh stand-in for tests (copied to a directory on PATH as `ssh`): runs
# the remote command on this machine, as `ssh [OPTIONS] -- HOST COMMAND`
# would on HOST. A host with a file of its name in $FAKE_SSH_DOWN is gone:
# ssh's message and exit status (255) for a host that does not answer.
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
host=$1
shift
if [ -n "$FAKE_SSH_DOWN" ] && [ -e "$FAKE_SSH_DOWN/$host" ]; then
  echo "ssh: connect to host $host port 22: No route to host" >&2
  exit 255
fi
exec sh -c "$*"
