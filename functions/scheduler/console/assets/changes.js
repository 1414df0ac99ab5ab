// A change log, newest first: who changed what and when. A job's (its Changes tab), a calendar's
// (under its form) or a rule set's (under its row): GET .../changes, read again when the version
// moves on, and every 5 s.
import { useState, useEffect, useRef } from './vendor/htm-preact-standalone.mjs';
import { html, api, query, fmtTime, ErrorBox, useInterval } from './lib.js';

// One change's diff: a line a field, "from -> to"; a secret only says that it changed.
function Diff({ diff }) {
  const fields = Object.keys(diff || {}).sort();
  if (!fields.length) return html`<span class="muted">—</span>`;
  const show = (v) => (v === null || v === undefined ? '∅' : JSON.stringify(v));
  return html`<ul class="diff">${fields.map((f) => html`<li key=${f}><code>${f}</code>: ${diff[f].secret
    ? html`<span class="secret">changed (secret)</span>`
    : html`<span class="from">${show(diff[f].from)}</span> → <span class="to">${show(diff[f].to)}</span>`}</li>`)}</ul>`;
}

// path: the log's API path (/jobs/ID/changes, /calendars/NAME/changes, /alert-rules/NAME/changes).
// An answer for another path than the one shown now (a slow one, the page moved on) is dropped,
// and so is a refresh's once older pages were asked for (it would replace them).
export function Changes({ path, version }) {
  const [changes, setChanges] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const shown = useRef({ path, older: false });
  shown.current.path = path;
  const read = async (after, apply) => {
    try {
      const page = await api('GET', `${path}${query({ limit: 50, cursor: after })}`);
      if (shown.current.path !== path || !apply()) return;
      setChanges((old) => (after && old ? old.concat(page.changes) : page.changes));
      setCursor(page.next_cursor);
      setError(null);
    } catch (e) { if (shown.current.path === path) setError(e); }
  };
  useEffect(() => {
    shown.current.older = false;
    read(null, () => true);
  }, [path, version]);
  // Runs and backfills are in the log but move no version: the newest page is read again every
  // 5 s, while no older page is shown (a reload would drop it).
  useInterval(() => { if (!shown.current.older) read(null, () => !shown.current.older); }, 5000);
  const older = () => { shown.current.older = true; read(cursor, () => true); };
  if (changes === null) return html`<${ErrorBox} error=${error} />${error ? '' : html`<p class="muted">Loading…</p>`}`;
  return html`
    <${ErrorBox} error=${error} />
    ${changes.length === 0 ? html`<p class="empty">No changes recorded.</p>` : html`
    <table class="list changes">
      <thead><tr><th>At</th><th>Action</th><th class="num">Version</th><th>By</th><th>Changes</th></tr></thead>
      <tbody>${changes.map((c) => html`
        <tr key=${c.version + c.action + c.at}>
          <td>${fmtTime(c.at)}</td><td class="action">${c.action}</td><td class="num">${c.version}</td>
          <td class="by">${c.by}</td><td><${Diff} diff=${c.diff} /></td>
        </tr>`)}
      </tbody>
    </table>`}
    ${cursor ? html`<button class="more" onClick=${older}>Older changes</button>` : ''}`;
}
