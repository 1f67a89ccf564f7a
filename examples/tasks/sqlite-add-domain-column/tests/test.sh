#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
db=/app/users.db
[ "$(sqlite3 $db 'SELECT COUNT(*) FROM users')" = "5" ] || fail "rows changed"
sqlite3 $db 'PRAGMA table_info(users)' | cut -d'|' -f2 | grep -qx domain || fail "no domain column"
bad=$(sqlite3 $db "SELECT COUNT(*) FROM users WHERE domain IS NOT lower(substr(email, instr(email, '@') + 1))")
[ "$bad" = "0" ] || fail "$bad rows with a wrong domain"
[ "$(sqlite3 $db "SELECT email FROM users WHERE id = 2")" = "alan@bletchley.UK" ] || fail "email changed"
idx=$(sqlite3 $db "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'idx_users_domain'")
echo "$idx" | grep -qi 'users *(domain)' || fail "no index idx_users_domain on users(domain): '$idx'"
echo PASS
echo 1 > /logs/verifier/reward.txt
