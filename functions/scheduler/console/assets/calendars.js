// The calendars page: an owner's holiday and blackout calendars (GET/POST/PUT/DELETE
// /v1/calendars), which jobs leave out with exclude_calendars. #/calendars lists them with a form
// for a new one; #/calendars/NAME fills the form with that calendar, to replace or delete it, and
// shows its change log below.
import { useState, useEffect, useCallback, useRef } from './vendor/htm-preact-standalone.mjs';
import { html, api, allPages, ApiError, go, fmtTime, ErrorBox, changedSince } from './lib.js';
import { Changes } from './changes.js';

const lines = (text) => text.split('\n').map((s) => s.trim()).filter(Boolean);

const ONE = { dates: 'date', ranges: 'range', yearly: 'yearly day', events: 'event' };
const counted = (n, k) => `${n} ${n === 1 ? ONE[k] : k === 'yearly' ? 'yearly days' : k}`;

function summary(c) {
  if (c.ics) return `iCalendar: ${counted((c.ics.match(/BEGIN:VEVENT/gi) || []).length, 'events')}`;
  const parts = ['dates', 'ranges', 'yearly'].filter((k) => (c[k] || []).length).map((k) => counted(c[k].length, k));
  return parts.join(', ') || 'nothing excluded';
}

function initial(c) {
  return {
    name: c ? c.name : '', timezone: (c && c.timezone) || 'UTC', form: c && c.ics ? 'ics' : 'days',
    dates: ((c && c.dates) || []).join('\n'), yearly: ((c && c.yearly) || []).join('\n'),
    ranges: ((c && c.ranges) || []).map((r) => `${r.start}..${r.end}`).join('\n'), ics: (c && c.ics) || '',
  };
}

function requestBody(v) {
  const body = { timezone: v.timezone || 'UTC' };
  if (v.form === 'ics') body.ics = v.ics;
  else {
    body.dates = lines(v.dates);
    body.yearly = lines(v.yearly);
    body.ranges = lines(v.ranges).map((r) => { const [start, end] = r.split('..'); return { start, end: end || '' }; });
  }
  return body;
}

// An error the API names (dates.3, ranges.0.end, ics ...) shown at its field; a calendar changed
// since it was loaded (412, If-Match) above the form.
function errorsOf(error) {
  const out = {};
  for (const d of (error instanceof ApiError ? error.details : [])) {
    if (d.field === 'If-Match') { out._ = `${changedSince(error, 'calendar')} Load it again to see the change, then edit it.`; continue; }
    const key = String(d.field).split('.')[0];
    out[key] = out[key] ? `${out[key]}; ${d.field}: ${d.message}` : `${d.field}: ${d.message}`;
  }
  if (!Object.keys(out).length && error) out._ = error.message;
  return out;
}

function Field({ label, name, errors, hint, children }) {
  return html`
    <div class=${`field${errors[name] ? ' invalid' : ''}`} data-field=${name}>
      <label>${label}${children}</label>
      ${hint ? html`<div class="hint">${hint}</div>` : ''}
      ${errors[name] ? html`<div class="field-error" data-field=${name} role="alert">${errors[name]}</div>` : ''}
    </div>`;
}

