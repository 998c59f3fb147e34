"use strict";
// The explorer: the suite's data (the JSON above, written by jobs/page.py) drawn as figures
// you can point at, plus one computation of its own, token + position in float32, checked
// against the backends' bits. No library, no network.

const DATA = JSON.parse(document.getElementById("suite-data").textContent);
const BACKEND_COLOURS = { numpy: "#0072B2", torch: "#E69F00", jax: "#009E73" }; // Okabe-Ito

// --- exact numbers -----------------------------------------------------------------------

function decode(array) {
  // {dtype, shape, hex | values} -> {dtype, shape, values, bits}; float32 keeps each bit pattern.
  if (array.dtype === "float32") {
    const count = array.hex.length / 8;
    const values = new Float32Array(count);
    const bits = new Array(count);
    const view = new DataView(new ArrayBuffer(4));
    for (let i = 0; i < count; i++) {
      bits[i] = array.hex.slice(8 * i, 8 * i + 8);
      view.setUint32(0, parseInt(bits[i], 16));
      values[i] = view.getFloat32(0);
    }
    return { dtype: "float32", shape: array.shape, values, bits };
  }
  return { dtype: "float64", shape: array.shape, values: Float64Array.from(array.values), bits: null };
}

function float32Bits(value) {
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, value);
  return view.getUint32(0).toString(16).padStart(8, "0");
}

function shortest(value, dtype) {
  // The shortest decimal that reads back to the same float32 (or float64): exact, and short;
  // infinities and NaN spelled as NumPy prints them.
  if (Object.is(value, -0)) return "-0";
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
  if (dtype === "float64") return String(value);
  for (let digits = 1; digits <= 9; digits++) {
    const candidate = Number(value.toPrecision(digits));
    if (Math.fround(candidate) === value) return String(candidate);
  }
  return String(value);
}

// --- the suite's checks, with its messages (backends/validation.py) -------------------------

// The typed ids, read as Python would read them: separated by spaces or commas, a token of
// digits with an optional sign is an int, a decimal number (3.5, 1e3, .5) a float, anything
// else a string. np.asarray then picks the dtype the suite checks (see dtypeOf).
const INTEGER = /^[+-]?\d+$/;
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const INT64 = [-(2n ** 63n), 2n ** 63n], BIG = [2n ** 63n, 2n ** 64n]; // BIG: only uint64 holds them

function parseIds(text) {
  const tokens = text.split(/[\s,]+/).filter((t) => t !== "");
  const dtype = dtypeOf(tokens);
  // validation.as_host keeps ints that NumPy would make float64 or object (beyond int64) as
  // ints, so the check names the first id out of range rather than a dtype.
  if (dtype === "int64" || dtype === "uint64" || tokens.every((t) => INTEGER.test(t))) {
    return { ids: tokens.map((t) => BigInt(t)) };
  }
  return {
    error: ["TypeError", `token_ids must be integers, got dtype ${dtype}: cast to an integer ` +
      "dtype such as int64, after making sure every value is a whole number"],
  };
}

function dtypeOf(tokens) {
  // NumPy's choice for a list of Python ints, floats and strings, found as NumPy finds it: left
  // to right, each value's own dtype promoted into the dtype so far. An int beyond both int64
  // and uint64 makes an object array. Own dtypes: an int is int64, or uint64 if it only fits
  // there; a decimal number float64; a word "<U" + its length. int64 with uint64 gives float64;
  // a string with a number gives "<U" + the wider of the two, a number's text being int64 21
  // characters, uint64 20 and float64 32. So the order matters: 0 9223372036854775808 abc is
  // float64 then <U32, but 0 abc 9223372036854775808 is <U21 then still <U21.
  const own = tokens.map((t) => {
    if (!NUMBER.test(t)) return { width: t.length };
    if (!INTEGER.test(t)) return "float64";
    const v = BigInt(t);
    if (v >= INT64[0] && v < INT64[1]) return "int64";
    return v >= BIG[0] && v < BIG[1] ? "uint64" : "object";
  });
  if (own.includes("object")) return "object";
  if (!own.length) return "int64"; // no ids at all: an empty int64 array
  const width = (d) => (typeof d === "string" ? { int64: 21, uint64: 20, float64: 32 }[d] : d.width);
  const found = own.reduce((so, d) => {
    if (typeof so !== "string" || typeof d !== "string") return { width: Math.max(width(so), width(d)) };
    return so === d ? so : "float64";
  });
  return typeof found === "string" ? found : `<U${found.width}`;
}

function checkCall(ids, start, vocabSize, maxSeqLen) {
  // validation.check_token_ids then check_positions: the first problem, as [type, message].
  const bad = ids.findIndex((id) => id < 0n || id >= BigInt(vocabSize));
  if (bad >= 0) {
    return ["IndexError", `token id ${ids[bad]} at token_ids[${bad}] is out of range for ` +
      `vocab_size ${vocabSize}: ids must be in [0, ${vocabSize - 1}]; ` +
      "check that the tokenizer matches the token table"];
  }
  const length = ids.length;
  if (start + length > maxSeqLen) {
    const room = maxSeqLen - start;
    const fix = room > 0
      ? `use at most ${room} token${room === 1 ? "" : "s"} from start ${start}`
      : `start below ${maxSeqLen}`;
    return ["ValueError", `start ${start} + T ${length} = ${start + length} exceeds ` +
      `max_seq_len ${maxSeqLen}: ${fix}, or a longer position table`];
  }
  return null;
}

// --- colour ------------------------------------------------------------------------------

// ColorBrewer RdBu (colour-blind safe), blue for negative, red for positive, white at zero.
const DIVERGING = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
  "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"];
// ColorBrewer Blues, for values from 0 to 1 (attention weights).
const SEQUENTIAL = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6",
  "#2171b5", "#08519c", "#08306b"];
const MASKED = "#bdbdbd";

function interpolate(stops, t) {
  const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const a = hex(stops[i]), b = hex(stops[i + 1]), f = x - i;
  return `rgb(${a.map((c, k) => Math.round(c + (b[k] - c) * f)).join(",")})`;
}

