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
    // A click is a press and a release on the same element: an update that replaced the live
    // part in between would send the click to an ancestor, and the button would never get it.
    // So while a pointer is pressed in the live part, the newest update waits, and goes in
    // after the release, once the click has been dispatched.
    let pressed = false;
    let next = null; // the newest update not yet applied
    let shown = live.innerHTML; // the HTML in place (as the browser writes it, at first)
    const apply = () => {
      if (pressed || next === null) return;
      if (next !== shown) live.innerHTML = shown = next; // no write when nothing changed
      next = null;
      live.dataset.updates = String(Number(live.dataset.updates || '0') + 1); // updates applied
    };
    live.addEventListener('pointerdown', () => { pressed = true; });
    const release = () => {
      if (!pressed) return;
      pressed = false;
      setTimeout(apply); // a later task: the click follows the release in this one
    };
    addEventListener('pointerup', release, true);
    addEventListener('pointercancel', release, true);
    // A release the page never saw (outside the window) shows as a move with no button down.
    addEventListener('pointermove', (e) => { if (e.buttons === 0) release(); }, true);
    events.addEventListener('open', () => show('live', 'ok'));
    events.addEventListener('update', (e) => {
      next = e.data;
      apply();
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
