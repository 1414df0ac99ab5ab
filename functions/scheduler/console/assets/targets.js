// The AWS target types (lambda, sqs, sns, eventbridge: each sent as the role role_arn, assumed
// with the job's owner as ExternalId) and SigV4 auth of HTTP targets: their fields in the form,
// the target they make, and their summary on a job's page. The API checks the values (ARN
// shapes, partitions, FIFO group ids, payload sizes) and names the field at fault.
import { html, fmtMs } from './lib.js';

const TEXT_HINT = '{{job_id}}, {{execution_id}}, {{scheduled_at}}, {{attempt}} are replaced';
const ROLE = ['role_arn', 'Role ARN', { placeholder: 'arn:aws:iam::123456789012:role/scheduler-target', wide: true,
                                        hint: 'assumed with your principal as ExternalId' }];
const TIMEOUT = ['timeout_seconds', 'Timeout (s)', { placeholder: '30', number: true, optional: true }];
const GROUP = (what) => ['message_group_id', 'Message group id', { optional: true, hint: `FIFO ${what}s only (a name ending in .fifo)` }];

// Each type: its label and its fields as [name, label, options]. Options: wide, text (a
// textarea), choices (a select), number, optional (left out when empty), placeholder, hint.
export const AWS_TYPES = {
  lambda: { label: 'Lambda', fields: [
    ['function_arn', 'Function ARN', { placeholder: 'arn:aws:lambda:eu-west-1:123456789012:function:nightly', wide: true }],
    ['invocation_type', 'Invocation', { choices: ['Event', 'RequestResponse'] }],
    ['payload', 'Payload (JSON)', { text: true, placeholder: '{}', optional: true, hint: TEXT_HINT }],
    ROLE, TIMEOUT] },
  sqs: { label: 'SQS', fields: [
    ['queue_url', 'Queue URL', { placeholder: 'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs', wide: true }],
    ['body', 'Message body', { text: true, hint: TEXT_HINT }],
    GROUP('queue'), ROLE, TIMEOUT] },
  sns: { label: 'SNS', fields: [
    ['topic_arn', 'Topic ARN', { placeholder: 'arn:aws:sns:eu-west-1:123456789012:jobs', wide: true }],
    ['subject', 'Subject', { optional: true }],
    ['message', 'Message', { text: true, hint: TEXT_HINT }],
    GROUP('topic'), ROLE, TIMEOUT] },
  eventbridge: { label: 'EventBridge', fields: [
    ['event_bus_arn', 'Event bus ARN', { placeholder: 'arn:aws:events:eu-west-1:123456789012:event-bus/default', wide: true }],
    ['source', 'Source', { placeholder: 'com.example.scheduler' }],
    ['detail_type', 'Detail type', { placeholder: 'Job due' }],
    ['detail', 'Detail (a JSON object)', { text: true, placeholder: '{}', optional: true, hint: TEXT_HINT }],
    ROLE, TIMEOUT] },
};
export const SIGV4_SERVICES = ['execute-api', 'lambda'];
const SIGV4_FIELDS = ['service', 'region', 'role_arn'];

// AMQP (RabbitMQ), field by field. A stored broker URL's password comes as *** and is kept
// unless the URL is changed; without a URL, the deployment's default broker.
export const AMQP = { label: 'AMQP', fields: [
  ['url', 'Broker URL', { wide: true, optional: true, hint: "empty: the deployment's default broker",
                          placeholder: 'amqps://user:password@broker.example.com:5671/vhost' }],
  ['exchange', 'Exchange', { optional: true, placeholder: '(the default exchange)' }],
  ['routing_key', 'Routing key', { optional: true, placeholder: 'reports.nightly' }],
  ['body', 'Body', { text: true, optional: true, hint: TEXT_HINT }],
  ['body_encoding', 'Body encoding', { choices: ['utf-8', 'base64'] }],
  ['content_type', 'Content type', { optional: true, placeholder: 'application/json' }],
  ['headers', 'Headers (JSON)', { json: true, optional: true, placeholder: '{"tenant": "acme"}' }],
  TIMEOUT] };