function hex(colour) {
  return [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
}

function colourOf(value, scale, limit) {
  if (!Number.isFinite(value)) return MASKED;
  if (scale === "sequential") return interpolate(SEQUENTIAL, value / limit);
  return interpolate(DIVERGING, 0.5 + value / (2 * limit));
}

// --- figures -----------------------------------------------------------------------------

const tooltip = document.getElementById("tooltip");
const announce = document.getElementById("announce");

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

// Axis labels: 11 px text (.ticks in the markup), measured with the same font.
const LABEL_LINE = 13; // px between two rows' labels
const measure = document.createElement("canvas").getContext("2d");
measure.font = "11px system-ui, sans-serif";

function textWidth(text) {
  return measure.measureText(text).width;
}

function numbered(count) {
  return Array.from({ length: count }, (_, k) => String(k));
}

function labelStep(room, size) {
  // Label every row (column), or every 2nd, 4th, 8th ...: the fewest left out that still
  // gives each label `room` px, the rows (columns) being `size` px apart.
  let step = 1;
  while (step * size < room) step *= 2;
  return step;
}

function ticks(id, kind, labels, step, style) {
  // One box per row (column), lined up with the canvas; every step-th holds its label.
  const axis = element("div", { id, class: `ticks ${kind}`, "aria-hidden": "true" });
  labels.forEach((label, k) => axis.append(element("div", { style, text: k % step ? "" : label })));
  return axis;
}

function heatmap(parent, options) {
  // A grid of values on one colour scale, its rows labelled (options.rows: one label each) and
  // its columns too (options.cols: a count, numbered from 0, or words, each written sideways);
  // options.axes names the two. Pointing at a cell, or focusing the figure and moving with the
  // arrow keys, shows its exact value. The drawn values are also on the canvas: data-bits
  // (float32) or data-values (float64), row-major.
  const { values, bits = null, dtype = "float32", title, describe } = options;
  const rows = options.rows.length;
  const words = Array.isArray(options.cols) ? options.cols : null;
  const cols = words ? words.length : options.cols;
  const scale = options.scale || "diverging";
  const limit = options.limit || 1;
  const cell = options.cell || Math.max(4, Math.min(22, Math.floor(480 / Math.max(cols, 1))));
  const high = options.rowHeight || cell; // taller rows where every row's label must show
  const figure = element("div", { class: "figure" });
  figure.append(element("h3", { text: title }));
  const canvas = element("canvas", {
    id: options.id,
    width: Math.max(cols * cell, 1),
    height: Math.max(rows * high, 1),
    tabindex: "0",
    role: "img",
    "aria-label": `${title}: ${describe} Focus it and use the arrow keys to read each value.`,
    "data-rows": rows,
    "data-cols": cols,
  });
  if (bits) canvas.dataset.bits = bits.join(" ");
  else canvas.dataset.values = Array.from(values, (v) => shortest(v, "float64")).join(" ");
  // The labels repeat what the tooltips say, so screen readers skip them.
  const rowTicks = ticks(`${options.id}-rows`, "rows", options.rows, labelStep(LABEL_LINE, high),
    `height: ${high}px; line-height: ${high}px`);
  const colTicks = words
    ? ticks(`${options.id}-cols`, "cols words", words, labelStep(LABEL_LINE, cell),
      `width: ${cell}px; line-height: ${cell}px`)
    : ticks(`${options.id}-cols`, "cols", numbered(cols), labelStep(textWidth(String(cols - 1)) + 6, cell),
      `width: ${cell}px`);
  figure.append(element("div", { class: "plot" },
    element("div", { class: "axis", text: options.axes[0], "aria-hidden": "true" }), element("div"),
    rowTicks, canvas,
    element("div", { class: "axis", text: options.axes[1], "aria-hidden": "true" }), colTicks));
  const context = canvas.getContext("2d");
  let active = null;

  function draw() {
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        context.fillStyle = colourOf(values[i * cols + j], scale, limit);
        context.fillRect(j * cell, i * high, cell, high);
      }
    }
    if (active) {
      context.strokeStyle = "#000";
      context.lineWidth = 2;
      context.strokeRect(active[1] * cell + 1, active[0] * high + 1, cell - 2, high - 2);
    }
  }

  function show(i, j, x, y) {
    const k = i * cols + j;
    const value = values[k];
    const lines = [options.tip(i, j), `value: ${shortest(value, dtype)}`];
    if (bits) lines.push(`bits: 0x${bits[k]} (float32)`);
    tooltip.textContent = lines.join("\n");
    tooltip.style.display = "block";
    const width = tooltip.offsetWidth, height = tooltip.offsetHeight;
    tooltip.style.left = `${Math.max(4, Math.min(x + 14, window.innerWidth - width - 4))}px`;
    tooltip.style.top = `${y + 14 + height > window.innerHeight ? y - height - 8 : y + 14}px`;
  }

  function cellAt(event) {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor(((event.clientX - box.left) / box.width) * cols);
    const i = Math.floor(((event.clientY - box.top) / box.height) * rows);
    return i >= 0 && i < rows && j >= 0 && j < cols ? [i, j] : null;
  }

  canvas.addEventListener("mousemove", (event) => {
    const cell = cellAt(event);
    if (cell) show(cell[0], cell[1], event.clientX, event.clientY);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.style.display = "none"; });
  canvas.addEventListener("mousedown", (event) => { active = cellAt(event) || active; });
  canvas.addEventListener("focus", () => {
    active = active || [0, 0];
    draw();
    if (canvas.matches(":focus-visible")) showActive(); // from the keyboard, not a click
  });
  canvas.addEventListener("blur", () => {
    active = null;
    tooltip.style.display = "none";
    draw();
  });
  canvas.addEventListener("keydown", (event) => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key === "Escape") tooltip.style.display = "none";
    if (!moves[event.key] || !active) return;
    event.preventDefault();
    active = [
      Math.min(Math.max(active[0] + moves[event.key][0], 0), rows - 1),
      Math.min(Math.max(active[1] + moves[event.key][1], 0), cols - 1),
    ];
    draw();
    showActive();
  });

  function showActive() {
    if (!rows || !cols) return;
    // Keep the cell in view inside a figure that scrolls sideways (a narrow window); the row
    // labels sit left of the canvas.
    const box = canvas.getBoundingClientRect();
    const x = box.left - figure.getBoundingClientRect().left + figure.scrollLeft + active[1] * cell;
    if (x < figure.scrollLeft || x + cell > figure.scrollLeft + figure.clientWidth) {
      figure.scrollLeft = x - figure.clientWidth / 2;
    }
    const moved = canvas.getBoundingClientRect();
    show(active[0], active[1], moved.left + (active[1] + 1) * cell, moved.top + active[0] * high);
    announce.textContent = tooltip.textContent; // read out by screen readers
  }

  draw();
  parent.append(figure);
}

function scaleLegend(parent, limit, scale = "diverging") {
  const canvas = element("canvas", { width: 160, height: 12, role: "img",
    "aria-label": scale === "diverging"
      ? `colour scale: blue ${-limit.toPrecision(3)}, white 0, red ${limit.toPrecision(3)}`
      : `colour scale: white 0, dark blue ${limit.toPrecision(3)}` });
  const context = canvas.getContext("2d");
  for (let x = 0; x < 160; x++) {
    const t = x / 159;
    context.fillStyle = scale === "diverging" ? interpolate(DIVERGING, t) : interpolate(SEQUENTIAL, t);
    context.fillRect(x, 0, 1, 12);
  }
  const low = scale === "diverging" ? -limit : 0;
  parent.append(element("div", { class: "scale" },
    element("span", { text: low.toPrecision(3) }), canvas,
    element("span", { text: limit.toPrecision(3) })));
}

function largest(...arrays) {
  let top = 0;
  for (const array of arrays) for (const v of array) if (Number.isFinite(v)) top = Math.max(top, Math.abs(v));
  return top || 1;
}

function rowsOf(table, ids, columns) {
  // table (R, C) decoded -> the rows ids, their first `columns` columns, as values and bits
  const width = table.shape[1];
  const values = [], bits = [];
  for (const id of ids) {
    for (let j = 0; j < columns; j++) {
      values.push(table.values[Number(id) * width + j]);
      bits.push(table.bits[Number(id) * width + j]);
    }
  }
  return { values: Float32Array.from(values), bits };
}

// --- views -------------------------------------------------------------------------------

