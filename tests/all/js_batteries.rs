//! The JavaScript guest's batteries: `Intl` (NumberFormat, DateTimeFormat, PluralRules,
//! RelativeTimeFormat, Collator, getCanonicalLocales, Locale) and the toLocale*String
//! methods and `localeCompare` in the locales guests/js/intl/README.md lists, with IANA
//! time zones, and what a locale without data falls back to. The guest's engine has no
//! ICU: before guests/js/intl, `Intl` was undefined and toLocaleString ignored its locale.
//! The expected strings are what Node 20's ICU gives for the same calls, except the
//! narrow no-break space (U+202F) before AM/PM of FormatJS's newer CLDR, and where a
//! comment says otherwise.

use serde_json::{json, Value};
use wasmbox::{Sandbox, Tools};

use crate::support::{javascript, value};

async fn run_js(code: &str) -> Value {
    let outcome = Sandbox::new(javascript(), Tools::new()).run(code).await;
    value(&outcome)
}

/// Compares key by key, so that a failure names the call that differs.
fn assert_same(got: &Value, expected: &str) {
    let expected: Value = serde_json::from_str(expected).expect("the expected values are JSON");
    for (key, want) in expected.as_object().expect("an object") {
        assert_eq!(&got[key], want, "{key}");
    }
    assert_eq!(got.as_object().map(|o| o.len()), expected.as_object().map(|o| o.len()), "{got}");
}

/// Intl.NumberFormat (decimal, currency, percent, compact, unit, formatToParts) and Number and BigInt toLocaleString.
#[tokio::test]
async fn number_format_and_number_to_locale_string() {
    let got = run_js(
        r#"
const n = 1234567.891;
return {
  plain: n.toLocaleString(),
  de: n.toLocaleString('de'),
  fr: n.toLocaleString('fr-FR'),
  es: (1234.5).toLocaleString('es'),
  gbp: new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'GBP' }).format(1234.5),
  eur_de: new Intl.NumberFormat('de-DE', { style: 'currency', currency: 'EUR' }).format(1234.5),
  jpy: new Intl.NumberFormat('ja', { style: 'currency', currency: 'JPY' }).format(12345),
  percent_it: new Intl.NumberFormat('it', { style: 'percent', maximumFractionDigits: 1 }).format(0.256),
  compact: new Intl.NumberFormat('en', { notation: 'compact' }).format(1234567),
  unit_nl: new Intl.NumberFormat('nl', { style: 'unit', unit: 'kilometer-per-hour' }).format(50),
  zh: new Intl.NumberFormat('zh-CN').format(1e8),
  pt: (0.5).toLocaleString('pt-BR', { style: 'percent' }),
  bigint: (12345678901234567890n).toLocaleString('en'),
  parts: new Intl.NumberFormat('de').formatToParts(-1234.5).map((p) => p.type).join(' '),
};
"#,
    )
    .await;
    assert_same(
        &got,
        r#"{
        "plain": "1,234,567.891",
        "de": "1.234.567,891",
        "fr": "1\u202f234\u202f567,891",
        "es": "1234,5",
        "gbp": "£1,234.50",
        "eur_de": "1.234,50\u00a0€",
        "jpy": "￥12,345",
        "percent_it": "25,6%",
        "compact": "1.2M",
        "unit_nl": "50 km/u",
        "zh": "100,000,000",
        "pt": "50%",
        "bigint": "12,345,678,901,234,567,890",
        "parts": "minusSign integer group integer decimal fraction"
    }"#,
    );
}

