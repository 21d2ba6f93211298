// The example site's own script (docs/examples/widget_host.py serves it as
// /host.js): a button for every svc_api function, called with fixed sample
// values, and every svc_on… callback declared; each call's return value and
// each callback is written to the page's log. A file, not an inline script:
// the page's Content-Security-Policy has no 'unsafe-inline'.
(() => {
  "use strict";

  const log = document.getElementById("log");

  function shown(value) {
    if (value === undefined) return "undefined";
    if (typeof value === "function") return "a function";
    try {
      return JSON.stringify(value);
    } catch (error) {
      return String(value);
    }
  }

  function write(kind, text) {
    const item = document.createElement("li");
    item.className = kind;
    item.textContent = `${new Date().toLocaleTimeString()}  ${text}`;
    log.append(item);
    log.scrollTop = log.scrollHeight;
  }

  // For the functions that answer through a callback.
  function answer(label) {
    return (...args) => write("answer", `${label} answered ${args.map(shown).join(", ")}`);
  }

  const CONTACT = {
    name: "Vera Visitor",
    email: "vera@example.com",
    phone: "+49 30 1234567",
    description: "Asked about order A-1001",
  };
  const CUSTOM_DATA = [
    {
      title: "Order",
      key: "Number",
      content: "<b>A-1001</b>", // shown as text to the agent, tags and all
      link: "https://example.com/orders/1001",
    },
    { title: "Cart", key: "Total", content: "59.90 EUR" },
  ];
  const RULES = {
    invitations: [
      {
        text: "Still looking? We are happy to help.",
        after_seconds: 5,
        url_contains: "",
        department_id: null,
      },
    ],
  };
  const OFFLINE_MESSAGE = { ...CONTACT, message: "Please call me back about order A-1001." };

  // data-call of a button → [on what, function, arguments].
  const CALLS = {
    open: ["svc_api", "open", []],
    openCall: ["svc_api", "open", [{ start: "call" }]],
    close: ["svc_api", "close", []],
    chatMode: ["svc_api", "chatMode", []],
    getContactInfo: ["svc_api", "getContactInfo", []],
    getVisitorNumber: ["svc_api", "getVisitorNumber", [answer("getVisitorNumber")]],
    setContactInfo: ["svc_api", "setContactInfo", [CONTACT]],
    setCustomData: ["svc_api", "setCustomData", [CUSTOM_DATA]],
    setRules: ["svc_api", "setRules", [RULES]],
    setUserToken: ["svc_api", "setUserToken", ["crm-user-1001"]],
    showProactiveInvitation: [
      "svc_api",
      "showProactiveInvitation",
      ["Hello! Can I help you find something?"],
    ],
    startCall: ["svc_api", "startCall", ["+49 30 1234567"]],
    isCallbackEnabled: ["svc_api", "isCallbackEnabled", [answer("isCallbackEnabled")]],
    sendOfflineMessage: [
      "svc_api",
      "sendOfflineMessage",
      [OFFLINE_MESSAGE, answer("sendOfflineMessage")],
    ],
    sendPageTitle: ["svc_api", "sendPageTitle", ["Checkout: Example shop"]],
    getUnreadMessagesCount: ["svc_api", "getUnreadMessagesCount", []],
    getUtm: ["svc_api", "getUtm", []],
    clearHistory: ["svc_api", "clearHistory", []],
    setWidgetColor: ["svc_api", "setWidgetColor", ["#0a7d3b", "#ffffff"]],
    setLocale: ["svc_api", "setLocale", ["de"]],
    // Page-level functions, as the callbacks are: they take the widget off
    // the page and put it back.
    svc_destroy: ["window", "svc_destroy", []],
    svc_init: ["window", "svc_init", []],
  };

  const CALLBACKS = [
    "svc_onLoadCallback",
    "svc_onOpen",
    "svc_onMessageSent",
    "svc_onAccept",
    "svc_onClose",
    "svc_onIntroduction",
    "svc_onResizeCallback",
    "svc_onCallStart",
    "svc_onCallEnd",
    "svc_onChangeState",
    "svc_onClientStartChat",
    "svc_onMessageReceived",
    "svc_onWidgetDestroy",
  ];

  function call(name, label) {
    const [where, method, args] = CALLS[name];
    const target = where === "window" ? window : window.svc_api;
    if (!target || typeof target[method] !== "function") {
      const full = where === "window" ? method : `svc_api.${method}`;
      write("error", `${label}: ${full} is not there (has the widget's script loaded?)`);
      return;
    }
    let value;
    try {
      value = target[method](...args);
    } catch (error) {
      write("error", `${label} threw ${error}`);
      return;
    }
    write("return", `${label} returned ${shown(value)}`);
    if (value && typeof value.then === "function") {
      value.then(
        (result) => write("return", `${label} resolved to ${shown(result)}`),
        (error) => write("error", `${label} rejected: ${error}`),
      );
    }
  }

  for (const name of CALLBACKS) {
    window[name] = (...args) => {
      while (args.length && args[args.length - 1] === undefined) args.pop();
      write("callback", `${name}(${args.map(shown).join(", ")})`);
    };
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-call]");
    if (button && Object.hasOwn(CALLS, button.dataset.call)) {
      call(button.dataset.call, button.textContent);
    } else if (event.target.closest("#clear-log")) {
      log.replaceChildren();
    }
  });

  write("note", "the page is ready; the widget calls svc_onLoadCallback once it has loaded");
})();
