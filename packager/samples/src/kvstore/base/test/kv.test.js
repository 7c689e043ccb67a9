'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { parse, serialize } = require('../kv.js');

test('parses key=value lines', () => {
  assert.deepStrictEqual(parse('a=1\nb = two\n'), new Map([['a', '1'], ['b', 'two']]));
});

test('skips comments and blank lines', () => {
  assert.deepStrictEqual(parse('# note\n\nx=y\n'), new Map([['x', 'y']]));
});

test('rejects a line without an equals sign', () => {
  assert.throws(() => parse('oops'), /missing '='/);
});

test('serializes a map', () => {
  assert.strictEqual(serialize(new Map([['a', '1'], ['b', '2']])), 'a=1\nb=2\n');
});
