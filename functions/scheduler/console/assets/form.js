// The create/edit form: each error the API names (details[].field) is shown at its field, and the
// schedule is previewed (POST /v1/schedules/preview) as it is typed.
import { useState, useEffect } from './vendor/htm-preact-standalone.mjs';
import { html, api, ApiError, go, ErrorBox, anchorOf, changedSince } from './lib.js';
import { previewBody, occurrenceItems } from './pages.js';
import { FORM_TYPES, SECRET_AUTH, TARGET_FIELDS, AwsFields, SecretAuthFields, SigV4Fields, awsTarget, httpAuth,
         initialTarget, numberOr } from './targets.js';

// The jobs a job runs next (its chains), each a list of job names or ids.
const CHAINS = ['on_success', 'on_failure', 'on_complete'];
// The fields of the form, by the API's field path; an error on a deeper path (target.headers.X)
// is shown at the nearest of these.
const FIELDS = ['name', 'description', 'tags', 'schedule', 'schedules', 'spread', 'spread.window_seconds', 'spread.mode',
                'run_at', 'timezone', 'start_at', 'end_at',
                'missed_runs', 'exclude_calendars', 'on_excluded', 'target.url', 'target.method', 'target.headers', 'target.body',
                'target.timeout_seconds', 'target', 'retry.max_attempts', 'retry.min_backoff_seconds',
                'retry.max_backoff_seconds', 'retry.max_age_seconds', 'retry', 'alerts', 'limits.key',
                'limits.max_in_flight', 'limits.per_second', 'limits', ...CHAINS, 'after_completion', ...TARGET_FIELDS];
// The retry policy's fields: [form key, field, label, placeholder (the API's default)].
const RETRY_FIELDS = [['attempts', 'max_attempts', 'Max attempts', '3'], ['min_backoff', 'min_backoff_seconds', 'Min backoff (s)', '1'],
                      ['max_backoff', 'max_backoff_seconds', 'Max backoff (s)', '300'], ['max_age', 'max_age_seconds', 'Max age (s)', 'none']];
