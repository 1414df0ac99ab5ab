// Alerts: the page of every alert your jobs' rules fired (#/alerts) with your rule sets by tag,
// and a job's rules with its recent alerts (on the job's page). Over GET /v1/alerts,
// GET /v1/alert-rules and the job's "alerts".
import { useState, useEffect, useCallback } from './vendor/htm-preact-standalone.mjs';
import { html, api, allPages, query, fmtTime, changedSince, Badge, ErrorBox, OneJob, useInterval } from './lib.js';
import { Changes } from './changes.js';
import { usePagedList } from './runs.js';
import { executionHref } from './executions.js';

export const ALERT_STATUSES = ['pending', 'delivered', 'failed'];

const ruleText = (r) => r.threshold == null ? r.on : r.on === 'failures_in_a_row' ? `${r.on} >= ${r.threshold}` : `${r.on} > ${r.threshold} s`;
const whereTo = (t) => t.url || t.queue_url || t.topic_arn || t.event_bus_arn || t.function_arn || t.exchange || t.type;

function AlertRows({ alerts, withJob }) {
  return html`
    <table class="list alerts">
      <thead><tr><th>Created</th>${withJob ? html`<th>Job</th>` : ''}<th>Rule</th><th>Event</th><th>Delivery</th>
        <th class="num">Attempts</th><th>Message</th></tr></thead>
      <tbody>${alerts.map((a) => html`
        <tr key=${a.id} class="alert-row" data-status=${a.status}>
          <td>${fmtTime(a.created_at)}</td>
          ${withJob ? html`<td><a href="#/jobs/${a.job_id}">${a.job_name}</a></td>` : ''}
          <td><code>${a.rule ? `${a.rule}/` : ''}${ruleText(a)}</code></td>
          <td>${a.execution_id ? html`<a class="alert-execution" href=${executionHref(a.execution_id)} title="the execution it is about"><${Badge} value=${a.event} /></a>`
            : html`<${Badge} value=${a.event} />`}</td>
          <td><${Badge} value=${a.status} />${a.last_error ? html` <span class="error-text">${a.last_error}</span>` : ''}</td>
          <td class="num">${a.attempts}</td>
          <td class="message">${a.message}</td>
        </tr>`)}
      </tbody>
    </table>`;
}

// On a job's page: its rules, the rule sets of its tags, and the alerts they fired lately.
export function JobAlerts({ job }) {
  const [alerts, setAlerts] = useState(null);
  const [sets, setSets] = useState([]);
  const load = useCallback(() => {
    api('GET', `/alerts${query({ job_id: job.id, limit: 20 })}`).then((p) => setAlerts(p.alerts)).catch(() => {});
  }, [job.id]);
  useEffect(load, [job.id]);
  useEffect(() => {
    allPages('/alert-rules', 'alert_rules')
      .then((all) => setSets(all.filter((set) => (job.tags || []).includes(set.tag)))).catch(() => {});
  }, [job.id, (job.tags || []).join(',')]);
  useInterval(load, 5000);
  const rules = job.alerts || [];
  const covered = rules.length > 0 || sets.length > 0;
  return html`
    <div class="job-alerts">
      <h2>Alerts</h2>
      ${rules.length === 0 ? html`<p class="muted">No alert rules of its own: add some with Edit.</p>` : html`
        <ul class="alert-rules">${rules.map((r, i) => html`
          <li key=${i}><code>${ruleText(r)}</code> → ${r.target.type} <span class="muted">${whereTo(r.target)}</span></li>`)}
        </ul>`}
      ${sets.length ? html`
        <p class="job-rule-sets">From its tags: ${sets.map((set) => html`<a key=${set.name} class="tag" href="#/alerts"
          title=${set.alerts.map(ruleText).join(', ')}>${set.name} (${set.tag})</a> `)}</p>` : ''}
      ${alerts && alerts.length ? html`<${AlertRows} alerts=${alerts} withJob=${false} />
        <p><a class="all-alerts" href="#/alerts${query({ job_id: job.id })}">All of its alerts</a></p>`
        : covered ? html`<p class="empty">No alert fired yet.</p>` : ''}
    </div>`;
}