function seedView(view) {
  const s = DATA.seed;
  const T = s.token_ids.length;
  const tokens = decode(s.token_table), positions = decode(s.position_table);
  const tokenRows = rowsOf(tokens, s.token_ids, s.dim);
  const positionIds = s.token_ids.map((_, t) => s.start + t);
  const positionRows = rowsOf(positions, positionIds, s.dim);
  const sums = Object.fromEntries(DATA.backends.map((b) => [b, decode(s[`sum_${b}`])]));
  const limit = largest(tokenRows.values, positionRows.values, ...Object.values(sums).map((x) => x.values));
  const label = (t) => `token #${s.token_ids[t]} @ pos ${s.start + t}`;
  const rows = s.token_ids.map((id, t) => `${id} @ ${s.start + t}`), axes = ["id @ pos", "dim"];
  view.append(element("h2", { text: "The seed demo: x = token_table[token_ids] + position_table[start:start + T]" }));
  view.append(element("p", { text: `vocab_size ${s.vocab_size}, dim ${s.dim}, max_seq_len ${s.max_seq_len}, ` +
    `${s.dtype}, seed ${s.seed}; token_ids ${s.token_ids.join(" ")} at start ${s.start}. Rows are ` +
    "tokens, columns are dimensions; one colour scale for every panel." }));
  scaleLegend(view, limit);
  const inputs = element("div", { class: "row" });
  heatmap(inputs, { id: "seed-token", rows, cols: s.dim, axes, ...tokenRows, limit, title: "token_table[token_ids]",
    describe: `${T} token rows of ${s.dim} dimensions.`, tip: (i, j) => `${label(i)} · dim ${j} · token row` });
  heatmap(inputs, { id: "seed-position", rows, cols: s.dim, axes, ...positionRows, limit,
    title: `position_table[${s.start}:${s.start + T}]`, describe: `${T} position rows.`,
    tip: (i, j) => `${label(i)} · dim ${j} · position row` });
  view.append(inputs);
  const outputs = element("div", { class: "row" });
  for (const backend of DATA.backends) {
    heatmap(outputs, { id: `seed-sum-${backend}`, rows, cols: s.dim, axes, values: sums[backend].values,
      bits: sums[backend].bits, limit, title: `${backend}: token + position`,
      describe: `the sum as ${backend} computed it.`,
      tip: (i, j) => `backend ${backend} · ${label(i)} · dim ${j}` });
  }
  view.append(outputs);
  view.append(element("h3", { text: "The parity verdict, as compare.py prints it" }));
  view.append(element("pre", { id: "seed-parity", text: s.parity }));
}

function liveView(view) {
  const s = DATA.seed;
  const tokens = decode(s.token_table), positions = decode(s.position_table);
  view.append(element("h2", { text: "Recompute in the browser: a fourth implementation" }));
  view.append(element("p", { text: "Change the ids or slide start: the page adds the rows itself, in " +
    "float32 (JavaScript doubles rounded with Math.fround: one correctly rounded float32 addition), " +
    "and, where the backends ran on the same input, compares its bits with theirs. Bad input gets " +
    "the suite's own message." }));
  const ids = element("input", { type: "text", id: "live-ids", value: s.token_ids.join(" "),
    "aria-describedby": "live-message" });
  const start = element("input", { type: "range", id: "live-start", min: "0", max: String(s.max_seq_len),
    step: "1", value: String(s.start) });
  const startValue = element("output", { id: "live-start-value", for: "live-start", text: String(s.start) });
  view.append(element("div", {}, element("label", { for: "live-ids", text: "token_ids" }), ids));
  view.append(element("div", {}, element("label", { for: "live-start", text: "start" }), start, " ", startValue));
  const message = element("div", { id: "live-message", class: "message", role: "status", "aria-live": "polite" });
  const legend = element("div");
  const figures = element("div", { class: "row", id: "live-figures" });
  const compared = element("div", { id: "live-compared", "aria-live": "polite" });
  view.append(message, legend, figures, compared);

  function update() {
    startValue.textContent = start.value;
    legend.replaceChildren();
    figures.replaceChildren(); // a removed canvas gets no mouseleave: its tooltip goes here
    tooltip.style.display = "none";
    compared.replaceChildren();
    message.textContent = "";
    const parsed = parseIds(ids.value);
    const at = Number(start.value);
    const problem = parsed.error || checkCall(parsed.ids, at, s.vocab_size, s.max_seq_len);
    if (problem) {
      message.textContent = `${problem[0]}: ${problem[1]}`;
      return;
    }
    const T = parsed.ids.length;
    const tokenRows = rowsOf(tokens, parsed.ids, s.dim);
    const positionRows = rowsOf(positions, parsed.ids.map((_, t) => at + t), s.dim);
    const sum = Float32Array.from(tokenRows.values, (v, k) => Math.fround(v + positionRows.values[k]));
    const sumBits = Array.from(sum, float32Bits);
    const limit = largest(tokenRows.values, positionRows.values, sum);
    const label = (t) => `token #${parsed.ids[t]} @ pos ${at + t}`;
    const rows = parsed.ids.map((id, t) => `${id} @ ${at + t}`), axes = ["id @ pos", "dim"];
    scaleLegend(legend, limit);
    heatmap(figures, { id: "live-position", rows, cols: s.dim, axes, ...positionRows, limit,
      title: `position_table[${at}:${at + T}]`, describe: "the position rows for these positions.",
      tip: (i, j) => `${label(i)} · dim ${j} · position row` });
    heatmap(figures, { id: "live-sum", rows, cols: s.dim, axes, values: sum, bits: sumBits, limit,
      title: "token + position, computed by this page", describe: "the browser's float32 sum.",
      tip: (i, j) => `browser · ${label(i)} · dim ${j}` });
    const run = s.runs.find((r) => r.start === at && r.token_ids.length === T &&
      r.token_ids.every((id, t) => BigInt(id) === parsed.ids[t]));
    if (!run) {
      const starts = s.runs.map((r) => r.start);
      compared.append(element("p", { text: `The backends ran on token_ids ${s.token_ids.join(" ")} at ` +
        `starts ${starts[0]}–${starts[starts.length - 1]}; these inputs the page computes alone ` +
        "(the tests hold it to NumPy's expression for random ids and starts)." }));
      return;
    }
    const table = element("table", { class: "numbers", id: "live-table" });
    table.append(element("tr", {}, element("th", { text: "backend" }), element("th", { text: "values" }),
      element("th", { text: "same bits as the browser" })));
    for (const backend of DATA.backends) {
      const theirs = decode(run.sums[backend]).bits;
      const same = theirs.filter((b, k) => b === sumBits[k]).length;
      table.append(element("tr", {}, element("td", { text: backend }), element("td", { text: String(theirs.length) }),
        element("td", { class: same === theirs.length ? "ok" : "bad", text: `${same} of ${theirs.length}` })));
    }
    compared.append(table);
    const all = DATA.backends.every((b) => decode(run.sums[b]).bits.every((x, k) => x === sumBits[k]));
    compared.append(element("p", { class: `verdict ${all ? "ok" : "bad"}`, id: "live-verdict",
      text: all ? `browser bit-identical to ${DATA.backends.join(", ")}`
        : "the browser's bits differ from a backend's" }));
  }

  ids.addEventListener("input", update);
  start.addEventListener("input", update);
  update();
}

