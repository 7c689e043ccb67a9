'use strict';

/**
 * Parse "key=value" lines into a Map. Blank lines and lines starting with "#"
 * are skipped; keys and values are trimmed.
 */
function parse(text) {
  const out = new Map();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [key, value] = line.split('=');
    if (value === undefined) throw new Error(`missing '=' in line: ${line}`);
    out.set(key.trim(), value.trim());
  }
  return out;
}

/** Serialize a Map (or a plain object) as "key=value" lines. */
function serialize(entries) {
  const pairs = entries instanceof Map ? [...entries] : Object.entries(entries);
  return pairs.map(([key, value]) => `${key}=${value}\n`).join('');
}

module.exports = { parse, serialize };