// Your rule sets by tag (scheduler alert-rules apply, PUT /v1/alert-rules/NAME): every job with
// the tag has their rules. A set's name opens its change log below the table; "New rule set" and
// each row's Edit open the form (the rules as JSON, as a job's; a secret shown as "***" is kept
// unless something is typed over it); an edit replaces the version it was opened at (If-Match).
// The table is read again every 5 s, as the alerts are.
function RuleSets() {
  const [sets, setSets] = useState(null);
  const [error, setError] = useState(null);
  const [open, setOpen] = useState(null);
  const [editing, setEditing] = useState(null);  // null, {} (a new set) or the set being edited
  const [confirming, setConfirming] = useState(null);
  const [note, setNote] = useState('');
  const load = useCallback(() => allPages('/alert-rules', 'alert_rules').then((all) => { setSets(all); setError(null); })
    .catch(setError), []);
  useEffect(() => { load(); }, []);
  useInterval(load, 5000);
  // A delete names the version shown (If-Match): a set changed meanwhile is not deleted unseen (412).
  const remove = async (name, version) => {
    try {
      await api('DELETE', `/alert-rules/${encodeURIComponent(name)}`, undefined, { 'If-Match': String(version) });
      setConfirming(null);
      setNote(`Deleted ${name}.`);
      if (open === name) setOpen(null);
      load();
    } catch (e) {
      setConfirming(null);
      if (e.status === 412) load();  // changed since it was shown: the list shows it as it is now
      setError(e);
    }
  };
  if (sets === null) return error ? html`<${ErrorBox} error=${error} />` : '';
  return html`
    <div class="rule-sets">
      <div class="head"><h2>Rules by tag</h2>
        ${editing ? '' : html`<button onClick=${() => { setNote(''); setEditing({}); }}>New rule set</button>`}</div>
      <${ErrorBox} error=${error} />
      ${note ? html`<p class="note" role="status">${note}</p>` : ''}
      ${editing ? html`<${RuleSetForm} set=${editing} onDone=${(saved) => {
        setEditing(null);
        if (saved) setNote(`Saved ${saved.name} (version ${saved.version}).`);
        load();  // saved, or cancelled after a change made elsewhere: the list shows what is stored
      }} />` : ''}
      ${sets.length === 0 ? html`<p class="muted no-rule-sets">No rule sets by tag yet.</p>` : html`
        <table class="list rule-sets">
          <thead><tr><th>Name</th><th>Tag</th><th>Rules</th><th class="num">Version</th><th>Updated</th><th></th></tr></thead>
          <tbody>${sets.map((set) => html`
            <tr key=${set.name} class="rule-set-row">
              <td><button class="link" aria-expanded=${open === set.name ? 'true' : 'false'}
                          title="its change log" onClick=${() => setOpen(open === set.name ? null : set.name)}>${set.name}</button></td>
              <td><a href="#/jobs${query({ tag: set.tag })}"><code>${set.tag}</code></a></td>
              <td>${set.alerts.map((r, i) => html`<div key=${i}><code>${ruleText(r)}</code> → ${r.target.type} <span class="muted">${whereTo(r.target)}</span></div>`)}</td>
              <td class="num">${set.version}</td>
              <td>${fmtTime(set.updated_at)}</td>
              <td class="actions">
                <button onClick=${() => { setNote(''); setEditing(set); }}>Edit</button>
                ${confirming && confirming.name === set.name ? html`<span class="confirm">Delete ${set.name} (version ${confirming.version})? Its jobs keep their own rules.
                    <button class="danger" onClick=${() => remove(set.name, confirming.version)}>Delete</button>
                    <button onClick=${() => setConfirming(null)}>Cancel</button></span>`
                  : html`<button class="danger" onClick=${() => setConfirming({ name: set.name, version: set.version })}>Delete</button>`}
              </td>
            </tr>`)}
          </tbody>
        </table>`}
      ${open ? html`
        <div class="rule-set-changes">
          <h3>Changes of ${open}</h3>
          <${Changes} key=${open} path=${`/alert-rules/${encodeURIComponent(open)}/changes`}
                      version=${(sets.find((set) => set.name === open) || {}).version} />
        </div>` : ''}
    </div>`;
}

// A rule set's form: its name (fixed once made), its tag and its rules as JSON; each error the
// API names shown at its field; a set changed elsewhere since it was opened is not overwritten
// (412): said as the job form says it, with a way to load it again.
const ruleSetFields = (set) => ({ name: set.name || '', tag: set.tag || '',
                                  alerts: set.alerts ? JSON.stringify(set.alerts, null, 2) : '' });

