// Executions: the rows of a job's history and of the recent activity, one execution's details
// (a click on its row), and the page of one execution (#/executions/ID, over
// GET /v1/executions/{id}), which a row, an alert and a chained run's cause link to.
import { useState, useEffect, useCallback, useRef } from './vendor/htm-preact-standalone.mjs';
import { html, api, fmtTime, fmtMs, lateness, backoff, Badge, ErrorBox, useInterval } from './lib.js';
import { skippedText } from './runs.js';

export const executionHref = (id) => `#/executions/${encodeURIComponent(id)}`;

// One execution, whole: its times, its error and the first bytes of its target's answer. In a
// list, its id leads to its own page (``linked``), and its attempt and backoff are said again
// (a narrow window leaves those columns out).
function ExecutionDetails({ e, linked = true }) {
  const row = (label, value) => html`<dt>${label}</dt><dd>${value ?? html`<span class="muted">—</span>`}</dd>`;
  return html`
    <dl class="execution-details">
      ${row('Execution', linked
        ? html`<a class="execution-link" href=${executionHref(e.id)} onClick=${(ev) => ev.stopPropagation()}><code>${e.id}</code></a>`
        : html`<code>${e.id}</code>`)}
      ${e.caused_by ? row('Caused by', html`<a class="cause" href=${executionHref(e.caused_by)}
        onClick=${(ev) => ev.stopPropagation()}>execution <code>${e.caused_by}</code></a>
        <span class="muted"> of <a class="cause-job" href="#/jobs/${e.caused_by_job_id}">its job</a>, whose end ran this one
        (on_success, on_failure or on_complete)</span>`) : ''}
      ${linked ? row('Attempt', html`${e.attempt}${backoff(e) > 0 ? html`<span class="muted">, due ${waitOf(e)} after its occurrence</span>` : ''}`) : ''}
      ${row('Scheduled', fmtTime(e.scheduled_at))}
      ${e.shifted_from ? row('Shifted from', html`<span class="shifted">${fmtTime(e.shifted_from)}
        <span class="muted"> (calendar ${e.excluded_by} excluded it; on_excluded: shift)</span></span>`) : ''}
      ${row('Due', e.due_at ? fmtTime(e.due_at) : null)}
      ${row('Started', e.started_at ? fmtTime(e.started_at) : null)}
      ${row('Finished', e.finished_at ? fmtTime(e.finished_at) : null)}
      ${row('Waited', e.waited_ms ? html`<span class="waited">${fmtMs(e.waited_ms)} for ${e.waited_for}</span>` : null)}
      ${row('Error', e.error || skippedText(e) ? html`<span class="error-text">${e.error || skippedText(e)}</span>` : null)}
      ${e.overrides ? row('Overrides', html`<pre class="overrides">${JSON.stringify(e.overrides, null, 2)}</pre>`) : ''}
      ${row('Response', e.response_excerpt ? html`<pre class="excerpt">${e.response_excerpt}</pre>` : null)}
    </dl>`;
}

// A chained run's trigger: "chain ←", leading to the execution that caused it.
const Trigger = ({ e }) => html`${e.caused_by
  ? html`<a class="cause" href=${executionHref(e.caused_by)} title=${'caused by execution ' + e.caused_by}
           onClick=${(ev) => ev.stopPropagation()}>${e.trigger} ←</a>`
  : e.trigger}${e.overrides ? html` <span class="tag" title="run with overrides">overrides</span>` : ''}${e.shifted_from
  ? html` <span class="tag shifted" title=${'shifted from ' + fmtTime(e.shifted_from) + ' by calendar ' + e.excluded_by}>shifted</span>`
  : ''}`;

const waitOf = (e) => { const b = backoff(e); return b > 0 ? fmtMs(b) : '—'; };

