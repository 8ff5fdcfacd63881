// A run's worktree changes in the run view: files with added and removed
// lines, one file's diff at a time (so a 1,000-file change paints at once)
// drawn by diff2html as reviewers read diffs — line numbers, the changes
// within a line marked, side by side where the window is wide — its code
// coloured by a small language-neutral highlighter, and Merge / Discard.
// Every text of a run's is put in as text; diff2html's HTML escapes every
// line and name it is given.

import { call, h, say } from "../kit.js";

let box = null;
let runId = null;
let files = [];       // [{ path, added, removed, binary, patch }]
let selected = 0;
let measuredFor = null;
let merged = null;
let pullRequest = null; // { number, url, … } once one was opened (`corral pr`)    // it was merged: { commit } (the commit it landed as, when this window merged it)

/** Shows the changes of `run` in `container`; measures again only when the
 *  run's end (or its worktree) changed since the last look. */
export async function render(container, run) {
  box = container;
  if (runId !== run.id) merged = null;
  runId = run.id;
  if (run.worktree?.merged && !merged) merged = { commit: null };
  const key = `${run.id}|${run.status}|${run.exited_at}|${run.worktree?.path}`;
  if (!run.worktree) {
    measuredFor = key;
    box.replaceChildren(run.changes ? h("p", { class: "muted" }, "Its worktree was discarded.") : "");
    return;
  }
  if (key === measuredFor) return;
  measuredFor = key;
  await load();
}

/** Forgets what was shown (another run is opened). */
export function reset() {
  measuredFor = null;
  files = [];
  selected = 0;
}

async function load() {
  box.replaceChildren(h("p", { class: "muted" }, "Measuring changes…"));
  pullRequest = await call("pull_request", { id: runId }).catch(() => null);
  let result;
  try {
    result = await call("run_changes", { id: runId });
  } catch (e) {
    box.replaceChildren(h("p", { class: "error" }, String(e)));
    return;
  }
  const patches = splitPatch(result.patch);
  files = result.changes.files.map((f) => ({ ...f, patch: patches.get(f.path) ?? "" }));
  selected = Math.min(selected, Math.max(0, files.length - 1));
  paint(result.changes);
}

/** The unified diff cut into one text per file, by path. */
function splitPatch(patch) {
  const out = new Map();
  const parts = patch.split(/^(?=diff --git )/m);
  for (const part of parts) {
    const m = /^diff --git a\/(.*?) b\/(.*)$/m.exec(part);
    if (m) out.set(m[2], part);
  }
  return out;
}

function paint(changes) {
  if (!files.length) {
    // Nothing left to merge: say why in words (merged, or never changed),
    // with no hash the user never saw and no button that would only fail.
    const said = merged
      ? `Merged${merged.commit ? ` as ${merged.commit.slice(0, 12)}` : ""}: nothing changed since.`
      : "No changes.";
    box.replaceChildren(h("div", { class: "toolbar", id: "changes-state" },
      merged ? h("span", { class: "chip merged" }, "merged") : null, h("span", { class: "muted" }, said),
      h("span", { style: "flex:1" }),
      h("button", { class: "danger", id: "discard", onclick: discard }, merged ? "Remove worktree…" : "Discard…")));
    return;
  }
  const summary = h("div", { class: "toolbar" },
    h("strong", {}, `${files.length} file${files.length === 1 ? "" : "s"}`),
    h("span", { class: "add" }, `+${changes.added}`), h("span", { class: "del" }, `−${changes.removed}`),
    h("span", { class: "muted" }, merged ? "since its last merge" : "since it started"),
    h("span", { style: "flex:1" }),
    // Said in words, not in tooltips: a tooltip outlives the button a
    // click redraws (WebKitGTK leaves it floating over the page).
    files.length ? h("span", { class: "muted" }, "Merge: one commit on the branch it started from; keeping commits: a merge commit with the agent's own") : null,
    h("button", { id: "merge", onclick: () => merge(false), disabled: !files.length }, "Merge"),
    h("button", { id: "merge-keep", onclick: () => merge(true), disabled: !files.length }, "Merge keeping commits"),
    h("button", { id: "open-pr", onclick: openPullRequest }, pullRequest ? `Push to ${pullRequest.number ? `#${pullRequest.number}` : "its pull request"}` : "Open pull request"),
    pullRequest ? h("span", { class: "muted", id: "pr-link" }, `pull request ${pullRequest.url}`) : null,
    h("button", { class: "danger", id: "discard", onclick: discard }, "Discard…"),
  );
  const list = h("div", { class: "files", id: "changed-files" }, files.map((f, i) =>
    h("div", { class: `file${i === selected ? " selected" : ""}`, onclick: () => { selected = i; paint(changes); } },
      h("span", { class: "path" }, f.path),
      f.binary ? h("span", { class: "muted" }, "binary") : [h("span", { class: "add" }, `+${f.added}`), h("span", { class: "del" }, `−${f.removed}`)])));
  box.replaceChildren(summary, h("div", { class: "changes" }, list, diffView(files[selected])));
}

/** One file's diff (`file`: its path and patch), as diff2html draws it:
 *  side by side from WIDE pixels of window, else line by line. */
export function diffView(file) {
  const box = h("div", { class: "diff", id: "diff" });
  if (!file.patch) return box;
  box.innerHTML = Diff2Html.html(file.patch, {
    drawFileList: false,
    matching: "lines",
    diffStyle: "word",
    outputFormat: window.innerWidth >= WIDE ? "side-by-side" : "line-by-line",
  });
  const lang = file.path.split(".").pop();
  if (!PROSE.has(lang)) for (const cell of box.querySelectorAll(".d2h-code-line-ctn")) colour(cell, lang);
  return box;
}

/** The window's width from which a diff is drawn side by side. */
const WIDE = 1100;

/** Colours the code of one drawn line, text node by text node (within-line
 *  marks stay as they are). */
function colour(cell, lang) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const text of texts) {
    const parts = highlight(text.nodeValue, lang);
    if (parts.some((p) => typeof p !== "string")) text.replaceWith(...parts);
  }
}

