// Issue 33's run controls: a pause with a note and an end, a run with overrides, the bulk pause
// and resume of the jobs a filter selects, and how a paused job and a skipped row read; and the
// paged lists of executions (a job's, and the recent activity across jobs).
import { useState, useEffect, useRef, useCallback } from './vendor/htm-preact-standalone.mjs';
import { html, api, query, fmtTime, fromNow } from './lib.js';

// A list, newest first, that follows the runner (executions, or alerts: the answer's ``field``),
// read from ``route`` with ``filters``:
// ``loadNewest`` reads the newest page again, and with older pages shown it replaces the rows it
// covers, the older rows staying after it; when the runner went further than a page since (no
// row in common), the list starts again from the newest page, so that no run between the two is
// left out. ``loadOlder`` reads the page after the rows shown, again when a refresh replaced them
// meanwhile (its cursor would leave a hole). An answer for filters since changed is dropped; a
// first read of new filters that fails empties the list (its rows were the old filters'), and
// ``loadNewest`` answers true when it read, false when the API refused the filters, null when it
// read nothing for these filters (stopped, or filters since changed). ``stop`` ends the reads
// (the job is being deleted) and answers once those under way have ended; ``resume`` undoes it.
// ``rows`` is null until the first page.
export function usePagedList(route, filters, setError, field = 'executions') {
  const [executions, setExecutions] = useState(null);
  const [older, setOlder] = useState({ cursor: null, extended: false });
  const key = `${route}${query(filters)}`;
  // The ref holds what the answers left (a render may come after the next answer).
  const seen = useRef({ rows: [], older, generation: 0, key });
  const keyNow = useRef(key);
  keyNow.current = key;
  const reads = useRef({ stopped: false, underWay: new Set() });
  const read = (path) => {
    const answer = api('GET', path);
    reads.current.underWay.add(answer);
    const done = () => reads.current.underWay.delete(answer);
    answer.then(done, done);
    return answer;
  };
  const show = (rows, next) => {
    seen.current.rows = rows;
    seen.current.older = next;
    setExecutions(rows);
    setOlder(next);
  };
  const loadNewest = useCallback(async () => {
    if (reads.current.stopped) return null;
    try {
      const answer = await read(`${route}${query({ ...filters, limit: 50 })}`);
      if (keyNow.current !== key) return null;
      const page = { rows: answer[field], next_cursor: answer.next_cursor };
      const { rows, older: was } = seen.current;
      const last = page.rows[page.rows.length - 1];
      const same = seen.current.key === key;
      const at = same && last && was.extended ? rows.findIndex((e) => e.id === last.id) : -1;
      if (at >= 0) {
        show(page.rows.concat(rows.slice(at + 1)), was);
      } else {
        seen.current.generation += 1;  // an older page on its way follows the rows replaced
        seen.current.key = key;
        show(page.rows, { cursor: page.next_cursor, extended: false });
      }
      return true;
    } catch (e) {
      if (keyNow.current !== key) return null;
      if (seen.current.key !== key) {  // the rows shown are the old filters': none of the new
        seen.current.generation += 1;
        seen.current.key = key;
        show([], { cursor: null, extended: false });
      }
      setError(e);
      return false;
    }
  }, [key]);
  const loadOlder = async (tries = 3) => {
    const { generation, older: now } = seen.current;
    if (reads.current.stopped || !now.cursor) return;
    try {
      const answer = await read(`${route}${query({ ...filters, limit: 50, cursor: now.cursor })}`);
      if (generation !== seen.current.generation || keyNow.current !== key) {
        if (tries > 1 && keyNow.current === key) loadOlder(tries - 1);
        return;
      }
      const { rows } = seen.current;
      show(rows.concat(answer[field].filter((e) => !rows.some((x) => x.id === e.id))),
           { cursor: answer.next_cursor, extended: true });
    } catch (e) { setError(e); }
  };
  const stop = () => {
    reads.current.stopped = true;
    return Promise.allSettled([...reads.current.underWay]);
  };
  const resume = () => { reads.current.stopped = false; };
  return { rows: executions, older, loadNewest, loadOlder, stop, resume };
}

