'use strict';
// The Flotilla dashboard: reads the process's /api/* endpoints, draws with inline SVG.
// body[data-status] is "ready" once every view has loaded once; errors land in #errors.

const errorsBox = document.getElementById('errors');
function reportError(msg) {
  errorsBox.textContent += msg + '\n';
  document.body.dataset.errors = 'yes';
}
window.addEventListener('error', (e) => reportError('error: ' + e.message));
window.addEventListener('unhandledrejection', (e) => reportError('error: ' + (e.reason && e.reason.message || e.reason)));

function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') n.className = v; else if (k === 'text') n.textContent = v; else n.setAttribute(k, v);
  }
  for (const c of children) if (c != null) n.append(c);
  return n;
}
function svg(tag, attrs) {
  const n = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  return n;
}
async function getJson(path) {
  const r = await fetch(path, {cache: 'no-store'});
  const body = await r.json();
  if (!r.ok) throw new Error(path + ': ' + (body.error || r.status));
  return body;
}
function fmt(v) {
  if (typeof v !== 'number' || !isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(3);
}

// ---- curves ---------------------------------------------------------------------------
const PREFERRED = ['reward_mean', 'response_length_mean', 'truncation_rate', 'staleness_mean',
  'tokens_per_s', 'samples_per_s', 'trainer_idle_frac', 'rollout_idle_frac', 'zero_variance_group_frac',
  'importance_weight_mean', 'logprob_mismatch_mean', 'weight_sync_s', 'turns_mean', 'tool_calls_mean'];

function chart(key, steps, values) {
  const W = 320, H = 120, P = 24;
  const pts = [];
  for (let i = 0; i < steps.length; i++) if (typeof values[i] === 'number') pts.push([steps[i], values[i]]);
  const box = el('div', {class: 'chart', 'data-metric': key, 'data-points': String(pts.length)});
  box.append(el('h3', {}, key, el('span', {class: 'last', text: pts.length ? fmt(pts[pts.length - 1][1]) : ''})));
  const s = svg('svg', {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none'});
  if (pts.length) {
    const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    const sx = x => P + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - 2 * P);
    const sy = y => H - P + 8 - (y1 === y0 ? 0.5 : (y - y0) / (y1 - y0)) * (H - 2 * P);
    s.append(svg('line', {class: 'axis', x1: P, y1: H - P + 8, x2: W - P, y2: H - P + 8}));
    const d = pts.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
    s.append(svg('path', {class: 'line', d}));
    const lo = svg('text', {x: 2, y: H - P + 8}); lo.textContent = fmt(y0); s.append(lo);
    const hi = svg('text', {x: 2, y: 10}); hi.textContent = fmt(y1); s.append(hi);
    const st = svg('text', {x: W - P - 30, y: H - 2}); st.textContent = 'step ' + x1; s.append(st);
  }
  box.append(s);
  return box;
}

async function loadCurves() {
  const lines = await getJson('/api/metrics_log');
  const charts = document.getElementById('charts');
  charts.replaceChildren();
  if (!lines.length) { charts.append(el('p', {class: 'muted', text: 'No trainer steps logged yet.'})); return; }
  const keys = new Set();
  for (const l of lines) for (const k of Object.keys(l)) if (k !== 'step' && k !== 'unix_ms') keys.add(k);
  const ordered = PREFERRED.filter(k => keys.has(k)).concat([...keys].filter(k => !PREFERRED.includes(k)).sort());
  const steps = lines.map(l => l.step);
  for (const k of ordered) charts.append(chart(k, steps, lines.map(l => l[k])));
}

// ---- fleet ----------------------------------------------------------------------------
async function loadFleet() {
  const fleet = await getJson('/api/fleet');
  const root = document.getElementById('fleet-tree');
  root.replaceChildren();
  if (fleet.unavailable) { root.append(el('p', {class: 'muted', text: 'No scheduler in this process.'})); return; }
  if (!fleet.units.length) { root.append(el('p', {class: 'muted', text: 'No scale units.'})); return; }
  for (const u of fleet.units) {
    const unit = el('div', {class: 'unit', 'data-unit': u.id}, el('strong', {text: 'scale unit ' + u.id}));
    for (const n of u.nodes) {
      const counts = {}, classes = {};
      for (const b of n.sandboxes) {
        counts[b.state] = (counts[b.state] || 0) + 1;
        if (b['class']) classes[b['class']] = (classes[b['class']] || 0) + 1;
      }
      const byClass = Object.entries(classes).map(([k, v]) => `${v} ${k}`).join(', ');
      const summary = (n.alive === false ? 'down · ' : '') +
                      (Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') || 'idle') +
                      (byClass ? ` · ${byClass}` : '') + (n.slots_capacity ? ` · ${n.slots_capacity} slots` : '');
      const node = el('div', {class: n.alive === false ? 'node down' : 'node', 'data-node': n.id},
        el('span', {class: 'node-name', text: n.id}), ' ', el('span', {class: 'muted', text: summary}), el('br'));
      for (const b of n.sandboxes) {
        node.append(el('span', {class: `box ${b.state} ${b['class']}`, 'data-sandbox': b.id, 'data-class': b['class'] || '',
                                 title: `${b.id}\n${b.state} · ${b['class']}`}));
      }
      unit.append(node);
    }
    root.append(unit);
  }
}

// ---- trajectories ---------------------------------------------------------------------
function logprobColor(lp) {
  // p = exp(lp): 1 -> green, 0.5 -> yellow, ~0 -> red; alpha keeps text readable.
  const p = Math.exp(lp);
  const hue = Math.round(120 * Math.max(0, Math.min(1, p)));
  return `hsla(${hue}, 70%, 50%, 0.28)`;
}

function renderTokens(tokens) {
  const box = el('div', {class: 'tokens'});
  const ids = tokens.ids || [], mask = tokens.loss_mask || [], lps = tokens.logprobs || [];
  const vers = (tokens.policy_versions || []).map(Number), text = tokens.token_text || [];
  const per = tokens.experts_per_token || 0, experts = tokens.experts || [];
  let prevVersion = null, expertRow = 0;
  for (let i = 0; i < ids.length; i++) {
    const gen = mask[i] === 1;
    const span = el('span', {class: 'tok' + (gen ? '' : ' masked'), 'data-token-id': String(ids[i])},
                    text[i] !== undefined ? text[i] : `⟨${ids[i]}⟩`);
    let title = `id=${ids[i]}`;
    if (gen) {
      span.style.background = logprobColor(lps[i]);
      span.dataset.logprob = String(lps[i]);
      title += ` logprob=${fmt(lps[i])} version=${vers[i]}`;
      if (prevVersion !== null && vers[i] !== prevVersion) span.classList.add('version-change');
      prevVersion = vers[i];
      if (per > 0 && experts.length >= (expertRow + 1) * per) {
        title += ` experts=[${experts.slice(expertRow * per, (expertRow + 1) * per).join(',')}]`;
        expertRow++;
      }
    } else {
      title += ' (not generated: masked from the loss)';
    }
    span.title = title;
    box.append(span);
  }
  return box;
}

async function showTrajectory(id) {
  const view = document.getElementById('trajectory-view');
  const t = await getJson('/api/trajectories/' + encodeURIComponent(id));
  const s = t.summary;
  view.replaceChildren();
  view.dataset.trajectory = id;
  const kv = el('div', {class: 'kv'});
  const metrics = t.metrics || {};
  for (const [k, v] of [['id', t.id], ['task', s.task], ['scaffold', s.scaffold], ['reward', fmt(t.reward)],
                        ['status', s.status], ['detail', t.detail], ['tokens', `${s.tokens} (${s.generated_tokens} generated)`],
                        ['segments', s.segments], ...Object.entries(metrics).map(([k, v]) => [k, fmt(v)])]) {
    if (v === undefined || v === '') continue;
    kv.append(el('span', {class: 'muted', text: k}), el('span', {text: String(v)}));
  }
  view.append(kv);
  (t.segments || []).forEach((seg, si) => {
    view.append(el('div', {class: 'segment-boundary', 'data-segment': String(si),
                           text: `segment ${si}` + (seg.reason ? ` — ${seg.reason}` : '')}));
    for (const turn of seg.turns || []) {
      const role = String(turn.role || '').toLowerCase();
      const head = el('div', {class: 'turn-head'}, el('strong', {text: role}));
      if (turn.tool_call_id) head.append(el('span', {class: 'muted', text: 'result of ' + turn.tool_call_id}));
      const body = el('div', {class: 'turn-body'});
      for (const c of turn.tool_calls || []) body.append(el('div', {class: 'toolcall', text: `${c.name}(${c.arguments_json})`}));
      if (turn.tokens && (turn.tokens.ids || []).length) body.append(renderTokens(turn.tokens));
      else if (turn.text) body.append(el('div', {class: 'tokens', text: turn.text}));
      view.append(el('div', {class: 'turn', 'data-role': role}, head, body));
    }
  });
}

async function loadTrajectories() {
  const list = await getJson('/api/trajectories?limit=200');
  const body = document.querySelector('#trajectory-list tbody');
  body.replaceChildren();
  if (list.unavailable) { body.append(el('tr', {}, el('td', {colspan: 6, class: 'muted', text: 'No trajectory store in this process.'}))); return; }
  for (const t of list.trajectories) {
    const row = el('tr', {'data-id': t.id},
      el('td', {text: t.task}), el('td', {text: t.scaffold}), el('td', {text: fmt(t.reward)}),
      el('td', {text: String(t.turns)}), el('td', {text: String(t.tool_calls)}), el('td', {text: t.status}));
    row.addEventListener('click', () => {
      for (const r of body.querySelectorAll('tr.selected')) r.classList.remove('selected');
      row.classList.add('selected');
      showTrajectory(t.id).catch(e => reportError(e.message));
    });
    body.append(row);
  }
  const wanted = new URLSearchParams(location.search).get('trajectory') || (list.trajectories[0] || {}).id;
  if (wanted && !document.getElementById('trajectory-view').dataset.trajectory) await showTrajectory(wanted);
}

// ---- eval -----------------------------------------------------------------------------
async function loadEval() {
  const jobs = await getJson('/api/eval_jobs');
  const root = document.getElementById('eval-jobs');
  root.replaceChildren();
  if (!jobs.length) { root.append(el('p', {class: 'muted', text: 'No eval jobs.'})); return; }
  for (const j of jobs) {
    const r = j.result || {};
    const table = el('table', {'data-job': j.job});
    const k = r.k || 1;
    table.append(el('thead', {}, el('tr', {}, ...['agent', 'tasks', 'trials', 'pass@1', `pass@${k}`, 'mean ± se', 'errors', 'tokens (prompt / completion)'].map(h => el('th', {text: h})))));
    const tb = el('tbody');
    for (const [agent, a] of Object.entries(r.agents || {})) {
      tb.append(el('tr', {'data-agent': agent}, el('td', {text: agent}), el('td', {text: String(a.tasks)}),
        el('td', {text: String(a.trials)}), el('td', {text: fmt(a['pass@1'])}), el('td', {text: fmt(a[`pass@${k}`])}),
        el('td', {text: `${fmt(a.mean_reward)} ± ${fmt(a.reward_stderr)}`}), el('td', {text: String(a.errors)}),
        el('td', {text: a.prompt_tokens === undefined ? '–' : `${a.prompt_tokens} / ${a.completion_tokens}`})));
    }
    table.append(tb);
    root.append(el('h3', {text: `${j.job} — ${r.model ? `model=${r.model} ` : ''}tasks=${r.tasks} trials=${r.trials} pass@1=${fmt(r['pass@1'])} pass@k=${fmt(r['pass@k'])} errors=${r.errors}`}), table);
  }
}

// ---- navigation and refresh -----------------------------------------------------------
function showView() {
  const name = (location.hash || '#curves').slice(1);
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== name;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === name);
}
window.addEventListener('hashchange', showView);
showView();

async function refresh() {
  const results = await Promise.allSettled([loadCurves(), loadFleet(), loadTrajectories(), loadEval()]);
  for (const r of results) if (r.status === 'rejected') reportError(r.reason.message || String(r.reason));
  document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
}
refresh().then(() => { document.body.dataset.status = 'ready'; });
setInterval(() => { if (!document.hidden) refresh(); }, 5000);