export function ExecutionRows({ executions, withJob }) {
  const [open, setOpen] = useState(null);
  return html`
    <table class="list executions">
      <thead><tr>${withJob ? html`<th>Job</th>` : ''}<th>Started</th><th>Status</th><th>Trigger</th><th class="num attempt">Attempt</th>
        <th class="num">HTTP</th><th class="num">Duration</th><th class="num" title="start against the time the attempt was due">Late</th>
        <th class="num backoff" title="how long after its occurrence the attempt was due: a retry's backoff, a catch-up's pause">Backoff</th>
        <th>Error</th></tr></thead>
      <tbody>${executions.map((e) => [html`
        <tr key=${e.id} class=${`exec${open === e.id ? ' open' : ''}`} onClick=${() => setOpen(open === e.id ? null : e.id)}>
          ${withJob ? html`<td><a href="#/jobs/${e.job_id}">${e.job_name || e.job_id}</a></td>` : ''}
          <td title=${'scheduled ' + fmtTime(e.scheduled_at)}>${fmtTime(e.started_at)}</td>
          <td><${Badge} value=${e.status} /></td>
          <td><${Trigger} e=${e} /></td>
          <td class="num attempt">${e.attempt}</td>
          <td class="num http">${e.http_status ?? '—'}</td>
          <td class="num">${fmtMs(e.duration_ms)}</td>
          <td class="num late">${fmtMs(lateness(e))}</td>
          <td class="num backoff">${waitOf(e)}</td>
          <td class="error-text">${e.error || skippedText(e) || ''}</td>
        </tr>`, open === e.id ? html`
        <tr key=${e.id + '-details'} class="details"><td colspan=${withJob ? 10 : 9}><${ExecutionDetails} e=${e} /></td></tr>` : null])}
      </tbody>
    </table>`;
}

// The page of one execution: read again every 3 s while it runs (an ended one changes no more),
// one read at a time (an older answer never follows a newer one); one gone (its job deleted
// meanwhile: a 404) is read no more.
export function Execution({ id }) {
  const [e, setExecution] = useState(null);
  const [error, setError] = useState(null);
  const reads = useRef({ busy: false, gone: false });
  const load = useCallback(async () => {
    if (reads.current.busy || reads.current.gone) return;
    reads.current.busy = true;
    try {
      setExecution(await api('GET', `/executions/${encodeURIComponent(id)}`));
      setError(null);
    } catch (err) {
      setError(err);
      if (err.status === 404) {
        reads.current.gone = true;
        setExecution(null);
      }
    } finally { reads.current.busy = false; }
  }, [id]);
  useEffect(() => { load(); }, [id]);
  useInterval(() => { if (e && e.status === 'running') load(); }, 3000);
  if (!e) {
    return html`<section><h1>Execution</h1><${ErrorBox} error=${error} />${!error ? html`<p class="muted">Loading…</p>`
      : error.status === 404 ? html`<p class="muted gone">An execution is kept for the retention period, and is deleted
          with its job.</p>` : ''}</section>`;
  }
  const row = (label, value) => html`<dt>${label}</dt><dd>${value}</dd>`;
  return html`
    <section>
      <div class="head"><h1>Execution of ${e.job_name} <${Badge} value=${e.status} /></h1>
        ${e.status === 'running' ? html`<span class="muted refreshed">refreshes every 3 s until it ends</span>` : ''}</div>
      <${ErrorBox} error=${error} />
      <div class="cards">
        <div class="card">
          <h2>Summary</h2>
          <dl class="execution-summary">
            ${row('Job', html`<a class="job" href="#/jobs/${e.job_id}">${e.job_name}</a>${' '}<a class="muted"
              href="#/activity?job_id=${e.job_id}">(its executions)</a>`)}
            ${row('Trigger', html`<${Trigger} e=${e} />`)}
            ${row('Attempt', e.attempt)}
            ${row('HTTP status', html`<span class="http">${e.http_status ?? '—'}</span>`)}
            ${row('Duration', fmtMs(e.duration_ms))}
            ${row('Late', html`<span class="late">${fmtMs(lateness(e))}</span>`)}
            ${row('Backoff', html`<span class="backoff">${waitOf(e)}</span>`)}
          </dl>
        </div>
        <div class="card grow"><h2>Details</h2><${ExecutionDetails} e=${e} linked=${false} /></div>
      </div>
    </section>`;
}
