// edgefleet web UI: keeps the page's live part (#live) current from a server-sent event
// stream of the same URL, and asks before forms marked data-confirm are sent. No framework:
// the server renders every fragment.
(() => {
  'use strict';
  const status = document.getElementById('live-status');
  const show = (text, kind) => {
    if (!status) return;
    status.hidden = false;
    status.textContent = text;
    status.className = 'live-status ' + kind;
  };

  const live = document.getElementById('live');
  if (live && window.EventSource) {
    // The server answers an EventSource (Accept: text/event-stream) at the page's own URL.
    const events = new EventSource(location.pathname + location.search);
    events.addEventListener('open', () => show('live', 'ok'));
    events.addEventListener('update', (e) => {
      live.innerHTML = e.data;
      live.dataset.updates = String(Number(live.dataset.updates || '0') + 1);
      show('live', 'ok');
    });
    events.addEventListener('denied', (e) => {
      events.close();
      show('stopped', 'bad');
      const banner = document.createElement('p');
      banner.className = 'error banner';
      banner.id = 'denied';
      banner.textContent = e.data + ' ';
      // A reload signs in again when the token was the reason.
      const link = document.createElement('a');
      link.href = location.href;
      link.textContent = 'Reload';
      banner.append(link);
      live.before(banner);
    });
    events.addEventListener('error', () => {
      // The browser reconnects by itself unless the server refused the stream.
      show(events.readyState === EventSource.CLOSED ? 'not live: reload the page' : 'reconnecting…',
        events.readyState === EventSource.CLOSED ? 'bad' : 'warn');
    });
  }

  document.addEventListener('submit', (e) => {
    const question = e.target.dataset.confirm;
    if (question && !window.confirm(question)) e.preventDefault();
  });
})();
