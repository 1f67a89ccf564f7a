#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
d=/home/deploy/.ssh
[ "$(stat -c '%U:%G %a' $d)" = "deploy:deploy 700" ] || fail ".ssh: $(stat -c '%U:%G %a' $d)"
for f in id_ed25519:600 authorized_keys:600 id_ed25519.pub:644; do
  n=${f%%:*}; m=${f##*:}
  [ "$(stat -c '%U:%G %a' $d/$n)" = "deploy:deploy $m" ] || fail "$n: $(stat -c '%U:%G %a' $d/$n)"
done
[ "$(stat -c '%U' /home/deploy/bin)" = "deploy" ] || fail "bin not deploy's"
grep -q 'FAKE KEY MATERIAL 42' $d/id_ed25519 || fail "private key content changed"
echo PASS
echo 1 > /logs/verifier/reward.txt
