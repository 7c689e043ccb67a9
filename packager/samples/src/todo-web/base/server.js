'use strict';

const http = require('node:http');

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Todos</title>
  <style>
    body { font-family: sans-serif; max-width: 30rem; margin: 2rem auto; }
    li.done span { text-decoration: line-through; color: #888; }
    #error { color: #b00; }
  </style>
</head>
<body>
  <h1>Todos</h1>
  <form id="new-todo">
    <label for="title">New todo</label>
    <input id="title" name="title" autocomplete="off">
    <button type="submit">Add</button>
  </form>
  <p id="error" role="alert"></p>
  <ul id="list"></ul>
  <p id="counter"></p>
  <script>
    const list = document.getElementById('list');
    const error = document.getElementById('error');

    async function refresh() {
      const todos = await (await fetch('/api/todos')).json();
      list.innerHTML = '';
      for (const todo of todos) {
        const li = document.createElement('li');
        li.className = todo.done ? 'done' : '';
        const box = document.createElement('input');
        box.type = 'checkbox';
        box.checked = todo.done;
        box.addEventListener('change', async () => {
          await fetch('/api/todos/' + todo.id + '/toggle', { method: 'POST' });
          refresh();
        });
        const span = document.createElement('span');
        span.textContent = todo.title;
        li.append(box, ' ', span);
        list.append(li);
      }
      const left = todos.filter((todo) => !todo.done).length;
      document.getElementById('counter').textContent =
        left + (left === 1 ? ' item left' : ' items left');
    }

    document.getElementById('new-todo').addEventListener('submit', async (event) => {
      event.preventDefault();
      const input = document.getElementById('title');
      error.textContent = '';
      await fetch('/api/todos', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ title: input.value }),
      });
      input.value = '';
      refresh();
    });

    refresh();
  </script>
</body>
</html>
`;

function sendJson(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function readJson(req) {
  return new Promise((resolve) => {
    let data = '';
    req.on('data', (chunk) => { data += chunk; });
    req.on('end', () => {
      try {
        resolve(JSON.parse(data || '{}'));
      } catch {
        resolve({});
      }
    });
  });
}

/** Create the app's HTTP server; every server keeps its own in-memory list. */
function createServer() {
  const todos = [];
  let nextId = 1;
  return http.createServer(async (req, res) => {
    const toggle = req.url.match(/^\/api\/todos\/(\d+)\/toggle$/);
    if (req.method === 'GET' && req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(PAGE);
    } else if (req.method === 'GET' && req.url === '/api/todos') {
      sendJson(res, 200, todos);
    } else if (req.method === 'POST' && req.url === '/api/todos') {
      const body = await readJson(req);
      const todo = { id: nextId++, title: String(body.title ?? ''), done: false };
      todos.push(todo);
      sendJson(res, 201, todo);
    } else if (req.method === 'POST' && toggle) {
      const todo = todos.find((t) => t.id === Number(toggle[1]));
      if (!todo) return sendJson(res, 404, { error: 'Not found' });
      todo.done = !todo.done;
      sendJson(res, 200, todo);
    } else {
      sendJson(res, 404, { error: 'Not found' });
    }
  });
}

if (require.main === module) {
  const port = Number(process.env.PORT) || 3000;
  createServer().listen(port, () => console.log(`todo-web on http://localhost:${port}/`));
}

module.exports = { createServer };
