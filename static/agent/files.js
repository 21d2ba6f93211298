// Files from the reply box: a chosen file is sent at once (the form's own
// "Send file" is for pages without JavaScript). A refusal (too large, a kind
// that cannot be sent) shows above the page. Builds on app.js (Switchboard).
(() => {
  "use strict";
  const form = document.getElementById("attach-form");
  if (!form || !window.Switchboard) return;
  const input = form.querySelector('input[type="file"]');
  const label = form.querySelector(".attach-label");
  form.querySelector(".attach-send").hidden = true;
  const { csrf } = window.Switchboard;

  input.addEventListener("change", async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const before = label.textContent;
    label.textContent = window.interpolate(window.gettext("Sending %(name)s…"), { name: file.name }, true);
    form.classList.add("is-sending");
    try {
      const response = await fetch(form.action, {
        method: "POST",
        headers: { "X-CSRFToken": decodeURIComponent(csrf()), "X-Requested-With": "fetch" },
        body: new FormData(form),
        credentials: "same-origin",
      });
      const answer = await response.json().catch(() => ({}));
      if (answer.error) window.Switchboard.tell(answer.error.message);
      else if (!response.ok) {
        window.Switchboard.tell(
          window.interpolate(window.gettext("The file was not sent (%(status)s)."), { status: response.status }, true),
        );
      }
      else { window.Switchboard.tell(""); window.Switchboard.pollNow(); }
    } catch (error) {
      window.Switchboard.tell(window.gettext("The file was not sent: the connection failed."));
    } finally {
      label.textContent = before;
      form.classList.remove("is-sending");
      form.reset();
    }
  });
})();
