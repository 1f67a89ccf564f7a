// Starts `flotilla up --model DIR` on port 0 and drives it with the official OpenAI and Anthropic
// npm clients: a chat with tools and a tool result in its history, its next turn streamed, an
// Anthropic Messages call with tools, and a long first request (its prefill timed). Stops the
// server and prints one JSON object: what was sent and what came back, for the test to compare
// with the stored trajectories.
'use strict';
const path = require('path');
const fs = require('fs');
const os = require('os');
const { spawn, spawnSync } = require('child_process');
const npm = path.resolve(process.env.FLOTILLA_NPM_DIR, 'node_modules');
const OpenAI = require(path.join(npm, 'openai')).default;
const Anthropic = require(path.join(npm, '@anthropic-ai/sdk')).default;

function startServer() {
  const args = ['up', '--model', process.env.FLOTILLA_MODEL, '--http', '127.0.0.1:0',
    '--state-dir', process.env.FLOTILLA_STATE, '--experiment', 'hf-e2e'];
  const child = spawn(process.env.FLOTILLA_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/on (http:\/\/[^ ]+)\/v1/);
      if (m) resolve({ child, base: m[1] });
    });
    child.on('exit', (code) => reject(new Error(`flotilla up exited ${code}: ${err}`)));
  });
}

const chatTools = [{ type: 'function', function: { name: 'bash', description: 'run a shell command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } } }];
const MAX = 24;

async function main() {
  const started = Date.now();
  const { child, base } = await startServer();
  const out = { startup_ms: Date.now() - started };
  try {
    const oa = (s) => new OpenAI({ baseURL: `${base}/s/${s}/v1`, apiKey: 'unused', maxRetries: 0 });
    const first = [
      { role: 'system', content: 'You are a terse coding agent.' },
      { role: 'user', content: 'List the files, then say which one is largest. 日本語 ok.' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_hist1', type: 'function',
        function: { name: 'bash', arguments: '{"cmd": "ls -l"}' } }] },
      { role: 'tool', tool_call_id: 'call_hist1', content: '-rw 10 a.txt\n-rw 99 b.txt' },
    ];
    const r1 = await oa('hf-chat').chat.completions.create({ model: 'm', messages: first,
      tools: chatTools, max_tokens: MAX, seed: 7, logprobs: true });
    const msg = r1.choices[0].message;
    out.first = { messages: first, tools: chatTools, content: msg.content ?? '',
      tool_calls: msg.tool_calls ?? [], finish: r1.choices[0].finish_reason, usage: r1.usage,
      logprob_bytes: r1.choices[0].logprobs ? r1.choices[0].logprobs.content.map((x) => x.bytes) : null };
    // The next turn: the reply as the client got it, then a tool result or a user message.
    const second = first.concat([{ role: 'assistant', content: msg.content ?? '',
      ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}) }]);
    if (msg.tool_calls && msg.tool_calls.length) {
      for (const c of msg.tool_calls) second.push({ role: 'tool', tool_call_id: c.id, content: 'ok' });
    } else {
      second.push({ role: 'user', content: 'Now count the lines.' });
    }
    const stream = await oa('hf-chat').chat.completions.create({ model: 'm', messages: second,
      tools: chatTools, max_tokens: MAX, seed: 8, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish = null;
    let usage = null;
    const calls = [];
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const ch = chunk.choices[0];
      if (!ch) continue;
      if (ch.delta.content) text += ch.delta.content;
      if (ch.delta.tool_calls) calls.push(...ch.delta.tool_calls);
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    out.second = { messages: second, text, tool_calls: calls, finish, usage };

    const an = new Anthropic({ baseURL: `${base}/s/hf-anth`, apiKey: 'unused', maxRetries: 0 });
    const m = await an.messages.create({ model: 'm', max_tokens: MAX, system: 'Be brief.',
      tools: [{ name: 'bash', description: 'run a shell command',
        input_schema: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } }],
      messages: [{ role: 'user', content: 'What is in /tmp?' }] });
    out.anthropic = { stop_reason: m.stop_reason, types: m.content.map((b) => b.type),
      usage: m.usage };

    // A long first request: prose and code, about 10k tokens with Qwen3's tokenizer.
    const words = [];
    for (let i = 0; words.join(" ").length < 24500; i++) {
      words.push(i % 7 === 0 ? `function f${i}(x) { return x * ${i}; }` : `word${i % 97} and more text ${i}`);
    }
    const t0 = Date.now();
    const r3 = await oa('hf-long').chat.completions.create({ model: 'm', max_tokens: 1, seed: 1,
      messages: [{ role: 'user', content: words.join(' ') }] });
    out.long = { ms: Date.now() - t0, prompt_tokens: r3.usage.prompt_tokens };

    // The real Pi coding agent, non-interactive, against the same server (session "pi1"
    // through its API key), when worker-npm.sh has installed it.
    const pi = path.resolve(process.env.FLOTILLA_PI_DIR || '',
      'node_modules/@mariozechner/pi-coding-agent/dist/cli.js');
    if (process.env.FLOTILLA_PI_DIR && fs.existsSync(pi)) {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'flotilla-pi-'));
      fs.mkdirSync(path.join(home, 'agent'));
      fs.writeFileSync(path.join(home, 'agent', 'models.json'), JSON.stringify({ providers: { flotilla: {
        baseUrl: `${base}/v1`, api: 'openai-completions', apiKey: 'session-pi1',
        compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
        models: [{ id: 'flotilla', name: 'Flotilla', reasoning: false, input: ['text'],
          contextWindow: 40960, maxTokens: MAX }] } } }));
      const t1 = Date.now();
      const r = spawnSync('node', [pi, '--provider', 'flotilla', '--model', 'flotilla', '--no-session',
        '-p', 'Say hello in one word.'], { cwd: home, timeout: 300000, encoding: 'utf8',
        env: { PATH: process.env.PATH, HOME: home, PI_CODING_AGENT_DIR: path.join(home, 'agent') } });
      out.pi = { exit: r.status, ms: Date.now() - t1, stderr: (r.stderr || '').slice(0, 2000) };
      fs.rmSync(home, { recursive: true, force: true });
    }
  } finally {
    child.kill('SIGTERM');
    out.server_exit = await new Promise((resolve) => child.on('exit', (code, sig) => resolve(code ?? sig)));
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
