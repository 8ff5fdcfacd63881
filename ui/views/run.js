// One run: its outcome, details, and a live transcript that pages from the
// store and renders only the rows in view, so 100k events scroll smoothly.

import { call, fill, h, say, statusBadge, duration, tokens, cost, count, when, clock, isActive } from "../kit.js";
import * as changes from "./changes.js";

const ROW = 28;
const PAGE = 500;
const OVERSCAN = 20;

let view = null;
let runId = null;
let detail = null;
let cache = new Map();       // row (from 0) -> shown event
let loading = new Set();     // page starts (rows) being fetched
let selected = null;         // the row shown whole below
let firstPaint = true;
let followed = false;        // the last scroll was Corral following the end
let ticker = null;           // ticks an active run's duration

export async function show(root, id) {
  view = root;
  runId = id;
  cache = new Map();
  loading = new Set();
  selected = null;
  firstPaint = true;
  changes.reset();
  await refresh();
  ticker ??= setInterval(tick, 1000);
}

export function leave() {
  view = null;
  clearInterval(ticker);
  ticker = null;
}

/** True if `change` touches what this view shows: a status (this run's
 *  may be among them), or this run's transcript. Another run streaming
 *  costs nothing here. */
export function cares(change) {
  return change.statuses || change.transcripts.has(runId);
}

/** Redraws what `change` touched (everything without one). */
export async function refresh(change) {
  if (!view) return;
  if (change && !change.statuses) {
    if (!detail) return; // the first draw is still on its way
    // Only the transcript grew: its size and the run's figures and, if the
    // reader follows the end, the new rows first (the last known row again:
    // its usage may have come since), so the view changes once (a frame
    // drawn in software is not free).
    const grown = await call("transcript_size", { id: runId });
    const box = view.querySelector("#transcript");
    if (box.scrollTop + box.clientHeight >= box.scrollHeight - ROW) {
      let known = detail.event_count;
      while (known > 0 && !cache.has(known - 1)) known--;
      const from = Math.max(0, known - 1);
      const rows = await call("transcript", { id: runId, offset: from, limit: Math.min(PAGE, grown.rows - from) });
      rows.forEach((row, i) => cache.set(from + i, row));
    }
    detail.event_count = grown.rows;
    detail.run = grown.run;
    detail.meter = grown.meter;
    const figures = view.querySelector("#run-figures");
    figures?.replaceWith(runFigures(detail.run));
    view.querySelector("#budget-meter")?.replaceWith(meter(detail.meter));
    renderTranscript();
    return;
  }
  detail = await call("get_run", { id: runId });
  renderHeader();
  renderTranscript();
  await renderReplies();
  await changes.render(view.querySelector("#changes"), detail.run);
}

