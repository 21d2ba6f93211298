// Copy buttons of the admin: <button data-copy="ID"> copies the value (or the
// text) of the element with that id. A static file, so the admin needs no
// inline script under its Content-Security-Policy.
(() => {
  "use strict";

  function select(source) {
    if (typeof source.select === "function") {
      source.select();
    } else {
      window.getSelection().selectAllChildren(source);
    }
  }

  async function copy(button) {
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    const text = "value" in source ? source.value : source.textContent;
    select(source);
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (error) {
      // No clipboard API (plain http on another host): the text is selected.
      button.textContent = document.execCommand("copy") ? "Copied" : "Press Ctrl+C";
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-copy]");
    if (button) copy(button);
  });
})();
