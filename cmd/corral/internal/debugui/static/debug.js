// The debug page's script: polls the node's state once a second and draws it.
//
// Every name and key it shows comes from the network and may be any bytes, so it is written
// with textContent, createTextNode or an attribute value, never parsed as markup. Rows are
// kept and updated in place, so the text a reader has selected survives the next poll.
'use strict';

(function () {
  const POLL_MS = 1000;     // between the end of one poll and the start of the next
  const TIMEOUT_MS = 3000;  // a poll with no answer by then counts as failed
  const KEY_SHOWN = 120;    // characters of a key shown; the title holds all of it
  const SVGNS = 'http://www.w3.org/2000/svg';

  const COUNTERS = [
    // [field, heading, what it counts, extra cell class]
    ['gets', 'gets', 'Get calls on this node', ''],
    ['fills', 'fills', 'loader runs on this node', ''],
    ['coalesced', 'coalesced', 'Gets answered by a fill or owner request already in flight', ''],
    ['stale_served', 'stale', 'reads answered with a stale value', 'stale-col'],
    ['near_hits', 'near hits', 'Gets answered from the near cache', ''],
    ['fill_errors', 'errors', 'loader runs that failed or panicked', 'errors'],
  ];

  const stateURL = document.body.dataset.state;
  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat('en-US');
  const rf = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

  let okAt = null;        // Date of the last successful poll
  let prev = null;        // {at: ms, startedAt, groups: Map name -> Group} of the last success
  let ringSig = '';       // what the ring was last drawn from

  // ---- small DOM helpers; none of them parses markup ----

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setText(e, s) {
    if (e.textContent !== s) e.textContent = s;
  }

  function setClass(e, cls) {
    if (e.className !== cls) e.className = cls;
  }

  // Puts the children of parent in the order of keys, making a row for a new key with make
  // and dropping rows whose key is gone; rows is the Map key -> row the caller keeps.
  function syncRows(parent, rows, keys, make) {
    const want = new Set(keys);
    for (const [k, row] of rows) {
      if (!want.has(k)) { row.node.remove(); rows.delete(k); }
    }
    let i = 0;
    for (const k of keys) {
      let row = rows.get(k);
      if (!row) { row = make(k); rows.set(k, row); }
      if (parent.children[i] !== row.node) parent.insertBefore(row.node, parent.children[i] || null);
      i++;
    }
    return keys.map((k) => rows.get(k));
  }

  // ---- formatting ----

  const pad = (n) => String(n).padStart(2, '0');
  const clock = (d) => pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());

  function duration(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + m + 'm';
    if (m) return m + 'm ' + s + 's';
    return s + 's';
  }

  function bytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
  }

  // Members are colored by their place in the sorted list, so neighbours on the donut always
  // differ: ten distinct colors, then hues a golden angle apart.
  const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2',
    '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  function color(i) {
    return i < PALETTE.length ? PALETTE[i] : 'hsl(' + Math.round((i * 137.508) % 360) + ' 55% 55%)';
  }

  // Splits a key into text and escapes: control characters and bidi overrides would hide or
  // reorder what is shown, so they are written as \xNN or \u{…} instead.
  function keySegments(key) {
    const segs = [];
    let plain = '';
    for (const ch of key) {
      const c = ch.codePointAt(0);
      if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069)) {
        if (plain) { segs.push([false, plain]); plain = ''; }
        segs.push([true, c <= 0xff ? '\\x' + c.toString(16).padStart(2, '0') : '\\u{' + c.toString(16) + '}']);
      } else {
        plain += ch;
      }
    }
    if (plain) segs.push([false, plain]);
    return segs;
  }

  function keyNode(key, tag) {
    const li = el(tag || 'li');
    li.title = key;
    let n = 0, cut = false;
    for (const [esc, s] of keySegments(key)) {
      if (n >= KEY_SHOWN) { cut = true; break; }
      const chars = Array.from(s); // code points, so a cut never splits a surrogate pair
      const part = chars.slice(0, KEY_SHOWN - n).join('');
      if (chars.length > KEY_SHOWN - n) cut = true;
      n += chars.length;
      li.appendChild(esc ? el('span', 'esc', part) : document.createTextNode(part));
    }
    if (cut) li.appendChild(el('span', 'esc', '…'));
    return li;
  }

  // ---- header ----

  function drawHeader(st, serverNow) {
    setText($('self'), st.self || '(unnamed)');
    document.title = 'corral · ' + (st.self || 'debug');
    const ready = $('ready');
    setText(ready, st.ready ? 'ready' : 'not ready');
    setClass(ready, 'badge ' + (st.ready ? 'ready' : 'not-ready'));
    setText($('epoch'), String(st.epoch));
    const started = Date.parse(st.started_at);
    const up = $('uptime');
    if (Number.isFinite(started) && started > 0) {
      setText(up, duration(serverNow - started));
      up.title = 'started ' + new Date(started).toString();
    } else {
      setText(up, '–');
    }
  }

  // ---- members ----

  const memberRows = new Map();

  function makeMemberRow() {
    const node = el('tr');
    const r = {
      node,
      swatch: el('span', 'swatch'),
      name: el('span', 'mono'),
      tag: el('span', 'tag', 'self'),
      status: el('span', 'status'),
      share: el('td', 'num'),
      gossip: el('td', 'addr'),
      peer: el('td', 'addr'),
    };
    const c0 = el('td'); c0.appendChild(r.swatch);
    const c1 = el('td'); c1.append(r.name, r.tag);
    const c2 = el('td'); c2.appendChild(r.status);
    node.append(c0, c1, c2, r.share, r.gossip, r.peer);
    return r;
  }

  function drawMembers(members, total) {
    const rows = syncRows($('members').tBodies[0], memberRows, members.map((m) => m.name), makeMemberRow);
    members.forEach((m, i) => {
      const r = rows[i];
      r.swatch.style.background = color(i);
      setText(r.name, m.name);
      r.tag.hidden = !m.self;
      const status = m.status || 'unknown';
      setText(r.status, status);
      setClass(r.status, 'status ' + status);
      setText(r.share, total > 0 ? (100 * m.share / total).toFixed(1) + '%' : '–');
      setText(r.gossip, m.gossip_addr || '–');
      setText(r.peer, m.peer_addr || '–');
    });
    setText($('member-count'), String(members.length));
    $('members-empty').hidden = members.length > 0;
  }

  // ---- ring ----

  // The ring as a donut: one arc per member, its angle the member's share. (The real ring
  // interleaves many points per member; the donut shows how much each owns, not where.)
  function drawRing(members, total, epoch) {
    const sig = JSON.stringify([epoch, members.map((m) => [m.name, m.share, m.status, m.self])]);
    if (sig === ringSig) return;
    ringSig = sig;

    const root = $('ring');
    root.replaceChildren();
    const cx = 280, cy = 165, R = 118, r = 74;

    const center = (big, small) => {
      root.appendChild(svg('text', { x: cx, y: cy + 6, class: 'center-big' }, big));
      root.appendChild(svg('text', { x: cx, y: cy + 26, class: 'center-small' }, small));
    };

    if (!(total > 0)) {
      root.appendChild(svg('circle', { cx, cy, r: (R + r) / 2, class: 'hole', fill: 'none', 'stroke-width': R - r }));
      center(String(members.length), 'no shares');
      return;
    }

    const pt = (rad, a) => [cx + rad * Math.cos(a), cy + rad * Math.sin(a)];
    const arcPath = (a0, a1) => {
      const large = a1 - a0 > Math.PI ? 1 : 0;
      const [x0, y0] = pt(R, a0), [x1, y1] = pt(R, a1), [x2, y2] = pt(r, a1), [x3, y3] = pt(r, a0);
      return 'M' + x0 + ' ' + y0 + 'A' + R + ' ' + R + ' 0 ' + large + ' 1 ' + x1 + ' ' + y1 +
        'L' + x2 + ' ' + y2 + 'A' + r + ' ' + r + ' 0 ' + large + ' 0 ' + x3 + ' ' + y3 + 'Z';
    };

    let a = -Math.PI / 2; // start at twelve o'clock, clockwise
    members.forEach((m, i) => {
      const frac = Math.max(0, m.share) / total;
      if (frac <= 0) return;
      const a0 = a, a1 = a + frac * 2 * Math.PI;
      a = a1;
      // An arc cannot start and end at one point: a lone member's full circle is two halves
      // of one path.
      const d = frac >= 0.9999 ? arcPath(a0, a0 + Math.PI) + arcPath(a0 + Math.PI, a0 + 2 * Math.PI) : arcPath(a0, a1);
      const cls = 'arc ' + (m.status || 'unknown') + (m.self ? ' self' : '');
      const path = svg('path', { d, fill: color(i), class: cls, 'data-member': m.name });
      path.appendChild(svg('title', {}, m.name + ' — ' + (100 * frac).toFixed(1) + '% (' + (m.status || 'unknown') + ')'));
      root.appendChild(path);

      if (frac < 0.03) return; // too thin to label; the members table has it
      const mid = (a0 + a1) / 2;
      const [lx0, ly0] = pt(R + 4, mid), [lx1, ly1] = pt(R + 18, mid);
      const right = Math.cos(mid) >= 0;
      const lx2 = lx1 + (right ? 10 : -10);
      root.appendChild(svg('polyline', { points: lx0 + ',' + ly0 + ' ' + lx1 + ',' + ly1 + ' ' + lx2 + ',' + ly1, class: 'leader' }));
      const anchor = right ? 'start' : 'end';
      const tx = lx2 + (right ? 4 : -4);
      const name = m.name.length > 22 ? m.name.slice(0, 21) + '…' : m.name;
      root.appendChild(svg('text', { x: tx, y: ly1 - 2, 'text-anchor': anchor, class: 'label' + (m.self ? ' self' : '') }, name));
      root.appendChild(svg('text', { x: tx, y: ly1 + 13, 'text-anchor': anchor, class: 'pct' },
        (100 * frac).toFixed(1) + '%' + (m.status && m.status !== 'alive' ? ' · ' + m.status : '')));
    });
    center(String(members.length), members.length === 1 ? 'member' : 'members');
  }

  // ---- groups ----

  const groupRows = new Map();

  function drawGroupHead() {
    const tr = el('tr');
    tr.appendChild(el('th', '', 'group'));
    for (const [, head, what] of COUNTERS) { const th = el('th', 'num', head); th.title = what; tr.appendChild(th); }
    const e = el('th', 'num', 'entries'); e.title = 'entries stored on this node now'; tr.appendChild(e);
    const b = el('th', 'num', 'bytes'); b.title = 'bytes stored on this node now'; tr.appendChild(b);
    $('groups').tHead.appendChild(tr);
  }

  function makeGroupRow(name) {
    const node = el('tr');
    node.dataset.group = name;
    const r = { node, name: el('td', 'group', name), cells: {} };
    node.appendChild(r.name);
    for (const [field, , , extra] of COUNTERS) {
      const td = el('td', 'num ' + field + (extra ? ' ' + extra : ''));
      const c = { total: el('span', 'total'), rate: el('span', 'rate') };
      td.append(c.total, c.rate);
      node.appendChild(td);
      r.cells[field] = c;
    }
    r.entries = el('td', 'num entries');
    r.bytes = el('td', 'num bytes');
    node.append(r.entries, r.bytes);
    return r;
  }

  // rate is the per-second change of one counter since the previous poll, or null when there
  // is nothing to compare with or the counter went down (the node restarted).
  function rate(cur, before, seconds) {
    if (before === undefined || seconds <= 0 || cur < before) return null;
    return (cur - before) / seconds;
  }

  function drawGroups(groups, before, seconds) {
    const rows = syncRows($('groups').tBodies[0], groupRows, groups.map((g) => g.name), makeGroupRow);
    groups.forEach((g, i) => {
      const r = rows[i];
      const old = before && before.get(g.name);
      for (const [field] of COUNTERS) {
        const c = r.cells[field];
        const v = g[field] || 0;
        setText(c.total, nf.format(v));
        setClass(c.total, 'total' + (v > 0 ? ' nonzero' : ''));
        const rt = rate(v, old ? old[field] : undefined, seconds);
        setText(c.rate, rt === null ? '–' : (rt > 0 ? '+' : '') + rf.format(rt) + '/s');
        setClass(c.rate, 'rate' + (rt > 0 ? ' moving' : ''));
      }
      setText(r.entries, nf.format(g.entries || 0));
      setText(r.bytes, bytes(g.bytes || 0));
      r.bytes.title = nf.format(g.bytes || 0) + ' bytes';
    });
    $('groups-empty').hidden = groups.length > 0;
  }

  // ---- hot keys ----

  const hotCards = new Map();

  function makeHotCard(name) {
    const node = el('div', 'hot');
    node.dataset.group = name;
    const list = el('ol');
    const empty = el('p', 'empty', 'no hot keys yet');
    const slow = el('p', 'slow');
    slow.hidden = true;
    node.append(el('h3', '', name), list, empty, slow);
    return { node, list, empty, slow, sig: null };
  }

  // The slowest traced fill of the last minute, linked to its trace (--trace-ui-url).
  function drawSlowFill(c, s) {
    if (!s) {
      c.slow.hidden = true;
      c.slow.replaceChildren();
      return;
    }
    const a = el('a', 'trace', 'trace ' + s.trace_id.slice(0, 8) + '…');
    a.href = s.trace_url;
    a.target = '_blank';
    a.rel = 'noopener';
    c.slow.replaceChildren(document.createTextNode('slowest fill (1 min): '), keyNode(s.key, 'span'),
      document.createTextNode(' ' + rf.format(s.millis) + ' ms · '), a);
    c.slow.hidden = false;
  }

  function drawHotKeys(groups) {
    const cards = syncRows($('hotkeys'), hotCards, groups.map((g) => g.name), makeHotCard);
    groups.forEach((g, i) => {
      const c = cards[i];
      const keys = g.hot_keys || [];
      const tags = g.hot_tags || {};
      const backups = g.hot_backups || {};
      const sig = JSON.stringify([keys, tags, backups, g.slow_fill || null]);
      if (sig === c.sig) return; // unchanged: keep the nodes, and any selection in them
      c.sig = sig;
      c.list.replaceChildren(...keys.map((k) => {
        const li = keyNode(k);
        for (const t of tags[k] || []) li.appendChild(el('span', 'tag', t));
        for (const b of backups[k] || []) li.appendChild(el('span', 'backup', 'backup: ' + b));
        return li;
      }));
      c.empty.hidden = keys.length > 0;
      drawSlowFill(c, g.slow_fill);
    });
  }

  // ---- seeds that refuse this node ----

  let refusedSig = '';

  function drawRefusals(refusals) {
    const sig = JSON.stringify(refusals.map((r) => [r.seed, r.reason, r.diagnosis]));
    if (sig === refusedSig) return; // unchanged: keep any selection in it
    refusedSig = sig;
    const banner = $('refused');
    banner.replaceChildren(...refusals.map((r) => {
      const line = el('div', 'refusal');
      line.append(document.createTextNode('join refused by seed ' + r.seed + ' (' + r.reason + ')'),
        el('span', 'detail', r.diagnosis));
      return line;
    }));
    banner.hidden = refusals.length === 0;
  }

  // ---- polling ----

  function showLive(now) {
    document.body.classList.remove('stale');
    $('stale').hidden = true;
    const p = $('poll');
    setText(p, 'live · updated ' + clock(now));
    setClass(p, 'poll live');
  }

  function showFailure(msg) {
    const p = $('poll');
    setClass(p, 'poll failing');
    const banner = $('stale');
    let head;
    if (okAt) {
      document.body.classList.add('stale');
      // Readiness is the one fact a reader acts on at a glance: say it is an old one.
      const ready = $('ready');
      if (!ready.textContent.startsWith('was ')) setText(ready, 'was ' + ready.textContent);
      setClass(ready, 'badge unknown');
      head = 'stale since ' + clock(okAt) + ' (' + duration(Date.now() - okAt.getTime()) + ' ago): showing the last data';
      setText(p, 'stale since ' + clock(okAt));
    } else {
      head = 'no data yet: the node has not answered';
      setText(p, 'no data');
    }
    banner.replaceChildren(document.createTextNode(head), el('span', 'detail', msg));
    banner.hidden = false;
  }

  function onState(st, serverNow) {
    const members = Array.isArray(st.members) ? st.members : [];
    const groups = Array.isArray(st.groups) ? st.groups : [];
    const now = new Date();
    let total = 0;
    for (const m of members) if (Number.isFinite(m.share) && m.share > 0) total += m.share;

    // Rates compare with the previous poll of the same process only.
    const same = prev && prev.startedAt === st.started_at;
    const seconds = same ? (now.getTime() - prev.at) / 1000 : 0;

    drawHeader(st, serverNow);
    drawMembers(members, total);
    drawRing(members, total, st.epoch);
    drawGroups(groups, same ? prev.groups : null, seconds);
    drawHotKeys(groups);
    drawRefusals(Array.isArray(st.join_refusals) ? st.join_refusals : []);

    prev = { at: now.getTime(), startedAt: st.started_at, groups: new Map(groups.map((g) => [g.name, g])) };
    okAt = now;
    showLive(now);
  }

  async function poll() {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), TIMEOUT_MS);
    try {
      const res = await fetch(stateURL, { cache: 'no-store', signal: ctrl.signal, headers: { Accept: 'application/json' } });
      if (!res.ok) throw new Error('HTTP ' + res.status + ' ' + (await res.text()).trim().slice(0, 200));
      const text = await res.text();
      const st = JSON.parse(text);
      // The epoch is a uint64, often past 2^53, where a JS number rounds it: take its digits
      // from the text. (Inside a JSON string a quote is escaped, so this matches the key.)
      const epoch = /"epoch":(\d+)/.exec(text);
      if (epoch) st.epoch = epoch[1];
      // Uptime from the node's own clock (its Date header), so a skewed laptop clock does
      // not skew it.
      const date = Date.parse(res.headers.get('Date') || '');
      onState(st, Number.isFinite(date) ? date : Date.now());
    } catch (e) {
      const msg = e && e.name === 'AbortError' ? 'no answer within ' + TIMEOUT_MS / 1000 + ' s'
        : e && e.message === 'Failed to fetch' ? 'node unreachable (is the port-forward still running?)'
        : String((e && e.message) || e);
      showFailure(msg);
    } finally {
      clearTimeout(timer);
      setTimeout(poll, POLL_MS);
    }
  }

  drawGroupHead();
  poll();
})();