function renderHeader() {
  const { run } = detail;
  let head = view.querySelector("#run-head");
  if (!head) {
    head = h("section", { id: "run-head" });
    // The run at a glance, then its transcript right under it; its
    // changes, the reply box and the details after.
    view.append(head,
      h("h2", {}, "Transcript"), h("div", { class: "transcript", id: "transcript", tabindex: "0" }, h("div", { class: "spacer" })), h("div", { class: "detail", id: "event-detail" }),
      h("section", { id: "changes-section" }, h("h2", {}, "Changes"), h("div", { id: "changes" })),
      replyBox(),
      h("details", { id: "run-details" }, h("summary", {}, "Details"), h("div", { id: "run-meta" })));
    const box = view.querySelector("#transcript");
    // The reader's scrolling paints; Corral's own (following the end) has
    // painted already.
    box.addEventListener("scroll", () => { if (!followed) paint(); followed = false; });
    // A command has no session to go on in: no reply is offered.
    view.querySelector("#reply").hidden = run.agent === "command";
    box.addEventListener("keydown", onKey);
  }
  const title = h("div", { class: "toolbar run-title" },
    h("h1", { style: "margin:0" }, `${run.preset} `, h("span", { class: "muted" }, run.id)),
    statusBadge(run.status, run.retrying),
    detail.need && detail.need.chip !== run.status ? h("span", { class: `chip need-${detail.need.reason.kind}`, id: "run-reason" }, detail.need.chip)
      : detail.reason ? h("span", { class: "pill", id: "run-reason" }, detail.reason.replace(/_/g, " ")) : null,
    runFigures(run),
    meter(detail.meter),
  );
  const actions = h("div", { class: "toolbar" },
    run.status === "running" ? h("button", { id: "pause", onclick: () => pause(true) }, "Pause") : null,
    run.status === "paused" && !detail.ask ? h("button", { id: "resume", onclick: () => pause(false) }, "Resume") : null,
    isActive(run.status) ? h("button", { class: "danger", id: "abort", onclick: abort }, "Abort") : null,
    h("button", { id: "relaunch", onclick: relaunch }, "Relaunch"),
    h("button", { onclick: () => openWith("open_run_folder") }, run.worktree ? "Open worktree" : "Open folder"),
    h("button", { onclick: () => openWith("open_run_terminal") }, "Open terminal"),
  );
  view.querySelector("#changes-section").hidden = !run.worktree && !run.changes;
  // Why it waits, what was refused and what went wrong, right under its
  // title and actions; the task in one line; the details folded.
  const parts = [title, actions, h("div", { class: "task-line", title: run.task }, run.task)];
  if (run.status === "paused" && run.pause_reason === "usage_limit" && run.resumes_at) {
    const at = clock(run.resumes_at);
    parts.push(h("div", { class: "notice", id: "usage-limit" },
      h("span", {}, `Paused: usage limit, resumes ${at} by itself, in its own session.`)));
  }
  if (detail.ask) {
    const { ask } = detail;
    const runs = ask.paused === 1 ? "" : ` (${ask.paused} runs paused for it)`;
    parts.push(h("div", { class: "notice", id: "budget-ask" },
      h("span", {}, `Paused: ${ask.words}${runs}.`),
      h("button", { class: "primary", id: "allow-budget", onclick: () => answerBudget(ask.owner, true) }, ask.allow),
      h("button", { class: "danger", id: "stop-budget", onclick: () => answerBudget(ask.owner, false) }, "Stop")));
  }
  if (run.denied.length) {
    const n = run.denied.length;
    parts.push(h("div", { class: "notice", id: "denied" },
      h("span", { class: "notice-words" }, `${n} action${n === 1 ? " was" : "s were"} denied: ${run.denied.join(", ")}. `,
        isActive(run.status) ? null : h("code", {}, `corral reply ${run.id} --allow-denied`)),
      isActive(run.status) ? null : h("button", { class: "primary", id: "allow-denied", onclick: allowDenied }, "Allow and continue")));
  }
  if (run.error) {
    parts.push(h("div", { class: "notice failure", id: "run-error" },
      h("span", { class: "notice-words" }, detail.error_words),
      detail.error_words !== run.error.trim() ? h("details", {}, h("summary", {}, "as the agent said it"), h("pre", { class: "error" }, run.error)) : null));
  }
  if (run.final_text) parts.push(h("h2", {}, "Result"), h("pre", { id: "final-text", class: "result" }, run.final_text));
  if (detail.children.length) parts.push(childList(detail.children));
  head.replaceChildren(...parts);
  renderDetails();
}

/** Duration, tokens and cost in one line. */
function runFigures(run) {
  // A command reports no tokens and no cost: only its duration is said.
  const spent = run.agent === "command" ? [] : [" · ", tokens(run), " tokens · ", cost(run.cost_usd, run.cost_estimated)];
  return h("span", { class: "muted", id: "run-figures" }, h("span", { class: "dur" }, duration(run)), ...spent);
}

/** A budget as a meter: spent of it, filled as far as the nearer limit. */
function meter(m) {
  if (!m) return null;
  const used = Math.min(1, m.used);
  return h("span", { class: `meter${m.used >= 1 ? " full" : m.used >= 0.8 ? " near" : ""}`, id: "budget-meter", title: `${m.spent} of ${m.budget}` },
    h("span", { class: "meter-bar" }, h("span", { class: "meter-fill", style: `width:${(used * 100).toFixed(1)}%` })),
    h("span", { class: "meter-words" }, `${m.spent} of ${m.budget}`));
}

/** A parent's children, each with its status: a failed one stands out. */
function childList(children) {
  const order = { failed: 0, lost: 1, paused: 2, waiting: 3, running: 4, starting: 5, queued: 6, aborted: 7, completed: 8 };
  const sorted = [...children].sort((a, b) => (order[a.status] ?? 9) - (order[b.status] ?? 9));
  return h("section", { id: "children" }, h("h2", {}, `Children (${children.length})`),
    h("div", { class: "children" }, sorted.map((c) => h("a", { class: "child", href: `#/run/${c.id}`, "data-id": c.id, "data-status": c.status },
      statusBadge(c.status), h("span", {}, c.preset), h("span", { class: "muted" }, c.id), h("span", { class: "child-task" }, c.task)))));
}

