// The scheduler's web console: a few pages over the public /v1 API (Preact + htm, uPlot; both
// vendored). Routes live in the URL's hash: #/jobs, #/jobs/new, #/jobs/ID, #/jobs/ID/edit,
// #/activity, #/executions/ID, #/calendars, #/calendars/NAME, #/alerts.
import { render, useState, useEffect } from './vendor/htm-preact-standalone.mjs';
import { html, parseHash } from './lib.js';
import { Jobs, Job, Activity } from './pages.js';
import { JobForm } from './form.js';
import { Execution } from './executions.js';
import { Calendars } from './calendars.js';
import { Alerts } from './alerts.js';

// A list's filters come from the hash when it opens: every navigation (a link, a bookmark, an
// edited address: each a hashchange) opens the list again with the hash's filters (key); a list's
// own edits of its filters replace the hash without a hashchange, so they keep it as it is.
function page(route) {
  const [first, second, third] = route.parts;
  if (first === 'alerts') return ['alerts', html`<${Alerts} key=${route.visit} params=${route.params} />`];
  if (first === 'executions' && second) return ['activity', html`<${Execution} key=${second} id=${decodeURIComponent(second)} />`];
  if (first === 'activity') return ['activity', html`<${Activity} key=${route.visit} params=${route.params} />`];
  if (first === 'calendars') return ['calendars', html`<${Calendars} name=${second ? decodeURIComponent(second) : null} />`];
  if (first === 'jobs' && second === 'new') return ['jobs', html`<${JobForm} />`];
  if (first === 'jobs' && second && third === 'edit') return ['jobs', html`<${JobForm} key=${second} id=${second} />`];
  if (first === 'jobs' && second) return ['jobs', html`<${Job} key=${second} id=${second} />`];
  return ['jobs', html`<${Jobs} key=${route.visit} params=${route.params} />`];
}

function App() {
  const [route, setRoute] = useState({ ...parseHash(), visit: 0 });
  useEffect(() => {
    let visits = 0;  // the navigations so far: each opens its page afresh
    const onChange = () => setRoute({ ...parseHash(), visit: ++visits });
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  const [where, content] = page(route);
  return html`
    <header class="top">
      <a class="brand" href="#/jobs">Scheduler</a>
      <nav>
        <a href="#/jobs" class=${where === 'jobs' ? 'here' : ''}>Jobs</a>
        <a href="#/activity" class=${where === 'activity' ? 'here' : ''}>Recent activity</a>
        <a href="#/calendars" class=${where === 'calendars' ? 'here' : ''}>Calendars</a>
        <a href="#/alerts" class=${where === 'alerts' ? 'here' : ''}>Alerts</a>
      </nav>
    </header>
    <main>${content}</main>`;
}

const root = document.getElementById('app');
root.textContent = '';  // the "Loading" note (render() adds to what is there)
render(html`<${App} />`, root);
