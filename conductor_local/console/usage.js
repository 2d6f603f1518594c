/* What the conversation cost: each turn's `turnUsage` (docs/protocol.md, "What a turn cost") as a
 * muted line under that turn's answer, and a session's totals (the sessions API's `usage`) in one
 * line. Token counts and costs are the conductor's; this module only words them. */

import { el } from "./dom.js";

const count = new Intl.NumberFormat();

/** "~$0.00029" under a dollar (two significant digits), "~$1.25" above; "" when not priced. */
export function cost(usd) {
  if (typeof usd !== "number" || !Number.isFinite(usd)) return "";
  const digits = usd >= 1 ? { minimumFractionDigits: 2, maximumFractionDigits: 2 } : { maximumSignificantDigits: 2 };
  return `~${new Intl.NumberFormat("en-US", { style: "currency", currency: "USD", ...digits }).format(usd)}`;
}

const n = (value) => count.format(Number.isInteger(value) && value > 0 ? value : 0);

/** The tokens part: "1,234 in / 56 out tokens", then the cache and dropped speculations when any. */
function tokens(usage) {
  const parts = [`${n(usage.inputTokens)} in / ${n(usage.outputTokens)} out tokens`];
  if (usage.cacheReadTokens > 0 || usage.cacheWriteTokens > 0) {
    parts.push(`cache ${n(usage.cacheReadTokens)} read / ${n(usage.cacheWriteTokens)} written`);
  }
  const speculated = (usage.speculationInputTokens || 0) + (usage.speculationOutputTokens || 0);
  if (speculated > 0) parts.push(`${n(speculated)} on dropped speculations`);
  return parts;
}

/** One turn's line: "1,234 in / 56 out tokens · ~$0.0012 · first word 510 ms". */
export function turnLine(usage) {
  const parts = tokens(usage);
  const priced = cost(usage.costUsd);
  if (priced) parts.push(priced);
  if (Number.isInteger(usage.firstSpeakMs)) parts.push(`first word ${n(usage.firstSpeakMs)} ms`);
  return parts.join(" · ");
}

/** The same turn in full, for the line's tooltip. */
function turnDetail(usage) {
  const lines = [];
  if (Array.isArray(usage.models) && usage.models.length) lines.push(`models: ${usage.models.join(", ")}`);
  lines.push(`model requests: ${n(usage.requests)}`);
  if (Number.isInteger(usage.firstPartialMs)) lines.push(`first partial: ${n(usage.firstPartialMs)} ms`);
  if (Number.isInteger(usage.endMs)) lines.push(`end: ${n(usage.endMs)} ms`);
  if (usage.pricesAsOf) lines.push(`estimated at the list prices of ${usage.pricesAsOf}, not the bill`);
  return lines.join("\n");
}

/** The list item showing one turn's usage. */
export function turnUsageItem(usage) {
  const item = el("li", { class: "usage", text: turnLine(usage), title: turnDetail(usage) });
  if (typeof usage.turnId === "string") item.dataset.turnId = usage.turnId;
  return item;
}

/** A session's totals: "3 model requests · 7,257 in / 108 out tokens · ~$0.00086". */
export function totalsLine(usage) {
  const parts = [`${n(usage.requests)} model ${usage.requests === 1 ? "request" : "requests"}`, ...tokens(usage)];
  const priced = cost(usage.costUsd);
  if (priced) parts.push(usage.pricesAsOf ? `${priced} (prices of ${usage.pricesAsOf})` : priced);
  return parts.join(" · ");
}
