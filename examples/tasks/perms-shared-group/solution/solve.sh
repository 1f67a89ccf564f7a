#!/bin/bash
set -e
groupadd devs
usermod -aG devs alice
usermod -aG devs bob
mkdir -p /srv/shared
chown root:devs /srv/shared
chmod 2770 /srv/shared
echo "team space" > /srv/shared/README
chown alice:devs /srv/shared/README
chmod 0640 /srv/shared/README