/// Intl.DateTimeFormat and Date's toLocale*String: styles, fields, the default time zone (UTC), named IANA zones with daylight saving time, and an unknown zone.
#[tokio::test]
async fn date_time_format_with_time_zones() {
    let got = run_js(
        r#"
const d = new Date(Date.UTC(2024, 0, 15, 13, 5, 9));
const summer = new Date(Date.UTC(2024, 6, 15, 12, 0));
const at = (zone, date = d) => new Intl.DateTimeFormat('en-US', { timeZone: zone, hour: 'numeric', minute: '2-digit', timeZoneName: 'short' }).format(date);
let invalid;
try { new Intl.DateTimeFormat('en', { timeZone: 'Mars/Olympus' }); } catch (e) { invalid = e.name; }
return {
  plain: d.toLocaleString(),
  date_de: d.toLocaleDateString('de'),
  date_gb: d.toLocaleDateString('en-GB'),
  time_fr: d.toLocaleTimeString('fr'),
  full_fr: new Intl.DateTimeFormat('fr', { dateStyle: 'full' }).format(d),
  long_ja: new Intl.DateTimeFormat('ja', { dateStyle: 'long' }).format(d),
  medium_es: new Intl.DateTimeFormat('es', { dateStyle: 'medium', timeStyle: 'short' }).format(d),
  month_it: d.toLocaleDateString('it', { month: 'long', year: 'numeric' }),
  weekday_nl: d.toLocaleDateString('nl', { weekday: 'long' }),
  zh: new Intl.DateTimeFormat('zh', { year: 'numeric', month: 'long', day: 'numeric' }).format(d),
  utc: at('UTC'),
  new_york: at('America/New_York'),
  new_york_summer: at('America/New_York', summer),
  paris: d.toLocaleString('fr', { timeZone: 'Europe/Paris' }),
  tokyo: at('Asia/Tokyo'),
  kolkata: at('Asia/Kolkata'),
  default_zone: new Intl.DateTimeFormat().resolvedOptions().timeZone,
  invalid,
};
"#,
    )
    .await;
    assert_same(
        &got,
        r#"{
        "plain": "1/15/2024, 1:05:09\u202fPM",
        "date_de": "15.1.2024",
        "date_gb": "15/01/2024",
        "time_fr": "13:05:09",
        "full_fr": "lundi 15 janvier 2024",
        "long_ja": "2024年1月15日",
        "medium_es": "15 ene 2024, 13:05",
        "month_it": "gennaio 2024",
        "weekday_nl": "maandag",
        "zh": "2024年1月15日",
        "utc": "1:05\u202fPM UTC",
        "new_york": "8:05\u202fAM EST",
        "new_york_summer": "8:00\u202fAM EDT",
        "paris": "15/01/2024 14:05:09",
        "tokyo": "10:05\u202fPM GMT+9",
        "kolkata": "6:35\u202fPM GMT+5:30",
        "default_zone": "UTC",
        "invalid": "RangeError"
    }"#,
    );
}

/// Intl.PluralRules (cardinal, ordinal), Intl.RelativeTimeFormat, Array and typed array toLocaleString (locales passed on to the elements), getCanonicalLocales, Locale.
#[tokio::test]
async fn plural_rules_relative_time_and_arrays() {
    let got = run_js(
        r#"
const pr = new Intl.PluralRules('en');
const rtf = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
const d = new Date(Date.UTC(2024, 0, 15, 13, 5));
return {
  plural_en: [0, 1, 2, 1.5].map((n) => pr.select(n)),
  ordinal_en: [1, 2, 3, 4, 11, 22].map((n) => new Intl.PluralRules('en', { type: 'ordinal' }).select(n)),
  plural_fr: [0, 1.5, 2].map((n) => new Intl.PluralRules('fr').select(n)),
  plural_ja: new Intl.PluralRules('ja').select(1),
  relative_en: [rtf.format(-1, 'day'), rtf.format(2, 'week'), new Intl.RelativeTimeFormat('en').format(-3, 'month')],
  relative_de: new Intl.RelativeTimeFormat('de').format(3, 'hour'),
  relative_es: new Intl.RelativeTimeFormat('es', { numeric: 'auto' }).format(-1, 'day'),
  relative_ja: new Intl.RelativeTimeFormat('ja').format(5, 'minute'),
  array_de: [1234.5, d, null, 'x'].toLocaleString('de'),
  typed: new Float64Array([1234.5, 0.25]).toLocaleString('fr'),
  canonical: Intl.getCanonicalLocales(['EN-us', 'de-de']),
  locale: new Intl.Locale('en', { region: 'GB' }).toString(),
  tag: Object.prototype.toString.call(Intl),
};
"#,
    )
    .await;
    assert_same(
        &got,
        r#"{
        "plural_en": ["other", "one", "other", "other"],
        "ordinal_en": ["one", "two", "few", "other", "other", "two"],
        "plural_fr": ["one", "one", "other"],
        "plural_ja": "other",
        "relative_en": ["yesterday", "in 2 weeks", "3 months ago"],
        "relative_de": "in 3 Stunden",
        "relative_es": "ayer",
        "relative_ja": "5 分後",
        "array_de": "1.234,5,15.1.2024, 13:05:00,,x",
        "typed": "1\u202f234,5,0,25",
        "canonical": ["en-US", "de-DE"],
        "locale": "en-GB",
        "tag": "[object Intl]"
    }"#,
    );
}

