// wasmbox JavaScript guest: the `fs` global, Node's file functions over the run's files.
//
// StarlingMonkey gives scripts no file API, so the guest reaches the run's in-memory tree
// (`/input` read-only, `/output` returned with the outcome, `/tmp` scratch; docs/files.md)
// through the `wasmbox:sandbox/files` import: whole-file calls by path, which the host
// serves from the same tree, quota and file cap as the WASI filesystem. This file turns
// them into Node's shapes: `readFileSync`, `writeFileSync`, ... with `fs.promises` and
// callbacks, and errors with Node's `code`, `errno`, `syscall` and message
// (`ENOSPC: no space left on device, write '/output/a'`). Relative paths resolve from `/`.
//
// `makeFs(files)` takes the import's functions as a parameter (runner.js passes the real
// ones), so node can test this file with a fake host.

// Each fs-error of the import: Node's code, its errno on Linux (Node's are negative) and
// the text of Node's message.
const ERRORS = {
  'no-entry': ['ENOENT', -2, 'no such file or directory'],
  exists: ['EEXIST', -17, 'file already exists'],
  'not-directory': ['ENOTDIR', -20, 'not a directory'],
  'is-directory': ['EISDIR', -21, 'illegal operation on a directory'],
  'not-empty': ['ENOTEMPTY', -39, 'directory not empty'],
  'read-only': ['EROFS', -30, 'read-only file system'],
  'not-permitted': ['EPERM', -1, 'operation not permitted'],
  invalid: ['EINVAL', -22, 'invalid argument'],
  'name-too-long': ['ENAMETOOLONG', -36, 'name too long'],
  'no-space': ['ENOSPC', -28, 'no space left on device'],
  'too-large': ['EFBIG', -27, 'file too large'],
};

/** The error Node throws for `tag` from `syscall` on `path` (and `dest`). */
function fsError(tag, syscall, path, dest) {
  const [code, errno, text] = ERRORS[tag] || ['EIO', -5, `i/o error (${String(tag)})`];
  const err = new Error(`${code}: ${text}, ${syscall} '${path}'${dest === undefined ? '' : ` -> '${dest}'`}`);
  err.errno = errno;
  err.code = code;
  err.syscall = syscall;
  err.path = path;
  if (dest !== undefined) err.dest = dest;
  return err;
}

/** A TypeError with Node's `code`. */
function typeError(code, message) {
  const err = new TypeError(message);
  err.code = code;
  return err;
}

function received(v) {
  if (v === null || v === undefined) return ` Received ${v}`;
  if (typeof v === 'function') return ` Received function ${v.name || '<anonymous>'}`;
  if (typeof v === 'object') return ` Received an instance of ${v.constructor?.name || 'Object'}`;
  return ` Received type ${typeof v} (${String(v).slice(0, 28)})`;
}

function argType(name, expected, v) {
  return typeError('ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}.${received(v)}`);
}

const later = typeof queueMicrotask === 'function' ? queueMicrotask : (fn) => { Promise.resolve().then(fn); };
const utf8Decoder = new TextDecoder();
const utf8Encoder = new TextEncoder();

/** The path argument as a string: a string, a `file:` URL or UTF-8 bytes. */
function toPath(p, name = 'path') {
  if (typeof p === 'string') return p;
  if (typeof URL === 'function' && p instanceof URL) {
    if (p.protocol !== 'file:') throw typeError('ERR_INVALID_URL_SCHEME', 'The URL must be of scheme file');
    return decodeURIComponent(p.pathname);
  }
  if (p instanceof Uint8Array) return utf8Decoder.decode(p);
  throw argType(name, 'of type string or an instance of Buffer or URL', p);
}

/** `name` under the directory `dir`. */
function join(dir, name) {
  return dir.endsWith('/') ? `${dir}${name}` : `${dir}/${name}`;
}

const ENCODINGS = new Set(['utf8', 'utf-8', 'latin1', 'binary', 'ascii', 'base64', 'base64url', 'hex', 'buffer']);

/** The encoding an options argument names (a string, or `{encoding}`), or `fallback`. */
function encodingOf(options, fallback) {
  let encoding = fallback;
  if (typeof options === 'string') encoding = options;
  else if (options !== null && typeof options === 'object' && options.encoding != null) encoding = options.encoding;
  else if (options != null && typeof options !== 'object' && typeof options !== 'function') {
    throw argType('options', 'one of type string or object', options);
  }
  if (encoding === null || encoding === undefined) return null;
  const name = String(encoding).toLowerCase();
  if (!ENCODINGS.has(name)) {
    throw typeError('ERR_INVALID_ARG_VALUE', `The argument 'encoding' is invalid encoding. Received '${encoding}'`);
  }
  return name === 'buffer' ? null : name;
}

function latin1(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return s;
}

function fromLatin1(s) {
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i) & 0xff;
  return bytes;
}