// Every target type the form makes field by field, besides HTTP.
export const FORM_TYPES = { amqp: AMQP, ...AWS_TYPES };
// HTTP auth with a secret: the fields of each (the secret's field last; write-only).
export const SECRET_AUTH = {
  basic: { label: 'Basic', fields: [['username', 'User name']], secret: ['password', 'Password'] },
  bearer: { label: 'Bearer token', fields: [], secret: ['token', 'Token'] },
  header: { label: 'Header', fields: [['name', 'Header name']], secret: ['value', 'Header value'] },
};

// The API's field paths the form shows an error at.
export const TARGET_FIELDS = [
  ...new Set(Object.values(FORM_TYPES).flatMap((t) => t.fields.map(([name]) => `target.${name}`))),
  'target.auth', ...SIGV4_FIELDS.map((f) => `target.auth.${f}`),
  ...Object.values(SECRET_AUTH).flatMap((a) => [...a.fields, a.secret].map(([name]) => `target.auth.${name}`)),
];

// The form's values of a job's target: the AWS fields (shared across the AWS types, so a role
// typed once stays when the type changes) and the HTTP target's auth.
export function initialTarget(t) {
  const aws = { invocation_type: 'Event', body_encoding: 'utf-8' };
  if (FORM_TYPES[t.type]) {
    for (const [name, , opt] of FORM_TYPES[t.type].fields) {
      const value = t[name];
      if (value === null || value === undefined || (opt.json && Object.keys(value).length === 0)) continue;
      aws[name] = opt.json ? JSON.stringify(value) : String(value);
    }
  }
  const auth = t.auth || null;
  return {
    aws,
    auth: auth ? auth.type : 'none',
    // Write-only secrets are never shown: an empty secret field keeps the stored one.
    cred: { username: '', name: '', password: '', token: '', value: '',
            ...(auth && SECRET_AUTH[auth.type] ? { username: auth.username || '', name: auth.name || '' } : {}) },
    sig: { service: 'execute-api', region: '', role_arn: '',
           ...(auth && auth.type === 'sigv4' ? { service: auth.service, region: auth.region, role_arn: auth.role_arn } : {}) },
  };
}

// A number when the text is one; else the text itself, so that the API names the field at fault.
export const numberOr = (text) => (text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text);

// The target of a type made field by field (AMQP, the AWS types) from the form's values (what
// the form does not show is kept); a JSON field that does not parse is a local error.
export function awsTarget(type, aws, stored, local = {}) {
  const target = { ...(stored && stored.type === type ? stored : {}), type };
  for (const [name, , opt] of FORM_TYPES[type].fields) {
    const text = aws[name] ?? '';
    if (opt.optional && text.trim() === '') delete target[name];
    else if (opt.json) {
      try { target[name] = JSON.parse(text); } catch { local[`target.${name}`] = 'not valid JSON'; }
    } else target[name] = opt.number ? numberOr(text) : text;
  }
  return target;
}

// The auth of an HTTP target: none, SigV4 as typed, or basic, bearer or header auth. A secret
// left empty is sent as "***" when the stored auth is of the same type: the API keeps it.
export function httpAuth(v, stored) {
  if (v.auth === 'sigv4') return { type: 'sigv4', ...v.sig };
  const kind = SECRET_AUTH[v.auth];
  if (!kind) return undefined;
  const auth = { type: v.auth };
  for (const [name] of kind.fields) auth[name] = v.cred[name];
  const [secret] = kind.secret;
  const kept = stored && stored.auth && stored.auth.type === v.auth;
  auth[secret] = v.cred[secret] !== '' ? v.cred[secret] : kept ? '***' : '';
  return auth;
}

// The fields of basic, bearer or header auth; the secret's input is a password field that shows
// "***" kept unless something is typed over it.
export function SecretAuthFields({ kind, cred, onCred, field, stored }) {
  const auth = SECRET_AUTH[kind];
  const kept = stored && stored.auth && stored.auth.type === kind;
  const [secret, secretLabel] = auth.secret;
  return html`<div class="row">
    ${auth.fields.map(([name, label]) => field(label, `target.auth.${name}`, null, html`
      <input name=${`auth_${name}`} value=${cred[name]} autocomplete="off" onInput=${onCred(name)} />`))}
    ${field(secretLabel, `target.auth.${secret}`, kept ? 'write-only: *** is the stored one, kept unless you type a new one' : 'write-only: stored encrypted, never shown again', html`
      <input type="password" name=${`auth_${secret}`} value=${cred[secret]} autocomplete="new-password"
             placeholder=${kept ? '***' : ''} onInput=${onCred(secret)} />`)}
  </div>`;
}

