#!/bin/bash
set -e
d=/home/deploy/.ssh
chown -R deploy:deploy $d
chmod 700 $d
chmod 600 $d/id_ed25519 $d/authorized_keys
chmod 644 $d/id_ed25519.pub