const METHODS = ['POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
// IANA zone names the browser knows, offered as the time zone is typed (the API decides).
const ZONES = typeof Intl.supportedValuesOf === 'function' ? ['UTC', ...Intl.supportedValuesOf('timeZone')] : ['UTC'];
// The form's values and the fields they fill.
const KEY_FIELDS = { name: 'name', description: 'description', tags: 'tags', schedule: 'schedule', run_at: 'run_at',
                     more: 'schedules', spread_window: 'spread.window_seconds', spread_mode: 'spread.mode',
                     timezone: 'timezone', start_at: 'start_at', end_at: 'end_at', missed_runs: 'missed_runs',
                     calendars: 'exclude_calendars', on_excluded: 'on_excluded',
                     url: 'target.url', method: 'target.method', headers: 'target.headers', body: 'target.body',
                     timeout: 'target.timeout_seconds', targetJson: 'target', alerts: 'alerts',
                     limit_key: 'limits.key', max_in_flight: 'limits.max_in_flight', per_second: 'limits.per_second',
                     on_success: 'on_success', on_failure: 'on_failure', on_complete: 'on_complete',
                     after_completion: 'after_completion',
                     ...Object.fromEntries(RETRY_FIELDS.map(([key, name]) => [key, `retry.${name}`])) };

function fieldOf(path) {
  const p = String(path || '').replace(/\[(\d+)\]/g, '.$1');
  let best = null;
  for (const f of FIELDS) if ((p === f || p.startsWith(`${f}.`)) && (!best || f.length > best.length)) best = f;
  return best;
}

function errorsByField(error) {
  const out = {};
  const details = error instanceof ApiError ? error.details : [];
  for (const d of details) {
    const key = fieldOf(d.field) || '_';
    // The alert rules are one JSON field: its errors name the rule and field (alerts.0.threshold).
    const message = key === 'alerts' && d.field !== 'alerts' ? `${d.field}: ${d.message}` : d.message;
    out[key] = out[key] ? `${out[key]}; ${message}` : message;
  }
  if (details.length === 0 && error) out._ = error.message;
  else if (out._ && error) out._ = `${error.message}: ${out._}`;
  return out;
}

function initial(job) {
  const t = (job && job.target) || { type: 'http', method: 'POST', headers: {} };
  return {
    name: job ? job.name : '', description: (job && job.description) || '', tags: job ? (job.tags || []).join(', ') : '',
    when: job && job.run_at ? 'run_at' : 'schedule',
    schedule: (job && (job.schedule || (job.schedules || [])[0])) || '',
    more: job && job.schedules ? job.schedules.slice(1).join('\n') : '',
    spread_window: job && job.spread ? String(job.spread.window_seconds) : '',
    spread_mode: (job && job.spread && job.spread.mode) || 'stable',
    run_at: (job && job.run_at) || '', timezone: (job && job.timezone) || 'UTC',
    start_at: (job && job.start_at) || '', end_at: (job && job.end_at) || '',
    missed_runs: (job && job.missed_runs) || 'run_once',
    calendars: ((job && job.exclude_calendars) || []).join(', '), on_excluded: (job && job.on_excluded) || 'skip',
    type: t.type === 'http' || FORM_TYPES[t.type] ? t.type : 'other',
    url: t.type === 'http' ? t.url || '' : '', method: t.method || 'POST', headers: JSON.stringify(t.headers || {}),
    body: t.type === 'http' ? t.body || '' : '', timeout: t.timeout_seconds ?? '',
    targetJson: t.type === 'http' || FORM_TYPES[t.type] ? '' : JSON.stringify(t, null, 2),
    ...initialTarget(t),
    alerts: job && job.alerts && job.alerts.length ? JSON.stringify(job.alerts, null, 2) : '',
    limit_key: (job && job.limits && job.limits.key) || '',
    max_in_flight: job && job.limits && job.limits.max_in_flight != null ? String(job.limits.max_in_flight) : '',
    per_second: job && job.limits && job.limits.per_second != null ? String(job.limits.per_second) : '',
    ...Object.fromEntries(CHAINS.map((chain) => [chain, ((job && job[chain]) || []).join(', ')])),
    after_completion: (job && job.after_completion) || 'keep',
    ...Object.fromEntries(RETRY_FIELDS.map(([key, name]) => [key, job && job.retry && job.retry[name] != null ? String(job.retry[name]) : ''])),
  };
}

function requestBody(v, job) {
  const local = {};
  let target;
  if (v.type === 'http') {
    let headers = {};
    try { headers = v.headers.trim() ? JSON.parse(v.headers) : {}; } catch { local['target.headers'] = 'not valid JSON'; }
    // Keeps what the form does not show (auth with its "***" secrets: the API keeps the stored ones).
    const base = job && job.target && job.target.type === 'http' ? job.target : {};
    target = { ...base, type: 'http', url: v.url, method: v.method, headers, body: v.body || null };
    if (String(v.timeout).trim() !== '') target.timeout_seconds = numberOr(String(v.timeout));
    else delete target.timeout_seconds;
    const auth = httpAuth(v, base);
    if (auth) target.auth = auth; else delete target.auth;
  } else if (FORM_TYPES[v.type]) {
    target = awsTarget(v.type, v.aws, job && job.target, local);
  } else {
    try { target = JSON.parse(v.targetJson); } catch { local.target = 'not valid JSON'; }
  }
  const body = { name: v.name, tags: tagsOf(v, job), timezone: v.timezone || 'UTC', missed_runs: v.missed_runs, target };
  if (v.description) body.description = v.description;
  Object.assign(body, whenOf(v));
  if (v.start_at) body.start_at = v.start_at;
  if (v.end_at) body.end_at = v.end_at;
  if (v.when === 'schedule') {
    body.exclude_calendars = calendarNames(v);
    body.on_excluded = v.on_excluded;
  }
  // The retry policy as the form shows it: a field left empty takes the API's default.
  const retry = Object.fromEntries(RETRY_FIELDS.filter(([key]) => v[key].trim() !== '').map(([key, name]) => [name, numberOr(v[key])]));
  if (Object.keys(retry).length) body.retry = retry;
  // The jobs it runs next, by name or id (no name holds a comma), and what becomes of it once it completes.
  for (const chain of CHAINS) body[chain] = v[chain].split(',').map((s) => s.trim()).filter(Boolean);
  body.after_completion = v.after_completion;
  // Alert rules as JSON (a "***" secret keeps the one stored for the rule at the same place).
  if (v.alerts.trim()) {
    try { body.alerts = JSON.parse(v.alerts); } catch { local.alerts = 'not valid JSON'; }
  } else body.alerts = [];
  // Per-target limits: none when both bounds are left empty.
  const limits = {};
  if (v.max_in_flight.trim()) limits.max_in_flight = numberOr(v.max_in_flight);
  if (v.per_second.trim()) limits.per_second = numberOr(v.per_second);
  if (v.limit_key.trim()) limits.key = v.limit_key.trim();
  body.limits = Object.keys(limits).length ? limits : null;
  return { body, local };
}

// The form's "when": one expression (schedule), several (schedules: the first and one a line
// of "more"), or run_at; and the spread, when a window is given.
function whenOf(v) {
  if (v.when !== 'schedule') return { run_at: v.run_at };
  const more = v.more.split('\n').map((s) => s.trim()).filter(Boolean);
  const out = more.length ? { schedules: [v.schedule, ...more] } : { schedule: v.schedule };
  if (String(v.spread_window).trim() !== '') {
    out.spread = { window_seconds: numberOr(String(v.spread_window).trim()), mode: v.spread_mode };
  }
  return out;
}
const calendarNames = (v) => v.calendars.split(',').map((s) => s.trim()).filter(Boolean);
// The tags as typed (comma-separated), or the job's own when the text is as the form showed it:
// a tag may hold a comma or spaces, which a split would change.
const tagsOf = (v, job) => (job && v.tags === (job.tags || []).join(', ')
  ? job.tags || [] : v.tags.split(',').map((s) => s.trim()).filter(Boolean));

function Field({ label, name, errors, hint, children }) {
  const error = errors[name];
  return html`
    <div class=${`field${error ? ' invalid' : ''}`} data-field=${name}>
      <label>${label}${children}</label>
      ${hint ? html`<div class="hint">${hint}</div>` : ''}
      ${error ? html`<div class="field-error" data-field=${name} role="alert">${error}</div>` : ''}
    </div>`;
}

function Preview({ v, job }) {
  const [state, setState] = useState({ occurrences: null, error: null });
  const text = v.when === 'schedule' ? v.schedule : v.run_at;
  const when = JSON.stringify(whenOf(v));
  useEffect(() => {
    if (!text.trim()) { setState({ occurrences: null, error: null }); return undefined; }
    let live = true;
    const t = setTimeout(() => {
      // An edited job's interval counts from its anchor (start_at, else its creation), as saved.
      const start = v.start_at || (job && v.when === 'schedule' ? anchorOf({ created_at: job.created_at }) : '');
      const src = { timezone: v.timezone, start_at: start, end_at: v.end_at, id: job && job.id, ...JSON.parse(when),
                    ...(v.when === 'schedule' ? { exclude_calendars: calendarNames(v), on_excluded: v.on_excluded } : {}) };
      // A new job's spread offsets depend on the id it is given when saved: previewed without.
      if (!(job && job.id)) delete src.spread;
      api('POST', '/schedules/preview', previewBody(src, 5))
        .then((p) => live && setState({ occurrences: p.occurrences, error: null }))
        .catch((e) => live && setState({ occurrences: null, error: e }));
    }, 250);
    return () => { live = false; clearTimeout(t); };
  }, [when, text, v.timezone, v.start_at, v.end_at, v.calendars, v.on_excluded]);
  if (state.error) {
    const d = state.error.details && state.error.details[0];
    return html`<div class="preview invalid" data-preview="error">${d ? `${d.field}: ${d.message}` : state.error.message}</div>`;
  }
  if (!state.occurrences) return html`<div class="preview muted">Type a schedule to see when it fires.</div>`;
  return html`
    <div class="preview" data-preview="ok">
      <div class="muted">Next ${state.occurrences.length === 0 ? 'occurrences: none'
        : `occurrences (UTC${v.timezone && v.timezone !== 'UTC' ? `, and in ${v.timezone}` : ''})`}</div>
      <ol class="occurrences">${occurrenceItems(state.occurrences, v.timezone, v.more.trim() !== '')}</ol>
      ${!(job && job.id) && String(v.spread_window).trim() !== '' && v.when === 'schedule'
        ? html`<div class="muted" data-preview="spread">Each time fires up to ${v.spread_window} s later: the offset is fixed when the job is saved.</div>` : ''}
    </div>`;
}

export function JobForm({ id }) {
  const [job, setJob] = useState(null);
  const [v, setV] = useState(initial(null));
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const [loadError, setLoadError] = useState(null);

  const [stale, setStale] = useState(false);  // a save refused: the job changed since it was read
  const read = () => api('GET', `/jobs/${id}`).then((j) => { setJob(j); setV(initial(j)); setStale(false); }).catch(setLoadError);
  useEffect(() => { if (id) read(); }, [id]);
  const readAgain = () => { setErrors({}); read(); };

  // An edited field loses its error (it is checked again on the next save).
  const on = (k) => (ev) => {
    setV({ ...v, [k]: ev.target.value });
    const field = KEY_FIELDS[k];
    if (field && errors[field]) setErrors({ ...errors, [field]: undefined });
  };
  // The same for a field of an AWS target (v.aws) and of SigV4 auth (v.sig).
  const onPart = (part, prefix) => (k) => (ev) => {
    setV({ ...v, [part]: { ...v[part], [k]: ev.target.value } });
    if (errors[prefix + k]) setErrors({ ...errors, [prefix + k]: undefined });
  };
  const onCred = onPart('cred', 'target.auth.');
  const field = (label, name, hint, control) => html`<${Field} label=${label} name=${name} errors=${errors} hint=${hint}>${control}<//>`;

  const submit = async (ev) => {
    ev.preventDefault();
    const { body, local } = requestBody(v, job);
    if (Object.keys(local).length) { setErrors(local); return; }
    setBusy(true);
    try {
      const saved = id ? await api('PUT', `/jobs/${id}`, body, { 'If-Match': String(job.version) })
                       : await api('POST', '/jobs', body);
      go(`#/jobs/${saved.id}`);
    } catch (e) {
      const found = errorsByField(e);
      // Changed elsewhere since the form read it (412): said plainly, with a way to read it again.
      if (e instanceof ApiError && e.status === 412) found._ = changedSince(e, 'job');
      setStale(e instanceof ApiError && e.status === 412);
      setErrors(found);
    } finally { setBusy(false); }
  };

  if (id && !job) return html`<section><${ErrorBox} error=${loadError} />${loadError ? '' : html`<p class="muted">Loading…</p>`}</section>`;
  const input = (name, key, extra = {}) => html`<input name=${name} value=${v[key]} onInput=${on(key)} ...${extra} />`;
  return html`
    <section>
      <div class="head"><h1>${id ? `Edit ${job.name}` : 'New job'}</h1></div>
      ${errors._ ? html`<div class="alert" role="alert" data-field="_">${errors._}
        ${stale ? html` <button type="button" class="load-again" onClick=${readAgain}>Load it again</button>
          <span class="muted">(what you typed here is replaced by the job as it is now)</span>` : ''}</div>` : ''}
      <form class="job-form" onSubmit=${submit} novalidate>
        <fieldset><legend>Job</legend>
          <${Field} label="Name" name="name" errors=${errors}>${input('name', 'name', { autocomplete: 'off' })}<//>
          <${Field} label="Description" name="description" errors=${errors}>${input('description', 'description')}<//>
          <${Field} label="Tags" name="tags" errors=${errors} hint="comma-separated">${input('tags', 'tags')}<//>
        </fieldset>
        <fieldset><legend>When</legend>
          <div class="radios">
            <label class="check"><input type="radio" name="when" value="schedule" checked=${v.when === 'schedule'} onChange=${on('when')} /> on a schedule</label>
            <label class="check"><input type="radio" name="when" value="run_at" checked=${v.when === 'run_at'} onChange=${on('when')} /> once</label>
          </div>
          ${v.when === 'schedule'
            ? html`<${Field} label="Schedule" name="schedule" errors=${errors}
                     hint="cron (0 3 * * *), @hourly, @every 90s, cron(0 3 * * ? *), rate(5 minutes), at(2026-12-01T10:00:00)">
                     ${input('schedule', 'schedule', { autocomplete: 'off', spellcheck: false })}<//>
                   <${Field} label="More expressions" name="schedules" errors=${errors}
                     hint="optional, one a line: the job fires at each (their union)">
                     <textarea name="schedules_more" rows="2" value=${v.more} onInput=${on('more')} spellcheck="false" /><//>
                   <div class="row">
                     <${Field} label="Spread (s)" name="spread.window_seconds" errors=${errors}
                       hint="optional: fire each time up to this many seconds later">
                       ${input('spread_window', 'spread_window', { placeholder: 'none', inputmode: 'numeric' })}<//>
                     <${Field} label="Spread mode" name="spread.mode" errors=${errors}>
                       <select name="spread_mode" value=${v.spread_mode} onChange=${on('spread_mode')}>
                         ${[['stable', 'stable (one offset for the job)'], ['random', 'random (one per time)']].map(([value, label]) => html`
                           <option value=${value} selected=${value === v.spread_mode}>${label}</option>`)}
                       </select><//>
                   </div>`
            : html`<${Field} label="Run at" name="run_at" errors=${errors} hint="RFC 3339 with offset: 2026-12-01T10:00:00Z">
                     ${input('run_at', 'run_at', { autocomplete: 'off' })}<//>`}
          <${Preview} v=${v} job=${job} />
          <div class="row">
            <${Field} label="Time zone" name="timezone" errors=${errors}>${input('timezone', 'timezone', { list: 'zones' })}<//>
            <datalist id="zones">${ZONES.map((z) => html`<option value=${z} />`)}</datalist>
            <${Field} label="Start at" name="start_at" errors=${errors}>${input('start_at', 'start_at', { placeholder: 'optional' })}<//>
            <${Field} label="End at" name="end_at" errors=${errors}>${input('end_at', 'end_at', { placeholder: 'optional' })}<//>
          </div>
          <${Field} label="Missed runs" name="missed_runs" errors=${errors}>
            <select name="missed_runs" value=${v.missed_runs} onChange=${on('missed_runs')}>
              ${[['run_once', 'run once'], ['skip', 'skip'], ['run_all', 'run all']].map(([value, label]) => html`
                <option value=${value} selected=${value === v.missed_runs}>${label}</option>`)}
            </select><//>
          ${v.when === 'schedule' ? html`
          <div class="row">
            <${Field} label="Exclude calendars" name="exclude_calendars" errors=${errors}
                      hint=${html`names of your <a href="#/calendars">calendars</a>, comma-separated`}>
              ${input('exclude_calendars', 'calendars', { placeholder: 'uk-holidays', autocomplete: 'off' })}<//>
            <${Field} label="On an excluded day" name="on_excluded" errors=${errors}>
              <select name="on_excluded" value=${v.on_excluded} onChange=${on('on_excluded')}>
                ${[['skip', 'skip the run'], ['shift', 'shift it past the excluded span']].map(([value, label]) => html`
                  <option value=${value} selected=${value === v.on_excluded}>${label}</option>`)}
              </select><//>
          </div>` : ''}
        </fieldset>
        <fieldset><legend>Target</legend>
          <div class="radios">
            <label class="check"><input type="radio" name="type" value="http" checked=${v.type === 'http'} onChange=${on('type')} /> HTTP</label>
            ${Object.entries(FORM_TYPES).map(([type, { label }]) => html`
              <label class="check"><input type="radio" name="type" value=${type} checked=${v.type === type} onChange=${on('type')} /> ${label}</label>`)}
            ${v.type === 'other' ? html`<label class="check"><input type="radio" name="type" value="other" checked=${true} onChange=${on('type')} /> other (JSON)</label>` : ''}
          </div>
          ${v.type === 'http' ? html`
            <div class="row">
              <${Field} label="Method" name="target.method" errors=${errors}>
                <select name="method" value=${v.method} onChange=${on('method')}>${METHODS.map((m) => html`<option value=${m} selected=${m === v.method}>${m}</option>`)}</select><//>
              <${Field} label="URL" name="target.url" errors=${errors}>${input('url', 'url', { placeholder: 'https://example.com/hook', class: 'wide' })}<//>
            </div>
            <${Field} label="Headers (JSON)" name="target.headers" errors=${errors}>${input('headers', 'headers')}<//>
            <${Field} label="Body" name="target.body" errors=${errors} hint="{{job_id}}, {{execution_id}}, {{scheduled_at}}, {{attempt}} are replaced">
              <textarea name="body" rows="3" value=${v.body} onInput=${on('body')}></textarea><//>
            <${Field} label="Timeout (s)" name="target.timeout_seconds" errors=${errors}>${input('timeout', 'timeout', { placeholder: '30' })}<//>
            <${Field} label="Auth" name="target.auth" errors=${errors}>
              <select name="auth" value=${v.auth} onChange=${on('auth')}>
                <option value="none" selected=${v.auth === 'none'}>none</option>
                ${Object.entries(SECRET_AUTH).map(([kind, { label }]) => html`
                  <option value=${kind} selected=${v.auth === kind}>${label}</option>`)}
                <option value="sigv4" selected=${v.auth === 'sigv4'}>SigV4 (AWS IAM: API Gateway, Lambda URLs)</option>
              </select><//>
            ${v.auth === 'sigv4' ? html`<${SigV4Fields} sig=${v.sig} onSig=${onPart('sig', 'target.auth.')} field=${field} />` : ''}
            ${SECRET_AUTH[v.auth] ? html`<${SecretAuthFields} kind=${v.auth} cred=${v.cred} onCred=${onCred} field=${field}
                                        stored=${job && job.target} />` : ''}`
          : FORM_TYPES[v.type] ? html`<${AwsFields} type=${v.type} aws=${v.aws} onAws=${onPart('aws', 'target.')} field=${field} />`
          : html`
            <${Field} label="Target" name="target" errors=${errors} hint='{"type": "amqp", "exchange": "...", "routing_key": "...", "body": "..."}'>
              <textarea name="target" rows="8" value=${v.targetJson} onInput=${on('targetJson')}></textarea><//>`}
          ${errors.target && v.type !== 'other' ? html`<div class="field-error" data-field="target">${errors.target}</div>` : ''}
        </fieldset>
        <fieldset><legend>Retries</legend>
          <div class="row">${RETRY_FIELDS.map(([key, name, label, placeholder]) => html`
            <${Field} label=${label} name=${`retry.${name}`} errors=${errors}>${input(key, key, { placeholder, class: 'short' })}<//>`)}
          </div>
          ${errors.retry ? html`<div class="field-error" data-field="retry">${errors.retry}</div>` : ''}
        </fieldset>
        <fieldset><legend>Per-target limits</legend>
          <div class="row">
            <${Field} label="Max in flight" name="limits.max_in_flight" errors=${errors}>${input('max_in_flight', 'max_in_flight', { placeholder: 'none', class: 'short' })}<//>
            <${Field} label="Per second" name="limits.per_second" errors=${errors}>${input('per_second', 'per_second', { placeholder: 'none', class: 'short' })}<//>
            <${Field} label="Key" name="limits.key" errors=${errors} hint="shared by every job with the same key; default: the target's origin">${input('limit_key', 'limit_key', { placeholder: 'the target\'s origin' })}<//>
          </div>
          ${errors.limits ? html`<div class="field-error" data-field="limits">${errors.limits}</div>` : ''}
        </fieldset>
        <fieldset><legend>Chains and completion</legend>
          <div class="row">${CHAINS.map((chain) => html`
            <${Field} label=${`Runs next ${chain.replace('on_', 'on ')}`} name=${chain} errors=${errors}
              hint="jobs of yours, by name or id, comma-separated">${input(chain, chain, { placeholder: 'none' })}<//>`)}
          </div>
          <${Field} label="Once it completes" name="after_completion" errors=${errors}
            hint="a one-off, or a schedule that ended: kept (its history too), or deleted with its executions">
            <select name="after_completion" value=${v.after_completion} onChange=${on('after_completion')}>
              ${[['keep', 'keep it'], ['delete', 'delete it']].map(([value, label]) => html`
                <option value=${value} selected=${value === v.after_completion}>${label}</option>`)}
            </select><//>
        </fieldset>
        <fieldset><legend>Alerts</legend>
          <${Field} label="Alert rules (JSON)" name="alerts" errors=${errors}
            hint='[{"on": "failures_in_a_row", "threshold": 3, "target": {"type": "http", "url": "(your Slack webhook URL)"}}, {"on": "recovery", "target": {...}}]; on: failure, failures_in_a_row, recovery, missing_run, late'>
            <textarea name="alerts" rows="4" value=${v.alerts} onInput=${on('alerts')} spellcheck="false"></textarea><//>
        </fieldset>
        <div class="actions">
          <button class="primary" type="submit" disabled=${busy}>${id ? 'Save' : 'Create'}</button>
          <a class="button" href=${id ? `#/jobs/${id}` : '#/jobs'}>Cancel</a>
        </div>
      </form>
    </section>`;
}
