// Reads a JSON list of LogQL expressions on stdin; prints, for each, the offsets of parse errors.
const { parser } = require("@grafana/lezer-logql");
const exprs = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = exprs.map((expr) => {
  const tree = parser.parse(expr);
  const errors = [];
  tree.iterate({ enter: (n) => { if (n.type.isError) errors.push(n.from); } });
  return { expr, errors, top: tree.topNode.firstChild ? tree.topNode.firstChild.name : null };
});
process.stdout.write(JSON.stringify(out));
