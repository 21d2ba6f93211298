// Switchboard agent pages: the page's stream (/agent/stream, docs/live.md)
// says when something changed and the page then asks /agent/live for it; when
// no stream can be held, one poll a second does the same. Typing is sent while
// the agent types and stops after a pause. No library needed.
(() => {
  "use strict";
  const page = document.getElementById("workspace");
  if (!page) return;

  const POLL_MS = 1000;
  // A stream that is not open after this long (a proxy that buffers, a
  // browser without EventSource) leaves the page to the poll.
  const STREAM_GRACE_MS = 5000;
  const STREAM_EVENTS = [
    "chat.opened", "chat.queued", "chat.returned_to_bot", "chat.accepted", "chat.finished",
    "chat.transferred", "chat.labelled", "chat.offered", "chat.offer_ended", "message", "message.delivery", "typing", "client.updated", "crm.panel", "call",
    "offline_message", "reset",
  ];
  const TYPING_PAUSE_MS = 3000;
  const chatId = page.dataset.chat || "";
  let lastId = Number(page.dataset.last || 0);
  let state = page.dataset.state || "";
  const baseTitle = "Switchboard";
  const { gettext, interpolate } = window;  // the catalogue (/agent/jsi18n/)
  const csrf = () => (document.cookie.match(/(?:^|; )csrftoken=([^;]+)/) || [])[1] || "";

  const unreachable = () => gettext("The server could not be reached. Try again in a moment.");

  // A form's POST; its answer, or ``{error: {message}}`` for a refusal, a
  // server error or no answer at all (the caller keeps what was typed).
  async function post(url, data) {
    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: { "X-CSRFToken": decodeURIComponent(csrf()), "X-Requested-With": "fetch" },
        body: new URLSearchParams(data),
        credentials: "same-origin",
      });
    } catch (error) {
      return { error: { message: unreachable() } };
    }
    const answer = await response.json().catch(() => ({}));
    // A proxy's or an outage's 502/503/504 (docs/operations.md).
    if ([502, 503, 504].includes(response.status) && !answer.error) return { error: { message: unreachable() } };
    if (!response.ok && !answer.error) {
      const message = interpolate(
        gettext("The server answered %(status)s: reload the page and try again."),
        { status: response.status }, true,
      );
      return { error: { message } };
    }
    return answer;
  }

  function nearBottom(list) {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 120;
  }

  // What a box shows last, without the CSRF tokens (masked anew in every answer).
  const shown = new Map();
  const withoutTokens = (html) => html.replace(/name="csrfmiddlewaretoken" value="[^"]*"/g, "");

  // Replace a box's HTML (rendered and escaped by the server) only when it
  // changed, keeping what the agent typed into its fields, the boxes they
  // ticked and not sent yet, the disclosures they opened, and the focus.
  function render(box, html) {
    const key = withoutTokens(html);
    if (shown.get(box.id) === key) return;
    shown.set(box.id, key);
    const typed = new Map();
    box.querySelectorAll("input[id], textarea[id]").forEach((field) => {
      if (field.value) typed.set(field.id, field.value);
    });
    const ticked = new Map();
    box.querySelectorAll('input[type="checkbox"][id]').forEach((field) => {
      if (field.checked !== field.defaultChecked) ticked.set(field.id, field.checked);
    });
    const opened = [...box.querySelectorAll("details[id][open]")].map((details) => details.id);
    const focused = box.contains(document.activeElement) ? document.activeElement.id : "";
    box.innerHTML = html;
    typed.forEach((value, id) => {
      const field = document.getElementById(id);
      if (field && box.contains(field)) field.value = value;
    });
    ticked.forEach((checked, id) => {
      const field = document.getElementById(id);
      if (field && box.contains(field)) field.checked = checked;
    });
    opened.forEach((id) => {
      const details = document.getElementById(id);
      if (details && box.contains(details)) details.open = true;
    });
    const refocus = focused && document.getElementById(focused);
    if (refocus) refocus.focus();
  }

  function apply(data) {
    document.dispatchEvent(new CustomEvent("switchboard:live", { detail: data }));
    document.title = (data.queue_count ? `(${data.queue_count}) ` : "") + baseTitle;
    render(document.getElementById("lists"), data.lists_html);
    if (!data.chat) { document.dispatchEvent(new CustomEvent("switchboard:rendered")); return; }
    const chat = data.chat;
    // A new state, or the chat became mine or another's (a transfer): the
    // page's reply box and actions are drawn anew.
    const mineNow = Boolean(document.getElementById("composer"));
    if (chat.state !== state || (chat.mine !== undefined && chat.mine !== mineNow)) {
      // Unless the page is already on its way (Reply, Finish): a reload would
      // cut that navigation short and lose where it goes (#reply-box).
      if (!leaving) window.location.reload();
      return;
    }
    const list = document.getElementById("messages");
    if (chat.messages_html.trim()) {
      const stick = nearBottom(list);
      const holder = document.createElement("template");
      holder.innerHTML = chat.messages_html;  // rendered and escaped by the server
      holder.content.querySelectorAll("li.msg").forEach((li) => {
        if (!document.getElementById(li.id)) list.appendChild(li);
      });
      if (stick) list.scrollTop = list.scrollHeight;
    }
    lastId = Math.max(lastId, chat.last_message_id);
    for (const [id, html] of Object.entries(chat.deliveries)) {
      const box = document.getElementById(`d-${id}`);
      if (box) render(box, html);
    }
    document.getElementById("client-typing").hidden = !chat.client_typing;
    render(document.getElementById("panel"), chat.panel_html);
    document.dispatchEvent(new CustomEvent("switchboard:rendered"));
  }

  // A form or link taking the agent to another page: what the live updates
  // say of this one no longer matters. (A link that only downloads a file
  // leaves the page where it is: after a while it counts as here again.)
  let leaving = false;
  window.addEventListener("beforeunload", () => {
    leaving = true;
    window.setTimeout(() => { leaving = false; }, 5000);
  });

  let timer = null;
  let polling = false;
  let again = false;
  let streaming = false;  // while the stream is open, the page asks only when told

  // The notice that the server cannot be reached (a 5xx such as the 503 of a
  // database outage, or no answer at all), shown from the second failed poll
  // in a row, so one blip of a restart does not flash it, and gone with the
  // first poll that is answered (docs/operations.md, "When PostgreSQL is down").
  const connection = document.getElementById("connection");
  let failures = 0;
  function reached(ok) {
    failures = ok ? 0 : failures + 1;
    if (connection && !leaving) connection.hidden = failures < 2;
  }

  async function poll() {
    polling = true;
    let failed = false;
    try {
      const params = new URLSearchParams(chatId ? { chat: chatId, after: lastId } : {});
      // New messages count as read only while the agent can see them.
      if (chatId && document.visibilityState === "visible") params.set("seen", "1");
      const response = await fetch(`${page.dataset.liveUrl}?${params}`, { credentials: "same-origin" });
      failed = response.status >= 500;
      if (response.status === 200) apply(await response.json());
      else if (response.status === 302 || response.redirected) window.location.reload();
    } catch (error) {
      failed = true;  // no answer: the next poll catches up
    } finally {
      polling = false;
      reached(!failed);
      // A poll that failed is asked again even while the stream is open: the
      // cue it answered would otherwise wait for the next one.
      if (again || !streaming || failed) timer = window.setTimeout(poll, again ? 0 : POLL_MS);
      again = false;
    }
  }

  // After an action the page asks at once instead of within the second.
  function pollNow() {
    if (polling) { again = true; return; }
    window.clearTimeout(timer);
    poll();
  }

  const notice = document.getElementById("notice");
  // A refusal (red), or with ``good`` a confirmation, above the page.
  function tell(message, good = false) {
    notice.textContent = message;
    notice.hidden = !message;
    notice.classList.toggle("error", !good);
    notice.classList.toggle("success", good);
  }

  const messages = document.getElementById("messages");
  if (messages) messages.scrollTop = messages.scrollHeight;

  // The reply box (a reply, or in note mode an internal note) and, on a chat
  // that is not mine, the note box. Typing is sent for replies only.
  function wire(form) {
    const box = form.querySelector("textarea");
    const noteMode = () => {
      const chosen = form.querySelector('[name="as"]:checked') || form.querySelector('[name="as"]');
      return Boolean(chosen && chosen.value === "note");
    };
    let typing = false;
    let pause = null;
    const setTyping = (on) => {
      if (typing === on || (on && noteMode())) return;
      typing = on;
      post(page.dataset.typingUrl, { typing: on ? "true" : "false" });
    };
    form.querySelectorAll('input[name="as"][type="radio"]').forEach((radio) => {
      radio.addEventListener("change", () => {
        const note = noteMode();
        form.classList.toggle("is-note", note);
        box.placeholder = note ? box.dataset.notePlaceholder : box.dataset.replyPlaceholder;
        box.setAttribute("aria-label", note ? gettext("Internal note (only agents see it)") : gettext("Reply to the client"));
        if (note) setTyping(false);
        box.focus();
      });
    });
    if (page.dataset.typingUrl && form.id === "composer") {
      box.addEventListener("input", () => {
        if (box.value.trim()) setTyping(true);
        window.clearTimeout(pause);
        pause = window.setTimeout(() => setTyping(false), TYPING_PAUSE_MS);
      });
    }
    box.addEventListener("keydown", (event) => {
      if (event.defaultPrevented) return;  // a feature's own use of the key (a list open)
      if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
      if (event.key === "Escape") box.blur();  // back to the page's shortcuts
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = box.value.trim();
      if (!text) return;
      box.value = "";
      window.clearTimeout(pause);
      if (typing) {
        typing = false;
        await post(page.dataset.typingUrl, { typing: "false" });  // typeout, then the message
      }
      const answer = await post(form.action, { text, as: noteMode() ? "note" : "reply" });
      if (answer.error) { box.value = text; tell(answer.error.message); return; }
      tell("");
      pollNow();
    });
  }
  ["composer", "note-box"].forEach((id) => {
    const form = document.getElementById(id);
    if (form) wire(form);
  });

  // The small forms (Retry, call steps, Mark handled, Assign) come and go with
  // live updates: one listener for all. A refusal is shown above the page.
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.classList || !form.classList.contains("live-form")) return;
    event.preventDefault();
    const answer = await post(form.action, new FormData(form));
    if (answer.error) { tell(answer.error.message); return; }
    tell(answer.message || "", true);
    form.reset();
    const disclosure = form.closest("details");  // done: the chips say what it did
    if (disclosure) disclosure.open = false;
    pollNow();
  });

  // The stream: each event is a cue to ask for what changed (one request for
  // a burst of events). The browser reconnects a dropped stream by itself and
  // sends the last event id it saw; the server replays what was missed. While
  // it is not open the page polls; a stream the browser gave up on is opened
  // anew after a pause.
  let lastEventId = page.dataset.liveId || "0";
  let grace = null;

  function fallBack() {
    streaming = false;
    window.clearTimeout(timer);
    if (!polling) poll();  // a poll in flight schedules the next one itself
  }

  // What happens inside a chat this page shows nowhere (another agent's chat
  // of my channels: neither open here nor in my lists) changes nothing on
  // it: no poll. Whatever moves a chat in or out of the lists (its state, a
  // transfer, an offer) always asks; so does anything while a list is cut
  // at its length, where a chat not shown may be the one to come in.
  const INSIDE_A_CHAT = ["message", "message.delivery", "typing", "client.updated", "crm.panel"];
  function elsewhere(event) {
    if (!INSIDE_A_CHAT.includes(event.type)) return false;
    let id;
    try { id = String(JSON.parse(event.data).chat_id || ""); } catch (error) { return false; }
    if (!id || id === chatId) return false;
    const lists = document.getElementById("lists");
    if (!lists || lists.querySelector("[data-lists-cut]")) return false;
    return !lists.querySelector(`[data-chat-id="${CSS.escape(id)}"]`);
  }

  function listen() {
    if (!window.EventSource || !page.dataset.streamUrl) return false;
    const source = new EventSource(
      `${page.dataset.streamUrl}?last_event_id=${encodeURIComponent(lastEventId)}`
    );
    window.clearTimeout(grace);
    grace = window.setTimeout(fallBack, STREAM_GRACE_MS);
    source.addEventListener("open", () => {
      window.clearTimeout(grace);
      streaming = true;
      pollNow();  // what changed while it was not open
    });
    source.addEventListener("error", () => {
      window.clearTimeout(grace);
      if (source.readyState === EventSource.CLOSED) {
        fallBack();
        window.setTimeout(listen, STREAM_GRACE_MS);
      } else if (streaming) {
        grace = window.setTimeout(fallBack, POLL_MS);  // unless it is back within a second
      }
      streaming = false;
    });
    const cue = (event) => {
      if (event.lastEventId) lastEventId = event.lastEventId;
      if (elsewhere(event)) return;
      pollNow();
    };
    STREAM_EVENTS.forEach((kind) => source.addEventListener(kind, cue));
    return true;
  }

  // Coming back to a hidden tab marks the open chat's messages read.
  document.addEventListener("visibilitychange", () => {
    if (chatId && document.visibilityState === "visible") pollNow();
  });

  // What the pages' other scripts (one file per feature) use.
  window.Switchboard = { page, chatId, csrf, post, pollNow, tell };

  if (!listen()) poll();
})();
