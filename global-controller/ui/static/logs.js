// edgefleet web UI: the site page's Logs panel. "Show" reads a site component's newest lines from
// the panel's URL (the server renders each: time, level, logger, message, key=value pairs);
// "Follow" asks again every 5 s for the lines after the newest shown and appends them, keeping
// at most 2000 lines. Log lines are untrusted text: they are only ever set as text, never as
// HTML. Errors are shown with the server's message.
(() => {
  'use strict';
  const panel = document.getElementById('logs');
  if (!panel) return;
  const maxLines = 2000;
  const followEvery = 5000;
  const $ = (id) => document.getElementById(id);
  const out = $('log-lines-shown');
  const status = $('log-status');
  let newest = '';
  let timer = null;
  let busy = false;

  const show = (entries, append) => {
    if (!append) out.replaceChildren();
    for (const l of entries) {
      const line = document.createElement('div');
      line.className = 'log-line' + (l.level ? ' level-' + l.level.replace(/[^a-z]/g, '') : '');
      line.textContent = l.text;
      out.append(line);
    }
    while (out.childElementCount > maxLines) out.firstElementChild.remove();
  };

  async function ask(append) {
    if (busy) return;
    busy = true;
    const params = new URLSearchParams({ component: $('log-component').value, tailLines: $('log-lines').value });
    if (append && newest) params.set('sinceTime', newest);
    try {
      const resp = await fetch(`${panel.dataset.logUrl}?${params}`, { credentials: 'same-origin' });
      let answer;
      try { answer = await resp.json(); } catch { answer = { message: `${resp.status} ${resp.statusText}` }; }
      if (!resp.ok) throw new Error(answer.message || `${resp.status} ${resp.statusText}`);
      show(answer.lines, append);
      newest = answer.newest || newest;
      const when = new Date().toLocaleTimeString();
      status.textContent = `${answer.component} (${answer.instance}): ${out.childElementCount} lines shown, asked at ${when}` +
        (answer.truncated && !append ? '; older lines are no longer kept' : '');
      status.classList.remove('error');
    } catch (err) {
      status.textContent = `Cannot show the logs: ${err.message}`;
      status.classList.add('error');
    } finally {
      busy = false;
    }
  }

  const follow = () => {
    clearInterval(timer);
    timer = null;
    if ($('log-follow').checked) timer = setInterval(() => ask(true), followEvery);
  };
  $('log-show').addEventListener('click', () => { newest = ''; ask(false); });
  $('log-follow').addEventListener('change', () => {
    if ($('log-follow').checked && !newest) ask(false);
    follow();
  });
  $('log-component').addEventListener('change', () => { newest = ''; if ($('log-follow').checked) ask(false); });
})();
