// The API as the page reaches it: the session cookie goes with every request (the
// browser sends it; no script can read it), and a request that changes something
// carries the session's CSRF token.

let csrf = "";

export function setCsrf(value) {
  csrf = value || "";
}

export class Problem extends Error {
  constructor(status, body) {
    super((body && body.detail) || `the server answered ${status}`);
    this.status = status;
    this.code = (body && body.code) || "";
    this.body = body || {};
  }
}

// `extra`: more request headers (`If-Match`).
export async function call(method, path, body, extra = {}) {
  const headers = { Accept: "application/json", ...extra };
  if (method !== "GET") headers["X-Charter-CSRF"] = csrf;
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 204) return { status: 204, body: null };
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (!response.ok) throw new Problem(response.status, data);
  return { status: response.status, body: data };
}
