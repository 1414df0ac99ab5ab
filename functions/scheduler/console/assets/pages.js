// The console's pages: jobs, one job, recent activity (their rows of executions: executions.js).
import { useState, useEffect, useRef, useCallback } from './vendor/htm-preact-standalone.mjs';
import { html, api, query, fmtTime, fmtZoned, fromNow, lateness, backoff, nextRun, anchorOf, Badge, ErrorBox,
         go, OneJob, useInterval, STATES, EXEC_STATUSES } from './lib.js';
import { TargetSummary } from './targets.js';
import { Changes } from './changes.js';
import { JobAlerts } from './alerts.js';
import { BulkActions, PauseSummary, RunOptions, usePagedList } from './runs.js';
import { ExecutionRows } from './executions.js';

// -- jobs --------------------------------------------------------------------------------------

export function Jobs({ params }) {
  const [filters, setFilters] = useState({ state: params.get('state') || '', tag: params.get('tag') || '',
                                            name_prefix: params.get('name_prefix') || '' });
  const [jobs, setJobs] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const [updated, setUpdated] = useState(null);

  // Every load's number: a refresh answers only when no load started after it. A "More" on its
  // way holds the refreshes back (its rows follow the list it was asked from).
  const latest = useRef(0);
  const paging = useRef(false);
  const filtersNow = useRef(filters);
  filtersNow.current = filters;
  const load = useCallback(async (after, size = 50, refresh = false) => {
    if (refresh && paging.current) return;
    const mine = ++latest.current;
    if (after) paging.current = true;
    try {
      // The rows asked for, in pages of at most 200 (a refresh reads every row shown).
      let page = await api('GET', `/jobs${query({ ...filters, limit: Math.min(200, size), cursor: after })}`);
      let rows = page.jobs;
      while (page.next_cursor && rows.length < size) {
        page = await api('GET', `/jobs${query({ ...filters, limit: Math.min(200, size - rows.length), cursor: page.next_cursor })}`);
        rows = rows.concat(page.jobs);
      }
      if (after ? filtersNow.current !== filters : mine !== latest.current) return;
      setJobs((old) => (after && old ? old.concat(rows) : rows));
      setCursor(page.next_cursor);
      setUpdated(new Date());
      setError(null);
    } catch (e) { setError(e); } finally { if (after) paging.current = false; }
  }, [filters]);
  // The list follows the runner (next runs, last statuses, new jobs): the rows shown are read
  // again every 5 s, pages loaded with "More" included.
  const shown = useRef(0);
  shown.current = jobs ? jobs.length : 0;
  useInterval(() => load(null, Math.max(50, shown.current), true), 5000);

  useEffect(() => {
    const t = setTimeout(() => {
      history.replaceState(null, '', `#/jobs${query(filters)}`);
      load(null);
    }, 200);
    return () => clearTimeout(t);
  }, [filters]);

  const set = (k) => (ev) => setFilters({ ...filters, [k]: ev.target.value });
  return html`
    <section>
      <div class="head"><h1>Jobs</h1>
        <span class="muted refreshed">refreshes every 5 s${updated ? `; updated ${updated.toISOString().slice(11, 19)} UTC` : ''}</span>
        <a class="button primary" href="#/jobs/new">New job</a></div>
      <form class="filters" onSubmit=${(ev) => ev.preventDefault()}>
        <label>State <select name="state" value=${filters.state} onChange=${set('state')}>
          <option value="">any</option>${STATES.map((s) => html`<option value=${s} selected=${s === filters.state}>${s}</option>`)}
        </select></label>
        <label>Tag <input name="tag" value=${filters.tag} onInput=${set('tag')} placeholder="billing" /></label>
        <label>Name starts with <input name="name_prefix" value=${filters.name_prefix} onInput=${set('name_prefix')} /></label>
      </form>
      <${BulkActions} filters=${filters} listed=${jobs === null ? null : jobs.length} onDone=${() => load(null)} />
      <${ErrorBox} error=${error} />
      ${jobs === null ? html`<p class="muted">Loading…</p>` : jobs.length === 0 ? html`<p class="empty">No jobs match.</p>` : html`
        <table class="list jobs">
          <thead><tr><th>Name</th><th>State</th><th>Schedule</th><th>Next run</th><th>Last status</th><th class="num">Failures</th></tr></thead>
          <tbody>${jobs.map((j) => html`
            <tr key=${j.id}>
              <td><a href="#/jobs/${j.id}">${j.name}</a>${(j.tags || []).map((t) => html` <span class="tag">${t}</span>`)}</td>
              <td><${Badge} value=${j.state} /></td>
              <td><code>${expressionsOf(j) || `once at ${fmtTime(j.run_at)}`}</code>${j.timezone && j.timezone !== 'UTC' ? html` <span class="muted">${j.timezone}</span>` : ''}</td>
              <td class="next-run" title=${j.state === 'active' ? fromNow(j.next_run_at) : ''}>${nextRun(j)}</td>
              <td><${Badge} value=${j.stats && j.stats.last_status} /></td>
              <td class="num">${j.stats ? j.stats.failure_count : 0}</td>
            </tr>`)}
          </tbody>
        </table>
        ${cursor ? html`<button onClick=${() => load(cursor)}>More</button>` : ''}`}
    </section>`;
}