// "Name: value" lines (headers) or "name=value" lines (vars) as an object; blank lines ignored.
export function pairs(text, sep) {
  const out = {};
  for (const line of (text || '').split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf(sep);
    if (at < 1) throw new Error(`"${line.trim()}": write one ${sep === ':' ? 'Name: value' : 'name=value'} a line`);
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

// What a paused job's summary says of its pause: the note, when it resumes, who paused it, when.
export const PauseSummary = ({ pause }) => pause ? html`
  <dt>Paused</dt><dd class="pause-info">${fmtTime(pause.at)}${pause.by ? html` <span class="muted">by ${pause.by}</span>` : ''}</dd>
  ${pause.note ? html`<dt>Note</dt><dd class="pause-note">${pause.note}</dd>` : ''}
  <dt>Resumes</dt><dd class="pause-until">${pause.until
    ? html`${fmtTime(pause.until)} <span class="muted">by itself, ${fromNow(pause.until)}</span>`
    : html`<span class="muted">when resumed</span>`}</dd>` : null;

// A pause's body: its note and when it ends by itself (minutes from now), each when given.
function pauseBody(pause) {
  const body = {};
  if (pause.note.trim()) body.note = pause.note.trim();
  if (pause.minutes) body.until = new Date(Date.now() + Number(pause.minutes) * 60000).toISOString();
  return body;
}

// An error of one of the option cards, shown in that card (not at the top of the page).
const CardError = ({ error }) => error ? html`<div class="alert" role="alert">${error.message}</div>` : '';

// The options behind a job's buttons: a pause with a note and an end, a run with overrides, a
// backfill; each card says its own errors.
export function RunOptions({ job, onPaused, onRun }) {
  const [pause, setPause] = useState({ note: '', minutes: '' });
  const [run, setRun] = useState({ body: '', headers: '', vars: '' });
  const [failed, setFailed] = useState({});
  const fails = (card) => (e) => setFailed({ ...failed, [card]: e });
  const ok = (card) => { if (failed[card]) setFailed({ ...failed, [card]: null }); };
  const pauseNow = async (ev) => {
    ev.preventDefault();
    try {
      onPaused(await api('POST', `/jobs/${job.id}/pause`, pauseBody(pause)));
      ok('pause');
    } catch (e) { fails('pause')(e); }
  };
  const runNow = async (ev) => {
    ev.preventDefault();
    try {
      const body = {};
      if (run.body) body.body = run.body;
      const headers = pairs(run.headers, ':');
      const vars = pairs(run.vars, '=');
      if (Object.keys(headers).length) body.headers = headers;
      if (Object.keys(vars).length) body.vars = vars;
      await api('POST', `/jobs/${job.id}/run`, body);
      ok('run');
      onRun();
    } catch (e) { fails('run')(e); }
  };
  const set = (state, update, k) => (ev) => update({ ...state, [k]: ev.target.value });
  const [range, setRange] = useState({ start: '', end: '' });
  const [planned, setPlanned] = useState(null);
  const backfill = async (dryRun) => {
    try {
      const answer = await api('POST', `/jobs/${job.id}/backfill`, { start: range.start, end: range.end, dry_run: dryRun });
      setPlanned({ ...answer, dryRun });
      ok('backfill');
    } catch (e) { setPlanned(null); fails('backfill')(e); }
  };
  return html`
    <details class="run-options"><summary>More: a note and an end, overrides…</summary>
      <div class="cards">
        <form class="card pause-form" onSubmit=${pauseNow}>
          <h2>Pause with a note</h2>
          <label>Note <input name="pause_note" value=${pause.note} onInput=${set(pause, setPause, 'note')} maxlength="1024"
            placeholder="why (shown with the job)" /></label>
          <label>Resume by itself after (minutes) <input name="pause_minutes" type="number" min="1" value=${pause.minutes}
            onInput=${set(pause, setPause, 'minutes')} placeholder="empty: until resumed" /></label>
          <button type="submit" disabled=${job.state === 'completed'}>Pause with note</button>
          <${CardError} error=${failed.pause} />
        </form>
        <form class="card grow run-form" onSubmit=${runNow}>
          <h2>Run with overrides</h2>
          <label>Body <textarea name="run_body" rows="3" value=${run.body} onInput=${set(run, setRun, 'body')}
            placeholder="empty: the target's body"></textarea></label>
          <label>Headers <textarea name="run_headers" rows="2" value=${run.headers} onInput=${set(run, setRun, 'headers')}
            placeholder="X-Env: staging"></textarea></label>
          <label>Vars, for {{vars.NAME}} <textarea name="run_vars" rows="2" value=${run.vars} onInput=${set(run, setRun, 'vars')}
            placeholder="region=eu-west-1"></textarea></label>
          <button type="submit">Run with overrides</button>
          <${CardError} error=${failed.run} />
        </form>
        <form class="card backfill-form" onSubmit=${(ev) => { ev.preventDefault(); backfill(false); }}>
          <h2>Backfill a past range</h2>
          <label>From <input name="backfill_start" value=${range.start} onInput=${set(range, setRange, 'start')}
            placeholder="2026-12-01T00:00:00Z" /></label>
          <label>To <input name="backfill_end" value=${range.end} onInput=${set(range, setRange, 'end')}
            placeholder="2026-12-02T00:00:00Z" /></label>
          <button type="button" onClick=${() => backfill(true)}>Preview backfill</button>
          <button type="submit">Backfill</button>
          ${planned ? html`<p class="backfill-result" role="status">${planned.dryRun
            ? `${planned.count} occurrence${planned.count === 1 ? '' : 's'} would run${planned.count ? `, from ${fmtTime(planned.occurrences[0])}` : ''}.`
            : `Queued ${planned.count} occurrence${planned.count === 1 ? '' : 's'}: one a second, each as itself (trigger backfill).`}</p>` : ''}
          <${CardError} error=${failed.backfill} />
        </form>
      </div>
    </details>`;
}

// Pause or resume every job the list's tag or name filter selects (one of them, not both). No
// button for a list with no jobs (``listed``: the rows shown, null while loading); what an action
// did is said until the filters change.
export function BulkActions({ filters, listed, onDone }) {
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  const [pause, setPause] = useState({ note: '', minutes: '' });
  const selection = filters.tag ? { tag: filters.tag } : filters.name_prefix ? { name_prefix: filters.name_prefix } : null;
  const what = selection && (selection.tag ? `tag ${selection.tag}` : `names starting with ${selection.name_prefix}`);
  useEffect(() => { setNote(null); setError(null); }, [what, filters.state]);
  if (!selection || (filters.tag && filters.name_prefix) || filters.state === 'completed') return null;
  // Once every listed job was changed (a pause of the active ones), the list is empty: the note stays.
  if (listed === 0 && !note && !error) return null;
  // A request changes at most 1,000 jobs: sent again while the answer says more are selected.
  const act = async (action) => {
    let count = 0;
    const said = () => `${action === 'pause' ? 'Paused' : 'Resumed'} ${count} job${count === 1 ? '' : 's'} (${what})`;
    try {
      for (;;) {
        const done = await api('POST', `/jobs/${action}`, action === 'pause' ? { ...selection, ...pauseBody(pause) } : selection);
        count += done.count;
        if (!done.more || done.count === 0) break;
        setNote(`${said()}; more to go…`);
      }
      setNote(`${said()}.`);
      setError(null);
    } catch (e) {
      setError(e);
      if (count) setNote(`${said()} before the error.`);
    }
    onDone();
  };
  // A pause changes active jobs only and a resume paused ones: with a State filter, only the
  // button that changes jobs of that state is offered (the other would change jobs not listed).
  const state = filters.state || '';
  return html`
    <div class="bulk">
      ${listed !== 0 && (state === '' || state === 'active') ? html`<button onClick=${() => act('pause')}>Pause all matching</button>
        <label>with note <input name="bulk_pause_note" value=${pause.note} maxlength="1024" placeholder="optional"
          onInput=${(ev) => setPause({ ...pause, note: ev.target.value })} /></label>
        <label>resuming after (minutes) <input name="bulk_pause_minutes" type="number" min="1" class="short"
          value=${pause.minutes} placeholder="never" onInput=${(ev) => setPause({ ...pause, minutes: ev.target.value })} /></label>` : ''}
      ${listed !== 0 && (state === '' || state === 'paused') ? html`<button onClick=${() => act('resume')}>Resume all matching</button>` : ''}
      ${note ? html`<span class="note" role="status">${note}</span>` : ''}
      ${error ? html`<span class="alert" role="alert">${error.message}</span>` : ''}
    </div>`;
}

// The error cell of a skipped row: how many occurrences it stands for, and why.
export function skippedText(e) {
  if (e.status !== 'skipped') return null;
  const n = e.skipped_count || 1;
  return `${n} occurrence${n === 1 ? '' : 's'} skipped: ${e.skip_reason}`;
}
