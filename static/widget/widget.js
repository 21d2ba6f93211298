/* Switchboard website widget (docs/widget.md).
 *
 * One <script src="{service}/widget/{widget_id}.js" async> on a site's pages.
 * No dependencies; the UI lives in an open shadow root, styled by a
 * constructed stylesheet (no <style> element, no style attribute: it works
 * under a Content-Security-Policy without 'unsafe-inline'); it talks only to
 * the service's origin. window.svc_api controls it; svc_on* functions the page
 * declares hear what happens. Nothing here may throw into the page's code,
 * and if the service cannot be reached nothing is shown.
 */
(function () {
  'use strict';
  var w = window, d = document;
  // Loaded twice? (The pre-load stub's Proxy answers every name with a function.)
  if (w.svc_api && w.svc_api.__switchboard === true) return;

  var script = d.currentScript;
  if (!script) {
    var all = d.getElementsByTagName('script');
    for (var i = all.length - 1; i >= 0; i--) {
      if (/\/widget\/[^\/]+\.js/.test(all[i].src)) { script = all[i]; break; }
    }
  }
  var found = script && /^(https?:\/\/[^\/]+.*?)\/widget\/([^\/?#]+)\.js/.exec(script.src);
  if (!found) return;
  var BASE = found[1], WID = decodeURIComponent(found[2]);
  var API = BASE + '/widget/' + encodeURIComponent(WID) + '/v1/';
  var KEY = 'svc_' + WID;
  var PHONE = /^\+?[0-9][0-9 ().\/-]{5,30}$/;
  // As the server's check, as far as the visitor meets it: no '..', no dot at a domain's ends.
  var EMAIL = /^(?!.*\.\.)[^\s@]+@[^\s@.][^\s@]*\.[^\s@.]+$/;
  var COLOR = /^#[0-9a-fA-F]{6}$/;
  var UTM = ['source', 'campaign', 'content', 'medium', 'term'];
  var noop = function () {};

  // --- the visitor's language (docs/translating.md) ----------------------------------
  // Every word the visitor reads comes from one catalogue the service serves
  // (/widget/lang/<code>.json); what the page's code reads (svc_api results)
  // stays English, as the spec writes it.
  var LANG = 'en', T = {}, speaking = 0;
  function locale() {
    // Numbers, dates and times: the browser's own locale when it is of the
    // widget's language (en-GB's 24-hour clock in English), else the widget's.
    var own = navigator.language || '';
    return own.split('-')[0].toLowerCase() === LANG.split('-')[0].toLowerCase() ? own : LANG;
  }
  function number(n) { try { return new Intl.NumberFormat(locale()).format(n); } catch (e) { return String(n); } }
  function t(key, args) {
    var s = T[key], a = args || {};
    if (s && typeof s === 'object') {
      // Plural forms by CLDR category; a key ending in ".ordinal" by the ordinal ones.
      var kind = /\.ordinal$/.test(key) ? { type: 'ordinal' } : {}, cat = 'other';
      try { cat = new Intl.PluralRules(LANG, kind).select(a.n); } catch (e) { /* other */ }
      s = s[cat] || s.other;
    }
    // In a right-to-left language a name, an address or a number keeps its own
    // direction (a Unicode isolate) and does not reorder the sentence round it.
    var rtl = T.dir === 'rtl';
    return String(s === undefined ? key : s).replace(/\{(\w+)\}/g, function (m, k) {
      if (!(k in a)) return m;
      var v = k === 'n' ? number(a.n) : String(a[k]);
      return rtl ? '\u2068' + v + '\u2069' : v;
    });
  }
  function resolve(tag) {
    // The language we have for a BCP 47 tag: itself (any case), else one of
    // its primary language (pt-PT → pt-BR, de-AT → de, en-GB → en), else null.
    var want = String(tag || '').toLowerCase().replace(/_/g, '-'), found = null;
    if (!want) return null;
    Object.keys((S.cfg && S.cfg.languages) || {}).forEach(function (c) {
      var l = c.toLowerCase();
      if (l === want) found = c;
      else if (!found && l.split('-')[0] === want.split('-')[0]) found = c;
    });
    return found;
  }
  function speak(code) {
    // The catalogue, at the URL of its version (cached for good); the last asked wins.
    var mine = ++speaking;
    var url = BASE + '/widget/lang/' + encodeURIComponent(code) + '.json?v=' + encodeURIComponent(S.cfg.languages[code]);
    return fetch(url, { mode: 'cors', credentials: 'omit' }).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (catalogue) {
      if (mine !== speaking) throw new Error('superseded');
      T = catalogue;
      LANG = code;
    });
  }
  // A refusal the visitor reads: the service's sentence is English (the wire's), so each
  // code a visitor may meet from these endpoints is said in its language; another code
  // is shown as the service wrote it, and no code at all is the network's.
  var ERRORS = { consent_required: 'error.consent_required', invalid_request: 'error.invalid_request',
    not_found: 'error.not_found', too_many_requests: 'error.too_many_requests' };
  function problem(e) { return ERRORS[e.code] ? t(ERRORS[e.code]) : e.code ? e.message : t('error.network'); }
  function clock(el) {
    // A message's time in the visitor's language and time zone (the date too on hover).
    var at = new Date(el.getAttribute('datetime'));
    try {
      el.setAttribute('title', new Intl.DateTimeFormat(locale(), { dateStyle: 'medium', timeStyle: 'short' }).format(at));
      el.setAttribute('data-time', new Intl.DateTimeFormat(locale(), { hour: '2-digit', minute: '2-digit' }).format(at));
    } catch (e) { el.setAttribute('data-time', at.toLocaleTimeString()); }
    return el;
  }

  // --- storage that never throws (private windows, blocked storage) ----------
  var memory = {};
  function store(kind) {
    try { var s = w[kind]; s.setItem(KEY + '_t', '1'); s.removeItem(KEY + '_t'); return s; } catch (e) { return null; }
  }
  var local = store('localStorage'), session = store('sessionStorage');
  function get(s, k) { try { return s ? s.getItem(KEY + k) : memory[k] || null; } catch (e) { return memory[k] || null; } }
  function put(s, k, v) {
    try { if (!s) throw 0; if (v === null) s.removeItem(KEY + k); else s.setItem(KEY + k, v); } catch (e) { memory[k] = v; }
  }

  // The landing URL of this browsing session: its UTM parameters go to the CRM.
  if (!get(session, '_landing')) put(session, '_landing', location.href);
  var landing = get(session, '_landing') || location.href;

  // --- state ------------------------------------------------------------------
  var S = {
    ready: false, cfg: null, token: get(local, '_token'), visitor: null, chat: null,
    messages: [], seen: {}, open: false, view: 'chat', unread: 0, lastEvent: 0,
    contact: { client_name: null, email: null, phone: null, description: null },
    pending: {}, rules: null, invitation: '', department: null, typingTimer: 0,
    typingSent: 0, started: false, stream: null, timers: [], color: null, poll: 0, epoch: 0,
    queueTimer: 0, queueAsk: 0, commenting: false
  };
  var pageTitle = d.title, pageUrl = ''; // as sendPageTitle last said

  // --- the page's callbacks ----------------------------------------------------
  function fire(name, arg) {
    var f = w['svc_' + name];
    if (typeof f !== 'function') return;
    try { f(arg); } catch (e) { try { console.warn('svc_' + name + ' threw', e); } catch (x) { /* none */ } }
  }

  // --- the service ---------------------------------------------------------------
  var chain = Promise.resolve();
  function call(action, body) {
    // One request at a time: the first one that makes a visitor returns its
    // token, and every later one carries it.
    var run = function () {
      var sent = {}; // a copy: the caller's object (given to a callback) never holds the token
      for (var k in body || {}) sent[k] = body[k];
      if (S.token) sent.token = S.token;
      return fetch(API + action, {
        method: 'POST', mode: 'cors', credentials: 'omit',
        headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(sent)
      }).then(function (r) {
        return r.json().then(function (j) {
          if (j && j.token) remember(j.token, j.last_event_id);
          if (!r.ok) {
            var error = new Error((j && j.error && j.error.message) || 'HTTP ' + r.status);
            error.code = j && j.error && j.error.code;
            throw error;
          }
          return j;
        });
      });
    };
    var p = chain.then(run, run);
    chain = p.then(afterVisitor, noop);
    return p;
  }
  function remember(token, lastEvent) {
    var isNew = token !== S.token;
    // A new visitor's stream replays its events from just before it was made.
    if (isNew && lastEvent) S.lastEvent = Math.max(S.lastEvent, lastEvent);
    S.token = token;
    put(local, '_token', token);
    if (isNew) listen();
  }
  function afterVisitor() {
    // What the page set before there was a visitor to set it on.
    if (!S.token) return;
    var p = S.pending;
    S.pending = {};
    if (p.contact) call('contact', p.contact).then(saved, noop);
    if (p.fields) call('custom_data', { fields: p.fields }).catch(noop);
    if (p.userToken) call('user_token', { user_token: p.userToken }).catch(noop);
  }
  function page() { return { url: pageUrl || location.href, title: pageTitle || d.title }; }
  function saved(j) {
    // The contact verb's answer: a new address is trusted with transcripts
    // once the visitor opens the link the service mailed to it (docs/widget.md).
    S.contact = j.contact;
    if (!j.email_link_sent || !j.contact.email) return;
    note(t('email_link', { email: j.contact.email }));
    if (ui.list) ui.list.lastChild.setAttribute('data-testid', 'svc-email-link');
  }

  // --- the live stream -------------------------------------------------------------
  function listen() {
    if (!S.token || S.stream || !S.ready || S.refused) return;
    if (!w.EventSource) { S.poll = setInterval(refresh, 5000); return; }
    // A new visitor knows no event id yet: it asks for all of its events (after
    // id 1), or what came between its first request and this stream (an agent's
    // quick Reply, a bot's answer) would be lost. The service may send a reset first.
    var url = BASE + '/visitor/' + encodeURIComponent(S.token) + '/stream?last_event_id=' + (S.lastEvent || 1);
    var es = S.stream = new EventSource(url);
    var on = function (kind, f) {
      es.addEventListener(kind, function (e) {
        var data;
        try { data = JSON.parse(e.data); } catch (x) { return; }
        if (e.lastEventId) S.lastEvent = +e.lastEventId;
        f(data);
      });
    };
    on('message', function (data) { if (data.message) add(data.message, true); });
    on('typing', function (data) { typing(data.who === 'agent' && data.typing); });
    on('chat.queued', function () {
      // A bot handed the chat to the agents: it waits now (its place shows).
      if (!S.chat || S.chat.state !== 'bot') return;
      S.chat.state = 'queued';
      render();
    });
    on('chat.accepted', function (data) {
      S.chat = S.chat || {};
      S.chat.state = 'active';
      S.chat.agent_name = data.agent_name || '';
      note(data.agent_name ? t('joined', { name: data.agent_name }) : t('joined.anonymous'));
      fire('onAccept');
      render();
    });
    on('chat.finished', function () {
      if (S.chat) S.chat.state = 'finished';
      S.fresh = false;
      typing(false);
      render();
    });
    on('call', function (data) {
      if (data.status !== 'end' && data.status !== 'error') return;
      var ended = data.status === 'end' ? { result: 'ok' } : { result: 'fail', reason: data.reason || 'The call failed' };
      // The call is over: startCall may be allowed again (ask before telling the page).
      call('callback', {}).then(function (j) {
        if (S.cfg) S.cfg.callback = { enabled: !j.reason, reason: j.reason };
      }, noop).then(function () { fire('onCallEnd', ended); });
    });
    on('reset', refresh);
    es.onerror = function () {
      // Closed for good (a refusal; the browser reconnects by itself after a
      // dropped connection): ask why once, and try again unless refused.
      if (es.readyState === 2) { S.stream = null; why(url); }
    };
  }
  function why(url) {
    // EventSource hides the status of a refusal. 401/403 (a blacklisted
    // visitor) will not change by asking again: no more requests, and the
    // visitor is told. A stream that opens now (the refusal was a moment's:
    // a slot not yet freed) is opened again in a second; anything else (429,
    // the network) is tried again in five.
    var stop = w.AbortController ? new AbortController() : null, token = S.token;
    var again = function (ms) { setTimeout(listen, ms); };
    fetch(url, { mode: 'cors', credentials: 'omit', signal: stop && stop.signal }).then(function (r) {
      if (stop) stop.abort(); // a stream that opens now: the EventSource opens it again
      if (token !== S.token) return; // clearHistory meanwhile: another visitor
      if (r.status === 401 || r.status === 403) refuse(); else again(r.ok ? 1000 : 5000);
    }, function () { again(5000); });
  }
  function refuse() {
    S.refused = true;
    clearInterval(S.poll);
    if (S.stream) S.stream.close();
    S.stream = null;
    typing(false);
    render();
  }
  function refresh() {
    var epoch = S.epoch;
    return call('session', { page: page(), landing_url: landing }).then(function (j) {
      // Else clearHistory came meanwhile: not this visitor's. A message first
      // heard here (a reset's reload that raced the stream) is as new as one
      // the stream brings: it counts as unread.
      if (epoch === S.epoch) load(j, true);
    }, noop);
  }

  // --- building the UI ---------------------------------------------------------------
  function h(tag, attrs, kids) {
    var el = d.createElement(tag);
    for (var k in attrs || {}) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
    [].concat(kids || []).forEach(function (kid) {
      if (kid !== null && kid !== undefined && kid !== false) el.appendChild(typeof kid === 'string' ? d.createTextNode(kid) : kid);
    });
    return el;
  }
  var host, root, ui = {};
  // Icons are drawn, not emoji: a machine without an emoji font shows empty
  // boxes for those (docs/widget.md). Outlines after Feather icons (MIT).
  var ICONS = {
    chat: 'M21 11.5a8.4 8.4 0 0 1-.9 3.8 8.5 8.5 0 0 1-7.6 4.7 8.4 8.4 0 0 1-3.8-.9L3 21l1.9-5.7a8.4 8.4 0 0 1-.9-3.8 8.5 8.5 0 0 1 4.7-7.6 8.4 8.4 0 0 1 3.8-.9h.5a8.5 8.5 0 0 1 8 8z',
    up: 'M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.3a2 2 0 0 0 2-1.7l1.4-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3',
    down: 'M10 15v4a3 3 0 0 0 3 3l4-9V2H5.7a2 2 0 0 0-2 1.7l-1.4 9a2 2 0 0 0 2 2.3zm7-13h2.7A2.3 2.3 0 0 1 22 4v7a2.3 2.3 0 0 1-2.3 2H17',
    close: 'M18 6L6 18M6 6l12 12'
  };
  function icon(name) {
    var NS = 'http://www.w3.org/2000/svg', svg = d.createElementNS(NS, 'svg'), path = d.createElementNS(NS, 'path');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('class', 'icon');
    path.setAttribute('d', ICONS[name]);
    svg.appendChild(path);
    return svg;
  }

  function safeHtml(html) {
    // The service sends sanitized Markdown HTML; keep only a, strong, em and
    // br again here, so that nothing else can ever reach the page.
    var out = d.createDocumentFragment(), doc;
    try {
      doc = new DOMParser().parseFromString('<body>' + html, 'text/html');
    } catch (e) { // a page that requires Trusted Types: the text, unformatted
      doc = { body: { childNodes: [d.createTextNode(html.replace(/<[^>]*>/g, ''))] } };
    }
    (function copy(from, to) {
      [].forEach.call(from.childNodes, function (n) {
        if (n.nodeType === 3) { to.appendChild(d.createTextNode(n.textContent)); return; }
        if (n.nodeType !== 1) return;
        var tag = n.tagName.toLowerCase(), el;
        if (tag === 'br') { to.appendChild(h('br')); return; }
        if (tag === 'strong' || tag === 'em') el = h(tag);
        else if (tag === 'a' && /^https?:\/\//i.test(n.getAttribute('href') || '')) {
          el = h('a', { href: n.getAttribute('href'), target: '_blank', rel: 'noopener noreferrer nofollow' });
        } else el = d.createDocumentFragment();
        copy(n, el);
        to.appendChild(el);
      });
    })(doc.body, out);
    return out;
  }

  function bubble(m) {
    var mine = m.author === 'client';
    var body = h('div', { class: 'text' });
    if (m.html) body.appendChild(safeHtml(m.html));
    else if (m.file && /^https?:\/\//i.test(m.file)) {
      body.appendChild(h('a', { href: m.file, target: '_blank', rel: 'noopener noreferrer', text: m.file_name || m.text || m.file }));
    } else body.textContent = m.text || m.title || '';
    var kids = [];
    if (!mine && m.sender_name) kids.push(h('div', { class: 'who', text: m.author === 'bot' ? t('bot', { name: m.sender_name }) : m.sender_name }));
    if (m.title && m.buttons && m.text) kids.push(h('div', { class: 'title', text: m.title }));
    kids.push(body);
    var at = new Date(m.created || Date.now());
    if (!isNaN(at)) {
      // In the visitor's time zone; drawn by CSS (content: attr), so the message's
      // text stays the message's for whoever reads it (svc_on* callbacks, copying).
      kids.push(clock(h('time', { class: 'at', datetime: at.toISOString() })));
    }
    if (m.buttons && m.buttons.length) {
      kids.push(h('div', { class: 'choices' }, m.buttons.map(function (text) {
        return h('button', { type: 'button', class: 'choice', 'data-testid': 'svc-choice', text: text, onclick: function () { send(text); } });
      })));
    }
    return h('div', { class: 'msg ' + m.author, 'data-testid': 'svc-msg', 'data-author': m.author }, kids);
  }

  function add(m, live) {
    if (S.seen[m.id]) return;
    S.seen[m.id] = 1;
    S.messages.push(m);
    if (ui.list) ui.list.appendChild(bubble(m));
    if (m.author !== 'client') {
      typing(false);
      if (live) {
        if (!S.open) S.unread++;
        fire('onMessageReceived', { text: m.text, author: m.author, sender_name: m.sender_name });
      }
    }
    if (S.chat && S.chat.state === 'finished' && live && m.author === 'client') S.chat.state = 'queued';
    scroll();
    badge();
  }
  function note(text) {
    if (ui.list) ui.list.appendChild(h('div', { class: 'note', text: text }));
    scroll();
  }
  function scroll() { if (ui.list) ui.list.scrollTop = ui.list.scrollHeight; }
  function typing(on) {
    // The agent's "typing" ends by itself if no word of it comes (as on the server).
    clearTimeout(S.agentTyping);
    if (on) S.agentTyping = setTimeout(function () { typing(false); }, 10000);
    if (ui.typing) ui.typing.hidden = !on;
  }
  function badge() {
    if (!ui.badge) return;
    ui.badge.textContent = S.unread ? String(S.unread) : '';
    ui.badge.hidden = !S.unread;
  }

  function field(label, name, type, required) {
    var id = 'svc-' + name + '-' + Math.random().toString(36).slice(2, 7);
    var input = type === 'textarea'
      ? h('textarea', { id: id, name: name, rows: 3, required: required, maxlength: 4000 })
      : h('input', { id: id, name: name, type: type, required: required, autocomplete: name === 'phone' ? 'tel' : name });
    return h('div', { class: 'field' }, [h('label', { for: id, text: label }), input]);
  }
  function form(testid, intro, fields, submit, done) {
    var status = h('p', { class: 'status', role: 'status' });
    var f = h('form', { class: 'form', 'data-testid': testid, novalidate: true }, [h('p', { text: intro })].concat(fields, [
      status, h('button', { type: 'submit', class: 'primary', text: submit })
    ]));
    f.addEventListener('submit', function (e) {
      e.preventDefault();
      var values = {};
      [].forEach.call(f.elements, function (el) { if (el.name) values[el.name] = el.value.trim(); });
      status.textContent = '';
      done(values, function (error) { status.textContent = error; status.className = 'status error'; }, f);
    });
    return f;
  }

  // The contact form and the pre-chat form: the visitor's answers, as setContactInfo gives them.
  function introduce(sent, fail, done) {
    if (sent.email && !EMAIL.test(sent.email)) return fail(t('error.email', { email: sent.email }));
    if (sent.phone && !PHONE.test(sent.phone)) return fail(t('error.phone_digits'));
    call('contact', sent).then(function (j) {
      saved(j);
      fire('onIntroduction', sent);
      S.view = 'chat';
      if (done) done();
      render(!!done);
    }, function (e) { fail(problem(e)); });
  }
  // The pre-chat form (docs/widget.md): what the channel asks before a chat's first message.
  // Each field: its input type, its label's key, the key of its refusal when missing.
  var PRECHAT = {
    name: ['text', 'field.name', 'prechat.missing.name'],
    email: ['email', 'field.email', 'prechat.missing.email'],
    phone: ['tel', 'field.phone', 'prechat.missing.phone']
  };
  function prechatAsks() {
    var ask = S.cfg.prechat || {};
    return ['name', 'email', 'phone'].filter(function (k) { return ask[k] === 'optional' || ask[k] === 'required'; });
  }
  function prechatDue() {
    var ask = S.cfg.prechat || {}, c = S.contact || {}, known = { name: c.client_name, email: c.email, phone: c.phone };
    var asks = prechatAsks();
    if (!asks.length || (S.chat && S.chat.state !== 'finished')) return false;
    return !get(local, '_prechat') || asks.some(function (k) { return ask[k] === 'required' && !known[k]; });
  }
  function prechatForm() {
    var ask = S.cfg.prechat, asks = prechatAsks();
    var f = form('svc-prechat', t('prechat.intro'), asks.map(function (k) {
      var label = t(PRECHAT[k][1]);
      return field(ask[k] === 'required' ? label : t('field.optional', { field: label }), k, PRECHAT[k][0], ask[k] === 'required');
    }), t('prechat.submit'), function (v, fail) {
      var sent = {};
      for (var i = 0; i < asks.length; i++) {
        var k = asks[i];
        if (ask[k] === 'required' && !v[k]) return fail(t(PRECHAT[k][2]));
        if (v[k]) sent[k] = v[k]; // an optional field left empty keeps what the page set
      }
      introduce(sent, fail, function () { put(local, '_prechat', '1'); ui.prechat = null; });
    });
    // A proactive invitation is read above the form (render() fills it).
    ui.prechatInvitation = h('p', { class: 'msg agent invitation', 'data-testid': 'svc-prechat-invitation', hidden: true });
    f.insertBefore(ui.prechatInvitation, f.firstChild);
    return f;
  }

  // Consent (docs/widget.md): a channel's text the visitor accepts before a
  // chat's first message. Nothing is sent without it: no Accept, no chat.
  function consentDue() {
    var c = S.cfg.consent;
    if (!c || (S.chat && S.chat.state !== 'finished')) return false;
    return get(local, '_consent') !== String(c.version);
  }
  function consentView() {
    var c = S.cfg.consent;
    return h('div', { class: 'form consent', 'data-testid': 'svc-consent' }, [
      h('p', { class: 'consent-text', 'data-testid': 'svc-consent-text', text: c.text }),
      h('p', { text: t('consent.ask') }),
      h('button', { type: 'button', class: 'primary', 'data-testid': 'svc-consent-accept', text: t('consent.accept'), onclick: function () {
        put(local, '_consent', String(c.version));
        ui.consent = null;
        render(true);
      } })
    ]);
  }

  function build() {
    // The language's direction and name on the host: the shadow tree inherits both.
    host = h('div', { id: 'svc-widget', 'data-widget-id': WID, lang: LANG, dir: t('dir') });
    root = host.attachShadow({ mode: 'open' });
    var css = CSS;
    try {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(css);
      root.adoptedStyleSheets = [sheet];
    } catch (e) {
      root.appendChild(h('style', { text: css }));
    }
    ui.badge = h('span', { class: 'badge', 'data-testid': 'svc-badge', 'aria-label': t('unread'), hidden: true });
    ui.label = h('button', {
      type: 'button', class: 'label', 'data-testid': 'svc-label', 'aria-haspopup': 'dialog', 'aria-expanded': 'false',
      onclick: function () { api.open(); }
    }, [icon('chat'), h('span', { class: 'label-text', 'data-testid': 'svc-label-text', text: title() }), ui.badge]);
    ui.title = h('h2', { class: 'title', id: 'svc-title', text: title() });
    ui.who = h('div', { class: 'sub', 'data-testid': 'svc-who' });
    ui.list = h('div', { class: 'list', role: 'log', 'aria-live': 'polite', 'aria-label': t('messages'), 'data-testid': 'svc-messages', tabindex: '0' });
    ui.typing = h('div', { class: 'typing', 'data-testid': 'svc-typing', hidden: true, text: t('typing') });
    ui.queue = h('div', { class: 'queue', role: 'status', 'data-testid': 'svc-queue', hidden: true });
    ui.input = h('textarea', {
      class: 'input', 'data-testid': 'svc-input', rows: 2, maxlength: 1000, 'aria-label': t('input'),
      placeholder: t('input.placeholder'), onkeydown: function (e) {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
      }, oninput: onInput
    });
    ui.department = h('select', { class: 'department', 'data-testid': 'svc-department', 'aria-label': t('department'), hidden: true,
      onchange: function () { S.department = +ui.department.value || null; } });
    ui.rate = h('div', { 'data-testid': 'svc-rate', role: 'group', 'aria-label': t('rate.group') }, [
      h('p', { text: t('rate.ask') }),
      h('button', { type: 'button', 'data-rating': 'positive', onclick: function () { rate('positive'); } }, [icon('up'), t('rate.good')]),
      h('button', { type: 'button', 'data-rating': 'negative', onclick: function () { rate('negative'); } }, [icon('down'), t('rate.bad')])
    ]);
    // After the rating, an optional word beside it (docs/widget.md, "The end of a chat").
    ui.commentText = h('textarea', { class: 'input', 'data-testid': 'svc-comment-text', rows: 2, maxlength: 1000,
      'aria-label': t('comment.label'), placeholder: t('comment.placeholder') });
    ui.comment = h('form', { class: 'comment', 'data-testid': 'svc-comment', hidden: true, onsubmit: function (e) {
      e.preventDefault();
      comment();
    } }, [ui.commentText, h('button', { type: 'submit', 'data-testid': 'svc-comment-send', text: t('send') })]);
    // A finished chat: the message box gives way to its end (docs/widget.md, "The end of a chat").
    ui.end = h('div', { class: 'end', 'data-testid': 'svc-end', hidden: true }, [
      h('p', { class: 'ended', text: t('ended') }), ui.rate, ui.comment,
      h('button', { type: 'button', class: 'primary', 'data-testid': 'svc-new-chat', text: t('new_chat'), onclick: function () {
        S.fresh = true;
        render(true);
      } })
    ]);
    ui.compose = h('div', { class: 'compose' }, [
      ui.department, ui.input,
      h('button', { type: 'button', class: 'send primary', 'data-testid': 'svc-send', text: t('send'), onclick: submit })
    ]);
    ui.chatView = h('div', { class: 'view chat' }, [ui.list, ui.queue, ui.typing, ui.end, ui.compose]);
    var contactFields = function () { return [field(t('field.name'), 'name', 'text'), field(t('field.email'), 'email', 'email'), field(t('field.phone'), 'phone', 'tel')]; };
    ui.offline = form('svc-offline', t('offline.intro'), contactFields().concat(field(t('field.message'), 'message', 'textarea', true)), t('send'), function (v, fail, f) {
      var wrong = offlineProblem(offlineValues(v));
      if (wrong) return fail(t(wrong, { email: v.email, limit: number(MAX_OFFLINE) }));
      api.sendOfflineMessage(v, function (error, e) {
        if (error) fail(t('not_sent', { reason: problem(e) })); else { f.replaceWith(h('p', { class: 'done', role: 'status', text: t('offline.thanks') })); }
      });
    });
    ui.closed = h('p', { class: 'form', text: t('closed') });
    ui.unavailable = h('p', { class: 'form', 'data-testid': 'svc-unavailable', text: t('unavailable') });
    ui.call = form('svc-call', t('call.intro'), [field(t('field.phone'), 'phone', 'tel', true)], t('call.submit'), function (v, fail) {
      var r = api.startCall(v.phone, function (error, e) {
        if (error) return fail(problem(e));
        S.view = 'chat';
        note(t('call.noted', { phone: v.phone }));
        render();
      });
      if (r.result !== 'ok') fail(t(REASONS[r.reason] || 'error.phone'));
    });
    ui.contact = form('svc-contact', t('contact.intro'), contactFields(), t('contact.submit'), function (v, fail) {
      introduce({ name: v.name, email: v.email, phone: v.phone }, fail);
    });
    ui.views = h('div', { class: 'views' });
    ui.window = h('div', { class: 'window', role: 'dialog', 'aria-labelledby': 'svc-title', 'data-testid': 'svc-window', hidden: true,
      onkeydown: function (e) { if (e.key === 'Escape') { e.stopPropagation(); api.close(); } } }, [
      h('div', { class: 'head' }, [
        h('div', {}, [ui.title, ui.who]),
        ui.introduce = h('button', { type: 'button', class: 'link', 'data-testid': 'svc-introduce', text: t('introduce'),
          onclick: function () { S.view = S.view === 'contact' ? 'chat' : 'contact'; render(true); } }),
        h('button', { type: 'button', class: 'close', 'data-testid': 'svc-close', 'aria-label': t('close'), onclick: function () { api.close(); } }, [icon('close')])
      ]),
      ui.views
    ]);
    S.messages.forEach(function (m) { ui.list.appendChild(bubble(m)); });
    root.appendChild(ui.label);
    root.appendChild(ui.window);
    paint();
    (d.body || d.documentElement).appendChild(host);
    fit();
  }

  function paint() {
    var c = S.color || [S.cfg.color, S.cfg.color2];
    host.style.setProperty('--svc-color', COLOR.test(c[0]) ? c[0] : '#1f6feb');
    host.style.setProperty('--svc-text', COLOR.test(c[1]) ? c[1] : '#ffffff');
  }

  function render(focus) {
    if (!ui.window) return;
    var chat = S.chat, open = chat && chat.state !== 'finished';
    var ended = chat && chat.state === 'finished' && !S.fresh;
    var offline = chatMode() === 'offline' && !open && (!S.messages.length || S.fresh);
    var view = S.refused ? 'unavailable' : S.view;
    if (view === 'chat' && offline) view = S.cfg.offline_form ? 'offline' : 'closed';
    else if (view === 'chat' && !ended && consentDue()) {
      view = 'consent';
      ui.consent = ui.consent || consentView(); // the text as the channel has it now
    } else if (view === 'chat' && !ended && prechatDue()) {
      view = 'prechat';
      ui.prechat = ui.prechat || prechatForm(); // made when due: the channel's settings as they are now
      ui.prechatInvitation.textContent = S.invitation;
      ui.prechatInvitation.hidden = !S.invitation;
    }
    var el = { chat: ui.chatView, offline: ui.offline, closed: ui.closed, call: ui.call, contact: ui.contact, prechat: ui.prechat, consent: ui.consent, unavailable: ui.unavailable }[view];
    // The offline and pre-chat forms ask for the name themselves; nothing is asked before consent.
    ui.introduce.hidden = view === 'offline' || view === 'prechat' || view === 'consent' || view === 'unavailable';
    if (ui.views.firstChild !== el) {
      while (ui.views.firstChild) ui.views.removeChild(ui.views.firstChild);
      ui.views.appendChild(el);
    }
    var endShown = !ui.end.hidden;
    ui.end.hidden = !ended;
    ui.compose.hidden = !!ended;
    ui.rate.hidden = !(ended && !chat.rating);
    ui.comment.hidden = !(ended && chat.rating && S.commenting);
    ui.who.textContent = S.refused ? t('head.unavailable') : ended ? t('ended.head') : chat && chat.state === 'active' && chat.agent_name ? chat.agent_name : chatMode() === 'online' ? t('online') : t('offline');
    if (ended && !endShown) scroll(); // the end takes room from the list: its last message stays in sight
    followQueue();
    var deps = S.cfg.departments || [];
    ui.department.hidden = !(deps.length && !open);
    if (!ui.department.options.length && deps.length) {
      ui.department.appendChild(h('option', { value: '', text: t('department.choose') }));
      deps.forEach(function (x) { ui.department.appendChild(h('option', { value: String(x.id), text: x.name })); });
    }
    if (focus && S.open) {
      var target = view === 'chat' ? ui.input : el.querySelector('input, textarea, button');
      if (target) target.focus();
    }
  }

  // --- the visitor's place in the queue (docs/widget.md) ----------------------------------
  function followQueue() {
    // Asked while the chat waits, again when the service says (sooner near
    // the front); gone once an agent takes it (the stream's chat.accepted).
    var chat = S.chat;
    if (!chat || chat.state !== 'queued' || !S.token || S.refused) return stopQueue();
    if (S.queueTimer) return; // asked, or to be asked
    var ask = ++S.queueAsk, id = chat.id;
    S.queueTimer = -1;
    call('queue', {}).then(function (j) { return j.queue; }, function () { return null; }).then(function (q) {
      if (ask !== S.queueAsk) return; // stopped meanwhile
      var now = q && S.chat && S.chat.id === id && S.chat.state === 'queued';
      showQueue(now ? q : null);
      S.queueTimer = setTimeout(function () { S.queueTimer = 0; followQueue(); }, (now ? q.refresh_seconds : 30) * 1000);
    });
  }
  function stopQueue() {
    S.queueAsk++;
    clearTimeout(S.queueTimer);
    S.queueTimer = 0;
    showQueue(null);
  }
  function showQueue(q) {
    S.queue = q;
    if (!ui.queue) return;
    ui.queue.textContent = q ? queueLine(q) : '';
    ui.queue.hidden = !q;
  }
  function queueLine(q) {
    // The service's own line is English ("You are 2nd in line, about 3
    // minutes"): the same sentence is made here from its numbers, in the
    // visitor's language, with the language's plural forms.
    var place = q.position === 1 ? t('queue.next') : t('queue.place.ordinal', { n: q.position });
    var wait = q.wait_seconds, minutes = Math.floor((wait + 30) / 60);
    if (typeof wait !== 'number') return place;
    if (wait < 60) return t('queue.soon', { place: place });
    return minutes > 60 ? t('queue.long', { place: place }) : t('queue.minutes', { place: place, n: minutes });
  }

  // --- what the visitor does ------------------------------------------------------------
  function submit() {
    var text = ui.input.value.trim();
    if (!text) return;
    ui.input.value = '';
    send(text);
  }
  function send(text) {
    var first = !S.chat || S.chat.state === 'finished';
    var body = { text: text, page: page(), landing_url: landing };
    if (first && S.department) body.department_id = S.department;
    if (first && S.invitation) body.invitation = S.invitation;
    var accepted = get(local, '_consent');
    if (first && S.cfg.consent && accepted !== null) body.consent_version = +accepted;
    if (first) body.language = LANG; // the chat remembers the language it started in
    S.typingSent = 0;
    return call('message', body).then(function (j) {
      add({ id: j.message_id, author: 'client', type: 'text', text: text.slice(0, 1000), sender_name: '', created: j.created }, false);
      // A chat that waits for an agent says so (a bot's chat has the bot's answer).
      if (first && j.state === 'queued') {
        note(S.cfg.own_waiting_text || t('waiting'));
        ui.list.lastChild.setAttribute('data-testid', 'svc-waiting');
      }
      if (first) {
        S.fresh = false;
        // The stream may have told of this chat already (a bot's answer, a Reply).
        if (!S.chat || S.chat.id !== j.chat_id) S.chat = { id: j.chat_id, state: j.state || 'queued', rating: '', agent_name: '' };
        S.invitation = '';
        fire('onMessageSent', text);
        fire('onClientStartChat', { chat_id: j.chat_id });
      }
      render();
    }, function (e) {
      note(t('not_sent', { reason: problem(e) }));
      // The consent text changed since this page loaded: show the new one.
      if (e.code === 'consent_required') { put(local, '_consent', null); ui.consent = null; refresh().then(function () { render(true); }); }
    });
  }
  function onInput() {
    var now = Date.now();
    if (S.token && S.chat && S.chat.state !== 'finished' && now - S.typingSent > 3000) {
      S.typingSent = now;
      call('typing', { typing: true }).catch(noop);
    }
    clearTimeout(S.typingTimer);
    S.typingTimer = setTimeout(function () {
      if (S.typingSent && S.token) { S.typingSent = 0; call('typing', { typing: false }).catch(noop); }
    }, 4000);
  }
  function rate(rating) {
    call('rate', { rating: rating }).then(function () {
      S.chat.rating = rating;
      S.commenting = true;
      note(t('rated'));
      render();
      ui.commentText.focus();
    }, function (e) { note(problem(e)); });
  }
  function comment() {
    var text = ui.commentText.value.trim();
    if (!text || !S.chat || !S.chat.rating) return;
    call('rate', { rating: S.chat.rating, comment: text }).then(function () {
      S.commenting = false;
      ui.commentText.value = '';
      note(t('commented'));
      render();
    }, function (e) { note(problem(e)); });
  }

  // --- invitations (docs/widget.md, "Rules") -------------------------------------------
  function arm() {
    S.timers.forEach(clearTimeout);
    S.timers = [];
    var rules = S.rules || (S.cfg && S.cfg.rules) || {};
    (rules.invitations || []).forEach(function (rule) {
      if (!rule || typeof rule.text !== 'string' || !rule.text) return;
      if (rule.url_contains && location.href.indexOf(rule.url_contains) < 0) return;
      var key = '_inv_' + rule.text.length + '_' + rule.text.slice(0, 20);
      S.timers.push(setTimeout(function () {
        if (S.open || get(session, key) || (S.chat && S.chat.state !== 'finished')) return;
        put(session, key, '1');
        api.showProactiveInvitation(rule.text, rule.department_id);
      }, Math.max(0, +rule.after_seconds || 0) * 1000));
    });
  }

  // --- start and stop -----------------------------------------------------------------
  function load(j, live) {
    // live: the visitor's history at boot is not news; after it, an unseen
    // message is (add() counts each message once, however it comes).
    S.cfg = j.config;
    var v = j.visitor;
    if (v) {
      S.visitor = v;
      S.contact = v.contact;
      // An answer read before an event the stream has already brought (an
      // agent's Reply while a reload's session was on its way) must not take
      // the chat back to what it was: the stream's state is the newer.
      var stale = (v.last_event_id || 0) < S.lastEvent;
      if (!stale && (!S.chat || !v.chat || S.chat.id !== v.chat.id || v.chat.state !== S.chat.state)) S.chat = v.chat;
      S.lastEvent = Math.max(S.lastEvent, v.last_event_id || 0);
      (v.messages || []).forEach(function (m) { add(m, !!live && m.author !== 'client'); });
    }
  }
  function boot() {
    if (S.ready || S.booting) return;
    S.booting = true;
    call('session', { page: page(), landing_url: landing }).then(function (j) {
      load(j);
      // setLocale's, else the page's <html lang>, else the channel's.
      return speak(resolve(S.wanted) || resolve(d.documentElement.lang) || resolve(S.cfg.language) || 'en');
    }).then(function () {
      S.booting = false;
      build();
      S.ready = true;
      render();
      listen();
      arm();
      var q = queue;
      queue = [];
      q.forEach(function (item) { try { api[item[0]].apply(null, item[1] || []); } catch (e) { /* a bad queued call */ } });
      fire('onLoadCallback');
      if (!S.open) fire('onChangeState', 'label'); // a queued open() has said 'chat'
    }, function () {
      S.booting = false; // unreachable: the page stays as it is
    });
  }
  function rebuild() {
    // Another language, live: the UI drawn again in it, what the list has
    // said kept (its times in the new language), the window as it was.
    // A widget destroyed (or booting again) while the catalogue came has
    // nothing to draw again: a boot speaks the language asked for itself.
    if (!S.ready) return;
    var list = ui.list, open = S.open;
    if (host && host.parentNode) host.parentNode.removeChild(host);
    ui = {};
    build();
    ui.list.textContent = ''; // build() drew the messages: the old list has them and its notes
    while (list.firstChild) ui.list.appendChild(list.firstChild);
    [].forEach.call(ui.list.querySelectorAll('time'), clock);
    ui.window.hidden = !open;
    ui.label.hidden = open;
    ui.label.setAttribute('aria-expanded', String(open));
    badge();
    showQueue(S.queue);
    render();
    scroll();
  }
  function destroy() {
    stopQueue();
    if (S.stream) S.stream.close();
    clearInterval(S.poll);
    S.timers.forEach(clearTimeout);
    if (host && host.parentNode) host.parentNode.removeChild(host);
    unlockScroll();
    var wasReady = S.ready;
    S.stream = null; S.ready = false; S.open = false; S.refused = false; ui = {}; host = root = null;
    S.messages = []; S.seen = {};
    if (wasReady) fire('onWidgetDestroy');
  }

  // --- a phone: the window fills the screen and the page behind stays put ----------------
  var lockedOverflow = null;
  var SMALL = '(max-width: 480px), (max-device-width: 480px)'; // the latter: a page without a viewport tag
  function phone() { return w.matchMedia && w.matchMedia(SMALL).matches; }
  function lockScroll() {
    if (!phone() || lockedOverflow !== null) return;
    lockedOverflow = d.documentElement.style.overflow;
    d.documentElement.style.overflow = 'hidden';
  }
  function unlockScroll() {
    if (lockedOverflow === null) return;
    d.documentElement.style.overflow = lockedOverflow;
    lockedOverflow = null;
  }
  // On a phone the launcher and the full-screen window sit on what the visitor
  // sees (the visual viewport), not on the layout viewport: a page wider than
  // the screen makes the latter larger than the screen, and the on-screen
  // keyboard makes the former smaller (docs/widget.md, "On a phone").
  var fitting = 0;
  function fit() {
    var v = w.visualViewport;
    fitting = 0;
    if (!host) return;
    if (!v || !phone()) { host.classList.remove('fit'); return; }
    var scale = v.scale || 1, vars = {
      x: v.offsetLeft + 'px', y: v.offsetTop + 'px', w: v.width * scale + 'px', h: v.height * scale + 'px', z: String(1 / scale)
    };
    for (var k in vars) host.style.setProperty('--svc-v' + k, vars[k]);
    host.classList.add('fit');
  }
  function refit() { if (!fitting) fitting = (w.requestAnimationFrame || setTimeout)(fit); }
  function size() {
    var el = S.open ? ui.window : ui.label;
    var r = el && el.getBoundingClientRect();
    fire('onResizeCallback', r ? { width: Math.round(r.width), height: Math.round(r.height) } : {});
  }

  // --- window.svc_api ------------------------------------------------------------------
  var NOT_READY = { result: 'fail', reason: 'The widget has not loaded' };
  function chatMode() {
    if (S.chat && S.chat.state === 'active') return 'online';
    return S.cfg && S.cfg.mode === 'online' ? 'online' : 'offline';
  }
  function fail(reason) { return { result: 'fail', reason: reason }; }
  function later(name, args) { queue.push([name, [].slice.call(args)]); return { result: 'ok' }; }
  function showWindow(view, quiet) {
    S.view = view;
    var was = S.open;
    S.open = true;
    S.unread = 0;
    badge();
    ui.window.hidden = false;
    ui.label.hidden = true;
    ui.label.setAttribute('aria-expanded', 'true');
    lockScroll();
    fit();
    render(!quiet); // an invitation nobody asked for takes no focus from the page
    if (!was) scroll(); // a closed window's list had no height to scroll in
    if (!was) fire('onOpen');
    fire('onChangeState', view === 'call' ? 'call' : 'chat');
    size();
  }
  function phoneError(phone) {
    if (typeof phone !== 'string' || !PHONE.test(phone.trim())) return 'Wrong phone number format';
    var digits = phone.replace(/\D/g, '').length;
    return digits < 7 || digits > 15 ? 'Wrong phone number format' : '';
  }
  function title() { return S.cfg.own_title || t('title'); }
  // What svc_api answers the page (the spec's English) → what the visitor reads.
  var REASONS = { 'Callback disabled': 'callback.disabled', 'Callback unavaiable': 'callback.closed', 'Wrong phone number format': 'error.phone' };
  var MAX_OFFLINE = 4000;
  var OFFLINE = {
    'offline.message': 'Write a message.',
    'offline.contact': 'Give an e-mail address or a phone number so that we can answer.',
    'error.email': '{email} is not a valid e-mail address',
    'error.phone': 'Wrong phone number format',
    'offline.long': 'The message is longer than {limit} characters.',
    'offline.off': 'This widget takes no offline messages.'
  };
  function offlineValues(message) {
    var m = message && typeof message === 'object' ? message : {}, v = {};
    ['name', 'email', 'phone', 'description', 'message'].forEach(function (k) { v[k] = m[k] === undefined || m[k] === null ? '' : String(m[k]).trim(); });
    return v;
  }
  function offlineProblem(v) {
    // A key of OFFLINE (and of the catalogue), '' when the message may go.
    return !v.message ? 'offline.message'
      : !v.email && !v.phone ? 'offline.contact'
        : v.email && !EMAIL.test(v.email) ? 'error.email'
          : v.phone && phoneError(v.phone) ? 'error.phone'
            : v.message.length > MAX_OFFLINE ? 'offline.long'
              : S.cfg && !S.cfg.offline_form ? 'offline.off' : '';
  }
  function fields(list) {
    return list.map(function (f) {
      var o = {};
      ['content', 'title', 'link', 'key'].forEach(function (k) { if (f && f[k] !== undefined && f[k] !== null) o[k] = String(f[k]); });
      return o;
    });
  }

  var queue = (w.svc_api && w.svc_api.q && w.svc_api.q.slice ? w.svc_api.q.slice() : []);
  var api = {
    __switchboard: true,
    open: function (options) {
      if (!S.ready) return later('open', arguments);
      if (options && options.start === 'call') {
        var reason = S.cfg.callback.enabled ? '' : (S.cfg.callback.reason || 'Callback disabled');
        if (reason) return fail(reason);
        showWindow('call');
      } else showWindow('chat');
      if (!S.refused) refresh().then(function () { render(); }); // are agents online now?
      return { result: 'ok' };
    },
    close: function () {
      if (!S.ready) return NOT_READY;
      if (!S.open) return { result: 'ok' };
      S.open = false;
      ui.window.hidden = true;
      ui.label.hidden = false;
      ui.label.setAttribute('aria-expanded', 'false');
      unlockScroll();
      fit();
      if (root && root.activeElement) ui.label.focus(); // only when the visitor was in it
      fire('onClose');
      fire('onChangeState', 'label');
      size();
      return { result: 'ok' };
    },
    chatMode: chatMode,
    getContactInfo: function () {
      var c = S.contact || {};
      return { client_name: c.client_name || null, email: c.email || null, phone: c.phone || null, description: c.description || null };
    },
    getVisitorNumber: function (cb) {
      var done = typeof cb === 'function' ? cb : noop;
      call('visitor', { page: page(), landing_url: landing }).then(function (j) {
        // A new visitor's contact set before it existed is still on its way.
        for (var k in j.contact) if (j.contact[k] || !S.contact[k]) S.contact[k] = j.contact[k];
        try { done(null, j.visitor_number); } catch (e) { /* the page's */ }
      }, function (e) { try { done(e.message || 'failed', null); } catch (x) { /* the page's */ } });
    },
    setContactInfo: function (info) {
      if (!info || typeof info !== 'object') return fail('Contact info must be an object.');
      var c = {};
      ['name', 'email', 'phone', 'description'].forEach(function (k) { if (info[k]) c[k] = String(info[k]); });
      if (c.email && !EMAIL.test(c.email)) return fail(c.email + ' is not a valid e-mail address');
      S.contact = { client_name: c.name || S.contact.client_name, email: c.email || S.contact.email, phone: c.phone || S.contact.phone, description: c.description || S.contact.description };
      if (S.token) call('contact', c).then(saved, noop);
      else S.pending.contact = c;
      return { result: 'ok' };
    },
    setCustomData: function (list) {
      if (!Array.isArray(list)) return fail('Custom data must be array.');
      if (list.length > 10) return fail('Custom data holds at most 10 fields.');
      var f = fields(list);
      if (S.token) call('custom_data', { fields: f }).catch(noop);
      else S.pending.fields = f;
      return { result: 'ok' };
    },
    setRules: function (rules) {
      if (!rules || typeof rules !== 'object' || (rules.invitations && !Array.isArray(rules.invitations))) return fail('Rules must be an object with an invitations array.');
      S.rules = rules;
      if (S.ready) arm();
      return { result: 'ok' };
    },
    setUserToken: function (token) {
      var t = typeof token === 'string' || typeof token === 'number' ? String(token).trim() : '';
      if (!t || t.length > 255 || /[\u0000-\u001f\u007f-\u009f]/.test(t)) return { result: 'fail', token: token || false };
      token = t;
      if (S.token) call('user_token', { user_token: token }).catch(noop);
      else S.pending.userToken = token;
      return { result: 'ok', token: token };
    },
    showProactiveInvitation: function (text, departmentId) {
      if (!S.ready) return later('showProactiveInvitation', arguments);
      if (typeof text !== 'string' || !text.trim()) return fail('Give the invitation text.');
      S.invitation = text.trim();
      S.fresh = true; // it invites a new chat, under an ended one
      if (departmentId) S.department = +departmentId || null;
      note(S.invitation);
      ui.list.lastChild.className = 'msg agent invitation';
      ui.list.lastChild.setAttribute('data-testid', 'svc-invitation');
      showWindow('chat', true);
      return { result: 'ok' };
    },
    startCall: function (phone, done) {
      if (!S.ready) return S.replaying ? later('startCall', arguments) : NOT_READY; // the stub's waits
      if (!S.cfg.callback.enabled) return fail(S.cfg.callback.reason || 'Callback disabled');
      var wrong = phoneError(phone);
      if (wrong) return fail(wrong);
      call('call', { phone: phone.trim(), page: page(), landing_url: landing }).then(function () {
        S.cfg.callback = { enabled: false, reason: 'Callback unavaiable' }; // one call at a time
        if (typeof done === 'function') done(null);
        fire('onCallStart');
        fire('onChangeState', S.open ? 'chat' : 'label');
      }, function (e) {
        // The page's callback reads the service's message; the window's form, the refusal
        // (the second argument) in the visitor's language.
        if (typeof done === 'function') done(e.message, e);
        fire('onCallEnd', { result: 'fail', reason: e.message });
      });
      return { result: 'ok' };
    },
    isCallbackEnabled: function (cb) {
      var done = typeof cb === 'function' ? cb : noop;
      call('callback', {}).then(function (j) {
        if (S.cfg) S.cfg.callback = { enabled: !j.reason, reason: j.reason };
        try { done(j.reason ? { reason: j.reason } : { result: 'ok' }); } catch (e) { /* the page's */ }
      }, function () { try { done({ reason: 'Callback unavaiable' }); } catch (e) { /* the page's */ } });
    },
    sendOfflineMessage: function (message, done) {
      var v = offlineValues(message), problem = offlineProblem(v);
      if (problem) return { result: 'fail', error: OFFLINE[problem].replace('{email}', v.email).replace('{limit}', MAX_OFFLINE) };
      v.page = page();
      v.landing_url = landing;
      call('offline', v).then(function () { if (typeof done === 'function') done(null); }, function (e) {
        if (typeof done === 'function') done(e.message, e); // as startCall's
      });
      return { result: 'ok' };
    },
    sendPageTitle: function (title, fromApi, url) {
      pageTitle = typeof title === 'string' ? title : d.title;
      pageUrl = typeof url === 'string' && url ? url : '';
      var p = page();
      if (S.token) call('page', p).catch(noop);
      if (S.ready) arm();
      return { result: 'ok' };
    },
    getUnreadMessagesCount: function () { return S.unread; },
    getUtm: function () {
      var out = {}, q;
      try { q = new URL(landing).searchParams; } catch (e) { return out; }
      UTM.forEach(function (k) { var v = q.get('utm_' + k); if (v) out[k] = v; });
      return out;
    },
    clearHistory: function () {
      put(local, '_token', null);
      put(local, '_prechat', null);
      S.epoch++;
      if (S.stream) S.stream.close();
      S.stream = null; S.token = null; S.chat = null; S.messages = []; S.seen = {}; S.unread = 0; S.refused = false;
      S.contact = { client_name: null, email: null, phone: null, description: null };
      if (ui.list) while (ui.list.firstChild) ui.list.removeChild(ui.list.firstChild);
      badge();
      render();
      return { result: 'ok' };
    },
    setWidgetColor: function (color, color2) {
      if (!COLOR.test(color || '') || (color2 && !COLOR.test(color2))) return fail('Colours are #rrggbb.');
      S.color = [color, color2 || (S.cfg ? S.cfg.color2 : '#ffffff')];
      if (host) paint();
      return { result: 'ok' };
    },
    setLocale: function (code) {
      // Beyond the spec's table (docs/widget.md, "Languages"): the page's
      // choice, over <html lang> and the channel's language, for this page.
      if (!S.ready) { S.wanted = code; return { result: 'ok' }; } // weighed at load
      var lang = resolve(code);
      if (!lang) return fail('The widget does not speak ' + String(code) + '; it speaks ' + Object.keys(S.cfg.languages).join(', ') + '.');
      S.wanted = lang;
      if (lang !== LANG) speak(lang).then(rebuild, noop);
      return { result: 'ok' };
    },
    init: function () { boot(); return { result: 'ok' }; },
    destroy: function () { destroy(); return { result: 'ok' }; }
  };
  w.svc_api = api;
  // The stub's calls, in order, now: what needs the window (open, an
  // invitation, a call) queues itself again until the widget has loaded.
  var stubbed = queue;
  queue = [];
  S.replaying = true;
  stubbed.forEach(function (item) {
    try { if (typeof api[item[0]] === 'function') api[item[0]].apply(null, item[1] || []); } catch (e) { /* a bad call of the page's */ }
  });
  S.replaying = false;
  w.svc_init = api.init;
  w.svc_destroy = api.destroy;
  w.addEventListener('resize', function () { refit(); if (S.ready && S.open) size(); });
  if (w.visualViewport) {
    w.visualViewport.addEventListener('resize', refit);
    w.visualViewport.addEventListener('scroll', refit);
  }

  var CSS = [
    ':host{all:initial;position:fixed;z-index:2147483000;right:20px;bottom:20px;font:15px/1.4 system-ui,-apple-system,\'Segoe UI\',Roboto,sans-serif;color:#1b1f24}',
    '*{box-sizing:border-box}',
    '[hidden]{display:none!important}',
    'button{font:inherit;cursor:pointer}',
    ':focus-visible{outline:3px solid #bf8700;outline-offset:2px}',
    '.label{display:flex;align-items:center;gap:8px;border:0;border-radius:24px;padding:12px 18px;background:var(--svc-color);color:var(--svc-text);box-shadow:0 4px 14px rgba(0,0,0,.25);font-weight:600}',
    '.badge{background:#d1242f;color:#fff;border-radius:10px;min-width:20px;padding:0 6px;font-size:12px;line-height:20px;text-align:center}',
    '.window{display:flex;flex-direction:column;width:370px;height:min(560px,calc(100vh - 40px));height:min(560px,calc(100dvh - 40px));background:#fff;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.3);overflow:hidden}',
    '.head{display:flex;align-items:center;gap:8px;padding:12px 14px;background:var(--svc-color);color:var(--svc-text)}',
    '.head>div{flex:1;min-width:0}',
    '.title{margin:0;font-size:16px}',
    '.sub{font-size:13px}',
    '.head button{background:transparent;border:0;color:inherit}',
    '.close{display:flex;padding:4px}',
    '.link{text-decoration:underline;font-size:13px}',
    '.views,.view{flex:1;display:flex;flex-direction:column;min-height:0}',
    '.list{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:8px;background:#f6f8fa}',
    '.msg{max-width:85%;padding:8px 12px;border-radius:12px;background:#fff;border:1px solid #d0d7de;overflow-wrap:anywhere;white-space:pre-wrap}',
    '.msg.client{align-self:flex-end;background:var(--svc-color);color:var(--svc-text);border-color:transparent}',
    '.msg.agent,.msg.bot{align-self:flex-start}',
    '.at{display:block;margin-top:2px;font-size:11px;text-align:end;color:#57606a}',
    '.at::after{content:attr(data-time)}',
    '.msg.client .at{color:inherit}',
    '.who{font-size:12px;font-weight:600;color:#57606a;margin-bottom:2px}',
    '.msg a{color:#0a58ca}',
    '.msg.client a{color:inherit}',
    '.choices{display:flex;flex-wrap:wrap;gap:6px;margin-top:6px}',
    '.choice{border:1px solid #0a58ca;background:#fff;color:#0a3069;border-radius:14px;padding:4px 10px}',
    '.note{align-self:center;font-size:13px;color:#57606a;text-align:center}',
    '.queue{padding:6px 12px;font-size:13px;color:#57606a;border-top:1px solid #d0d7de;background:#fff}',
    '.typing{padding:4px 12px;font-size:13px;color:#57606a;font-style:italic}',
    '.compose{display:flex;flex-wrap:wrap;gap:6px;padding:10px;border-top:1px solid #d0d7de}',
    '.department{width:100%}',
    '.input{flex:1;resize:none;min-width:0}',
    'input,textarea,select{font:inherit;font-size:16px;padding:7px;border:1px solid #6e7781;border-radius:6px;color:#1b1f24;background:#fff}',
    '.primary{background:var(--svc-color);color:var(--svc-text);border:0;border-radius:8px;padding:8px 14px;font-weight:600}',
    '.form{padding:14px;overflow-y:auto;margin:0}',
    '.field{display:flex;flex-direction:column;gap:2px;margin-bottom:10px}',
    '.field label{font-size:13px;font-weight:600}',
    '.status{min-height:1em;margin:4px 0}',
    '.error{color:#b3261e}',
    '.done{padding:14px}',
    '.consent-text{white-space:pre-wrap;overflow-wrap:anywhere}',
    '.icon{width:20px;height:20px;flex:none;fill:none;stroke:currentColor;stroke-width:2;stroke-linecap:round;stroke-linejoin:round;vertical-align:middle}',
    '.close .icon{width:24px;height:24px}',
    '.end{padding:10px;text-align:center;border-top:1px solid #d0d7de}',
    '.end p{margin:0 0 6px}',
    '.ended{font-weight:600}',
    '.comment{display:flex;gap:6px;margin:0 0 8px}',
    '.end [data-rating]{display:inline-flex;align-items:center;gap:6px;margin:0 4px 8px;padding:6px 12px;border:1px solid #6e7781;border-radius:8px;background:#fff;color:#1b1f24}',
    '@media (max-width:480px),(max-device-width:480px){:host{right:12px;bottom:12px}.window{position:fixed;inset:0;width:100vw;height:100%;height:100dvh;border-radius:0}}',
    // The visual viewport's box (fit()), drawn at the screen's own scale; only the widget takes touches.
    ':host(.fit){left:var(--svc-vx);top:var(--svc-vy);right:auto;bottom:auto;width:var(--svc-vw);height:var(--svc-vh);transform:scale(var(--svc-vz));transform-origin:0 0;pointer-events:none}',
    ':host(.fit) .label{position:absolute;right:12px;bottom:12px;pointer-events:auto}',
    ':host(.fit) .window{position:absolute;width:100%;height:100%;pointer-events:auto}'
  ].join('');
  if (d.readyState === 'loading') d.addEventListener('DOMContentLoaded', boot); else boot();
})();
