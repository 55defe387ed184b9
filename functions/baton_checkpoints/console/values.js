// LangGraph's typed values (`{type, data}`, data in base64) decoded for reading: `json` parsed, `msgpack` decoded
// with MessagePack's browser build (vendored: msgpack-3.1.3.min.js, loaded the first time a msgpack value is
// shown) and LangGraph's extension types turned into plain data: `{"$type": "module.Name", ...}`.

const MSGPACK_SCRIPT = '/console/msgpack-3.1.3.min.js';
let loading = null;

/** MessagePack's module, once its script has run (a classic script from this origin: the CSP allows it). */
function messagePack() {
  if (window.MessagePack) return Promise.resolve(window.MessagePack);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = MSGPACK_SCRIPT;
      script.addEventListener('load', () => resolve(window.MessagePack));
      script.addEventListener('error', () => {
        loading = null;
        reject(new Error('the MessagePack decoder did not load'));
      });
      document.head.append(script);
    });
  }
  return loading;
}

/** The bytes of standard base64 text. */
export function base64Bytes(data) {
  const binary = atob(data);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i);
  return out;
}

// LangGraph's extension codes (langgraph.checkpoint.serde.jsonplus): an object rebuilt by its constructor, a
// method or pydantic is packed as (module, name, arguments[, method]).
const CONSTRUCTED = new Set([0, 1, 2, 3, 4, 5]);

function codec(MessagePack) {
  const extensions = new MessagePack.ExtensionCodec();
  const decodeNested = (data) => MessagePack.decode(data, {extensionCodec: extensions, useBigInt64: true});
  for (const code of CONSTRUCTED) {
    extensions.register({
      type: code,
      encode: () => null,
      decode: (data) => {
        const parts = decodeNested(data);
        if (!Array.isArray(parts) || parts.length < 3) return {$ext: code, value: parts};
        const [module, name, argument] = parts;
        if (module === 'uuid' && name === 'UUID' && typeof argument === 'string' && argument.length === 32) {
          return `${argument.slice(0, 8)}-${argument.slice(8, 12)}-${argument.slice(12, 16)}-${argument.slice(16, 20)}-${argument.slice(20)}`;
        }
        const type = `${module}.${name}`;
        if (argument !== null && typeof argument === 'object' && !Array.isArray(argument)) return {$type: type, ...argument};
        return {$type: type, value: argument};
      },
    });
  }
  return {extensions, decodeNested};
}

let decoder = null;

/** JSON can show what MessagePack decodes: bytes as their size, big integers as text. */
function plain(value) {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Uint8Array) return {$bytes: value.length};
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), plain(v)]));
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') {
    if (value.constructor && value.constructor.name === 'ExtData') return {$ext: value.type, bytes: value.data.length};
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

/**
 * A typed value as plain data: `{decoded: true, value}`, or `{decoded: false, reason}` for a type shown only by
 * its size (`bytes`, `null`, `empty`) or bytes that do not decode.
 */
export async function decodeValue(typed) {
  if (typeof typed.data !== 'string') return {decoded: false, reason: 'stored in the bucket'};
  try {
    if (typed.type === 'json') {
      return {decoded: true, value: JSON.parse(new TextDecoder('utf-8', {fatal: true}).decode(base64Bytes(typed.data)))};
    }
    if (typed.type === 'msgpack') {
      const MessagePack = await messagePack();
      decoder = decoder || codec(MessagePack);
      return {decoded: true, value: plain(decoder.decodeNested(base64Bytes(typed.data)))};
    }
  } catch (failure) {
    return {decoded: false, reason: `does not decode as ${typed.type} (${failure.message})`};
  }
  return {decoded: false, reason: typed.type === 'bytes' ? 'raw bytes' : 'no value'};
}