function schemesView(view) {
  const sin = DATA.schemes.sinusoidal;
  const table = decode(sin.table);
  view.append(element("h2", { text: "Sinusoidal positions" }));
  view.append(element("p", { text: `PE[p, 2i] = sin(p·w_i), PE[p, 2i+1] = cos(p·w_i), w_i = ${sin.base}^(−2i/${sin.dim}): ` +
    "each (sin, cos) pair turns at its own frequency. Frequencies w_i: " +
    sin.frequencies.map((w) => w.toPrecision(3)).join(", ") }));
  // drawn dims x positions: transpose the (positions, dim) table
  const transposed = new Float64Array(table.values.length);
  for (let p = 0; p < sin.positions; p++) {
    for (let d = 0; d < sin.dim; d++) transposed[d * sin.positions + p] = table.values[p * sin.dim + d];
  }
  scaleLegend(view, 1);
  heatmap(view, { id: "sinusoidal-table", rows: numbered(sin.dim), cols: sin.positions,
    axes: ["dim", "position"], values: transposed, dtype: "float64",
    limit: 1, cell: 6, title: `sinusoidal table: ${sin.dim} dims × ${sin.positions} positions (float64 reference)`,
    describe: "rows are dimensions, columns positions; fast waves at the top, slow ones below.",
    tip: (i, j) => `position ${j} · dim ${i} (${i % 2 ? "cos" : "sin"}, w = ${sin.frequencies[i >> 1].toPrecision(4)})` });

  const rope = DATA.schemes.rope;
  view.append(element("h2", { text: "RoPE: rotate q and k, and the score depends only on m − n" }));
  const pair = element("select", { id: "rope-pair" });
  rope.frequencies.forEach((w, i) => pair.append(element("option", { value: String(i), text: `pair ${i} (w = ${w.toPrecision(3)})` })));
  const position = element("input", { type: "range", id: "rope-position", min: "0", max: String(rope.scores.shape[0] - 1), value: "0", step: "1" });
  const positionValue = element("output", { for: "rope-position", text: "0" });
  view.append(element("div", {}, element("label", { for: "rope-pair", text: "pair" }), pair, " ",
    element("label", { for: "rope-position", text: "position m" }), position, " ", positionValue));
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("width", "220");
  svg.setAttribute("height", "220");
  svg.setAttribute("role", "img");
  svg.setAttribute("id", "rope-circle");
  const row = decode(rope.q_row).values;
  const half = rope.dim / 2;
  function drawPair() {
    const i = Number(pair.value), m = Number(position.value);
    positionValue.textContent = position.value;
    const a = row[i], b = row[i + half], angle = m * rope.frequencies[i];
    const x = a * Math.cos(angle) - b * Math.sin(angle), y = b * Math.cos(angle) + a * Math.sin(angle);
    const r = Math.hypot(a, b) || 1, scale = 90 / r;
    svg.setAttribute("aria-label", `token #${rope.token_ids[0]}'s pair ${i} (dims ${i} and ${i + half}) ` +
      `at position ${m}: turned by ${angle.toFixed(3)} rad to (${x.toFixed(3)}, ${y.toFixed(3)}); its length stays ${r.toFixed(3)}`);
    svg.innerHTML = `<circle cx="110" cy="110" r="90" fill="none" stroke="#ccc"/>` +
      `<line x1="110" y1="110" x2="${110 + a * scale}" y2="${110 - b * scale}" stroke="#bbb" stroke-width="2"/>` +
      `<line x1="110" y1="110" x2="${110 + x * scale}" y2="${110 - y * scale}" stroke="#b2182b" stroke-width="3"/>` +
      `<text x="6" y="14">grey: position 0; red: position ${m}</text>` +
      `<text x="6" y="214">angle m·w = ${angle.toFixed(3)} rad</text>`;
  }
  pair.addEventListener("change", drawPair);
  position.addEventListener("input", drawPair);
  drawPair();
  const figures = element("div", { class: "row" });
  const circle = element("div", { class: "figure" }, element("h3", { text: `token #${rope.token_ids[0]}: one pair of q, rotating` }), svg);
  figures.append(circle);
  const scores = decode(rope.scores);
  const P = rope.scores.shape[0];
  const scoresFigure = element("div");
  scaleLegend(scoresFigure, largest(scores.values));
  heatmap(scoresFigure, { id: "rope-scores", rows: numbered(P), cols: P, axes: ["m", "n"], values: scores.values, dtype: "float64",
    limit: largest(scores.values), cell: 6,
    title: `q(m)·k(n): token #${rope.token_ids[0]} against #${rope.token_ids[1]}`,
    describe: "the score of the two tokens at every pair of positions, rotated by the suite's " +
      "float32 RoPE: constant along each diagonal up to float32 rounding (about 1e-6).",
    tip: (i, j) => `m = ${i}, n = ${j}, m − n = ${i - j}` });
  figures.append(scoresFigure);
  view.append(figures);

  for (const scheme of ["alibi", "t5"]) biasFigures(view, scheme, DATA.schemes[scheme]);
}

function biasFigures(view, scheme, found) {
  // Each head's bias (queries down, keys across) and the attention the bias alone makes.
  const bias = decode(found.bias), attention = decode(found.attention);
  const H = found.num_heads, W = found.window;
  view.append(element("h2", { text: scheme === "alibi"
    ? "ALiBi: −slope × distance added to each head's scores"
    : "T5: a learned bias per head and bucketed distance (a random table here)" }));
  view.append(element("p", { text: scheme === "alibi"
    ? "Grey: keys after the query, where the bias is −inf (the causal mask, folded in); " +
      "their attention weight is 0."
    : "Keys after the query share the bucket of distance 0 in the bias; the causal mask gives " +
      "them attention weight 0." }));
  view.append(element("p", { class: "caption", text: found.summary }));
  const legends = element("div", { class: "row" });
  scaleLegend(legends, largest(bias.values));
  scaleLegend(legends, 1, "sequential");
  view.append(legends);
  const heads = element("div", { class: "row" });
  for (let h = 0; h < H; h++) {
    const part = (x) => ({
      values: x.values.slice(h * W * W, (h + 1) * W * W),
      bits: x.bits.slice(h * W * W, (h + 1) * W * W),
    });
    const head = scheme === "alibi" ? `head ${h} (slope ${found.slopes[h]})` : `head ${h}`;
    const pair = element("div", { class: "row" }); // a head's two panels stay together
    heatmap(pair, { id: `${scheme}-bias-${h}`, rows: numbered(W), cols: W, axes: ["query", "key"], ...part(bias),
      limit: largest(bias.values), cell: 9, title: `${head}: bias`,
      describe: "query positions down, key positions across.",
      tip: (i, j) => `${scheme} head ${h} · query ${i} · key ${j} · bias` });
    heatmap(pair, { id: `${scheme}-attention-${h}`, rows: numbered(W), cols: W,
      axes: ["query", "key"], ...part(attention), limit: 1,
      cell: 9, scale: "sequential", title: `${head}: attention`,
      describe: "the softmax over the keys of the bias alone, causal.",
      tip: (i, j) => `${scheme} head ${h} · query ${i} · key ${j} · attention` });
    heads.append(pair);
  }
  view.append(heads);
}

function realView(view) {
  const real = DATA.real;
  if (!real) {
    view.append(element("p", { text: "This page was written without the real tables (MiniLM's package was not installed)." }));
    return;
  }
  view.append(element("h2", { text: `Real tables: ${real.model}` }));
  view.append(element("p", { text: `The first ${real.dims_shown} of ${real.dim} dimensions. [CLS] and [SEP] are ` +
    "the tokens BERT adds; each label is the token and its position." }));
  const choose = element("select", { id: "real-preset" });
  real.presets.forEach((p, i) => choose.append(element("option", { value: String(i), text: p.text })));
  view.append(element("div", {}, element("label", { for: "real-preset", text: "sentence" }), choose));
  const figures = element("div", { id: "real-figures" });
  view.append(figures);
  function draw() {
    figures.replaceChildren();
    tooltip.style.display = "none";
    const preset = real.presets[Number(choose.value)];
    const tokens = decode(preset.token_rows), positions = decode(preset.position_rows);
    const sums = Object.fromEntries(Object.entries(preset.sums).map(([b, x]) => [b, decode(x)]));
    const T = preset.labels.length, D = real.dims_shown;
    const limit = largest(tokens.values, positions.values, ...Object.values(sums).map((x) => x.values));
    const names = Object.keys(sums);
    const same = names.every((b) => sums[b].bits.every((x, k) => x === sums[names[0]].bits[k]));
    figures.append(element("p", { class: `verdict ${same && preset.agree ? "ok" : "bad"}`,
      text: same && preset.agree ? `${names.join(", ")}: bit-identical on this sentence` : "the backends differ" }));
    scaleLegend(figures, limit);
    const row = element("div", { class: "row" });
    const tip = (what) => (i, j) => `${preset.labels[i]} (id ${preset.token_ids[i]}) · dim ${j} · ${what}`;
    // Rows a label's height, so that every token is named; columns 6 px, so that the three
    // panels and their labels fit side by side in 1280 px.
    const grid = { rows: preset.labels, cols: D, axes: ["token @ pos", "dim"], cell: 6, rowHeight: LABEL_LINE };
    heatmap(row, { id: "real-token", ...grid, ...tokens, limit, title: "token rows",
      describe: `${T} tokens.`, tip: tip("token row") });
    heatmap(row, { id: "real-position", ...grid, ...positions, limit, title: "position rows",
      describe: `positions 0 to ${T - 1}.`, tip: tip("position row") });
    heatmap(row, { id: "real-sum", ...grid, ...sums[names[0]], limit,
      title: `token + position (${names[0]})`, describe: "their sum.", tip: tip(`sum, ${names[0]}`) });
    figures.append(row);
    figures.append(element("p", { class: "caption", text: "Tokens: " + preset.labels.join(" · ") }));
  }
  choose.addEventListener("change", draw);
  draw();
  const sim = real.similarity, matrix = decode(sim.matrix), n = sim.labels.length;
  view.append(element("h2", { text: "Word similarity: cosine of the raw token rows" }));
  view.append(element("p", { text: "Before any layer runs, training alone put related words near each other. " +
    "Words: " + sim.labels.join(", ") }));
  scaleLegend(view, 1);
  heatmap(view, { id: "real-similarity", rows: sim.labels, cols: sim.labels, axes: ["word", "word"], values: matrix.values, dtype: "float64", limit: 1, cell: 32,
    title: "cosine similarity", describe: `${n} words against each other.`,
    tip: (i, j) => `${sim.labels[i]} · ${sim.labels[j]}` });
}

