// One run: its outcome, details, and a live transcript that pages from the
// store and renders only the rows in view, so 100k events scroll smoothly.

import { call, h, say, statusBadge, duration, tokens, cost, count, when, isActive } from "../kit.js";
import * as changes from "./changes.js";

const ROW = 28;
const PAGE = 500;
const OVERSCAN = 20;

let view = null;
let runId = null;
let detail = null;
let cache = new Map();       // seq -> event
let loading = new Set();     // page starts being fetched
let selectedSeq = null;
let firstPaint = true;
let followed = false;        // the last scroll was Corral following the end

export async function show(root, id) {
  view = root;
  runId = id;
  cache = new Map();
  loading = new Set();
  selectedSeq = null;
  firstPaint = true;
  changes.reset();
  await refresh();
}

export function leave() {
  view = null;
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
    // Only the transcript grew: its size and, if the reader follows the
    // end, the new rows first, so the view changes once (a frame drawn in
    // software is not free).
    const count = await call("transcript_size", { id: runId });
    const box = view.querySelector("#transcript");
    if (box.scrollTop + box.clientHeight >= box.scrollHeight - ROW) {
      let after = detail.event_count;
      while (after > 0 && !cache.has(after)) after--;
      const events = await call("transcript", { id: runId, afterSeq: after, limit: Math.min(PAGE, count - after) });
      for (const ev of events) cache.set(ev.seq, ev);
    }
    detail.event_count = count;
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
    view.append(head,
      h("section", { id: "changes-section" }, h("h2", {}, "Changes"), h("div", { id: "changes" })),
      h("h2", {}, "Transcript"), h("div", { class: "transcript", id: "transcript", tabindex: "0" }, h("div", { class: "spacer" })), h("div", { class: "detail", id: "event-detail" }),
      replyBox());
    const box = view.querySelector("#transcript");
    // The reader's scrolling paints; Corral's own (following the end) has
    // painted already.
    box.addEventListener("scroll", () => { if (!followed) paint(); followed = false; });
    box.addEventListener("keydown", onKey);
  }
  const actions = h("div", { class: "toolbar" },
    h("h1", { style: "margin:0" }, `${run.preset} `, h("span", { class: "muted" }, run.id)),
    statusBadge(run.status, run.retrying),
    run.stop_reason ? h("span", { class: "pill" }, run.stop_reason) : null,
    h("span", { style: "flex:1" }),
    h("button", { onclick: () => openWith("open_run_folder"), title: run.worktree ? "Its worktree" : "Its folder" }, "Open folder"),
    h("button", { onclick: () => openWith("open_run_terminal") }, "Open terminal"),
    run.status === "running" ? h("button", { id: "pause", onclick: () => pause(true), title: "Freeze every process of the run; it holds no slot and its clocks stop" }, "Pause") : null,
    run.status === "paused" && !detail.ask ? h("button", { id: "resume", onclick: () => pause(false) }, "Resume") : null,
    isActive(run.status) ? h("button", { class: "danger", id: "abort", onclick: abort }, "Abort") : null,
    h("button", { id: "relaunch", onclick: relaunch }, "Relaunch"),
  );
  view.querySelector("#changes-section").hidden = !run.worktree && !run.changes;
  const link = (id) => h("a", { href: `#/run/${id}` }, id);
  const meta = h("dl", { class: "meta" },
    ...[
      ["Task", run.task],
      ["Folder", run.cwd],
      ["Agent", `${run.agent} — model ${run.model ?? "default"}${run.resolved_model ? ` → ${run.resolved_model}` : ""}`],
      ["Duration", duration(run)],
      ["Tokens", [tokens(run), `  (in ${count(run.usage.input_tokens)}, out ${count(run.usage.output_tokens)}, cache read ${count(run.usage.cache_read_tokens)}, write ${count(run.usage.cache_write_tokens)})`]],
      ["Cost", cost(run.cost_usd, run.cost_estimated)],
      ["Resources", resources(run)],
      ["Contained", contained(run)],
      ["Created", when(run.created_at)], ["Started", when(run.started_at)], ["Completed", when(run.completed_at)], ["Exited", when(run.exited_at)],
      ["Parent", run.parent_id ? link(run.parent_id) : "-"],
      ["Children", run.children.length ? run.children.flatMap((c, i) => (i ? [" ", link(c)] : [link(c)])) : "-"],
      ["Files", detail.folder],
    ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
  // Why it waits, what was refused and what went wrong come first, right
  // under its actions; the details after.
  const parts = [actions];
  if (run.status === "paused" && run.pause_reason === "usage_limit" && run.resumes_at) {
    const at = new Date(run.resumes_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
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
      h("span", {}, `${n} action${n === 1 ? " was" : "s were"} denied: ${run.denied.join(", ")}`),
      isActive(run.status) ? null : h("button", { class: "primary", id: "allow-denied", onclick: allowDenied }, "Allow and continue")));
  }
  if (run.error) parts.push(h("h2", {}, "Error"), h("pre", { class: "error", id: "run-error" }, run.error));
  if (run.final_text) parts.push(h("h2", {}, "Result"), h("pre", { id: "final-text" }, run.final_text));
  parts.push(meta);
  if (detail.stderr_tail) parts.push(h("details", {}, h("summary", {}, "stderr (last 4 KiB)"), h("pre", {}, detail.stderr_tail)));
  head.replaceChildren(...parts);
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

/** Renders the rows in view (plus a margin), fetching missing pages. */
function paint() {
  const box = view?.querySelector("#transcript");
  if (!box) return;
  const spacer = box.firstChild;
  const first = Math.max(0, Math.floor(box.scrollTop / ROW) - OVERSCAN);
  const last = Math.min(detail.event_count, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + OVERSCAN);
  const rows = [];
  for (let i = first; i < last; i++) {
    const seq = i + 1;
    const ev = cache.get(seq);
    if (!ev) { fetchPage(Math.floor(i / PAGE) * PAGE); continue; }
    const isError = ev.kind === "tool_result" && ev.json && JSON.parse(ev.json).is_error;
    const line = ev.text.split("\n").find((l) => l.trim()) ?? "";
    rows.push(h("div", {
      class: `ev k-${ev.kind}${isError ? " is-error" : ""}${seq === selectedSeq ? " selected" : ""}`,
      style: `top:${i * ROW}px`, "data-seq": seq, onclick: () => select(seq),
    }, h("span", { class: "kind" }, isError ? "tool error" : ev.kind.replace("_", " ")), h("span", { class: "line" }, line)));
  }
  spacer.replaceChildren(...rows);
}

async function fetchPage(start) {
  if (loading.has(start)) return;
  loading.add(start);
  // A streaming page is fetched from its first missing row, not whole.
  let after = start;
  while (after < start + PAGE && cache.has(after + 1)) after++;
  try {
    const events = await call("transcript", { id: runId, afterSeq: after, limit: start + PAGE - after });
    for (const ev of events) cache.set(ev.seq, ev);
  } catch (e) {
    say(String(e), true);
  } finally {
    loading.delete(start);
  }
  paint();
}

/** Shows one event whole: text, and arguments or details as JSON. */
function select(seq) {
  selectedSeq = seq;
  paint();
  const ev = cache.get(seq);
  const box = view.querySelector("#event-detail");
  if (!ev) return box.replaceChildren();
  let json = null;
  if (ev.json) {
    try { json = JSON.stringify(JSON.parse(ev.json), null, 2); } catch { json = ev.json; }
  }
  box.replaceChildren(
    h("div", { class: "toolbar" }, h("span", { class: "pill" }, `#${seq} ${ev.kind}`), h("span", { class: "muted" }, ev.at)),
    h("pre", { id: "event-text" }, ev.text),
    json ? h("details", { open: ev.kind === "tool_call" }, h("summary", {}, "details"), h("pre", {}, json)) : null,
  );
}

function onKey(e) {
  if (!detail.event_count) return;
  const box = view.querySelector("#transcript");
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    const next = Math.min(detail.event_count, Math.max(1, (selectedSeq ?? 0) + (e.key === "ArrowDown" ? 1 : -1)));
    select(next);
    const top = (next - 1) * ROW;
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
  await reply(box.value, false);
  box.value = "";
}

async function allowDenied() {
  await reply("", true);
}

async function reply(text, allowDenied) {
  try {
    const run = await call("reply_run", { id: runId, text, allowDenied });
    say(`replied to ${run.id}: ${run.status}`);
  } catch (e) {
    say(String(e), true);
  }
  await refresh();
}

async function openWith(command) {
  try {
    await call(command, { id: runId });
  } catch (e) {
    say(String(e), true);
  }
}
