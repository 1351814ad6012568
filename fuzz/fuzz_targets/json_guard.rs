//! The broker's JSON guard: the strict, capped parse every guest JSON text goes through
//! (a tool's arguments, a run's input) and the capped serialisation of every result.
//!
//! Input: a depth cap byte, a size cap selector byte, then the text. Checked against a
//! reference (serde_json alone, then the caps applied to the parsed value): the guard
//! accepts exactly the strict JSON texts within both caps, returns the same value, and
//! says which cap refused the rest; what it accepts serialises back within the same
//! caps, to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wasmbox::fuzzing::{parse_capped, serialize_capped};
use wasmbox::JsonError;

/// Nesting depth of a value as the guard counts it: a scalar 0, `[]` 1, `[[]]` 2.
fn depth(value: &Value) -> u32 {
    let mut deepest = 0;
    let mut stack = vec![(value, 0u32)];
    while let Some((value, level)) = stack.pop() {
        let children: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) => map.values().collect(),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        stack.extend(children.into_iter().map(|child| (child, level + 1)));
    }
    deepest
}

/// Equal, but floats only to within what serde_json's default (not exactly
/// round-tripping) float parser promises.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || ((x - y).abs() <= f64::EPSILON * 4.0 * x.abs().max(y.abs())),
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let [depth_byte, size_byte, text @ ..] = data else { return };
    // Limits::validate allows depths up to 128 (serde_json's own recursion limit); a
    // little beyond shows the guard stays sound when its cap is above the parser's.
    let max_depth = u32::from(*depth_byte % 140);
    let max_bytes = match size_byte % 4 {
        0 => u64::MAX,
        1 => text.len() as u64 / 2,
        2 => text.len() as u64,
        _ => u64::from(*size_byte),
    };
    let text = String::from_utf8_lossy(text);
    let reference: Option<Value> = serde_json::from_str(&text).ok();
    let fits = text.len() as u64 <= max_bytes;

    match parse_capped(&text, max_bytes, max_depth) {
        Ok(value) => {
            assert!(fits, "accepted {} bytes over a cap of {max_bytes}", text.len());
            assert!(depth(&value) <= max_depth, "accepted depth {} over a cap of {max_depth}", depth(&value));
            assert_eq!(reference.as_ref(), Some(&value), "the guard's value differs from serde_json's");

            let written = serialize_capped(&value, u64::MAX, max_depth).expect("an accepted value serialises");
            let reread: Value = serde_json::from_str(&written).expect("the guard wrote invalid JSON");
            assert!(same(&reread, &value), "{written} reads back as another value");
            if !written.is_empty() {
                let tight = serialize_capped(&value, written.len() as u64 - 1, max_depth);
                assert!(matches!(tight, Err(JsonError::TooLarge { .. })), "a byte under its size: {tight:?}");
            }
            if let Some(below) = depth(&value).checked_sub(1) {
                let shallow = serialize_capped(&value, u64::MAX, below);
                assert!(matches!(shallow, Err(JsonError::TooDeep { .. })), "a level under its depth: {shallow:?}");
            }
        }
        Err(JsonError::TooLarge { actual, cap, .. }) => {
            assert!(!fits && actual == text.len() && cap == max_bytes, "TooLarge for a text within its cap");
        }
        Err(JsonError::TooDeep { cap, .. }) => {
            assert!(fits && cap == max_depth, "TooDeep out of order");
            if let Some(value) = &reference {
                assert!(depth(value) > max_depth, "TooDeep for valid JSON of depth {} ≤ {max_depth}", depth(value));
            }
        }
        Err(JsonError::Malformed { .. }) => {
            assert!(fits, "Malformed before the size check");
            if let Some(value) = &reference {
                // serde_json's own recursion limit is the only way valid JSON is malformed here.
                panic!("refused valid JSON of depth {} as malformed (cap {max_depth})", depth(value));
            }
        }
        #[allow(unreachable_patterns)] // should JsonError grow a variant
        Err(other) => panic!("the parse answered {other:?}"),
    }
});