/// Intl.Collator and String.prototype.localeCompare: sensitivities, numeric (option and -u-kn), Spanish ñ, ß = ss, ignorePunctuation, caseFirst. Kana: ICU orders カ before か at the third level in Japanese; ours puts hiragana first, as in the root order.
#[tokio::test]
async fn collator_and_locale_compare() {
    let got = run_js(
        r#"
const words = ['b', 'a', 'Z', 'ä', 'z', 'A', 'résumé', 'resume', 'Resume'];
const numeric = new Intl.Collator('en', { numeric: true });
return {
  sorted: [...words].sort((x, y) => x.localeCompare(y)),
  collator_sorted: [...words].sort(new Intl.Collator('de').compare),
  base: ['a', 'ä', 'A'].map((c) => new Intl.Collator('de', { sensitivity: 'base' }).compare('a', c)),
  accent: [new Intl.Collator('fr', { sensitivity: 'accent' }).compare('e', 'é'), new Intl.Collator('fr', { sensitivity: 'accent' }).compare('e', 'E')],
  case: [new Intl.Collator('en', { sensitivity: 'case' }).compare('a', 'á'), new Intl.Collator('en', { sensitivity: 'case' }).compare('a', 'A')],
  numeric: ['item10', 'item2', 'item1', 'item02'].sort(numeric.compare),
  plain_digits: ['item10', 'item2', 'item1'].sort(new Intl.Collator('en').compare),
  kn_extension: ['10', '9'].sort(new Intl.Collator('en-u-kn').compare),
  spanish: ['o', 'ñ', 'n', 'nz'].sort(new Intl.Collator('es').compare),
  english_n: ['o', 'ñ', 'n', 'nz'].sort(new Intl.Collator('en').compare),
  eszett: new Intl.Collator('de', { sensitivity: 'base' }).compare('Straße', 'STRASSE'),
  punctuation: new Intl.Collator('en', { ignorePunctuation: true }).compare('co-op', 'coop'),
  upper_first: ['a', 'A', 'b', 'B'].sort(new Intl.Collator('en', { caseFirst: 'upper' }).compare),
  kana: ['カ', 'あ', 'か', 'ア'].sort(new Intl.Collator('ja').compare),
  resolved: new Intl.Collator('de-AT', { numeric: true }).resolvedOptions(),
  supported: Intl.Collator.supportedLocalesOf(['de-CH', 'ru', 'es']),
};
"#,
    )
    .await;
    assert_same(
        &got,
        r#"{
        "sorted": ["a", "A", "ä", "b", "resume", "Resume", "résumé", "z", "Z"],
        "collator_sorted": ["a", "A", "ä", "b", "resume", "Resume", "résumé", "z", "Z"],
        "base": [0, 0, 0],
        "accent": [-1, 0],
        "case": [0, -1],
        "numeric": ["item1", "item2", "item02", "item10"],
        "plain_digits": ["item1", "item10", "item2"],
        "kn_extension": ["9", "10"],
        "spanish": ["n", "nz", "ñ", "o"],
        "english_n": ["n", "ñ", "nz", "o"],
        "eszett": 0,
        "punctuation": 0,
        "upper_first": ["A", "a", "B", "b"],
        "kana": ["あ", "ア", "か", "カ"],
        "resolved": {"caseFirst": "false", "collation": "default", "ignorePunctuation": false, "locale": "de", "numeric": true, "sensitivity": "variant", "usage": "sort"},
        "supported": ["de-CH", "es"]
    }"#,
    );
}

