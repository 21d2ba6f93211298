// Transfer (docs/agent-pages.md, "Transfer"): the chat head's form is sent in
// the background; a refusal is told above the page and the form stays open
// with what was chosen, a transfer reloads the chat (now another agent's, or
// back in the queue). Without JavaScript the form is an ordinary form.
(() => {
  "use strict";
  const form = document.querySelector(".transfer-form");
  const app = window.Switchboard;
  if (!form || !app) return;
  const panel = form.closest("details");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await app.post(form.action, new FormData(form));
    if (answer.error) { app.tell(answer.error.message); return; }
    window.location.assign(window.location.pathname);
  });
  // Escape closes the panel and gives the focus back to its button.
  if (panel) {
    panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || !panel.open) return;
      event.preventDefault();
      event.stopPropagation();
      panel.open = false;
      panel.querySelector("summary").focus();
    });
  }
})();
