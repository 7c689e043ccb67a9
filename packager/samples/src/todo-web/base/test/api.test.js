'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { createServer } = require('../server.js');

function request(port, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, method, path, headers: { 'content-type': 'application/json' } }, (res) => {
      let data = '';
      res.on('data', (chunk) => { data += chunk; });
      res.on('end', () => resolve({ status: res.statusCode, body: data ? JSON.parse(data) : null }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function withServer(fn) {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await fn(server.address().port);
  } finally {
    server.close();
  }
}

test('adds and lists todos', () => withServer(async (port) => {
  const created = await request(port, 'POST', '/api/todos', { title: 'Buy milk' });
  assert.strictEqual(created.status, 201);
  assert.deepStrictEqual(created.body, { id: 1, title: 'Buy milk', done: false });
  const list = await request(port, 'GET', '/api/todos');
  assert.deepStrictEqual(list.body, [created.body]);
}));

test('toggles a todo', () => withServer(async (port) => {
  await request(port, 'POST', '/api/todos', { title: 'Buy milk' });
  const toggled = await request(port, 'POST', '/api/todos/1/toggle');
  assert.strictEqual(toggled.body.done, true);
}));
