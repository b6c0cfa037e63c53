// Parses each Adaptive Card named on the command line (a JSON file holding the card itself, or
// a Teams Workflows message carrying it) with Microsoft's own parser, the `adaptivecards`
// package, targeting schema version 1.5, and prints one JSON line per file:
// {"file": "...", "version": "...", "errors": ["..."]}. Exit status 0 whatever it finds.
const fs = require("fs");
const AC = require("adaptivecards/dist/adaptivecards.js");

for (const file of process.argv.slice(2)) {
  const errors = [];
  let version = null;
  try {
    let json = JSON.parse(fs.readFileSync(file, "utf8"));
    if (json.type === "message") {
      const a = (json.attachments || [])[0] || {};
      if (a.contentType !== "application/vnd.microsoft.card.adaptive") {
        errors.push("the message's attachment is not an Adaptive Card");
      }
      json = a.content || {};
    }
    version = json.version || null;
    const ctx = new AC.SerializationContext();
    ctx.targetVersion = AC.Versions.v1_5;
    const card = new AC.AdaptiveCard();
    card.parse(json, ctx);
    for (let i = 0; i < ctx.eventCount; i++) {
      errors.push(ctx.getEventAt(i).message);
    }
    for (const e of card.validateProperties().validationEvents) {
      errors.push(e.message);
    }
  } catch (e) {
    errors.push(String(e));
  }
  console.log(JSON.stringify({ file, version, errors }));
}