/// A locale without data (ru, ko, sw) resolves to the default, en; a region without data to its language (de-CH to de). Node, with all of ICU, gives the locale itself here: these are the guest's documented fallbacks.
#[tokio::test]
async fn a_locale_without_data_falls_back_to_english() {
    let got = run_js(
        r#"
const d = new Date(Date.UTC(2024, 0, 15, 13, 5));
return {
  number: (1234.5).toLocaleString('ru'),
  resolved: new Intl.NumberFormat('ru').resolvedOptions().locale,
  date: d.toLocaleDateString('ko'),
  list: new Intl.DateTimeFormat(['sw', 'it']).resolvedOptions().locale,
  region: new Intl.NumberFormat('de-CH').resolvedOptions().locale,
  supported: Intl.NumberFormat.supportedLocalesOf(['ru', 'de-AT', 'pt-PT', 'en-AU']),
  collator: new Intl.Collator('ru').resolvedOptions().locale,
  plural: new Intl.PluralRules('ru').resolvedOptions().locale,
};
"#,
    )
    .await;
    assert_same(
        &got,
        r#"{
        "number": "1,234.5",
        "resolved": "en",
        "date": "1/15/2024",
        "list": "it",
        "region": "de",
        "supported": ["de-AT", "pt-PT", "en-AU"],
        "collator": "en",
        "plural": "en"
    }"#,
    );
}

/// `Intl` and the formatting methods are installed in each run, from the snapshot: what
/// a run replaces is back in the next run, and code may still assign `Intl` itself.
#[tokio::test]
async fn intl_is_installed_in_each_run_on_first_use() {
    let first =
        run_js("Intl.NumberFormat = null; Number.prototype.toLocaleString = () => 'x'; return (5).toLocaleString()")
            .await;
    assert_eq!(first, json!("x"));
    let second = run_js("return [typeof Intl.NumberFormat, (1234.5).toLocaleString('de')]").await;
    assert_eq!(second, json!(["function", "1.234,5"]));
    let assigned = run_js("globalThis.Intl = 7; return Intl").await;
    assert_eq!(assigned, json!(7));
}

/// Date, Number and BigInt's toLocale*String, called again and again (their formatters
/// are kept for the run): each call formats its own value with its own arguments, an
/// invalid date is "Invalid Date", a receiver that is not a Date and a timeStyle given to
/// toLocaleDateString are TypeErrors.
#[tokio::test]
async fn to_locale_string_calls_repeated_with_other_arguments() {
    let got = run_js(
        r#"
const d = new Date(Date.UTC(2024, 0, 15, 13, 5));
const a = [d.toLocaleString(), (5).toLocaleString(), d.toLocaleDateString(), d.toLocaleTimeString(), d.toLocaleString('de', {timeZone: 'Asia/Tokyo'}), d.toLocaleString('de'), (5n).toLocaleString('de'), (1234.5).toLocaleString('de')];
let err; try { Date.prototype.toLocaleString.call({}) } catch (e) { err = e.name }
let err2; try { d.toLocaleDateString('en', {timeStyle: 'short'}) } catch (e) { err2 = e.name }
return [...a, new Date(NaN).toLocaleString(), err, err2, d.toLocaleString('en', {timeZone: 'Asia/Tokyo', timeZoneName: 'short'})];
"#,
    )
    .await;
    let expected: Value = serde_json::from_str(
        r#"[
        "1/15/2024, 1:05:00\u202fPM",
        "5",
        "1/15/2024",
        "1:05:00\u202fPM",
        "15.1.2024, 22:05:00",
        "15.1.2024, 13:05:00",
        "5",
        "1.234,5",
        "Invalid Date",
        "TypeError",
        "TypeError",
        "1/15/2024, 10:05:00\u202fPM GMT+9"
    ]"#,
    )
    .expect("JSON");
    assert_eq!(got, expected);
}
