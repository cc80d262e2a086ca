// `globSync` for the conformance suite's bundle on Node 20, which lacks
// fs.globSync (added in Node 22). The bundle imports it by name from "fs",
// which fails to link on Node 20 before any command runs; scripts/
// conformance.sh rewrites that one import to take it from here instead.
// The suite uses it only to find `**/checks.json` under a directory (its
// tier-check command, which scripts/conformance.sh does not run); this
// supports `*`, `**/`, `?` and `{ cwd }`, enough for that, and defers to
// fs.globSync where Node has it.
import fs from "node:fs";
import path from "node:path";

function toRegExp(pattern) {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*" && pattern[i + 1] === "*" && pattern[i + 2] === "/") {
      re += "(?:.*/)?";
      i += 2;
    } else if (c === "*" && pattern[i + 1] === "*") {
      re += ".*";
      i += 1;
    } else if (c === "*") {
      re += "[^/]*";
    } else if (c === "?") {
      re += "[^/]";
    } else {
      re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
    }
  }
  return new RegExp("^" + re + "$");
}

export function globSync(pattern, options = {}) {
  if (typeof fs.globSync === "function") return fs.globSync(pattern, options);
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const res = (Array.isArray(pattern) ? pattern : [pattern]).map(toRegExp);
  let entries;
  try {
    entries = fs.readdirSync(cwd, { recursive: true });
  } catch {
    return [];
  }
  return entries
    .map((entry) => String(entry).split(path.sep).join("/"))
    .filter((entry) => res.some((re) => re.test(entry)))
    .sort();
}