function trainingView(view) {
  const training = DATA.training;
  const s = training.settings;
  view.append(element("h2", { text: "Training in lockstep" }));
  view.append(element("p", { text: `The same model, weights and batches in every backend: ${s.steps} steps of Adam ` +
    `(lr ${s.lr}), ${s.dtype}. The task ("dog bites man": the target is the subject) needs word order; ` +
    "test accuracy is on noun pairs never seen in training. Lines of the backends lie on top of each other." }));
  const schemes = [...new Set(training.curves.map((c) => c.scheme))];
  const charts = element("div", { class: "row" });
  for (const scheme of schemes) {
    const curves = training.curves.filter((c) => c.scheme === scheme);
    charts.append(lineChart(`${scheme}: training loss`, curves, "loss", true));
    charts.append(lineChart(`${scheme}: test accuracy`, curves, "test_accuracy", false));
  }
  view.append(charts);
  const table = element("table", { class: "numbers", id: "training-table" });
  table.append(element("caption", { text: "The curves' last values (their text alternative)" }));
  table.append(element("tr", {}, ...["scheme", "backend", "final loss", "final test accuracy"].map((t) => element("th", { text: t }))));
  for (const c of training.curves) {
    table.append(element("tr", {}, element("td", { text: c.scheme }), element("td", { text: c.backend }),
      element("td", { text: c.loss[c.loss.length - 1].toPrecision(4) }),
      element("td", { text: c.test_accuracy[c.test_accuracy.length - 1].toFixed(3) })));
  }
  view.append(table);
}

function lineChart(title, curves, key, log) {
  // One line per backend (the first solid and widest, the others dashed on top); decade ticks
  // on a log axis; the legend's words in the ink colour beside a swatch of each line.
  const width = 270, height = 170, left = 40, bottom = 40;
  const all = curves.flatMap((c) => c[key]).filter((v) => v > 0 || !log);
  const transform = log ? Math.log10 : (v) => v;
  const low = log ? Math.floor(Math.log10(Math.min(...all))) : 0;
  const high = log ? Math.ceil(Math.log10(Math.max(...all))) : 1;
  const steps = curves[0][key].length;
  const x = (t) => left + (t / Math.max(steps - 1, 1)) * (width - left - 6);
  const y = (v) => 6 + (1 - (transform(Math.max(v, 1e-12)) - low) / (high - low || 1)) * (height - bottom - 6);
  const lines = curves.map((c, k) => `<polyline fill="none" stroke="${BACKEND_COLOURS[c.backend] || "#333"}" ` +
    `stroke-width="${3 - k}" ${k ? 'stroke-dasharray="4 3"' : ""} points="${c[key].map((v, t) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}"/>`).join("");
  const levels = log ? Array.from({ length: high - low + 1 }, (_, k) => 10 ** (low + k)) : [0, 0.5, 1];
  const ticks = levels.map((v) => `<text x="2" y="${y(v) + 4}">${log ? `1e${Math.round(Math.log10(v))}` : v}</text>`).join("") +
    `<text x="${left}" y="${height - bottom + 14}">0</text>` +
    `<text x="${width - 30}" y="${height - bottom + 14}">${steps}</text>` +
    `<text x="${(left + width) / 2 - 10}" y="${height - bottom + 14}">step</text>`;
  const legend = curves.map((c, k) => `<line x1="${left + 75 * k}" y1="${height - 8}" x2="${left + 75 * k + 16}" ` +
    `y2="${height - 8}" stroke="${BACKEND_COLOURS[c.backend] || "#333"}" stroke-width="3" ${k ? 'stroke-dasharray="4 3"' : ""}/>` +
    `<text x="${left + 75 * k + 20}" y="${height - 4}">${c.backend}</text>`).join("");
  const figure = element("div", { class: "figure" });
  figure.append(element("h3", { text: title }));
  const last = curves.map((c) => `${c.backend} ${c[key][steps - 1].toPrecision(3)}`).join(", ");
  figure.insertAdjacentHTML("beforeend", `<svg width="${width}" height="${height}" role="img" aria-label="${title} over ${steps} steps; last values: ${last}">` +
    `<line x1="${left}" y1="${height - bottom}" x2="${width - 6}" y2="${height - bottom}" stroke="#999"/>` +
    `<line x1="${left}" y1="6" x2="${left}" y2="${height - bottom}" stroke="#999"/>${ticks}${lines}${legend}</svg>`);
  return figure;
}

