// Presets: each with its source file, what it overrides, and the files
// that could not be used, for the folder chosen.

import { call, fill, h } from "../kit.js";

let root = null;
let cwd = "";

export async function show(view) {
  root = view;
  const folders = await call("recent_folders");
  if (!cwd && folders.length) cwd = folders[0];
  const input = h("input", { type: "text", id: "presets-cwd", value: cwd, size: 60, placeholder: "project folder (for its .claude/agents, .pi/subagents, .corral/presets)", list: "preset-folders", onchange: (e) => { cwd = e.target.value; refresh(); } });
  view.append(
    h("div", { class: "toolbar" }, h("h1", { style: "margin:0" }, "Presets"), input,
      h("datalist", { id: "preset-folders" }, folders.map((f) => h("option", { value: f })))),
    h("div", { id: "presets-body" }),
  );
  await refresh();
}

export function leave() {
  root = null;
}

export function cares(change) {
  return change.statuses;
}

export async function refresh(change) {
  // Presets live in files, not in the store: only a status change (a run
  // launched from another folder, say) is worth a look.
  if (!root || (change && !change.statuses)) return;
  const set = await call("list_presets", { cwd: cwd || null });
  const cards = set.presets.map((p) => h("div", { class: "card", "data-preset": p.name },
    h("div", { class: "toolbar" }, h("strong", {}, p.name), h("span", { class: "pill" }, p.agent), p.model ? h("span", { class: "pill" }, p.model) : null, h("span", { class: "pill" }, p.source),
      h("span", { style: "flex:1" }),
      // An agent not installed here: said on the card, and nothing to launch.
      p.unavailable ? h("span", { class: "chip", title: p.unavailable }, "cannot start here")
        : h("a", { href: `#/launch?preset=${encodeURIComponent(p.name)}&cwd=${encodeURIComponent(cwd)}` }, "Launch…")),
    h("div", {}, p.description),
    p.unavailable ? h("div", { class: "path unavailable" }, p.unavailable) : null,
    h("div", { class: "path" }, p.path),
    p.overrides.length ? h("div", { class: "path" }, "overrides: ", p.overrides.join(", ")) : null,
  ));
  const problems = set.problems.map((p) => h("div", { class: "card problem" },
    h("div", { class: "path" }, p.path), h("div", {}, p.reason)));
  fill(root.querySelector("#presets-body"),
    h("div", { class: "cards" }, cards),
    problems.length ? h("h2", {}, `Not usable (${problems.length})`) : null,
    problems.length ? h("div", { class: "cards", id: "preset-problems" }, problems) : null,
    h("h2", {}, "Searched"),
    h("div", { class: "path" }, set.searched.join("  ·  ")),
    await settingsSection(),
  );
}

/** Where Corral keeps its files, and starting at login. */
async function settingsSection() {
  const settings = await call("settings");
  const box = h("input", { type: "checkbox", id: "autostart", checked: settings.autostart, onchange: async (e) => {
    e.target.checked = await call("set_autostart", { on: e.target.checked });
  } });
  return h("section", {},
    h("h2", {}, "Settings"),
    h("label", {}, box, " Start Corral's tray at login"),
    h("div", { class: "path" }, `Data: ${settings.data_dir}`),
    h("div", { class: "path" }, `Settings file: ${settings.config_file} (max_parallel, graces, default limits)`),
    h("h2", {}, "This machine"),
    h("div", { id: "doctor" }, h("button", { onclick: checkMachine }, "Check (corral doctor)")),
  );
}

/** The same report as `corral doctor`: each finding, and the fix it names. */
async function checkMachine() {
  const box = root?.querySelector("#doctor");
  if (!box) return;
  box.replaceChildren(h("div", { class: "path" }, "Checking…"));
  const report = await call("doctor");
  const rows = report.findings.map((f) => h("div", { class: `finding ${f.level}`, "data-check": `${f.area}/${f.check}` },
    h("span", { class: "pill" }, f.level), " ", h("strong", {}, `${f.area} · ${f.check}`), " ", f.detail,
    f.fix ? h("div", { class: "path" }, "→ ", f.fix) : null));
  const count = (level) => report.findings.filter((f) => f.level === level).length;
  box.replaceChildren(
    h("div", {}, `${count("fail")} failing, ${count("warn")} to look at, ${count("ok")} ok (${report.took_ms} ms) `,
      h("button", { onclick: checkMachine }, "Check again")),
    ...rows);
}
