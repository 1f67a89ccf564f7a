#!/bin/bash
set -e
sqlite3 /app/users.db "ALTER TABLE users ADD COLUMN domain TEXT;
  UPDATE users SET domain = lower(substr(email, instr(email, '@') + 1));
  CREATE INDEX idx_users_domain ON users(domain);"
