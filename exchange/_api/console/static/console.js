// Exchange console: keeps the runs page and a run's page live through server-sent events.
// No framework, no third party: everything it needs ships with the gateway.
"use strict";

(function () {
  const FINISHED = new Set(["SUCCESS", "ERROR", "CANCELLED"]);
  const ATTENTION_STATES = new Set(["HELD", "HOLDING", "STOPPED", "STOPPING", "ABORTED", "ABORTING", "ERROR"]);
  const SVG = "http://www.w3.org/2000/svg";

  function statusClass(status) { return status === "ERROR" ? "abnormal" : "quiet"; }
  function stateClass(state) { return state && ATTENTION_STATES.has(state.toUpperCase()) ? "attention" : "quiet"; }
  function shown(value) { return Math.abs(value) >= 1000 ? value.toFixed(0) : String(Number(value.toFixed(2))); }
  function shortTime(iso) { return iso ? iso.replace("T", " ").slice(0, 19) : ""; }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function setBadge(node, text, className) {
    node.textContent = text || "";
    node.className = "badge " + className;
  }

  // ----- the runs page --------------------------------------------------------------------------
  function runsPage() {
    const live = document.getElementById("live");
    const body = document.querySelector("#runs tbody");
    const source = new EventSource(live.dataset.stream);
    source.addEventListener("runs", function (event) {
      live.classList.add("on");
      const runs = JSON.parse(event.data);
      const rows = runs.map(function (run) {
        const row = element("tr");
        row.dataset.id = run.id;
        const link = element("a");
        link.href = "/runs/" + encodeURIComponent(run.id);
        link.appendChild(element("code", null, run.id.slice(0, 8)));
        const idCell = element("td");
        idCell.appendChild(link);
        const statusCell = element("td");
        statusCell.appendChild(element("span", "badge " + statusClass(run.status), run.status));
        if ((run.status === "PENDING" || run.status === "RUNNING") && run.owner_alive === false) {
          statusCell.appendChild(document.createTextNode(" "));
          statusCell.appendChild(element("span", "badge attention", "stale"));
        }
        const stateCell = element("td");
        stateCell.appendChild(element("span", "badge " + stateClass(run.state), run.state || ""));
        row.append(idCell, element("td", null, run.workflow), statusCell, stateCell,
          element("td", null, run.progress ? run.progress.message : ""), element("td", null, shortTime(run.created_at)),
          element("td", null, run.created_by || ""));
        return row;
      });
      if (rows.length === 0) {
        const empty = element("tr", "empty");
        const cell = element("td", null, "No runs match.");
        cell.colSpan = 7;
        empty.appendChild(cell);
        rows.push(empty);
      }
      body.replaceChildren.apply(body, rows);
    });
    source.onerror = function () { live.classList.remove("on"); };
    attentionList();
  }

  // The runs that need someone, at the top of the runs page, kept live.
  const ATTENTION_LABELS = { prompt: "prompt", held: "held on a fault", code: "held: code diverges",
    equipment: "held by equipment",
    units: "waits for units", in_doubt: "write in doubt", error: "ERROR" };
  function attentionList() {
    const card = document.getElementById("attention");
    if (!card) return;
    const body = card.querySelector("tbody");
    const source = new EventSource(card.dataset.stream);
    source.addEventListener("attention", function (event) {
      const rows = JSON.parse(event.data).map(function (item) {
        const row = element("tr");
        row.dataset.reason = item.reason;
        const why = element("td");
        why.appendChild(element("span", "badge " + (item.reason === "prompt" ? "attention" : "abnormal"),
          ATTENTION_LABELS[item.reason] || item.reason));
        const link = element("a");
        link.href = "/runs/" + encodeURIComponent(item.run);
        link.appendChild(element("code", null, item.run.slice(0, 8)));
        const runCell = element("td");
        runCell.appendChild(link);
        row.append(why, runCell, element("td", null, item.workflow), element("td", null, shortTime(item.since)),
          element("td", null, item.detail));
        return row;
      });
      body.replaceChildren.apply(body, rows);
      card.hidden = rows.length === 0;
    });
  }

  // ----- a run's trend --------------------------------------------------------------------------
  function drawTrend(chart, series) {
    const keys = Object.keys(series).filter(function (key) { return series[key].length > 0; });
    document.getElementById("trend-empty").hidden = keys.length > 0;
    chart.toggleAttribute("hidden", keys.length === 0);  // an SVG element has no .hidden property
    const legend = document.getElementById("trend-legend");
    chart.replaceChildren();
    legend.replaceChildren();
    if (keys.length === 0) return;
    // as wide as the panel, in screen pixels, so the text is never stretched or letterboxed
    const width = Math.max(320, Math.round(chart.getBoundingClientRect().width) || 800);
    const height = 260, left = 56, right = 12, top = 10, bottom = 26;
    chart.setAttribute("viewBox", "0 0 " + width + " " + height);
    let t0 = Infinity, t1 = -Infinity, v0 = Infinity, v1 = -Infinity;
    keys.forEach(function (key) {
      series[key].forEach(function (point) {
        t0 = Math.min(t0, point[0]); t1 = Math.max(t1, point[0]);
        v0 = Math.min(v0, point[1]); v1 = Math.max(v1, point[1]);
      });
    });
    if (t1 === t0) t1 = t0 + 1;
    if (v1 === v0) { v0 -= 1; v1 += 1; }
    const pad = (v1 - v0) * 0.05; v0 -= pad; v1 += pad;
    const x = function (t) { return left + (t - t0) / (t1 - t0) * (width - left - right); };
    const y = function (v) { return top + (v1 - v) / (v1 - v0) * (height - top - bottom); };
    for (let i = 0; i <= 4; i++) {
      const value = v0 + (v1 - v0) * i / 4;
      const line = document.createElementNS(SVG, "line");
      line.setAttribute("class", "grid");
      line.setAttribute("x1", left); line.setAttribute("x2", width - right);
      line.setAttribute("y1", y(value)); line.setAttribute("y2", y(value));
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("class", "axis"); label.setAttribute("x", 4); label.setAttribute("y", y(value) + 4);
      label.textContent = Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(1);
      chart.append(line, label);
    }
    [[t0, "start"], [t1, "end"]].forEach(function (pair) {
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("class", "axis");
      label.setAttribute("x", pair[1] === "start" ? left : width - right);
      label.setAttribute("y", height - 6);
      label.setAttribute("text-anchor", pair[1]);
      label.textContent = new Date(pair[0] * 1000).toLocaleTimeString();
      chart.appendChild(label);
    });
    keys.forEach(function (key, index) {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("class", "pen-" + index);
      line.dataset.key = key;
      line.setAttribute("points", series[key].map(function (p) {
        return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1);
      }).join(" "));
      chart.appendChild(line);
      const lastPoint = series[key][series[key].length - 1];
      const marker = document.createElementNS(SVG, "circle");  // the latest value, visible from the first point
      marker.setAttribute("class", "marker pen-" + index);
      marker.setAttribute("cx", x(lastPoint[0]).toFixed(1));
      marker.setAttribute("cy", y(lastPoint[1]).toFixed(1));
      marker.setAttribute("r", 3);
      chart.appendChild(marker);
      const item = element("li");
      item.append(element("span", "swatch pen-" + index), element("span", null, key + " " + shown(lastPoint[1])));
      legend.appendChild(item);
    });
  }

  function addToTrend(series, progress, at) {
    if (!progress || !progress.extra || typeof progress.extra !== "object") return false;
    const when = Date.parse(at) / 1000;
    let added = false;
    Object.keys(progress.extra).forEach(function (key) {
      const value = progress.extra[key];
      if (typeof value !== "number" || !isFinite(value)) return;
      const points = series[key] || (series[key] = []);
      if (points.length && points[points.length - 1][0] >= when) return;
      points.push([when, value]);
      added = true;
    });
    return added;
  }

  // ----- a run's page ---------------------------------------------------------------------------
  function runPage() {
    const root = document.getElementById("run");
    const runId = root.dataset.runId;
    const rules = JSON.parse(root.dataset.rules);
    const chart = document.getElementById("trend-chart");
    const series = JSON.parse(chart.dataset.trend);
    drawTrend(chart, series);
    let resizeTimer = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () { drawTrend(chart, series); }, 150);
    });
    if (FINISHED.has(root.dataset.status)) return;

    let lastProgress = null, panelsDue = false, panelsBusy = false, leaving = false;
    // A form sent (a command, an answer) brings its own page: a reload now would cancel it.
    document.addEventListener("submit", function () { leaving = true; });
    function refreshPanels() {
      if (panelsBusy) { panelsDue = true; return; }
      panelsBusy = true;
      const allSteps = new URLSearchParams(window.location.search).get("steps") === "all";
      fetch("/runs/" + encodeURIComponent(runId) + "/panels" + (allSteps ? "?steps=all" : ""),
        { credentials: "same-origin" })
        .then(function (answer) { return answer.ok ? answer.text() : null; })
        .then(function (html) { if (html !== null) document.getElementById("panels").innerHTML = html; })
        .finally(function () {
          panelsBusy = false;
          if (panelsDue) { panelsDue = false; setTimeout(refreshPanels, 500); }
        });
    }
    function enableButtons(run) {
      const state = (run.state || "").toUpperCase();
      document.querySelectorAll("button[data-cmd]").forEach(function (button) {
        const allowedIn = rules[button.dataset.cmd] || [];
        const ok = !FINISHED.has(run.status) && (allowedIn.indexOf("*") >= 0 || allowedIn.indexOf(state) >= 0);
        button.disabled = !ok;
      });
      const cancel = document.getElementById("cancel");
      if (cancel) cancel.disabled = FINISHED.has(run.status);
    }

    // The equipment phase the run commands (phase.run) and the PLC's state as the run last saw it.
    function showPhase(phase) {
      const box = document.getElementById("phase");
      box.hidden = !phase;
      if (!phase) return;
      document.getElementById("phase-name").textContent = phase.name;
      setBadge(document.getElementById("phase-state"), phase.state || "—", stateClass(phase.state));
      const held = document.getElementById("phase-held");
      held.hidden = !phase.held_by;
      held.textContent = phase.held_by ? "held by " + phase.held_by : "";
      document.getElementById("phase-since").textContent = phase.since ? "started " + phase.since.slice(11, 19) : "";
    }

    const source = new EventSource("/api/v1/runs/" + encodeURIComponent(runId) + "/stream");
    source.addEventListener("run", function (event) {
      const run = JSON.parse(event.data);
      setBadge(document.getElementById("status"), run.status, statusClass(run.status));
      setBadge(document.getElementById("state"), run.state || "—", stateClass(run.state));
      root.dataset.status = run.status;
      root.dataset.state = run.state || "";
      document.getElementById("progress").textContent = run.progress ? run.progress.message : "—";
      showPhase(run.phase);
      enableButtons(run);
      const progressText = JSON.stringify(run.progress);
      if (lastProgress !== null && progressText !== lastProgress && addToTrend(series, run.progress, run.updated_at)) {
        drawTrend(chart, series);
      }
      lastProgress = progressText;
      // A prompt opened, was answered or closed: the page shows the form (or what is left to do) as
      // the server renders it.
      const shownPrompt = document.getElementById("prompt");
      const promptNow = run.prompt ? run.prompt.key + ":" + run.prompt.status : "";
      if (!leaving && (shownPrompt ? shownPrompt.dataset.prompt : "") !== promptNow) {
        source.close();
        window.location.reload();
        return;
      }
      refreshPanels();
      if (FINISHED.has(run.status)) {
        source.close();
        if (!leaving) window.location.reload();  // the outcome and the final steps, as the server renders them
      }
    });
  }

  const page = document.body.dataset.page;
  if (page === "runs") runsPage();
  if (page === "run") runPage();
})();
