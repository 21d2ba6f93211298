// Switchboard agent workspace: the client panel as a drawer on small
// screens, the cursor in the reply box after Reply, keyboard shortcuts, and
// notifications (a sound and a desktop notification) for new chats and new
// messages. Builds on app.js (window.Switchboard).
(() => {
  "use strict";
  const page = document.getElementById("workspace");
  if (!page) return;
  const body = document.body;

  // --- the client panel ------------------------------------------------------------
  // Beside the chat on a wide screen; below 1100 px a drawer opened by the
  // chat head's button (or I), closed by the button, Escape or the back link.
  const toggle = document.getElementById("panel-toggle");
  const panel = document.getElementById("panel");
  function setPanel(open) {
    if (!toggle) return;
    page.classList.toggle("panel-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    if (open) panel.focus();
  }
  if (toggle && panel) {
    panel.tabIndex = -1;
    toggle.addEventListener("click", () => setPanel(!page.classList.contains("panel-open")));
  }

  // --- the reply box ---------------------------------------------------------------
  const replyBox = document.getElementById("reply-box");
  const messages = document.getElementById("messages");
  function toNewest() {
    if (messages) messages.scrollTop = messages.scrollHeight;
  }
  // app.js opened the list at its newest message; images above it change the
  // height as they load.
  if (messages) messages.addEventListener("load", toNewest, { capture: true, once: true });
  if (replyBox && window.location.hash === "#reply-box") {
    const toReply = () => { if (document.activeElement !== replyBox) replyBox.focus(); };
    toReply();
    // Once more when the page has loaded: the browser's own focus handling of
    // a page that has just arrived may come after this script.
    window.addEventListener("load", toReply, { once: true });
    window.setTimeout(toReply, 300);
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }

  // --- keyboard shortcuts ------------------------------------------------------------
  const help = document.createElement("dialog");
  help.className = "shortcuts";
  help.setAttribute("aria-labelledby", "shortcuts-title");
  // The words come from the catalogue (/agent/jsi18n/), which holds no markup.
  const { gettext, interpolate } = window;
  const say = (text, values) => interpolate(text, values, true);
  help.innerHTML = `<h2 id="shortcuts-title"></h2>
    <dl>
      <dt><kbd>J</kbd> / <kbd>K</kbd></dt><dd></dd>
      <dt><kbd>R</kbd></dt><dd></dd>
      <dt><kbd>Enter</kbd></dt><dd></dd>
      <dt><kbd>Esc</kbd></dt><dd></dd>
      <dt><kbd>F</kbd></dt><dd></dd>
      <dt><kbd>I</kbd></dt><dd></dd>
      <dt><kbd>?</kbd></dt><dd></dd>
    </dl>
    <form method="dialog"><button type="submit" class="primary"></button></form>`;
  help.querySelector("h2").textContent = gettext("Keyboard shortcuts");
  help.querySelector("button").textContent = gettext("Close");
  [
    gettext("next / previous chat in the lists"),
    gettext("Reply (take the chat), or go to the reply box"),
    gettext("send (Shift+Enter: a new line)"),
    gettext("leave the reply box"),
    gettext("finish the chat (asks first)"),
    gettext("client details"),
    gettext("this list"),
  ].forEach((text, index) => { help.querySelectorAll("dd")[index].textContent = text; });
  document.body.appendChild(help);

  const typingInto = (node) =>
    node && (node.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(node.tagName));

  function chatLinks() {
    return Array.from(document.querySelectorAll("#lists .item > a"));
  }

  function step(by) {
    const links = chatLinks();
    if (!links.length) return;
    const current = links.findIndex((a) => a.closest(".item").classList.contains("current"));
    const next = current === -1 ? (by > 0 ? 0 : links.length - 1) : current + by;
    if (next >= 0 && next < links.length) window.location.assign(links[next].href);
  }

  const press = (selector) => {
    const button = document.querySelector(selector);
    if (button) button.click();
    return Boolean(button);
  };

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typingInto(event.target) || help.open) return;
    const key = event.key;
    if (key === "Escape" && page.classList.contains("panel-open")) { setPanel(false); toggle.focus(); return; }
    const act = {
      j: () => step(1),
      k: () => step(-1),
      r: () => press('[data-testid="reply"]') || (replyBox && replyBox.focus()),
      f: () => press('[data-testid="finish"]'),
      i: () => toggle && setPanel(!page.classList.contains("panel-open")),
      "?": () => help.showModal(),
    }[key.length === 1 ? key.toLowerCase() : key];
    if (act) { event.preventDefault(); act(); }
  });

  // --- notifications ------------------------------------------------------------------
  // A new chat in the queue and a new message in one of my chats: a short
  // sound, and while the tab is hidden also a desktop notification (when the
  // agent allowed them in the browser). Each switched on or off per agent on
  // the settings page (<body data-notify-sound / data-notify-desktop>).
  const wantsSound = body.dataset.notifySound !== "false";
  const wantsDesktop = body.dataset.notifyDesktop !== "false";
  let audio = null;
  // Browsers let a page make sound only after the agent touched it once.
  const wakeAudio = () => {
    if (!audio && window.AudioContext) audio = new AudioContext();
    if (audio && audio.state === "suspended") audio.resume();
  };
  document.addEventListener("pointerdown", wakeAudio);
  document.addEventListener("keydown", wakeAudio);

  function chime() {
    if (!wantsSound || !audio || audio.state !== "running") return;
    const now = audio.currentTime;
    [880, 1320].forEach((pitch, i) => {
      const tone = audio.createOscillator();
      const level = audio.createGain();
      tone.frequency.value = pitch;
      level.gain.setValueAtTime(0.0001, now + i * 0.12);
      level.gain.exponentialRampToValueAtTime(0.2, now + i * 0.12 + 0.02);
      level.gain.exponentialRampToValueAtTime(0.0001, now + i * 0.12 + 0.25);
      tone.connect(level).connect(audio.destination);
      tone.start(now + i * 0.12);
      tone.stop(now + i * 0.12 + 0.3);
    });
  }

  function desktop(title, text, chatId) {
    if (!wantsDesktop || !window.Notification || Notification.permission !== "granted") return;
    let note;
    try {
      note = new Notification(title, { body: text, tag: `chat-${chatId}` });
    } catch (error) {
      return;  // a browser that shows notifications only through a service worker
    }
    note.addEventListener("click", () => {
      window.focus();
      window.location.assign(`/agent/chats/${chatId}/`);
    });
  }

  // A button to ask the browser for permission (it must follow a click).
  function offerPermission() {
    if (!wantsDesktop || !window.Notification || Notification.permission !== "default") return;
    const ask = document.createElement("button");
    ask.type = "button";
    ask.className = "notify-ask";
    ask.dataset.testid = "notify-ask";
    ask.textContent = gettext("Turn on desktop notifications");
    ask.addEventListener("click", async () => {
      await Notification.requestPermission();
      ask.remove();
    });
    const menu = document.getElementById("menu");  // the top bar (a phone: its menu)
    if (menu) menu.insertBefore(ask, menu.querySelector(".who"));
  }
  offerPermission();

  let known = null;  // chat id -> last message id, as the previous answer had them
  document.addEventListener("switchboard:live", (event) => {
    const notify = event.detail && event.detail.notify;
    if (!notify) return;
    const now = new Map();
    // A queued chat counts anew each time it is offered to another agent.
    notify.queued.forEach((c) => now.set(`q${c.id}:${c.offer}`, c));
    notify.mine.forEach((c) => now.set(`m${c.id}`, c));
    if (known !== null) {
      const hidden = document.visibilityState !== "visible";
      const news = [];
      notify.queued.forEach((c) => {
        if (known.has(`q${c.id}:${c.offer}`)) return;
        // Routing by offers: the chat sounds for the agent it is offered to only.
        if (c.offer === "me") news.push({ c, title: say(gettext("Chat offered to you: %(name)s"), { name: c.name }), queued: true });
        else if (c.offer === "") news.push({ c, title: say(gettext("New chat: %(name)s"), { name: c.name }), queued: true });
      });
      notify.mine.forEach((c) => {
        const before = known.get(`m${c.id}`);
        if (before === undefined && c.transferred_by) {
          // Handed to me by another agent: say so on the page too.
          const who = { agent: c.transferred_by, name: c.name, note: c.transfer_note };
          window.Switchboard.tell(c.transfer_note
            ? say(gettext("%(agent)s transferred %(name)s's chat to you: %(note)s"), who)
            : say(gettext("%(agent)s transferred %(name)s's chat to you"), who), true);
          news.push({ c, title: say(gettext("%(agent)s transferred %(name)s to you"), who), queued: true });
          return;
        }
        const newer = before === undefined || c.last_id > before.last_id;
        if (newer && c.unread > 0) news.push({ c, title: say(gettext("%(name)s wrote"), { name: c.name }), queued: false });
      });
      // A new chat always sounds; a message in my chats only while I look elsewhere.
      const heard = news.filter((n) => n.queued || hidden);
      if (heard.length) chime();
      if (hidden) heard.forEach((n) => desktop(n.title, n.c.text, n.c.id));
    }
    known = now;
    page.dataset.heard = "true";  // what is new is told from here on
  });
})();