// -- one job -----------------------------------------------------------------------------------

// The preview of a job's (or the form's) scheduling fields, each time explained (its expression
// and its spread); a job's id seeds its spread, so the times are the job's own.
export function previewBody(src, count) {
  const body = { timezone: src.timezone || 'UTC', count, explain: true };
  if (src.run_at) body.run_at = src.run_at;
  else if (src.schedules && src.schedules.length) body.schedules = src.schedules;
  else body.schedule = src.schedule;
  if (src.spread) body.spread = src.spread;
  if (src.id) body.job_id = src.id;
  if (src.start_at) body.start_at = src.start_at;
  if (src.end_at) body.end_at = src.end_at;
  if (src.exclude_calendars && src.exclude_calendars.length) {
    body.exclude_calendars = src.exclude_calendars;
    body.on_excluded = src.on_excluded || 'skip';
  }
  return body;
}

// A job's expressions as the pages show them: "a | b" for several.
export const expressionsOf = (j) => (j.schedules && j.schedules.length ? j.schedules.join(' | ') : j.schedule);

// A job's own next times: its next run, then the occurrences after it, previewed from the job's
// anchor (rate() and @every count from its start_at, else its creation, not from now). A paused
// or completed job: what follows now.
export async function upcoming(job, count = 5) {
  const body = previewBody({ ...job, start_at: job.run_at ? job.start_at : anchorOf(job) }, count);
  if (job.state === 'active' && job.next_run_at) {
    const rest = await api('POST', '/schedules/preview', { ...body, count: count - 1, after: job.next_run_at });
    return [{ at: job.next_run_at }, ...rest.occurrences];
  }
  return (await api('POST', '/schedules/preview', body)).occurrences;
}

// One time: the UTC instant, the wall time in the job's zone when it has one, and, explained,
// the expression that produced it, the spread's offset, and what a calendar did: excluded it
// (it does not run) or shifted it from its time.
export const Occurrence = ({ at, zone, expression, spread, item }) => {
  const local = fmtZoned(at, zone);
  const excluded = item && item.excluded_by && !item.shifted_from;
  const why = !item || !item.excluded_by ? ''
    : item.shifted_from ? html` <span class="calendar-note shifted">shifted from ${fmtTime(item.shifted_from)} (${item.excluded_by})</span>`
    : html` <span class="calendar-note excluded">excluded by ${item.excluded_by}</span>`;
  return html`<li class=${excluded ? 'excluded' : ''}><span class="utc">${fmtTime(at)}</span>${local ? html` <span class="local muted">(${local})</span>` : ''}${
    expression ? html` <code class="expression">${expression}</code>` : ''}${
    spread ? html` <span class="spread muted">+${spread}s spread</span>` : ''}${why}</li>`;
};

