// The API as the console uses it: the key from sessionStorage as the bearer header, the contract's envelope
// unwrapped, its errors raised as ApiError. The key is never put in a URL, a cookie or a log.

const STORAGE = 'baton.key';

export function signedInKey() {
  return sessionStorage.getItem(STORAGE);
}

export function signIn(key) {
  sessionStorage.setItem(STORAGE, key);
}

/**
 * Forget the key and everything this tab kept while it was signed in (the subjects and threads opened): the next
 * key to sign in here may belong to another agent or tenant. Views drop what they hold in memory (lease tokens) on
 * the `baton:session-ended` event.
 */
export function signOut() {
  sessionStorage.clear();
  window.dispatchEvent(new CustomEvent('baton:session-ended'));
}

/** An error answer of the API: its status, the contract's code and message, and its details. */
export class ApiError extends Error {
  constructor(status, code, message, details, requestId) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details || {};
    this.requestId = requestId;
  }
}

/** A query string of the parameters that have a value. */
export function query(parameters) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters || {})) {
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** The path of a resource, each part escaped. */
export function path(...parts) {
  return parts.map((part) => encodeURIComponent(part)).join('/');
}

/**
 * One request: `{data, meta, status, headers}` on success. A 401 signs out and tells the page (an event it listens
 * to), carrying the contract's message; every other error answer is thrown as an ApiError.
 */
export async function api(method, url, {body, headers} = {}) {
  const key = signedInKey();
  const sent = {Accept: 'application/json', ...(headers || {})};
  if (key) sent.Authorization = `Bearer ${key}`;
  if (body !== undefined) sent['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
  } catch (failure) {
    throw new ApiError(0, 'NETWORK', `Baton could not be reached: ${failure.message}`, {}, null);
  }
  const text = await response.text();
  let answer = null;
  try {
    answer = text ? JSON.parse(text) : null;
  } catch {
    answer = null;
  }
  const requestId = answer?.meta?.request_id ?? null;
  if (!response.ok) {
    const error = answer?.error || {code: `HTTP_${response.status}`, message: `Baton answered ${response.status}.`};
    const failure = new ApiError(response.status, error.code, error.message, error.details, requestId);
    if (response.status === 401) {
      signOut();
      window.dispatchEvent(new CustomEvent('baton:signed-out', {detail: failure}));
    }
    throw failure;
  }
  return {data: answer?.data, meta: answer?.meta || {}, status: response.status, headers: response.headers};
}

export const get = (url, options) => api('GET', url, options);
export const post = (url, body, options) => api('POST', url, {...options, body});
export const del = (url, options) => api('DELETE', url, options);
