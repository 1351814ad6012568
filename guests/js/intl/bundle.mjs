// Builds the JavaScript guest's `Intl` (intl/README.md says what it offers): FormatJS's
// polyfills in one minified bundle, the locale data of LOCALES, the IANA time zones of
// @formatjs/intl-datetimeformat's add-all-tz.js, and the collator's tables, computed
// here from Node's own ICU. build.mjs calls bundleIntl() before componentize-js runs.
//
// The output is one module, node_modules/.cache/wasmbox-intl/intl.js: the guest's engine
// (StarlingMonkey) reads modules only from guests/js, and a generated file there would
// be an input of the next build's fingerprint; node_modules is not. Everything in it is
// a function the build never calls, answering a string: SpiderMonkey keeps an uncalled
// function as source text, so a run that never formats pays nothing, and the first use
// in a run compiles only what it needs (intl/lazy.js). The polyfills' code is a string
// too, compiled on first use: as code, the build would syntax-parse each of its
// functions into the snapshot.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';
import { parseAst } from 'rolldown/parseAst';
import { collationTables } from './collation_tables.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** The locales with data, in CLDR's names (`en` is en-US, `pt` is pt-BR, `zh` zh-Hans). */
export const LOCALES = ['en', 'en-GB', 'de', 'fr', 'es', 'it', 'pt', 'nl', 'ja', 'zh'];

/** The generated module, relative to guests/js. */
export const OUTPUT = 'node_modules/.cache/wasmbox-intl/intl.js';

// The polyfills whose locale data we add, by the global each one's data registers with.
const COMPONENTS = [
  ['PluralRules', '@formatjs/intl-pluralrules'],
  ['NumberFormat', '@formatjs/intl-numberformat'],
  ['DateTimeFormat', '@formatjs/intl-datetimeformat'],
  ['RelativeTimeFormat', '@formatjs/intl-relativetimeformat'],
];

const packageDir = (name) => join(here, '..', 'node_modules', name);

// Runs one of FormatJS's data files (a script that hands its data to
// Intl.<name>.__addLocaleData or __addTZData) against a stand-in `Intl` and answers
// the data it was given.
async function capture(file, name, method) {
  const source = await readFile(file, 'utf8');
  const given = [];
  const Intl = { [name]: { [method]: (d) => given.push(d) } };
  new Function('Intl', 'globalThis', source)(Intl, { Intl });
  if (given.length !== 1) throw new Error(`${file} gave ${given.length} data objects to Intl.${name}.${method}`);
  return given[0];
}

