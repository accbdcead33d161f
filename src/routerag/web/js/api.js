// The service's HTTP API. The API key (when the server needs one) lives in sessionStorage.

export class ApiError extends Error {
  constructor(status, detail, errors) {
    super(detail);
    this.status = status;
    this.errors = errors || [];
  }
}

function headers(extra = {}) {
  const key = sessionStorage.getItem("routerag-key");
  return key ? { "X-API-Key": key, ...extra } : extra;
}

async function check(r) {
  if (r.ok) return r;
  let body = {};
  try { body = await r.json(); } catch { body = { detail: r.statusText }; }
  throw new ApiError(r.status, body.detail || r.statusText, body.errors);
}

export async function get(path) {
  return (await check(await fetch(path, { headers: headers() }))).json();
}

export async function blob(path) {
  return (await check(await fetch(path, { headers: headers() }))).blob();
}

export async function post(path, body) {
  const r = await fetch(path, { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
  return (await check(r)).json();
}

export async function del(path) {
  return (await check(await fetch(path, { method: "DELETE", headers: headers() }))).json();
}

export async function upload(name, profile, file) {
  const form = new FormData();
  form.append("name", name);
  form.append("profile", profile);
  form.append("file", file, file.name);
  return (await check(await fetch("/v1/sources", { method: "POST", headers: headers(), body: form }))).json();
}

// POST a body and read server-sent events; onEvent(name, data) for each.
export async function stream(path, body, onEvent, signal) {
  const r = await check(await fetch(path, {
    method: "POST", headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body), signal,
  }));
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}
