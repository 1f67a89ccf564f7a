#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. Runs as the image's
# USER, like the agent: the files must be the user's own, made by the user.
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ "$(id -un)" = writer ] || fail "tests run as $(id -un), not writer"
id -Gn | grep -qw editors || fail "not in editors: $(id -Gn)"
[ "$HOME" = /home/writer ] || fail "HOME is $HOME"
d=/home/writer/notes
[ "$(stat -c '%U:%G %a' $d)" = "writer:writer 700" ] || fail "notes: $(stat -c '%U:%G %a' $d 2>&1)"
[ "$(stat -c '%U' $d/todo.txt)" = writer ] || fail "todo.txt: $(stat -c '%U' $d/todo.txt 2>&1)"
[ "$(cat $d/todo.txt)" = "ship it" ] || fail "todo.txt: $(cat $d/todo.txt)"
echo PASS
echo 1 > /logs/verifier/reward.txt
