#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
getent group devs >/dev/null || fail "no group devs"
members=$(getent group devs | cut -d: -f4 | tr ',' '\n' | sort | paste -sd,)
[ "$members" = "alice,bob" ] || fail "devs members: $members"
[ "$(stat -c '%U:%G %a' /srv/shared)" = "root:devs 2770" ] || fail "/srv/shared: $(stat -c '%U:%G %a' /srv/shared)"
[ "$(stat -c '%U:%G %a' /srv/shared/README)" = "alice:devs 640" ] || fail "README: $(stat -c '%U:%G %a' /srv/shared/README)"
[ "$(cat /srv/shared/README)" = "team space" ] || fail "README content"
echo PASS
echo 1 > /logs/verifier/reward.txt
