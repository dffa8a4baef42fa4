// The dashboard's browser script, as a string served at /app.js (and inlined in a static report).
// It renders one snapshot at a time: the status line, lane bars, two uPlot charts, the failures
// table (a click fetches the report and repro line; a static report carries them embedded), the
// sessions, the workers with their liveness; for an explore campaign the frontier, three uPlot
// charts, the findings by signature and the masters. Only the kind's own sections are shown.
// Every value from the campaign is set as textContent. Written without template literals so it can live in one.
export const CLIENT_JS = String.raw`
(function () {
  'use strict';
  var charts = { rate: null, finds: null, exec: null, growth: null, redundancy: null };
  var chartLanes = '';
  var embedded = document.getElementById('embedded');
  var staticData = embedded ? JSON.parse(embedded.textContent) : null;
  var received = 0;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function int(n) { return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'); }
  function dur(s) {
    if (s === null || s === undefined) return '–';
    s = Math.max(0, Math.round(s));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + r + 's';
  }
  function rate(r) { return r === null || r === undefined ? '–' : r.toFixed(1) + ' seeds/s'; }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function notAvailable(id, why) {
    var box = document.getElementById(id); clear(box);
    box.appendChild(el('div', why || 'not available for this campaign kind', 'na'));
  }

  function renderStatus(s) {
    document.title = s.title;
    document.getElementById('title').textContent = s.title;
    document.getElementById('headline').textContent = s.status.headline + (s.status.draining ? '  (draining: ' + s.status.draining + ')' : '');
    document.getElementById('elapsed').textContent = dur(s.status.elapsedSeconds);
    document.getElementById('budget').textContent = dur(s.status.budgetSeconds);
    document.getElementById('updated').textContent = new Date(s.takenMs).toLocaleTimeString('en-GB');
    document.getElementById('mode').textContent = staticData ? 'static report' : s.live ? 'live' : 'read-only: nothing is running';
  }

  function renderTotals(v) {
    var box = document.getElementById('totals'); clear(box);
    var t = v.totals;
    box.appendChild(el('div', 'generation ' + v.generation + ' — ' + int(t.seedsSwept) + ' seeds swept in ' + int(t.chunksComplete) +
      ' complete chunks; ' + int(t.finds) + ' finds, ' + int(t.distinct) + ' distinct failures (' + int(t.open) + ' open)' + (t.pending && t.pending.finds ? ', ' + int(t.pending.finds) + ' finds pending minimization' : '')));
  }

  function renderLanes(v) {
    var box = document.getElementById('lanes'); clear(box);
    var span = 1;
    v.lanes.forEach(function (l) {
      var end = l.cursor - l.baseSeed + l.doneAhead;
      l.inFlight.forEach(function (f) { end = Math.max(end, f.seedTo + 1 - l.baseSeed); });
      span = Math.max(span, end);
    });
    v.lanes.forEach(function (l) {
      var row = el('div', null, 'lane'); row.setAttribute('data-lane', l.name);
      var covered = l.cursor - l.baseSeed;
      var text = el('div');
      text.appendChild(el('span', l.name, 'name'));
      text.appendChild(el('span', '  ' + int(l.baseSeed) + '..' + int(l.cursor) + ' (' + int(covered) + ' covered)' +
        (l.doneAhead ? ', ' + int(l.doneAhead) + ' done ahead' : '') + (l.queued ? ', ' + int(l.queued) + ' queued again' : '') +
        ' — ' + rate(l.seedsPerSecond) + ', ' + int(l.finds) + ' finds' +
        (l.inFlight.length ? ' — in flight: ' + l.inFlight.map(function (f) {
          return '#' + f.chunkId + ' ' + int(f.seedFrom) + '..' + int(f.seedTo) + ' (' + dur(f.runningSeconds) + ' on ' + f.worker +
            (f.findsSoFar === null ? '' : ', ' + int(f.findsSoFar) + ' finds so far') + ')';
        }).join(', ') : ''), 'muted lane-text'));
      row.appendChild(text);
      var builds = buildsText(l.builds, v.currentBuild, covered);
      if (builds) row.appendChild(el('div', builds, 'muted lane-builds'));
      var bar = el('div', null, 'bar');
      var prefix = el('div', null, 'prefix'); prefix.style.width = (100 * covered / span) + '%'; bar.appendChild(prefix);
      if (l.doneAhead) {
        // Done ahead is drawn apart from the prefix: it is not coverage until the gap below it is swept.
        var ahead = el('div', null, 'ahead');
        ahead.style.left = Math.min(99, 100 * covered / span + 1) + '%';
        ahead.style.width = Math.max(0.5, 100 * l.doneAhead / span) + '%';
        bar.appendChild(ahead);
      }
      l.inFlight.forEach(function (f) {
        var fl = el('div', null, 'flight');
        fl.style.left = (100 * (f.seedFrom - l.baseSeed) / span) + '%';
        fl.style.width = Math.max(0.5, 100 * (f.seedTo - f.seedFrom + 1) / span) + '%';
        bar.appendChild(fl);
      });
      row.appendChild(bar);
      box.appendChild(row);
    });
  }

  // Which app build swept which seeds of a lane, in seed order, and the current build's part of the prefix.
  function buildName(b) { return b === null ? '(no build named)' : b; }
  function buildsText(b, current, covered) {
    if (!b || (current === null && !b.ranges.some(function (r) { return r.build !== null; }))) return '';
    var parts = b.ranges.map(function (r) {
      return int(r.seedFrom) + '..' + int(r.seedTo) + ' ' + buildName(r.build) + (r.build === current ? ' (current)' : '') + (r.ahead ? ' (ahead, not coverage)' : '');
    });
    if (b.earlierRanges) parts.unshift('\u2026 ' + int(b.earlierRanges) + ' earlier range' + (b.earlierRanges === 1 ? '' : 's'));
    return 'builds: ' + (parts.length ? parts.join(', ') : 'nothing swept') + ' \u2014 current build ' + buildName(current) + ': ' +
      int(b.currentBuildCovered) + ' of ' + int(covered) + ' covered seeds' + (covered > 0 ? ' (' + (100 * b.currentBuildCovered / covered).toFixed(1) + '%)' : '');
  }

  var PALETTE = ['#1565c0', '#2e7d32', '#ef6c00', '#6a1b9a', '#00838f', '#ad1457', '#5d4037', '#455a64'];
  function chart(id, series, data) {
    var box = document.getElementById(id);
    var width = Math.max(300, box.clientWidth || 500);
    var opts = { width: width, height: 220, series: [{}].concat(series), axes: [{}, { size: 60 }], legend: { live: false } };
    clear(box);
    return new uPlot(opts, data, box);
  }
  function renderCharts(v) {
    var s = v.series;
    var names = Object.keys(s.lanes);
    var rateData = [s.t].concat(names.map(function (n) { return s.lanes[n]; })).concat([s.total]);
    var findsData = [s.t, s.finds, s.distinct];
    var key = names.join('\u0000');
    if (typeof uPlot === 'undefined') return;
    if (!charts.rate || key !== chartLanes) {
      chartLanes = key;
      charts.rate = chart('rate-chart', names.map(function (n, i) {
        return { label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5 };
      }).concat([{ label: 'total', stroke: '#111', width: 2 }]), rateData);
      charts.finds = chart('finds-chart', [{ label: 'finds', stroke: '#ef6c00', width: 2 }, { label: 'distinct failures', stroke: '#c62828', width: 2 }], findsData);
    } else {
      charts.rate.setData(rateData);
      charts.finds.setData(findsData);
    }
  }

  // When to stop, beside the discovery curve: the Good-Turing chance that the next seed finds a new
  // distinct failure and Chao2's estimate of how many exist (docs/sweep.md says how, and when not to trust it).
  function estimateText(e) {
    var next = e.nextNewProbability === null ? '-' : e.unitsToNextNew === null ? 'none expected (no failure found by one seed only)'
      : e.nextNewProbability.toPrecision(2) + ' per seed (one in ~' + int(e.unitsToNextNew) + ' seeds)';
    return 'new failure: ' + next + '; distinct failures: ' + int(e.observed) + ' seen, ~' + (Math.round(e.estimatedTotal * 10) / 10) +
      ' in all (95 %: ' + int(e.interval[0]) + '\u2013' + int(e.interval[1]) + ')';
  }
  function renderDiscovery(v) {
    var box = document.getElementById('discovery'); clear(box);
    if (!v.discovery) return;
    var all = el('div', null, 'estimate'); all.setAttribute('data-lane', '');
    all.appendChild(el('span', 'when to stop \u2014 all lanes: ', 'name'));
    all.appendChild(el('span', estimateText(v.discovery.campaign)));
    box.appendChild(all);
    v.discovery.lanes.forEach(function (l) {
      var row = el('div', null, 'estimate'); row.setAttribute('data-lane', l.lane);
      row.appendChild(el('span', l.lane + ': ', 'name'));
      row.appendChild(el('span', estimateText(l)));
      box.appendChild(row);
    });
  }

  function showDetail(d) {
    var box = document.getElementById('detail'); clear(box);
    box.appendChild(el('div', '#' + d.id + ' ' + d.bucket));
    box.appendChild(el('div', 'repro: ' + (d.repro || '(none recorded)')));
    if (d.builds) box.appendChild(el('div', 'app build: first seen under ' + buildName(d.builds.firstSeen) + ', last seen under ' + buildName(d.builds.lastSeen) +
      ', fixed in ' + (d.builds.fixedIn === null ? '\u2013' : d.builds.fixedIn), 'detail-builds'));
    box.appendChild(el('div', ''));
    box.appendChild(el('div', d.report));
  }
  function openFailure(id) {
    if (staticData) {
      var d = staticData.details.filter(function (x) { return x.id === id; })[0];
      if (d) showDetail(d); else showDetail({ id: id, bucket: '', repro: null, report: '(not included in this report)' });
      return;
    }
    fetch('/failure/' + id).then(function (r) { return r.ok ? r.json() : r.text().then(function (t) { throw new Error(t); }); })
      .then(showDetail, function (err) { showDetail({ id: id, bucket: '', repro: null, report: String(err.message) }); });
  }

  function renderFailures(v) {
    var body = document.querySelector('#failures tbody'); clear(body);
    v.failures.forEach(function (f) {
      var tr = el('tr'); tr.setAttribute('data-id', String(f.id));
      [f.id, f.bucket, f.lane, f.state, int(f.hits), int(f.firstSeed), f.firstSeen, f.lastSeen].forEach(function (c) { tr.appendChild(el('td', c)); });
      tr.addEventListener('click', function () { openFailure(f.id); });
      body.appendChild(tr);
    });
    if (v.failuresTotal > v.failures.length) {
      var more = el('tr'); var td = el('td', (v.failuresTotal - v.failures.length) + ' more (fuzzfleet failures lists them all)', 'muted');
      td.colSpan = 8; more.appendChild(td); body.appendChild(more);
    }
  }

  function renderSessions(v) {
    var body = document.querySelector('#sessions tbody'); clear(body);
    v.sessions.forEach(function (s) {
      var tr = el('tr');
      [s.id, s.mode, s.status, s.startedAt, s.endedAt || '–', dur(s.requestedSeconds), s.host || '–'].forEach(function (c) { tr.appendChild(el('td', c)); });
      body.appendChild(tr);
    });
  }

  function renderWorkers(workers, s) {
    // An explore campaign read from its files: workers exist only while a master runs.
    if (workers === null) return notAvailable('workers', s && s.kind === 'explore' && !s.live ? 'nothing is running: workers are shown while the campaign runs (explore --ui)' : null);
    var box = document.getElementById('workers'); clear(box);
    if (workers.length === 0) box.appendChild(el('div', 'no workers attached', 'na'));
    workers.forEach(function (w) {
      var row = el('div', null, 'worker'); row.setAttribute('data-worker', w.label);
      row.appendChild(el('span', w.label + ' '));
      row.appendChild(el('b', w.liveness, 'live-' + w.liveness));
      var heard = w.lastHeartbeatSeconds === null ? '' : ', last heard from ' + dur(w.lastHeartbeatSeconds) + ' ago';
      var held = w.holding.length ? ' — holding ' + w.holding.map(function (h) { return h.text + (h.ageSeconds === null ? '' : ' (' + dur(h.ageSeconds) + ')'); }).join(', ') : '';
      row.appendChild(el('span', heard + held + (w.note ? ' — ' + w.note : ''), 'muted'));
      box.appendChild(row);
    });
  }

  var FRONTIER = ['pending', 'running', 'leased', 'committing', 'expired', 'done'];
  function renderExplore(v) {
    var f = v.frontier;
    var box = document.getElementById('frontier'); clear(box);
    // Pending and running tasks are leased records too (whose counts may be a few seconds old):
    // the bar splits the leased part into running, pending and the rest.
    var pending = f.pending || 0, running = f.running || 0;
    var parts = { done: f.done, committing: f.committing, running: running, pending: pending,
      leased: Math.max(0, f.leased - pending - running), expired: f.expired };
    var total = 0;
    FRONTIER.forEach(function (k) { total += parts[k]; });
    var bar = el('div', null, 'frontier');
    ['done', 'committing', 'running', 'pending', 'leased', 'expired'].forEach(function (k) {
      if (!parts[k]) return;
      var part = el('div', null, 'f-' + k); part.style.width = (100 * parts[k] / Math.max(1, total)) + '%'; part.title = k + ' ' + parts[k];
      bar.appendChild(part);
    });
    box.appendChild(bar);
    box.appendChild(el('div', FRONTIER.map(function (k) { return k + ' ' + int(f[k]); }).join(' · ') +
      (f.inputBacklog ? ' · ' + int(f.inputBacklog) + ' input file(s) to admit' : '') +
      (f.leaseCountsAgeSeconds === null ? '' : '  (lease records read ' + dur(f.leaseCountsAgeSeconds) + ' ago)'), 'frontier-text'));
    var t = v.totals, r = v.rates;
    var tot = document.getElementById('explore-totals'); clear(tot);
    tot.appendChild(el('div', v.role + (v.epoch ? ', epoch ' + v.epoch.slice(0, 12) + '…' : '') + ' — ' + int(t.executions) + ' analysis observations, ' +
      int(t.generated) + ' test cases generated, ' + int(t.unique) + ' unique, ' + int(t.redundant) + ' redundant children' +
      (t.generated ? ' (' + (100 * t.redundant / t.generated).toFixed(1) + '%)' : '') + '; corpus ' + int(t.corpus) +
      (r.executionsPerSecond === null ? '' : ' — ' + r.executionsPerSecond.toFixed(1) + ' executions/s, ' + r.generatedPerSecond.toFixed(1) + ' generated/s') +
      '; findings: ' + int(v.findingsTotal.crashes) + ' crash(es), ' + int(v.findingsTotal.hangs) + ' hang(s) under ' + int(v.findingsTotal.signatures) + ' signature(s)' +
      (t.problems ? '; ' + int(t.problems) + ' problem(s)' : ''), 'explore-totals-text'));
    // When to stop (docs/explore.md): the chance that the next execution finds a new signature, and Chao2's estimate of how many there are.
    var e = v.discovery;
    if (e) tot.appendChild(el('div', 'when to stop \u2014 new signature: ' + (e.nextNewProbability === null ? '-' : e.unitsToNextNew === null ? 'none expected (no signature found by one input only)' :
      e.nextNewProbability.toPrecision(2) + ' per execution (one in ~' + int(e.unitsToNextNew) + ' executions)') + '; signatures: ' + int(e.observed) + ' seen, ~' +
      (Math.round(e.estimatedTotal * 10) / 10) + ' in all (95 %: ' + int(e.interval[0]) + '\u2013' + int(e.interval[1]) + ')', 'explore-discovery'));
    var idle = document.getElementById('idle'); clear(idle);
    if (v.idle) idle.appendChild(el('div', v.idle.remainingSeconds === null ? 'idle window ' + dur(v.idle.windowSeconds) + ': not counting (work in sight)' :
      'idle window: ends in ' + v.idle.remainingSeconds.toFixed(1) + 's of ' + dur(v.idle.windowSeconds) + ' unless work appears', 'idle-text'));
    if (v.wall) idle.appendChild(el('div', 'wall budget: ' + dur(v.wall.remainingSeconds) + ' left of ' + dur(v.wall.budgetSeconds), 'muted'));
    var s = v.series;
    if (s.t.length === 0) {
      // An empty chart says why instead of drawing blank axes.
      var why = v.role === 'read from the files' ? 'no growth history: this campaign kept none (it ended before its first point, or predates kept histories)' :
        'no points yet: the first is taken within a second of the start';
      ['exec-chart', 'growth-chart', 'redundancy-chart'].forEach(function (id) { notAvailable(id, why); });
      charts.exec = null;
    } else if (typeof uPlot !== 'undefined') {
      var exec = [s.t, s.executionsPerSecond], growth = [s.t, s.unique, s.generated], red = [s.t, s.redundancy.map(function (x) { return 100 * x; })];
      if (!charts.exec) {
        charts.exec = chart('exec-chart', [{ label: 'executions/s', stroke: '#1565c0', width: 2 }], exec);
        charts.growth = chart('growth-chart', [{ label: 'unique', stroke: '#2e7d32', width: 2 }, { label: 'generated', stroke: '#ef6c00', width: 2 }], growth);
        charts.redundancy = chart('redundancy-chart', [{ label: 'redundant %', stroke: '#6a1b9a', width: 2 }], red);
      } else { charts.exec.setData(exec); charts.growth.setData(growth); charts.redundancy.setData(red); }
    }
    var body = document.querySelector('#findings tbody'); clear(body);
    v.findings.forEach(function (g) {
      var tr = el('tr'); tr.setAttribute('data-id', String(g.id));
      [g.id, g.signature, g.kind, int(g.inputs), int(g.timesSeen), g.firstSeen, g.lastSeen, g.example.slice(0, 16) + '…'].forEach(function (c) { tr.appendChild(el('td', c)); });
      tr.addEventListener('click', function () { openFailure(g.id); });
      body.appendChild(tr);
    });
    if (v.findingsTotal.signatures > v.findings.length) {
      var more = el('tr'); var td = el('td', (v.findingsTotal.signatures - v.findings.length) + ' more signature(s) (the final statistics list them all)', 'muted');
      td.colSpan = 8; more.appendChild(td); body.appendChild(more);
    }
    var ms = document.getElementById('masters'); clear(ms);
    v.masters.forEach(function (m) {
      var row = el('div', 'rank ' + m.rank + (m.host ? ' on ' + m.host : '') + (m.self ? ' (this one)' : '') + ' — ' + m.phase, 'master');
      row.setAttribute('data-rank', String(m.rank)); ms.appendChild(row);
    });
  }

  function show(id, on) { document.getElementById(id).className = on ? '' : 'hidden'; }

  function render(s) {
    received++;
    document.body.setAttribute('data-snapshots', String(received));
    document.body.setAttribute('data-kind', s.kind);
    renderStatus(s);
    show('sweep-view', s.kind === 'sweep'); show('sessions-view', s.kind === 'sweep'); show('explore-view', s.kind === 'explore');
    if (s.sweep) { renderTotals(s.sweep); renderLanes(s.sweep); renderCharts(s.sweep); renderDiscovery(s.sweep); renderFailures(s.sweep); renderSessions(s.sweep); }
    renderWorkers(s.workers, s);
    if (s.explore) renderExplore(s.explore);
  }

  if (staticData) { render(staticData.snapshot); return; }
  var source = new EventSource('/events');
  source.addEventListener('snapshot', function (ev) { render(JSON.parse(ev.data)); });
  source.onerror = function () { document.getElementById('headline').textContent = 'disconnected: the campaign ended or the dashboard stopped (retrying)'; };
})();
`;
