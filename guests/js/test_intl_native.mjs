// Native tests of the JS guest's `Intl` (intl/): `node guests/js/test_intl_native.mjs`,
// after a build has written node_modules/.cache/wasmbox-intl/intl.js (build.mjs, or
// `node -e "import('./intl/bundle.mjs').then((m) => m.bundleIntl('.'))"` in guests/js).
//
// Node has ICU, so our polyfilled `Intl`, installed here in place of Node's as the guest
// installs it, is held to Node's own: the collator on random strings of the characters
// its tables cover, every option and locale. tests/all/js_batteries.rs tests the guest.
import test from 'node:test';
import assert from 'node:assert/strict';

const NativeCollator = Intl.Collator;
delete globalThis.Intl;
const { installIntlOnFirstUse } = await import('./intl/lazy.js');
installIntlOnFirstUse(globalThis);

const LETTERS = [
  'a', 'b', 'c', 'e', 'i', 'n', 'o', 's', 'z', 'A', 'B', 'E', 'I', 'N', 'O', 'Z',
  'á', 'à', 'â', 'ä', 'é', 'è', 'ê', 'ë', 'ñ', 'Ñ', 'ö', 'ø', 'ß', 'æ', 'ç', 'ü', 'Ü', 'É',
  'ő', 'ą', 'ł', 'Ł', 'ı', 'İ', 'ĳ', 'ǆ', 'ẞ', 'ơ', 'ư', 'ạ', 'ấ', 'ﬁ',
  'α', 'ά', 'Α', 'β', 'б', 'Б', 'ё', 'е', 'я', 'あ', 'ア', 'か', 'が', 'カ', 'ー',
  '-', ' ', '.', '(', '!', '?', '$', '€', '%', '½', '…', '0', '1', '2', '9',
];

function* randomStrings(count, seed) {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < count; i++) {
    const length = 1 + Math.floor(next() * 5);
    yield Array.from({ length }, () => LETTERS[Math.floor(next() * LETTERS.length)]).join('');
  }
}

test('the collator orders as ICU does for the characters of its tables', () => {
  const options = [{}, { sensitivity: 'base' }, { sensitivity: 'accent' }, { sensitivity: 'case' },
    { numeric: true }, { ignorePunctuation: true }, { caseFirst: 'upper' }];
  let compared = 0;
  const differing = [];
  for (const locale of ['en', 'en-GB', 'de', 'fr', 'es', 'it', 'pt', 'nl', 'ja', 'zh']) {
    for (const option of options) {
      const ours = new Intl.Collator(locale, option);
      const icu = new NativeCollator(locale, option);
      const strings = [...randomStrings(2000, 7)];
      for (let i = 0; i + 1 < strings.length; i += 2) {
        const [x, y] = [strings[i], strings[i + 1]];
        compared++;
        if (Math.sign(ours.compare(x, y)) !== Math.sign(icu.compare(x, y))) differing.push([locale, option, x, y]);
      }
    }
  }
  // One weight per character cannot express every contraction (ŀ = l·): a few in 10,000.
  assert.ok(differing.length <= compared / 1000, `${differing.length} of ${compared}: ${JSON.stringify(differing.slice(0, 5))}`);
});

test('localeCompare and the formatters agree with ICU where the data is the same', () => {
  const d = new Date(Date.UTC(2024, 0, 15, 13, 5, 9));
  const nbsp = (s) => s.replace(/[\u202f\u00a0]/g, ' ');
  assert.deepEqual(['résumé', 'Resume', 'resume', 'b', 'a'].sort((x, y) => x.localeCompare(y)),
    ['a', 'b', 'resume', 'Resume', 'résumé']);
  assert.equal((1234567.891).toLocaleString('de'), '1.234.567,891');
  assert.equal(nbsp(d.toLocaleString('en-US', { timeZone: 'America/New_York' })), '1/15/2024, 8:05:09 AM');
  assert.equal(new Intl.DateTimeFormat('ja', { dateStyle: 'long' }).format(d), '2024年1月15日');
  assert.equal(new Intl.RelativeTimeFormat('fr', { numeric: 'auto' }).format(1, 'day'), 'demain');
  assert.equal(new Intl.PluralRules('en', { type: 'ordinal' }).select(23), 'few');
});