const PROSE = new Set(["md", "markdown", "txt", "rst", "adoc", "org"]);
const KEYWORDS = new Set(("fn let mut pub use mod impl struct enum trait match if else for while loop return break continue " +
  "const static async await move self Self where type function var class extends import export from default new this " +
  "def elif lambda yield with as try except finally raise pass None True False null true false undefined in of " +
  "package func go defer interface map chan select case switch public private protected void int string bool").split(" "));
const TOKEN = /("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\/\/.*$|#(?![[!]).*$|--\s.*$)|(\b\d[\d_.]*\b)|([A-Za-z_][A-Za-z0-9_]*)/g;

/** Spans for strings, comments, numbers and keywords: enough colour to
 *  read a diff in any of the usual languages, as text nodes only. */
function highlight(text, lang) {
  // Prose is not code: "for" and "in" in a sentence are words.
  if (PROSE.has(lang)) return [text];
  const comments = lang !== "json";
  const out = [];
  let at = 0;
  for (const m of text.matchAll(TOKEN)) {
    const [whole, str, comment, num, word] = m;
    let cls = null;
    if (str) cls = "tk-str";
    else if (comment && comments) cls = "tk-com";
    else if (num) cls = "tk-num";
    else if (word && KEYWORDS.has(word)) cls = "tk-kw";
    if (!cls) continue;
    if (m.index > at) out.push(text.slice(at, m.index));
    out.push(h("span", { class: cls }, whole));
    at = m.index + whole.length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

async function merge(keepCommits) {
  for (const b of box.querySelectorAll("#merge, #merge-keep")) b.disabled = true;
  try {
    const commit = await call("merge_run", { id: runId, keepCommits });
    merged = { commit };
    say(`merged as ${commit.slice(0, 12)}; the worktree stays until you remove it`);
  } catch (e) {
    say(String(e), true);
  }
  // What is left to merge now: nothing, after a merge.
  await load();
}

/** The run's work as a pull request (or pushed to the one it has), as
 *  `corral pr` does: committed on its branch, pushed, opened with gh/glab. */
async function openPullRequest(e) {
  e.currentTarget.disabled = true;
  try {
    const opened = await call("open_pull_request", { id: runId, draft: false });
    say(opened.opened ? `pull request opened: ${opened.url}` : `pushed to ${opened.url}`);
  } catch (err) {
    say(String(err), true);
  }
  await load();
}

/** Asks first, in place: the first click arms the button, the second discards. */
async function discard(e) {
  const button = e.currentTarget;
  if (!button.classList.contains("armed")) {
    button.classList.add("armed");
    button.textContent = "Discard worktree and branch: click again";
    say("Its changes are lost unless merged. Click again to discard, or anywhere else to keep them.");
    setTimeout(() => document.addEventListener("click", (ev) => {
      if (ev.target !== button) { button.classList.remove("armed"); button.textContent = "Discard…"; say(""); }
    }, { once: true }), 0);
    return;
  }
  try {
    await call("discard_run", { id: runId });
    say(`discarded ${runId}'s worktree`);
    measuredFor = null;
    box.replaceChildren(h("p", { class: "muted" }, "Its worktree was discarded."));
  } catch (e) {
    say(String(e), true);
  }
}