/** What the page folds away: where, which agent, when, what it used. */
function renderDetails() {
  const { run } = detail;
  const link = (id) => h("a", { href: `#/run/${id}` }, id);
  const meta = h("dl", { class: "meta" },
    ...[
      ["Task", run.task],
      ["Folder", run.cwd],
      ["Agent", `${run.agent} — model ${run.model ?? "default"}${run.resolved_model ? ` → ${run.resolved_model}` : ""}`],
      ["Duration", duration(run)],
      ["Tokens", [tokens(run), `  (in ${count(run.usage.input_tokens)}, out ${count(run.usage.output_tokens)}, cache read ${count(run.usage.cache_read_tokens)}, write ${count(run.usage.cache_write_tokens)})`]],
      ["Cost", cost(run.cost_usd, run.cost_estimated)],
      ["Budget", detail.meter ? `${detail.meter.budget} (${detail.meter.spent} spent)` : "-"],
      ["Resources", resources(run)],
      ["Contained", contained(run)],
      ["Ports", run.ports ? `${run.ports.first}${run.ports.count > 1 ? `–${run.ports.first + run.ports.count - 1}` : ""} (CORRAL_PORT=${run.ports.first})` : "-"],
      ["Created", when(run.created_at)], ["Started", when(run.started_at)], ["Completed", when(run.completed_at)], ["Exited", when(run.exited_at)],
      ["Parent", run.parent_id ? link(run.parent_id) : "-"],
      ["Files", detail.folder],
    ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
  fill(view.querySelector("#run-meta"), meta,
    detail.stderr_tail ? h("details", {}, h("summary", {}, "stderr (last 4 KiB)"), h("pre", {}, detail.stderr_tail)) : null);
}

/** Ticks an active run's duration: its figures change every second. */
function tick() {
  if (!view || !detail || !isActive(detail.run.status)) return;
  const shown = view.querySelector("#run-figures .dur");
  if (shown) shown.textContent = duration(detail.run);
}

function renderTranscript() {
  const box = view.querySelector("#transcript");
  const spacer = box.firstChild;
  // Follow a live transcript only while the reader is at its end.
  const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - ROW;
  spacer.style.height = `${detail.event_count * ROW}px`;
  if ((firstPaint || atEnd) && box.scrollTop !== box.scrollHeight - box.clientHeight) {
    followed = true;
    box.scrollTop = box.scrollHeight;
  }
  firstPaint = false;
  paint();
}

/** Renders the rows in view (plus a margin), fetching missing pages. A
 *  row is one event at its position; the usage reported after it is a
 *  chip at its end, and a long text says how much more it has (a click
 *  shows it whole below). */
function paint() {
  const box = view?.querySelector("#transcript");
  if (!box) return;
  const spacer = box.firstChild;
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - OVERSCAN);
  const last = Math.min(detail.event_count, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + OVERSCAN);
  const rows = [];
  for (let i = first; i < last; i++) {
    const ev = cache.get(i);
    if (!ev) { fetchPage(Math.floor(i / PAGE) * PAGE); continue; }
    const isError = ev.kind === "tool_result" && ev.json && JSON.parse(ev.json).is_error;
    const lines = ev.text.split("\n");
    const line = lines.find((l) => l.trim()) ?? "";
    const more = lines.filter((l) => l.trim()).length - 1;
    rows.push(h("div", {
      class: `ev k-${ev.kind}${isError ? " is-error" : ""}${i === selected ? " selected" : ""}`,
      style: `top:${i * ROW}px`, "data-seq": ev.seq, "data-row": i, onclick: () => select(i),
    }, h("span", { class: "kind" }, isError ? "tool error" : ev.kind.replace("_", " ")), h("span", { class: "line" }, line),
      more > 0 ? h("span", { class: "more" }, `+${more} line${more === 1 ? "" : "s"}`) : null,
      ev.usage.length ? h("span", { class: "usage", title: ev.usage.join("\n") }, usageWords(ev.usage[ev.usage.length - 1])) : null));
  }
  spacer.replaceChildren(...rows);
}

/** "1800 in / 220 out" as people read it: "1.8k in · 220 out". */
function usageWords(text) {
  return text.replace(/\d+/g, (n) => count(Number(n))).replace(" / ", " · ");
}

async function fetchPage(start) {
  if (loading.has(start)) return;
  loading.add(start);
  // A streaming page is fetched from its first missing row, not whole.
  let from = start;
  while (from < start + PAGE && cache.has(from)) from++;
  try {
    const rows = await call("transcript", { id: runId, offset: from, limit: start + PAGE - from });
    rows.forEach((row, i) => cache.set(from + i, row));
  } catch (e) {
    say(String(e), true);
  } finally {
    loading.delete(start);
  }
  paint();
}

/** Shows one row whole: text, the usage folded into it, and arguments or
 *  details as JSON. */
function select(row) {
  selected = row;
  paint();
  const ev = cache.get(row);
  const box = view.querySelector("#event-detail");
  if (!ev) return box.replaceChildren();
  let json = null;
  if (ev.json) {
    try { json = JSON.stringify(JSON.parse(ev.json), null, 2); } catch { json = ev.json; }
  }
  fill(box,
    h("div", { class: "toolbar" }, h("span", { class: "pill" }, `#${ev.seq} ${ev.kind}`), h("span", { class: "muted" }, when(ev.at)),
      ev.usage.length ? h("span", { class: "muted" }, `usage: ${ev.usage.map(usageWords).join(", ")}`) : null),
    h("pre", { id: "event-text" }, ev.text),
    json ? h("details", { open: ev.kind === "tool_call" }, h("summary", {}, "details"), h("pre", {}, json)) : null,
  );
}

function onKey(e) {
  if (!detail.event_count) return;
  const box = view.querySelector("#transcript");
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    const next = Math.min(detail.event_count - 1, Math.max(0, (selected ?? -1) + (e.key === "ArrowDown" ? 1 : -1)));
    select(next);
    const top = next * ROW;
    if (top < box.scrollTop) box.scrollTop = top;
    else if (top + ROW > box.scrollTop + box.clientHeight) box.scrollTop = top + ROW - box.clientHeight;
  } else if (e.key === "End") { box.scrollTop = box.scrollHeight; }
  else if (e.key === "Home") { box.scrollTop = 0; }
}