function conformanceView(view) {
  // The matrix make conformance records (docs/conformance.json): a row per implementation, a
  // cell per column as known.cells words it, filters, and each cell's checks on demand.
  const matrix = DATA.conformance;
  view.append(element("h2", { text: "Conformance: the implementations people use, against the contracts" }));
  if (matrix.missing) {
    view.append(element("p", { id: "conformance-missing", class: "message", text: matrix.missing }));
    return;
  }
  view.append(element("p", { text: "The suite's battery (compare.py check) run on each implementation, " +
    "through the path it names: ✓ conforms, ✗ differs, — the column does not apply. Choose a " +
    "cell (click it, or Tab to it and press Enter) to read the checks behind it." }));
  const rows = matrix.rows;
  const present = (values) => [...new Set(values)];
  const filters = element("div", { class: "filters" });
  const choices = {};
  for (const [key, every, options] of [
    ["kind", "every kind", present(rows.map((r) => r.kind))],
    ["path", "every path", present(rows.map((r) => r.path))],
    ["finding", "any finding", matrix.findings], // every one, with its count: "not run (0)" says none
  ]) {
    const choose = element("select", { id: `conformance-${key}` });
    choose.append(element("option", { value: "", text: every }));
    for (const option of options) {
      const said = key === "finding" ? `${option} (${rows.filter((r) => r.findings.includes(option)).length})` : option;
      choose.append(element("option", { value: option, text: said }));
    }
    choose.addEventListener("change", filter);
    choices[key] = choose;
    filters.append(element("span", {}, element("label", { for: choose.id, text: key }), choose));
  }
  const count = element("span", { id: "conformance-count", role: "status" });
  filters.append(count);
  view.append(filters);

  const table = element("table", { class: "numbers matrix", id: "conformance-table" });
  const heads = ["implementation", "versions", "kind", "framework", "path", ...matrix.columns];
  // The row's own columns in fixed widths; the matrix's columns share the rest equally.
  table.append(element("colgroup", {}, ...["14em", "8em", "6em", "7em", "7em"].map((w) => element("col", { style: `width: ${w}` })),
    ...matrix.columns.map(() => element("col"))));
  table.append(element("thead", {}, element("tr", {}, ...heads.map((h) => element("th", { scope: "col", text: h })))));
  const body = element("tbody");
  const detail = element("div", { id: "conformance-detail", "aria-live": "polite" });
  const lines = rows.map((row) => {
    const line = element("tr", {}, element("th", { scope: "row" }, clamped(row.name)),
      ...[row.versions, row.kind, row.framework, row.path].map((t) => element("td", {}, clamped(t))));
    if (row.missing) {
      line.append(element("td", { colspan: matrix.columns.length, class: "caption" }, clamped(`not run: ${row.missing}`)));
    }
    (row.cells || []).forEach((cell, k) => {
      const mark = cell.text.startsWith("✓") ? " ok" : cell.text.startsWith("✗") ? " bad" : "";
      const button = element("button", { class: `cell${mark}`, "aria-expanded": "false",
        "aria-controls": detail.id }, clamped(cell.text));
      button.addEventListener("click", () => open(row, k, button));
      line.append(element("td", {}, button));
    });
    body.append(line);
    return line;
  });
  table.append(body);
  const box = element("div", { id: "conformance-scroll" }, table);
  view.append(box, detail);
  view.append(element("p", { class: "caption", id: "conformance-source", text: `From ${matrix.source}, ` +
    `written by make conformance. Versions: ${matrix.versions.join(", ")}.` }));

  function filter() {
    let shown = 0;
    const wanted = choices.finding.value;
    rows.forEach((row, r) => {
      const match = ["kind", "path"].every((key) => !choices[key].value || choices[key].value === row[key]) &&
        (!wanted || row.findings.includes(wanted));
      lines[r].hidden = !match;
      shown += match;
    });
    count.textContent = `${shown} of ${rows.length} rows`;
  }

  function open(row, k, button) {
    for (const other of table.querySelectorAll("[aria-expanded=true]")) other.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-expanded", "true");
    const cell = row.cells[k], column = matrix.columns[k];
    const close = element("button", { id: "conformance-close", text: "close" });
    close.addEventListener("click", () => {
      detail.replaceChildren();
      box.classList.remove("open");
      button.setAttribute("aria-expanded", "false");
      button.focus();
    });
    detail.replaceChildren(element("h3", {}, `${row.name} (${row.path}) · ${column}: ${cell.text} `, close));
    if (!cell.checks.length) {
      detail.append(element("p", { text: column === "layout" && cell.text !== "—"
        ? "No check names another layout, and the row's checks conform: it uses the contract's own."
        : "No check of this row falls in this column." }));
    }
    for (const i of cell.checks) detail.append(checkDetail(row.checks[i]));
    // The table's box shrinks to make room: the chosen cell, its checks below, both in view.
    box.classList.add("open");
    button.scrollIntoView({ block: "nearest" });
    detail.scrollIntoView({ block: "nearest" });
  }

  filter();
}

function clamped(text) {
  // A table cell's text, drawn in at most two lines (.clamp); the whole of it is its tooltip.
  return element("span", { class: "clamp", title: text, text });
}

function checkDetail(check) {
  // One check: its status, what it found (for a bad id: raises, or the silent answer), its
  // error in ulps, along a production path its bits against eager's, its detail, and where
  // it has one, its phase error against position.
  const said = [check.answer && `answer: ${check.answer}`,
    check.ulps !== null && `${typeof check.ulps === "number" ? threeDigits(check.ulps) : check.ulps} ulp`,
    check.eager && `against eager: ${check.eager}`];
  const part = element("div", { class: "check" },
    element("p", {}, element("span", { class: "mono", text: check.check }), " ",
      element("span", { class: `verdict ${check.status === "conforms" ? "ok" : "bad"}`, text: check.status }),
      said.filter(Boolean).map((s) => ` · ${s}`).join("")),
    element("p", { class: "caption", text: check.detail }));
  if (check.phase && check.phase.radians.some((r) => Number.isFinite(Number(r)))) part.append(phasePicture(check));
  return part;
}

function threeDigits(value) {
  // 0.0006, 1.26, 4610, 7.00e+8: three significant digits without trailing zeros, short
  return Math.abs(value) >= 1e5 ? value.toExponential(2) : String(Number(value.toPrecision(3)));
}

function phasePicture(check) {
  // The largest phase error over frequencies against position, log-log as docs/conformance.png
  // draws it: position 0 drawn at 0.5, an exact angle at 1e-9 (a log axis has no zero).
  const FLOOR = 1e-9, width = 340, height = 170, left = 44, bottom = 30, right = 20;
  const points = check.phase.positions.map((p, k) => [p, Number(check.phase.radians[k])])
    .filter(([, r]) => Number.isFinite(r));
  const xs = points.map(([p]) => Math.log10(Math.max(p, 0.5)));
  const ys = points.map(([, r]) => Math.log10(Math.max(r, FLOOR)));
  function decadesAround(values) { // the whole decades that hold every value: at least one
    const low = Math.floor(Math.min(...values));
    return [low, Math.max(Math.ceil(Math.max(...values)), low + 1)];
  }
  const [xLow, xHigh] = decadesAround(xs), [yLow, yHigh] = decadesAround(ys);
  const x = (v) => left + ((v - xLow) / (xHigh - xLow)) * (width - left - right);
  const y = (v) => 8 + (1 - (v - yLow) / (yHigh - yLow)) * (height - bottom - 8);
  const decades = (low, high) => Array.from({ length: high - low + 1 }, (_, k) => low + k)
    .filter((d, k, all) => k % Math.ceil(all.length / 7) === 0);
  const colour = check.status === "conforms" ? BACKEND_COLOURS.numpy : "#b2182b";
  const path = xs.map((v, k) => `${x(v).toFixed(1)},${y(ys[k]).toFixed(1)}`).join(" ");
  const marks = xs.map((v, k) => `<circle cx="${x(v).toFixed(1)}" cy="${y(ys[k]).toFixed(1)}" r="2.5" fill="${colour}"/>`).join("");
  const ticks = decades(yLow, yHigh).map((d) => `<text x="2" y="${y(d) + 4}">1e${d}</text>`).join("") +
    decades(xLow, xHigh).map((d) => `<text x="${x(d) - 8}" y="${height - bottom + 14}">1e${d}</text>`).join("") +
    `<text x="${left}" y="${height - 2}">position (0 drawn at 0.5)</text>`;
  const worst = points.reduce((a, b) => (b[1] > a[1] ? b : a), [0, 0]);
  const label = `${check.check}: phase error at ${points.length} positions from ${points[0][0]} to ` +
    `${points[points.length - 1][0]}, on log axes; the largest ${threeDigits(worst[1])} radians at position ${worst[0]}`;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  for (const [key, value] of Object.entries({ class: "phase", width, height, role: "img", "aria-label": label })) {
    svg.setAttribute(key, value);
  }
  svg.innerHTML = `<line x1="${left}" y1="${height - bottom}" x2="${width - right}" y2="${height - bottom}" stroke="#999"/>` +
    `<line x1="${left}" y1="6" x2="${left}" y2="${height - bottom}" stroke="#999"/>${ticks}` +
    `<polyline fill="none" stroke="${colour}" stroke-width="2" ${check.status === "conforms" ? "" : 'stroke-dasharray="5 3"'} ` +
    `points="${path}"/>${marks}`;
  return element("div", { class: "figure" }, element("h3", { text: "phase error (radians) against position" }), svg);
}

