// The page draws each snapshot the server streams (one per quantum); it keeps no state of its own.
"use strict";

const colour = (id) => `hsl(${(id * 137.508) % 360}, 55%, 42%)`;
const percent = (value) => (value === null || value === undefined ? "" : `${Math.round(value)}`);

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

function drawMatrix(matrix) {
  const table = document.getElementById("matrix");
  table.replaceChildren();
  const nodes = matrix.nodes, processors = matrix.processors.length ? matrix.processors : nodes.map(() => 0);
  const header = element("tr", {}, element("th", {}, "slot"));
  nodes.forEach((node, column) => header.append(element("th", { class: "node" }, `${node}:${processors[column]}`)));
  table.append(header);
  matrix.rows.forEach((row, slot) => {
    const running = matrix.running[0] === slot, partner = matrix.running.slice(1).includes(slot);
    const mark = running ? "▶ " : partner ? "◆ " : "";
    const line = element("tr", { class: running ? "running" : partner ? "partner" : "", "data-slot": slot },
      element("th", { class: "slot" }, `${mark}${slot}`));
    row.forEach((job) => {
      const cell = element("td", job === null ? {} : { class: "job", "data-job": job, style: `background:${colour(job)}` },
        job === null ? "" : String(job));
      line.append(cell);
    });
    table.append(line);
  });
}

function drawList(id, columns, rows) {
  const table = document.getElementById(id);
  table.replaceChildren(element("tr", {}, ...columns.map(([title]) => element("th", {}, title))));
  for (const row of rows) {
    table.append(element("tr", {}, ...columns.map(([, value, number]) =>
      element("td", number ? { class: "number" } : {}, String(value(row) ?? "")))));
  }
}

function sparkline(points, span, now) {
  const width = 240, height = 48;
  const x = (t) => width - ((now - t) / span) * width, y = (v) => height - (Math.min(v, 100) / 100) * height;
  const path = (index) => points.filter((p) => p[index] !== null)
    .map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[index]).toFixed(1)}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  svg.innerHTML = `<rect width="${width}" height="${height}" fill="#f4f6f8"/>` +
    `<path d="${path(1)}" fill="none" stroke="#1565c0" stroke-width="1.5"/>` +
    `<path d="${path(2)}" fill="none" stroke="#ef6c00" stroke-width="1.2" stroke-dasharray="4 3"/>`;
  return svg;
}

function drawCharts(state) {
  const charts = document.getElementById("charts");
  charts.replaceChildren();
  const jobs = new Map(state.jobs.map((job) => [String(job.job_id), job]));
  for (const [id, points] of Object.entries(state.history)) {
    const job = jobs.get(id), last = points[points.length - 1] || [];
    charts.append(element("div", { class: "chart", "data-job": id },
      element("div", {}, `job ${id} ${job ? job.name : ""}: ${percent(last[1])}% (predicted ${percent(last[2])}%)`),
      sparkline(points, state.history_s, state.time)));
  }
}

let shown = null;  // the partition whose matrix the page shows; null: the default partition's

function choosePartition(state) {
  const select = document.getElementById("partition");
  const names = (state.matrices || [state.matrix]).map((matrix) => matrix.partition);
  if ([...select.options].map((option) => option.value).join() !== names.join()) {
    select.replaceChildren(...names.map((name, index) => element("option", { value: name }, index ? name : `${name} *`)));
    select.onchange = () => { shown = select.value; };
  }
  if (!names.includes(shown)) shown = names[0];
  select.value = shown;
  return (state.matrices || [state.matrix]).find((matrix) => matrix.partition === shown);
}

function draw(state) {
  if (!state.matrix) return;
  const matrix = choosePartition(state);
  document.getElementById("policy").textContent = `policy ${matrix.policy}`;
  const quantum = document.getElementById("quantum");
  quantum.textContent = `quantum ${matrix.quantum} (${matrix.quantum_ms} ms)`;
  quantum.dataset.quantum = matrix.quantum;
  quantum.dataset.running = matrix.running.join(",");
  drawMatrix(matrix);
  const active = state.jobs.filter((job) => ["pending", "running", "suspended"].includes(job.state));
  drawList("queue", [["job", (j) => j.shown_id, true], ["partition", (j) => j.partition], ["name", (j) => j.name],
    ["user", (j) => j.user],
    ["state", (j) => j.state], ["tasks", (j) => j.tasks, true], ["util %", (j) => percent(j.util_pct), true],
    ["pred %", (j) => percent(j.predicted_pct), true],
    ["nodes (reason)", (j) => [j.nodes.join(","), j.reason && `(${j.reason})`].filter(Boolean).join(" ")]],
    active);
  drawList("nodes", [["node", (n) => n.name], ["state", (n) => n.state],
    ["reason", (n) => n.reason ? `${n.reason.text} (${n.reason.user})` : ""],
    ["processors", (n) => `${n.processors_used}/${n.processors}`, true], ["util %", (n) => percent(n.util_pct), true],
    ["memory MiB (committed/total)", (n) => `${mebibytes(n.memory_committed)}/${mebibytes(n.memory)}`, true],
    ["jobs", (n) => n.jobs.join(",")]], state.nodes);
  drawList("reservations", [["reservation", (r) => r.name], ["nodes", (r) => r.nodes.join(",")],
    ["start", (r) => clock(r.start)], ["end", (r) => clock(r.end)], ["users", (r) => (r.users || ["root"]).join(",")],
    ["flags", (r) => r.flags.join(",")], ["jobs", (r) => r.jobs.join(",")]], state.reservations || []);
  drawCharts(state);
}

function clock(unix) {
  return new Date(unix * 1000).toLocaleString();
}

function mebibytes(bytes) {
  return Math.floor(bytes / 1048576);
}

function connect() {
  const status = document.getElementById("status");
  const events = new EventSource("/events");
  events.onopen = () => { status.textContent = "live"; };
  events.onmessage = (message) => { draw(JSON.parse(message.data)); status.textContent = "live"; };
  events.onerror = () => { status.textContent = "reconnecting…"; };  // EventSource retries by itself
}

connect();