// The items of an explained preview (a job's next run is a bare instant: {at}); the expression is
// named when there are several.
export const occurrenceItems = (items, zone, several) => items.map((o) => html`
  <${Occurrence} key=${o.at + (o.excluded_by || '')} at=${o.at} zone=${zone} expression=${several ? o.expression : null} spread=${o.spread_seconds} item=${o} />`);

// The chart of the executions listed (of the status chosen, when one is).
function Chart({ executions, status }) {
  const box = useRef(null);
  useEffect(() => {
    const points = executions.filter((e) => e.started_at).map((e) => ({
      x: Date.parse(e.started_at) / 1000, late: lateness(e), wait: backoff(e) || null, took: e.duration_ms }))
      .sort((a, b) => a.x - b.x);
    if (!box.current || points.length === 0 || typeof uPlot === 'undefined') return undefined;
    const plot = new uPlot({
      width: Math.max(300, box.current.clientWidth), height: 220,
      // One start only: a minute either side of it (uPlot would stretch the axis over years).
      scales: { x: { time: true, range: (u, min, max) => (points.length === 1 ? [points[0].x - 60, points[0].x + 60] : [min, max]) } },
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      series: [{}, { label: 'lateness (ms)', stroke: '#c2410c', width: 2, points: { show: true } },
               { label: 'duration (ms)', stroke: '#2563eb', width: 2, points: { show: true } },
               { label: 'backoff (ms)', stroke: '#7c3aed', width: 1, dash: [4, 4], points: { show: true } }],
      axes: [{}, { label: 'ms' }],
    }, [points.map((p) => p.x), points.map((p) => p.late), points.map((p) => p.took ?? null),
        points.map((p) => p.wait)], box.current);
    box.current.plot = plot;  // its scales, for the browser tests
    return () => plot.destroy();
  }, [executions]);
  if (!executions.some((e) => e.started_at)) {
    return html`<p class="muted chart-empty">${status ? `No execution with status ${status.replace('_', ' ')} has started.`
      : 'No execution has started yet.'}</p>`;
  }
  return html`<div class="chart" ref=${box}></div>`;
}

// What an execution of the job runs next (its chains), as a summary row.
function Chains({ job }) {
  const parts = [['on success', job.on_success], ['on failure', job.on_failure], ['on complete', job.on_complete]]
    .filter(([, refs]) => refs && refs.length);
  if (!parts.length) return '';
  return html`<dt>Runs next</dt><dd class="chains">${parts.map(([when, refs]) => html`
    <div key=${when}>${when}: ${refs.join(', ')}</div>`)}</dd>`;
}

// A job that is no more: deleted (its change log, kept after the delete for the executions'
// retention period, says who deleted it and when), or never the caller's (the 404 alone).
function GoneJob({ id, error }) {
  const [changes, setChanges] = useState(undefined);  // undefined: not read yet; null: no log either
  useEffect(() => {
    api('GET', `/jobs/${id}/changes?limit=1`).then((p) => setChanges(p.changes), () => setChanges(null));
  }, [id]);
  const deleted = changes && changes[0] && changes[0].action === 'delete' ? changes[0] : null;
  if (!deleted) return html`<section><${ErrorBox} error=${error} /></section>`;
  return html`
    <section>
      <div class="head"><h1>Deleted job</h1></div>
      <p class="gone" role="status">Deleted ${fmtTime(deleted.at)} by ${deleted.by}, with its executions. Its changes
        are kept for the executions' retention period:</p>
      <${Changes} path=${`/jobs/${id}/changes`} version=${null} />
    </section>`;
}

const NONE = [];  // the executions before the first page: one array, not a new one each render