// --- vision towers: positions on a grid of patches ----------------------------------------

// Matplotlib's first colours, as the job's pictures draw them (the axes: t, h, w).
const TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c"];
const AXIS_COLOURS = { t: TAB10[0], h: TAB10[1], w: TAB10[2] };
const SVG_NS = "http://www.w3.org/2000/svg";

function svgFigure(title, id, width, height, label, markup) {
  const svg = document.createElementNS(SVG_NS, "svg");
  for (const [key, value] of Object.entries({ id, width, height, role: "img", "aria-label": label })) {
    svg.setAttribute(key, value);
  }
  svg.innerHTML = markup;
  return element("div", { class: "figure" }, element("h3", { text: title }), svg);
}

function visionView(view) {
  const v = DATA.vision;
  view.append(element("h2", { text: "Positions on a grid of patches (compare.py vision)" }));
  view.append(element("p", { text: "A vision tower cuts an image into a grid of patches and gives each a " +
    `position in two dimensions. The vision job's defaults: a learned ${v.grid[0]} × ${v.grid[1]} table ` +
    `of ${v.dim} dims (random, seed 0), resized to ${v.to[0]} × ${v.to[1]}.` }));
  similarityFigures(view, v);
  resizeFigures(view, v);
  samplingFigure(view, v.sampling);
  slotFigure(view, v);
}

function unitRows(table) {
  // table (N, D) decoded -> each row divided by its length, in doubles
  const [n, d] = table.shape;
  const rows = new Float64Array(n * d);
  for (let p = 0; p < n; p++) {
    let sum = 0;
    for (let k = 0; k < d; k++) sum += table.values[p * d + k] ** 2;
    const norm = Math.sqrt(sum);
    for (let k = 0; k < d; k++) rows[p * d + k] = table.values[p * d + k] / norm;
  }
  return { rows, n, d };
}

function similarityMap(unit, patch) {
  // the cosine similarity of row `patch` to every row: a dot product of unit vectors
  const { rows, n, d } = unit;
  return Float64Array.from({ length: n }, (_, q) => {
    let dot = 0;
    for (let k = 0; k < d; k++) dot += rows[patch * d + k] * rows[q * d + k];
    return dot;
  });
}

function similarityFigures(view, v) {
  view.append(element("h2", { text: "Each patch against every other (the ViT paper's figure 7)" }));
  view.append(element("p", { text: "Choose a patch: each map is the cosine similarity of its position " +
    "row to every patch's, computed by this page in doubles from the tables (rounded to float32, as " +
    "a model holds them); in the resized table, the patch at the same place of the larger grid. A " +
    "random table has no structure; the 2-D sin-cos rows are all alike (their slow columns barely " +
    "turn across the grid), yet each map peaks at its own patch and falls off along its row and column." }));
  const [h, w] = v.grid;
  const names = ["learned", "sincos", "resized"];
  const tables = v.tables.map((t) => ({ ...t, unit: unitRows(decode(t.table)) }));
  const row = element("input", { type: "range", id: "vision-row", min: "0", max: String(h - 1), step: "1",
    value: String(h >> 1) });
  const col = element("input", { type: "range", id: "vision-col", min: "0", max: String(w - 1), step: "1",
    value: String(w >> 1) });
  const said = element("output", { id: "vision-patch", for: "vision-row vision-col" });
  view.append(element("div", {}, element("label", { for: "vision-row", text: "patch row" }), row, " ",
    element("label", { for: "vision-col", text: "patch column" }), col, " ", said));
  scaleLegend(view, 1);
  const figures = element("div", { class: "row", id: "vision-similarity" });
  view.append(figures);
  function draw() {
    figures.replaceChildren();
    tooltip.style.display = "none";
    const i = Number(row.value), j = Number(col.value);
    said.textContent = `(${i}, ${j})`;
    tables.forEach((t, k) => {
      const [H, W] = t.grid;
      const pi = Math.round((i * (H - 1)) / Math.max(h - 1, 1)), pj = Math.round((j * (W - 1)) / Math.max(w - 1, 1));
      heatmap(figures, { id: `vision-similarity-${names[k]}`, rows: numbered(H), cols: W,
        axes: ["patch row", "patch column"], values: similarityMap(t.unit, pi * W + pj), dtype: "float64",
        limit: 1, cell: 16, title: `${t.name}: patch (${pi}, ${pj}) of ${H} × ${W}`,
        describe: `the cosine similarity of patch (${pi}, ${pj})'s position row to every patch's.`,
        tip: (a, b) => `patch (${a}, ${b}) against patch (${pi}, ${pj})` });
    });
  }
  row.addEventListener("input", draw);
  col.addEventListener("input", draw);
  draw();
}

function resizeFigures(view, v) {
  const r = v.resize;
  view.append(element("h2", { text: "What a resize does: there is no single bicubic" }));
  view.append(element("p", { text: "Channel 0 of the learned table resized by torch's bicubic (a = −0.75, " +
    "edges replicated, no antialias) and by JAX's (a = −0.5, edges renormalized, antialiased: wider " +
    "when downsampling), each kernel's rule in float64; F.interpolate and jax.image.resize agree with " +
    "it within the job's tolerance. Their difference is everywhere, not only at the edges: the kernels differ." }));
  const channel = decode(r.channel);
  const resized = r.resized.map((x) => ({ name: x.name, ...decode(x.values) }));
  const limit = largest(channel.values, ...resized.map((x) => x.values));
  scaleLegend(view, limit);
  const figures = element("div", { class: "row" });
  const grid = (shape) => ({ rows: numbered(shape[0]), cols: shape[1], axes: ["patch row", "patch column"],
    dtype: "float64", cell: 14 });
  heatmap(figures, { id: "vision-channel", ...grid(channel.shape), values: channel.values, limit,
    title: `the channel, ${channel.shape[0]} × ${channel.shape[1]}`, describe: "channel 0 of the learned table.",
    tip: (i, j) => `patch (${i}, ${j}) · channel 0` });
  resized.forEach((x, k) => heatmap(figures, { id: `vision-resized-${["torch", "jax"][k]}`, ...grid(x.shape),
    values: x.values, limit, title: `${x.name}, ${x.shape[0]} × ${x.shape[1]}`,
    describe: `the channel as ${x.name} resizes it.`, tip: (i, j) => `${x.name} · patch (${i}, ${j})` }));
  view.append(figures);
  const diff = Float64Array.from(resized[0].values, (value, k) => value - resized[1].values[k]);
  const title = `${resized[0].name} − ${resized[1].name}`;
  const differs = element("div", { id: "vision-difference" });
  if (diff.every((d) => d === 0)) {
    differs.append(element("p", { class: "verdict ok", text: `${title}: bit-identical` }));
  } else {
    scaleLegend(differs, largest(diff));
    heatmap(differs, { id: "vision-difference-map", ...grid(resized[0].shape), values: diff, limit: largest(diff),
      title, describe: "their difference, on its own scale.", tip: (i, j) => `patch (${i}, ${j}) · difference` });
  }
  const row = element("div", { class: "row" }, differs, kernelPicture(r.curves, r.taps));
  view.append(row);
}