export function Calendars({ name }) {
  const [calendars, setCalendars] = useState(null);
  const [current, setCurrent] = useState(null);
  const [v, setV] = useState(initial(null));
  const [errors, setErrors] = useState({});
  const [error, setError] = useState(null);
  const [note, setNote] = useState('');
  const [confirming, setConfirming] = useState(false);
  const kept = useRef('');  // a note to show after the navigation that follows it (a delete's)
  const [stale, setStale] = useState(false);  // a save or delete refused: it changed since it was read

  const load = useCallback(async () => {
    try {
      setCalendars(await allPages('/calendars', 'calendars'));
      setError(null);
    } catch (e) { setError(e); }
  }, []);
  useEffect(() => { load(); }, []);
  // The calendar as stored, and the form with it (what was typed is replaced).
  const read = useCallback(() => {
    if (!name) { setCurrent(null); setV(initial(null)); return; }
    api('GET', `/calendars/${encodeURIComponent(name)}`)
      .then((c) => { setCurrent(c); setV(initial(c)); setStale(false); })
      .catch((e) => setError(e));
  }, [name]);
  useEffect(() => {
    setErrors({}); setNote(kept.current); kept.current = ''; setConfirming(false); setStale(false);
    read();
  }, [name]);
  const readAgain = () => { setErrors({}); setNote(''); read(); load(); };

  const on = (k) => (ev) => setV({ ...v, [k]: ev.target.value });
  const save = async (ev) => {
    ev.preventDefault();
    try {
      const saved = current
        // Only the version loaded is replaced: a change made meanwhile is not overwritten (412).
        ? await api('PUT', `/calendars/${encodeURIComponent(current.name)}`, requestBody(v), { 'If-Match': String(current.version) })
        : await api('POST', '/calendars', { name: v.name, ...requestBody(v) });
      setErrors({});
      await load();
      if (!current) {
        kept.current = `Created ${saved.name}.`;  // shown once the page for it is open
        go(`#/calendars/${encodeURIComponent(saved.name)}`);
      } else {
        setNote(`Saved ${saved.name} (version ${saved.version}); the jobs that use it were replanned.`);
        setCurrent(saved);
      }
    } catch (e) {
      setErrors(errorsOf(e));
      if (e instanceof ApiError && e.status === 412) { setStale(true); await load(); } // the list shows the version it is at
    }
  };
  const remove = async () => {
    try {
      await api('DELETE', `/calendars/${encodeURIComponent(current.name)}`, undefined, { 'If-Match': String(current.version) });
      kept.current = `Deleted ${current.name}.`;
      await load();
      go('#/calendars');
    } catch (e) {
      setConfirming(false);
      const changed = e instanceof ApiError && e.status === 412;
      setErrors(changed ? errorsOf(e) : { _: e.message });  // a 409 names the jobs that use it in its message
      if (changed) { setStale(true); await load(); }  // changed since it was shown
    }
  };

  return html`
    <section>
      <div class="head"><h1>Calendars</h1>
        <span class="muted">days and spans that jobs leave out (their <code>exclude_calendars</code>)</span>
        <a class="button primary" href="#/calendars">New calendar</a></div>
      <${ErrorBox} error=${error} />
      ${note ? html`<div class="note" role="status">${note}</div>` : ''}
      ${calendars === null ? html`<p class="muted">Loading…</p>` : calendars.length === 0 ? html`<p class="empty">No calendars yet.</p>` : html`
        <table class="list calendars">
          <thead><tr><th>Name</th><th>Time zone</th><th>Excludes</th><th class="num">Version</th><th>Updated</th></tr></thead>
          <tbody>${calendars.map((c) => html`
            <tr key=${c.name}>
              <td><a href="#/calendars/${encodeURIComponent(c.name)}">${c.name}</a></td>
              <td>${c.timezone}</td><td>${summary(c)}</td><td class="num">${c.version}</td><td>${fmtTime(c.updated_at)}</td>
            </tr>`)}
          </tbody>
        </table>`}
      <form class="job-form calendar-form" onSubmit=${save} novalidate>
        <fieldset><legend>${current ? `Calendar ${current.name}` : 'New calendar'}</legend>
          ${errors._ ? html`<div class="alert" role="alert">${errors._}
            ${stale ? html` <button type="button" class="load-again" onClick=${readAgain}>Load it again</button>` : ''}</div>` : ''}
          <div class="row">
            ${current ? '' : html`<${Field} label="Name" name="name" errors=${errors}><input name="name" value=${v.name} onInput=${on('name')} placeholder="uk-holidays" /><//>`}
            <${Field} label="Time zone" name="timezone" errors=${errors} hint="a date excludes that local day"><input name="timezone" value=${v.timezone} onInput=${on('timezone')} /><//>
          </div>
          <div class="radios">
            <label class="check"><input type="radio" name="form" value="days" checked=${v.form === 'days'} onChange=${on('form')} /> dates, ranges, yearly days</label>
            <label class="check"><input type="radio" name="form" value="ics" checked=${v.form === 'ics'} onChange=${on('form')} /> iCalendar (.ics)</label>
          </div>
          ${v.form === 'ics' ? html`
            <${Field} label="iCalendar text" name="ics" errors=${errors} hint="VEVENTs (all-day or timed) and yearly RRULEs">
              <textarea name="ics" rows="10" value=${v.ics} onInput=${on('ics')}></textarea><//>` : html`
            <div class="row">
              <${Field} label="Dates (one a line)" name="dates" errors=${errors} hint="2026-12-25">
                <textarea name="dates" rows="5" value=${v.dates} onInput=${on('dates')}></textarea><//>
              <${Field} label="Yearly (one a line)" name="yearly" errors=${errors} hint="12-25">
                <textarea name="yearly" rows="5" value=${v.yearly} onInput=${on('yearly')}></textarea><//>
              <${Field} label="Ranges (one a line)" name="ranges" errors=${errors} hint="2026-12-24..2026-12-31, or date-times">
                <textarea name="ranges" rows="5" value=${v.ranges} onInput=${on('ranges')}></textarea><//>
            </div>`}
        </fieldset>
        <div class="actions">
          <button class="primary" type="submit">${current ? 'Save' : 'Create'}</button>
          ${!current ? '' : confirming ? html`<span class="confirm">Delete ${current.name}? (refused while a job names it)
              <button type="button" class="danger" onClick=${remove}>Delete</button>
              <button type="button" onClick=${() => setConfirming(false)}>Cancel</button></span>`
            : html`<button type="button" class="danger" onClick=${() => setConfirming(true)}>Delete</button>`}
        </div>
      </form>
      ${current ? html`
        <div class="calendar-changes">
          <h2>Changes of ${current.name}</h2>
          <${Changes} key=${current.name} path=${`/calendars/${encodeURIComponent(current.name)}/changes`} version=${current.version} />
        </div>` : ''}
    </section>`;
}