async function abort() {
  const button = view.querySelector("#abort");
  button.disabled = true;
  say("aborting…");
  try {
    const run = await call("abort_run", { id: runId });
    say(`${run.id} ${run.status}`);
  } catch (e) {
    say(String(e), true);
  }
  await refresh();
}

/** Answers a budget reached: as much again, or stop its run. */
async function answerBudget(owner, allow) {
  for (const b of view.querySelectorAll("#budget-ask button")) b.disabled = true;
  say(allow ? "allowing more…" : "stopping…");
  try {
    await call("answer_budget", { owner, allow });
    say(allow ? "allowed: it goes on" : "stopped");
  } catch (e) {
    say(String(e), true);
  }
  await refresh();
}

async function pause(paused) {
  const button = view.querySelector(paused ? "#pause" : "#resume");
  button.disabled = true;
  say(paused ? "pausing…" : "resuming…");
  try {
    const run = await call("pause_run", { id: runId, paused });
    say(run.status === "paused" && !paused ? `${run.id} waits for a free slot to resume` : `${run.id} ${run.status}`);
  } catch (e) {
    say(String(e), true);
  }
  await refresh();
}

/** CPU seconds and peak memory of the run's whole process tree. */
function resources(run) {
  if (!run.resources) return "-";
  const peak = run.resources.memory_peak_bytes;
  return `CPU ${run.resources.cpu_seconds.toFixed(2)} s · peak memory ${peak == null ? "not measured" : bytes(peak)}`;
}

/** How the run's processes are held, and each limit said. */
function contained(run) {
  const c = run.containment;
  if (!c) return "-";
  return [c.cgroup ? `cgroup ${c.cgroup}` : "process tree", ...(c.notes ?? [])].join(" · ");
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i ? `${n.toFixed(1)} ${units[i]}` : `${n} B`;
}

async function relaunch() {
  try {
    const run = await call("relaunch_run", { id: runId });
    location.hash = `#/run/${run.id}`;
  } catch (e) {
    say(String(e), true);
  }
}

/** The reply box under the transcript: one more message to the agent, in a
 *  new turn of its session (Ctrl+Enter sends). */
function replyBox() {
  const text = h("textarea", { id: "reply-text", placeholder: "Reply to the agent: a follow-up in its own session (Ctrl+Enter)", rows: 3,
    onkeydown: (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); } } });
  return h("section", { id: "reply" }, h("h2", {}, "Reply"), h("div", { id: "replies" }), text,
    h("div", { class: "toolbar" }, h("button", { class: "primary", id: "reply-send", onclick: send }, "Send"),
      h("span", { class: "muted" }, "An ended run starts again in the same folder or worktree; a working one gets it when its turn ends.")));
}

async function renderReplies() {
  const list = await call("run_replies", { id: runId });
  const waiting = list.filter((r) => !r.delivered_at);
  view.querySelector("#replies")?.replaceChildren(...waiting.map((r) =>
    h("div", { class: "reply-waiting" }, h("span", { class: "pill" }, "waiting for the agent"), " ", r.text)));
}

async function send() {
  const box = view.querySelector("#reply-text");
  if (!box.value.trim()) return say("Write what the agent should do next.", true);
  // What was typed stays until it is taken: a refused reply keeps it.
  if (await reply(box.value, false)) box.value = "";
}

async function allowDenied() {
  await reply("", true);
}

/** True if the reply was taken. */
async function reply(text, allowDenied) {
  let taken = false;
  try {
    const run = await call("reply_run", { id: runId, text, allowDenied });
    say(`replied to ${run.id}: ${run.status}`);
    taken = true;
  } catch (e) {
    say(String(e), true);
  }
  await refresh();
  return taken;
}

async function openWith(command) {
  try {
    await call(command, { id: runId });
  } catch (e) {
    say(String(e), true);
  }
}
