// Switchboard agent pages, every page: times in the agent's own time zone
// (relative where it helps), the phone menu, forms that ask before they act,
// and images that cannot load shown as a file card. No library needed.
(() => {
  "use strict";

  // --- times -----------------------------------------------------------------
  // The server writes each time as <time datetime="ISO"> with a UTC fallback;
  // here it is shown in the browser's time zone. data-relative: "just now",
  // "3 min", then the time of day or the date; data-relative="wait": how long
  // (never "0 minutes"); data-local="time": the time of day (and the date when
  // it is not today). The title is always the full local date and time.
  // Dates and times in the page's language (the agent's choice, else the
  // browser's: <html lang>), in the browser's own variant of it when it has
  // one (en-GB's 24-hour clock); the words from the catalogue (/agent/jsi18n/).
  const language = (document.documentElement.lang || "").toLowerCase().split("-")[0];
  const locale = (navigator.languages || []).find(
    (tag) => tag.toLowerCase().split("-")[0] === language,
  ) || document.documentElement.lang || undefined;
  const full = new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "medium" });
  const clock = new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit" });
  const day = new Intl.DateTimeFormat(locale, { day: "numeric", month: "short" });
  const { gettext, interpolate } = window;
  const say = (text, values) => interpolate(text, values, true);
  const MINUTE = 60 * 1000;
  const HOUR = 60 * MINUTE;

  const sameDay = (a, b) => a.toDateString() === b.toDateString();

  const minutes = (ms) => say(gettext("%(minutes)s min"), { minutes: Math.floor(ms / MINUTE) });

  function waited(ms) {
    if (ms < MINUTE) return gettext("just now");
    if (ms < HOUR) return minutes(ms);
    const hours = Math.floor(ms / HOUR);
    if (hours < 24) {
      const rest = Math.floor((ms % HOUR) / MINUTE);
      return rest
        ? say(gettext("%(hours)s h %(minutes)s min"), { hours, minutes: rest })
        : say(gettext("%(hours)s h"), { hours });
    }
    return say(gettext("%(days)s d"), { days: Math.floor(hours / 24) });
  }

  function ago(when, now) {
    const ms = now - when;
    if (ms < MINUTE) return gettext("just now");
    if (ms < HOUR) return minutes(ms);
    return sameDay(when, now) ? clock.format(when) : day.format(when);
  }

  function showTimes(root = document) {
    const now = new Date();
    root.querySelectorAll("time[datetime]").forEach((node) => {
      const when = new Date(node.getAttribute("datetime"));
      if (Number.isNaN(when.getTime())) return;
      const title = full.format(when);
      let text = null;
      if (node.dataset.relative === "wait") {
        text = waited(Math.max(0, now - when));
        node.title = say(gettext("waiting since %(time)s"), { time: title });
      } else if (node.dataset.relative !== undefined) {
        text = ago(when, now);
        node.title = title;
      } else if (node.dataset.local === "time") {
        text = sameDay(when, now) ? clock.format(when) : `${day.format(when)}, ${clock.format(when)}`;
        node.title = title;
      } else if (node.dataset.local === "datetime") {
        text = `${day.format(when)} ${when.getFullYear()}, ${clock.format(when)}`;
        node.title = title;
      }
      if (text !== null && node.textContent !== text) node.textContent = text;
    });
  }

  showTimes();
  document.addEventListener("switchboard:rendered", () => showTimes());
  window.setInterval(showTimes, 20 * 1000);

  // --- the phone menu ------------------------------------------------------------
  const topbar = document.getElementById("topbar");
  const menuToggle = document.getElementById("menu-toggle");
  if (topbar && menuToggle) {
    const setMenu = (open) => {
      topbar.classList.toggle("menu-open", open);
      menuToggle.setAttribute("aria-expanded", String(open));
    };
    menuToggle.addEventListener("click", () => setMenu(!topbar.classList.contains("menu-open")));
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && topbar.classList.contains("menu-open")) {
        setMenu(false);
        menuToggle.focus();
      }
    });
    document.addEventListener("click", (event) => {
      if (!topbar.contains(event.target)) setMenu(false);
    });
  }

  // --- forms that ask first (Finish) ----------------------------------------------
  document.addEventListener("submit", (event) => {
    const form = event.target;
    const question = form.dataset && form.dataset.confirm;
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // --- images that cannot load --------------------------------------------------------
  // A photo whose file is gone (or never was) shows its file card instead of
  // the browser's broken-image icon.
  function broken(img) {
    const message = img.closest(".msg");
    const card = message && message.querySelector(".file-card");
    if (!card) return;
    img.closest("a.image").hidden = true;
    card.hidden = false;
  }
  const watchImages = () => document.querySelectorAll(".msg img.thumb").forEach((img) => {
    if (img.complete && img.naturalWidth === 0 && img.getAttribute("src")) broken(img);
  });
  document.addEventListener("error", (event) => {
    if (event.target instanceof HTMLImageElement && event.target.matches(".msg img.thumb")) {
      broken(event.target);
    }
  }, true);
  watchImages();  // those that failed before this script ran; the listener sees the rest
})();