// Source text of a data object: JSON, except the plural rules' functions.
function toSource(value) {
  if (typeof value === 'function') {
    const text = value.toString();
    return text.startsWith('function') || text.startsWith('(') ? text : `function ${text}`;
  }
  if (Array.isArray(value)) return `[${value.map(toSource).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toSource(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

// DateTimeFormat parses all of a locale's ~750 skeletons, each with its interval
// (formatRange) patterns, the first time a formatter of that locale is made: ~1.5 s in
// the guest's interpreter. Most of it is the interval patterns, which only the chosen
// skeleton's formatRange needs: they are parsed when first read.
const PATCHES = {
  '@formatjs/intl-datetimeformat/polyfill-force.js': [[
    '(skeleton) => parseDateTimeSkeleton(skeleton, formats[calendar][skeleton], '
      + 'calendarIntervals[skeleton] || findIntervalFormat(skeleton, calendarIntervals), '
      + 'calendarIntervals.intervalFormatFallback)',
    '(skeleton) => parseDateTimeSkeletonRangesOnUse(skeleton, formats[calendar][skeleton], '
      + '() => calendarIntervals[skeleton] || findIntervalFormat(skeleton, calendarIntervals), '
      + 'calendarIntervals.intervalFormatFallback)',
  ], [
    'function parseDateTimeSkeleton(',
    `function parseDateTimeSkeletonRangesOnUse(skeleton, rawPattern, intervals, fallback) {
  const result = parseDateTimeSkeleton(skeleton, rawPattern);
  let full;
  const ranges = () => (full ??= parseDateTimeSkeleton(skeleton, rawPattern, intervals(), fallback));
  for (const name of ['rangePatterns', 'rangePatterns12']) {
    Object.defineProperty(result, name, {
      enumerable: true,
      configurable: true,
      get: () => ranges()[name],
      set(value) {
        Object.defineProperty(result, name, { value, writable: true, enumerable: true, configurable: true });
      },
    });
  }
  return result;
}
function parseDateTimeSkeleton(`,
  ]],
};

const patching = {
  name: 'wasmbox-intl-patches',
  transform(code, id) {
    const key = Object.keys(PATCHES).find((k) => id.replaceAll('\\', '/').endsWith(`node_modules/${k}`));
    for (const [from, to] of key ? PATCHES[key] : []) {
      if (code.split(from).length !== 2) throw new Error(`intl/bundle.mjs: ${key} no longer holds, once, the text patched: ${from}`);
      code = code.replace(from, () => to);
    }
    return jsonLiterals(code);
  },
};

// The polyfills' CLDR tables (likely subtags, aliases, ...) are object and array
// literals of thousands of entries, which the guest's interpreter builds slowly, property
// by property, on first use; JSON.parse of the same text is much faster (as in V8's
// advice on large literals). Each literal of JSON values alone, of LARGE characters or
// more, becomes JSON.parse('...'): a new object at each evaluation, as before.
const LARGE = 1000;
const NOT_JSON = Symbol('not JSON');

function jsonValue(node) {
  switch (node.type) {
    case 'Literal':
      if (node.regex || node.bigint !== undefined || typeof node.value === 'bigint') return NOT_JSON;
      if (typeof node.value === 'number' && (!Number.isFinite(node.value) || Object.is(node.value, -0))) return NOT_JSON;
      return node.value;
    case 'UnaryExpression': {
      const { argument } = node;
      if (node.operator !== '-' || argument.type !== 'Literal' || typeof argument.value !== 'number') return NOT_JSON;
      return argument.value === 0 || !Number.isFinite(argument.value) ? NOT_JSON : -argument.value;
    }
    case 'TemplateLiteral':
      return node.expressions.length === 0 && typeof node.quasis[0].value.cooked === 'string' ? node.quasis[0].value.cooked : NOT_JSON;
    case 'ArrayExpression': {
      const out = [];
      for (const element of node.elements) {
        const value = element === null ? NOT_JSON : jsonValue(element);
        if (value === NOT_JSON) return NOT_JSON;
        out.push(value);
      }
      return out;
    }
    case 'ObjectExpression': {
      const out = {};
      for (const property of node.properties) {
        if (property.type !== 'Property' || property.kind !== 'init' || property.method || property.computed || property.shorthand) return NOT_JSON;
        const { key } = property;
        const name = key.type === 'Identifier' ? key.name
          : key.type === 'Literal' && (typeof key.value === 'string' || typeof key.value === 'number') ? String(key.value)
            : undefined;
        if (name === undefined || name === '__proto__') return NOT_JSON;
        const value = jsonValue(property.value);
        if (value === NOT_JSON) return NOT_JSON;
        out[name] = value;
      }
      return out;
    }
    default:
      return NOT_JSON;
  }
}

function jsonLiterals(code) {
  const replacements = [];
  const visit = (node) => {
    if (!node || typeof node.type !== 'string') return;
    if ((node.type === 'ObjectExpression' || node.type === 'ArrayExpression') && node.end - node.start >= LARGE) {
      const value = jsonValue(node);
      if (value !== NOT_JSON) {
        replacements.push([node.start, node.end, `JSON.parse(${JSON.stringify(JSON.stringify(value))})`]);
        return;
      }
    }
    for (const child of Object.values(node)) {
      if (Array.isArray(child)) child.forEach(visit);
      else if (child && typeof child === 'object') visit(child);
    }
  };
  visit(parseAst(code));
  replacements.sort((a, b) => b[0] - a[0]);
  for (const [start, end, text] of replacements) code = code.slice(0, start) + text + code.slice(end);
  return code;
}

async function polyfillCode() {
  const bundle = await rolldown({
    input: join(here, 'polyfills.js'),
    platform: 'neutral',
    resolve: { mainFields: ['module', 'main'] },
    plugins: [patching],
    logLevel: 'warn',
  });
  const { output } = await bundle.generate({ format: 'iife', minify: process.env.WASMBOX_INTL_MINIFY !== '0', comments: { legal: false } });
  await bundle.close();
  if (output.length !== 1) throw new Error(`rolldown wrote ${output.length} chunks for intl/polyfills.js`);
  return output[0].code;
}

/** Writes OUTPUT under `root` (guests/js); answers its size in bytes. */
export async function bundleIntl(root) {
  const parts = [
    '// @generated by guests/js/intl/bundle.mjs from the FormatJS packages in package-lock.json.',
    `export const LOCALES = ${JSON.stringify(LOCALES)};`,
    `export const polyfills = () => ${JSON.stringify(await polyfillCode())};`,
  ];
  // Per locale, one function answering [PluralRules data (code: its rules are
  // functions), then the JSON text of NumberFormat, DateTimeFormat and
  // RelativeTimeFormat's]: JSON.parse reads a string far faster than the engine
  // compiles the same object as code.
  const loaders = [];
  for (const locale of LOCALES) {
    const data = [];
    for (const [name, pkg] of COMPONENTS) {
      let file = join(packageDir(pkg), 'locale-data', `${locale}.js`);
      // Plural rules are per language: en-GB's are en's.
      if (name === 'PluralRules' && locale.includes('-')) file = join(packageDir(pkg), 'locale-data', `${locale.split('-')[0]}.js`);
      const given = await capture(file, name, '__addLocaleData');
      if (name === 'PluralRules') given.locale = locale;
      data.push(name === 'PluralRules' ? toSource(given) : JSON.stringify(JSON.stringify(given)));
    }
    loaders.push(`${JSON.stringify(locale)}: () => [${data.join(',')}]`);
  }
  parts.push(`export const LOCALE_DATA = {\n${loaders.join(',\n')}\n};`);
  const tz = await capture(join(packageDir('@formatjs/intl-datetimeformat'), 'add-all-tz.js'), 'DateTimeFormat', '__addTZData');
  parts.push(`export const timeZones = () => ${JSON.stringify(JSON.stringify(tz))};`);
  parts.push(`export const collation = () => ${JSON.stringify(JSON.stringify(collationTables(LOCALES)))};`);
  // ASCII only: SpiderMonkey keeps a source with any other character as UTF-16, twice
  // the size of Latin-1.
  const text = `${parts.join('\n')}\n`.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const out = join(root, OUTPUT);
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, text);
  return Buffer.byteLength(text);
}