// The form's fields of a type made field by field. `field` renders one labelled field with its error.
export function AwsFields({ type, aws, onAws, field }) {
  const fields = FORM_TYPES[type].fields;
  const one = ([name, label, opt]) => field(label, `target.${name}`, opt.hint, opt.choices
    ? html`<select name=${name} value=${aws[name]} onChange=${onAws(name)}>${opt.choices.map((c) => html`
        <option value=${c} selected=${c === aws[name]}>${c}</option>`)}</select>`
    : opt.text
      ? html`<textarea name=${name} rows="3" value=${aws[name] ?? ''} placeholder=${opt.placeholder || ''} onInput=${onAws(name)}></textarea>`
      : html`<input name=${name} value=${aws[name] ?? ''} placeholder=${opt.placeholder || (opt.optional ? 'optional' : '')}
               class=${opt.wide ? 'wide' : ''} autocomplete="off" spellcheck="false" onInput=${onAws(name)} />`);
  return fields.map(one);
}

// The SigV4 fields of an HTTP target's auth.
export function SigV4Fields({ sig, onSig, field }) {
  return html`<div class="row">
    ${field('Service', 'target.auth.service', null, html`
      <select name="auth_service" value=${sig.service} onChange=${onSig('service')}>${SIGV4_SERVICES.map((s) => html`
        <option value=${s} selected=${s === sig.service}>${s}</option>`)}</select>`)}
    ${field('Region', 'target.auth.region', null, html`
      <input name="auth_region" value=${sig.region} placeholder="eu-west-1" autocomplete="off" onInput=${onSig('region')} />`)}
    ${field('Role ARN', 'target.auth.role_arn', 'assumed with your principal as ExternalId', html`
      <input name="auth_role_arn" class="wide" value=${sig.role_arn} autocomplete="off" spellcheck="false"
             placeholder="arn:aws:iam::123456789012:role/scheduler-target" onInput=${onSig('role_arn')} />`)}
  </div>`;
}

// The region an ARN or an SQS queue URL names.
export function regionOf(resource) {
  const s = String(resource || '');
  const queue = s.match(/^https:\/\/(?:sqs\.([a-z0-9-]+)\.amazonaws\.com|([a-z0-9-]+)\.queue\.amazonaws\.com)/);
  if (queue) return queue[1] || queue[2];
  return s.startsWith('arn:') ? s.split(':')[3] || null : null;
}

// A job's target on its page, field by field (secrets come as "***" from the API).
export function TargetSummary({ target }) {
  const t = target || {};
  const rows = [];
  const row = (label, value, code = true) => {
    if (value !== null && value !== undefined && value !== '') rows.push(html`<dt>${label}</dt><dd>${code ? html`<code>${value}</code>` : value}</dd>`);
  };
  if (AWS_TYPES[t.type]) {
    const [[resource, resourceLabel], ...rest] = AWS_TYPES[t.type].fields;
    row('Type', AWS_TYPES[t.type].label, false);
    row(resourceLabel, t[resource]);
    row('Region', regionOf(t[resource]));
    for (const [name, label, opt] of rest) {
      if (name === 'timeout_seconds' || opt.text) continue;
      row(label, t[name]);
    }
  } else if (t.type === 'http') {
    row('Type', 'HTTP', false);
    row('Request', `${t.method || 'POST'} ${t.url}`);
    const auth = t.auth;
    if (auth && auth.type === 'sigv4') {
      row('Auth', `SigV4 (${auth.service}, ${auth.region})`, false);
      row('Role ARN', auth.role_arn);
    } else row('Auth', auth ? auth.type : 'none', false);
  } else {
    row('Type', t.type === 'amqp' ? 'AMQP' : t.type, false);
    row('Broker', t.url);
    row('Exchange', t.exchange || '(default)');
    row('Routing key', t.routing_key);
  }
  if (t.timeout_seconds) row('Timeout', fmtMs(t.timeout_seconds * 1000), false);
  return html`<dl class="target" data-type=${t.type}>${rows}</dl>`;
}
