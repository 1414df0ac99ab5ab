// Alerts: the page of every alert your jobs' rules fired (#/alerts) with your rule sets by tag,
// and a job's rules with its recent alerts (on the job's page). Over GET /v1/alerts,
// GET /v1/alert-rules and the job's "alerts".
import { useState, useEffect, useCallback } from './vendor/htm-preact-standalone.mjs';
import { html, api, allPages, query, fmtTime, Badge, ErrorBox, useInterval } from './lib.js';
import { Changes } from './changes.js';

export const ALERT_STATUSES = ['pending', 'delivered', 'failed'];

const ruleText = (r) => r.threshold == null ? r.on : `${r.on} > ${r.threshold}${r.on === 'failures_in_a_row' ? '' : ' s'}`;
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
          <td><${Badge} value=${a.event} /></td>
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
      ${alerts && alerts.length ? html`<${AlertRows} alerts=${alerts} withJob=${false} />`
        : covered ? html`<p class="empty">No alert fired yet.</p>` : ''}
    </div>`;
}

// Your rule sets by tag (scheduler alert-rules apply, PUT /v1/alert-rules/NAME): every job with
// the tag has their rules. A set's name opens its change log below the table.
function RuleSets() {
  const [sets, setSets] = useState(null);
  const [error, setError] = useState(null);
  const [open, setOpen] = useState(null);
  useEffect(() => {
    allPages('/alert-rules', 'alert_rules').then(setSets).catch(setError);
  }, []);
  if (error) return html`<${ErrorBox} error=${error} />`;
  if (sets === null) return '';
  return html`
    <div class="rule-sets">
      <h2>Rules by tag</h2>
      ${sets.length === 0 ? html`<p class="muted no-rule-sets">No rule sets by tag (scheduler alert-rules apply).</p>` : html`
        <table class="list rule-sets">
          <thead><tr><th>Name</th><th>Tag</th><th>Rules</th><th class="num">Version</th><th>Updated</th></tr></thead>
          <tbody>${sets.map((set) => html`
            <tr key=${set.name} class="rule-set-row">
              <td><button class="link" aria-expanded=${open === set.name ? 'true' : 'false'}
                          title="its change log" onClick=${() => setOpen(open === set.name ? null : set.name)}>${set.name}</button></td>
              <td><a href="#/jobs${query({ tag: set.tag })}"><code>${set.tag}</code></a></td>
              <td>${set.alerts.map((r, i) => html`<div key=${i}><code>${ruleText(r)}</code> → ${r.target.type}
                <span class="muted">${whereTo(r.target)}</span></div>`)}</td>
              <td class="num">${set.version}</td>
              <td>${fmtTime(set.updated_at)}</td>
            </tr>`)}
          </tbody>
        </table>`}
      ${open ? html`
        <div class="rule-set-changes">
          <h3>Changes of ${open}</h3>
          <${Changes} path=${`/alert-rules/${encodeURIComponent(open)}/changes`}
                      version=${(sets.find((set) => set.name === open) || {}).version} />
        </div>` : ''}
    </div>`;
}

export function Alerts({ params }) {
  const [status, setStatus] = useState(params.get('status') || '');
  const [alerts, setAlerts] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(async () => {
    try {
      setAlerts((await api('GET', `/alerts${query({ status, limit: 50 })}`)).alerts);
      setError(null);
    } catch (e) { setError(e); }
  }, [status]);
  useEffect(() => {
    history.replaceState(null, '', `#/alerts${query({ status })}`);
    load();
  }, [status]);
  useInterval(load, 5000);
  return html`
    <section>
      <div class="head"><h1>Alerts</h1><span class="muted">refreshes every 5 s</span></div>
      <form class="filters" onSubmit=${(ev) => ev.preventDefault()}>
        <label>Delivery <select name="status" value=${status} onChange=${(ev) => setStatus(ev.target.value)}>
          <option value="">all</option>${ALERT_STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s}</option>`)}
        </select></label>
      </form>
      <${ErrorBox} error=${error} />
      ${alerts === null ? html`<p class="muted">Loading…</p>` : alerts.length === 0
        ? html`<p class="empty">No alerts${status ? ` ${status}` : ''}.</p>`
        : html`<${AlertRows} alerts=${alerts} withJob=${true} />`}
      <${RuleSets} />
    </section>`;
}
