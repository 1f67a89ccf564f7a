// Drives a running worker with the official OpenAI and Anthropic npm clients: all three wire
// APIs, streaming and not, with tool calls in the history, and a 20-turn session through each.
// Each scenario binds its own session through the URL path (/s/<name>/v1). Prints one JSON
// object: what the clients saw (texts, logprobs), for the test to compare with the record.
'use strict';
const path = require('path');
const npm = path.resolve(process.env.FLOTILLA_NPM_DIR, 'node_modules');
const OpenAI = require(path.join(npm, 'openai')).default;
const Anthropic = require(path.join(npm, '@anthropic-ai/sdk')).default;
const base = process.env.FLOTILLA_BASE;
const MAX = 12;

function openai(session) {
  return new OpenAI({ baseURL: `${base}/s/${session}/v1`, apiKey: 'unused', maxRetries: 0 });
}
function anthropic(session) {
  return new Anthropic({ baseURL: `${base}/s/${session}`, apiKey: 'unused', maxRetries: 0 });
}

const chatTools = [{ type: 'function', function: { name: 'bash', description: 'run a shell command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } } }];
const respTools = [{ type: 'function', name: 'bash', description: 'run a shell command',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } }];
const anthTools = [{ name: 'bash', description: 'run a shell command',
  input_schema: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } }];

async function chat(out) {
  const c = openai('oa-chat');
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'list the files' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_hist1', type: 'function',
      function: { name: 'bash', arguments: '{"cmd":"ls"}' } }] },
    { role: 'tool', tool_call_id: 'call_hist1', content: 'a.txt\nb.txt' },
  ];
  const r = await c.chat.completions.create({ model: 'flotilla', messages, tools: chatTools,
    max_tokens: MAX, logprobs: true, top_logprobs: 2, seed: 3 });
  out['oa-chat'] = { text: r.choices[0].message.content ?? '',
    logprobs: r.choices[0].logprobs.content.map((x) => x.logprob), usage: r.usage };

  const s = openai('oa-chat-stream');
  const stream = await s.chat.completions.create({ model: 'flotilla', messages, tools: chatTools,
    max_tokens: MAX, logprobs: true, stream: true, stream_options: { include_usage: true }, seed: 4 });
  let text = '';
  const lps = [];
  let chunks = 0;
  let finish = null;
  for await (const chunk of stream) {
    chunks++;
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.delta.content) text += ch.delta.content;
    if (ch.logprobs && ch.logprobs.content) for (const x of ch.logprobs.content) lps.push(x.logprob);
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  out['oa-chat-stream'] = { text, logprobs: lps, chunks, finish };
}

function outputText(resp) {
  let text = '';
  for (const item of resp.output) {
    if (item.type !== 'message') continue;
    for (const part of item.content) if (part.type === 'output_text') text += part.text;
  }
  return text;
}

async function responses(out) {
  const c = openai('oa-resp');
  const input = [
    { role: 'user', content: 'list the files' },
    { type: 'function_call', call_id: 'call_hist2', name: 'bash', arguments: '{"cmd":"ls"}' },
    { type: 'function_call_output', call_id: 'call_hist2', output: 'a.txt' },
  ];
  const r = await c.responses.create({ model: 'flotilla', instructions: 'You are terse.', input,
    tools: respTools, max_output_tokens: MAX });
  out['oa-resp'] = { text: r.output_text, status: r.status, items: r.output.map((o) => o.type) };

  const s = openai('oa-resp-stream');
  const stream = await s.responses.create({ model: 'flotilla', instructions: 'You are terse.', input,
    tools: respTools, max_output_tokens: MAX, stream: true });
  const types = [];
  let text = '';
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  out['oa-resp-stream'] = { text, first: types[0], last: types[types.length - 1],
    final_text: final ? outputText(final) : null };
}

async function messages(out) {
  const c = anthropic('an-msg');
  const msgs = [
    { role: 'user', content: 'list the files' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_hist3', name: 'bash', input: { cmd: 'ls' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_hist3', content: 'a.txt' }] },
  ];
  const r = await c.messages.create({ model: 'flotilla', system: 'You are terse.', max_tokens: MAX,
    tools: anthTools, messages: msgs });
  out['an-msg'] = { text: r.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    stop: r.stop_reason, usage: r.usage };

  const s = anthropic('an-msg-stream');
  const stream = s.messages.stream({ model: 'flotilla', system: 'You are terse.', max_tokens: MAX,
    tools: anthTools, messages: msgs });
  const names = [];
  stream.on('streamEvent', (e) => names.push(e.type));
  const final = await stream.finalMessage();
  out['an-msg-stream'] = { events: names, text: final.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    stop: final.stop_reason };
  const count = await c.messages.countTokens({ model: 'flotilla', messages: msgs, tools: anthTools });
  out['an-count'] = count.input_tokens;
}

async function twentyTurns(out) {
  const c = openai('oa-chat-20');
  const chatMsgs = [{ role: 'user', content: 'turn 0' }];
  for (let i = 1; i <= 20; i++) {
    const r = await c.chat.completions.create({ model: 'flotilla', messages: chatMsgs, max_tokens: 6 });
    chatMsgs.push({ role: 'assistant', content: r.choices[0].message.content ?? '' });
    chatMsgs.push({ role: 'user', content: `turn ${i}` });
  }
  const rc = openai('oa-resp-20');
  const items = [{ role: 'user', content: 'turn 0' }];
  for (let i = 1; i <= 20; i++) {
    const stream = i % 2 === 0;
    let resp;
    if (stream) {
      const s = await rc.responses.create({ model: 'flotilla', input: items, max_output_tokens: 6, stream: true });
      for await (const ev of s) if (ev.type === 'response.completed' || ev.type === 'response.incomplete') resp = ev.response;
    } else {
      resp = await rc.responses.create({ model: 'flotilla', input: items, max_output_tokens: 6 });
    }
    for (const o of resp.output) items.push(o);
    items.push({ role: 'user', content: `turn ${i}` });
  }
  const ac = anthropic('an-msg-20');
  const msgs = [{ role: 'user', content: 'turn 0' }];
  for (let i = 1; i <= 20; i++) {
    const r = await ac.messages.create({ model: 'flotilla', max_tokens: 6, messages: msgs });
    msgs.push({ role: 'assistant', content: r.content });
    msgs.push({ role: 'user', content: `turn ${i}` });
  }
  out['twenty'] = { chat: chatMsgs.length, responses: items.length, messages: msgs.length };
}

(async () => {
  const out = {};
  await chat(out);
  await responses(out);
  await messages(out);
  await twentyTurns(out);
  process.stdout.write(JSON.stringify(out) + '\n');
})().catch((e) => {
  process.stderr.write(`sdk_clients failed: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