function RuleSetForm({ set: opened, onDone }) {
  const [set, setSet] = useState(opened);  // the version edited: read again after a 412
  const made = Boolean(set.name);
  const [v, setV] = useState(ruleSetFields(opened));
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const [stale, setStale] = useState(false);
  const readAgain = async () => {
    try {
      const now = await api('GET', `/alert-rules/${encodeURIComponent(set.name)}`);
      setSet(now); setV(ruleSetFields(now)); setErrors({}); setStale(false);
    } catch (e) { setErrors({ _: e.message }); setStale(false); }
  };
  const on = (k) => (ev) => setV({ ...v, [k]: ev.target.value });
  const submit = async (ev) => {
    ev.preventDefault();
    let alerts;
    try { alerts = JSON.parse(v.alerts || '[]'); } catch { setErrors({ alerts: 'not valid JSON' }); return; }
    setBusy(true);
    try {
      // An edit replaces the version it was opened at; a new set never replaces one of its name.
      const headers = made ? { 'If-Match': String(set.version) } : { 'If-None-Match': '*' };
      onDone(await api('PUT', `/alert-rules/${encodeURIComponent(v.name.trim())}`, { tag: v.tag.trim(), alerts }, headers));
    } catch (e) {
      const out = {};
      for (const d of (e.details || [])) {
        if (d.field === 'If-None-Match') { out.name = `a rule set named ${v.name.trim()} exists: edit it, or choose another name`; continue; }
        const key = d.field === 'If-Match' ? '_' : ['name', 'tag'].includes(d.field) ? d.field : 'alerts';
        const text = key === 'alerts' && d.field !== 'alerts' ? `${d.field}: ${d.message}` : d.message;
        out[key] = out[key] ? `${out[key]}; ${text}` : text;
      }
      if (e.status === 412 && made) out._ = changedSince(e, 'rule set');
      else if (!Object.keys(out).length) out._ = e.message;
      setStale(e.status === 412 && made);
      setErrors(out);
    } finally { setBusy(false); }
  };
  const error = (k) => errors[k] ? html`<div class="field-error" data-field=${k} role="alert">${errors[k]}</div>` : '';
  return html`
    <form class="rule-set-form" onSubmit=${submit} novalidate>
      ${errors._ ? html`<div class="alert" role="alert" data-field="_">${errors._}
        ${stale ? html` <button type="button" class="load-again" onClick=${readAgain}>Load it again</button>
          <span class="muted">(what you typed here is replaced by the rule set as it is now)</span>` : ''}</div>` : ''}
      <div class="row">
        <div class="field"><label>Name<input name="rule_set_name" value=${v.name} onInput=${on('name')} disabled=${made}
          placeholder="billing-team" /></label>${error('name')}</div>
        <div class="field"><label>Tag<input name="rule_set_tag" value=${v.tag} onInput=${on('tag')} placeholder="billing" /></label>
          <div class="hint">every job of yours with this tag, now or tagged later</div>${error('tag')}</div>
      </div>
      <div class="field"><label>Rules (JSON)<textarea name="rule_set_alerts" rows="6" value=${v.alerts} onInput=${on('alerts')}
        spellcheck="false" placeholder='[{"on": "failures_in_a_row", "threshold": 3, "target": {"type": "http", "url": "(your Slack webhook URL)"}}]'></textarea></label>
        <div class="hint">on: failure, failures_in_a_row, recovery, missing_run, late; a secret shown as *** is kept</div>${error('alerts')}</div>
      <div class="actions">
        <button class="primary" type="submit" disabled=${busy}>${made ? 'Save' : 'Create'}</button>
        <button type="button" onClick=${() => onDone(null)}>Cancel</button>
      </div>
    </form>`;
}

export function Alerts({ params }) {
  const [status, setStatus] = useState(params.get('status') || '');
  const [jobId, setJobId] = useState(params.get('job_id') || '');
  const [error, setError] = useState(null);
  // The newest 50, older ones a page at a time (kept through the refreshes), of one job when asked
  // (#/alerts?job_id=ID: a job's page links here).
  const filters = { status, job_id: jobId };
  const { rows: alerts, older, loadNewest, loadOlder } = usePagedList('/alerts', filters, setError, 'alerts');
  const load = useCallback(async () => { if (await loadNewest()) setError(null); }, [loadNewest]);
  useEffect(() => {
    history.replaceState(null, '', `#/alerts${query(filters)}`);
    load();
  }, [status, jobId]);
  useInterval(load, 5000);
  return html`
    <section>
      <div class="head"><h1>Alerts</h1><span class="muted">refreshes every 5 s</span></div>
      <form class="filters" onSubmit=${(ev) => ev.preventDefault()}>
        <label>Delivery <select name="status" value=${status} onChange=${(ev) => setStatus(ev.target.value)}>
          <option value="">all</option>${ALERT_STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s}</option>`)}
        </select></label>
        <${OneJob} jobId=${jobId} rows=${alerts} onAll=${() => setJobId('')} />
      </form>
      <${ErrorBox} error=${error} />
      ${alerts === null ? html`<p class="muted">Loading…</p>` : alerts.length === 0
        ? html`<p class="empty">No alerts${status ? ` ${status}` : ''}.</p>`
        : html`<${AlertRows} alerts=${alerts} withJob=${true} />`}
      ${older.cursor ? html`<button class="more" onClick=${() => loadOlder()}>Older alerts</button>` : ''}
      <${RuleSets} />
    </section>`;
}