function kernelPicture(curves, taps) {
  // The kernels as lines, one output's taps as stems: the weight against input − sample position.
  const width = 440, height = 240, left = 40, bottom = 30, top = 8;
  const x = (u) => left + ((u + 3) / 6) * (width - left - 8);
  const y = (v) => top + (1 - (v + 0.2) / 1.25) * (height - bottom - top);
  const lines = curves.map((c, k) => {
    const order = c.offsets.map((_, i) => i).sort((a, b) => c.offsets[a] - c.offsets[b]);
    const points = order.map((i) => `${x(c.offsets[i]).toFixed(1)},${y(c.weights[i]).toFixed(1)}`).join(" ");
    return `<polyline fill="none" stroke="${TAB10[k]}" stroke-width="2" points="${points}"/>`;
  }).join("");
  const stems = taps.map((t, k) => t.offsets.map((u, i) =>
    `<line x1="${x(u).toFixed(1)}" y1="${y(0).toFixed(1)}" x2="${x(u).toFixed(1)}" y2="${y(t.weights[i]).toFixed(1)}" ` +
    `stroke="${TAB10[k]}" stroke-dasharray="2 2"/><circle class="tap" cx="${x(u).toFixed(1)}" ` +
    `cy="${y(t.weights[i]).toFixed(1)}" r="3" fill="${TAB10[k]}"/>`).join("")).join("");
  const legend = [...curves.map((c) => `${c.label} (line)`), ...taps.map((t) => t.label)]
    .map((text, k) => `<text x="${left + 6}" y="${top + 12 + 13 * k}" fill="${TAB10[k < curves.length ? k : k - curves.length]}">${text}</text>`).join("");
  const axes = `<line x1="${left}" y1="${y(0)}" x2="${width - 8}" y2="${y(0)}" stroke="#999"/>` +
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${height - bottom}" stroke="#999"/>` +
    [-2, -1, 0, 1, 2].map((u) => `<text x="${x(u) - 4}" y="${height - bottom + 14}">${u}</text>`).join("") +
    [0, 0.5, 1].map((v) => `<text x="4" y="${y(v) + 4}">${v}</text>`).join("") +
    `<text x="${left + 40}" y="${height - 2}">input position − sample position (input patches)</text>`;
  const label = "the kernels' weights against the distance to the sample: " +
    curves.map((c) => c.label).join("; ") + "; and the taps of one output: " + taps.map((t) => t.label).join("; ");
  return svgFigure("the kernels (lines) and one output's taps (stems)", "vision-kernels", width, height, label,
    axes + lines + stems + legend);
}

function samplingFigure(view, sampling) {
  const { old, rules } = sampling;
  view.append(element("h2", { text: "Where each rule samples the old grid" }));
  view.append(element("p", { text: `${sampling.new} new columns read from ${old} old ones (each old patch ` +
    "shaded, its centre at the tick). Corners aligned put the first and last samples on the first and " +
    "last centres; DINOv2's offset squeezes every sample toward the start." }));
  const width = 900, left = 270, right = 16, row = 46, top = 10, height = top + row * rules.length + 30;
  const x = (u) => left + ((u + 1) / (old + 1)) * (width - left - right);
  const cells = Array.from({ length: old }, (_, k) => `<rect x="${x(k - 0.5)}" y="${top}" width="${x(k + 0.5) - x(k - 0.5)}" ` +
    `height="${row * rules.length}" fill="${k % 2 ? "#eee" : "#ddd"}"/>` +
    `<text x="${x(k) - 4}" y="${top + row * rules.length + 14}">${k}</text>`).join("");
  const marks = rules.map((r, n) => {
    const y = top + row * n + row / 2;
    const [first, second] = r.label.split("\n");
    return `<text x="4" y="${y - 2}">${first}</text><text x="4" y="${y + 11}">${second || ""}</text>` +
      `<line x1="${x(r.coordinates[0])}" y1="${y}" x2="${x(r.coordinates[r.coordinates.length - 1])}" y2="${y}" stroke="${TAB10[n]}"/>` +
      r.coordinates.map((u) => `<circle class="sample" cx="${x(u).toFixed(1)}" cy="${y}" r="4" fill="${TAB10[n]}"/>`).join("");
  }).join("");
  const label = rules.map((r) => `${r.label.replace("\n", " ")}: from ${r.coordinates[0].toFixed(3)} to ` +
    `${r.coordinates[r.coordinates.length - 1].toFixed(3)}`).join("; ");
  view.append(svgFigure(`sample points on the old grid of ${old} patches`, "vision-sampling", width, height,
    label, cells + marks));
}

function slotFigure(view, v) {
  view.append(element("h2", { text: "2-D RoPE: which axis turns each dimension of a head" }));
  view.append(element("p", { text: `One bar per model over a head of ${v.dim} dims (Flux: its sections' ` +
    "128): orange the row (h), green the column (w), blue time (t, 0 for an image); an arc joins the " +
    "two dims one rotation turns; the grey strip under each bar is how fast it turns (darker: slower). " +
    "Pixtral and Qwen2-VL have the same bars: Qwen2-VL gives the row and the column one ladder of " +
    "frequencies, Pixtral the column the odd steps of a ladder whose even steps go to the row (half " +
    "a step slower: the strips barely show it)." }));
  const slots = v.slots;
  const widest = Math.max(...slots.map((s) => s.axes.length));
  const left = 190, px = Math.min(8, 680 / widest), row = 70, width = left + widest * px + 20;
  const height = row * slots.length + 10;
  const logs = slots.flatMap((s) => s.frequencies.filter((f) => f > 0).map(Math.log10));
  const low = Math.min(...logs), high = Math.max(...logs);
  const shade = (f) => { // light: fast, dark: slow, as the job's picture draws it
    const level = Math.round(30 + 200 * (Math.log10(f) - low) / (high - low || 1));
    return `rgb(${level},${level},${level})`;
  };
  const bars = slots.map((s, n) => {
    const y = row * n + 40;
    const [first, second] = s.label.split("\n");
    const dims = s.axes.map((axis, d) => `<rect class="dim" x="${left + d * px}" y="${y}" width="${px}" height="14" ` +
      `fill="${AXIS_COLOURS[axis]}"/><rect x="${left + d * px}" y="${y + 16}" width="${px}" height="5" fill="${shade(s.frequencies[d])}"/>`).join("");
    const arcs = s.pairs.map(([a, b]) => {
      const [p, q] = a < b ? [a, b] : [b, a];
      const rx = ((q - p) * px) / 2, ry = 3 + (26 * (q - p)) / (s.axes.length / 2);
      return `<path d="M ${left + (p + 0.5) * px} ${y} A ${rx} ${ry} 0 0 1 ${left + (q + 0.5) * px} ${y}" fill="none" stroke="#555" stroke-width="0.6"/>`;
    }).join("");
    return `<text x="4" y="${y + 4}">${first}</text><text x="4" y="${y + 18}">${second}</text>${dims}${arcs}`;
  }).join("");
  const label = slots.map((s) => `${s.label.replace("\n", ": ")}, ${s.axes.length} dims: ` +
    s.axes.map((axis) => axis).join(" ")).join("; ");
  view.append(svgFigure("slot maps by model", "vision-slots", width, height, label, bars));
}

// --- tabs --------------------------------------------------------------------------------

const VIEWS = { seed: seedView, live: liveView, schemes: schemesView, real: realView, training: trainingView,
  vision: visionView, conformance: conformanceView };

function select(tab, focus) {
  for (const other of document.querySelectorAll("[role=tab]")) {
    const chosen = other === tab;
    other.setAttribute("aria-selected", String(chosen));
    other.tabIndex = chosen ? 0 : -1;
    document.getElementById(other.getAttribute("aria-controls")).hidden = !chosen;
  }
  if (focus) tab.focus();
  tooltip.style.display = "none";
}

const tabs = [...document.querySelectorAll("[role=tab]")];
for (const tab of tabs) {
  tab.addEventListener("click", () => select(tab, false));
  tab.addEventListener("keydown", (event) => {
    const i = tabs.indexOf(tab);
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    select(tabs[(next + tabs.length) % tabs.length], true);
  });
}
for (const [name, build] of Object.entries(VIEWS)) build(document.getElementById(`view-${name}`));
document.body.dataset.ready = "true";