/** `bytes` as `encoding` names them (a Uint8Array for none). */
function decode(bytes, encoding) {
  switch (encoding) {
    // The bindings run in a realm of their own: a view of this realm over the same
    // bytes, so that `instanceof Uint8Array` holds in the code.
    case null: return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    case 'utf8': case 'utf-8': return utf8Decoder.decode(bytes);
    case 'latin1': case 'binary': return latin1(bytes);
    case 'ascii': return latin1(bytes.map((b) => b & 0x7f));
    case 'base64': return btoa(latin1(bytes));
    case 'base64url': return btoa(latin1(bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    case 'hex': {
      let s = '';
      for (let i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
      return s;
    }
    default: return bytes;
  }
}

/** The bytes of `data` (a string in `encoding`, or any ArrayBuffer view). */
function encode(data, encoding) {
  if (typeof data === 'string') {
    switch (encoding) {
      case 'latin1': case 'binary': case 'ascii': return fromLatin1(data);
      case 'base64': case 'base64url': return fromLatin1(atob(data.replace(/-/g, '+').replace(/_/g, '/')));
      case 'hex': {
        const n = data.length >> 1;
        const bytes = new Uint8Array(n);
        for (let i = 0; i < n; i++) bytes[i] = parseInt(data.substr(i * 2, 2), 16);
        return bytes;
      }
      default: return utf8Encoder.encode(data);
    }
  }
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw argType('data', 'of type string or an instance of Buffer, TypedArray, or DataView', data);
}

const MODE_FILE = 0o100644;
const MODE_DIR = 0o40755;

/** What `statSync` returns, with Node's fields and predicates. */
class Stats {
  constructor(stat) {
    const isDir = stat.kind === 'directory';
    const size = Number(stat.size);
    const mtimeMs = Number(stat.modifiedNs / 1000n) / 1000;
    const atimeMs = Number(stat.accessedNs / 1000n) / 1000;
    Object.assign(this, {
      dev: 0, mode: isDir ? MODE_DIR : MODE_FILE, nlink: 1, uid: 0, gid: 0, rdev: 0, blksize: 4096, ino: 0,
      size, blocks: Math.ceil(size / 512),
      atimeMs, mtimeMs, ctimeMs: mtimeMs, birthtimeMs: mtimeMs,
      atime: new Date(atimeMs), mtime: new Date(mtimeMs), ctime: new Date(mtimeMs), birthtime: new Date(mtimeMs),
    });
  }

  isFile() { return (this.mode & 0o170000) === 0o100000; }

  isDirectory() { return (this.mode & 0o170000) === 0o40000; }

  isSymbolicLink() { return false; }

  isBlockDevice() { return false; }

  isCharacterDevice() { return false; }

  isFIFO() { return false; }

  isSocket() { return false; }
}

/** What `readdirSync(path, {withFileTypes: true})` lists. */
class Dirent {
  constructor(name, kind, parentPath) {
    this.name = name;
    this.parentPath = parentPath;
    this.path = parentPath;
    this.kind = kind;
    Object.defineProperty(this, 'kind', { enumerable: false });
  }

  isFile() { return this.kind === 'file'; }

  isDirectory() { return this.kind === 'directory'; }

  isSymbolicLink() { return false; }

  isBlockDevice() { return false; }

  isCharacterDevice() { return false; }

  isFIFO() { return false; }

  isSocket() { return false; }
}

/** The write flags Node takes, as what they mean here. */
function writeMode(flag, fallback) {
  const f = flag === undefined || flag === null ? fallback : String(flag);
  return { append: f.startsWith('a'), exclusive: f.includes('x') };
}

/**
 * Node's `fs` over `files`, the `wasmbox:sandbox/files` import's functions (`read`,
 * `write`, `readDir`, `stat`, `remove`, `mkdir`, `rename`), each throwing an error whose
 * `payload` is the fs-error's name.
 */
export function makeFs(files) {
  /** Calls `op`; an fs-error becomes Node's error for `syscall`. */
  function host(op, syscall, path, dest) {
    try {
      return op();
    } catch (e) {
      const tag = e !== null && typeof e === 'object' ? e.payload : undefined;
      if (typeof tag === 'string') throw fsError(tag, syscall, path, dest);
      throw e;
    }
  }

  function statOrNull(path) {
    try {
      return files.stat(path);
    } catch (e) {
      if (e !== null && typeof e === 'object' && e.payload === 'no-entry') return null;
      throw e;
    }
  }

  function readFileSync(path, options) {
    const p = toPath(path);
    const encoding = encodingOf(options, null);
    let bytes;
    try {
      bytes = files.read(p);
    } catch (e) {
      const tag = e !== null && typeof e === 'object' ? e.payload : undefined;
      if (typeof tag === 'string') throw fsError(tag, tag === 'is-directory' ? 'read' : 'open', p);
      throw e;
    }
    return decode(bytes, encoding);
  }

  function write(path, data, options, fallbackFlag) {
    const p = toPath(path);
    const bytes = encode(data, encodingOf(options, 'utf8'));
    const flag = options !== null && typeof options === 'object' ? options.flag : undefined;
    const { append, exclusive } = writeMode(flag, fallbackFlag);
    if (exclusive && host(() => statOrNull(p), 'open', p) !== null) throw fsError('exists', 'open', p);
    try {
      files.write(p, bytes, append);
    } catch (e) {
      const tag = e !== null && typeof e === 'object' ? e.payload : undefined;
      if (typeof tag === 'string') throw fsError(tag, tag === 'no-space' || tag === 'too-large' ? 'write' : 'open', p);
      throw e;
    }
  }

  function writeFileSync(path, data, options) {
    write(path, data, options, 'w');
  }

  function appendFileSync(path, data, options) {
    write(path, data, options, 'a');
  }

  function readdirSync(path, options) {
    const p = toPath(path);
    const encoding = encodingOf(options, 'utf8');
    const withFileTypes = options !== null && typeof options === 'object' && !!options.withFileTypes;
    const recursive = options !== null && typeof options === 'object' && !!options.recursive;
    const out = [];
    // Breadth first, as Node lists a tree.
    const pending = [[p, '']];
    for (let i = 0; i < pending.length; i++) {
      const [dir, prefix] = pending[i];
      const entries = host(() => files.readDir(dir), 'scandir', dir);
      for (let j = 0; j < entries.length; j++) {
        const { name, kind } = entries[j];
        const relative = prefix === '' ? name : `${prefix}/${name}`;
        if (withFileTypes) out.push(new Dirent(name, kind, prefix === '' ? p : join(p, prefix)));
        else out.push(encoding === null ? utf8Encoder.encode(relative) : relative);
        if (recursive && kind === 'directory') pending.push([join(dir, name), relative]);
      }
    }
    return out;
  }

  function statSync(path, options) {
    const p = toPath(path);
    if (options !== null && typeof options === 'object' && options.throwIfNoEntry === false) {
      const stat = host(() => statOrNull(p), 'stat', p);
      return stat === null ? undefined : new Stats(stat);
    }
    return new Stats(host(() => files.stat(p), 'stat', p));
  }

  function lstatSync(path, options) { // no links: lstat is stat
    return statSync(path, options);
  }

  function existsSync(path) {
    try {
      files.stat(toPath(path));
      return true;
    } catch {
      return false;
    }
  }

  function accessSync(path) {
    const p = toPath(path);
    host(() => files.stat(p), 'access', p);
  }

  function mkdirSync(path, options) {
    const p = toPath(path);
    const recursive = options !== null && typeof options === 'object' && !!options.recursive;
    if (!recursive) {
      host(() => files.mkdir(p), 'mkdir', p);
      return undefined;
    }
    // Every missing directory on the way, from the top; answers the first one made.
    const parts = p.split('/').filter((part) => part !== '');
    let first;
    let at = '';
    for (let i = 0; i < parts.length; i++) {
      at = `${at}/${parts[i]}`;
      const stat = host(() => statOrNull(at), 'mkdir', p);
      if (stat === null) {
        host(() => files.mkdir(at), 'mkdir', p);
        if (first === undefined) first = at;
      } else if (stat.kind !== 'directory') {
        throw fsError(i === parts.length - 1 ? 'exists' : 'not-directory', 'mkdir', p);
      }
    }
    return first;
  }

  function unlinkSync(path) {
    const p = toPath(path);
    if (host(() => files.stat(p), 'unlink', p).kind === 'directory') throw fsError('is-directory', 'unlink', p);
    host(() => files.remove(p), 'unlink', p);
  }

  function removeTree(path) {
    const entries = host(() => files.readDir(path), 'rm', path);
    for (let i = 0; i < entries.length; i++) {
      const child = join(path, entries[i].name);
      if (entries[i].kind === 'directory') removeTree(child);
      else host(() => files.remove(child), 'rm', child);
    }
    host(() => files.remove(path), 'rm', path);
  }

  function rmdirSync(path, options) {
    const p = toPath(path);
    if (host(() => files.stat(p), 'rmdir', p).kind !== 'directory') throw fsError('not-directory', 'rmdir', p);
    if (options !== null && typeof options === 'object' && options.recursive) removeTree(p);
    else host(() => files.remove(p), 'rmdir', p);
  }

  function rmSync(path, options) {
    const p = toPath(path);
    const opts = options !== null && typeof options === 'object' ? options : {};
    const stat = host(() => statOrNull(p), 'stat', p);
    if (stat === null) {
      if (opts.force) return;
      throw fsError('no-entry', 'stat', p);
    }
    if (stat.kind !== 'directory') {
      host(() => files.remove(p), 'rm', p);
      return;
    }
    if (!opts.recursive) {
      const err = new Error(`Path is a directory: rm returned EISDIR (is a directory) ${p}`);
      err.code = 'ERR_FS_EISDIR';
      err.errno = 21;
      err.syscall = 'rm';
      err.path = p;
      throw err;
    }
    removeTree(p);
  }

  function renameSync(oldPath, newPath) {
    const from = toPath(oldPath, 'oldPath');
    const to = toPath(newPath, 'newPath');
    host(() => files.rename(from, to), 'rename', from, to);
  }

  function copyFileSync(src, dest, mode) {
    const from = toPath(src, 'src');
    const to = toPath(dest, 'dest');
    const bytes = host(() => files.read(from), 'copyfile', from, to);
    if ((mode & constants.COPYFILE_EXCL) && host(() => statOrNull(to), 'copyfile', from, to) !== null) {
      throw fsError('exists', 'copyfile', from, to);
    }
    host(() => files.write(to, bytes, false), 'copyfile', from, to);
  }

  const constants = Object.freeze({
    F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1, COPYFILE_EXCL: 1, COPYFILE_FICLONE: 2, COPYFILE_FICLONE_FORCE: 4,
  });

  const sync = {
    readFileSync, writeFileSync, appendFileSync, readdirSync, statSync, lstatSync, existsSync, accessSync,
    mkdirSync, unlinkSync, rmdirSync, rmSync, renameSync, copyFileSync,
  };

  const fs = { ...sync, constants };
  const promises = { constants };
  for (const name of Object.keys(sync)) {
    if (name === 'existsSync') continue; // Node has no promise or callback `exists` of this shape
    const base = name.slice(0, -4); // readFileSync -> readFile
    const fn = sync[name];
    // Work is synchronous in memory; the promise and the callback only change how the
    // result arrives, as in Node.
    promises[base] = async (...args) => fn(...args);
    fs[base] = (...args) => {
      const callback = args.pop();
      if (typeof callback !== 'function') throw argType('cb', 'of type function', callback);
      let result;
      let error = null;
      try {
        result = fn(...args);
      } catch (e) {
        error = e;
      }
      later(() => (error === null ? callback(null, result) : callback(error)));
    };
  }
  fs.exists = (path, callback) => {
    const found = existsSync(path);
    later(() => callback(found));
  };
  fs.promises = promises;
  fs.Stats = Stats;
  fs.Dirent = Dirent;
  return fs;
}
