// What every page of the console shares: the API client, formatting, small components.
import { html, useEffect, useRef } from './vendor/htm-preact-standalone.mjs';

export { html };

export const API = new URL('../v1', location.href).pathname;
export const STATES = ['active', 'paused', 'completed'];
export const EXEC_STATUSES = ['running', 'succeeded', 'failed', 'timed_out', 'lost', 'skipped'];

export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || (body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.details = Array.isArray(err.details) ? err.details : [];
  }
}

// What a 412 (If-Match) says in plain words: "it is now at version N" (the API's message names it).
export function changedSince(error, what) {
  const at = /version (\d+)/.exec((error && error.message) || '');
  return `This ${what} changed since you opened it${at ? `: it is now at version ${at[1]}` : ''}.`;
}

export async function api(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: 'application/json', ...headers }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  const answer = await fetch(API + path, init);
  const text = await answer.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { message: text.slice(0, 200) }; }
  if (!answer.ok) throw new ApiError(answer.status, data);
  return data;
}

// Every item of a list, page after page (200 a page): an owner's calendars or rule sets, which
// a page does not bound.
export async function allPages(path, key, params = {}) {
  let items = [];
  let cursor = null;
  do {
    const page = await api('GET', `${path}${query({ ...params, limit: 200, cursor })}`);
    items = items.concat(page[key]);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// -- formatting --------------------------------------------------------------------------------

export function fmtTime(iso) {
  if (!iso) return '—';
  return iso.replace('T', ' ').replace(/\.\d+/, '').replace(/Z$|\+00:00$/, ' UTC');
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const sign = ms < 0 ? '−' : '';
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60000) return `${sign}${(a / 1000).toFixed(1)} s`;
  if (a < 3600000) return `${sign}${(a / 60000).toFixed(1)} min`;
  return `${sign}${(a / 3600000).toFixed(1)} h`;
}

export function fromNow(iso) {
  if (!iso) return '';
  const d = Date.parse(iso) - Date.now();
  return d >= 0 ? `in ${fmtMs(d)}` : `${fmtMs(-d)} ago`;
}

// Lateness: how long after it was due an attempt started (due_at: the occurrence, a retry's
// time, the resume of a catch-up, a manual run's request). An execution recorded before due_at
// existed has one only as a first scheduled attempt (a retry's start would count its backoff).
export function lateness(e) {
  if (!e.started_at) return null;
  if (e.due_at) return Date.parse(e.started_at) - Date.parse(e.due_at);
  if (e.trigger !== 'schedule' || e.attempt !== 1 || !e.scheduled_at) return null;
  return Date.parse(e.started_at) - Date.parse(e.scheduled_at);
}

// Backoff: how long after its occurrence an attempt was due (a retry's backoff, a catch-up's pause).
export function backoff(e) {
  if (!e.due_at || !e.scheduled_at) return null;
  return Date.parse(e.due_at) - Date.parse(e.scheduled_at);
}

// The wall time of an instant in a time zone: "2027-03-28 03:00:00 CEST" (null for UTC or a bad zone).
export function fmtZoned(iso, zone) {
  if (!iso || !zone || zone === 'UTC') return null;
  try {
    const parts = Object.fromEntries(new Intl.DateTimeFormat('en-GB', {
      timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit',
      second: '2-digit', hourCycle: 'h23', timeZoneName: 'short' }).formatToParts(new Date(iso)).map((p) => [p.type, p.value]));
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${parts.timeZoneName}`;
  } catch { return null; }
}

// A job's next run as a person reads it: a paused job has none ("paused": its next_run_at is the
// occurrence it holds, not a run), a completed one neither.
export function nextRun(job) {
  if (job.state === 'paused') return 'paused';
  if (job.state === 'completed' || !job.next_run_at) return '—';
  return fmtTime(job.next_run_at);
}

// When a job's interval schedule (rate(), @every) counts from: its start_at, else its creation
// rounded down to the second (as the planner does; a start_at's fraction rounds up, there too).
export const anchorOf = (job) => job.start_at || (job.created_at ? job.created_at.replace(/\.\d+/, '') : null);

export const Badge = ({ value }) => value ? html`<span class="badge b-${value}">${value.replace('_', ' ')}</span>` : html`<span class="muted">—</span>`;

export const ErrorBox = ({ error }) => error ? html`
  <div class="alert" role="alert">${error.message || String(error)}
    ${error.status === 403 ? html`<div class="hint">This API takes only signed calls: open the console through
      <code>scheduler console --endpoint URL</code>, which signs them with your AWS credentials.</div>` : ''}
  </div>` : null;

// -- routing -----------------------------------------------------------------------------------

// A list narrowed to one job (its address's job_id): the job, named by its first row, and a
// button that lists every job's again.
export const OneJob = ({ jobId, rows, onAll }) => {
  if (!jobId) return '';
  const name = rows && rows[0] ? rows[0].job_name : null;
  return html`<span class="job-filter">one job${name ? html`: <a href="#/jobs/${jobId}">${name}</a>` : ''}
    <button type="button" onClick=${onAll}>all jobs</button></span>`;
};

export function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  return { parts: path.split('/').filter(Boolean), params: new URLSearchParams(qs || '') };
}

export function go(hash) { location.hash = hash; }

// Calls fn every ms while the page is visible. A tab in the background reads nothing (each read
// is a request to the API, an invocation billed in a deployment, and a console left open in a
// tab all day would make 17,280 of them a page), and a tab shown again that missed a read reads
// at once.
export function useInterval(fn, ms) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    let missed = false;
    const tick = () => { if (document.hidden) missed = true; else saved.current(); };
    const shown = () => {
      if (document.hidden || !missed) return;
      missed = false;
      saved.current();
    };
    const id = setInterval(tick, ms);
    document.addEventListener('visibilitychange', shown);
    return () => { clearInterval(id); document.removeEventListener('visibilitychange', shown); };
  }, [ms]);
}