export function Job({ id }) {
  const [job, setJob] = useState(null);
  const [tab, setTab] = useState('executions');
  const [occurrences, setOccurrences] = useState(null);
  const [error, setError] = useState(null);
  const [note, setNote] = useState('');
  const [confirming, setConfirming] = useState(false);
  // No read of the job is sent once it is no more (a 404), nor while a delete is under way: the
  // delete waits for the reads in flight (one answered after it would be a 404, which the
  // browser reports as an error).
  const stopped = useRef(false);
  const refreshing = useRef(null);

  // The job's executions, newest first (of one status, when chosen); "Older executions" reads the
  // page after them.
  const [status, setStatus] = useState('');
  const pages = usePagedList(`/jobs/${id}/executions`, { status }, setError);
  const { older, loadOlder } = pages;
  const executions = pages.rows || NONE;
  const loadExecutions = useCallback(async () => {
    if (!stopped.current) await pages.loadNewest();
  }, [pages.loadNewest]);
  const stopReads = () => Promise.allSettled([refreshing.current, pages.stop()]);
  // Another status chosen: its executions read at once (the page's first read is load's).
  const statusRead = useRef(status);
  useEffect(() => {
    if (statusRead.current === status) return;
    statusRead.current = status;
    loadExecutions();
  }, [status, loadExecutions]);

  const load = useCallback(async () => {
    try {
      const j = await api('GET', `/jobs/${id}`);
      setJob(j);
      setError(null);
    } catch (e) {
      setError(e);
      if (e.status === 404) { stopped.current = true; return; }
    }
    loadExecutions();
  }, [id]);

  useEffect(() => { load(); }, [id]);
  // The job's own planned times, read again whenever its next run, version or state moves.
  useEffect(() => {
    if (!job) return undefined;
    let live = true;
    upcoming(job).then((o) => live && setOccurrences(o)).catch((e) => live && setOccurrences(e));
    return () => { live = false; };
  }, [job && job.next_run_at, job && job.version, job && job.state]);
  // The job's summary and executions follow what the runner does (a run, a retry, a completion).
  // One refresh at a time (a slow one's answer never follows a newer one's); a job deleted
  // elsewhere meanwhile: the page says so (GoneJob), and no answer brings it back.
  const busy = useRef(false);
  useInterval(() => {
    if (stopped.current || busy.current) return;
    busy.current = true;
    const gone = (e) => { if (e.status === 404 && !stopped.current) { stopped.current = true; setError(e); setJob(null); } };
    // A note of this page's own action ("Paused.") goes once the job's state moves on (resumed elsewhere).
    const read = api('GET', `/jobs/${id}`).then((j) => {
      if (stopped.current) return;
      setJob((was) => { if (was && was.state !== j.state) setNote(''); return j; });
    }, gone);
    refreshing.current = Promise.allSettled([read, loadExecutions()]).finally(() => { busy.current = false; });
  }, 3000);

  const act = async (what) => {
    try {
      if (what === 'run') {
        await api('POST', `/jobs/${id}/run`);
        setNote('Run requested: the execution appears below when it starts.');
        setTimeout(loadExecutions, 700);
      } else if (what === 'delete') {
        stopped.current = true;
        await stopReads();  // every read of the job under way answered first (a later one would be a 404)
        try {
          await api('DELETE', `/jobs/${id}`, undefined, { 'If-Match': String(job.version) });  // not one changed unseen
        } catch (e) {
          stopped.current = false;  // not deleted: the page goes on as it was
          pages.resume();
          setConfirming(false);  // asked again after the error is read (a 412: the job changed)
          throw e;
        }
        go('#/jobs');
        return;
      } else {
        setJob(await api('POST', `/jobs/${id}/${what}`));
        setNote(what === 'pause' ? 'Paused.' : 'Resumed.');
      }
      setError(null);
    } catch (e) { setError(e); }
  };

  if (!job && error && error.status === 404) return html`<${GoneJob} id=${id} error=${error} />`;
  if (!job) return html`<section><${ErrorBox} error=${error} />${error ? '' : html`<p class="muted">Loading…</p>`}</section>`;
  const definition = { ...job };
  for (const k of ['id', 'owner', 'version', 'created_at', 'updated_at', 'stats', 'next_run_at', 'last_run_at', 'state', 'pause']) delete definition[k];
  return html`
    <section>
      <div class="head">
        <h1>${job.name} <${Badge} value=${job.state} /></h1>
        <div class="actions">
          ${job.state === 'paused' ? html`<button onClick=${() => act('resume')}>Resume</button>`
                                   : html`<button onClick=${() => act('pause')} disabled=${job.state !== 'active'}>Pause</button>`}
          <button onClick=${() => act('run')}>Run now</button>
          <a class="button" href="#/jobs/${id}/edit">Edit</a>
          ${confirming ? html`<span class="confirm">Delete this job and its history?
              <button class="danger" onClick=${() => act('delete')}>Delete</button>
              <button onClick=${() => setConfirming(false)}>Cancel</button></span>`
                       : html`<button class="danger" onClick=${() => setConfirming(true)}>Delete</button>`}
        </div>
      </div>
      <${ErrorBox} error=${error} />
      ${note ? html`<div class="note" role="status">${note}</div>` : ''}
      <${RunOptions} job=${job}
        onPaused=${(j) => { setJob(j); setError(null); setNote('Paused.'); }}
        onRun=${() => { setError(null); setNote('Run with overrides requested: the execution appears below when it starts.'); setTimeout(loadExecutions, 700); }} />
      <div class="cards">
        <div class="card">
          <h2>Summary</h2>
          <dl>
            <dt>Next run</dt><dd class="next-run">${job.state === 'active'
              ? html`${fmtTime(job.next_run_at)} <span class="muted">${fromNow(job.next_run_at)}</span>`
              : job.state === 'paused' ? html`paused <span class="muted">(runs again when resumed)</span>` : '—'}</dd>
            <${PauseSummary} pause=${job.pause} />
            <dt>Last run</dt><dd>${fmtTime(job.last_run_at)}</dd>
            <dt>Runs</dt><dd>${job.stats.run_count} (${job.stats.failure_count} failed)</dd>
            <dt>Last status</dt><dd><${Badge} value=${job.stats.last_status} /></dd>
            ${job.stats.last_error ? html`<dt>Last error</dt><dd class="error-text">${job.stats.last_error}</dd>` : ''}
            ${(job.exclude_calendars || []).length ? html`<dt>Calendars</dt><dd class="calendars">${job.exclude_calendars.map((c) => html`<a class="tag" href="#/calendars/${encodeURIComponent(c)}">${c}</a> `)}
              <span class="muted">(${job.on_excluded === 'shift' ? 'shifted past them' : 'skipped'})</span></dd>` : ''}
            ${job.limits ? html`<dt>Limits</dt><dd class="limits">${[job.limits.max_in_flight != null ? `${job.limits.max_in_flight} in flight` : '',
              job.limits.per_second != null ? `${job.limits.per_second}/s` : ''].filter(Boolean).join(', ')} <span class="muted">key ${job.limits.key || 'the target\'s origin'}</span></dd>` : ''}
            <${Chains} job=${job} />
            <dt>Version</dt><dd>${job.version}</dd>
            <dt>Id</dt><dd><code>${job.id}</code></dd>
          </dl>
          <h2>${job.state === 'paused' ? 'Next occurrences (once resumed)' : 'Next occurrences'}</h2>
          ${occurrences === null ? html`<p class="muted">…</p>` : occurrences instanceof Error
            ? html`<p class="muted">${occurrences.message}</p>`
            : occurrences.length === 0 ? html`<p class="muted">None: the schedule has ended.</p>`
            : html`<ol class="occurrences">${occurrenceItems(occurrences, job.timezone, (job.schedules || []).length > 1)}</ol>`}
        </div>
        <div class="card grow">
          <h2>Target</h2>
          <${TargetSummary} target=${job.target} />
          <h2>Definition</h2>
          <pre class="definition">${JSON.stringify(definition, null, 2)}</pre>
        </div>
      </div>
      <${JobAlerts} job=${job} />
      <h2>Lateness, backoff and duration</h2>
      <${Chart} executions=${executions} status=${status} />
      <div class="tabs" role="tablist">
        ${[['executions', 'Executions'], ['changes', 'Changes']].map(([key, label]) => html`
          <button key=${key} role="tab" aria-selected=${tab === key ? 'true' : 'false'} class=${tab === key ? 'here' : ''}
                  onClick=${() => setTab(key)}>${label}</button>`)}
      </div>
      ${tab === 'changes' ? html`<${Changes} path=${`/jobs/${id}/changes`} version=${job.version} />` : html`
      <form class="filters" onSubmit=${(ev) => ev.preventDefault()}>
        <label>Status <select name="execution_status" value=${status} onChange=${(ev) => setStatus(ev.target.value)}>
          <option value="">all</option>${EXEC_STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s.replace('_', ' ')}</option>`)}
        </select></label>
      </form>
      ${executions.length === 0 ? html`<p class="empty">${status ? `No executions with status ${status}.` : 'No executions yet.'}</p>`
        : html`<${ExecutionRows} executions=${executions} />`}
      ${older.cursor ? html`<button class="more" onClick=${() => loadOlder()}>Older executions</button>` : ''}`}
    </section>`;
}

// -- recent activity ---------------------------------------------------------------------------

export function Activity({ params }) {
  const [filters, setFilters] = useState({ status: params.get('status') || '', since: params.get('since') || '',
                                            job_id: params.get('job_id') || '' });
  // The filters the list is read with: a typed "since" is sent once the typing pauses.
  const [applied, setApplied] = useState(filters);
  const [updated, setUpdated] = useState(null);
  const [error, setError] = useState(null);
  const { rows: executions, older, loadNewest, loadOlder } = usePagedList('/executions', applied, setError);
  // Filters the API refused (a "since" that is no instant) are not read again every 5 s.
  const refused = useRef(false);
  const load = useCallback(async () => {
    const read = await loadNewest();
    if (read !== null) refused.current = !read;
    if (read) { setUpdated(new Date()); setError(null); }
  }, [loadNewest]);

  useEffect(() => {
    const t = setTimeout(() => setApplied(filters), filters.since === applied.since ? 0 : 300);
    return () => clearTimeout(t);
  }, [filters]);
  useEffect(() => {
    history.replaceState(null, '', `#/activity${query(applied)}`);
    setError(null);
    load();
  }, [applied]);
  useInterval(() => { if (!refused.current) load(); }, 5000);

  const set = (k, value) => setFilters({ ...filters, [k]: value });
  const status = filters.status;
  return html`
    <section>
      <div class="head"><h1>Recent activity</h1>
        <span class="muted">refreshes every 5 s${updated ? `; updated ${updated.toISOString().slice(11, 19)} UTC` : ''}</span></div>
      <form class="filters" onSubmit=${(ev) => ev.preventDefault()}>
        <label>Status <select name="status" value=${status} onChange=${(ev) => set('status', ev.target.value)}>
          <option value="">all</option>${EXEC_STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s.replace('_', ' ')}</option>`)}
        </select></label>
        <label class="check"><input type="checkbox" name="failures" checked=${status === 'failed'}
          onChange=${(ev) => set('status', ev.target.checked ? 'failed' : '')} /> failures only</label>
        <label>Since <input name="since" value=${filters.since} placeholder="2026-12-01T00:00:00Z"
          onInput=${(ev) => set('since', ev.target.value.trim())} /></label>
        <${OneJob} jobId=${filters.job_id} rows=${executions} onAll=${() => set('job_id', '')} />
      </form>
      <${ErrorBox} error=${error} />
      ${executions === null ? html`<p class="muted">Loading…</p>` : executions.length === 0
        ? html`<p class="empty">No executions${status ? ` with status ${status}` : ''}.</p>`
        : html`<${ExecutionRows} executions=${executions} withJob=${true} />`}
      ${older.cursor ? html`<button class="more" onClick=${() => loadOlder()}>Older executions</button>` : ''}
    </section>`;
}
