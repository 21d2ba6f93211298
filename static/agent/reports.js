// Switchboard's reports page: its days and hours are the viewer's. Agents
// have no time zone of their own, so on the first load (no `tz` in the
// address) the page asks again with the browser's zone; every link and form
// of the page carries it on from there (docs/reports.md, "The reports page").
(() => {
  "use strict";
  const reports = document.getElementById("reports");
  if (!reports) return;
  const url = new URL(window.location.href);
  if (url.searchParams.get("tz")) return;
  let zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (error) {
    return;  // no Intl: the installation's zone stays
  }
  if (!zone) return;
  url.searchParams.set("tz", zone);
  window.location.replace(url.toString());
})();
