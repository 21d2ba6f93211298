// Switchboard's Team view: the page's stream (/agent/stream, docs/live.md)
// says when a chat or an agent changed, and the page then asks for the team's
// lists rendered anew (escaped by the server). Presence turns away with time,
// not with an event: the lists are asked for every 15 s as well, and every
// 3 s while no stream is open. No library needed.
(() => {
  "use strict";
  const team = document.getElementById("team");
  if (!team) return;
  const body = document.getElementById("team-body");
  const EVENTS = [
    "chat.opened", "chat.queued", "chat.returned_to_bot", "chat.accepted", "chat.finished",
    "chat.transferred", "chat.offered", "chat.offer_ended", "message", "agent.status", "reset",
  ];
  const EVERY_MS = 15000;
  const WITHOUT_STREAM_MS = 3000;
  let streaming = false;
  let pending = null;
  let stale = false;  // a rendering held back while the supervisor uses a form

  // Focus in one of the page's forms (a field, a choice, its button): the
  // supervisor is at work there, and a redrawn form would lose their choice.
  const busy = () => Boolean(document.activeElement && document.activeElement.closest("#team-body form"));

  async function refresh() {
    pending = null;
    if (busy()) { stale = true; return; }
    try {
      const response = await fetch(team.dataset.liveUrl, { credentials: "same-origin" });
      if (response.redirected || response.status === 403) { window.location.reload(); return; }
      if (!response.ok) return;
      const data = await response.json();
      if (busy()) { stale = true; return; }
      body.innerHTML = data.html;  // rendered and escaped by the server
      stale = false;
      document.dispatchEvent(new CustomEvent("switchboard:rendered"));
    } catch (error) {
      // offline for a moment: the next cue or tick catches up
    }
  }

  function soon() {
    if (pending === null) pending = window.setTimeout(refresh, 200);
  }

  body.addEventListener("focusout", () => window.setTimeout(() => { if (stale) soon(); }, 0));
  window.setInterval(() => { if (streaming || !window.EventSource) soon(); }, EVERY_MS);
  window.setInterval(() => { if (!streaming) soon(); }, WITHOUT_STREAM_MS);

  if (window.EventSource && team.dataset.streamUrl) {
    const source = new EventSource(team.dataset.streamUrl);
    source.addEventListener("open", () => { streaming = true; soon(); });
    source.addEventListener("error", () => { streaming = false; });
    EVENTS.forEach((kind) => source.addEventListener(kind, soon));
  }
})();
