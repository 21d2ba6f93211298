// Canned replies in the reply box: "/" and a few letters at the start of a
// word list the matching replies (shared and mine), filled for this chat by
// the server; arrows move, Enter or a click inserts, Escape closes. The text
// goes in as the box's value, never as HTML.
(() => {
  "use strict";
  const page = document.getElementById("workspace");
  if (!page || !page.dataset.cannedUrl) return;

  function attach(box) {
    const list = document.createElement("ul");
    list.className = "canned-list";
    list.id = `${box.id}-canned`;
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", window.gettext("Canned replies"));
    list.hidden = true;
    box.parentNode.appendChild(list);
    box.setAttribute("aria-autocomplete", "list");
    box.setAttribute("aria-controls", list.id);
    box.setAttribute("aria-expanded", "false");

    let found = [];
    let chosen = 0;
    let query = null;  // {start, end, text} of the "/…" being typed
    let asked = 0;

    function close() {
      list.hidden = true;
      list.replaceChildren();
      found = [];
      query = null;
      box.setAttribute("aria-expanded", "false");
      box.removeAttribute("aria-activedescendant");
    }

    function show() {
      list.replaceChildren(...found.map((reply, index) => {
        const item = document.createElement("li");
        item.id = `${list.id}-${index}`;
        item.setAttribute("role", "option");
        item.setAttribute("aria-selected", String(index === chosen));
        item.dataset.testid = "canned-option";
        const name = document.createElement("strong");
        name.textContent = `/${reply.shortcut}${reply.shared ? "" : ` · ${window.gettext("mine")}`}`;
        const text = document.createElement("span");
        text.className = "text";
        text.textContent = reply.text;
        item.append(name, text);
        item.addEventListener("mousedown", (event) => { event.preventDefault(); insert(index); });
        return item;
      }));
      list.hidden = !found.length;
      box.setAttribute("aria-expanded", String(Boolean(found.length)));
      if (found.length) box.setAttribute("aria-activedescendant", `${list.id}-${chosen}`);
    }

    function insert(index) {
      const reply = found[index];
      if (!reply || !query) return;
      const before = box.value.slice(0, query.start);
      const after = box.value.slice(query.end);
      box.value = before + reply.text + after;
      const caret = before.length + reply.text.length;
      box.setSelectionRange(caret, caret);
      close();
      box.dispatchEvent(new Event("input"));  // the typing notice, as if typed
      box.focus();
    }

    async function lookUp() {
      const upToCaret = box.value.slice(0, box.selectionStart);
      const typed = upToCaret.match(/(?:^|\s)\/([\w-]{0,50})$/);
      if (!typed) { close(); return; }
      query = { start: box.selectionStart - typed[1].length - 1, end: box.selectionStart };
      const ask = ++asked;
      const params = new URLSearchParams({ q: typed[1], chat: page.dataset.chat || "" });
      try {
        const response = await fetch(`${page.dataset.cannedUrl}?${params}`, { credentials: "same-origin" });
        if (!response.ok || ask !== asked) return;
        found = (await response.json()).replies;
        chosen = 0;
        show();
      } catch (error) {
        close();
      }
    }

    box.addEventListener("input", lookUp);
    box.addEventListener("blur", () => window.setTimeout(close, 150));
    box.addEventListener("keydown", (event) => {
      if (list.hidden || !found.length) return;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        chosen = (chosen + (event.key === "ArrowDown" ? 1 : found.length - 1)) % found.length;
        show();
      } else if (event.key === "Enter" || event.key === "Tab") {
        insert(chosen);
      } else if (event.key === "Escape") {
        close();
      } else {
        return;
      }
      event.preventDefault();  // the reply box's own Enter and Escape wait
    }, { capture: true });  // before app.js's Enter, which sends
  }

  ["reply-box", "note-text"].forEach((id) => {
    const box = document.getElementById(id);
    if (box) attach(box);
  });
})();
